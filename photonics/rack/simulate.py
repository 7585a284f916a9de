"""Event-driven simulation of a trace on a rack, for the photonic fabric or the fixed baseline.

Simulated time is in hours. A heap holds four kinds of events: a job **arrives**, a job
**departs** (its work is done), an accelerator **fails**, an accelerator is **repaired**.
After every event the queue is served:

* **FIFO** (default): the head of the queue starts when the allocator can place it; the
  others wait behind it.
* **backfill** (``backfill=True``): every queued job that fits starts, in arrival order
  (first fit, no reservation for the head: a large job can wait longer).

A job that can never run is rejected: at arrival when the allocator knows it cannot
(larger than the rack's workers; for the torus baseline, a size with no block shape), or
as the head of the queue when the rack is empty and healthy and it still does not fit.

Failures: every accelerator (spares too) fails after an exponential time with mean
``mtbf_h`` and is back ``repair_h`` later; the draws come from a per-accelerator stream
seeded by ``(seed, index)``, so both policies see the same failure history. A failed
member rolls its job back to its last checkpoint (every ``checkpoint_h`` of progress).
The fabric splices a free accelerator in (:meth:`FabricAllocator.splice`) and the job
restarts after ``restart_h``. Otherwise (the baseline always), by ``recovery``:

* ``requeue`` (default, what a cluster scheduler does): the job gives its slice back and
  re-enters the queue in its arrival order, to restart from its checkpoint (after
  ``restart_h``) on whatever free accelerators the policy places it on;
* ``wait`` (the model before issue 30): the job stalls, keeping its slice, until every
  failed member is repaired, then restarts after ``restart_h``.

Step time (``step_model``, :mod:`photonics.rack.steptime`): a job progresses at ``rate`` =
(its step on the ideal slice) / (its step on what it holds now), re-priced whenever its
circuits change (placement, splice, lanes shed or regrown), so bandwidth, relayed links and
reconfigurations show in its run time. ``step_model=None`` keeps every job at rate 1 (its
``duration_h`` whatever it holds: the model before issue 30).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from photonics.rack.allocator import FabricAllocator
from photonics.rack.baseline import BaselineAllocator
from photonics.rack.failure_defaults import CHECKPOINT_H, MTBF_H, RECOVERIES, RECOVERY, REPAIR_H, RESTART_H
from photonics.rack.metrics import JobRecord, Series, TraceMetrics, compute_metrics
from photonics.rack.model import Rack, RackError
from photonics.rack.steptime import StepModel, rate
from photonics.rack.traces import TraceJob

POLICIES = ("fabric", "baseline")
MAX_EVENTS = 1_000_000  # a guard against a simulation that never drains (a bug, said loudly)

ARRIVE, DEPART, FAIL, REPAIR = "arrive", "depart", "fail", "repair"
DEFAULT_STEP = StepModel()  # the step of every job unless told otherwise (photonics.rack.steptime)


@dataclass(frozen=True)
class FailureModel:
    """Accelerator failures and how jobs recover (hours); ``mtbf_h = inf`` turns failures off."""

    mtbf_h: float = MTBF_H
    repair_h: float = REPAIR_H
    checkpoint_h: float = CHECKPOINT_H
    restart_h: float = RESTART_H
    recovery: str = RECOVERY  # a job that cannot be spliced: "requeue" or "wait" for the repair

    def __post_init__(self) -> None:
        if self.recovery not in RECOVERIES:
            raise RackError(f"recovery must be one of {', '.join(RECOVERIES)}, not {self.recovery!r}")
        if not self.mtbf_h > 0:
            raise RackError(f"mtbf_h must be a number of hours > 0 (inf: no failures), not {self.mtbf_h!r}")
        for key in ("repair_h", "checkpoint_h"):
            if not 0 < getattr(self, key) < np.inf:
                raise RackError(f"{key} must be a finite number of hours > 0, not {getattr(self, key)!r}")
        if not 0 <= self.restart_h < np.inf:
            raise RackError(f"restart_h must be a finite number of hours >= 0, not {self.restart_h!r}")


@dataclass
class _Run:
    """A started job (mutable): progress accrues at ``rate`` from ``mark_h`` while not stalled.

    Progress is work in hours of the ideal slice (the trace's ``duration_h``).
    """

    job: TraceJob
    members: list[str]
    start_h: float
    progress_h: float = 0.0
    mark_h: float | None = 0.0
    waiting: set[str] = field(default_factory=set)
    epoch: int = 0
    bandwidth: float = 0.0  # lanes per accelerator now
    rate: float = 1.0  # work per hour stepping, on what the job holds now
    lane_h: float = 0.0  # ∫ bandwidth dt while holding a slice
    held_h: float = 0.0  # hours holding a slice
    rate_h: float = 0.0  # ∫ rate dt while stepping
    step_h: float = 0.0  # hours stepping (holding, not stalled, not restarting)
    failures: int = 0
    splices: int = 0
    requeues: int = 0
    lost_acc_h: float = 0.0

    def progress(self, t: float) -> float:
        """Work done by time ``t`` (hours of the ideal slice)."""
        if self.mark_h is None:
            return self.progress_h
        return self.progress_h + self.rate * max(0.0, t - self.mark_h)

    def accrue(self, t0: float, t1: float) -> None:
        """Account the interval ``[t0, t1]`` spent holding the slice (bandwidth, rate)."""
        self.lane_h += self.bandwidth * (t1 - t0)
        self.held_h += t1 - t0
        if self.mark_h is not None:
            stepping = max(0.0, t1 - max(t0, self.mark_h))
            self.rate_h += self.rate * stepping
            self.step_h += stepping


@dataclass(frozen=True)
class Simulation:
    """A finished run: its metrics, per-job records and the time series behind them."""

    metrics: TraceMetrics
    jobs: tuple[JobRecord, ...]
    series: Series


class Simulator:
    """One run of one policy over one trace (use :func:`run_simulation`).

    Public state, for observers and tests: ``time_h``; ``allocator``; ``owner``
    (``{accelerator: job or None}``); ``down`` (failed accelerators); ``running``
    (``{job: _Run}``); ``queue`` (waiting :class:`TraceJob` in order).
    """

    def __init__(self, rack: Rack, trace: Sequence[TraceJob], *, seed: int, policy: str,
                 backfill: bool, failures: FailureModel, max_lanes: int | None = None,
                 baseline: str | None = None, step_model: StepModel | None = None) -> None:
        if policy not in POLICIES:
            raise RackError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.rack, self.trace, self.policy = rack, list(trace), policy
        self.backfill, self.fm, self.step_model = backfill, failures, step_model
        self._rates: dict[tuple[str, int], float] = {}
        self.paused: dict[str, _Run] = {}  # re-queued jobs, waiting with their progress
        self.allocator: FabricAllocator | BaselineAllocator = (
            FabricAllocator(rack, max_lanes, step_model) if policy == "fabric"
            else BaselineAllocator(rack, baseline or rack.baseline))
        self.time_h = 0.0
        self.owner: dict[str, str | None] = dict.fromkeys(rack.names)
        self.down: set[str] = set()
        self.running: dict[str, _Run] = {}
        self.queue: list[TraceJob] = []
        self.records: dict[str, JobRecord] = {}
        self.counts = {"failures": 0, "failures_in_jobs": 0, "splices": 0, "stalls": 0, "requeues": 0}
        self._heap: list[tuple[float, int, str, str, int]] = []
        self._seq = 0
        self._version = 0  # bumped whenever resources are freed: a failed placement may now fit
        self._tried: dict[str, int] = {}
        self._head_blocked = False
        self._rngs = {a: np.random.default_rng([seed, k]) for k, a in enumerate(rack.names)}
        self._samples: list[tuple[float, int, int, int, int]] = []
        for j in self.trace:
            self._push(j.arrival_h, ARRIVE, j.name)
        if np.isfinite(failures.mtbf_h):
            for a in rack.names:
                self._push(self._rngs[a].exponential(failures.mtbf_h), FAIL, a)

    # -- the event loop -----------------------------------------------------------------------
    def _push(self, t: float, kind: str, who: str, epoch: int = 0) -> None:
        heapq.heappush(self._heap, (float(t), self._seq, kind, who, epoch))
        self._seq += 1

    def _unfinished(self) -> bool:
        return bool(self.queue or self.running) or len(self.records) < len(self.trace)

    def run(self, observer: Callable[[Simulator], Any] | None = None) -> Simulation:
        """Process events until every job has finished or been rejected."""
        jobs = {j.name: j for j in self.trace}
        for _ in range(MAX_EVENTS):
            if not self._unfinished() or not self._heap:
                break
            t, _, kind, who, epoch = heapq.heappop(self._heap)
            for run in self.running.values():  # the bandwidth and rate in force since the last event
                run.accrue(self.time_h, t)
            self.time_h = t
            if kind == ARRIVE:
                self._arrive(jobs[who])
            elif kind == DEPART:
                if who in self.running and self.running[who].epoch == epoch:
                    self._depart(who)
            elif kind == FAIL:
                self._fail(who)
            else:
                self._repair(who)
            self._serve_queue()
            if not self.queue:  # lend spare lanes back to running slices only when nobody waits
                self.allocator.regrow()
            for name, run in self.running.items():
                run.bandwidth = self.allocator.bandwidth(name)
                self._reprice(run)
            self._sample()
            if observer is not None:
                observer(self)
        else:
            raise RackError(f"internal: the simulation did not drain in {MAX_EVENTS} events")
        return self._result()

    # -- events -----------------------------------------------------------------------------
    def _arrive(self, job: TraceJob) -> None:
        self.records[job.name] = JobRecord(job.name, job.size, job.pattern, job.duration_h, job.arrival_h,
                                           None, None, None)
        if not self.allocator.may_fit(job):  # no waiting can help: reject at once
            self.records[job.name] = replace(self.records[job.name], rejected=True)
            return
        self.queue.append(job)

    def _depart(self, name: str) -> None:
        run = self.running.pop(name)
        for a in run.members:
            self.owner[a] = None
        self.allocator.release(name)
        bandwidth = run.lane_h / run.held_h if run.held_h > 0 else run.bandwidth
        speed = run.rate_h / run.step_h if run.step_h > 0 else run.rate
        self.records[name] = replace(self.records[name], end_h=self.time_h, failures=run.failures,
                                     splices=run.splices, lost_work_acc_h=run.lost_acc_h,
                                     bandwidth=bandwidth, rate=speed, requeues=run.requeues)
        self._version += 1

    def _fail(self, a: str) -> None:
        self.counts["failures"] += 1
        self.down.add(a)
        self._push(self.time_h + self.fm.repair_h, REPAIR, a)
        name = self.owner[a]
        if name is None:
            return
        self.counts["failures_in_jobs"] += 1
        run = self.running[name]
        run.failures += 1
        self._roll_back(run)
        new = None
        if not run.waiting:  # a stalled job waits for its repairs anyway
            new = self.allocator.splice(name, a, self._free())
        if new is not None:
            self.owner[a], self.owner[new] = None, name
            run.members = [new if m == a else m for m in run.members]
            run.splices += 1
            self.counts["splices"] += 1
            self._version += 1
            self._resume(run)
            return
        if self.fm.recovery == "requeue":
            self._requeue(run)
            return
        if not run.waiting:
            self.counts["stalls"] += 1
        run.waiting.add(a)
        run.mark_h = None
        run.epoch += 1  # its departure is off until it resumes

    def _repair(self, a: str) -> None:
        self.down.discard(a)
        self._push(self.time_h + self._rngs[a].exponential(self.fm.mtbf_h), FAIL, a)
        self._version += 1
        name = self.owner[a]
        if name is not None and a in self.running[name].waiting:
            run = self.running[name]
            run.waiting.discard(a)
            if not run.waiting:
                self._resume(run)

    def _requeue(self, run: _Run) -> None:
        """Give the job's slice back and queue it again in its arrival order (its checkpoint kept)."""
        name = run.job.name
        for m in run.members:
            self.owner[m] = None
        self.allocator.release(name)
        del self.running[name]
        run.members, run.mark_h = [], None
        run.epoch += 1  # its departure is off until it starts again
        run.requeues += 1
        self.counts["requeues"] += 1
        self.paused[name] = run
        at = next((i for i, j in enumerate(self.queue) if j.arrival_h > run.job.arrival_h), len(self.queue))
        self.queue.insert(at, run.job)
        self._version += 1

    def _reprice(self, run: _Run) -> None:
        """Re-price the job's step on what it holds now; move its departure when the rate changed."""
        new = self._rate(run)
        if new == run.rate:
            return
        if run.mark_h is not None and run.mark_h <= self.time_h:
            run.progress_h = run.progress(self.time_h)
            run.mark_h = self.time_h
        run.rate = new
        if run.mark_h is not None:
            run.epoch += 1
            self._push_departure(run)

    def _rate(self, run: _Run) -> float:
        """Work per hour on the job's current circuits (1 without a step model)."""
        if self.step_model is None:
            return 1.0
        name = run.job.name
        key = (name, self.allocator.changes(name))
        if key not in self._rates:
            comm = self.allocator.comm_ms(name, self.step_model)
            value = rate(comm, run.job.pattern, run.job.size, self.rack.n_lanes, self.step_model)
            if not value > 0:
                raise RackError(f"internal: job {name} cannot run its collective on what it holds")
            self._rates[key] = value
        return self._rates[key]

    def _push_departure(self, run: _Run) -> None:
        assert run.mark_h is not None
        left = max(0.0, run.job.duration_h - run.progress_h)
        self._push(run.mark_h + left / run.rate, DEPART, run.job.name, run.epoch)

    def _roll_back(self, run: _Run) -> None:
        done = run.progress(self.time_h)
        kept = np.floor(done / self.fm.checkpoint_h + 1e-12) * self.fm.checkpoint_h
        run.lost_acc_h += (done - kept) * run.job.size
        run.progress_h = float(kept)
        run.mark_h = None

    def _resume(self, run: _Run) -> None:
        run.mark_h = self.time_h + self.fm.restart_h
        run.epoch += 1
        run.rate = self._rate(run)
        self._push_departure(run)

    # -- the queue --------------------------------------------------------------------------
    def _free(self) -> list[str]:
        return [a for a in self.rack.names if self.owner[a] is None and a not in self.down]

    def _serve_queue(self) -> None:
        self._head_blocked = False
        i = 0
        while i < len(self.queue):
            job = self.queue[i]
            members = None
            if self._tried.get(job.name) != self._version:
                members = self.allocator.place(job, self._free())
            if members is not None:
                self._start(job, members)
                self.queue.pop(i)
                continue
            self._tried[job.name] = self._version
            if i == 0 and self._never_fits():
                self.queue.pop(0)
                self.records[job.name] = replace(self.records[job.name], rejected=True)
                continue
            if i == 0:
                self._head_blocked = True
            if not self.backfill:
                break
            i += 1

    def _never_fits(self) -> bool:
        """The head did not fit an empty, healthy rack: it never will."""
        return not self.running and not self.down

    def _start(self, job: TraceJob, members: list[str]) -> None:
        for a in members:
            if self.owner[a] is not None or a in self.down:
                raise RackError(f"internal: {a} given to {job.name} while not free")
            self.owner[a] = job.name
        bandwidth = self.allocator.bandwidth(job.name)
        if job.name in self.paused:  # a re-queued job restarts from its checkpoint
            run = self.paused.pop(job.name)
            run.members, run.bandwidth = list(members), bandwidth
            self.running[job.name] = run
            self._resume(run)
            return
        run = _Run(job, list(members), self.time_h, mark_h=self.time_h, bandwidth=bandwidth)
        self.running[job.name] = run
        run.rate = self._rate(run)
        self.records[job.name] = replace(self.records[job.name], start_h=self.time_h, bandwidth=run.bandwidth)
        self._push_departure(run)

    # -- measuring --------------------------------------------------------------------------
    def _sample(self) -> None:
        healthy = len(self.rack.names) - len(self.down)
        busy = sum(1 for a, o in self.owner.items() if o is not None and a not in self.down)
        free_workers = sum(1 for a in self.rack.workers if self.owner[a] is None and a not in self.down)
        stranded = free_workers if (self._head_blocked and self.queue
                                    and free_workers >= self.queue[0].size) else 0
        self._samples.append((self.time_h, healthy, busy, len(self.queue), stranded))

    def _result(self) -> Simulation:
        arr = np.array(self._samples, dtype=float).reshape(-1, 5)
        series = Series(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4])
        jobs = tuple(self.records.get(j.name) or JobRecord(j.name, j.size, j.pattern, j.duration_h,
                                                           j.arrival_h, None, None, None)
                     for j in self.trace)
        metrics = compute_metrics(self.policy, list(jobs), series, len(self.rack.workers), self.counts)
        return Simulation(metrics, jobs, series)


