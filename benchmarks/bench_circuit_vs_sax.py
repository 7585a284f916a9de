"""Our circuit solve against SAX on the same circuit, per core, like for like, in one run.

Meshes `smartlight` (71 TBUs, 40 ports) and `hex:6x6`, seeded fabrication errors, one fixed
random state; 1, 100 and 1,000 wavelengths over 1540-1560 nm. Like for like:

* one core for both: the process pins itself to one CPU (as `taskset -c 0` would) before
  numpy or JAX load, with `OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1` and
  `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`;
* both called the lean way, inputs prepared once: SAX as one jitted function of two device
  arrays (the wavelengths and an (n_tbus, 11) settings table, `sax_circuit.build_sax_lean`)
  returning the port matrix as one array, so no per-call conversion of 923 Python floats
  into its settings dict and no 1,600-entry output dict to convert back; ours as
  `PreparedSolve(mesh, params, wavelengths)` made once, called with the state (the same
  bytes as `solve(mesh, state, wavelengths, params)`, checked);
* both warmed: SAX's first call (trace + XLA compile) is reported apart, with progress on
  stderr every minute and a time limit (`--sax-timeout`); XLA's compiled code is kept in
  JAX's persistent cache (`--jax-cache`), so a second run loads it ("from cache"); the
  process first re-executes itself with `thread_stack_shim.c` preloaded (XLA's compiler
  overflowed its 512 kB thread stacks on hex:6x6 and the process died of SIGSEGV:
  `sax_circuit.ensure_deep_thread_stacks`); then SAX and ours
  are called alternately, so both see the same machine load; CPU time of the process (all
  its threads), for SAX's call until its threads have gone idle again (XLA's threads go on
  working for it after it returns: `cpu_timed`), best of `--repeats`; and, in the same
  rounds, each side's calls in a row ("in a row": `RUN_CALLS` calls at one wavelength, fewer
  for longer sweeps, per call), where each call finds its own working set warm: alternating,
  SAX's 2 ms call evicts what our 0.1 ms one needs from the caches, ours little of SAX's;
* agreement: the largest difference in any S-parameter (ours vs SAX, and ours vs our
  sparse-LU reference `solve_sparse`).

The flop floor: the merge's complex multiply-adds per wavelength (`merge_macs`) times the
per-MAC time `np.matmul` reaches on this core for a 22x6 @ 6x40 product stack (OpenBLAS's
zgemm, AVX-512 where the CPU has it). The reference is timed in every round, right before our
solve (`MatmulReference`, best of `MATMUL_CALLS` calls), and "gap" is the median over the rounds
of our time over that round's floor: on a shared host whose speed swings up to 2x from minute
to minute (session 41, this VM: the matmul's best of 20 calls 0.44 ns in one run, 0.93-0.99 in the
next three), a floor timed once at the start against our best call minutes later measured the
host's swing as much as our code (gap 3.2x against 1.9x for the same code, twenty minutes apart).

`--agreement` instead checks that the two agree: SAX's port matrix (`build_sax_vectorized`:
the same model, joined by SAX's own backend) against ours on hex:1x2, smartlight and
square:3x3, three seeded fabricated chips and two random states each, at every nanometre of
the C band (1530-1565 nm, 36 wavelengths); it prints the largest |S| difference per mesh
(and ours against our sparse-LU reference) and exits 1 when any exceeds AGREEMENT_LIMIT.
The timing table exits 1 likewise.

`--scaling` instead times our solve on 2 cores against 1 (wall clock, alternating);
`--prepared` times our one-wavelength call as `solve`, as `PreparedSolve` and as the compiled
call alone;
`--split` splits our solve's CPU time into the transfer matrices, the merge kernel and the
rest (Python around them), per wavelength, against the flop floor.

Run: make bench, or
    python benchmarks/bench_circuit_vs_sax.py            (one core; needs the bench extra)
    python benchmarks/bench_circuit_vs_sax.py --cores 2 --scaling
    python benchmarks/bench_circuit_vs_sax.py --agreement
    python benchmarks/bench_circuit_vs_sax.py --prepared --repeats 7
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

AGREEMENT_LIMIT = 1e-9  # issue 28's bound on max |S_ours - S_SAX|: both are float64 solves of one
# model (agreement measured 1e-13..1e-12), so anything near it is a model or precision difference
AGREEMENT_MESHES = "hex:1x2,smartlight,square:3x3"
AGREEMENT_SEEDS = (2024, 7, 31)  # fabricated chips (two random states each)


def _one_core(cores: int) -> None:
    """Pin this process (and every thread it starts) to ``cores`` CPUs, before numpy/JAX load."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(cores)
    if cores == 1:
        os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=1, help="CPUs for both solvers (default 1)")
    ap.add_argument("--repeats", type=int, default=7, help="alternating calls per size (best of)")
    ap.add_argument("--wavelengths", default="1,100,1000", help="comma-separated sweep sizes")
    ap.add_argument("--meshes", default="smartlight,hex:6x6", help="comma-separated meshes")
    ap.add_argument("--scaling", action="store_true", help="ours on all --cores against one core")
    ap.add_argument("--split", action="store_true", help="where our solve's time goes (no SAX)")
    ap.add_argument("--prepared", action="store_true",
                    help="our one-wavelength call: solve, PreparedSolve and the compiled call alone (no SAX)")
    ap.add_argument("--agreement", action="store_true",
                    help=f"check ours against SAX across the C band on {AGREEMENT_MESHES} (exit 1 if "
                         f"any |S| differs by more than {AGREEMENT_LIMIT:g})")
    ap.add_argument("--backend", default="klu", help="SAX circuit backend (default klu: SAX's default, "
                    "its sparse-LU backend for large circuits)")
    ap.add_argument("--sax-timeout", type=float, default=3600.0,
                    help="seconds SAX's first call (trace + compile) may take before the run stops")
    ap.add_argument("--jax-cache", type=Path, default=Path.home() / ".cache" / "lumion-bench-jax",
                    help="JAX persistent compilation cache (XLA's compiled SAX circuits)")
    return ap.parse_args()


