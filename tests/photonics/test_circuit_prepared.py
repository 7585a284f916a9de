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


def _counting(prepared: PreparedSolve) -> list[int]:
    """Count the calls of ``prepared``'s one-block kernel (the packed-argument path)."""
    assert prepared._one is not None, "the one-wavelength solver has no packed path"
    calls, real = [], prepared._one

    def one(*args):
        calls.append(1)
        return real(*args)

    prepared._one = one
    return calls


def test_one_wavelength_packs_the_kernel_s_arguments_correctly():
    """One state at one wavelength takes the packed path (the compiled call's constant arguments
    packed once per thread in one int64 array): byte for byte ``solve``'s result on three meshes,
    every input and a subset, in one thread alternating between solvers of meshes of different
    sizes (a larger plan replaces the thread's arenas: the packed pointers must stay valid), and
    a state whose phases are a strided view (not contiguous: the general path, the same bytes).
    A slot packed wrong (a pointer or size swapped, the arenas of another size) changes the bytes.
    """
    meshes = [hexagonal(2, 2), smartlight(), hexagonal(6, 6)]
    rng = np.random.default_rng(2611)
    solvers = []
    for mesh in meshes:
        params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
        some = [mesh.n_ports - 1, 0, 3]
        for inputs in (None, some):
            prepared = PreparedSolve(mesh, params, [1547.5], inputs=inputs)
            solvers.append((mesh, params, inputs, prepared, _counting(prepared)))
    for _ in range(2):
        for mesh, params, inputs, prepared, _calls in solvers:
            state = MeshState.random(mesh, rng)
            got = prepared(state)
            assert got.shape == (1, 1, mesh.n_ports, mesh.n_ports if inputs is None else len(inputs))
            assert got.tobytes() == solve(mesh, state, [1547.5], params, inputs=inputs).tobytes()
            assert prepared(state) is not got  # a fresh array per call
    assert all(len(calls) == 4 for *_, calls in solvers)
    mesh, params, inputs, prepared, calls = solvers[2]
    wide = MeshState.random(mesh, rng, n_states=2)
    pairs = [np.stack(p, axis=1) for p in (wide.phi_top, wide.phi_bot)]  # (n_tbus, 2) each
    strided = MeshState(pairs[0][:, 0], pairs[1][:, 0])  # a column: every other float
    assert not strided.phi_top.flags.c_contiguous
    assert prepared(strided).tobytes() == solve(mesh, strided, [1547.5], params).tobytes()
    assert len(calls) == 4
    state = MeshState.random(mesh, rng)
    frozen = MeshState(state.phi_top.copy(), state.phi_bot.copy())
    for a in (frozen.phi_top, frozen.phi_bot):
        a.flags.writeable = False  # read-only phases: the packed path reads them as they are
    assert prepared(frozen).tobytes() == solve(mesh, state, [1547.5], params).tobytes()
    assert len(calls) == 5

    class Phases(np.ndarray):  # a subclass (MeshState makes plain arrays; a duck-typed state might
        pass  # not): never read through its object's layout, the general path, the same bytes

    sub = MeshState(state.phi_top, state.phi_bot)
    for name in ("phi_top", "phi_bot"):
        object.__setattr__(sub, name, getattr(state, name).view(Phases))
    assert prepared(sub).tobytes() == solve(mesh, state, [1547.5], params).tobytes()
    assert len(calls) == 5


def test_one_wavelength_from_two_threads_gives_solve_s_bytes():
    """Two threads calling one prepared one-wavelength solver (each with arenas, and packed
    arguments pointing into them, of its own): every result is ``solve``'s, byte for byte.
    """
    import threading

    mesh = smartlight()
    rng = np.random.default_rng(77)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    prepared = PreparedSolve(mesh, params, [1552.0])
    states = [MeshState.random(mesh, rng) for _ in range(6)]
    want = [solve(mesh, s, [1552.0], params).tobytes() for s in states]
    bad: list[int] = []
    start = threading.Barrier(2)

    def work(order: list[int]) -> None:
        start.wait()
        for _ in range(40):
            for i in order:
                if prepared(states[i]).tobytes() != want[i]:
                    bad.append(i)

    threads = [threading.Thread(target=work, args=(o,)) for o in ([0, 1, 2, 3, 4, 5], [5, 3, 1, 4, 2, 0])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_one_wavelength_keeps_the_state_check_and_the_sparse_fallback(monkeypatch):
    """On the packed path too: a state of another mesh is refused with solve's StateError, and a
    block the merge leaves non-finite (a NaN wavelength) goes to sparse LU.
    """
    mesh = hexagonal(2, 2)
    state = MeshState.random(mesh, np.random.default_rng(4))
    with pytest.raises(StateError, match="TBUs"):
        PreparedSolve(mesh, None, [1550.0])(MeshState.random(hexagonal(2, 3), np.random.default_rng(2)))
    sparse: list[int] = []

    def spy(plan, T, inputs, out):
        sparse.append(len(T))
        out[:] = 0.0

    monkeypatch.setattr(circuit, "_solve_blocks", spy)
    prepared = PreparedSolve(mesh, None, [np.nan])
    calls = _counting(prepared)
    prepared(state)
    assert calls == [1]
    assert sparse == [1]
