"""Heater-step sequences: full re-solve against the incremental solver, in one run.

Calibration changes one heater per step (its neighbours move a little with thermal
crosstalk). On `smartlight` with seeded fabrication errors, a sequence of steps each
changing 1 TBU (or 3: one and two neighbours) is solved two ways, interleaved step by
step so both see the same machine: `photonics.circuit.solve` of every new state, and
`CircuitSolver.update` + `matrix`. Reported: best-of-3 time per step over the sequence
and the largest difference between the two.

Run (one core): taskset -c 0 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    python benchmarks/bench_circuit_incremental.py
"""

from __future__ import annotations

import time

import numpy as np

from photonics.circuit import solve
from photonics.circuit_merge import merge_plan
from photonics.circuit_solver import CircuitSolver
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import smartlight

STEPS = 200  # heater steps per sequence


SWEEP = 20  # steps per heater in a calibration-like sweep


def _sequence(mesh, rng, per_step: int, sweep: bool) -> list[MeshState]:
    """States that each differ from the previous one in ``per_step`` neighbouring TBUs:
    a random TBU every step, or (``sweep``) the same TBU for ``SWEEP`` steps in a row."""
    centers = mesh.tbu_centers()
    state = MeshState.random(mesh, rng)
    out = []
    for step in range(STEPS):
        if not sweep or step % SWEEP == 0:
            t = rng.integers(mesh.n_tbus)
        near = np.argsort(np.linalg.norm(centers - centers[t], axis=1))[:per_step]
        top = state.phi_top.copy()
        top[near] = rng.uniform(0, 2 * np.pi, per_step)
        state = MeshState(top, state.phi_bot.copy())
        out.append(state)
    return out


def main() -> None:
    mesh = smartlight()
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    n_merges = merge_plan(mesh).n_merges
    print(f"| wavelengths | sequence | TBUs changed per step | inputs | full solve CPU (ms/step) "
          f"| incremental CPU (ms/step) | speed-up | merges or joins per step (full: {n_merges}) "
          f"| max abs difference |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases = ((1, True, 1, [0]), (1, True, 1, None), (1, False, 1, [0]), (1, False, 3, [0]),
             (100, True, 1, None), (100, False, 1, None), (100, False, 3, None))
    for n_wl, sweep, per_step, inputs in cases:
        wl = np.linspace(1545.0, 1555.0, n_wl)
        states = _sequence(mesh, rng, per_step, sweep)
        full_t = inc_t = float("inf")
        diff, merges = 0.0, []
        for _ in range(3):
            solver = CircuitSolver(mesh, MeshState.random(mesh, rng), wl, params)
            tf = ti = 0.0
            for st in states:
                t0 = time.process_time()
                ref = solve(mesh, st, wl, params, inputs=inputs)[0]
                t1 = time.process_time()
                solver.update(st)
                got = solver.matrix(inputs)
                t2 = time.process_time()
                tf, ti = tf + t1 - t0, ti + t2 - t1
                diff = max(diff, float(np.abs(got - ref).max()))
                merges.append(solver.last_update_merges)
            full_t, inc_t = min(full_t, tf / STEPS), min(inc_t, ti / STEPS)
        merges_per_step = np.mean(merges[1:])
        kind = f"sweeps of {SWEEP} steps per TBU" if sweep else "a random TBU each step"
        n_in = "all" if inputs is None else len(inputs)
        print(f"| {n_wl} | {kind} | {per_step} | {n_in} | {full_t * 1e3:.3f} "
              f"| {inc_t * 1e3:.3f} | {full_t / inc_t:.1f}x | {merges_per_step:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
