"""The nested-dissection merge solve against the sparse-LU reference."""

import numpy as np
import pytest

from photonics.circuit import solve, solve_sparse
from photonics.circuit_merge import merge_plan
from photonics.physics import PhysicsDefaults, fabricated_params, nominal_params
from photonics.state import MeshState
from photonics.topology import Mesh, hexagonal, smartlight, square, triangular

MESHES = {
    "hex": lambda: hexagonal(2, 3),
    "square": lambda: square(3, 3),
    "tri": lambda: triangular(2, 4),
    "smartlight": smartlight,
    "hex1": lambda: hexagonal(1, 1),
}
LOSSLESS = PhysicsDefaults().lossless()


def _states(mesh: Mesh, kind: str, rng: np.random.Generator) -> MeshState:
    if kind == "random":
        return MeshState.random(mesh, rng, n_states=3)
    return MeshState.uniform(mesh, kind)


@pytest.mark.parametrize("kind", ["random", "bar", "cross"])
@pytest.mark.parametrize("lossless", [False, True])
@pytest.mark.parametrize("name", list(MESHES))
def test_merge_matches_sparse(name, lossless, kind):
    mesh = MESHES[name]()
    assert merge_plan(mesh) is not None  # every generated mesh takes the fast path
    rng = np.random.default_rng([len(name), lossless, len(kind)])
    params = (nominal_params(mesh.n_tbus, mesh.n_links, LOSSLESS) if lossless
              else fabricated_params(mesh.n_tbus, mesh.n_links, rng))
    state = _states(mesh, kind, rng)
    wl = np.array([1540.0, 1549.37, 1550.0, 1555.21, 1560.0])
    fast = solve(mesh, state, wl, params)
    ref = solve_sparse(mesh, state, wl, params)
    assert fast.shape == ref.shape
    assert np.abs(fast - ref).max() <= 1e-9
    if lossless:
        for s in fast.reshape(-1, mesh.n_ports, mesh.n_ports):
            np.testing.assert_allclose(s.conj().T @ s, np.eye(mesh.n_ports), atol=1e-9)
            np.testing.assert_allclose(s, s.T, atol=1e-12)


@pytest.mark.parametrize("lossless", [False, True])
@pytest.mark.parametrize("name", list(MESHES))
def test_batch_last_merges_match_sparse(name, lossless):
    """Enough blocks that the small merges run batch-last (grouped by shape, two-TBU joins
    in closed form) and only the A rows and B-B block of each merge are formed: still
    sparse LU's matrix, symmetric as a reciprocal circuit's must be.
    """
    mesh = MESHES[name]()
    rng = np.random.default_rng([len(name), lossless, 16])
    params = (nominal_params(mesh.n_tbus, mesh.n_links, LOSSLESS) if lossless
              else fabricated_params(mesh.n_tbus, mesh.n_links, rng))
    state = MeshState.random(mesh, rng, n_states=2)
    wl = np.linspace(1540.0, 1560.0, 17)  # 34 blocks: past the all-batch-first threshold
    fast = solve(mesh, state, wl, params)
    ref = solve_sparse(mesh, state, wl, params)
    assert np.abs(fast - ref).max() <= 1e-12
    np.testing.assert_allclose(fast, np.swapaxes(fast, -1, -2), atol=1e-12)


def test_input_subset_and_large_batch_match_sparse():
    """More blocks than one chunk (threaded path) and a subset of inputs."""
    mesh = smartlight()
    rng = np.random.default_rng(11)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=2)
    wl = np.linspace(1545.0, 1555.0, 101)
    inputs = [3, 0, 17, 39]
    fast = solve(mesh, state, wl, params, inputs=inputs)
    ref = solve_sparse(mesh, state, wl, params, inputs=inputs)
    assert fast.shape == (2, 101, mesh.n_ports, 4)
    assert np.abs(fast - ref).max() <= 1e-9
    full = solve(mesh, state, wl[:3], params)
    np.testing.assert_allclose(full[..., inputs], fast[:, :3], atol=1e-13)


