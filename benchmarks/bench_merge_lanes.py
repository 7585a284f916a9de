"""The merge kernel at 1,000 wavelengths, 4-lane build against 8-lane build (issue 28).

Both builds of ``solve_blocks`` (:func:`photonics.circuit_kernels.build`) are compiled in this
process through numba's dispatcher with the same code generator, then timed alternating on the
same forward matrices (process CPU time, best of two calls each side, paired ratio per round):
the host's speed swings alike for both, unlike two processes or two checkouts timed in turn.
Both outputs are compared byte for byte first.

``--no-avx512`` compiles with every AVX-512 feature switched off (AVX2 code on this CPU): what a
machine without AVX-512 would run, minus its caches. Both ways compile without LLVM's
"prefer-256-bit" tuning, as :mod:`photonics.kernel_loader` builds the kernels. The two builds
take about a minute to compile (more with ``--no-avx512``).

Run: taskset -c 1 python benchmarks/bench_merge_lanes.py [--rounds 20] [--meshes smartlight,hex:6x6]
[--no-avx512]
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

BLOCKS = 1000  # wavelengths of one state: the flop-floor target's batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--meshes", default="smartlight,hex:6x6")
    ap.add_argument("--no-avx512", action="store_true")
    args = ap.parse_args()

    from numba.core import codegen, config  # before any compile: the code generator keeps its features

    features = codegen.get_host_cpu_features()
    if args.no_avx512:
        features = ",".join("-" + f[1:] if f[1:].startswith("avx512") else f for f in features.split(","))
    config.CPU_FEATURES = f"{features},-prefer-256-bit"
    config.SLP_VECTORIZE = 1  # as photonics.kernel_loader's build

    from bench_circuit_vs_sax import seeded_chip

    from photonics import circuit_kernels
    from photonics.circuit import tbu_transfers
    from photonics.circuit_merge import _solve_scratch, merge_plan

    builds = {lanes: circuit_kernels.KERNELS.get(lanes) or circuit_kernels.build(lanes) for lanes in (4, 8)}
    for name in args.meshes.split(","):
        mesh, params, state = seeded_chip(name)
        plan = merge_plan(mesh)
        T = np.ascontiguousarray(tbu_transfers(params, state, np.linspace(1540, 1560, BLOCKS))
                                 .reshape(BLOCKS, mesh.n_tbus, 4))
        t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
        outs, calls = {}, {}
        for lanes, kernels in builds.items():
            re, im, wr, wi, *_ = _solve_scratch(plan, lanes)
            out = outs[lanes] = np.empty((BLOCKS, mesh.n_ports, mesh.n_ports), dtype=complex)
            call = (kernels["solve_blocks"], T, t_link, plan.solve_merges, plan.pool, re, im, wr, wi,
                    plan.solve_out_idx, out)
            calls[lanes] = functools.partial(*call)
            calls[lanes]()  # compiles (first mesh) and warms
        same = np.array_equal(outs[4].view(np.uint64), outs[8].view(np.uint64))
        ratios, ms = [], {4: [], 8: []}
        for _ in range(args.rounds):
            t4 = min(_cpu(calls[4]) for _ in range(2))
            t8 = min(_cpu(calls[8]) for _ in range(2))
            ratios.append(t8 / t4)
            ms[4].append(t4 * 1e3)
            ms[8].append(t8 * 1e3)
        print(f"{name}{' (AVX-512 off)' if args.no_avx512 else ''}: same bytes {same}; 8 / 4 lanes "
              f"p10 {np.percentile(ratios, 10):.3f} median {np.median(ratios):.3f} "
              f"p90 {np.percentile(ratios, 90):.3f}; median ms per 1,000 wavelengths: 4 lanes "
              f"{np.median(ms[4]):.1f}, 8 lanes {np.median(ms[8]):.1f}", flush=True)


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


if __name__ == "__main__":
    main()
