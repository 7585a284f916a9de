"""Metrics over a simulated trace, defined once for both policies (docs/rack.md, "Metrics").

The simulator records, per job, when it arrived, started and finished and the bandwidth
its slice got, and a piecewise-constant time series (value holds until the next sample):
healthy accelerators, busy accelerators, queue length, stranded accelerators. Everything
here is computed from those records only, so the fabric and the baseline cannot be
measured differently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

METRICS_SCHEMA = "lumion.rack.metrics"
METRICS_VERSION = 1
QUEUE_PERCENTILE = 95  # the tail the queueing delay is reported at (p95)


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job (simulated hours; ``None`` when it never started/finished)."""

    name: str
    size: int
    pattern: str
    duration_h: float
    arrival_h: float
    start_h: float | None
    end_h: float | None
    bandwidth: float | None  # lanes per accelerator: at placement, time-averaged once finished
    failures: int = 0
    splices: int = 0
    lost_work_acc_h: float = 0.0
    rejected: bool = False
    rate: float | None = None  # work per hour stepping (1: the ideal slice), time-averaged
    requeues: int = 0


@dataclass(frozen=True)
class Series:
    """Samples of the rack state after each event; each value holds until the next time."""

    time_h: np.ndarray
    healthy: np.ndarray
    busy: np.ndarray
    queue: np.ndarray
    stranded: np.ndarray

    def integral(self, values: np.ndarray, until_h: float) -> float:
        """∫ values dt from 0 to ``until_h`` (value-hours)."""
        t = np.minimum(np.append(self.time_h, until_h), until_h)
        return float(np.sum(values * np.diff(t)))


@dataclass(frozen=True)
class TraceMetrics:
    """The figures of one policy over one trace (fractions in [0, 1], hours, lanes per accelerator).

    Attributes:
        policy: "fabric" or "baseline".
        n_jobs, completed, rejected: counts (rejected: can never fit the rack).
        accepted_immediately: fraction of jobs started at their arrival time.
        accepted_eventually: fraction of jobs started at all.
        queue_delay_mean_h, queue_delay_p95_h: start - arrival over started jobs.
        fragmentation: time-averaged fraction of workers that are free and healthy but
            stranded: the job at the head of the queue fits their number yet cannot be placed.
        bandwidth_per_slice: mean over started jobs of the lanes per accelerator that carry
            the job's logical links point to point (layers x links / members, mean over
            rounds), time-averaged over the job's life (the fabric lends and sheds lanes).
        utilisation: busy accelerator-hours / healthy accelerator-hours (all accelerators,
            spares included) until the makespan.
        throughput_jobs_per_h: completed jobs / makespan.
        goodput_acc_h_per_h: useful accelerator-hours (size x duration of completed jobs)
            per hour of makespan.
        goodput_fraction: useful accelerator-hours / busy accelerator-hours.
        makespan_h: time of the last completion (or last event).
        failures: accelerator failures during the run; failures_in_jobs: of those, how
            many hit a running job; splices: recovered by a spliced-in accelerator;
            stalls: jobs that waited for a repair.
        lost_work_acc_h: work rolled back to the last checkpoint, accelerator-hours.
        step_rate: mean over completed jobs of the step rate: work per hour stepping, 1 on
            the ideal slice (every link direct on every lane, nothing to reconfigure);
            below 1 with fewer lanes, relayed links or switching (photonics.rack.steptime).
        requeues: jobs given back to the queue after a failure that was not spliced
            (recovery "requeue").
    """

    policy: str
    n_jobs: int
    completed: int
    rejected: int
    accepted_immediately: float
    accepted_eventually: float
    queue_delay_mean_h: float
    queue_delay_p95_h: float
    fragmentation: float
    bandwidth_per_slice: float
    utilisation: float
    throughput_jobs_per_h: float
    goodput_acc_h_per_h: float
    goodput_fraction: float
    makespan_h: float
    failures: int
    failures_in_jobs: int
    splices: int
    stalls: int
    lost_work_acc_h: float
    step_rate: float
    requeues: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (plain floats and ints)."""
        return {k: (float(v) if isinstance(v, float | np.floating) else v) for k, v in asdict(self).items()}


def compute_metrics(policy: str, jobs: list[JobRecord], series: Series, n_workers: int,
                    counts: dict[str, int]) -> TraceMetrics:
    """The :class:`TraceMetrics` of one run from its job records and time series.

    ``counts`` holds ``failures``, ``failures_in_jobs``, ``splices``, ``stalls`` and ``requeues``.
    """
    n = len(jobs)
    started = [j for j in jobs if j.start_h is not None]
    done = [j for j in jobs if j.end_h is not None]
    delays = np.array([j.start_h - j.arrival_h for j in started], dtype=float)  # type: ignore[operator]
    ends = [j.end_h for j in done]
    makespan = max(ends) if ends else (float(series.time_h[-1]) if series.time_h.size else 0.0)
    healthy_h = series.integral(series.healthy, makespan)
    busy_h = series.integral(series.busy, makespan)
    useful = sum(j.size * j.duration_h for j in done)
    bws = [j.bandwidth for j in started if j.bandwidth is not None]
    rates = [j.rate for j in done if j.rate is not None]
    return TraceMetrics(
        policy=policy, n_jobs=n, completed=len(done), rejected=sum(j.rejected for j in jobs),
        accepted_immediately=_ratio(int(np.sum(delays == 0.0)), n),
        accepted_eventually=_ratio(len(started), n),
        queue_delay_mean_h=float(delays.mean()) if delays.size else 0.0,
        queue_delay_p95_h=float(np.percentile(delays, QUEUE_PERCENTILE)) if delays.size else 0.0,
        fragmentation=_ratio(series.integral(series.stranded, makespan), n_workers * makespan),
        bandwidth_per_slice=float(np.mean(bws)) if bws else 0.0,
        utilisation=_ratio(busy_h, healthy_h),
        throughput_jobs_per_h=_ratio(len(done), makespan),
        goodput_acc_h_per_h=_ratio(useful, makespan),
        goodput_fraction=_ratio(useful, busy_h),
        makespan_h=float(makespan),
        failures=counts.get("failures", 0), failures_in_jobs=counts.get("failures_in_jobs", 0),
        splices=counts.get("splices", 0), stalls=counts.get("stalls", 0),
        lost_work_acc_h=float(sum(j.lost_work_acc_h for j in jobs)),
        step_rate=float(np.mean(rates)) if rates else 0.0,
        requeues=counts.get("requeues", 0),
    )


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b > 0 else 0.0
