"""The incremental solver against full solves, and what `import photonics.circuit` loads."""

import subprocess
import sys

import numpy as np
import pytest

from photonics.circuit import solve
from photonics.circuit_merge import ancestors, merge_plan
from photonics.circuit_solver import CircuitSolver
from photonics.errors import StateError
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight, square


def _step(state: MeshState, tbus: np.ndarray, rng: np.random.Generator) -> MeshState:
    top, bot = state.phi_top.copy(), state.phi_bot.copy()
    top[tbus] = rng.uniform(0, 2 * np.pi, len(tbus))
    if rng.random() < 0.5:
        bot[tbus] = rng.uniform(0, 2 * np.pi, len(tbus))
    return MeshState(top, bot)


@pytest.mark.parametrize(("name", "n_wl"),
                         [("smartlight", 1), ("smartlight", 20), ("hex", 3), ("square", 40)])
def test_random_update_sequences_equal_full_solves(name, n_wl):
    mesh = {"smartlight": smartlight, "hex": lambda: hexagonal(2, 3), "square": lambda: square(3, 3)}[name]()
    rng = np.random.default_rng([n_wl, len(name)])
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    wl = np.linspace(1545.0, 1555.0, n_wl)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, wl, params)
    n_merges = merge_plan(mesh).n_merges
    for step in range(25):
        # mostly one heater (plus a neighbour, as thermal crosstalk moves), sometimes none or many
        n_changed = [0, 1, 1, 1, 2, 3, mesh.n_tbus // 2][step % 7]
        tbus = rng.choice(mesh.n_tbus, n_changed, replace=False)
        state = _step(state, tbus, rng)
        solver.update(state)
        # only the TBUs that changed, however many (issue 28: a realistic heater step moves
        # 10-37 of smartlight's 71), and only the merges above them
        np.testing.assert_array_equal(np.sort(solver.last_update_tbus), np.sort(tbus))
        if n_changed > 1:  # (a TBU left stale by a sweep's join is re-merged with them)
            assert len(ancestors(merge_plan(mesh), tbus)) <= solver.last_update_merges <= n_merges
        if 0 < n_changed <= 3:  # the path re-merge ran, not a full solve
            assert 0 < solver.last_update_merges < n_merges
        full = solve(mesh, state, wl, params)[0]
        assert np.abs(solver.matrix() - full).max() <= 1e-12
        inputs = [0, mesh.n_ports - 1]
        np.testing.assert_array_equal(solver.matrix(inputs), solver.matrix()[..., inputs])


@pytest.mark.parametrize("name", ["smartlight", "hex"])
def test_a_wide_step_re_merges_only_above_it_and_gives_the_full_solves_bytes(name):
    """A heater step moving a neighbourhood of TBUs (thermal crosstalk): the merges above
    them re-run and nothing else, and at one wavelength the result is the full solve's
    bytes, not merely close to them.
    """
    mesh = smartlight() if name == "smartlight" else hexagonal(3, 3)
    rng = np.random.default_rng(6)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    plan = merge_plan(mesh)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, [1550.0], params)
    centers = mesh.tbu_centers()
    for step in range(12):
        hot = int(rng.integers(mesh.n_tbus))  # the stepped heater's TBU and its neighbourhood
        near = np.flatnonzero(np.linalg.norm(centers - centers[hot], axis=1) <= 2.5 * (1 + step % 3))
        state = _step(state, near, rng)
        assert solver.update(state) == len(near)
        above = ancestors(plan, near)
        assert solver.last_update_merges == len(above)
        assert len(above) < plan.n_merges or len(near) > 1
        on_paths = set()  # tree nodes above a moved TBU, walked up the parent links
        for t in near:
            node = int(plan.leaf_node[t])
            while plan.parent[node] >= 0:
                node = int(plan.parent[node])
                on_paths.add(int(plan.node_merge[node]))
        assert set(above.tolist()) == on_paths
        np.testing.assert_array_equal(solver.matrix([0, 3]),
                                      solve(mesh, state, [1550.0], params, inputs=[0, 3])[0])


