"""The simulated bench: one shared :class:`Chip` behind every simulated instrument.

:class:`SimulatedBench` starts the heater driver on a pty (and as ``lumionsim://``),
the laser (with its fiber switch) and the power meter as SCPI servers on loopback, and
the transceivers as EEPROM maps (each also behind an ASCII I2C bridge on a pty, so
another process can read them). Close it (or use ``with``) to stop everything.

Default wiring for a mesh with P ports (override in the bench config):

* fiber switch output ``k`` (1-based) feeds mesh port ``k - 1``;
* power meter head (slot ``p // 4 + 1``, channel ``p % 4 + 1``) sits at mesh port ``p``;
* with P >= 16: ``qsfp0`` (SFF-8636) TX lanes at ports 0-3, RX at 4-7, and ``qsfp1``
  (CMIS, 4 of 8 lanes wired) TX at P/2..P/2+3, RX at P/2+4..P/2+7.

:func:`fabric_transceivers` wires one module per accelerator of a fabric instead (what a
rack has: each accelerator's own pluggable, its lanes on the accelerator's ports), and
:meth:`SimulatedBench.kill_transmitter` stops a lane's laser as a dead accelerator does.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from instruments.sim.chip import Chip
from instruments.sim.heater_device import HeaterDeviceSim, PtyLink, register, unregister
from instruments.sim.link_clock import SimulatedClock, WallClock
from instruments.sim.scpi_devices import ScpiServer, SimLaser, SimPowerMeter
from instruments.sim.transceivers import BridgeDeviceSim, SimI2CBus, SimTransceiver, TransceiverBench
from photonics.topology import Mesh

if TYPE_CHECKING:  # only annotated: the simulators do not need the fabric package loaded
    from photonics.fabric import Fabric

_names = itertools.count()
SFF8636_LANES, CMIS_LANES = 4, 8  # lanes per module: QSFP28 (SFF-8636) and QSFP-DD (CMIS)


def default_switch(mesh: Mesh) -> dict[int, int]:
    """Switch output -> mesh port."""
    return {p + 1: p for p in range(mesh.n_ports)}


def default_heads(mesh: Mesh) -> dict[tuple[int, int], int]:
    """(slot, channel) -> mesh port."""
    return {(p // 4 + 1, p % 4 + 1): p for p in range(mesh.n_ports)}


def default_transceivers(mesh: Mesh) -> list[dict[str, Any]]:
    """Two modules facing each other across the mesh (none on meshes under 16 ports)."""
    P = mesh.n_ports
    if P < 16:
        return []
    h = P // 2
    return [
        {"name": "qsfp0", "spec": "sff8636", "tx_ports": [0, 1, 2, 3], "rx_ports": [4, 5, 6, 7]},
        {"name": "qsfp1", "spec": "cmis", "tx_ports": [h, h + 1, h + 2, h + 3],
         "rx_ports": [h + 4, h + 5, h + 6, h + 7]},
    ]


def fabric_transceivers(fabric: Fabric, address: str = "sim") -> list[dict[str, Any]]:
    """``[[transceivers]]`` tables with one module per accelerator, named after it.

    Lane k's TX sits on the accelerator's k-th TX port and its RX on its k-th RX port. Up
    to 4 lanes a side is a QSFP28 (SFF-8636), up to 8 a QSFP-DD (CMIS); more is refused.
    """
    out = []
    for acc in fabric.accelerators:
        lanes = max(len(acc.tx), len(acc.rx))
        if lanes > CMIS_LANES:
            raise ValueError(f"{acc.name} has {lanes} lanes; one simulated module carries at most "
                             f"{CMIS_LANES}: split it into several accelerators' modules")
        out.append({"name": acc.name, "spec": "sff8636" if lanes <= SFF8636_LANES else "cmis",
                    "address": address, "tx_ports": [fabric.mesh.port_names[p] for p in acc.tx],
                    "rx_ports": [fabric.mesh.port_names[p] for p in acc.rx]})
    return out


def _model(idn: str) -> str:
    """The model field of an ``*IDN?`` reply (what a bench config's ``idn`` key checks)."""
    return idn.split(",")[1]


class SimulatedBench:
    """Every simulated instrument around one chip.

    The simulators are served over wires and their clients wait by sleeping, so the chip
    lives on the wall clock here (:meth:`~instruments.sim.chip.Chip.follow_wall_clock`),
    unlike on the in-process :class:`~instruments.sim.direct.DirectBench`.

    Args:
        mesh: topology (ignored when ``chip`` is given).
        seed: chip truth seed (and noise seed).
        chip: use this chip instead of drawing one.
        switch_ports: switch output -> mesh port (default :func:`default_switch`).
        meter_heads: (slot, chan) -> mesh port (default :func:`default_heads`).
        transceivers: dicts with name, spec (sff8636|cmis), tx_ports, rx_ports and optionally
            monitor_period_s (the module samples its monitors that often on the chip's clock;
            not given: at every read).
        heater_clock: the heater module's clock (default the wall clock); a
            :class:`~instruments.sim.link_clock.SimulatedClock` only for a bench whose heater
            driver is reached over ``heater_url`` (:mod:`instruments.sim.link_clock`).
        chip_options: passed to :class:`Chip` (``crosstalk_fraction``, ``failed``).
    """

    def __init__(self, mesh: Mesh | None = None, seed: int = 0, *, chip: Chip | None = None,
                 switch_ports: Mapping[int, int] | None = None,
                 meter_heads: Mapping[tuple[int, int], int] | None = None,
                 transceivers: Sequence[Mapping[str, Any]] | None = None, bridges: bool = True,
                 heater_clock: WallClock | SimulatedClock | None = None, **chip_options: Any) -> None:
        if chip is None:
            if mesh is None:
                raise ValueError("give a mesh or a chip")
            chip = Chip(mesh, seed, **chip_options)
        chip.follow_wall_clock()  # every instrument here is served over a wire, in real time
        self.chip = chip
        self.mesh = chip.mesh
        self._closers: list[Any] = []
        try:
            self.heater = HeaterDeviceSim(chip, clock=heater_clock)
            self.pty = PtyLink(self.heater)
            self._closers.append(self.pty)
            self._url_name = f"bench{os.getpid()}-{next(_names)}"
            self.heater_url = register(self._url_name, self.heater)
            self.switch_ports = dict(switch_ports or default_switch(self.mesh))
            self.meter_heads = dict(meter_heads or default_heads(self.mesh))
            self.laser = SimLaser(switch_outputs=max(64, max(self.switch_ports, default=1)))
            self.meter = SimPowerMeter(chip, self.laser, self.meter_heads, self.switch_ports, seed=seed + 1)
            self.laser_server = ScpiServer(self.laser)
            self._closers.append(self.laser_server)
            self.meter_server = ScpiServer(self.meter)
            self._closers.append(self.meter_server)
            specs = default_transceivers(self.mesh) if transceivers is None else list(transceivers)
            self.transceiver_specs = [dict(s) for s in specs]
            mods = [SimTransceiver(s["name"], s.get("spec", "sff8636"), s.get("tx_ports", []),
                                   s.get("rx_ports", []),
                                   monitor_period_s=float(s.get("monitor_period_s") or 0.0)) for s in specs]
            self.transceivers = TransceiverBench(chip, mods)
            self.buses = {m.name: SimI2CBus(m) for m in mods}
            self.bridges: dict[str, PtyLink] = {}
            if bridges:
                for name, bus in self.buses.items():
                    link = PtyLink(BridgeDeviceSim(bus), name=f"i2c-{name}")
                    self._closers.append(link)
                    self.bridges[name] = link
        except BaseException:
            self.close()
            raise

    def addresses(self) -> dict[str, Any]:
        """Where each instrument answers (the ``lumion bench serve --json`` object)."""
        return {
            "heater_driver": self.pty.path,
            "heater_driver_url": self.heater_url,
            "laser": self.laser_server.resource,
            "power_meter": self.meter_server.resource,
            "transceivers": {name: f"serial-i2c:{link.path}" for name, link in self.bridges.items()},
            "chip_id": self.chip.chip_id,
            "mesh": self.mesh.kind if self.mesh.kind == "custom" else f"{self.mesh.kind}:{self.mesh.rows}x"
                    f"{self.mesh.cols}",
        }

    def client_config(self, mesh_spec: str, server: Mapping[str, Any] | None = None) -> str:
        """A bench config TOML another process can open to use these simulators.

        Written with a TOML library, so any text (a ``"`` or ``\\`` in a pty path or a mesh
        file name) stays valid TOML. ``server`` (``instruments.config.server_entry()``) names
        the process serving them, so a reader can tell a file whose server has stopped.
        """
        import tomli_w

        a = self.addresses()
        config: dict[str, Any] = {
            "schema": "lumion.bench", "version": 1, "mesh": mesh_spec, "chip_id": a["chip_id"],
            "heater_driver": {"driver": "qontrol", "address": a["heater_driver"]},
            "laser": {"driver": "keysight-8164", "address": a["laser"], "idn": _model(self.laser.idn),
                      "switch": {f"port:{p}": int(k) for k, p in sorted(self.switch_ports.items())}},
            "power_meter": {"driver": "keysight-816x", "address": a["power_meter"],
                            "idn": _model(self.meter.idn),
                            "channels": {f"port:{p}": [int(s), int(c)]
                                         for (s, c), p in sorted(self.meter_heads.items())}},
        }
        if self.transceiver_specs:
            config["transceivers"] = [
                {"name": spec["name"], "spec": spec.get("spec", "sff8636"),
                 "address": a["transceivers"].get(spec["name"], "sim"),
                 "tx_ports": [int(x) for x in spec.get("tx_ports", [])],
                 "rx_ports": [int(x) for x in spec.get("rx_ports", [])],
                 **({"monitor_period_s": float(spec["monitor_period_s"])}
                    if spec.get("monitor_period_s") else {})}
                for spec in self.transceiver_specs]
        if server is not None:
            config["server"] = dict(server)
        return tomli_w.dumps(config)

    def _tx_lanes(self, target: int | str) -> list[tuple[SimTransceiver, int]]:
        """(module, lane) pairs named by a port (``port:N`` or N), ``module:lane`` or ``module``."""
        mods = self.transceivers.transceivers
        text = str(target).strip()
        name, _, lane = text.partition(":")
        if isinstance(target, int) or text.isdigit() or name == "port":
            port = self.mesh.port_index(target)
            found = [(m, k) for m in mods.values() for k, p in enumerate(m.tx_ports) if p == port]
            if not found:
                raise ValueError(f"no simulated transceiver transmits into {self.mesh.port_names[port]}")
            return found
        if name not in mods:
            raise ValueError(f"unknown transmitter {target!r}: give port:N, a module name "
                             f"({', '.join(mods) or 'none on this bench'}) or module:lane")
        m = mods[name]
        if lane:
            if not lane.isdigit():
                raise ValueError(f"{target!r}: the lane after ':' must be a number (0-based)")
            return [(m, int(lane))]
        return [(m, k) for k, p in enumerate(m.tx_ports) if p is not None]

    def kill_transmitter(self, target: int | str) -> dict[str, Any]:
        """Stop TX lanes emitting, as a dead accelerator does (see :func:`SimTransceiver.kill_tx`).

        ``target``: a mesh port (``port:N`` or N) a lane transmits into, ``module:lane``
        (0-based) or a module name (all its wired TX lanes; with :func:`fabric_transceivers`
        module names are accelerator names). Returns the lanes, their ports and ``t_s``,
        the ``time.monotonic()`` of the kill (s), to time detection against.
        """
        lanes = self._tx_lanes(target)
        for m, k in lanes:
            m.kill_tx(k)
        return self._fault_record(lanes)

    def revive_transmitter(self, target: int | str) -> dict[str, Any]:
        """Let lanes killed by :meth:`kill_transmitter` emit again (same ``target`` forms)."""
        lanes = self._tx_lanes(target)
        for m, k in lanes:
            m.revive_tx(k)
        return self._fault_record(lanes)

    def clear_faults(self) -> None:
        """Undo every injected fault: killed transmitters emit again, failed TBUs and heaters
        are repaired, shifted passive phases are as drawn (one bench shared by several test
        cases starts each from the same faults: none). The heater currents and the hosts'
        controls (TX disable) are the clients' to set, and are left as they are.
        """
        for m in self.transceivers.transceivers.values():
            for lane in sorted(m.dead_tx):
                m.revive_tx(lane)
        self.chip.repair_all()
        self.chip.undo_phase_shifts()

    def _fault_record(self, lanes: list[tuple[SimTransceiver, int]]) -> dict[str, Any]:
        return {"lanes": [f"{m.name}:{k}" for m, k in lanes],
                "ports": [self.mesh.port_names[p] for m, k in lanes if (p := m.tx_ports[k]) is not None],
                "t_s": time.monotonic()}

    def close(self) -> None:
        """Stop every simulator (idempotent)."""
        unregister(getattr(self, "_url_name", ""))
        while self._closers:
            self._closers.pop().close()

    def __enter__(self) -> SimulatedBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
