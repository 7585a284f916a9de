"""The simulated chip's incremental solving gives exactly what a full solve of its state gives.

Every reading is compared with :func:`photonics.circuit.solve` of the chip's heater state
and optical parameters at that moment, over random step sequences with crosstalk, drift,
settling and faults; each sequence also asserts that the shortcut under test (reuse,
incremental update) really ran, so a stale solver cannot pass by never being used.
"""

from __future__ import annotations

import numpy as np
import pytest

from instruments.sim.chip import (
    DEAD_LOSS_DB,
    MAX_SOLVERS,
    Chip,
    Realism,
    changed_tbus,
)
from photonics.circuit import solve
from photonics.circuit_merge import ancestors, merge_plan
from photonics.errors import StateError
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight

TOLERANCE = 1e-12  # the incremental solver's documented agreement with a full solve
WAVELENGTHS_NM = (1550.0, 1551.3)  # two lasers: each keeps its own solver
SETTLE_S = 0.03  # past the realistic chip's 12 slow time constants (24 ms): settled


def frozen_chip(mesh, **kw) -> Chip:
    """A chip on simulated time only, so a reference solve sees the very state it read."""
    return Chip(mesh, clock=lambda: 0.0, **kw)


def full_field(chip: Chip, port: int, wl: float) -> np.ndarray:
    """The reference: a full solve of the chip's state and parameters now."""
    return solve(chip.mesh, chip.heater_state(), [wl], chip.optical_params(), inputs=[port])[0, 0, :, 0]


def check_reading(chip: Chip, port: int, wl: float) -> None:
    got = chip.output_field(port, wl)
    np.testing.assert_allclose(got, full_field(chip, port, wl), rtol=0, atol=TOLERANCE)


def random_walk(chip: Chip, rng: np.random.Generator, steps: int, *, faults: bool, settle_s: float) -> None:
    """Heater sweeps (several steps of one heater, then another), reads at one or more
    ports, time steps, and (``faults``) TBUs failing and being repaired; every read checked.
    """
    n_h, n_ports = chip.mesh.n_heaters, chip.mesh.n_ports
    heater = int(rng.integers(n_h))
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.15:
            heater = int(rng.integers(n_h))  # the next sweep
        if faults and roll > 0.95:
            tbu = int(rng.integers(chip.mesh.n_tbus))
            chip.fail_tbu(tbu, str(rng.choice(["dead", "bar", "cross"])))
        elif faults and roll > 0.93:
            chip.repair_all()
        chip.set_current(heater, float(rng.uniform(0.0, 3.0)))
        chip.advance(settle_s)
        wl = WAVELENGTHS_NM[int(rng.random() < 0.2)]
        for port in rng.choice(n_ports, size=int(rng.integers(1, 4)), replace=False):
            check_reading(chip, int(port), wl)


def test_sweeps_without_crosstalk_are_incremental_and_exact():
    # No crosstalk: a heater step changes its own TBU only, so sweeps take the incremental path.
    chip = frozen_chip(smartlight(), seed=3, model="ideal", crosstalk_fraction=0.0)
    random_walk(chip, np.random.default_rng(0), 150, faults=False, settle_s=0.0)
    assert chip.solves["incremental"] > 50
    assert chip.solves["reused"] > 50


def test_crosstalk_steps_are_incremental_and_exact():
    # With crosstalk a step moves 4-5 TBUs: only the merges above them re-run (issue 28),
    # and further ports of the same state are read from the kept solver.
    chip = frozen_chip(smartlight(), seed=4, model="ideal")
    random_walk(chip, np.random.default_rng(1), 80, faults=False, settle_s=0.0)
    assert chip.solves["incremental"] > 50
    assert chip.solves["reused"] > 10


def test_faults_on_a_crosstalk_free_chip_are_exact():
    # Dead TBUs change the chip's parameters; bar/cross pin a TBU's phases; repairs undo both.
    chip = frozen_chip(hexagonal(3, 3), seed=5, model="ideal", crosstalk_fraction=0.0)
    random_walk(chip, np.random.default_rng(2), 250, faults=True, settle_s=0.0)
    assert chip.solves["incremental"] > 50
    assert chip.failed or chip.solves["built"] > 1


