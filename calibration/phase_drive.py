"""Heater currents for a heater state: both arms of every TBU, crosstalk compensated.

A configuration fixes each TBU's split, so the map drives one heater per TBU
(:meth:`calibration.map.CalibrationMap.currents_for`). A unitary, a filter or the
common-phase calibration's sweeps fix both arms' phases (a
:class:`~photonics.state.MeshState` of heater-made phases, rad, passive phases excluded),
so both heaters are driven. With the map's crosstalk K (rad/mW) the arm phases are
``a = s + K s / eta`` for self-phases ``s``; :func:`self_phases_for` solves that sparse
linear system and adds whole turns where a neighbour's heat would need a negative phase
(heaters only heat); :func:`currents_for_state` inverts each heater's cubic.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from calibration.heater_map import UnreachableError, invert_cubic
from calibration.map import HEATER_FAULT_STATES, ROUTING_STATES, CalibrationMap
from calibration.model import max_self_phase
from photonics.state import MeshState

TWO_PI = 2 * np.pi
# An arm that would need less than this (rad) gets a whole turn more instead: a target a hair
# below zero is a neighbour's heat overshooting it, and no heater can take phase away.
NEGATIVE_TOL_RAD = -1e-12
TURN_PASSES = 8  # each pass lifts every arm still below zero by 2 pi; a neighbour's heat is ~1 %


def driven_heaters(cmap: CalibrationMap) -> np.ndarray:
    """Heaters the map may drive: those of TBUs not failed dead, stuck or with a heater fault
    (an unverified TBU keeps its fit and is driven by it).
    """
    live = np.ones(cmap.n_heaters, bool)
    for t, how in cmap.failed.items():
        if how in ROUTING_STATES or how in HEATER_FAULT_STATES:
            live[2 * t:2 * t + 2] = False
    return live


def self_phases_for(cmap: CalibrationMap, arms_rad: np.ndarray, solve_for: np.ndarray | None = None,
                    held_self_rad: np.ndarray | None = None) -> np.ndarray:
    """Self-phases ``s >= 0`` (rad, one per heater) whose arm phases with crosstalk equal
    ``arms_rad`` modulo whole turns; undriven heaters get 0.

    ``solve_for`` (bool per heater, default every one): only those heaters are solved for;
    every other heater keeps its self-phase ``held_self_rad`` (rad; its heat still reaches
    the solved ones through the crosstalk) and is returned unchanged.
    """
    live = driven_heaters(cmap) & (np.ones(cmap.n_heaters, bool) if solve_for is None
                                   else np.asarray(solve_for, bool))
    idx = np.flatnonzero(live)
    held = np.zeros(cmap.n_heaters) if held_self_rad is None else np.where(live, 0.0, held_self_rad)
    a = _system(cmap, live)
    # the held heaters' heat at the solved ones (their own self-phase is not in the arm phase)
    spill = (cmap.crosstalk @ (held / cmap.eta))[idx]
    target = np.mod(np.asarray(arms_rad, float)[idx] - spill, TWO_PI)
    s = np.zeros(len(idx))
    for _ in range(TURN_PASSES):
        s = np.atleast_1d(spsolve(a, target)) if len(idx) else s
        low = s < NEGATIVE_TOL_RAD
        if not low.any():
            break
        target = target + TWO_PI * low
    out = held.copy()
    out[idx] = np.maximum(s, 0.0)
    return out


# Crosstalk systems kept by :func:`_system` (maps and heater sets): a unitary, a filter or the
# common-phase stage programs state after state through one map.
SYSTEMS_KEPT = 8


def _system(cmap: CalibrationMap, live: np.ndarray) -> sp.csc_matrix:
    """``(I + K / eta)`` restricted to the heaters ``live`` (a mask), as CSC.

    Building it took ~5 ms of scipy.sparse's Python per state programmed, ten times the solve;
    it depends only on the map's crosstalk and eta and on the heaters solved for, so the last
    :data:`SYSTEMS_KEPT` are kept by that content (not by the map object, whose arrays a
    caller could change): the same matrix, built the same way, hence the same currents.
    """
    K = cmap.crosstalk.tocsr()  # (the map's own matrix when it is CSR, as maps make it)
    return _system_of(cmap.n_heaters, K.shape, cmap.eta.dtype.str, K.data.dtype.str, cmap.eta.tobytes(),
                      K.indptr.tobytes(), K.indices.tobytes(), K.data.tobytes(), K.indptr.dtype.str,
                      K.indices.dtype.str, live.tobytes())


@functools.lru_cache(maxsize=SYSTEMS_KEPT)
def _system_of(n_heaters: int, shape: tuple[int, int], eta_dtype: str, data_dtype: str, eta: bytes,
               indptr: bytes, indices: bytes, data: bytes, indptr_dtype: str, indices_dtype: str,
               live: bytes) -> sp.csc_matrix:
    """:func:`_system` of the map held in these bytes (its CSR crosstalk and eta) and heater mask.

    Built from the bytes alone, so what is kept cannot differ from what the key says; the
    product with a diagonal is one multiply per entry, so it is the same matrix whether the
    map's crosstalk came as CSR or another format.
    """
    K = sp.csr_matrix((np.frombuffer(data, data_dtype), np.frombuffer(indices, indices_dtype),
                       np.frombuffer(indptr, indptr_dtype)), shape=shape)
    idx = np.flatnonzero(np.frombuffer(live, bool))
    full = (sp.identity(n_heaters, format="csr") + K @ sp.diags(1.0 / np.frombuffer(eta, eta_dtype))).tocsr()
    a = full[idx][:, idx].tocsc()
    a.sum_duplicates()  # what spsolve does to its matrix first, in place: done before it is shared
    return a


def currents_for_state(cmap: CalibrationMap, state: MeshState, max_current_ma: float) -> np.ndarray:
    """Currents (mA, one per heater) setting heater-made arm phases ``state`` through ``cmap``.

    Raises:
        UnreachableError: an arm needs more than ``max_current_ma`` (one line naming it).
    """
    cmap.check_usable()
    return _currents(cmap, self_phases_for(cmap, _arms(state, cmap.n_heaters)), max_current_ma)


def currents_for_state_among(cmap: CalibrationMap, state: MeshState, tbus: tuple[int, ...] | list[int],
                             held_ma: np.ndarray, max_current_ma: float) -> np.ndarray:
    """Currents (mA, one per heater) setting ``state``'s arm phases on the TBUs ``tbus`` only,
    every other heater held at ``held_ma`` (mA: what the chip holds for other work, e.g. a
    running job's routes), whose heat on the state's heaters is compensated.

    The held heaters are returned as given (to the last bit): a caller writing only the
    channels that change writes none of them.

    Raises:
        UnreachableError: an arm of ``tbus`` needs more than ``max_current_ma``.
    """
    cmap.check_usable()
    held_ma = np.asarray(held_ma, float)
    mine = np.zeros(cmap.n_heaters, bool)
    for t in tbus:
        mine[2 * int(t):2 * int(t) + 2] = True
    s = self_phases_for(cmap, _arms(state, cmap.n_heaters), mine, cmap.self_phases(held_ma))
    out = held_ma.copy()
    out[mine] = _currents(cmap, np.where(mine, s, 0.0), max_current_ma)[mine]
    return out


def _arms(state: MeshState, n_heaters: int) -> np.ndarray:
    """A state's arm phases (rad) in heater order (top, bottom of each TBU)."""
    arms = np.empty(n_heaters)
    arms[0::2], arms[1::2] = np.asarray(state.phi_top, float), np.asarray(state.phi_bot, float)
    return arms


def _currents(cmap: CalibrationMap, s: np.ndarray, max_current_ma: float) -> np.ndarray:
    """Currents (mA) giving self-phases ``s`` (rad); UnreachableError naming a heater past the limit."""
    reach = max_self_phase(max_current_ma, cmap.rho2, cmap.rho3)
    over = s > reach + 1e-9
    if over.any():
        h = int(np.argmax(over))
        raise UnreachableError(f"heater {h} ({cmap.tbu_names[h // 2] if cmap.tbu_names else h // 2}) needs "
                               f"{s[h]:.3f} rad, which it reaches only past the {max_current_ma} mA limit")
    return np.minimum(invert_cubic(s, cmap.rho2, cmap.rho3), max_current_ma)