def test_single_wavelength_scalar_and_single_tbu(single_tbu):
    mesh = hexagonal(2, 2)
    state = MeshState.random(mesh, np.random.default_rng(5))
    assert np.abs(solve(mesh, state, 1550.0) - solve_sparse(mesh, state, 1550.0)).max() <= 1e-12
    one = MeshState(np.array([0.7]), np.array([0.1]))
    assert merge_plan(single_tbu) is not None
    np.testing.assert_allclose(solve(single_tbu, one, [1550.0]), solve_sparse(single_tbu, one, [1550.0]),
                               atol=1e-15)


def test_custom_mesh_without_a_plan_falls_back_to_sparse():
    """A TBU whose two ends are linked to each other is never cut, so the merge declines."""
    mesh = Mesh(
        kind="custom", rows=0, cols=0, tbu_names=("tbu:0", "tbu:1"),
        tbu_xy=np.array([[[0.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]]),
        links=np.array([[1, 3], [2, 4]]), port_tbu_ports=np.array([0, 5, 6, 7]),
        port_names=("port:0", "port:1", "port:2", "port:3"),
    )
    assert merge_plan(mesh) is None
    state = MeshState(np.array([0.3, 1.1]), np.array([0.0, 0.4]))
    wl = [1549.0, 1551.0]
    np.testing.assert_array_equal(solve(mesh, state, wl), solve_sparse(mesh, state, wl))


@pytest.mark.parametrize("name", ["smartlight", "hex", "tri"])
def test_one_wavelength_runs_the_one_lane_build_with_the_batch_s_bytes(name):
    """A single block runs the one-lane build of the merge kernels (issue 28: the ``LANES``-lane
    build computes empty lanes beside it); it is the same source and the same IEEE
    operations in the same order, so each wavelength alone gives exactly the bytes it gets
    inside a batch (the simulated chip's readings and a seeded calibration rely on it).
    """
    from photonics.circuit_merge import lanes_for
    from photonics.merge_layout import LANES

    assert lanes_for(1) == 1
    assert lanes_for(5) == LANES
    mesh = MESHES[name]()
    rng = np.random.default_rng(28)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng, n_states=1)
    wl = np.array([1540.0, 1549.37, 1550.0, 1555.21, 1560.0])
    batch = solve(mesh, state, wl, params)
    for k, w in enumerate(wl):
        alone = solve(mesh, state, [w], params)
        assert np.array_equal(alone[:, 0], batch[:, k])
    assert np.abs(batch - solve_sparse(mesh, state, wl, params)).max() <= 1e-9


@pytest.mark.parametrize("make", ["nominal", "fabricated", "sloped"])
@pytest.mark.parametrize("kind", ["bar", "cross", "random"])
def test_compiled_transfer_matrices_are_the_numpy_arm_factors_bytes(make, kind):
    """``tbu_transfers`` runs the compiled ``transfer_blocks``; the gradient and the
    incremental solver still build matrices from ``arm_factors``/``arm_transfers`` (numpy).
    Both must give the same bytes (signed zeros included: ideal TBUs in bar or cross have
    exact zeros), or a re-merged TBU would differ from the full solve's.
    """
    from photonics.circuit import arm_factors, arm_transfers, tbu_transfers

    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(5)
    params = {"nominal": lambda: nominal_params(mesh.n_tbus, mesh.n_links),
              "fabricated": lambda: fabricated_params(mesh.n_tbus, mesh.n_links, rng),
              "sloped": lambda: fabricated_params(mesh.n_tbus, mesh.n_links, rng,
                                                  PhysicsDefaults(coupler_slope_per_nm=0.002))}[make]()
    state = MeshState.random(mesh, rng, n_states=3) if kind == "random" else MeshState.uniform(mesh, kind)
    for wl in (np.array([1550.0]), np.linspace(1500.0, 1600.0, 9)):
        k, top, bot = arm_factors(params, state, wl)
        assert tbu_transfers(params, state, wl).tobytes() == arm_transfers(top, bot, k).tobytes()
