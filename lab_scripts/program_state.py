"""``lumion program`` with a heater state: what `lumion synthesize` writes for a unitary or a filter.

A heater state (``lumion.state``) fixes both arms' phases of every TBU, common phases
included, so only a **phase-calibrated** map (version 4 with ``common_rad``, from
``lumion calibrate --common-phase``) can set it: its currents come from
:func:`calibration.phase_drive.currents_for_state` and go out through the controller's one
safe path (limits checked before anything is sent, all-or-nothing, read back). Without a
map, or with a power-only one, the state is refused in one line saying what to run, before
any instrument is opened: programmed through the splits alone it would be another matrix,
and no light check could then say which phases were wrong (docs/synthesis.md, "lumion
program and heater states").

A state may not use a TBU the map records as failed (dead, stuck, an open or shorted heater,
unverified unless ``--trust-unverified``): the map never drives such a TBU, so the state
would silently be something else. The TBUs a state uses are those its ``prediction`` names
(``photonics.synthesis.prediction``; `lumion synthesize --map` avoids failed ones); a state
without one uses every TBU.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from calibration.settable import why_not_settable
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.errors import RoutingError, StateError
from photonics.state import SCHEMA as STATE_SCHEMA
from photonics.state_program import StateToProgram, load_state  # noqa: F401 - load_state re-exported (cmd_program)
from photonics.synthesis.prediction import KEY

RUN_COMMON_PHASE = "run `lumion calibrate --common-phase` and give its map"


def state_document(path: str) -> dict[str, Any] | None:
    """The parsed file when ``path`` holds a heater state (``lumion.state``); None for anything
    else (left to the configuration loader, which reports it).
    """
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "configuration"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == STATE_SCHEMA else None


def require_phase_map(heater_map: Any, source: str, map_source: str | None) -> None:
    """Raise :class:`StateError` (nothing sent) unless ``heater_map`` holds common phases."""
    if heater_map is None:
        raise StateError(f"{source} is a heater state (lumion.state): nothing was sent; its phases need a "
                         f"phase-calibrated map (--map): {RUN_COMMON_PHASE}")
    if not heater_map.phase_calibrated:
        raise StateError(f"{source} is a heater state (lumion.state) and the map {map_source} is power-only "
                         "(no common phases): nothing was sent (it would set another matrix, which light "
                         f"could not trace to a phase); {RUN_COMMON_PHASE}")


def refuse_failed_tbus(program: StateToProgram, heater_map: Any, mesh: Any, map_source: str,
                       trust_unverified: bool = False) -> None:
    """Raise :class:`RoutingError` (nothing sent) when the state uses a TBU the map cannot set."""
    if not getattr(heater_map, "failed", None):
        return
    for t in program.used_tbus(mesh.n_tbus):
        why = why_not_settable(heater_map, t, "split", trust_unverified)
        if why:
            hint = (f"synthesize it again with --map {map_source}, which avoids it" if program.prediction
                    else f"this state names no TBUs it uses (no '{KEY}'), so it needs every TBU: synthesize "
                    f"it with --map {map_source}, which avoids failed ones")
            raise RoutingError(f"the heater state {program.source} uses {mesh.tbu_names[t]}, which the "
                               f"calibration map {map_source} records as {why}: nothing was sent; {hint}")


def state_currents(program: StateToProgram, heater_map: Any, max_current_ma: float) -> np.ndarray:
    """Currents (mA, one per heater) that set the state's phases through the phase-calibrated map
    (crosstalk compensated; heaters of failed TBUs get none). Raises ``UnreachableError`` naming
    a heater that would need more than ``max_current_ma``.
    """
    from calibration.phase_drive import currents_for_state

    return currents_for_state(heater_map, program.state, max_current_ma)
