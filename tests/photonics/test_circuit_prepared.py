"""A solve prepared once for one chip and set of wavelengths (issue 28: at one wavelength the
Python around the compiled call was a third of a solve): the same bytes as ``solve``, its
checks done once, nothing looked up per call.
"""

import numpy as np
import pytest

from photonics import circuit
from photonics.circuit import PreparedSolve, solve, solve_sparse
from photonics.errors import StateError
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import Mesh, hexagonal, smartlight


@pytest.mark.parametrize("make", [smartlight, lambda: hexagonal(2, 2)])
@pytest.mark.parametrize("n_wl", [1, 5])
@pytest.mark.parametrize("n_states", [1, 3])
def test_a_prepared_solve_gives_solve_s_bytes(make, n_wl, n_states):
    """Every input and a subset, one state and a batch, one wavelength (the one-lane build)
    and several: byte for byte what ``solve`` gives for the same chip, state and wavelengths.
    """
    mesh = make()
    rng = np.random.default_rng([n_wl, n_states, mesh.n_tbus])
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    wl = np.linspace(1538.0, 1561.0, n_wl)
    some = [mesh.n_ports - 1, 0, 2]
    every, subset = PreparedSolve(mesh, params, wl), PreparedSolve(mesh, params, wl, inputs=some)
    for _ in range(2):  # a second call on the same solver: nothing kept from the first
        state = MeshState.random(mesh, rng, n_states=n_states)
        assert every(state).tobytes() == solve(mesh, state, wl, params).tobytes()
        assert subset(state).tobytes() == solve(mesh, state, wl, params, inputs=some).tobytes()
    assert every(state).shape == (n_states, n_wl, mesh.n_ports, mesh.n_ports)


def test_a_prepared_solve_looks_nothing_up_per_call(monkeypatch):
    """The chip's constants and the merge plan are found when the solver is made; a call only
    checks the state and runs the compiled solve.
    """
    mesh = smartlight()
    rng = np.random.default_rng(5)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    prepared = PreparedSolve(mesh, params, [1550.0])
    state = MeshState.random(mesh, rng)
    want = solve(mesh, state, [1550.0], params)
    monkeypatch.setattr(circuit, "_chip_constants", lambda *a: pytest.fail("chip constants looked up"))
    monkeypatch.setattr(circuit, "merge_plan", lambda *a: pytest.fail("merge plan looked up"))
    monkeypatch.setattr(circuit, "_checked", lambda *a: pytest.fail("wavelengths and inputs checked again"))
    assert prepared(state).tobytes() == want.tobytes()


def test_a_prepared_solve_refuses_what_solve_refuses():
    """Bad wavelengths, inputs or chip when prepared, a state of another mesh when called: the
    same StateError as ``solve``, never a result.
    """
    mesh = hexagonal(2, 2)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(1))
    with pytest.raises(StateError, match="input ports"):
        PreparedSolve(mesh, params, [1550.0], inputs=[mesh.n_ports])
    with pytest.raises(StateError, match="wavelengths"):
        PreparedSolve(mesh, params, [1550.0, -1.0])
    with pytest.raises(StateError, match="wavelengths"):
        PreparedSolve(mesh, params, [[1550.0]])
    other = hexagonal(2, 3)
    with pytest.raises(StateError, match="links"):
        PreparedSolve(other, params, [1550.0])
    with pytest.raises(StateError, match="TBUs"):
        PreparedSolve(mesh, params, [1550.0])(MeshState.random(other, np.random.default_rng(2)))


def test_a_prepared_solve_falls_back_to_sparse_lu_for_a_non_finite_block(monkeypatch):
    """A block the merge leaves non-finite goes to sparse LU, as in ``solve`` (here a NaN
    wavelength at index 2 of 3).
    """
    mesh = hexagonal(2, 2)
    sparse: list[int] = []

    def spy(plan, T, inputs, out):
        sparse.append(len(T))
        out[:] = 0.0

    monkeypatch.setattr(circuit, "_solve_blocks", spy)
    state = MeshState.random(mesh, np.random.default_rng(4))
    PreparedSolve(mesh, None, [1545.0, 1550.0, 1555.0])(state)
    assert not sparse
    PreparedSolve(mesh, None, [1545.0, 1550.0, np.nan])(state)
    assert sparse == [3]


def test_a_mesh_without_a_merge_plan_is_solved_by_sparse_lu():
    """A mesh the merge does not apply to (a TBU whose two ends are linked to each other) is
    solved by sparse LU, prepared or not.
    """
    mesh = Mesh(
        kind="custom", rows=0, cols=0, tbu_names=("tbu:0", "tbu:1"),
        tbu_xy=np.array([[[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]]),
        links=np.array([[1, 3], [2, 4]]), port_tbu_ports=np.array([0, 5, 6, 7]),
        port_names=("port:0", "port:1", "port:2", "port:3"),
    )
    state = MeshState(np.array([0.3, 1.1]), np.array([0.0, 0.4]))
    wl = [1549.0, 1551.0]
    np.testing.assert_array_equal(PreparedSolve(mesh, None, wl)(state), solve_sparse(mesh, state, wl))