RUN_CALLS = 50  # calls in a row per timing of "in a row" (at one wavelength; fewer for longer sweeps):
# each side's own working set stays warm, as in a sweep of states or a simulated chip's readings,
# where the alternating calls give each call the caches the other side's call left (SAX's 2 ms
# call evicts most of what our 0.1 ms one needs; ours little of SAX's)
SETTLE_WINDOW_S = 0.005  # the process counts as settled when its threads used under 5 % of one core
SETTLE_IDLE = 0.05  # over one such window (a sleeping main thread uses none)
SETTLE_LIMIT_S = 5.0  # and waiting stops after this long (a thread that never rests: still counted)


def cpu_timed(fn, settle: bool = False) -> tuple[float, object]:
    """CPU seconds of the process (all its threads) for one call, and its result; with
    ``settle``, also the CPU its other threads spend after it returns, until they go idle.

    SAX's call returns (``block_until_ready``) while XLA's threads still work for it: measured
    in session 38 (smartlight, 1,000 wavelengths, one core, per-thread ``schedstat``), its other
    threads used 36-40 ms of CPU during the solve timed right after it, which the process CPU
    time then charged to that solve (53-77 ms against 29-39 ms alone). So SAX's calls are timed
    with ``settle``: this thread then sleeps until the process's threads have gone idle
    (:data:`SETTLE_WINDOW_S`, :data:`SETTLE_IDLE`), and their CPU until then (not this
    thread's own, for the waiting) counts as the call's. Our solve leaves no thread running
    (its pool's chunks are all collected before it returns), so it is timed without: waiting
    cost this thread 0.13-0.16 ms at load 11, more than a warm one-wavelength solve.
    """
    c = time.process_time()
    out = fn()
    done = time.process_time()
    tail = 0.0
    if settle:
        own = time.thread_time()
        _settle()
        tail = (time.process_time() - done) - (time.thread_time() - own)
    return done - c + tail, out


