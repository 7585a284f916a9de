"""LVS of the heater wiring: gdsfactory's electrical netlist against the driver's channel map.

:func:`electrical_nets` extracts the layout's electrical netlist with gdsfactory
(``component.get_netlist`` with :class:`MetalPortMatcher`: two metal ports at the same
place are joined) and merges it into nets: a wire straight, a ``wire_corner``, a bond pad,
a ground-grid junction or a via stack is one piece of metal, so all its ports are one
node; a TBU is not (the signal and ground terminals of each heater are different nodes).

:func:`heater_lvs` then checks every heater against the driver's channel map, the map
:class:`instruments.controller.MeshController` drives by: heater ``(tbu i, arm)`` is
channel ``2*i + (arm == "bot")`` (:meth:`photonics.topology.Mesh.heater_channel`), and the
pad map the layout writes says which bond pad carries channel ``ch``. The heater's signal
net must hold exactly that pad and no other pad or heater; every heater's ground terminal
must sit on the one return net, which holds every ground pad and no signal pad.

What it catches that the optical LVS (:mod:`layouts.lvs`) cannot: a heater wired to
another channel's pad, a wire missing or open, two heaters on one pad, a heater return
left floating, a pad map that disagrees with the drawn wiring.

Example:
    >>> from layouts.mesh_cell import mesh_cell                          # doctest: +SKIP
    >>> heater_lvs(mesh_cell("hex:1x2"), "hex:1x2").ok                   # doctest: +SKIP
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from layouts.errors import require_gdsfactory
from layouts.names import instance_name
from photonics.topology import Mesh, mesh_from_spec

METAL_PORT_TYPES = frozenset({"electrical", "pad"})  # gdsfactory's port types of metal (pads: "pad")
PORT_TOLERANCE_DBU = 2  # ports within 2 nm are one junction (gdsfactory's own matcher tolerance)
#: cells that are one piece of metal: every port of an instance of them is one node
CONDUCTOR_PREFIXES = ("wire_straight", "wire_corner", "wire_junction", "pad", "via_stack")
ARMS = ("top", "bot")
PAD_PREFIXES = ("pad_ch", "pad_gnd")  # bond pad instances (layouts.draw.pads)


class MetalPortMatcher:
    """gdsfactory port matcher for metal: two metal ports at the same place are connected.

    Width and orientation are not compared: a 4 µm wire ending on a 60 µm pad edge, or a
    rail segment meeting a stub from the side, is a connection. Optical ports never match.
    """

    def __call__(self, port1: Any, port2: Any) -> bool:
        """True when both ports are metal and within :data:`PORT_TOLERANCE_DBU`."""
        if port1.port_type not in METAL_PORT_TYPES or port2.port_type not in METAL_PORT_TYPES:
            return False
        (x1, y1), (x2, y2) = port1.to_itype().center, port2.to_itype().center
        return abs(x2 - x1) < PORT_TOLERANCE_DBU and abs(y2 - y1) < PORT_TOLERANCE_DBU


class OpticalPortMatcher:
    """gdsfactory's default matcher restricted to optical ports (the optical netlist ignores metal)."""

    def __call__(self, port1: Any, port2: Any) -> bool:
        """Match as gdsfactory's SmartPortMatcher does, for non-metal ports; metal ports never match."""
        from gdsfactory.get_netlist import SmartPortMatcher

        if port1.port_type in METAL_PORT_TYPES or port2.port_type in METAL_PORT_TYPES:
            return False
        return bool(SmartPortMatcher()(port1, port2))


