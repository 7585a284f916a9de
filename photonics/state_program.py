"""A heater state read to be programmed: its phases and, from ``lumion synthesize``, its prediction.

Shared by ``lumion program`` (lab_scripts.program_state) and the control plane's
``POST /api/v1/states`` (controlplane.states): the TBUs a state uses are those its
``prediction`` names (:mod:`photonics.synthesis.prediction`); a state without one uses every TBU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from photonics.state import MeshState
from photonics.synthesis.prediction import KEY, Prediction


@dataclass(frozen=True, eq=False)
class StateToProgram:
    """A heater state read for ``lumion program``: its phases and (from synthesize) its prediction."""

    state: MeshState
    prediction: Prediction | None
    source: str

    def used_tbus(self, n_tbus: int) -> tuple[int, ...]:
        """The TBUs the state needs the map to set: its prediction's, else every TBU."""
        return self.prediction.tbus if self.prediction is not None else tuple(range(n_tbus))


def load_state(data: dict[str, Any], mesh: Any, source: str) -> StateToProgram:
    """The state and its prediction for ``mesh``; one made for another mesh is refused first."""
    record = data.get(KEY)
    # read first: it names the mesh the state was made for (MeshMismatchError before its TBU names)
    prediction = Prediction.from_dict(record, mesh, source) if record is not None else None
    return StateToProgram(MeshState.from_dict(data, mesh, source=source), prediction, source)
