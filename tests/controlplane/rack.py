"""A control plane in this process over the simulated bench's real transports (telemetry and dashboard tests).

The simulated bench runs its instruments behind their real transports (heater driver on a
pty, laser and meter as SCPI servers on loopback, one SFF-8636 module per accelerator
behind an ASCII I2C bridge on a pty); the ControlPlane opens them from the bench's client
config exactly as it would open a lab bench, so the transmitter kills the tests inject
reach telemetry only through the modules' registers, read over the bridges.
"""

from __future__ import annotations

import sqlite3
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration.map import CalibrationMap, mesh_signature
from controlplane.service import ControlPlane
from controlplane.store import Store
from instruments.config import open_bench
from instruments.sim.bench import SimulatedBench, fabric_transceivers
from instruments.sim.chip import Chip
from photonics.fabric import Fabric, TimingModel, default_fabric

WAIT_S = 30.0  # generous: the 2-core test machine is shared with other suites


def oracle_map(chip: Chip) -> CalibrationMap:
    """TEST-ONLY ORACLE: the chip's hidden heater truth as a calibration map (what a perfect
    calibration would find), so the ring's links are clean and a dead transmitter leaves its
    receiver dark instead of lit by the leakage of badly set TBUs."""
    h, p, mesh = chip.truth.heaters, chip.truth.params, chip.mesh
    return CalibrationMap(
        chip_id=chip.chip_id,
        mesh=mesh_signature(mesh),
        delta=np.mod(p.offset_top - p.offset_bot, 2 * np.pi),
        rho2=h.rho2,
        rho3=h.rho3,
        eta=h.eta,
        crosstalk=h.crosstalk.tocsr(),
        created="oracle",
        tbu_names=mesh.tbu_names,
        nearest_fraction=0.01,
        cutoff_tbu=1.05,
    )


@dataclass(frozen=True)
class Record:
    """A rack's committed state to start test cases from: a backup of its service's database
    and the heater currents (mA) that database says the chip holds."""

    db: Path
    currents: np.ndarray


def on_chip_time(bench: Any, chip: Chip) -> None:
    """Let ``bench``'s light meter wait on ``chip``'s clock, the clock the simulated modules
    sample their monitors by, instead of sleeping on the wall clock.

    After a lane's TX disable changes, :class:`~instruments.light_meter.LightMeter` waits
    ``DOM_REFRESH_WAIT_S`` (0.1 s) for the modules' next monitor sample, with the bench's
    ``clock`` and ``sleep`` when it has them: here the wait moves the chip's time on
    (:meth:`Chip.advance`, on top of the wall clock), so a module with a sample period has
    taken its next sample when the read comes, as it would after a real wait, and nothing
    sleeps. A ring of 8 placed by light slept 0.9 s; a recovery 0.3-0.5 s.
    """
    bench.clock = chip.now_s
    bench.sleep = chip.advance


class Rack:
    """Simulated bench + opened instrument bench + ControlPlane (close() releases all three)."""

    def __init__(self, db: Path, fabric: Fabric | None = None, seed: int = 0, model: str = "realistic",
                 heater_map: Callable[[Chip], CalibrationMap] = oracle_map) -> None:
        self.fabric = fabric or default_fabric()
        mesh = self.fabric.mesh
        specs = [
            {
                **s,
                "tx_ports": [mesh.port_index(p) for p in s["tx_ports"]],
                "rx_ports": [mesh.port_index(p) for p in s["rx_ports"]],
            }
            for s in fabric_transceivers(self.fabric)
        ]
        self.sim = SimulatedBench(mesh, seed, transceivers=specs, model=model)
        try:
            self.bench = open_bench(
                tomllib.loads(self.sim.client_config(self.fabric.mesh_spec or "smartlight"))
            )
            on_chip_time(self.bench, self.sim.chip)
            self.bench.controller.heater_map = heater_map(self.sim.chip)
            self.cp = ControlPlane(Store(db), self.bench, self.fabric)
        except BaseException:
            self.sim.close()
            raise

    def place_ring(self, n: int = 8) -> dict:
        """Place a ring over gpu0..gpu(n-1)."""
        return self.cp.place_job(accelerators=[f"gpu{k}" for k in range(n)], pattern="ring")

    def events(self, kind: str | None = None) -> list[dict]:
        """Every event so far (of ``kind``)."""
        return [e for e in self.cp.events(0, 5000) if kind is None or e["kind"] == kind]

    def record(self, path: Path) -> Record:
        """Back the service's database up to ``path`` (SQLite's online backup: the WAL
        included) with the currents it committed."""
        with sqlite3.connect(self.cp.store.path) as src, sqlite3.connect(path) as dst:
            src.backup(dst)
        src.close()
        dst.close()
        return Record(Path(path), self.cp.state.currents.copy())

    def restart_from(self, record: Record, db: Path) -> None:
        """Start a new service on a copy of ``record`` at ``db``, over the same simulators and
        opened bench, as if the rack had just been brought to that state.

        What a test case may have changed outside the database is put back first: every
        injected fault undone (:meth:`SimulatedBench.clear_faults`: killed transmitters,
        failed TBUs and heaters, shifted phases), a lane left TX-disabled enabled by its
        host, the recorded currents written through the heater driver and left to settle.
        The new ControlPlane's start-up then reads the chip back (``IALL?``) as it always
        does; a restart whose reconciliation had to act (the chip did not hold the recorded
        currents) is an error, not a state to test from.
        """
        self.cp.close()
        self.sim.clear_faults()
        for module in self.bench.transceivers.values():
            disabled = module.tx_disabled()
            for lane in np.flatnonzero(disabled if disabled is not None else []):
                module.set_tx_disable(int(lane), False)
        self.bench.controller.set_currents(record.currents)
        time.sleep(TimingModel().settle_ms() / 1e3)  # the service's own settle after a write
        with sqlite3.connect(record.db) as src, sqlite3.connect(db) as dst:
            src.backup(dst)
        src.close()
        dst.close()
        self.cp = ControlPlane(Store(db), self.bench, self.fabric)
        loaded = [e for e in self.cp.events(0, 5000) if e["kind"] == "state-loaded"][-1]
        if loaded["actions"]:
            raise AssertionError(f"the restarted service had to reconcile the chip: {loaded['actions']}")

    def close(self) -> None:
        """Close the service's store, the opened bench and the simulators."""
        self.cp.close()
        self.bench.close()
        self.sim.close()


def wait_for(predicate, timeout_s: float = WAIT_S, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class ServedRack:
    """A module's :class:`Rack` served through the real application (auth, errors) by a test
    client; :meth:`restart` opens a new service on the same database and bench (its state
    reloaded from the store, as after a process restart).
    """

    def __init__(self, folder: Path, rack: Rack, token: str) -> None:
        self.folder, self.rack, self.token = folder, rack, token
        self._serve()

    def _serve(self) -> None:
        from fastapi.testclient import TestClient

        from controlplane.app import create_app

        self._client = TestClient(create_app(self.rack.cp, token=self.token),
                                  headers={"Authorization": f"Bearer {self.token}"})
        self.client = self._client.__enter__()

    def restart(self) -> None:
        """Stop the service, open a new one on the same database and bench."""
        self._client.__exit__(None, None, None)
        self.rack.cp.close()
        self.rack.cp = ControlPlane(Store(self.folder / "cp.db"), self.rack.bench, self.rack.fabric)
        self._serve()

    def close(self) -> None:
        self._client.__exit__(None, None, None)
        self.rack.close()