def test_realistic_chip_with_drift_and_settling_is_exact():
    # Realistic physics: tail crosstalk, settling (reads 1 ms after a step), and a chip
    # temperature that steps by 5 mK every 10 readings (every TBU's passive phase moves).
    chip = frozen_chip(smartlight(), seed=6, model="realistic")
    chip.set_temperature_profile(lambda t: 0.005 * int(t / 0.01))
    random_walk(chip, np.random.default_rng(3), 60, faults=True, settle_s=1e-3)
    random_walk(chip, np.random.default_rng(4), 40, faults=True, settle_s=0.03)
    assert chip.solves["reused"] > 10


def test_settled_zero_crosstalk_realistic_sweep_is_incremental():
    # The realistic chip without crosstalk (nor its long tail), read once settled and at a
    # constant temperature: single-TBU steps again, through the incremental path.
    chip = frozen_chip(hexagonal(2, 3), seed=7, model="realistic", crosstalk_fraction=0.0,
                       realism=Realism(tail_fraction=0.0))
    chip.set_temperature_profile(lambda t: 0.0)
    chip.truth = None  # the chip's own physics must not need the public handle
    rng = np.random.default_rng(5)
    for tbu in range(3):
        for current in rng.uniform(0, 3, 8):
            chip.set_current(2 * tbu, float(current))
            chip.advance(SETTLE_S)
            check_reading(chip, 0, 1550.0)
    assert chip.solves["incremental"] >= 15


def test_every_path_matches_incremental_off():
    # The same step sequence on a chip that solves everything whole: the same fields.
    rng_a, rng_b = np.random.default_rng(8), np.random.default_rng(8)
    fast = frozen_chip(hexagonal(2, 2), seed=8, model="ideal", crosstalk_fraction=0.0)
    slow = frozen_chip(hexagonal(2, 2), seed=8, model="ideal", crosstalk_fraction=0.0, incremental=False)
    random_walk(fast, rng_a, 60, faults=True, settle_s=0.0)
    random_walk(slow, rng_b, 60, faults=True, settle_s=0.0)
    assert set(slow.solves) == {"full"}
    assert fast.solves["incremental"] > 10
    for port in range(fast.mesh.n_ports):
        np.testing.assert_allclose(fast.output_field(port, 1550.0), slow.output_field(port, 1550.0),
                                   rtol=0, atol=TOLERANCE)


def test_wide_steps_give_the_full_solves_bytes():
    chip = frozen_chip(smartlight(), seed=9, model="ideal")
    rng = np.random.default_rng(9)
    for _ in range(10):
        chip.set_current(int(rng.integers(chip.mesh.n_heaters)), float(rng.uniform(0, 3)))
        np.testing.assert_array_equal(chip.output_field(5, 1550.0), full_field(chip, 5, 1550.0))
    assert dict(chip.solves) == {"built": 1, "incremental": 9}


def test_a_realistic_heater_step_re_merges_only_above_the_tbus_it_moved():
    # The default chip: one heater step moves its TBU and, through crosstalk and its tail,
    # a neighbourhood; the solver re-runs the merges above exactly those TBUs.
    chip = frozen_chip(smartlight(), seed=16)
    plan = merge_plan(chip.mesh)
    rng = np.random.default_rng(16)
    chip.output_field(0, 1550.0)
    before = chip.heater_state()
    for _ in range(8):
        chip.set_current(int(rng.integers(chip.mesh.n_heaters)), float(rng.uniform(0, 3)))
        chip.advance(0.03)  # settled: only the step's own footprint moves
        now = chip.heater_state()
        moved = np.flatnonzero((now.phi_top != before.phi_top) | (now.phi_bot != before.phi_bot))
        np.testing.assert_array_equal(chip.output_field(0, 1550.0), full_field(chip, 0, 1550.0))
        solver = chip._solvers[1550.0]
        np.testing.assert_array_equal(np.sort(solver.last_update_tbus), moved)
        assert 0 < len(moved) < chip.mesh.n_tbus
        assert solver.last_update_merges == len(ancestors(plan, moved))
        assert solver.last_update_merges < plan.n_merges or len(moved) > 1
        before = now
    assert chip.solves["incremental"] == 8


