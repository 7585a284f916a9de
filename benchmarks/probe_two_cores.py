"""What two solve workers share on this machine: a probe for issue 28's "2 cores >= 1.7x one core".

Three measurements, each alternating one core against two in the same rounds (best and median
of ``--rounds``), so that both sides see the same machine load:

* **the machine** (numpy, one thread per process): the same work in one process pinned to CPU 0
  alone, then in two processes pinned to CPU 0 and CPU 1 started together. Throughput scaling
  = 2 x (time alone) / (the slower of the pair): 2.0 when the two cores share nothing this work
  needs. Kinds: ``compute`` (48x48 complex matrix products: registers and L1, the cores'
  arithmetic and clock), ``l2`` (copying 321 kB into 321 kB: the 643 kB the smartlight merge's
  8-lane arena occupies per worker; 4-lane, 321 kB, until session 41), ``write`` and ``copy``
  (25.6 MB: the output of 1,000 wavelengths of smartlight, 40 x 40 complex a block, written
  once per solve) and ``write-256`` (256 MB, beyond any cache this VM reports: memory itself);
* **our solve, two processes**: ``PreparedSolve`` of ``--mesh`` at ``--wavelengths``
  (one thread each, ``LUMION_SOLVE_THREADS=1``), the whole batch in each process, alone and as
  a pair: the hardware's ceiling for our kernel, without the solve's thread pool; and the
  same with ``inputs=[0]`` (below);
* **our solve, two threads** (what ``solve`` does): one process, ``LUMION_SOLVE_THREADS=1``
  against both cores, wall clock and the process's CPU time (all threads), with the full
  output (n_ports x n_ports a block) and with ``inputs=[0]`` (n_ports x 1 a block: the same
  merges and the same arithmetic, the output's write all but removed); each chunk's compiled
  call is wrapped to read its thread CPU per block (what a block costs more when both cores
  run the solve) and to split a two-thread call's wall clock: before the first chunk, between
  chunks, the two threads' finishing gap, after the last. A last row times the hand-over of
  session 39 (every chunk handed to the pool, the caller asleep: ``_pool_map``) for an A/B
  against today's, in which the calling thread takes chunks too.

The steal time the hypervisor reports (``/proc/stat``) and the load average are printed: on a
shared machine the pairs also compete with other processes, so read best-of figures.

``--cachegrind`` instead counts, load-independently, what one wavelength of the one-thread
solve moves: valgrind's cachegrind simulates this machine's caches (L1d 48 kB, and its 2 MB
per-core L2 as the last level: what misses there is what the two cores fetch from the shared
L3 and memory) on runs of 1 and 3 calls, full output and ``inputs=[0]``; the difference over
2 calls, per wavelength, is printed (instructions, L1 misses, bytes read from beyond L2,
bytes written that missed it: each such line is read first, then written back). valgrind
runs no AVX-512, and the kernels' object code is built for the host CPU, so the probe first
compiles them as valgrind's CPU presents itself (``--vg-cache``, once; a few minutes).
This virtual machine has no hardware counters (``perf stat -e instructions true``: not
supported), so this is the way to count.

Run (about a minute on a quiet machine; ``--cachegrind`` 10-15 minutes):
    python benchmarks/probe_two_cores.py
    python benchmarks/probe_two_cores.py --rounds 15 --mesh hex:6x6
    python benchmarks/probe_two_cores.py --cachegrind
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one BLAS thread per process, before numpy loads

import numpy as np  # noqa: E402

OUTPUT_BYTES = 1000 * 40 * 40 * 16  # smartlight's output at 1,000 wavelengths (25.6 MB)
ARENA_BYTES = 643_000  # smartlight's compact 8-lane merge arena (5,024 entries x 8 lanes x 16 B)
BIG_BYTES = 256 * 2**20  # past every cache level this VM reports (L3 300 MB is the host's, shared)
START_DELAY_S = 0.05  # a pair starts at a common monotonic time this far ahead of the command
SOLVE_INPUTS = {"solve": None, "solve inputs=[0]": [0]}  # the full output; one column of it
WORK_S = 0.15  # about this long per timed piece alone (reps chosen once, by a trial)


def _kinds() -> dict:
    """Each kind: (setup() -> state, run(state), bytes moved per run or 0)."""
    def compute_setup():
        rng = np.random.default_rng(0)
        a = rng.normal(size=(48, 48)) + 1j * rng.normal(size=(48, 48))
        return a, a.copy(), np.empty_like(a)

    def compute(s):
        np.matmul(s[0], s[1], out=s[2])

    def pair_setup(nbytes):
        return lambda: (np.ones(nbytes // 16, dtype=complex), np.empty(nbytes // 16, dtype=complex))

    def copy(s):
        np.copyto(s[1], s[0])

    def write(s):
        s[1].fill(1.0)

    half = ARENA_BYTES // 2
    return {"compute": (compute_setup, compute, 0), "l2": (pair_setup(half), copy, 2 * half),
            "write": (pair_setup(OUTPUT_BYTES), write, OUTPUT_BYTES),
            "copy": (pair_setup(OUTPUT_BYTES), copy, 2 * OUTPUT_BYTES),
            "write-256": (pair_setup(BIG_BYTES), write, BIG_BYTES)}


def _solver(mesh_name: str, n_wl: int, inputs):
    from photonics.circuit import PreparedSolve
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import hexagonal, smartlight

    if mesh_name == "smartlight":
        mesh = smartlight()
    else:
        rows, cols = mesh_name.split(":")[1].split("x")
        mesh = hexagonal(int(rows), int(cols))
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    prepared = PreparedSolve(mesh, params, np.linspace(1540.0, 1560.0, n_wl), inputs)
    return lambda: prepared(state)


def _worker(cpu: int, conn, args) -> None:
    """A process pinned to ``cpu``: runs what it is sent at the time it is told, returns timings."""
    os.sched_setaffinity(0, {cpu})
    os.environ["LUMION_SOLVE_THREADS"] = "1"
    kinds = _kinds()
    states: dict = {}
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, reps, start_at = msg
        if kind.startswith("solve"):
            fn = states.setdefault(kind, _solver(args.mesh, args.wavelengths, SOLVE_INPUTS[kind]))
            run = fn
        else:
            setup, body, _ = kinds[kind]
            state = states.setdefault(kind, setup())
            run = lambda b=body, s=state: b(s)  # noqa: E731
        if reps == 0:  # a trial: how many reps make WORK_S
            run()
            t = time.perf_counter()
            run()
            conn.send(max(1, round(WORK_S / max(time.perf_counter() - t, 1e-6))))
            continue
        while time.monotonic() < start_at:
            pass
        c, t = time.process_time(), time.perf_counter()
        for _ in range(reps):
            run()
        conn.send((time.perf_counter() - t, time.process_time() - c))


def _steal() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def machine_and_processes(args, workers) -> None:
    """The first two measurements: each kind alone on CPU 0 and as a pair on CPUs 0 and 1."""
    print("| work | MB a run | alone: CPU a run (ms) | pair: CPU a run (ms) | pair CPU / alone CPU, best "
          "(median) | wall-clock throughput scaling, best (median) |")
    print("|---|---|---|---|---|---|")
    sizes = {k: v[2] for k, v in _kinds().items()}
    for kind in [*_kinds(), *SOLVE_INPUTS]:
        for conn, _p in workers:  # a trial on each side (the same setup on both)
            conn.send((kind, 0, 0))
        reps = next(iter([conn.recv() for conn, _p in workers]))  # both answer; CPU 0's count is used
        alone_cpu, pair_cpu, cpu_ratio, wall_scaling = [], [], [], []
        for _ in range(args.rounds):
            workers[0][0].send((kind, reps, time.monotonic() + START_DELAY_S))
            wall_alone, cpu_alone = workers[0][0].recv()
            at = time.monotonic() + START_DELAY_S
            for conn, _p in workers:
                conn.send((kind, reps, at))
            res = [conn.recv() for conn, _p in workers]
            cpu_pair = statistics.fmean(r[1] for r in res)
            alone_cpu.append(cpu_alone / reps)
            pair_cpu.append(cpu_pair / reps)
            cpu_ratio.append(cpu_pair / cpu_alone)
            wall_scaling.append(2 * wall_alone / max(r[0] for r in res))
        label = f"{args.mesh} {kind}, {args.wavelengths} wl" if kind in SOLVE_INPUTS else kind
        print(f"| {label} | {sizes.get(kind, 0) / 1e6:.2f} | {min(alone_cpu) * 1e3:.3f} "
              f"| {min(pair_cpu) * 1e3:.3f} "
              f"| {min(pair_cpu) / min(alone_cpu):.2f} ({statistics.median(cpu_ratio):.2f}) "
              f"| {max(wall_scaling):.2f}x ({statistics.median(wall_scaling):.2f}) |")


class _ChunkLog:
    """Wraps the solve's per-chunk compiled call (``photonics.circuit.solve_phases``) to record,
    per chunk, its thread, blocks, start and end (wall clock) and thread CPU time.
    """

    def __init__(self) -> None:
        import threading

        from photonics import circuit

        self.rows: list[tuple[int, int, float, float, float]] = []
        self._circuit, self._inner, self._ident = circuit, circuit.solve_phases, threading.get_ident

        def logged(*args):  # the chunk call's arguments, its output last
            t, c = time.perf_counter(), time.thread_time()
            ok = self._inner(*args)
            self.rows.append((self._ident(), len(args[-1]), t, time.perf_counter(), time.thread_time() - c))
            return ok

        circuit.solve_phases = logged

    def call(self, fn) -> tuple[float, float, list]:
        """(wall, process CPU, chunk rows) of one call of ``fn``."""
        self.rows = []
        c, t = time.process_time(), time.perf_counter()
        fn()
        end = time.perf_counter()
        return end - t, time.process_time() - c, [(*r[:2], r[2] - t, r[3] - t, r[4]) for r in self.rows]


def _split_two(wall: float, rows: list) -> dict:
    """Where a two-thread call's wall clock went: before the first chunk starts, after the last
    ends, the finishing gap (one thread done, the other still in its last chunk), the time a
    thread spent between its chunks, and the chunks' own time (the later thread's).
    """
    by = {}
    for ident, _n, t0, t1, _c in rows:
        by.setdefault(ident, []).append((t0, t1))
    ends = sorted(max(t1 for _, t1 in v) for v in by.values())
    between = max((max(t1 for _, t1 in v) - min(t0 for t0, _ in v)) - sum(t1 - t0 for t0, t1 in v)
                  for v in by.values())
    return {"before": min(r[2] for r in rows), "after": wall - ends[-1],
            "gap": ends[-1] - ends[0] if len(ends) > 1 else 0.0, "between": between, "threads": len(by)}


def threads(args) -> None:
    """The third: the solve's own pool, one core against two, full output and ``inputs=[0]``;
    each chunk's thread CPU per block (what a block costs with the other core busy or not) and
    where the two-thread wall clock goes besides the chunks.
    """
    from photonics.circuit import SOLVE_THREADS_ENV

    log = _ChunkLog()
    print("| output | 1 core wall (ms) | 2 cores wall (ms) | speed-up best (median) | chunk CPU a block, "
          "1 core / 2 cores (us) | ratio | 2 cores: before first chunk / between chunks / finishing gap / "
          "after last (ms, medians) |")
    print("|---|---|---|---|---|---|---|")
    from photonics import circuit

    today, reference = circuit._run_chunked, {}
    for label, inputs, runner in (("full (n_ports x n_ports)", None, today),
                                  ("inputs=[0] (n_ports x 1)", [0], today),
                                  ("full, session 39's hand-over (pool.map)", None, _pool_map)):
        circuit._run_chunked = runner
        fn = _solver(args.mesh, args.wavelengths, inputs)
        got = fn().tobytes()
        if inputs is None and reference.setdefault("full", got) != got:
            raise SystemExit("the old hand-over's output differs from today's: not the same chunks")
        walls: dict[int, list[float]] = {1: [], 2: []}
        per_block: dict[int, list[float]] = {1: [], 2: []}
        parts: list[dict] = []
        for _ in range(args.rounds):
            for cores in (1, 2):
                if cores == 1:
                    os.environ[SOLVE_THREADS_ENV] = "1"
                else:
                    os.environ.pop(SOLVE_THREADS_ENV, None)
                wall, _cpu, rows = log.call(fn)
                walls[cores].append(wall)
                per_block[cores].append(sum(r[4] for r in rows) / sum(r[1] for r in rows))
                if cores == 2:
                    parts.append(_split_two(wall, rows))
        os.environ.pop(SOLVE_THREADS_ENV, None)
        speed = [a / b for a, b in zip(walls[1], walls[2], strict=True)]
        b1, b2 = min(per_block[1]), min(per_block[2])
        med = {k: statistics.median(p[k] for p in parts) * 1e3 for k in ("before", "between", "gap", "after")}
        print(f"| {label} | {min(walls[1]) * 1e3:.2f} | {min(walls[2]) * 1e3:.2f} "
              f"| {max(speed):.2f}x ({statistics.median(speed):.2f}) | {b1 * 1e6:.1f} / {b2 * 1e6:.1f} "
              f"| {b2 / b1:.2f} | {med['before']:.2f} / {med['between']:.2f} / {med['gap']:.2f} / "
              f"{med['after']:.2f} |")
    circuit._run_chunked = today


def _pool_map(fn, batch: int, chunk: int, align: int = 1) -> list:
    """``photonics.circuit._run_chunked`` as it was until session 39, to A/B against today's
    (the probe's last row): every chunk handed to a pool of ``workers`` threads, the calling
    thread asleep until each result (a pool thread woken at the start, the caller at each
    chunk's end), where today the caller takes chunks too beside ``workers - 1`` pool threads.
    The same chunks, so the same bytes (checked).
    """
    from photonics import circuit

    if batch <= chunk and batch < 2 * circuit._PARALLEL_MIN:
        return [fn(slice(0, batch))]
    cores = circuit._cores()
    n_chunks = max(-(-batch // chunk), min(cores, batch // circuit._PARALLEL_MIN))
    workers = min(cores, n_chunks) if n_chunks > 1 else 1
    per_chunk = -(-batch // max(workers, n_chunks))
    size = -(-per_chunk // align) * align
    if workers == 1:
        return [fn(slice(i, min(i + size, batch))) for i in range(0, batch, size)]
    with circuit._blas_single_threaded():
        return list(circuit._pool(workers).map(fn, circuit._tapered(batch, size, workers, align)))


CACHEGRIND_CACHES = ("--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64")  # this VM's L1i, L1d
# and per-core L2 (lscpu): the simulated last level is the L2, beyond which the two cores share
_VG_CPU = ("import llvmlite.binding as ll; print(ll.get_host_cpu_name()); "
           "print(ll.get_host_cpu_features().flatten())")
_VG_BUILD = """
import os, sys
name, feat = sys.argv[1], sys.argv[2]
os.environ.update(NUMBA_CPU_NAME=name, NUMBA_CPU_FEATURES=feat)
import llvmlite.binding as ll
ll.get_host_cpu_name = lambda: name  # the kernel cache's key, as valgrind's CPU will give it
ll.get_host_cpu_features = lambda: type("F", (), {"flatten": lambda self: feat})()
from photonics.circuit import solve
from photonics.state import MeshState
from photonics.topology import hexagonal
m = hexagonal(1, 2)
solve(m, MeshState.uniform(m, "cross"), [1550.0, 1551.0])
solve(m, MeshState.uniform(m, "cross"))
"""


def cachegrind(args) -> None:
    """Per wavelength of the one-thread solve, under valgrind's cache simulation (module doc)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(args.vg_cache))
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    name, feat = subprocess.run(["valgrind", "--tool=none", "-q", sys.executable, "-c", _VG_CPU], env=env,
                                capture_output=True, text=True, check=True).stdout.split()
    print(f"valgrind's CPU: {name}; kernels for it in {args.vg_cache}", flush=True)
    subprocess.run([sys.executable, "-c", _VG_BUILD, name, feat], env=env, check=True)
    events, per = None, {}
    for label, extra in (("full output", []), ("inputs=[0]", ["--inputs0"])):
        counts = []
        for calls in (1, 3):
            out = args.vg_cache / f"cachegrind.{calls}{extra[0][2:] if extra else ''}.out"
            subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHEGRIND_CACHES,
                            f"--cachegrind-out-file={out}", sys.executable, __file__, "--calls", str(calls),
                            "--mesh", args.mesh, "--wavelengths", str(args.wavelengths), *extra],
                           env=env, check=True, capture_output=True)
            text = out.read_text()
            events = text.split("events:")[1].split("\n")[0].split()
            counts.append([int(v) for v in text.split("summary:")[1].split()])
        per[label] = {e: (b - a) / 2 / args.wavelengths for e, a, b in zip(events, *counts, strict=True)}
    print(f"\n{args.mesh}, {args.wavelengths} wavelengths a call, per wavelength (2 calls' difference):\n")
    print("| output | instructions | L1d read misses | L1d write misses | bytes read from beyond L2 "
          "| bytes written missing L2 |")
    print("|---|---|---|---|---|---|")
    for label, d in per.items():
        print(f"| {label} | {d['Ir']:,.0f} | {d['D1mr']:,.0f} | {d['D1mw']:,.0f} | {d['DLmr'] * 64:,.0f} "
              f"| {d['DLmw'] * 64:,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="alternating rounds per measurement")
    ap.add_argument("--mesh", default="smartlight", help="smartlight or hex:RxC")
    ap.add_argument("--wavelengths", type=int, default=1000, help="wavelengths per solve")
    ap.add_argument("--calls", type=int, default=None,
                    help="only make this many one-thread solves (a target for valgrind, below)")
    ap.add_argument("--inputs0", action="store_true",
                    help="with --calls: inputs=[0] (the output's write removed)")
    ap.add_argument("--cachegrind", action="store_true", help="bytes moved per wavelength, under valgrind")
    ap.add_argument("--vg-cache", type=Path, default=Path.home() / ".cache" / "lumion-probe-valgrind",
                    help="the kernels compiled for valgrind's CPU (--cachegrind)")
    args = ap.parse_args()
    if args.cachegrind:
        cachegrind(args)
        return
    if args.calls is not None:
        os.environ["LUMION_SOLVE_THREADS"] = "1"
        fn = _solver(args.mesh, args.wavelengths, [0] if args.inputs0 else None)
        for _ in range(args.calls):
            fn()
        return
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("probe_two_cores needs two CPUs (run it without taskset)")
    _solver(args.mesh, 1, None)()  # load the kernels before the workers fork (each inherits them)
    steal0, total0 = _steal()
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    ctx = mp.get_context("fork")
    workers = []
    for cpu in (0, 1):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(cpu, child, args), daemon=True)
        proc.start()
        workers.append((parent, proc))
    try:
        machine_and_processes(args, workers)
    finally:
        for conn, proc in workers:
            conn.send(None)
            proc.join()
    print()
    threads(args)
    steal1, total1 = _steal()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; hypervisor steal "
          f"{(steal1 - steal0) / max(total1 - total0, 1):.1%} of the CPUs' time during the probe")


if __name__ == "__main__":
    main()
