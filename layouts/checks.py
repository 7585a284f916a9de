"""Checks of a drawn mesh against its topology: optical netlist and heater wiring.

Used by the tests and available to a layout engineer before tape-out. The optical
check reads gdsfactory's own extracted netlist; the electrical check merges the metal
of the flattened layout with klayout, so it sees exactly what a mask shop would.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from layouts.electrical_lvs import optical_netlist
from layouts.errors import require_gdsfactory
from layouts.names import instance_name
from layouts.pdk import layer
from photonics.topology import PORT_LABELS, Mesh

TBU_PORTS = set(PORT_LABELS)
MAX_CHAIN_INSTANCES = 100  # a link is a handful of instances; more means a loop in a broken netlist


@dataclass(frozen=True)
class Chain:
    """A waveguide path of the extracted netlist between two TBU ports (or a TBU port and a
    mesh port): its ends (``"inst,port"`` or ``"port:<n>"``) and its drawn length (µm, the
    sum of the ``info["length"]`` of every passive instance along it).
    """

    start: str
    end: str
    length_um: float


def netlist_chains(component: Any, netlist: dict[str, Any] | None = None) -> list[Chain]:
    """Every path that leaves a TBU port in gdsfactory's own netlist extraction (of the
    optical ports: :func:`layouts.electrical_lvs.optical_netlist`), followed through
    chains of two-port passive instances (links, bends, straights, S-bends, couplers) to
    the next TBU port or exported mesh port.

    A path between two TBUs is listed once from each end. A port that leads nowhere
    gives ``end == ""``. ``netlist``: ``optical_netlist(component)`` when the caller has
    it already (the extraction is the cost: ~3 s of CPU on SmartLight), else extracted here.
    """
    netlist = optical_netlist(component) if netlist is None else netlist
    peer: dict[str, str] = {}
    for net in netlist["nets"]:
        peer[net["p1"]] = net["p2"]
        peer[net["p2"]] = net["p1"]
    exported = {v: k for k, v in netlist["ports"].items()}
    instances = netlist["instances"]

    def other_end(inst_port: str) -> str:
        inst, port = inst_port.split(",")
        return f"{inst},{'o2' if port == 'o1' else 'o1'}"

    def walk(start: str) -> Chain:
        here, length = peer.get(start), 0.0
        for _ in range(MAX_CHAIN_INSTANCES):
            if here is None:
                break
            inst, port = here.split(",")
            if inst.startswith("tbu_") and port in TBU_PORTS:
                return Chain(start, here, length)
            length += float(instances[inst].get("info", {}).get("length", 0.0))
            far = other_end(here)
            if far in exported:
                return Chain(start, exported[far], length)
            here = peer.get(far)
        return Chain(start, "", length)

    return [walk(f"{inst},{label}") for inst in netlist["instances"] if inst.startswith("tbu_")
            for label in PORT_LABELS]


def netlist_connectivity(component: Any, netlist: dict[str, Any] | None = None,
                         ) -> tuple[set[frozenset[str]], dict[str, str]]:
    """TBU-to-TBU links and mesh-port-to-TBU-port map from ``component.get_netlist()``.

    Built on :func:`netlist_chains` (``netlist`` as there), so the result does not depend
    on how a link is drawn. Returns ``({frozenset({"tbu_0_0_0,b0", ...}), ...},
    {"port:0": "tbu_...,a1"})``.
    """
    links, ports = set(), {}
    for chain in netlist_chains(component, netlist):
        if chain.end.startswith("tbu_"):
            links.add(frozenset((chain.start, chain.end)))
        elif chain.end:
            ports[chain.end] = chain.start
    return links, ports


def expected_connectivity(mesh: Mesh) -> tuple[set[frozenset[str]], dict[str, str]]:
    """What :func:`netlist_connectivity` must return for ``mesh``."""

    def name(g: int) -> str:
        return f"{instance_name(mesh.tbu_names[g // 4])},{PORT_LABELS[g % 4]}"

    links = {frozenset((name(int(a)), name(int(b)))) for a, b in mesh.links}
    ports = {n: name(int(g)) for n, g in zip(mesh.port_names, mesh.port_tbu_ports, strict=True)}
    return links, ports


def wiring_report(component: Any, layer_map: dict[str, str] | None = None) -> dict[str, Any]:
    """Which heater via each bond pad reaches through the merged metal (flattened layout).

    The signal metal and ground metal are the active PDK's ``metal_routing`` and
    ``metal_ground`` layers (:mod:`layouts.pdk`, ``layer_map`` as given to the mesh cell).

    Returns ``{"pad_to_vias": {channel: [channels of signal vias on that net]},
    "shorts": [...], "ground_ok": bool}``; a correct layout maps every channel to itself.
    """
    import klayout.db as kdb

    m3 = _merged(component, layer("metal_routing", layer_map))
    m2 = _merged(component, layer("metal_ground", layer_map))
    vias: dict[tuple[str, int], tuple[float, float]] = {}
    gnd_vias: list[tuple[float, float]] = []
    for inst in component.insts:
        if not inst.name.startswith("tbu_"):
            continue
        for arm_k, arm in enumerate(("top", "bot")):
            vias[(inst.name, arm_k)] = (inst.ports[f"{arm}_sig"].x, inst.ports[f"{arm}_sig"].y)
            gnd_vias.append((inst.ports[f"{arm}_gnd"].x, inst.ports[f"{arm}_gnd"].y))
    pads = {int(p.name.split(":")[1]): (p.x, p.y) for p in component.ports if p.name.startswith("heater:")}

    def net_of(region: Any, xy: tuple[float, float]) -> int:
        point = kdb.DPoint(*xy).to_itype(component.kcl.dbu)
        for i, poly in enumerate(region.each()):
            if poly.bbox().contains(point) and poly.inside(point):
                return i
        return -1

    via_net = {key: net_of(m3, xy) for key, xy in vias.items()}
    pad_net = {ch: net_of(m3, xy) for ch, xy in pads.items()}
    by_net: dict[int, list[Any]] = {}
    for key, n in via_net.items():
        by_net.setdefault(n, []).append(key)
    pad_to_vias = {ch: sorted(by_net.get(n, [])) if n >= 0 else [] for ch, n in pad_net.items()}
    gnd_nets = {net_of(m2, xy) for xy in gnd_vias}
    sig_m2 = {net_of(m2, xy) for xy in vias.values()}
    return {
        "pad_to_vias": pad_to_vias,
        "ground_ok": len(gnd_nets) == 1 and -1 not in gnd_nets and not (gnd_nets & sig_m2),
    }


def _merged(component: Any, gds_layer: Any) -> Any:
    """The merged shapes of ``gds_layer`` in ``component`` and all its sub-cells."""
    import klayout.db as kdb

    gf = require_gdsfactory()
    return kdb.Region(component.begin_shapes_rec(gf.get_layer(gds_layer))).merged()


def overlapping_paths(component: Any, exclude: tuple[str, ...] = ("tbu_", "link_")) -> list[tuple[str, str]]:
    """Pairs of waveguide instances whose cores overlap (a crossing the design did not mean).

    Every instance with waveguide shapes is compared with every other (touching at a port
    is not an overlap: abutting shapes share no area). Instances whose names start with
    ``exclude`` are merged into one region (the mesh core) and compared as one.
    """
    import itertools

    import klayout.db as kdb

    gf = require_gdsfactory()
    wg = gf.get_layer(layer("waveguide"))
    regions: list[tuple[str, Any]] = []
    core = kdb.Region()
    for inst in component.insts:
        region = kdb.Region(inst.cell.begin_shapes_rec(wg)).transformed(inst.trans)
        if region.is_empty():
            continue
        if inst.name.startswith(exclude):
            core += region
        else:
            regions.append((inst.name, region))
    regions.append(("mesh core", core.merged()))
    if not _any_overlap(region for _, region in regions):
        return []
    return [(a, b) for (a, ra), (b, rb) in itertools.combinations(regions, 2) if (ra & rb).area() > 0]


def _any_overlap(regions: Iterable[Any]) -> bool:
    """True when two of ``regions`` (klayout Regions) share area.

    Their union is smaller than the sum of their areas exactly then (areas in dbu^2,
    integers: exact). One merge of every shape instead of a region AND per pair (~2 ms
    each: ~0.7 s of CPU for hex:2x2's 365 pairs of paths whose boxes touch, issue 29); the
    pairs are looked for only when there is an overlap to name.
    """
    import klayout.db as kdb

    union, total = kdb.Region(), 0
    for region in regions:
        union += region
        total += region.area()
    return union.area() < total
