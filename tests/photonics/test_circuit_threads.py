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