class LinearSmartNamer:
    """gdsfactory's ``SmartNamer`` (9.45), the same names in linear time.

    SmartNamer names the n-th automatically named instance of a cell ``wire_straight<n>``
    by trying ``wire_straight2``, ``wire_straight3``, ... from 2 each time: quadratic in the instances
    of one cell (SmartLight draws 1,638 wire pieces), ~0.5 s of each ~1.3 s netlist
    extraction of SmartLight (issue 29). Its names only ever get taken, never freed, so the
    search for a base name can start where the last one for that base name stopped: the
    names below are taken. Everything else is SmartNamer's own code (its helpers); the
    netlists are equal (tests/layouts/test_layout_netlist.py compares them).
    """

    def __init__(self) -> None:
        from gdsfactory.get_netlist import function_namer

        self._component_namer = function_namer
        self._instance_names: dict[str | None, str] = {}
        self._rev_instance_names: dict[str, str | None] = {}
        self._next_index: dict[str, int] = {}  # base name -> the first index that may be free

    def __call__(self, inst: Any) -> str:
        """SmartNamer's name of ``inst``: its own name, or its cell's name numbered when automatic."""
        from gdsfactory.get_netlist import _clean_instname, _instcell, _instname, _short_component_name

        inst_name = inst.name or _instname(inst)  # _instname hashes the placement for unnamed ones only
        if inst_name in self._instance_names:
            return self._instance_names[inst_name]
        compname = _short_component_name(_instcell(inst), self._component_namer)
        name = self._numbered(inst_name, compname) if inst_name.startswith(f"{compname}_") else inst_name
        cleaned = self._instance_names[inst_name] = _clean_instname(name)
        self._rev_instance_names[cleaned] = inst_name
        return cleaned

    def _numbered(self, inst_name: str, compname: str) -> str:
        """The name gdsfactory's ``_instname_from_compname`` gives: ``compname`` while free, else
        the first free ``<base><index>`` from 2 (``base``: ``compname`` less trailing digits, or
        ``compname_`` when it ends in one).
        """
        if compname not in self._rev_instance_names:
            name = compname
        else:
            basename = re.sub("[0-9]*$", "", compname)
            if basename != compname:
                basename = f"{compname}_"
            index = self._next_index.get(basename, 2)
            while f"{basename}{index}" in self._rev_instance_names:
                index += 1
            self._next_index[basename] = index + 1
            name = f"{basename}{index}"
        self._instance_names[inst_name] = name
        self._rev_instance_names[name] = inst_name
        return name


class PadKeepingNamer:
    """gdsfactory's SmartNamer, except that bond pads keep the names the layout gave them.

    SmartNamer takes ``pad_ch5`` for an automatic name (it starts with the cell name
    ``pad``) and renumbers it; the LVS needs the pad map's names.
    """

    def __init__(self) -> None:
        self._smart = LinearSmartNamer()

    def __call__(self, inst: Any) -> str:
        """The instance's own name for a bond pad, SmartNamer's otherwise."""
        name = inst.name or ""
        return name if name.startswith(PAD_PREFIXES) else self._smart(inst)


def optical_netlist(component: Any) -> dict[str, Any]:
    """``component.get_netlist()`` of the optical ports only (metal: :func:`electrical_nets`)."""
    return component.get_netlist(on_dangling_port="ignore", port_matcher=OpticalPortMatcher(),
                                 instance_namer=LinearSmartNamer())


def electrical_nets(component: Any) -> list[frozenset[str]]:
    """The metal nets of ``component`` from gdsfactory's netlist extraction.

    Returns the nets as sets of ``"instance,port"`` names (every port of every instance
    that touches metal, including the TBUs' heater terminals ``top_sig``, ``bot_gnd``, ...).
    """
    require_gdsfactory()
    netlist = component.get_netlist(port_matcher=MetalPortMatcher(), instance_namer=PadKeepingNamer(),
                                    on_multi_connect="ignore", on_dangling_port="ignore")
    parent: dict[str, str] = {}

    def find(a: str) -> str:
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for net in netlist["nets"]:
        union(net["p1"], net["p2"])
    metal_ports: dict[str, list[str]] = {}
    for name in parent:
        inst = name.split(",", 1)[0]
        metal_ports.setdefault(inst, []).append(name)
    for inst, info in netlist["instances"].items():
        if str(info.get("component", "")).startswith(CONDUCTOR_PREFIXES):
            ports = metal_ports.get(inst, [])
            for a in ports[1:]:
                union(ports[0], a)
    groups: dict[str, set[str]] = {}
    for name in parent:
        groups.setdefault(find(name), set()).add(name)
    return [frozenset(g) for g in groups.values()]


