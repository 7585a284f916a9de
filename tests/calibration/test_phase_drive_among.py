"""``currents_for_state_among``: a heater state set on some TBUs while every other heater holds
what the chip holds (the control plane's ``POST /api/v1/states`` beside running jobs)."""

from __future__ import annotations

import numpy as np

from calibration.phase_drive import SYSTEMS_KEPT, _system_of, currents_for_state, currents_for_state_among
from instruments.sim.chip import Chip
from photonics.state import MeshState
from photonics.topology import smartlight
from tests.calibration.test_common_phase import truth_map

MAX_MA = 30.0


def test_the_state_tbus_get_the_state_phases_with_the_held_heaters_heat_compensated():
    chip = Chip(smartlight(), seed=4372, model="ideal")
    cmap = truth_map(chip, common=True)
    rng = np.random.default_rng(4372)
    n = chip.mesh.n_tbus
    state = MeshState(rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n))
    tbus = (0, 1, 2, 7, 8)
    held = rng.uniform(0, 5, cmap.n_heaters)  # another job's routes, parked TBUs: anything

    out = currents_for_state_among(cmap, state, tbus, held, MAX_MA)

    mine = np.zeros(cmap.n_heaters, bool)
    mine[[c for t in tbus for c in (2 * t, 2 * t + 1)]] = True
    assert np.array_equal(out[~mine], held[~mine])  # held heaters untouched, to the last bit
    arms = cmap.arm_phases(out)  # the state's arms, crosstalk of every heater included
    want = np.empty(cmap.n_heaters)
    want[0::2], want[1::2] = state.phi_top, state.phi_bot
    err = np.mod(arms[mine] - want[mine] + np.pi, 2 * np.pi) - np.pi
    assert np.abs(err).max() < 1e-9
    # without compensating the held heaters' heat (the whole-chip solve's currents) it is off
    full = currents_for_state(cmap, state, MAX_MA)
    naive = held.copy()
    naive[mine] = full[mine]
    off = np.mod(cmap.arm_phases(naive)[mine] - want[mine] + np.pi, 2 * np.pi) - np.pi
    assert np.abs(off).max() > 1e-3


def test_kept_crosstalk_systems_follow_the_map_content_and_stay_bounded():
    """The solve's sparse systems are kept by the map's content, not its object: a map whose eta
    is changed in place is not answered from the system of its old values; at most
    SYSTEMS_KEPT are kept however many heater sets are asked for."""
    chip = Chip(smartlight(), seed=4372, model="ideal")
    cmap = truth_map(chip, common=True)
    rng = np.random.default_rng(4373)
    n = chip.mesh.n_tbus
    state = MeshState(rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n))
    before = currents_for_state(cmap, state, MAX_MA)
    cmap.eta[:] *= 1.25  # the frozen map's array, changed in place
    after = currents_for_state(cmap, state, MAX_MA)
    _system_of.cache_clear()
    assert np.array_equal(after, currents_for_state(cmap, state, MAX_MA))  # as if built afresh
    assert not np.array_equal(before, after)
    held = rng.uniform(0, 5, cmap.n_heaters)
    for t in range(3 * SYSTEMS_KEPT):  # a distinct heater set each time
        currents_for_state_among(cmap, state, (t, t + 1), held, MAX_MA)
    assert _system_of.cache_info().currsize == SYSTEMS_KEPT
