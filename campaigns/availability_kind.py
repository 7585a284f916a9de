"""The ``availability`` campaign: job throughput under failures, photonic fabric vs fixed baseline.

Each trace index draws a synthetic trace and a failure history (``photonics.rack``:
``synthetic_trace`` and ``simulate_trace``) from its own ``SeedSequence``; the two
policies (``fabric``: the photonic allocator that splices spares in; ``baseline``: static
rings of contiguous slices, no splicing) run on the **same** trace and seed, so each pair
of rows is a paired comparison. One task per (trace, policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaigns.engine import CampaignError, int_seed, task_seeds

POLICIES = ("fabric", "baseline")
# The metrics the summary and the plot compare (TraceMetrics keys).
HEADLINE = ("throughput_jobs_per_h", "goodput_acc_h_per_h", "utilisation", "fragmentation",
            "bandwidth_per_slice", "accepted_immediately")


@dataclass(frozen=True)
class TraceTask:
    """One trace under one policy (picklable)."""

    trace: int
    policy: str
    n_jobs: int
    seed: np.random.SeedSequence
    mtbf_h: float | None = None  # per-accelerator mean time between failures; None: the rack's default


def trace_task(task: TraceTask) -> dict[str, Any]:
    """Simulate one trace under one policy; one table row (TraceMetrics.to_dict())."""
    from photonics.rack import FailureModel, default_rack, simulate_trace, synthetic_trace

    trace = synthetic_trace(task.n_jobs, seed=int_seed(task.seed, 0))
    failures = None if task.mtbf_h is None else FailureModel(mtbf_h=task.mtbf_h)
    metrics = simulate_trace(default_rack(), trace, seed=int_seed(task.seed, 1), policy=task.policy,
                             failures=failures)
    return {"trace": task.trace, **metrics.to_dict()}


def availability_tasks(*, traces: int, jobs: int, seed: int, mtbf_h: float | None = None) -> list[TraceTask]:
    """Traces x policies; trace t seeded by spawn index t (both policies share it)."""
    if traces < 1 or jobs < 1:
        raise CampaignError(f"give at least 1 trace and 1 job per trace, not {traces} and {jobs}")
    if mtbf_h is not None and not mtbf_h > 0:
        raise CampaignError(f"the mean time between failures is a number of hours > 0, not {mtbf_h!r}")
    seeds = task_seeds(seed, traces)
    return [TraceTask(t, p, jobs, seeds[t], mtbf_h) for t in range(traces) for p in POLICIES]


def availability_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean of the headline metrics per policy, and fabric / baseline ratios of the means."""
    means = {}
    for p in POLICIES:
        mine = [r for r in rows if r["policy"] == p]
        means[p] = {k: float(np.mean([r[k] for r in mine])) for k in HEADLINE}
    ratio = {k: (means["fabric"][k] / means["baseline"][k] if means["baseline"][k] else None)
             for k in HEADLINE}
    return {"mean": means, "fabric_over_baseline": ratio}