def test_heater_sweep_joins_one_tbu_to_the_rest_of_the_mesh():
    """One TBU swept: the rest of the mesh is joined once, then each step is one join."""
    mesh = smartlight()
    rng = np.random.default_rng(3)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, [1550.0], params)
    plan = merge_plan(mesh)
    depth, node = 0, plan.leaf_node[17]
    while plan.parent[node] >= 0:
        node, depth = plan.parent[node], depth + 1
    for step in range(5):
        state = _step(state, np.array([17]), rng)
        assert solver.update(state) == 1
        # first step: a path re-merge; second: depth - 1 joins build the complement, plus
        # the TBU's own join; then one join per step
        assert solver.last_update_merges == [depth, depth, 1, 1, 1][step]
        assert np.abs(solver.matrix() - solve(mesh, state, [1550.0], params)[0]).max() <= 1e-12
    n_merges = plan.n_merges
    for tbus in ([40], [40], [17, 40], [3]):  # another TBU: 17's path is re-merged with it
        state = _step(state, np.array(tbus), rng)
        solver.update(state)
        assert 1 <= solver.last_update_merges < n_merges
        assert np.abs(solver.matrix() - solve(mesh, state, [1550.0], params)[0]).max() <= 1e-12


def test_params_change_resolves_everything():
    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(4)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, [1549.0, 1551.0])
    chip = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    assert solver.update(state, chip) == mesh.n_tbus
    assert np.abs(solver.matrix() - solve(mesh, state, [1549.0, 1551.0], chip)[0]).max() <= 1e-12
    assert solver.update(state) == 0  # nothing changed: nothing re-run
    assert solver.last_update_merges == 0


def test_bad_input_is_refused_clearly():
    mesh = hexagonal(1, 2)
    rng = np.random.default_rng(5)
    with pytest.raises(StateError, match="one state"):
        CircuitSolver(mesh, MeshState.random(mesh, rng, n_states=2))
    solver = CircuitSolver(mesh, MeshState.random(mesh, rng))
    with pytest.raises(StateError, match="TBUs"):
        solver.update(MeshState(np.zeros(3), np.zeros(3)))
    with pytest.raises(StateError, match="input ports"):
        solver.matrix([mesh.n_ports])
    with pytest.raises(StateError, match="wavelengths"):
        CircuitSolver(mesh, MeshState.random(mesh, rng), [-1.0])


def test_import_circuit_does_not_load_scipy_sparse_or_numba():
    """The sparse LU fallback imports scipy.sparse when it first runs, not at import; the
    compiled merge imports numba (and loads its cached machine code) at the first solve.
    """
    code = ("import sys, photonics.circuit, photonics.circuit_solver; "
            "print(any(m.startswith('scipy.sparse') for m in sys.modules), 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
    code = ("import sys, numpy as np; from photonics.circuit import solve_sparse; "
            "from photonics.topology import hexagonal; from photonics.state import MeshState; "
            "m = hexagonal(1, 1); solve_sparse(m, MeshState.uniform(m, 'bar')); "
            "print('scipy.sparse.linalg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # the check above can fail: the fallback does load it


def test_a_sweep_resumed_after_another_tbu_moved_sees_that_move():
    """TBU 17 swept (its complement joined), TBU 40 stepped, then 17 swept again: the second
    sweep's complement must hold 40's new phases (it was reused stale before issue 28).
    """
    mesh = smartlight()
    rng = np.random.default_rng(7)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    solver = CircuitSolver(mesh, state, [1550.0], params)
    for tbus in ([17], [17], [40], [17], [17], [17]):
        state = _step(state, np.array(tbus), rng)
        solver.update(state)
        assert np.abs(solver.matrix() - solve(mesh, state, [1550.0], params)[0]).max() <= 1e-12