def run_simulation(rack: Rack, trace: Sequence[TraceJob], *, seed: int, policy: str = "fabric",
                   backfill: bool = False, failures: FailureModel | None = None,
                   observer: Callable[[Simulator], Any] | None = None,
                   max_lanes: int | None = None, baseline: str | None = None,
                   step_model: StepModel | None = DEFAULT_STEP) -> Simulation:
    """Simulate ``trace`` on ``rack`` under ``policy`` ("fabric" or "baseline"); metrics, records, series.

    ``observer(simulator)`` is called after every event (tests check invariants with it).
    ``max_lanes`` caps the lanes the fabric gives a slice (default: all the rack's lanes);
    ``baseline`` overrides the rack's baseline topology (``ring`` or ``torus:RxC``).
    ``step_model`` prices each job's step on what it holds (None: every job runs its
    ``duration_h`` whatever it holds).
    """
    sim = Simulator(rack, trace, seed=seed, policy=policy, backfill=backfill,
                    failures=failures or FailureModel(), max_lanes=max_lanes, baseline=baseline,
                    step_model=step_model)
    return sim.run(observer)


def simulate_trace(rack: Rack, trace: Sequence[TraceJob], *, seed: int, policy: str = "fabric",
                   backfill: bool = False, failures: FailureModel | None = None,
                   max_lanes: int | None = None, baseline: str | None = None,
                   step_model: StepModel | None = DEFAULT_STEP) -> TraceMetrics:
    """The :class:`TraceMetrics` of ``trace`` on ``rack`` under ``policy`` (same seed, same failures).

    Example:
        >>> from photonics.rack import default_rack, synthetic_trace
        >>> m = simulate_trace(default_rack(), synthetic_trace(6, seed=1), seed=1, policy="baseline")
        >>> m.n_jobs, m.policy
        (6, 'baseline')
    """
    return run_simulation(rack, trace, seed=seed, policy=policy, backfill=backfill,
                          failures=failures, max_lanes=max_lanes, baseline=baseline,
                          step_model=step_model).metrics
