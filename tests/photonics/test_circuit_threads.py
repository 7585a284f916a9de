"""Worker threads of the chunked solve run with one BLAS thread each (no oversubscription)."""

import numpy as np
import pytest

from photonics import circuit
from photonics.state import MeshState
from photonics.topology import hexagonal


def test_workers_run_with_single_threaded_blas(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]:
        pytest.skip("no BLAS library that threadpoolctl can see")
    seen: list[int] = []

    def work(chunk: slice) -> np.ndarray:
        seen.extend(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")
        return np.zeros(chunk.stop - chunk.start)

    monkeypatch.setattr(circuit, "_cores", lambda: 2)  # two workers even on a 1-CPU runner
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # as an unconfigured machine has
        out = circuit._run_chunked(work, 256, 64)
    assert sum(len(o) for o in out) == 256  # every block in exactly one chunk
    assert seen
    assert set(seen) == {1}
    # and the solve through that path still equals the single-threaded one
    mesh = hexagonal(2, 2)
    state = MeshState.random(mesh, np.random.default_rng(1))
    wl = np.linspace(1545.0, 1555.0, 200)
    threaded = circuit.solve(mesh, state, wl)
    monkeypatch.setattr(circuit, "_cores", lambda: 1)
    np.testing.assert_array_equal(threaded, circuit.solve(mesh, state, wl))


def test_solve_threads_are_capped_by_the_environment(monkeypatch):
    """LUMION_SOLVE_THREADS caps the solve's threads (a campaign's worker processes set 1)."""
    from campaigns.engine import one_solve_thread

    monkeypatch.setattr(circuit.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.delenv(circuit.SOLVE_THREADS_ENV, raising=False)
    assert circuit._cores() == 2
    monkeypatch.setenv(circuit.SOLVE_THREADS_ENV, "1")
    assert circuit._cores() == 1
    monkeypatch.setenv(circuit.SOLVE_THREADS_ENV, "8")  # a cap, never more than the cores
    assert circuit._cores() == 2
    monkeypatch.setenv(circuit.SOLVE_THREADS_ENV, "lots")  # not a number: ignored
    assert circuit._cores() == 2
    monkeypatch.setenv(circuit.SOLVE_THREADS_ENV, "2")
    one_solve_thread()  # what every local campaign worker process runs first
    assert circuit._cores() == 1


def test_chunks_that_cut_states_fill_their_own_transfer_matrices(monkeypatch):
    """Each worker computes the forward matrices of its own chunk; chunks start at multiples of
    the lane count and cut states mid-sweep (5 states x 37 wavelengths in chunks of 64): the
    batch equals each state solved alone, bit for bit, and the matrices equal tbu_transfers'.
    """
    from photonics.physics import fabricated_params

    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(5)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    phases = rng.uniform(0, 2 * np.pi, (2, 5, mesh.n_tbus))
    batch = MeshState(phi_top=phases[0], phi_bot=phases[1])
    wl = np.linspace(1530.0, 1565.0, 37)
    monkeypatch.setattr(circuit, "_cores", lambda: 2)
    starts: list[int] = []
    run = circuit._run_chunked

    def spy(fn, n, chunk, align=1):
        return run(lambda c: starts.append(c.start) or fn(c), n, chunk, align)

    monkeypatch.setattr(circuit, "_run_chunked", spy)
    together = circuit.solve(mesh, batch, wl, params)
    assert len(starts) > 2
    assert all(s % circuit.LANES == 0 for s in starts)
    assert any(s % len(wl) for s in starts)  # some chunk starts inside a state's sweep
    monkeypatch.setattr(circuit, "_run_chunked", run)
    for s in range(5):
        alone = MeshState(phi_top=phases[0, s], phi_bot=phases[1, s])
        np.testing.assert_array_equal(together[s], circuit.solve(mesh, alone, wl, params)[0])
        np.testing.assert_array_equal(circuit.tbu_transfers(params, batch, wl)[s],
                                      circuit.tbu_transfers(params, alone, wl)[0])