def test_optical_params_cached_until_faults_change():
    chip = frozen_chip(hexagonal(2, 2), seed=10, model="ideal")
    first = chip.optical_params()
    assert chip.optical_params() is first
    chip.fail_tbu(1, "dead")
    dead = chip.optical_params()
    assert dead is not first
    assert dead.loss_db[1] == DEAD_LOSS_DB
    assert chip.optical_params() is dead
    chip.repair_all()
    assert chip.optical_params().loss_db[1] == first.loss_db[1]


def test_changed_tbus_counts_tbus_whose_phases_differ():
    chip = frozen_chip(hexagonal(2, 2), seed=11, model="ideal")
    state = chip.heater_state()
    one = MeshState(state.phi_top.copy(), state.phi_bot.copy())
    one.phi_bot[2] += 0.1
    assert changed_tbus(state, state) == 0
    assert changed_tbus(state, one) == 1
    assert changed_tbus(state, MeshState(state.phi_top + 0.1, state.phi_bot)) == chip.mesh.n_tbus


def test_a_changed_chip_is_solved_whole():
    # A new dead TBU is a new optical_params object: the chip's solver is built again.
    chip = frozen_chip(hexagonal(2, 2), seed=11, model="ideal")
    check_reading(chip, 0, 1550.0)
    chip.fail_tbu(1, "dead")
    check_reading(chip, 0, 1550.0)
    assert dict(chip.solves) == {"built": 2}


def test_wavelengths_kept_are_bounded_and_still_exact():
    chip = frozen_chip(hexagonal(1, 2), seed=12, model="ideal", crosstalk_fraction=0.0)
    wavelengths = np.linspace(1540.0, 1560.0, 2 * MAX_SOLVERS)
    for _ in range(2):
        for wl in wavelengths:
            check_reading(chip, 0, float(wl))
            check_reading(chip, 1, float(wl))
    assert len(chip._solvers) == MAX_SOLVERS  # memory stays bounded on a long wavelength sweep


def test_bad_port_is_refused():
    chip = frozen_chip(hexagonal(1, 1), seed=13, model="ideal")
    chip.output_field(0, 1550.0)
    chip.output_field(1, 1550.0)  # a solver now holds the state
    with pytest.raises(StateError, match="input ports must lie"):
        chip.output_field(chip.mesh.n_ports, 1550.0)
    check_reading(chip, 2, 1550.0)


def test_frozen_clock_moves_only_with_advance():
    chip = frozen_chip(hexagonal(1, 1), seed=14)
    assert chip.now_s() == 0.0
    chip.advance(1.5)
    assert chip.now_s() == 1.5


def test_realistic_crosstalk_chip_reads_the_reference_bytes():
    # The default chip (realistic, crosstalk with its tail: every heater step is wide) reads
    # through its kept solver, re-merging above the moved TBUs: the bytes of
    # Chip(incremental=False), which solves every reading whole.
    readings = []
    for incremental in (True, False):
        chip = frozen_chip(hexagonal(2, 3), seed=15, incremental=incremental)
        rng = np.random.default_rng(15)
        fields = []
        for _ in range(30):
            chip.set_current(int(rng.integers(chip.mesh.n_heaters)), float(rng.uniform(0, 3)))
            chip.advance(0.012)
            fields.append(chip.output_field(int(rng.integers(chip.mesh.n_ports)), 1550.0))
        assert dict(chip.solves) == ({"built": 1, "incremental": 29} if incremental else {"full": 30})
        readings.append(np.array(fields))
    np.testing.assert_array_equal(readings[0], readings[1])
