"""A synthesised mesh state with its report: what `lumion synthesize` prints and writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from photonics.configuration import Configuration
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.topology import Mesh

PHASE_ONLY = ("the unitary depends on the common phase of every TBU on the lattice; a configuration "
              "holds only each TBU's split, so `lumion program` cannot set this state: set the heater "
              "phases (state) through a phase-calibrated map (`lumion calibrate --common-phase`; "
              "calibration.phase_drive.currents_for_state), exact up to the ports' phases")


def fractions_of(state: MeshState, params: TBUParams) -> np.ndarray:
    """Each TBU's cross fraction for ideal couplers: ``cos^2(theta / 2)`` with ``theta`` the
    total top-minus-bottom phase, the inverse of :func:`photonics.physics.split_phases`, so a
    configuration of these fractions programs the same differential phases through any map.
    """
    theta = state.phi_top + params.offset_top - state.phi_bot - params.offset_bot
    return np.clip(np.cos(theta / 2) ** 2, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class Synthesis:
    """A target realised as a mesh state on a chip model.

    Attributes:
        kind: "unitary", "splitter" or "coupler".
        target: the unitary (N x N), or the wanted power shares (n_out x n_in, columns sum to 1).
        inputs, outputs: mesh ports (indices) of the target's columns and rows.
        state: heater phases of every TBU (rad).
        configuration: what `lumion program` takes, or None when a configuration cannot
            hold the target (``not_programmable`` says why).
        start, achieved: per-wavelength reports of the analytic start and the refined state.
        tbus: the TBUs the target uses (the rest are parked).
    """

    kind: str
    mesh: Mesh
    target: np.ndarray
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    state: MeshState
    configuration: Configuration | None
    start: list[dict]
    achieved: list[dict]
    tbus: tuple[int, ...]
    steps: int
    evaluations: int
    not_programmable: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    params: TBUParams | None = field(default=None, repr=False)  # the chip model it was refined on

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the mesh state as ``lumion.state``, the configuration as
        ``lumion.configuration`` when there is one).
        """
        m = self.mesh
        target = ({"real": self.target.real.tolist(), "imag": self.target.imag.tolist()}
                  if np.iscomplexobj(self.target) else self.target.tolist())
        return {"kind": self.kind, "inputs": [m.port_names[p] for p in self.inputs],
                "outputs": [m.port_names[p] for p in self.outputs], "target": target,
                "tbus": [m.tbu_names[t] for t in self.tbus], "steps": self.steps,
                "evaluations": self.evaluations, "start": self.start, "achieved": self.achieved,
                "state": self.state.to_dict(m),
                "configuration": None if self.configuration is None else self.configuration.to_dict(m),
                "not_programmable": self.not_programmable, **self.extra}
