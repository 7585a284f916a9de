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


def test_chunks_shrink_towards_the_end_of_a_batch_on_two_cores(monkeypatch):
    """On two cores the last chunks are small (at most _PARALLEL_MIN rounded to the lanes, plus
    what would otherwise be left as a sliver), so the workers finish close together: with equal
    64-block chunks one worker could be left alone with a whole last chunk. Every block is in
    exactly one chunk, in order, each starting at a multiple of the lane count; one core keeps
    the equal chunks (nothing to balance).
    """
    seen: list[slice] = []
    monkeypatch.setattr(circuit, "_cores", lambda: 2)
    circuit._run_chunked(seen.append, 1000, 64, circuit.LANES)
    seen.sort(key=lambda c: c.start)
    assert [c.start for c in seen[1:]] == [c.stop for c in seen[:-1]]
    assert (seen[0].start, seen[-1].stop) == (0, 1000)
    assert all(c.start % circuit.LANES == 0 for c in seen)
    sizes = [c.stop - c.start for c in seen]
    assert max(sizes) == 64
    assert all(s <= 2 * circuit._PARALLEL_MIN for s in sizes[-3:])
    assert sizes == sorted(sizes[:-1], reverse=True) + sizes[-1:]  # never growing, but the last
    seen.clear()
    monkeypatch.setattr(circuit, "_cores", lambda: 1)
    circuit._run_chunked(seen.append, 1000, 64, circuit.LANES)
    assert [c.stop - c.start for c in seen] == [64] * 15 + [40]


def test_the_calling_thread_takes_chunks_and_its_error_stops_the_rest(monkeypatch):
    """On two cores the calling thread works beside one pool thread (each takes the next chunk
    not yet taken: every block in exactly one chunk, results in order). When the caller's chunk
    raises, the chunks left are not started and the pool thread's current one has finished (it
    writes into the caller's arrays) before the error reaches the caller.
    """
    import threading
    import time

    monkeypatch.setattr(circuit, "_cores", lambda: 2)
    caller = threading.get_ident()
    ran: list[tuple[int, int]] = []
    helper_took = threading.Event()

    def work(chunk: slice) -> int:
        ran.append((chunk.start, threading.get_ident()))
        if threading.get_ident() == caller:
            helper_took.wait(10.0)  # the pool thread takes a chunk too, whatever the load
        else:
            helper_took.set()
        return chunk.start

    out = circuit._run_chunked(work, 1000, 64, circuit.LANES)
    assert out == sorted(out)
    assert out[0] == 0
    assert sorted(s for s, _ in ran) == out  # each chunk once
    assert {t for _, t in ran} == {caller, next(t for _, t in ran if t != caller)}

    started, busy = [], []
    failed = threading.Event()

    def failing(chunk: slice) -> None:
        started.append(chunk.start)
        if threading.get_ident() == caller:
            failed.set()
            raise ValueError("bad chunk")
        busy.append(1)
        failed.wait(10.0)  # still running when the caller's chunk fails
        time.sleep(0.05)
        busy.pop()

    with pytest.raises(ValueError, match="bad chunk"):
        circuit._run_chunked(failing, 1000, 64, circuit.LANES)
    assert not busy  # the pool thread's chunk was over before the error was raised here
    assert len(started) < len(out)  # the chunks left when it failed were never started