def _settle() -> None:
    """Sleep until the process's threads use less than :data:`SETTLE_IDLE` of a core over a
    window (or :data:`SETTLE_LIMIT_S` has passed).
    """
    end = time.monotonic() + SETTLE_LIMIT_S
    last = time.process_time()
    while time.monotonic() < end:
        time.sleep(SETTLE_WINDOW_S)
        now = time.process_time()
        if now - last < SETTLE_IDLE * SETTLE_WINDOW_S:
            return
        last = now


MATMUL_CALLS = 3  # reference calls per round (best of): one call is ~5 ms, a fifth of our 1,000-wl solve


class MatmulReference:
    """np.matmul's time per complex multiply-add on a 22x6 @ 6x40 product stack (the root
    merge's shape), arrays made once, timed on demand: the flop floor's speed at that moment.
    """

    def __init__(self, np) -> None:
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(1000, 22, 6)) + 1j
        self.y = rng.normal(size=(1000, 6, 40)) + 1j
        self.out = np.empty((1000, 22, 40), dtype=complex)
        self.np = np
        self.ns_per_mac(1)  # warm

    def ns_per_mac(self, calls: int = MATMUL_CALLS) -> float:
        """Best of ``calls`` timings, in ns per complex multiply-add."""
        t = min(cpu_timed(lambda: self.np.matmul(self.x, self.y, out=self.out))[0] for _ in range(calls))
        return t / (1000 * 22 * 6 * 40) * 1e9


def make_mesh(name: str):
    from photonics.topology import hexagonal, smartlight

    if name == "smartlight":
        return smartlight()
    rows, cols = name.split(":")[1].split("x")
    return hexagonal(int(rows), int(cols))


CHIP_SEED = 2024  # every timing here solves the same fabricated chip and random state per mesh


def seeded_chip(name: str) -> tuple:
    """``(mesh, params, state)``: mesh ``name`` (:func:`make_mesh`), its fabricated chip and a
    random state, both drawn from :data:`CHIP_SEED` in that order."""
    import numpy as np

    from photonics.physics import fabricated_params
    from photonics.state import MeshState

    mesh = make_mesh(name)
    rng = np.random.default_rng(CHIP_SEED)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    return mesh, params, MeshState.random(mesh, rng)


