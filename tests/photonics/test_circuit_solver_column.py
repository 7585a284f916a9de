"""ColumnSolver (the simulated chip's whole-mesh reading) gives photonics.circuit.solve's bytes."""

import numpy as np
import pytest

from photonics.circuit import solve, tbu_transfers
from photonics.circuit_solver import ColumnSolver, TransferCache
from photonics.errors import StateError
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight, square, triangular

MESHES = [smartlight(), hexagonal(2, 3), square(3, 3), triangular(3, 3)]


def _random(mesh, seed):
    rng = np.random.default_rng(seed)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState(rng.uniform(0, 2 * np.pi, mesh.n_tbus), rng.uniform(0, 2 * np.pi, mesh.n_tbus))
    return params, state, rng


@pytest.mark.parametrize("mesh", MESHES, ids=lambda m: f"{m.kind}{m.rows}x{m.cols}")
@pytest.mark.parametrize("wl", [1550.0, 1561.7])
def test_same_bytes_as_the_general_solve(mesh, wl):
    params, state, rng = _random(mesh, 1)
    col = ColumnSolver(mesh, params, wl)
    for _ in range(3):
        state = MeshState(rng.uniform(0, 2 * np.pi, mesh.n_tbus), rng.uniform(0, 2 * np.pi, mesh.n_tbus))
        for port in (0, mesh.n_ports // 2, mesh.n_ports - 1):
            want = solve(mesh, state, [wl], params, inputs=[port])[0, 0, :, 0]
            np.testing.assert_array_equal(col.field(state, port), want)


def test_transfer_cache_is_tbu_transfers():
    mesh = hexagonal(2, 2)
    params, state, _ = _random(mesh, 2)
    for wl in (1530.0, 1550.0, 1565.5):
        want = tbu_transfers(params, state, np.array([wl]))[0, 0]
        got = TransferCache(params, wl).transfers(np.arange(mesh.n_tbus), state.phi_top, state.phi_bot)
        np.testing.assert_array_equal(got, want)
        some = np.array([3, 0, 7])
        np.testing.assert_array_equal(TransferCache(params, wl).transfers(some, state.phi_top, state.phi_bot),
                                      want[some])


def test_bad_input_is_refused():
    mesh = hexagonal(1, 1)
    params, state, _ = _random(mesh, 3)
    col = ColumnSolver(mesh, params, 1550.0)
    with pytest.raises(StateError, match="input ports"):
        col.field(state, mesh.n_ports)
    batch = MeshState(np.zeros((2, mesh.n_tbus)), np.zeros((2, mesh.n_tbus)))
    with pytest.raises(StateError, match="one state"):
        col.field(batch, 0)
