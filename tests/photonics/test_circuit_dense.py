"""The compiled merge against an independent dense solve of the whole circuit.

The reference builds the textbook system from the TBU transfer matrices alone: with ``S``
the block-diagonal scattering matrix of every TBU, ``L`` the links (a wave leaving one
TBU port enters its peer times the link's transmission) and ``E`` the mesh-port
selector, the waves entering the TBUs solve ``(I - L S) a = E x`` and the ports read
``y = E.T S a``. One ``np.linalg.solve`` per (state, wavelength): no merge tree, no plan,
no sparse LU, nothing shared with the code under test but the transfer matrices.
"""

import numpy as np
import pytest

from photonics.circuit import solve, tbu_transfers
from photonics.circuit_solver import CircuitSolver, ColumnSolver
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import Mesh, hexagonal, smartlight, square, triangular

AGREE = 1e-9  # the bar for agreement with an independent solve


def dense_solve(mesh: Mesh, params, state: MeshState, wl: np.ndarray) -> np.ndarray:
    """Port matrices (n_states, n_wl, n_ports, n_ports) by one dense solve per block."""
    T = tbu_transfers(params, state, wl)  # (S, W, n, 2, 2)
    n, m = mesh.n_tbus, 4 * mesh.n_tbus
    t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
    L = np.zeros((m, m), dtype=complex)
    for (p, q), t in zip(mesh.links, t_link, strict=True):
        L[p, q] = L[q, p] = t
    E = np.zeros((m, mesh.n_ports))
    E[mesh.port_tbu_ports, np.arange(mesh.n_ports)] = 1.0
    out = np.empty((*T.shape[:2], mesh.n_ports, mesh.n_ports), dtype=complex)
    for s in range(T.shape[0]):
        for w in range(T.shape[1]):
            S = np.zeros((m, m), dtype=complex)
            for t in range(n):
                S[4 * t + 2: 4 * t + 4, 4 * t: 4 * t + 2] = T[s, w, t]  # forward: b[2+i] = T a[j]
                S[4 * t: 4 * t + 2, 4 * t + 2: 4 * t + 4] = T[s, w, t].T  # backward
            a = np.linalg.solve(np.eye(m) - L @ S, E)
            out[s, w] = E.T @ S @ a
    return out


@pytest.mark.parametrize("name", ["smartlight", "hex", "square", "tri"])
def test_merge_equals_an_independent_dense_solve(name):
    mesh = {"smartlight": smartlight, "hex": lambda: hexagonal(2, 3), "square": lambda: square(3, 3),
            "tri": lambda: triangular(2, 4)}[name]()
    rng = np.random.default_rng([7, len(name)])
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=2)
    wl = np.array([1530.33, 1550.0, 1561.7])  # 6 blocks: a full group of lanes and a partial one
    ref = dense_solve(mesh, params, state, wl)
    assert np.abs(solve(mesh, state, wl, params) - ref).max() <= AGREE
    one = MeshState(state.phi_top[0], state.phi_bot[0])
    solver = CircuitSolver(mesh, one, wl, params)
    assert np.abs(solver.matrix() - ref[0]).max() <= AGREE
    col = ColumnSolver(mesh, params, 1550.0).field(one, 3)
    assert np.abs(col - ref[0, 1, :, 3]).max() <= AGREE


def test_a_block_gives_the_same_bytes_whatever_batch_it_is_solved_in():
    """Blocks are merged side by side in SIMD lanes: a block's result must not depend on
    which blocks share its lanes or how the batch is chunked (seeded simulations give the
    same bytes under any load).
    """
    mesh = smartlight()
    rng = np.random.default_rng(12)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=3)
    wl = np.linspace(1545.0, 1555.0, 7)
    whole = solve(mesh, state, wl, params)
    for s in range(3):
        for w in (0, 3, 6):
            alone = solve(mesh, MeshState(state.phi_top[s], state.phi_bot[s]), wl[w], params)
            np.testing.assert_array_equal(alone[0, 0], whole[s, w])
