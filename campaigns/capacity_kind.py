"""The ``capacity`` campaign: fragmentation against mesh size, workload and fixed baseline.

The grid: mesh specs (``photonics.rack.slot_rack``: the default rack's sixteen workers, two
spares and four fibres spread around two meshes of that spec) x workloads (synthetic traces
whose patterns are all rings, the default mix, or all all-to-all) x fixed baselines (``ring``
or ``torus:RxC`` over the same workers) x traces. Trace ``t`` is the same trace and failure
seed at every grid point (common random numbers). The fabric's run does not depend on the
baseline it is compared with, so one fabric task per (mesh, workload, trace) is paired with
one baseline task per topology. Failures are off unless an MTBF is given: fragmentation is a
placement property.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaigns.engine import CampaignError, int_seed, task_seeds
from campaigns.intervals import mean_ci, paired

# Workload -> the patterns a synthetic trace draws from (uniformly); sizes stay the default mix.
WORKLOADS = {
    "rings": ("ring",),
    "mixed": ("ring", "ring", "ring", "line", "all-to-all"),  # photonics.rack.traces' default
    "all-to-all": ("all-to-all",),
}
METRICS = ("fragmentation", "throughput_jobs_per_h", "queue_delay_mean_h", "bandwidth_per_slice", "step_rate")


@dataclass(frozen=True)
class CapacityTask:
    """One trace on one rack under one policy (picklable); ``baseline`` is the fixed topology."""

    mesh: str
    workload: str
    trace: int
    policy: str
    baseline: str
    n_jobs: int
    seed: np.random.SeedSequence
    mtbf_h: float = float("inf")


def capacity_task(task: CapacityTask) -> dict[str, Any]:
    """Simulate one trace; one table row (grid point + TraceMetrics.to_dict())."""
    from photonics.rack import FailureModel, simulate_trace, slot_rack, synthetic_trace

    trace = synthetic_trace(task.n_jobs, seed=int_seed(task.seed, 0), patterns=WORKLOADS[task.workload])
    metrics = simulate_trace(slot_rack(task.mesh), trace, seed=int_seed(task.seed, 1), policy=task.policy,
                             failures=FailureModel(mtbf_h=task.mtbf_h),
                             baseline=task.baseline if task.policy == "baseline" else None)
    return {"mesh": task.mesh, "workload": task.workload, "baseline_topology": task.baseline,
            "trace": task.trace, **metrics.to_dict()}


def capacity_tasks(*, meshes: Sequence[str], workloads: Sequence[str], baselines: Sequence[str],
                   traces: int, jobs: int, seed: int, mtbf_h: float = float("inf")) -> list[CapacityTask]:
    """The grid's tasks; the fabric's rows carry ``baseline`` ``"-"`` (it has none)."""
    from photonics.rack import RackError, slot_rack
    from photonics.rack.model import baseline_shape

    if traces < 1 or jobs < 1:
        raise CampaignError(f"give at least 1 trace and 1 job per trace, not {traces} and {jobs}")
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        raise CampaignError(f"unknown workload {bad[0]!r}; choose from {', '.join(WORKLOADS)}")
    if not mtbf_h > 0:
        raise CampaignError(f"the mean time between failures is a number of hours > 0, not {mtbf_h!r}")
    try:
        racks = [slot_rack(m) for m in meshes]
        for b in baselines:
            baseline_shape(b, len(racks[0].workers))
    except RackError as exc:
        raise CampaignError(str(exc)) from None
    seeds = task_seeds(seed, traces)
    out = []
    for m in meshes:
        for w in workloads:
            for t in range(traces):
                out.append(CapacityTask(m, w, t, "fabric", "-", jobs, seeds[t], mtbf_h))
                out += [CapacityTask(m, w, t, "baseline", b, jobs, seeds[t], mtbf_h) for b in baselines]
    return out


def capacity_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (mesh, workload, baseline): both policies' means with 95 % intervals, and paired figures."""
    groups = []
    keys = dict.fromkeys((r["mesh"], r["workload"]) for r in rows)
    for mesh, workload in keys:
        mine = [r for r in rows if r["mesh"] == mesh and r["workload"] == workload]
        fabric = sorted((r for r in mine if r["policy"] == "fabric"), key=lambda r: r["trace"])
        for topo in dict.fromkeys(r["baseline_topology"] for r in mine if r["policy"] == "baseline"):
            base = sorted((r for r in mine if r["baseline_topology"] == topo), key=lambda r: r["trace"])
            if [r["trace"] for r in base] != [r["trace"] for r in fabric]:
                raise CampaignError("internal: the fabric and baseline rows do not pair up by trace")
            groups.append({
                "mesh": mesh, "workload": workload, "baseline": topo, "n_traces": len(fabric),
                "fabric": {k: mean_ci([r[k] for r in fabric]) for k in METRICS},
                "baseline_metrics": {k: mean_ci([r[k] for r in base]) for k in METRICS},
                "paired": {k: paired([r[k] for r in fabric], [r[k] for r in base]) for k in METRICS},
            })
    return groups