@dataclass(frozen=True)
class HeaterLvsReport:
    """Result of :func:`heater_lvs` (all lists empty and ``ok`` when the wiring is right).

    Attributes:
        ok: every check passed.
        n_heaters: heaters checked.
        wrong_pad: ``"tbu:r.c.s/arm: channel ch wants pad_chX, reaches [...]"`` per heater whose
            signal net does not hold exactly its channel's pad.
        shared_pads: signal pads reached by more than one heater.
        pad_map_mismatch: pad-map rows whose tbu/arm is not the heater the driver drives on
            that channel.
        ground_faults: what is wrong with the return net (empty when right).
    """

    ok: bool
    n_heaters: int
    wrong_pad: tuple[str, ...]
    shared_pads: tuple[str, ...]
    pad_map_mismatch: tuple[str, ...]
    ground_faults: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for ``--json`` and logs)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _pads_on(net: frozenset[str]) -> set[str]:
    return {name.split(",")[0] for name in net if name.startswith("pad_")}


def heater_lvs(component: Any, mesh: Mesh | str) -> HeaterLvsReport:
    """Check the drawn heater wiring against the driver's channel map and the pad map (see module doc).

    Args:
        component: the gdsfactory Component of :func:`layouts.mesh_cell.mesh_cell`; its
            ``info["pads"]`` is the pad map it writes.
        mesh: the model mesh (or its spec) whose heaters the driver drives.
    """
    model = mesh_from_spec(mesh) if isinstance(mesh, str) else mesh
    nets = electrical_nets(component)
    net_of = {name: net for net in nets for name in net}
    rows = list(component.info["pads"])
    pad_of_channel = {r["channel"]: r["pad"] for r in rows if r["channel"] is not None}
    ground_pads = {r["pad"] for r in rows if r["channel"] is None}
    wrong, mismatch, reached_by = [], [], {}
    gnd_nets = set()
    for i, tbu in enumerate(model.tbu_names):
        inst = instance_name(tbu)
        for arm in ARMS:
            ch = model.heater_channel(i, arm)
            row = next((r for r in rows if r["channel"] == ch), None)
            if row is None or (row["tbu"], row["arm"]) != (tbu, arm):
                mismatch.append(f"channel {ch}: the pad map says {row and (row['tbu'], row['arm'])}, "
                                f"the driver drives {tbu}/{arm}")
            want = pad_of_channel.get(ch)
            net = net_of.get(f"{inst},{arm}_sig", frozenset())
            pads = _pads_on(net)
            others = {n.split(",")[0] for n in net if n.endswith("_sig") and n != f"{inst},{arm}_sig"}
            for pad in pads:
                reached_by.setdefault(pad, []).append(f"{tbu}/{arm}")
            if pads != {want} or others:
                wrong.append(f"{tbu}/{arm}: channel {ch} wants {want}, reaches {sorted(pads) or 'no pad'}"
                             + (f" and heaters of {sorted(others)}" if others else ""))
            gnd_nets.add(net_of.get(f"{inst},{arm}_gnd", frozenset({f"{inst},{arm}_gnd"})))
    shared = [f"{pad}: {', '.join(h)}" for pad, h in sorted(reached_by.items()) if len(h) > 1]
    faults = []
    if len(gnd_nets) != 1:
        faults.append(f"the heater returns sit on {len(gnd_nets)} nets, not one")
    for net in gnd_nets:
        if _pads_on(net) != ground_pads:
            faults.append(f"a return net reaches pads {sorted(_pads_on(net))}, not the ground pads "
                          f"{sorted(ground_pads)}")
        if any(n.endswith("_sig") for n in net):
            faults.append("a return net touches a heater's signal terminal")
    return HeaterLvsReport(
        ok=not (wrong or shared or mismatch or faults), n_heaters=2 * model.n_tbus,
        wrong_pad=tuple(wrong), shared_pads=tuple(shared), pad_map_mismatch=tuple(mismatch),
        ground_faults=tuple(faults))
