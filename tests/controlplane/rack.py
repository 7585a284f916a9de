"""A control plane in this process over the simulated bench's real transports (telemetry and dashboard tests).

The simulated bench runs its instruments behind their real transports (heater driver on a
pty, laser and meter as SCPI servers on loopback, one SFF-8636 module per accelerator
behind an ASCII I2C bridge on a pty); the ControlPlane opens them from the bench's client
config exactly as it would open a lab bench, so the transmitter kills the tests inject
reach telemetry only through the modules' registers, read over the bridges.
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import numpy as np

from calibration.map import CalibrationMap, mesh_signature
from controlplane.service import ControlPlane
from controlplane.store import Store
from instruments.config import open_bench
from instruments.sim.bench import SimulatedBench, fabric_transceivers
from instruments.sim.chip import Chip
from photonics.fabric import Fabric, default_fabric

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


class Rack:
    """Simulated bench + opened instrument bench + ControlPlane (close() releases all three)."""

    def __init__(self, db: Path, fabric: Fabric | None = None, seed: int = 0) -> None:
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
        self.sim = SimulatedBench(mesh, seed, transceivers=specs)
        try:
            self.bench = open_bench(
                tomllib.loads(self.sim.client_config(self.fabric.mesh_spec or "smartlight"))
            )
            self.bench.controller.heater_map = oracle_map(self.sim.chip)
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
