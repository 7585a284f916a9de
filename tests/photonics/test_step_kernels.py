"""The single-wavelength step kernels (photonics.step_kernels) give the numpy path's bytes.

A seeded simulation must give the same map whichever path computed its readings, so the
compiled step is held to the numpy code it replaced bit for bit, not to a tolerance.
"""

import numpy as np
import pytest

from calibration.model import self_phase
from instruments.sim.chip import Chip, settle_decay
from photonics import step_kernels as numba_kernels
from photonics.circuit_solver import CircuitSolver
from photonics.kernel_loader import step_kernels
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight


def _steps(mesh, rng, n_steps):
    """States of a calibration-like walk: neighbourhood steps, sweeps of one TBU (whose
    complement join leaves entries stale), repeats, and steps of every TBU.
    """
    state = MeshState.random(mesh, rng)
    sweep = int(rng.integers(mesh.n_tbus))
    for i in range(n_steps):
        top, bot = state.phi_top.copy(), state.phi_bot.copy()
        kind = i % 9
        if kind in (0, 1, 3, 8):  # a sweep of one TBU (resumed after everything moved)
            top[sweep] = rng.uniform(0, 6)
        elif kind == 4:  # the same state again
            pass
        elif kind == 2:  # everything moved (a temperature step)
            top += rng.normal(0, 0.01, mesh.n_tbus)
        else:  # a heater step moving a neighbourhood through crosstalk
            moved = rng.choice(mesh.n_tbus, int(rng.integers(2, mesh.n_tbus // 2)), replace=False)
            top[moved] += rng.normal(0, 0.1, len(moved))
            bot[moved[:2]] += 0.05
            sweep = int(moved[0])
        state = MeshState(top, bot)
        yield state


@pytest.mark.parametrize("mesh", [smartlight(), hexagonal(2, 3)], ids=["smartlight", "hex"])
def test_update_phases_equals_update_bit_for_bit(mesh):
    rng = np.random.default_rng(28)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    first = MeshState.random(mesh, rng)
    numpy_path = CircuitSolver(mesh, first, [1551.0], params)
    compiled = CircuitSolver(mesh, first, [1551.0], params)
    for state in _steps(mesh, rng, 60):
        assert compiled.update_phases(state.phi_top.copy(), state.phi_bot.copy()) == numpy_path.update(state)
        np.testing.assert_array_equal(compiled.last_update_tbus, numpy_path.last_update_tbus)
        assert compiled.last_update_merges == numpy_path.last_update_merges
        assert compiled.matrix().tobytes() == numpy_path.matrix().tobytes()
        for port in (0, mesh.n_ports - 1):
            assert compiled.column(port).tobytes() == numpy_path.matrix([port])[0, :, 0].tobytes()


def test_a_changed_chip_after_compiled_steps_is_solved_with_its_new_constants():
    mesh = smartlight()
    rng = np.random.default_rng(3)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    other = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, [1550.0], params)
    solver.update_phases(state.phi_top + 0.1, state.phi_bot.copy())
    solver.update(state, other)  # the chip changed (a dead TBU): new transfer constants
    moved = MeshState(state.phi_top + 0.2, state.phi_bot)
    solver.update_phases(moved.phi_top.copy(), moved.phi_bot.copy())
    whole = CircuitSolver(mesh, moved, [1550.0], other)
    assert solver.matrix().tobytes() == whole.matrix().tobytes()


def _numpy_settle(chip: Chip, currents: np.ndarray, fast: float, slow: float):
    """What Chip.set_currents computed in numpy before the kernel (HeaterModel.phases and
    the superposed responses): (to, fast_left, slow_left).
    """
    h = chip._truth.heaters
    to = h.phases(currents, with_alpha=False)
    share = chip._truth.realism.slow_fraction if chip._truth.realism else 0.0
    fl = fast * chip._fast_left + (1 - share) * (to - chip._to)
    sl = slow * chip._slow_left + share * (to - chip._to)
    return to, fl, sl


@pytest.mark.parametrize("model", ["realistic", "ideal"])
def test_settle_step_equals_the_numpy_heater_phases_and_settling(model):
    chip = Chip(smartlight(), seed=11, model=model)
    rng = np.random.default_rng(5)
    for _ in range(12):
        currents = rng.uniform(0, 4, chip.mesh.n_heaters)
        currents[rng.integers(chip.mesh.n_heaters)] = 0.0
        fast, slow = settle_decay(chip.now_s() - chip._set_at_s, chip._truth.realism)
        want = _numpy_settle(chip, currents, fast, slow)
        chip.set_currents(currents)
        for got, ref in zip((chip._to, chip._fast_left, chip._slow_left), want, strict=True):
            assert got.tobytes() == ref.tobytes()
        chip.advance(float(rng.choice([0.0, 1e-6, 3e-4, 1.0])))


def test_the_loaded_machine_code_and_numbas_dispatcher_agree():
    """The C entry points mapped by the kernel loader run the same source as numba's
    dispatcher (the loader's fallback when the object code cannot be used).
    """
    chip = Chip(smartlight(), seed=2)
    h = chip._truth.heaters
    K = h.crosstalk.tocsr()
    s = self_phase(np.random.default_rng(1).uniform(0, 3, chip.mesh.n_heaters), h.rho2, h.rho3)
    outs = []
    for fn in (step_kernels()["settle_step"], numba_kernels.settle_step):
        arrays = [np.full(len(s), 0.25), np.full(len(s), -0.5), np.full(len(s), 0.125)]
        fn(s, h.eta, h.kappa_per_mw, True, K.indptr.astype(np.int64), K.indices.astype(np.int64), K.data,
           *arrays, 0.5, 0.75, 0.03)
        outs.append(b"".join(a.tobytes() for a in arrays))
    assert outs[0] == outs[1]


def test_a_chip_served_over_a_wire_has_its_step_kernels_loaded(monkeypatch):
    """A served chip's first current setting must not compile the step kernels inside a
    client's time-out (a fresh clone): putting it on the wall clock loads them.
    """
    from photonics import kernel_loader

    monkeypatch.setattr(kernel_loader, "_STEP_LOADED", {})
    chip = Chip(hexagonal(1, 1), seed=1)
    assert not kernel_loader._STEP_LOADED  # making a chip loads nothing
    chip.follow_wall_clock()
    assert set(kernel_loader._STEP_LOADED) == {"settle_step", "step_transfers"}
