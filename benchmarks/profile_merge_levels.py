"""Where the circuit merge spends its time: per level, and per numpy function, on one core.

Solves the SAX benchmark's smartlight circuit (seeded fabrication errors, a fixed random
state) in one 128-block chunk, as `photonics.circuit.solve` cuts a 1,000-wavelength sweep,
on one pinned CPU. Prints

* each merge level's CPU time per wavelength (best of the repeats), batch-last (L) or
  batch-first (F), with its shape: merges, cut links ``k``, ports kept from the first half
  ``ea`` and in all ``ne``; once as it runs in a solve ("in a solve"), once repeated alone
  on its own inputs, which are then in the core's cache ("alone"): the difference is what
  fetching a level's inputs from farther than the L2 cache costs;
* the whole solve's time per wavelength, and what the levels' best times leave out of it
  (arena set-up, hand-off to the batch-first arena, reading the port matrix out, and the
  cache misses a level pays after the others ran).

numpy's own functions cannot be timed this way: cProfile sees `take` but not a ufunc or
`matmul` call (their time lands in the caller); for that split see the callgrind profile in
docs/physics.md.

Run:
    python benchmarks/profile_merge_levels.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 128  # blocks per merge call, as photonics.circuit._MERGE_CHUNK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200, help="solves per measurement (best of)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from photonics import circuit_merge as cm
    from photonics.circuit import tbu_transfers
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import smartlight

    mesh = smartlight()
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
    T = tbu_transfers(params, state, np.linspace(1540.0, 1560.0, CHUNK)).reshape(CHUNK, mesh.n_tbus, 4)
    plan = cm.merge_plan(mesh)
    inputs = np.arange(mesh.n_ports)
    out = np.empty((CHUNK, mesh.n_ports, mesh.n_ports), dtype=complex)
    print(f"smartlight, {CHUNK} wavelengths per call, cpu {sorted(os.sched_getaffinity(0))}, "
          f"load average {os.getloadavg()[0]:.1f}, {plan.n_tbus} TBUs, {len(plan.levels)} levels")

    def solve() -> None:
        cm.solve_merge(plan, T, t_link, inputs, out)

    def per_wavelength_us(fn) -> float:
        fn()
        best = float("inf")
        for _ in range(args.repeats):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        return best / CHUNK * 1e6

    total = per_wavelength_us(solve)
    levels = level_times(cm, plan, T, t_link, args.repeats)
    alone = [per_wavelength_us(fn) * CHUNK / blocks for fn, blocks in level_calls(cm, plan, T, t_link)]
    print(f"{'level':>5} {'kind':>4} {'merges':>6} {'k':>2} {'ea':>3} {'ne':>3} "
          f"{'in a solve':>10} {'alone':>6}  (us per wavelength)")
    for i, lev in enumerate(plan.levels):
        kind = "F" if lev.first else "L"
        print(f"{i:>5} {kind:>4} {lev.n_merge:>6} {lev.k:>2} {lev.ea:>3} {lev.ne:>3} "
              f"{levels[i]:>10.2f} {alone[i]:>6.2f}")
    n_last = sum(1 for lev in plan.levels if not lev.first)
    print(f"batch-last levels {sum(levels[:n_last]):.1f} in a solve, {sum(alone[:n_last]):.1f} alone; "
          f"batch-first {sum(levels[n_last:]):.1f} and {sum(alone[n_last:]):.1f}; whole solve {total:.1f} "
          f"(left out of the levels' best times {total - sum(levels):.1f})")


def level_times(cm, plan, T, t_link, repeats: int) -> list[float]:
    """Each level's CPU time per wavelength (best of ``repeats``), run as ``run_levels`` runs it."""
    import numpy as np

    n_last = sum(1 for lev in plan.levels if not lev.first)
    best = [float("inf")] * len(plan.levels)
    t_ext = cm.link_factors(t_link)
    held = np.setbufsize(cm._UFUNC_BUFSIZE)
    try:
        for _ in range(repeats):
            last, first = cm.new_arenas(plan, T, reuse=True)
            spent = [0.0] * len(plan.levels)
            for i, lev in enumerate(plan.levels[:n_last]):
                res = last[lev.base: lev.base + lev.out_size].reshape(lev.stored, lev.n_merge * CHUNK)
                start = time.process_time()
                cm._merge_last(lev, last, t_ext, res)
                spent[i] += time.process_time() - start
            for lo in range(0, CHUNK, cm._FIRST_SUB):
                sub = first[lo: lo + cm._FIRST_SUB]
                sub[:, : len(plan.handoff)] = last[plan.handoff, lo: lo + cm._FIRST_SUB].T
                for i, lev in enumerate(plan.levels[n_last:], start=n_last):
                    start = time.process_time()
                    cm._merge_first(lev, sub, t_ext, sub[:, lev.base: lev.base + lev.out_size])
                    spent[i] += time.process_time() - start
            best = [min(b, s) for b, s in zip(best, spent, strict=True)]
    finally:
        np.setbufsize(held)
    return [b / CHUNK * 1e6 for b in best]


def level_calls(cm, plan, T, t_link) -> list:
    """One call per level on the arenas of a finished solve, with the blocks it covers."""
    import numpy as np

    last, first = cm.new_arenas(plan, T, reuse=False)  # arenas of its own: solve() reuses the shared ones
    t_ext = cm.link_factors(t_link)
    cm.run_levels(plan, last, first, t_ext)
    sub = first[: cm._FIRST_SUB] if first is not None else None
    calls = []
    for lev in plan.levels:
        if lev.first:
            res = sub[:, lev.base: lev.base + lev.out_size]
            calls.append((lambda lev=lev, res=res: _buffered(np, cm, cm._merge_first, lev, sub, t_ext, res),
                          len(sub)))
        else:
            res = last[lev.base: lev.base + lev.out_size].reshape(lev.stored, lev.n_merge * CHUNK)
            calls.append((lambda lev=lev, res=res: _buffered(np, cm, cm._merge_last, lev, last, t_ext, res),
                          CHUNK))
    return calls


def _buffered(np, cm, merge, *args) -> None:
    """One level's merge with numpy's ufunc buffer as a solve sets it."""
    held = np.setbufsize(cm._UFUNC_BUFSIZE)
    try:
        merge(*args)
    finally:
        np.setbufsize(held)


if __name__ == "__main__":
    main()
