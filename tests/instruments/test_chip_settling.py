"""The realistic chip's heaters settle as a linear two-time-constant thermal system.

A heater's phase follows a fast response (the heater itself, 10 us) and a slow substrate
tail (2 ms). Each decays on its own clock, so steps superpose: a step taken while an
earlier one is still settling adds to what is left, and re-sending the currents a heater
already has (a driver writing every channel) changes nothing.
"""

from __future__ import annotations

import math

import numpy as np

from instruments.sim.chip import SETTLED_TIME_CONSTANTS, Chip, Realism
from photonics.topology import hexagonal

REALISM = Realism(wander_k=0.0)  # the default chip without temperature wander: phases move only by heat


def frozen_chip() -> Chip:
    """A realistic chip on simulated time only (it moves with ``advance``)."""
    return Chip(hexagonal(2, 2), clock=lambda: 0.0, seed=3, realism=REALISM)


def arm_phases(chip: Chip) -> np.ndarray:
    """Every heater arm's phase now (rad), crosstalk included."""
    state = chip.heater_state()
    return np.concatenate([state.phi_top, state.phi_bot])


def step_response(t_s: float) -> float:
    """Share of a step still to come ``t_s`` after it (the model's two time constants)."""
    return ((1 - REALISM.slow_fraction) * math.exp(-t_s / REALISM.settle_fast_s)
            + REALISM.slow_fraction * math.exp(-t_s / REALISM.settle_slow_s))


def test_one_step_follows_the_two_time_constants():
    chip = frozen_chip()
    before = arm_phases(chip)
    chip.set_current(0, 2.0)
    chip.advance(1.0)
    target = arm_phases(chip)
    chip.set_current(0, 0.0)
    chip.advance(1.0)
    np.testing.assert_allclose(arm_phases(chip), before, atol=1e-12)
    chip.set_current(0, 2.0)
    stepped_at = chip.now_s()
    for t in (5e-6, 50e-6, 1e-3, 5e-3):
        chip.advance(t - (chip.now_s() - stepped_at))
        expected = target - step_response(t) * (target - before)
        np.testing.assert_allclose(arm_phases(chip), expected, atol=1e-12)


def test_resending_the_same_currents_mid_settle_changes_nothing():
    # 100 us after a step the fast response is over and about 3% of it is still to come on
    # the slow tail; writing every channel again with the same currents must leave it there.
    runs = []
    for resend in (False, True):
        chip = frozen_chip()
        chip.set_current(0, 2.0)
        chip.advance(100e-6)
        if resend:
            chip.set_currents(chip.currents_ma.copy())
        chip.advance(20e-6)
        runs.append(arm_phases(chip))
    np.testing.assert_allclose(runs[1], runs[0], atol=1e-12)
    chip = frozen_chip()
    chip.set_current(0, 2.0)
    chip.advance(1.0)
    settled = arm_phases(chip)
    assert np.abs(runs[0] - settled).max() > 1e-3  # still settling: the check above means something


def test_steps_on_two_heaters_superpose():
    # Heater 0 steps at t = 0, heater 5 at t = 100 us: every arm moves by the first step's
    # response on its clock plus the second step's on its own.
    def settled_after(*steps):
        chip = frozen_chip()
        for channel, current in steps:
            chip.set_current(channel, current)
        chip.advance(1.0)
        return arm_phases(chip)

    start = settled_after()
    first = settled_after((0, 2.0)) - start
    both = settled_after((0, 2.0), (5, 1.5)) - start
    assert np.abs(both - first).max() > 0.1  # the second step moves some arm a lot
    chip = frozen_chip()
    chip.set_current(0, 2.0)
    chip.advance(100e-6)
    chip.set_current(5, 1.5)
    chip.advance(30e-6)
    expected = start + both - step_response(130e-6) * first - step_response(30e-6) * (both - first)
    np.testing.assert_allclose(arm_phases(chip), expected, atol=1e-12)


def test_settled_after_the_documented_time():
    chip = frozen_chip()
    chip.set_current(0, 2.0)
    chip.advance((SETTLED_TIME_CONSTANTS + 0.5) * REALISM.settle_slow_s)
    settled = arm_phases(chip)
    chip.advance(1.0)
    np.testing.assert_array_equal(arm_phases(chip), settled)
