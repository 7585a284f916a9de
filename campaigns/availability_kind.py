"""The ``availability`` campaign: job throughput under failures, photonic fabric vs fixed baseline.

Each trace index draws a synthetic trace and a failure history (``photonics.rack``:
``synthetic_trace`` and ``simulate_trace``) from its own ``SeedSequence``; the two
policies (``fabric``: the photonic allocator that splices spares in; ``baseline``: static
rings of contiguous slices, no splicing) run on the **same** trace and seed, so each pair
of rows is a paired comparison. The grid sweeps the per-accelerator MTBF and the recovery
of a job that is not spliced (``requeue`` from its checkpoint on free accelerators, or
``wait`` for the repair); trace ``t`` is the same trace and failure seed at every grid point
(common random numbers), so a change along the grid is the grid's, not another draw's. One
task per (MTBF, recovery, trace, policy). Every job's step is priced on what it holds
(:mod:`photonics.rack.steptime`, default step model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaigns.engine import CampaignError, int_seed, task_seeds
from campaigns.intervals import mean_ci, paired

POLICIES = ("fabric", "baseline")
# The metrics the summary and the plot compare (TraceMetrics keys).
HEADLINE = ("throughput_jobs_per_h", "goodput_acc_h_per_h", "utilisation", "fragmentation",
            "bandwidth_per_slice", "accepted_immediately", "step_rate", "makespan_h")


@dataclass(frozen=True)
class TraceTask:
    """One trace under one policy at one grid point (picklable)."""

    trace: int
    policy: str
    n_jobs: int
    seed: np.random.SeedSequence
    mtbf_h: float | None = None  # per-accelerator mean time between failures; None: the rack's default
    recovery: str = "requeue"
    fixed_duration: bool = False  # every job runs its duration_h whatever it holds (no step model)


def trace_task(task: TraceTask) -> dict[str, Any]:
    """Simulate one trace under one policy; one table row (grid point + TraceMetrics.to_dict())."""
    from photonics.rack import FailureModel, default_rack, simulate_trace, synthetic_trace

    trace = synthetic_trace(task.n_jobs, seed=int_seed(task.seed, 0))
    failures = (FailureModel(recovery=task.recovery) if task.mtbf_h is None
                else FailureModel(mtbf_h=task.mtbf_h, recovery=task.recovery))
    step = {"step_model": None} if task.fixed_duration else {}
    metrics = simulate_trace(default_rack(), trace, seed=int_seed(task.seed, 1), policy=task.policy,
                             failures=failures, **step)
    return {"trace": task.trace, "mtbf_h": failures.mtbf_h, "recovery": task.recovery, **metrics.to_dict()}


def availability_tasks(*, traces: int, jobs: int, seed: int, mtbf_h: float | None = None,
                       mtbfs: Sequence[float | None] | None = None,
                       recoveries: Sequence[str] = ("requeue",), fixed_duration: bool = False,
                       ) -> list[TraceTask]:
    """MTBF points x recoveries x traces x policies; trace t seeded by spawn index t everywhere.

    ``mtbfs`` (hours, ``inf`` for none) overrides the single ``mtbf_h``; ``fixed_duration``
    turns the step model off (the model before issue 30, with ``recoveries=("wait",)``).
    """
    from photonics.rack.failure_defaults import RECOVERIES

    if traces < 1 or jobs < 1:
        raise CampaignError(f"give at least 1 trace and 1 job per trace, not {traces} and {jobs}")
    points = list(mtbfs) if mtbfs is not None else [mtbf_h]
    for m in points:
        if m is not None and not m > 0:
            raise CampaignError(f"the mean time between failures is a number of hours > 0, not {m!r}")
    for r in recoveries:
        if r not in RECOVERIES:
            raise CampaignError(f"recovery must be one of {', '.join(RECOVERIES)}, not {r!r}")
    seeds = task_seeds(seed, traces)
    return [TraceTask(t, p, jobs, seeds[t], m, r, fixed_duration) for m in points for r in recoveries
            for t in range(traces) for p in POLICIES]


def _key(row: dict[str, Any]) -> tuple[float, str]:
    return (row.get("mtbf_h", math.inf), row.get("recovery", "requeue"))


def availability_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per grid point: each policy's mean and 95 % interval, and the paired fabric-vs-baseline figures.

    ``mean`` and ``fabric_over_baseline`` (ratios of the means) are those of the only grid
    point when there is one (None otherwise: a mean across grid points means nothing).
    """
    points = []
    for key in dict.fromkeys(_key(r) for r in rows):
        mine = [r for r in rows if _key(r) == key]
        by = {p: sorted((r for r in mine if r["policy"] == p), key=lambda r: r["trace"]) for p in POLICIES}
        if [r["trace"] for r in by["fabric"]] != [r["trace"] for r in by["baseline"]]:
            raise CampaignError("internal: the fabric and baseline rows do not pair up by trace")
        points.append({
            "mtbf_h": key[0] if math.isfinite(key[0]) else None, "recovery": key[1],
            "n_traces": len(by["fabric"]),
            "failures": sum(r["failures"] for r in by["fabric"]),
            "policies": {p: {k: mean_ci([r[k] for r in by[p]]) for k in HEADLINE} for p in POLICIES},
            "paired": {k: paired([r[k] for r in by["fabric"]], [r[k] for r in by["baseline"]])
                       for k in HEADLINE},
        })
    out: dict[str, Any] = {"points": points, "mean": None, "fabric_over_baseline": None}
    if len(points) == 1:
        means = {p: {k: points[0]["policies"][p][k]["mean"] for k in HEADLINE} for p in POLICIES}
        out["mean"] = means
        out["fabric_over_baseline"] = {k: (means["fabric"][k] / means["baseline"][k]
                                           if means["baseline"][k] else None) for k in HEADLINE}
    return out
