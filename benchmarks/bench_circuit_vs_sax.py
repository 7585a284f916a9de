"""Our circuit solve against SAX on the same circuit, per core, in one run.

The `smartlight` mesh (71 TBUs, 40 ports) with seeded fabrication errors in a fixed random
state; 1, 100 and 1,000 wavelengths over 1540-1560 nm. Like for like:

* one core for both: the process pins itself to one CPU (as `taskset -c 0` would) before
  numpy or JAX load, with `OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1` and
  `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1` (`--cores N`
  to allow more);
* the same inputs (all 40 ports), both warmed: SAX's first call (trace + JIT compile) is
  reported apart, then SAX's jitted circuit and our `solve` (its merge plan cached per
  mesh, as SAX caches its compiled circuit) are called alternately, best of `--repeats`,
  so both see the same machine load;
* agreement: the largest difference in any S-parameter (ours vs SAX, and our default
  merge vs our sparse-LU reference `solve_sparse`).

The flop floor: the merge's complex multiply-adds per wavelength (`merge_macs`, unpadded)
times the best per-MAC time `np.matmul` reaches on this core for the root merge's product
shape, measured in the same run; "gap" is our time over that floor.

Run: make bench, or
    python benchmarks/bench_circuit_vs_sax.py            (one core; needs the bench extra)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


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
    return ap.parse_args()


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def timed(fn) -> tuple[float, float, object]:
    """Wall-clock and CPU seconds (all threads of the process) of one call, and its result.

    On a shared machine the wall clock also counts time spent waiting for the core; the
    CPU time does not, so it is the steadier per-core figure.
    """
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def matmul_ns_per_mac(np) -> float:
    """Best per-MAC time of np.matmul on the root merge's product shape (22x6 @ 6x40)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 22, 6)) + 1j
    y = rng.normal(size=(1000, 6, 40)) + 1j
    out = np.empty((1000, 22, 40), dtype=complex)
    t = min(timed(lambda: np.matmul(x, y, out=out))[1] for _ in range(20))
    return t / (1000 * 22 * 6 * 40) * 1e9


def main() -> None:
    args = _args()
    _one_core(args.cores)
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from sax_circuit import build_sax_circuit, sax_matrix, sax_settings

    from photonics.circuit import solve, solve_sparse
    from photonics.circuit_merge import merge_macs, merge_plan
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import smartlight

    mesh = smartlight()
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    circuit = build_sax_circuit(mesh)
    real = merge_macs(merge_plan(mesh))
    ns_mac = matmul_ns_per_mac(np)
    floor_us = real * ns_mac * 1e-3
    print(f"cores: {sorted(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f} at start; "
          f"merge: {real} complex MACs per wavelength; matmul best "
          f"{ns_mac:.2f} ns/MAC -> flop floor {floor_us:.1f} us per wavelength")
    print()
    print("| wavelengths | SAX first call (s) | SAX wall / CPU (ms) | ours wall / CPU (ms) "
          "| SAX / ours (wall, CPU) | ours CPU per wavelength (us) | gap to flop floor "
          "| max abs S diff vs SAX | merge vs sparse LU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_wl in (int(v) for v in args.wavelengths.split(",")):
        wl = np.linspace(1540.0, 1560.0, n_wl)
        kwargs = sax_settings(mesh, params, state, wl)

        def run_sax(kwargs=kwargs):
            return {k: np.asarray(v) for k, v in circuit(**kwargs).items()}

        t = time.perf_counter()
        run_sax()
        sax_first = time.perf_counter() - t
        solve(mesh, state, wl, params)  # warm: plan built, arenas mapped
        sax_w = sax_c = ours_w = ours_c = float("inf")
        for _ in range(args.repeats):  # alternate, so both see the same machine
            w1, c1, sdict = timed(run_sax)
            w2, c2, ours = timed(lambda wl=wl: solve(mesh, state, wl, params))
            sax_w, sax_c, ours_w, ours_c = min(sax_w, w1), min(sax_c, c1), min(ours_w, w2), min(ours_c, c2)
        ref = solve_sparse(mesh, state, wl, params)
        diff = float(np.abs(ours[0] - sax_matrix(sdict, mesh.n_ports, n_wl)).max())
        per_wl = ours_c / n_wl * 1e6
        dref = float(np.abs(ours - ref).max())
        print(f"| {n_wl} | {sax_first:.2f} | {sax_w * 1e3:.2f} / {sax_c * 1e3:.2f} "
              f"| {ours_w * 1e3:.3f} / {ours_c * 1e3:.3f} | {sax_w / ours_w:.1f}x, {sax_c / ours_c:.1f}x "
              f"| {per_wl:.1f} | {per_wl / floor_us:.1f}x | {diff:.1e} | {dref:.1e} |")
        sys.stdout.flush()
    print()
    print("| states x wavelengths | sparse LU (s) | merge (s) | speed-up | max abs difference |")
    print("|---|---|---|---|---|")
    for n_states, n_wl in ((100, 1), (10, 100)):
        batch = MeshState.random(mesh, rng, n_states=n_states)
        wl = np.linspace(1540.0, 1560.0, n_wl)
        sp, ref = best_of(lambda b=batch, wl=wl: solve_sparse(mesh, b, wl, params), 3)
        o, ours = best_of(lambda b=batch, wl=wl: solve(mesh, b, wl, params), 3)
        dref = float(np.abs(ours - ref).max())
        print(f"| {n_states} x {n_wl} | {sp:.4f} | {o:.4f} | {sp / o:.1f}x | {dref:.1e} |")


if __name__ == "__main__":
    main()