def scaling(args, np) -> None:
    """Our solve on every allowed core against one core (wall clock, best of, alternating)."""
    from photonics.circuit import SOLVE_THREADS_ENV, solve

    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start")
    print("| mesh | wavelengths | 1 core wall (ms) | all cores wall (ms) | speed-up |")
    print("|---|---|---|---|---|")
    for name in args.meshes.split(","):
        mesh, params, state = seeded_chip(name)
        for n_wl in (int(v) for v in args.wavelengths.split(",")):
            wl = np.linspace(1540.0, 1560.0, n_wl)
            solve(mesh, state, wl, params)
            one = many = float("inf")
            for _ in range(args.repeats):
                os.environ[SOLVE_THREADS_ENV] = "1"
                t = time.perf_counter()
                solve(mesh, state, wl, params)
                one = min(one, time.perf_counter() - t)
                os.environ.pop(SOLVE_THREADS_ENV)
                t = time.perf_counter()
                solve(mesh, state, wl, params)
                many = min(many, time.perf_counter() - t)
            print(f"| {name} | {n_wl} | {one * 1e3:.2f} | {many * 1e3:.2f} | {one / many:.2f}x |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def split(args, np) -> None:
    """Our solve's CPU time per wavelength split into its parts (best of ``--repeats``), and the
    solve and merge kernel against the flop floor paired round by round (median of the rounds'
    ratios, :class:`MatmulReference` timed in each round just before them).
    """
    from photonics.circuit import solve, tbu_transfers
    from photonics.circuit_merge import merge_macs, merge_plan, solve_merge

    ref = MatmulReference(np)
    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start")
    print("| mesh | wavelengths | solve (us/wl) | transfer matrices | merge kernel | merge ns per MAC "
          "| rest | matmul ns per MAC | flop floor (us/wl) | solve / floor | merge / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.meshes.split(","):
        mesh, params, state = seeded_chip(name)
        plan = merge_plan(mesh)
        macs = merge_macs(plan)
        t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
        for n_wl in (int(v) for v in args.wavelengths.split(",")):
            wl = np.linspace(1540.0, 1560.0, n_wl)
            T = np.ascontiguousarray(tbu_transfers(params, state, wl).reshape(n_wl, mesh.n_tbus, 4))
            out = np.empty((n_wl, mesh.n_ports, mesh.n_ports), dtype=complex)
            calls = max(1, 1000 // n_wl)  # calls per timing: a one-wavelength call is ~0.2 ms
            parts = {"solve": lambda wl=wl, m=mesh, st=state, pa=params: solve(m, st, wl, pa),
                     "transfers": lambda wl=wl, st=state, pa=params: tbu_transfers(pa, st, wl),
                     "merge": lambda p=plan, T=T, o=out, tl=t_link: solve_merge(p, T, tl, None, o)}
            got = _paired_rounds(parts, ref, calls, args.repeats)
            total, tr, mg = (min(got[k]) for k in ("solve", "transfers", "merge"))
            floor = [macs * r * 1e-9 for r in got["matmul"]]  # s per block, each round's
            gap = {k: float(np.median([t / f for t, f in zip(got[k], floor, strict=True)]))
                   for k in ("solve", "merge")}
            us = 1e6 / n_wl
            print(f"| {name} | {n_wl} | {total * us:.1f} | {tr * us:.1f} ({tr / total:.0%}) | {mg * us:.1f} "
                  f"({mg / total:.0%}) | {mg / n_wl / macs * 1e9:.2f} | {(total - tr - mg) * us:.1f} "
                  f"| {np.median(got['matmul']):.2f} | {np.median(floor) * 1e6:.1f} "
                  f"| {gap['solve'] / n_wl:.2f}x | {gap['merge'] / n_wl:.2f}x |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def _paired_rounds(parts: dict, ref: MatmulReference, calls: int, rounds: int) -> dict[str, list[float]]:
    """Per round: the matmul reference (ns per MAC) and then each part's CPU seconds per call
    (``calls`` calls in a row), so every part has a floor measured moments before it.
    """
    for fn in parts.values():
        fn()
    got: dict[str, list[float]] = {"matmul": [], **{k: [] for k in parts}}
    for _ in range(rounds):
        got["matmul"].append(ref.ns_per_mac())
        for k, fn in parts.items():
            got[k].append(cpu_timed(lambda fn=fn: [fn() for _ in range(calls)])[0] / calls)
    return got


PREPARED_CALLS = 2000  # calls per timing of --prepared: a one-wavelength call is ~0.1 ms


def _one_wavelength_calls(name: str, np) -> tuple:
    """``solve``, ``PreparedSolve`` and the compiled call alone for mesh ``name`` at 1550 nm: the
    packed one-block entry ``PreparedSolve`` calls, its packed arguments made once (where the
    compiled kernels are loaded; else ``solve_phases``' 33-argument call on arrays made once).
    """
    from photonics import circuit
    from photonics.circuit_merge import merge_plan, pack_one_block, solve_phases

    mesh, params, state = seeded_chip(name)
    wl = np.array([1550.0])
    run = circuit.PreparedSolve(mesh, params, wl)
    chip, (top, bot) = circuit._chip_constants(params, wl), circuit._phases(params, state)
    out = np.empty((1, mesh.n_ports, mesh.n_ports), dtype=complex)
    if run._one is not None:
        packed = pack_one_block(run._plan, run._chip, run._pos)  # (args, its pointer, the arenas)
        compiled = lambda packed=packed: run._one(packed[1], top, bot, out)  # noqa: E731
    else:
        plan = merge_plan(mesh)
        compiled = lambda: solve_phases(plan, chip, top, bot, 0, None, out)  # noqa: E731
    return lambda: circuit.solve(mesh, state, wl, params), lambda: run(state), compiled


def one_wavelength(args, np) -> None:
    """Our one-wavelength call three ways, CPU per call, best and median of ``--repeats``
    timings of :data:`PREPARED_CALLS` calls each, alternating: ``solve``, ``PreparedSolve``
    (the benchmark's), and the compiled call alone (its packed entry, arguments packed once).
    """
    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start")
    print("| mesh | solve (us) | PreparedSolve (us) | compiled call (us) |")
    print("|---|---|---|---|")
    for name in args.meshes.split(","):
        ways = _one_wavelength_calls(name, np)
        for fn in ways:
            fn()  # warm: kernels loaded, scratch mapped
        times: list[list[float]] = [[] for _ in ways]
        for _ in range(args.repeats):
            for fn, got in zip(ways, times, strict=True):
                got.append(cpu_timed(lambda fn=fn: [fn() for _ in range(PREPARED_CALLS)])[0] / PREPARED_CALLS)
        cells = (f"{min(t) * 1e6:.1f} (median {np.median(t) * 1e6:.1f})" for t in times)
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def agreement(np) -> int:
    """Ours against SAX (and against our sparse LU) over the C band; 1 when any differs by more
    than :data:`AGREEMENT_LIMIT`, else 0."""
    import jax.numpy as jnp
    from sax_circuit import build_sax_vectorized, sax_table

    from photonics.circuit import solve, solve_sparse
    from photonics.physics import C_BAND_NM, fabricated_params
    from photonics.state import MeshState
    from photonics.topology import mesh_from_spec

    wl = np.linspace(*C_BAND_NM, int(C_BAND_NM[1] - C_BAND_NM[0]) + 1)  # every nm, edges included
    print(f"wavelengths: {len(wl)}, {wl[0]:.0f}-{wl[-1]:.0f} nm; chips: seeds {AGREEMENT_SEEDS}, "
          f"two random states each; load average {os.getloadavg()[0]:.1f}")
    print("| mesh | TBUs | max abs S diff vs SAX | at (nm) | vs sparse LU |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name in AGREEMENT_MESHES.split(","):
        mesh = mesh_from_spec(name)
        sax = None
        d_sax, at, d_lu = 0.0, 0.0, 0.0
        for seed in AGREEMENT_SEEDS:
            rng = np.random.default_rng(seed)
            params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
            sax = sax or build_sax_vectorized(mesh, params.center_wavelength_nm)
            for _ in range(2):
                state = MeshState.random(mesh, rng)
                ours = solve(mesh, state, wl, params)[0]
                theirs = np.asarray(sax(jnp.asarray(wl), jnp.asarray(sax_table(mesh, params, state))))
                per_wl = np.abs(ours - theirs).max(axis=(1, 2))
                if per_wl.max() > d_sax:
                    d_sax, at = float(per_wl.max()), float(wl[per_wl.argmax()])
                d_lu = max(d_lu, float(np.abs(ours - solve_sparse(mesh, state, wl, params)[0]).max()))
        print(f"| {name} | {mesh.n_tbus} | {d_sax:.1e} | {at:.0f} | {d_lu:.1e} |", flush=True)
        worst = max(worst, d_sax, d_lu)
    if worst > AGREEMENT_LIMIT:
        print(f"FAILED: a port matrix differs by {worst:.1e} > {AGREEMENT_LIMIT:g}")
        return 1
    print(f"agreement within {AGREEMENT_LIMIT:g}: largest difference {worst:.1e}")
    return 0


def main() -> None:
    args = _args()
    _one_core(args.cores)  # kept by the re-executed process below (environment, affinity)
    if not (args.scaling or args.split or args.prepared):
        sys.path.insert(0, str(Path(__file__).parent))
        from sax_circuit import ensure_deep_thread_stacks

        ensure_deep_thread_stacks(args.jax_cache)  # before JAX loads: may re-execute this process
    import numpy as np

    if args.scaling or args.split or args.prepared:
        (scaling if args.scaling else split if args.split else one_wavelength)(args, np)
        return
    if args.agreement:
        sys.exit(agreement(np))
    import jax.numpy as jnp
    from sax_circuit import build_sax_lean, first_call, sax_table, use_compile_cache

    use_compile_cache(args.jax_cache)

    from photonics.circuit import PreparedSolve, solve, solve_sparse
    from photonics.circuit_merge import merge_macs, merge_plan

    reference = MatmulReference(np)
    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start; "
          f"matmul best {reference.ns_per_mac(20):.2f} ns per complex MAC; SAX backend {args.backend}")
    print()
    print("| mesh | wavelengths | SAX first call (s) | SAX CPU (ms) | ours CPU (ms) | SAX / ours "
          "| in a row: SAX / ours (ms) | SAX / ours in a row | ours per wavelength (us) | flop floor (us) "
          "| gap to floor (paired) | max abs S diff vs SAX | vs sparse LU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name in args.meshes.split(","):
        mesh, params, state = seeded_chip(name)
        macs = merge_macs(merge_plan(mesh))
        sax = build_sax_lean(mesh, params.center_wavelength_nm, args.backend)
        table = jnp.asarray(sax_table(mesh, params, state))
        for n_wl in (int(v) for v in args.wavelengths.split(",")):
            wl = np.linspace(1540.0, 1560.0, n_wl)
            wl_nm = jnp.asarray(wl)

            def run_sax(wl_nm=wl_nm, table=table, sax=sax):
                return sax(wl_nm, table).block_until_ready()

            what = f"{name} at {n_wl} wavelengths"
            sax_first, how = first_call(run_sax, what, args.sax_timeout, args.jax_cache)
            prepared = PreparedSolve(mesh, params, wl)  # ours the lean way too: chip and wavelengths once
            assert prepared(state).tobytes() == solve(mesh, state, wl, params).tobytes()  # (and warm)
            sax_c = ours_c = sax_run = ours_run = float("inf")
            calls = max(1, RUN_CALLS // n_wl)
            mm, gaps = [], []  # the matmul reference (ns per MAC) and our gap to its floor, per round
            for _ in range(args.repeats):  # alternate, so both see the same machine
                c1, s_out = cpu_timed(run_sax, settle=True)
                c2, ours = cpu_timed(lambda st=state, run=prepared: run(st))
                sax_c, ours_c = min(sax_c, c1), min(ours_c, c2)
                # each side's calls in a row (its own working set warm), SAX's threads until idle
                c3 = cpu_timed(lambda run=run_sax, k=calls: [run() for _ in range(k)], settle=True)[0]
                mm.append(reference.ns_per_mac())  # the floor's speed now, just before our calls
                c4 = cpu_timed(lambda st=state, run=prepared, k=calls: [run(st) for _ in range(k)])[0]
                sax_run, ours_run = min(sax_run, c3 / calls), min(ours_run, c4 / calls)
                gaps.append(c4 / calls / n_wl / (macs * mm[-1] * 1e-9))
            ref = solve_sparse(mesh, state, wl, params)
            diff = float(np.abs(ours[0] - np.asarray(s_out)).max())
            worst = max(worst, diff)
            per_wl = ours_c / n_wl * 1e6
            floor_us = macs * float(np.median(mm)) * 1e-3
            print(f"| {name} | {n_wl} | {sax_first:.1f} ({how}) | {sax_c * 1e3:.3f} | {ours_c * 1e3:.3f} "
                  f"| {sax_c / ours_c:.1f}x | {sax_run * 1e3:.3f} / {ours_run * 1e3:.3f} "
                  f"| {sax_run / ours_run:.1f}x "
                  f"| {per_wl:.1f} | {floor_us:.1f} | {np.median(gaps):.2f}x "
                  f"| {diff:.1e} | {float(np.abs(ours - ref).max()):.1e} |")
            sys.stdout.flush()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if worst > AGREEMENT_LIMIT:
        print(f"FAILED: SAX's port matrix differs from ours by {worst:.1e} > {AGREEMENT_LIMIT:g}")
        sys.exit(1)


if __name__ == "__main__":
    main()
