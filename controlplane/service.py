"""The rack's control plane: the state of one chip's fabric, and every reconfiguration as a transaction.

:class:`ControlPlane` owns the truth about the rack (chip, heater map, fabric, jobs, the
plan of record, the heater currents in force) in a :class:`~controlplane.store.Store`, and
changes the chip only through :meth:`ControlPlane._reconfigure`, the one state machine::

    compute -> intent committed -> heaters written -> settle -> chip read back (verify)
            -> intent done (plan, currents, jobs, allocations committed) -> reply

A crash anywhere leaves at most one open intent; :meth:`ControlPlane.reconcile` (run at
start) reads the chip back (``IALL?``) and rolls it forward (chip == target), back (chip ==
previous) or re-applies the last committed currents (anything else). Reconfigurations
of a chip are serialised by one lock; the store refuses a second open intent and an
accelerator in two jobs whatever happens above it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from calibration.heater_map import IdealMap
from controlplane import multicast, placement, reports, states
from controlplane.crash import Crasher
from controlplane.errors import ServiceError
from controlplane.store import ABORTED, REVERTED, ROLLED_BACK, ROLLED_FORWARD, Store, StoreError
from instruments import branch_light, tree_leak
from instruments.controller import MEND_TOLERANCE_MA
from instruments.errors import ChipStateUnknownError, LimitError, WriteAbortedError
from instruments.light_meter import PlanLight
from photonics.configuration import mesh_fingerprint, mesh_label
from photonics.errors import LumionError
from photonics.fabric import (
    Fabric,
    FabricError,
    Job,
    JobPlan,
    TimingModel,
    fail_tbu,
    failover,
    line_job,
    links_job,
    ring_job,
)
from photonics.fabric.plan_io import plan_from_dict, plan_to_dict, recovery_to_dict
from photonics.fabric.verify import Effects, VerificationError, summary, verified_recovery, with_avoided

# Currents are written with 4 decimals of mA (the driver's resolution); the plan of record
# stores them so, and the chip reads back what was written.
DECIMALS = 4
PATTERNS = ("ring", "line", "all-to-all", "links", multicast.MULTICAST)
STATE_KIND, CLEAR_KIND = "state", "state-clear"  # the intents of POST and DELETE /api/v1/states
STATUS_SCHEMA = "lumion.status"
LIGHT_POLICIES = ("repair", "report")
# A recovery's ``verified``: what light said of every link of the new plan (docs/controlplane.md).
VERIFIED = {"ok": "by light", "partly measured": "partly", "not measured": "not measured", "off": "off"}


@dataclass(frozen=True)
class _Placed:
    """A placement as the light check takes it: the new plan, its program, the new links' indices."""

    plan: JobPlan
    program: dict[int, float]
    rerouted: tuple[int, ...]


@dataclass(frozen=True)
class RackState:
    """An immutable snapshot of the committed state (replaced whole after every commit)."""

    plan: JobPlan
    jobs: dict[str, Job]  # job id -> job, oldest first (the plan's link order)
    meta: dict[str, dict[str, Any]]  # job id -> created, updated
    currents: np.ndarray  # mA, per heater, as committed
    failed: tuple[str, ...]
    suspects: tuple[str, ...] = ()  # TBU names light blamed: routed around until cleared, not failed
    # heater states applied through POST /api/v1/states (id -> state), oldest first: their TBUs
    # are held (no route crosses them) until the state is cleared
    heater_states: dict[str, states.HeldState] = field(default_factory=dict)
    # multicast jobs' running trees (job id -> trees); their TBUs are held like a state's
    multicast: dict[str, Any] = field(default_factory=dict)


class ControlPlane:
    """One rack's control plane over an opened instrument bench.

    Args:
        store: the database.
        bench: an opened :class:`~instruments.controller.InstrumentBench` (``bench.controller``
            programs the chip; ``bench.transceivers`` are the modules telemetry reads).
        fabric: the accelerators cabled to the chip; on a database that already records a
            fabric it must be the same one (None: the recorded one).
        crasher: crash injection for tests (default: from ``LUMION_CRASH_AT``).
        timing: the recovery-time model (modelled stages of every recovery).
        light_policy: what a recovery light rejects gets: ``"repair"`` (route around the
            suspects, else refuse with the chip restored) or ``"report"`` (commit it, the
            answer says ``verified: off``). None: repair with a fitted heater map, report
            with the ideal one (an uncalibrated chip is expected to miss its plan).
    """

    def __init__(
        self,
        store: Store,
        bench: Any,
        fabric: Fabric | None = None,
        *,
        crasher: Crasher | None = None,
        timing: TimingModel | None = None,
        light_policy: str | None = None,
    ) -> None:
        self.store = store
        self.bench = bench
        self.controller = bench.controller
        self.mesh = self.controller.mesh
        self.chip_id = str(bench.chip_id)
        self.crasher = crasher or Crasher.from_env()
        self.timing = timing or TimingModel()
        self.started_s = time.time()
        self._lock = threading.RLock()
        self._live: dict[str, dict[str, Any]] = {}
        self.fabric = self._bind(fabric)
        self.heater_map = self._heater_map()
        self.light = PlanLight(bench, self.fabric)
        self.light_policy = light_policy or ("report" if isinstance(self.heater_map, IdealMap) else "repair")
        if self.light_policy not in LIGHT_POLICIES:
            raise ServiceError(f"light policy must be one of {', '.join(LIGHT_POLICIES)}, "
                               f"not {light_policy!r}")
        self.state: RackState | None = None
        self.reconcile()

    # -- start-up -------------------------------------------------------------------
    def _bind(self, fabric: Fabric | None) -> Fabric:
        """Record chip and fabric; refuse a fabric other than the one the database holds."""
        if fabric is not None and mesh_fingerprint(fabric.mesh) != mesh_fingerprint(self.mesh):
            raise ServiceError(
                f"fabric {fabric.name} is cabled to {mesh_label(fabric.mesh)}, but the bench's chip "
                f"is {mesh_label(self.mesh)}; give the fabric of this chip"
            )
        others = [
            r[0] for r in self.store.query("SELECT chip_id FROM chips WHERE chip_id != ?", (self.chip_id,))
        ]
        if others:  # one service drives one chip: a database is that chip's record
            raise ServiceError(
                f"{self.store.path} is the record of chip {', '.join(others)}, but the bench's "
                f"chip is {self.chip_id}; open that chip's bench, or give another --db"
            )
        self.store.ensure_chip(
            self.chip_id, fabric.mesh_spec if fabric else None, mesh_fingerprint(self.mesh)
        )
        recorded = self.store.get_fabric(self.chip_id)
        if recorded is None:
            if fabric is None:
                raise ServiceError("the database records no fabric for this chip; give one (--fabric)")
            self.store.set_fabric(self.chip_id, fabric.to_dict())
            return fabric
        known = Fabric.from_dict(recorded, f"the fabric recorded in {self.store.path}")
        if fabric is not None and fabric.to_dict() != recorded:
            raise ServiceError(
                f"the database already runs fabric {known.name} on chip {self.chip_id}; "
                "start without --fabric to keep it, or use another --db for another fabric"
            )
        return known

    def _heater_map(self) -> Any:
        """The heater map in force, recorded in the store.

        A fitted map on the controller (``lumion serve --map``) is recorded and used; with
        the controller's ideal map, the fitted map recorded earlier for this chip (if any) is
        loaded and checked against the chip, so a restart without ``--map`` keeps it.
        """
        hmap = self.controller.heater_map
        recorded = self.store.get_map(self.chip_id)
        if not isinstance(hmap, IdealMap):
            hmap.check_for(chip_id=self.chip_id, mesh=self.mesh, source="the heater map")
            self.store.set_map(self.chip_id, "fitted", hmap.to_dict())
        elif recorded is not None and recorded[0] == "fitted":
            from calibration.map import CalibrationMap

            source = f"the map recorded in {self.store.path}"
            hmap = CalibrationMap.from_dict(recorded[1], source)
            hmap.check_for(chip_id=self.chip_id, mesh=self.mesh, source=source)
            self.controller.heater_map = hmap
        elif recorded is None:
            self.store.set_map(self.chip_id, "ideal", None)
        return hmap

    # -- reconciliation -------------------------------------------------------------
    def reconcile(self) -> list[dict[str, Any]]:
        """Read the chip back and settle every open intent; load the committed state.

        Rules (docs/controlplane.md): chip == target -> roll forward; chip == previous ->
        roll back; anything else -> write the last committed (previous) currents again.
        With no open intent, a chip that differs from the committed currents (a power
        cycle, a manual change) gets them written again. A fresh database programs the
        idle chip (every TBU parked) as its first reconfiguration.
        """
        with self._lock:
            actions = []
            chip = self._read_chip()
            for it in self.store.open_intents(self.chip_id):
                target, previous = np.array(it["target"]), np.array(it["previous"])
                # a heater state is committed only once light agreed with it: a crash before
                # that leaves it unchecked, so it is written back, never rolled forward
                unchecked = it["kind"] == STATE_KIND
                if _same(chip, target, self._tolerance()) and not unchecked:
                    # the target, not the reading: a fresh process reads channels it has not
                    # confirmed up to a module's offset off (HeaterDriver.currents)
                    self.store.commit_intent(it["id"], ROLLED_FORWARD, "chip held the target",
                                             target.tolist())
                    action = ROLLED_FORWARD
                elif _same(chip, previous, self._tolerance()):
                    self.store.close_intent(it["id"], ROLLED_BACK, "chip held the previous currents")
                    action = ROLLED_BACK
                else:
                    chip = self._write_and_verify(previous)
                    self.store.close_intent(
                        it["id"], REVERTED, "chip held neither; previous currents rewritten"
                    )
                    action = REVERTED
                actions.append(
                    {"intent": it["id"], "action": action, "reconfiguration": it["kind"], "job": it["job_id"]}
                )
                self.store.log_event(
                    "reconciled",
                    {
                        "intent": it["id"],
                        "action": action,
                        "reconfiguration": it["kind"],
                        "job": it["job_id"],
                        "channels_differing": _differing(chip, target, self._tolerance()),
                    },
                )
            committed, plan_doc = self.store.committed(self.chip_id)
            if committed is None:
                self._load(placement.empty_plan(self.fabric, self.heater_map), chip)
                self._reconfigure("init", None, self.state.plan, dict(enumerate(self.state.plan.heater)), {})
                actions.append({"action": "initialised"})
            else:
                want = np.array(committed)
                if not _same(chip, want, self._tolerance()):
                    n = _differing(chip, want, self._tolerance())
                    self._write_and_verify(want)
                    actions.append({"action": "drift-repaired", "channels_differing": n})
                    self.store.log_event("reconciled", {"action": "drift-repaired", "channels_differing": n})
                self._load(plan_from_dict(plan_doc, self.fabric, "the plan of record"), want)
            self.store.log_event(
                "state-loaded",
                {"chip_id": self.chip_id, "actions": actions, "jobs": list(self._state().jobs)},
            )
            return actions

    def _load(self, plan: JobPlan, currents: np.ndarray) -> None:
        """Rebuild the snapshot from the store; StoreError when jobs and plan disagree."""
        rows = self.store.jobs(self.chip_id)
        jobs = {r["id"]: _job_from_dict(r["job"]) for r in rows}
        meta = {r["id"]: {"created": r["created"], "updated": r["updated"]} for r in rows}
        if list(placement.merged_job(list(jobs.values())).links) != list(plan.job.links):
            raise StoreError(
                f"{self.store.path}: the running jobs' links do not match the plan of record; "
                "the database is inconsistent (restore a backup or start a new --db)"
            )
        failed = tuple(self.store.failed_accelerators(self.chip_id))
        plan = replace(plan, failed_accelerators=failed)
        suspects = tuple(r["tbu"] for r in self.store.suspect_tbus(self.chip_id))
        held = {r["id"]: states.held_from_record(r, self.mesh)
                for r in self.store.heater_states(self.chip_id)}
        trees = {r["id"]: multicast.running(r["job"], self.fabric, plan.failed_tbus)
                 for r in rows if multicast.MULTICAST in r["job"]}
        self.state = RackState(plan, jobs, meta, np.asarray(currents, float)[: self.mesh.n_heaters], failed,
                               suspects, held, trees)

    def _tolerance(self) -> np.ndarray:
        """Per heater (mA): how far a read-back may be from what the channel holds.

        The controller's: wider on channels this process has not confirmed (their module
        offset is not known yet).
        """
        return self.controller.readback_tolerance_ma()

    def _read_chip(self) -> np.ndarray:
        try:
            return self.controller.resync()
        except LumionError as exc:
            raise ServiceError(f"cannot read the chip's currents back ({exc})", "instrument") from exc

    def _write_and_verify(self, currents: np.ndarray) -> np.ndarray:
        try:
            self.controller.set_currents(np.asarray(currents, float))
        except (WriteAbortedError, ChipStateUnknownError) as exc:
            raise ServiceError(f"writing the chip failed ({exc})", "instrument") from exc
        chip = self._read_chip()
        if not _same(chip, currents, self._tolerance()):
            raise ServiceError(
                f"the chip does not hold what was written "
                f"({_differing(chip, currents, self._tolerance())} channels differ)",
                "instrument",
            )
        return chip

    # -- the reconfiguration state machine --------------------------------------------
    def _reconfigure(
        self,
        kind: str,
        job_id: str | None,
        plan: JobPlan,
        program: Mapping[int, float],
        change: dict[str, Any],
        stages: list[dict[str, Any]] | None = None,
    ) -> int:
        """Intent, write, settle, verify, commit; the intent id. Call with the lock held.

        ``stages`` (if given) gets the measured write, settle and verify stages appended.
        """
        intent, plan, chip, timed = self._begin(kind, job_id, plan, program, change)
        self._commit(intent, kind, plan, program, chip)
        if stages is not None:
            stages += timed
        return intent

    def _begin(
        self,
        kind: str,
        job_id: str | None,
        plan: JobPlan,
        program: Mapping[int, float],
        change: dict[str, Any],
    ) -> tuple[int, JobPlan, np.ndarray, list[dict[str, Any]]]:
        """Intent, write, settle, read back: (intent, plan to commit, read-back, stages). Lock held."""
        assert self.state is not None
        previous = self.state.currents
        target = previous.copy()
        for ch, v in program.items():
            target[int(ch)] = round(float(v), DECIMALS)
        try:
            self.controller.check(target)
        except LimitError as exc:
            raise ServiceError(str(exc), "impossible") from exc
        plan = replace(plan, recoveries=())  # history lives in the event log, not in every plan
        change = {**change, "unit": plan.heater_unit}
        try:
            intent = self.store.open_intent(
                self.chip_id,
                kind,
                job_id,
                previous.tolist(),
                target.tolist(),
                plan_to_dict(plan, self.fabric),
                change,
            )
        except sqlite3.IntegrityError as exc:
            raise ServiceError(
                f"the store refused the reservation ({exc}): an accelerator already belongs to "
                "a job, or another reconfiguration is open",
                "impossible",
            ) from exc
        self.crasher.point("intent", kind)
        chip, timed = self._write_and_check(intent, kind, target, settle=bool(program))
        return intent, plan, chip, timed

    def _commit(
        self, intent: int, kind: str, plan: JobPlan, program: Mapping[int, float], chip: np.ndarray,
        verification: Mapping[str, Any] | None = None,
    ) -> None:
        """The intent done: plan, currents and state change committed, the snapshot reloaded."""
        self.crasher.point("verified", kind)
        self.store.commit_intent(intent, outcome=f"{len(program)} channels written", currents=chip.tolist(),
                                 verification=verification)
        self.crasher.point("committed", kind)
        self._load(plan, chip)

    def _abort(self, intent: int, why: str) -> list[dict[str, Any]]:
        """Light refused the open intent: write the previous currents back, read them, close it
        ``aborted`` (chip and database then agree on the state before it); the restore stage.
        """
        assert self.state is not None
        t0 = time.time()
        previous = self.state.currents
        try:
            self.controller.set_currents(previous)
            chip = self._read_chip()
        except LumionError as exc:
            self._settle_unknown(intent)
            raise ServiceError(f"{why}; restoring the previous currents failed ({exc}); reconciled",
                               "instrument") from exc
        if not _same(chip, previous, self._tolerance()):
            self._settle_unknown(intent)
            n = _differing(chip, previous, self._tolerance())
            raise ServiceError(f"{why}; the chip does not hold the previous currents after the restore "
                               f"({n} channels differ); reconciled", "instrument")
        self.store.close_intent(intent, ABORTED, why[:300])
        return [{"stage": "restore", "start_s": t0, "end_s": time.time()}]

    def _write_and_check(
        self, intent: int, kind: str, target: np.ndarray, settle: bool
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Write ``target``, wait the thermal settle, read every channel back; (read-back, stages).

        Any failure settles the open intent before raising (aborted when the controller
        restored the previous currents, reconciled otherwise) and answers ``instrument``.
        """
        t0 = time.time()
        try:
            with self.crasher.around_write(self.controller.driver, kind):
                self.controller.set_currents(target)
        except WriteAbortedError as exc:  # the controller restored every touched channel
            self.store.close_intent(intent, ABORTED, str(exc)[:300])
            raise ServiceError(f"programming the chip failed, nothing changed ({exc})", "instrument") from exc
        except LumionError as exc:
            self._settle_unknown(intent)
            raise ServiceError(
                f"programming the chip failed ({exc}); the chip was read back and reconciled", "instrument"
            ) from exc
        t1 = time.time()
        self.crasher.point("written", kind)
        time.sleep(self.timing.settle_ms() / 1e3 if settle else 0.0)
        t2 = time.time()
        try:
            chip = self.controller.resync()
        except LumionError as exc:
            self._settle_unknown(intent)
            raise ServiceError(f"reading the chip back failed ({exc})", "instrument") from exc
        if not _same(chip, target, self._tolerance()):
            self._settle_unknown(intent)
            raise ServiceError(
                f"the chip does not hold the target after the write "
                f"({_differing(chip, target, self._tolerance())} channels differ); reconciled",
                "instrument",
            )
        return chip, [
            {"stage": "write", "start_s": t0, "end_s": t1},
            {"stage": "settle", "start_s": t1, "end_s": t2},
            {"stage": "verify", "start_s": t2, "end_s": time.time()},
        ]

    def _settle_unknown(self, intent: int) -> None:
        """After a failure that may have changed the chip: reconcile now (best effort)."""
        try:
            self.reconcile()
        except LumionError as exc:
            self.store.log_event("reconcile-failed", {"intent": intent, "error": str(exc)[:300]})

    # -- jobs -------------------------------------------------------------------------
    def place_job(
        self,
        *,
        accelerators: Sequence[str] | None = None,
        count: int | None = None,
        pattern: str = "ring",
        links: Sequence[Sequence[str]] | None = None,
        name: str | None = None,
        groups: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Place a job and program the chip; the job's view (:meth:`job`). ``pattern``
        ``multicast``: ``groups`` of ``{"src", "dsts"}`` (controlplane.multicast).
        """
        if pattern == multicast.MULTICAST:
            return self._place_multicast(multicast.groups_of(groups), name)
        with self._lock:
            state = self._state()
            job_id = self.store.next_job_id()
            try:
                members = self._members(state, accelerators, count, links, pattern)
            except ServiceError as exc:  # busy, failed or spare accelerators: refused, and logged so
                if exc.kind == "impossible":
                    self.log_event("job-refused", job=job_id, reason=str(exc)[:300])
                raise
            job = _make_job(pattern, members, links, name or job_id)
            new = tuple(range(len(state.plan.links), len(state.plan.links) + len(job.links)))

            def compute(avoid: Mapping[int, str]) -> _Placed:
                plan, program = placement.place(self.fabric, with_avoided(state.plan, avoid), job,
                                                self.heater_map)
                return _Placed(plan, program, new)

            def prepare(_placed: _Placed) -> tuple[dict[str, Any], None]:
                return {
                    "create_jobs": [{"id": job_id, "job": job.to_dict()}],
                    "allocate": dict.fromkeys(job.accelerators, job_id),
                }, None

            stages: list[dict[str, Any]] = []
            try:
                placed, intent, _, light = self._by_light(state, "place", job_id, compute, prepare, stages)
            except VerificationError as exc:  # light refused every attempt; the chip was restored
                self.log_event("job-refused", job=job_id, reason=str(exc)[:300], verification=exc.attempts)
                raise ServiceError(str(exc), "unverified",
                                   {"verification": {"status": "refused", "attempts": exc.attempts}}) from exc
            except FabricError as exc:
                self.log_event("job-refused", job=job_id, reason=str(exc)[:300])
                raise ServiceError(str(exc), "impossible") from exc
            self.log_event(
                "job-placed",
                job=job_id,
                intent=intent,
                accelerators=list(job.accelerators),
                pattern=job.topology,
                n_changed_heaters=len(placed.program),
                stages=stages,
                **light,
            )
            return {**self.job(job_id), **light}

    def _members(
        self,
        state: RackState,
        accelerators: Sequence[str] | None,
        count: int | None,
        links: Sequence[Sequence[str]] | None,
        pattern: str,
    ) -> list[str]:
        if pattern not in PATTERNS:
            raise ServiceError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
        if pattern == "links":
            if not links:
                raise ServiceError("pattern 'links' needs 'links': [[a, b], ...]")
            names = list(dict.fromkeys(str(x) for lk in links for x in lk))
        elif accelerators:
            names = [str(a) for a in accelerators]
        elif count is not None:
            free = self._free_workers(state)
            if count > len(free):
                raise ServiceError(
                    f"asked for {count} accelerators, {len(free)} are free ({', '.join(free) or 'none'})",
                    "impossible",
                )
            names = free[:count]
        else:
            raise ServiceError("give 'accelerators' (names) or 'count'")
        unknown = [a for a in names if a not in self.fabric.names]
        if unknown:
            raise ServiceError(
                f"unknown accelerator {unknown[0]!r}; the fabric has {', '.join(self.fabric.names)}"
            )
        holders = self._holders(state)
        for a in names:
            if a in holders:
                raise ServiceError(f"{a} already runs job {holders[a]}", "impossible")
            if a in state.failed:
                raise ServiceError(
                    f"{a} has failed; repair it first (POST /api/v1/accelerators/{a}/repair)", "impossible"
                )
            if a in self.fabric.spares:
                raise ServiceError(
                    f"{a} is a spare, kept for failover; ask for workers ({', '.join(self.fabric.workers)})",
                    "impossible",
                )
        return names

    def _free_workers(self, state: RackState) -> list[str]:
        holders = self._holders(state)
        return [a for a in self.fabric.workers if a not in holders and a not in state.failed]

    @staticmethod
    def _holders(state: RackState) -> dict[str, str]:
        return {a: jid for jid, j in state.jobs.items() for a in j.accelerators}

    def delete_job(self, job_id: str) -> dict[str, Any]:
        """Stop a job: park the TBUs only its links used, free its accelerators and spares."""
        with self._lock:
            state = self._state()
            job = self._job(state, job_id)
            first, count = self._span(state, job_id)
            remaining = placement.merged_job([j for jid, j in state.jobs.items() if jid != job_id])
            t0 = time.time()
            plan, program = placement.remove(
                self.fabric, state.plan, range(first, first + count), self.heater_map, remaining
            )
            if job_id in state.multicast:  # its trees' TBUs parked: the plan's parked currents
                program = {**program, **self._park(state, multicast.tree_tbus(state.multicast[job_id]))}
            stages = [{"stage": "compute", "start_s": t0, "end_s": time.time()}]
            intent = self._reconfigure("delete", job_id, plan, program, {"delete_jobs": [job_id]}, stages)
            self.log_event(
                "job-deleted",
                job=job_id,
                intent=intent,
                freed=list(job.accelerators),
                n_changed_heaters=len(program),
                stages=stages,
            )
            return {
                "id": job_id,
                "state": "deleted",
                "freed": list(job.accelerators),
                "n_changed_heaters": len(program),
                "intent": intent,
            }

    def _job(self, state: RackState, job_id: str) -> Job:
        try:
            return state.jobs[job_id]
        except KeyError:
            raise ServiceError(
                f"no running job {job_id!r}; running: {', '.join(state.jobs) or 'none'}", "not-found"
            ) from None

    @staticmethod
    def _span(state: RackState, job_id: str) -> tuple[int, int]:
        """(first link index, link count) of a job in the plan of record."""
        first = 0
        for jid, j in state.jobs.items():
            if jid == job_id:
                return first, len(j.links)
            first += len(j.links)
        raise ServiceError(f"no running job {job_id!r}", "not-found")

    def job(self, job_id: str) -> dict[str, Any]:
        """A running job: accelerators, links with their figures, spares it took."""
        state = self._state()
        job = self._job(state, job_id)
        first, count = self._span(state, job_id)
        mesh = self.fabric.mesh
        links = [self._link_view(state.plan.links[i], job_id, mesh) for i in range(first, first + count)]
        return {
            "id": job_id,
            "name": job.name,
            "state": "running",
            "pattern": job.topology,
            "accelerators": list(job.accelerators),
            "job": job.to_dict(),
            "links": links,
            "spares_in_use": [a for a in job.accelerators if a in self.fabric.spares],
            "worst_margin_db": min((lk["margin_db"] for lk in links), default=None),
            **self._multicast_view(state, job_id),
            **state.meta.get(job_id, {}),
        }

    def _link_view(self, lk: Any, job_id: str | None, mesh: Any) -> dict[str, Any]:
        out = {"job": job_id, **lk.to_dict(mesh), "route": lk.route.to_dict(mesh)}  # the dashboard draws it
        live = self._live.get(lk.link[1])
        if live is not None:
            rx = live.get("rx_power_dbm")
            sens = self.fabric.lane(lk.route.dst).rx_sensitivity_dbm
            out.update(
                {
                    "live_rx_power_dbm": rx,
                    "live_margin_db": None if rx is None else rx - sens,
                    "live_t_s": live.get("t_s"),
                    "los": live.get("los"),
                }
            )
        return out

    # -- failures ---------------------------------------------------------------------
    def report_failure(
        self,
        job_id: str | None,
        *,
        accelerator: str | None = None,
        tbu: str | None = None,
        state: str = "dead",
        source: str = "api",
        detected_s: float | None = None,
        accelerators: Sequence[str] | None = None,
        policy: str | None = None,
    ) -> dict[str, Any]:
        """Recover from failed accelerators (splice in spares) or a failed TBU (re-route around it).

        ``job_id`` None: the job that holds ``accelerator`` (for a TBU: every job it cuts).
        ``accelerators``: several that failed together, recovered in one reconfiguration
        (they may belong to different jobs; then ``job_id`` stays None). ``policy``: the
        fabric's recovery policy (``hitless`` or ``fewest-moves``; None: the fabric's default).
        ``detected_s`` (epoch s): when the failure was detected, for the ``detect`` stage.
        Answers the recovery with the keys of ``lumion failover --json`` plus ``job_id``,
        ``intent``, ``stages`` (measured, epoch s), ``measured_ms`` and what light said:
        ``verified`` ("by light", "partly", "not measured", "off"), ``verification`` (every
        link measured vs planned), ``light_attempts`` and ``suspect_tbus`` (TBUs a repair
        routed around). Light refusing every attempt answers 502 ``unverified`` with the
        chip restored (docs/controlplane.md, "Verified by light").
        """
        t_report = time.time()
        names = _failed_names(accelerator, accelerators, tbu, state)
        detected_s = reports.check_detected(detected_s, t_report)  # before anything is written
        with self._lock:
            st = self._state()
            repeat = self._repeat(st, job_id, names, tbu, state, source)
            if repeat is not None:
                return repeat
            job_id = self._report_job(st, job_id, names, tbu)
            self._refuse_tree_tbu(st, tbu)
            if job_id in st.multicast:
                return self._recover_multicast(st, job_id, names, source, detected_s, t_report)
            failed = names[0] if len(names) == 1 else (names or None)
            report = {"job": job_id, "accelerator": failed, "tbu": tbu, "source": source}
            self.log_event("failure-reported", **report, state=state)
            stages = (
                []
                if detected_s is None
                else [{"stage": "detect", "start_s": float(detected_s), "end_s": t_report}]
            )
            kind = "failover" if names else "tbu"
            try:
                done = self._recover_by_light(st, job_id, (failed, tbu, state, policy), kind, stages, names)
            except VerificationError as exc:  # light refused every attempt; the chip was restored
                self.log_event("recovery-refused", **report, reason=str(exc)[:300], verification=exc.attempts)
                raise ServiceError(str(exc), "unverified",
                                   {"verification": {"status": "refused", "attempts": exc.attempts}}) from exc
            except FabricError as exc:
                self.log_event("recovery-refused", **report, reason=str(exc)[:300])
                raise ServiceError(str(exc), "impossible") from exc
            rec, intent, out, light = done
            out = {
                **out,
                "intent": intent,
                "stages": stages,
                "measured_ms": _stage_ms(stages),
                **light,
            }
            self.log_event(
                "recovery",
                job=job_id,
                intent=intent,
                failed=rec.failed,
                spare=rec.spare,
                source=source,
                stages=stages,
                measured_ms=out["measured_ms"],
                timing_ms=out["timing_ms"],
                n_changed_heaters=len(rec.program),
                rerouted_links=out["rerouted_links"],
                **light,
            )
            return out

    def _recover_by_light(
        self,
        st: RackState,
        job_id: str | None,
        failure: tuple[Any, str | None, str, str | None],
        kind: str,
        stages: list[dict[str, Any]],
        names: list[str],
    ) -> tuple[Any, int, dict[str, Any], dict[str, Any]]:
        """Compute, program and verify by light a recovery, repairing around suspect TBUs.

        Returns (recovery, committed intent, reply, light keys of the reply: ``verified``,
        ``verification``, ``light_attempts``, ``suspect_tbus``). Raises FabricError (nothing
        computable) or VerificationError (light refused every attempt; the chip restored).
        """
        failed, tbu, state, policy = failure

        def compute(avoid: Mapping[int, str]) -> Any:
            return self._recover(replace(st, plan=with_avoided(st.plan, avoid)), failed, tbu, state, policy)

        def prepare(rec: Any) -> tuple[dict[str, Any], Any]:
            change = self._change(st, rec.plan)
            out = self._recovery_view(st, rec, job_id, change)
            # the failure's identity and the reply go into the intent: a repeated report is
            # answered from it, even after a crash that rolled this recovery forward
            change.update(identity=reports.identity(names, tbu, state), recovery=out)
            return change, out

        return self._by_light(st, kind, job_id, compute, prepare, stages, reported_tbu=tbu)

    def _by_light(
        self,
        st: RackState,
        kind: str,
        job_id: str | None,
        compute: Any,
        prepare: Any,
        stages: list[dict[str, Any]],
        reported_tbu: str | None = None,
    ) -> tuple[Any, int, Any, dict[str, Any]]:
        """Program what ``compute(avoid)`` gives (``.plan``, ``.program``, ``.rerouted``: the new
        links) and verify it by light (photonics.fabric.verify: repair, or refuse with the chip
        restored). ``prepare(rec)``: (the intent's state change, anything the caller wants back).

        Returns (what was committed, its intent, prepare's second value, the reply's light keys).
        The TBUs this call's repairs avoided become **suspects** (table ``suspect_tbus``,
        events ``tbu-suspected``), not failures: the committed plan does not record them, and
        every later computation avoids them (``st.suspects``) until an operator clears them.
        ``reported_tbu``: a TBU reported failed is no longer a suspect (its failure replaces it).
        """
        open_: dict[str, Any] = {}
        known = {self.mesh.tbu_index(n): "dead" for n in st.suspects if n != reported_tbu}
        # a heater state's and a multicast tree's TBUs are held: no new route may cross them
        # (they are not failed)
        known.update({t: "dead" for hs in st.heater_states.values() for t in hs.tbus})
        known.update({t: "dead" for run in st.multicast.values() for t in multicast.tree_tbus(run)})
        blamed: dict[int, str] = {}  # what the current attempt's repair avoids

        def with_suspects(avoid: Mapping[int, str]) -> Any:
            blamed.clear()
            blamed.update(avoid)
            return compute({**known, **avoid})

        def timed(stage: str, fn: Any, *args: Any) -> Any:
            t0 = time.time()
            value = fn(*args)
            stages.append({"stage": stage, "start_s": t0, "end_s": time.time()})
            return value

        def apply(rec: Any) -> None:
            change, extra = prepare(rec)
            new = [self.mesh.tbu_names[t] for t in blamed if t not in st.plan.failed_tbus]
            change = {**change, "suspect": new,
                      "unsuspect": [reported_tbu] if reported_tbu in st.suspects else []}
            plan = _without_suspects(rec.plan, st.plan.failed_tbus, {**known, **blamed})
            intent, plan, chip, written = self._begin(kind, job_id, plan, rec.program, change)
            stages.extend(written)
            open_.update(intent=intent, plan=plan, chip=chip, extra=extra)

        def restore(_rec: Any, why: str) -> None:
            self.log_event("light-refused", job=job_id, intent=open_["intent"], reason=why[:300])
            stages.extend(self._abort(open_["intent"], why))

        def measure(rec: Any, ref: Mapping[int, tuple[str, float]]) -> Any:
            return timed("light", self.light.checks, st.plan, rec, ref)

        before = timed("reference", self.light.before, st.plan)
        effects = Effects(lambda avoid: timed("compute", with_suspects, avoid), apply, measure, restore,
                          before)
        v = verified_recovery(effects, self.mesh.tbu_names, repair=self.light_policy == "repair")
        self._commit(open_["intent"], kind, open_["plan"], v.recovery.program, open_["chip"])
        self._log_suspects(job_id, open_["intent"], v.attempts, st)
        light = {
            "verified": VERIFIED[v.verification["status"]],
            "verification": v.verification,
            "light_attempts": list(v.attempts),
            "suspect_tbus": [self.mesh.tbu_names[t] for t in v.suspect_tbus],
        }
        return v.recovery, open_["intent"], open_["extra"], light

    def _log_suspects(self, job_id: str | None, intent: int, attempts: Sequence[Mapping[str, Any]],
                      st: RackState) -> None:
        """One ``tbu-suspected`` event per TBU the committed recovery made a suspect (with the
        refusal that blamed it); call after the commit.
        """
        new = [n for n in self._state().suspects if n not in st.suspects]
        for name in new:
            why = next((a["refusal"] for a in attempts if name in a.get("suspect_tbus", ())), "")
            self.log_event("tbu-suspected", job=job_id, intent=intent, tbu=name, reason=why[:300])

    def clear_suspect(self, tbu: str) -> dict[str, Any]:
        """Clear a suspect TBU: routing may use it again (it was checked, or the fault is fixed).

        Nothing is written to the chip (no route crosses a suspect). Idempotent: a TBU that is
        not a suspect answers ``changed`` false (no event); 404 for a name the mesh does not have.
        """
        with self._lock:
            st = self._state()
            try:
                self.mesh.tbu_index(tbu)
            except LumionError as exc:
                raise ServiceError(str(exc), "not-found") from exc
            if tbu not in st.suspects:
                return {"tbu": tbu, "suspect": False, "changed": False}
            self.store.clear_suspect(self.chip_id, tbu)
            self._load(st.plan, st.currents)
            self.log_event("tbu-cleared", tbu=tbu)
            return {"tbu": tbu, "suspect": False, "changed": True}

    def _repeat(
        self, st: RackState, job_id: str | None, names: list[str], tbu: str | None, state: str, source: str
    ) -> dict[str, Any] | None:
        """The committed recovery answering a repeat of a failure already recovered (else None).

        A repeat: every named accelerator is still out of service, or the TBU is still
        failed in the reported state. Logged as a ``failure-reported`` event with ``repeat_of``.
        """
        if names:
            if not all(a in st.failed for a in names):
                return None
        else:
            self._check_tbu(tbu)
            t = self.mesh.tbu_index(str(tbu))
            if st.plan.failed_tbus.get(t) != state:
                return None
        intent = self.store.recovery_of(self.chip_id, reports.identity(names, tbu, state))
        if intent is None:
            return None
        out = reports.replay(intent, self.store.event_of_intent("recovery", intent["id"]), job_id)
        failed = names[0] if len(names) == 1 else (names or None)
        self.log_event(
            "failure-reported", job=job_id, accelerator=failed, tbu=tbu, source=source, state=state,
            repeat_of=intent["id"],
        )
        return out

    def _report_job(self, st: RackState, job_id: str | None, names: list[str], tbu: str | None) -> str | None:
        """The job a report concerns (None: several, or a TBU's); 404/422 for what does not exist."""
        if job_id is not None:
            self._job(st, job_id)
        if not names:
            self._check_tbu(tbu)
            return job_id
        holders = {self._holder(st, job_id, a) for a in names}
        return holders.pop() if len(holders) == 1 else None

    def _recover(
        self, st: RackState, failed: str | list[str] | None, tbu: str | None, state: str, policy: str | None
    ) -> Any:
        """The fabric's recovery on the plan of record (FabricError when it cannot be done)."""
        options = {} if policy is None else {"policy": policy}
        if failed is not None:
            return failover(self.fabric, st.plan.job, failed, st.plan, heater_map=self.heater_map, **options)
        return fail_tbu(self.fabric, st.plan, tbu, state, heater_map=self.heater_map, **options)

    def _holder(self, st: RackState, job_id: str | None, accelerator: str) -> str:
        """The job running ``accelerator`` (checked against ``job_id`` when given)."""
        if accelerator not in self.fabric.names:
            raise ServiceError(
                f"unknown accelerator {accelerator!r}; the fabric has {', '.join(self.fabric.names)}"
            )
        holder = self._holders(st).get(accelerator)
        if holder is None:
            raise ServiceError(f"{accelerator} runs no job; nothing to recover", "not-found")
        if job_id is not None and holder != job_id:
            raise ServiceError(f"{accelerator} is not in job {job_id} (it runs {holder})", "not-found")
        return holder

    def _check_tbu(self, tbu: str | None) -> None:
        try:
            self.mesh.tbu_index(str(tbu))
        except LumionError as exc:
            raise ServiceError(str(exc)) from exc

    def _change(self, st: RackState, plan: JobPlan) -> dict[str, Any]:
        """The store change a recovery makes: jobs whose accelerators were swapped, spares taken.

        The new plan's links are split back into the jobs by position (a recovery keeps the
        link order); an accelerator replaced in a link is released and marked failed, the one
        that replaced it is allocated to the job.
        """
        new_links = list(plan.job.links)
        if len(new_links) != len(st.plan.job.links):
            raise ServiceError("internal: a recovery changed the number of links", "bug")
        update, allocate, release = {}, {}, []
        first = 0
        for jid, job in st.jobs.items():
            links = new_links[first : first + len(job.links)]
            first += len(job.links)
            if links == list(job.links):
                continue
            swap = {
                o: n
                for old, new in zip(job.links, links, strict=True)
                for o, n in zip(old, new, strict=True)
                if o != n
            }
            new_job = Job(
                job.name, tuple(swap.get(a, a) for a in job.accelerators), tuple(links), job.topology
            )
            update[jid] = new_job.to_dict()
            allocate.update(dict.fromkeys(swap.values(), jid))
            release += list(swap)
        fail = [a for a in plan.failed_accelerators if a not in st.failed]
        return {"update_jobs": update, "allocate": allocate, "release": release, "fail": fail}

    def _recovery_view(
        self, st: RackState, rec: Any, job_id: str | None, change: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The reply to a report (before the commit: ``st`` is the state the recovery started from).

        ``job`` and ``links`` are those of the job concerned: the reported one, else the one
        job the recovery re-routed; with several (or none), ``job`` is None and ``links``
        are every link of the chip, each naming its job.
        """
        out = recovery_to_dict(rec, self.fabric.mesh)
        owners = [jid for jid, j in st.jobs.items() for _ in j.links]
        touched = sorted({owners[i] for i in rec.rerouted})
        shown = job_id if job_id is not None else (touched[0] if len(touched) == 1 else None)
        if shown is not None:
            first, count = self._span(st, shown)
            out["job"] = dict(change.get("update_jobs", {}).get(shown) or st.jobs[shown].to_dict())
            out["links"] = out["links"][first : first + count]
        else:  # the merged plan's job is the whole chip, no job anybody placed
            out["job"] = None
            out["links"] = [{**lk, "job": owner} for lk, owner in zip(out["links"], owners, strict=True)]
        out.update({"job_id": shown, "jobs_rerouted": touched})
        return out

    def repair(self, accelerator: str) -> dict[str, Any]:
        """Put a failed accelerator back in service (it was replaced or fixed).

        Idempotent: repairing one that is in service changes nothing and says so
        (``changed`` false); 404 only for a name the fabric does not have.
        """
        with self._lock:
            st = self._state()
            if accelerator not in self.fabric.names:
                raise ServiceError(
                    f"unknown accelerator {accelerator!r}; the fabric has {', '.join(self.fabric.names)}",
                    "not-found",
                )
            if accelerator not in st.failed:
                return {"accelerator": accelerator, "failed": False, "changed": False}
            failed = tuple(a for a in st.failed if a != accelerator)
            plan = replace(st.plan, failed_accelerators=failed, recoveries=())
            self.store.repair(self.chip_id, accelerator, plan_to_dict(plan, self.fabric))
            self._load(plan, st.currents)
            self.log_event("accelerator-repaired", accelerator=accelerator)
            return {"accelerator": accelerator, "failed": False, "changed": True}

    # -- multicast jobs ---------------------------------------------------------------
    def _place_multicast(self, groups: list[tuple[str, tuple[str, ...]]], name: str | None) -> dict[str, Any]:
        """Place a multicast job (controlplane.multicast): trees over the TBUs nothing holds, only
        their heaters written, every branch and every running link checked by light.
        """
        with self._lock:
            st = self._state()
            job_id = self.store.next_job_id()
            names = multicast.members(groups)
            try:
                self._members(st, names, None, None, "ring")
                blocked = multicast.avoid(self._held_tbus(st), st.plan.failed_tbus)
                mplan = multicast.plan(self.fabric, groups, blocked)
            except ServiceError as exc:
                if exc.kind == "impossible":
                    self.log_event("job-refused", job=job_id, reason=str(exc)[:300])
                raise
            job = multicast.job_of(name or job_id, groups)
            run = multicast.RunningMulticast(mplan)
            writes = multicast.program(mplan.configuration, self.heater_map, multicast.tree_tbus(run),
                                       st.currents, DECIMALS)
            change = {"create_jobs": [{"id": job_id, "job": multicast.record(job, run, self.fabric)}],
                      "allocate": dict.fromkeys(job.accelerators, job_id)}
            new = branch_light.branch_names(mplan)
            intent, light, stages = self._multicast_by_light(st, "place", job_id, writes, change, mplan, new,
                                                             {}, st.failed)
            self.log_event("job-placed", job=job_id, intent=intent, accelerators=list(job.accelerators),
                           pattern=multicast.MULTICAST, n_changed_heaters=len(writes), stages=stages, **light)
            return {**self.job(job_id), **light, "intent": intent, "stages": stages}

    def _write_and_read(self, kind: str, job_id: str | None, st: RackState, writes: Mapping[int, float],
                        change: dict[str, Any],
                        read: Callable[[], Any]) -> tuple[int, Any, Any, list[Any], Any, Any]:
        """Every running link read, the change written (intent, limits first, all or nothing, read
        back), then ``read()`` (the change's own check by light) and the running links read again.
        Returns (intent, plan, chip, stages, what ``read`` returned, the links' summary); the
        caller commits or aborts the intent.
        """
        stages: list[dict[str, Any]] = []
        t0 = time.time()
        links_before = self.light.before(st.plan)
        stages.append({"stage": "reference", "start_s": t0, "end_s": time.time()})
        intent, plan, chip, written = self._begin(kind, job_id, st.plan, writes, change)
        stages += written
        t1 = time.time()
        result = read()
        links = summary(self.light.checks(st.plan, _Placed(st.plan, {}, ()), links_before))
        stages.append({"stage": "light", "start_s": t1, "end_s": time.time()})
        return intent, plan, chip, stages, result, links

    def _multicast_by_light(self, st: RackState, kind: str, job_id: str, writes: Mapping[int, float],
                            change: dict[str, Any], mplan: Any, new: Sequence[str],
                            before: Mapping[str, tuple[str, float]],
                            gone: Sequence[str] = ()) -> tuple[int, dict[str, Any], list[Any]]:
        """Write a multicast change and check it by light: every branch by its own light (the
        ``new`` ones against their plan, the others against ``before`` too), each tree's light at
        every other working receiver (``gone``: failed or pruned accelerators, no victims;
        :mod:`instruments.tree_leak`, ``tree_crosstalk`` in the reply) and every running link
        against its reading before the write. Light rejecting it: the previous currents
        written back and read, the intent aborted, 502 ``unverified`` (with ``--light report``:
        committed, ``verified: off``). Returns (intent, the reply's light keys, stages).
        """
        def read() -> tuple[dict[str, Any], str | None, list[Any]]:
            branches = branch_light.read_branches(self.light.meter, self.fabric, mplan, new, before)
            v, why = branch_light.judge(branches)
            # each tree lit once, its light at every other working receiver (instruments.tree_leak)
            leaks = tree_leak.tree_leaks(self.light.meter.bench, self.fabric, mplan, gone, v["links_off"])
            what = "the recovery" if kind == "failover" else "the multicast job's trees"
            return (*tree_leak.judge_leaks(v, why, leaks, refused=what), leaks)

        intent, plan, chip, stages, (v, why, leaks), links = self._write_and_read(kind, job_id, st, writes,
                                                                                  change, read)
        why = why or states.links_refusal(links, "the multicast change")
        light = {"verified": VERIFIED[v["status"]], "verification": v, "links_verification": links,
                 "tree_crosstalk": [x.to_dict() for x in leaks]}
        if why and self.light_policy == "repair":
            stages += self._abort(intent, why)
            self.log_event("light-refused", job=job_id, intent=intent, reason=why[:300])
            raise ServiceError(why, "unverified", {"verification": v, "links_verification": links})
        self._commit(intent, kind, plan, writes, chip)
        return intent, light, stages

    def _recover_multicast(self, st: RackState, job_id: str, names: list[str], source: str,
                           detected_s: float | None, t_report: float) -> dict[str, Any]:
        """A failed receiver of a multicast job: spliced to the first free spare, else pruned
        (controlplane.multicast); answered like a failover (``failed``, ``spare``, ``job_id``,
        ``intent``, ``stages``, what light said), idempotent like one.
        """
        if len(names) != 1:
            raise ServiceError("a multicast job's receivers are recovered one report at a time", "impossible")
        failed, run, job = names[0], st.multicast[job_id], st.jobs[job_id]
        holders = self._holders(st)
        spare = next((a for a in self.fabric.spares if a not in holders and a not in st.failed), None)
        report = {"job": job_id, "accelerator": failed, "tbu": None, "source": source}
        self.log_event("failure-reported", **report, state="dead")
        stages = [] if detected_s is None else [{"stage": "detect", "start_s": float(detected_s),
                                                 "end_s": t_report}]
        t0 = time.time()
        blocked = multicast.avoid(self._held_tbus(st, job_id), st.plan.failed_tbus)
        spare_refused = None
        try:
            try:
                rec = multicast.recover(self.fabric, run, failed, spare, blocked)
            except ServiceError as exc:  # no splice to the spare: prune (the other branches go on)
                if spare is None or exc.kind != "impossible":
                    raise
                spare_refused = str(exc)
                rec = multicast.recover(self.fabric, run, failed, None, blocked)
        except ServiceError as exc:
            self.log_event("recovery-refused", **report, reason=str(exc)[:300])
            raise
        stages.append({"stage": "compute", "start_s": t0, "end_s": time.time()})
        t1 = time.time()
        before = branch_light.reference(self.light.meter, self.fabric, run.plan)  # held branches, before
        stages.append({"stage": "reference", "start_s": t1, "end_s": time.time()})
        new_run = multicast.after(run, rec, self.fabric)
        writes = multicast.program(rec.plan.configuration, self.heater_map, rec.changed_tbus, st.currents,
                                   DECIMALS)
        out = {"job_id": job_id, "jobs_rerouted": [job_id], "job": multicast.job_after(job, rec).to_dict(),
               "failed": failed, "spare": rec.spare, "action": "spliced" if rec.spare else "pruned",
               "changed_tbus": [self.mesh.tbu_names[t] for t in rec.changed_tbus],
               "held_shift_db": rec.shift_db, "groups": rec.plan.to_dict(self.fabric)["groups"],
               "spare_refused": spare_refused}
        body = multicast.record(multicast.job_after(job, rec), new_run, self.fabric)
        change = {"update_jobs": {job_id: body},
                  "allocate": {rec.spare: job_id} if rec.spare else {}, "release": [failed], "fail": [failed],
                  "identity": reports.identity(names, None, "dead"), "recovery": out}
        new = [f"{src}->{rec.spare}" for src, dsts in rec.plan.groups if rec.spare in dsts]
        try:
            intent, light, written = self._multicast_by_light(st, "failover", job_id, writes, change,
                                                              rec.plan, new, before,
                                                              (*st.failed, *new_run.failed_accelerators))
        except ServiceError as exc:
            self.log_event("recovery-refused", **report, reason=str(exc)[:300], **exc.detail)
            raise
        stages += written
        out = {**out, "intent": intent, "stages": stages, "measured_ms": _stage_ms(stages), **light}
        self.log_event("recovery", job=job_id, intent=intent, failed=failed, spare=rec.spare, source=source,
                       stages=stages, measured_ms=out["measured_ms"], n_changed_heaters=len(writes),
                       multicast=True, **light)
        return out

    def _held_tbus(self, st: RackState, except_job: str | None = None) -> set[int]:
        """TBUs a new route or tree may not use: running links', heater states', other trees',
        suspects' (failed TBUs are given apart, with how they failed).
        """
        out = {int(t) for lk in st.plan.links for t in lk.route.tbus}
        out |= {t for hs in st.heater_states.values() for t in hs.tbus}
        out |= {t for jid, run in st.multicast.items() if jid != except_job for t in multicast.tree_tbus(run)}
        return out | {self.mesh.tbu_index(n) for n in st.suspects}

    def _park(self, st: RackState, tbus: Any) -> dict[int, float]:
        """{channel: the plan's parked value} of ``tbus``' heaters that hold something else."""
        return {c: float(st.plan.heater[c]) for t in sorted(tbus) for c in (2 * t, 2 * t + 1)
                if round(float(st.plan.heater[c]), DECIMALS) != round(float(st.currents[c]), DECIMALS)}

    def _refuse_tree_tbu(self, st: RackState, tbu: str | None) -> None:
        """409 for a TBU failure on a multicast tree: re-routing a tree around a TBU is not built."""
        if tbu is None:
            return
        t = self.mesh.tbu_index(tbu)
        for jid, run in st.multicast.items():
            if t in multicast.tree_tbus(run):
                raise ServiceError(f"{tbu} carries multicast job {jid}'s tree; re-routing a tree around a "
                                   f"failed TBU is not built: delete job {jid}, report the TBU again, then "
                                   "place the job again (its new trees avoid a failed TBU)", "impossible")

    def _multicast_view(self, st: RackState, job_id: str) -> dict[str, Any]:
        """A multicast job's trees (groups, branches, margins) for its view; {} for another job."""
        run = st.multicast.get(job_id)
        if run is None:
            return {}
        body = run.plan.to_dict(self.fabric)
        return {"groups": body["groups"], "worst_margin_db": body["worst_margin_db"],
                "dark_ports": [self.mesh.port_names[q] for q in sorted(run.dark)]}

    # -- heater states ----------------------------------------------------------------
    def apply_state(self, document: Any) -> dict[str, Any]:
        """Set a heater state (``lumion synthesize --out``) and check it by light, as ``lumion
        program`` does, on the TBUs it uses only (controlplane.states).

        Refused before anything is written (422 not a state or another mesh; 409 an ideal or
        power-only map, a failed or suspect TBU, a TBU a running job or another state holds).
        Then: intent, write (limits first, all or nothing, read back), settle, the state's
        check by light (``instruments.state_check``) and every running link read again. Light
        off the prediction, or a running link moved beyond HELD_TOL_DB: the previous currents
        are written back and read, the intent aborted, 502 ``mismatch`` naming the ports.
        Else committed with its check: ``status`` ok, or unverified (naming what light could
        not confirm: arms, inputs).
        """
        with self._lock:
            st = self._state()
            program = states.read_state(document, self.mesh)
            states.require_phase_map(self.heater_map)
            states.refuse_failed(program, self.heater_map, self.mesh, st.plan.failed_tbus, st.suspects)
            trees = {jid: multicast.tree_tbus(run) for jid, run in st.multicast.items()}
            holders = states.holders_of(self._links_by_job(st), st.heater_states, trees)
            states.refuse_held(program, self.mesh, holders)
            sid = self.store.next_state_id()
            writes = states.state_program(program, self.heater_map, st.currents,
                                          self.controller.max_current_ma, DECIMALS)
            tbus = program.used_tbus(self.mesh.n_tbus)
            change = {"create_states": [{"id": sid, "body": document,
                                         "tbus": [self.mesh.tbu_names[t] for t in tbus]}]}
            intent, plan, chip, stages, v, links = self._write_and_read(
                STATE_KIND, None, st, writes, change,
                lambda: states.state_check(self.bench, program, self.heater_map))
            refusal = states.refusal(v, links)
            if refusal:
                stages += self._abort(intent, refusal)
                self.log_event("state-refused", state=sid, intent=intent, reason=refusal[:300],
                               verification=v, links=links)
                raise ServiceError(refusal, "mismatch", {"status": "mismatch", "restored": True,
                                                         "verification": v, "links": links})
            self._commit(intent, STATE_KIND, plan, writes, chip, verification=v)
            view = self._state().heater_states[sid].view(self.mesh)
            out = {**view, "intent": intent, "n_changed_heaters": len(writes), "links": links,
                   "stages": stages, "measured_ms": _stage_ms(stages)}
            self.log_event("state-applied", state=sid, intent=intent, status=v["status"], tbus=view["tbus"],
                           not_verifiable=v["not_verifiable"], n_changed_heaters=len(writes), stages=stages)
            return out

    def clear_state(self, state_id: str) -> dict[str, Any]:
        """Clear an applied heater state: its TBUs parked (the plan's parked currents, as a deleted
        job's), held no more. 404 for a state not applied (cleared already, or never).
        """
        with self._lock:
            st = self._state()
            hs = self._heater_state(st, state_id)
            park = self._park(st, hs.tbus)
            stages: list[dict[str, Any]] = []
            intent = self._reconfigure(CLEAR_KIND, None, st.plan, park, {"clear_states": [state_id]}, stages)
            self.log_event("state-cleared", state=state_id, intent=intent, n_changed_heaters=len(park),
                           stages=stages)
            return {"id": state_id, "state": "cleared", "tbus": [self.mesh.tbu_names[t] for t in hs.tbus],
                    "n_changed_heaters": len(park), "intent": intent}

    def heater_states(self) -> list[dict[str, Any]]:
        """Every applied heater state, oldest first."""
        return [hs.view(self.mesh) for hs in self._state().heater_states.values()]

    def heater_state(self, state_id: str) -> dict[str, Any]:
        """One applied heater state (404 when it is not applied)."""
        return self._heater_state(self._state(), state_id).view(self.mesh)

    @staticmethod
    def _heater_state(st: RackState, state_id: str) -> states.HeldState:
        try:
            return st.heater_states[state_id]
        except KeyError:
            raise ServiceError(f"no applied heater state {state_id!r}; applied: "
                               f"{', '.join(st.heater_states) or 'none'}", "not-found") from None

    def _links_by_job(self, st: RackState) -> dict[str, list[Any]]:
        """Each running job's links in the plan of record."""
        out = {}
        for jid in st.jobs:
            first, count = self._span(st, jid)
            out[jid] = list(st.plan.links[first : first + count])
        return out

    # -- telemetry hooks ----------------------------------------------------------------
    def record_live(self, accelerator: str, *, rx_power_dbm: float | None, los: bool | None = None) -> None:
        """Telemetry's latest reading of an accelerator's receiver (status shows live margins)."""
        self._live[accelerator] = {"rx_power_dbm": rx_power_dbm, "los": los, "t_s": time.time()}

    # -- views ------------------------------------------------------------------------
    def _state(self) -> RackState:
        if self.state is None:
            raise ServiceError("the control plane has not loaded its state", "instrument")
        return self.state

    def status(self) -> dict[str, Any]:
        """Chips, fabric, jobs and links (planned and live margins), failed parts, open intents."""
        st = self._state()
        mesh = self.fabric.mesh
        holders = self._holders(st)
        owners = [jid for jid, j in st.jobs.items() for _ in j.links]
        return {
            "schema": STATUS_SCHEMA,
            "version": 1,
            "time_s": time.time(),
            "service": {
                "pid": os.getpid(),
                "started_s": self.started_s,
                "db": str(self.store.path),
                "schema_version": self.store.schema_version,
                "event_log": dict(self.store.event_head),  # record it elsewhere to anchor the chain
            },
            "chips": [
                {
                    "chip_id": self.chip_id,
                    "mesh": mesh_label(mesh),
                    "mesh_spec": self.fabric.mesh_spec,
                    "heater_map": "ideal" if isinstance(self.heater_map, IdealMap) else "fitted",
                    "heater_unit": st.plan.heater_unit,
                    "state_known": bool(self.controller.state_known),
                    "heaters_on": int(np.count_nonzero(st.currents)),
                    "total_current_ma": float(st.currents.sum()),
                    "open_intents": [it["id"] for it in self.store.open_intents(self.chip_id)],
                    "failed_tbus": {mesh.tbu_names[t]: h for t, h in sorted(st.plan.failed_tbus.items())},
                    "suspect_tbus": self.store.suspect_tbus(self.chip_id),
                }
            ],
            "fabrics": [
                {
                    "name": self.fabric.name,
                    "chip_id": self.chip_id,
                    "accelerators": [
                        {
                            "name": a.name,
                            "spare": a.spare,
                            "tx": [mesh.port_names[p] for p in a.tx],
                            "rx": [mesh.port_names[p] for p in a.rx],
                            "job": holders.get(a.name),
                            "failed": a.name in st.failed,
                        }
                        for a in self.fabric.accelerators
                    ],
                }
            ],
            "jobs": [
                {
                    "id": jid,
                    "name": j.name,
                    "pattern": j.topology,
                    "accelerators": list(j.accelerators),
                    "links": len(j.links),
                }
                for jid, j in st.jobs.items()
            ],
            "links": [self._link_view(lk, owners[i], mesh) for i, lk in enumerate(st.plan.links)],
            "heater_states": [
                {"id": sid, "tbus": [mesh.tbu_names[t] for t in hs.tbus],
                 "status": (hs.verification or {}).get("status")}
                for sid, hs in st.heater_states.items()
            ],
            "spares_free": [s for s in self.fabric.spares if s not in holders and s not in st.failed],
            "failed_accelerators": list(st.failed),
        }

    def events(self, since_id: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        """Events after ``since_id``, oldest first."""
        return self.store.events(since_id, limit)

    def log_event(self, kind: str, **fields: Any) -> int:
        """Append an event (``job`` names the job it concerns); its id."""
        return self.store.log_event(kind, fields)

    def close(self) -> None:
        """Close the store and the light meter's threads (the bench is the caller's)."""
        self.light.close()
        self.store.close()


def _stage_ms(stages: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Measured ms per stage name (a repaired recovery's repeated stages summed)."""
    out: dict[str, float] = {}
    for s in stages:
        out[s["stage"]] = out.get(s["stage"], 0.0) + (s["end_s"] - s["start_s"]) * 1e3
    return out


def _same(a: np.ndarray, b: Sequence[float] | np.ndarray,
          tol: float | np.ndarray = MEND_TOLERANCE_MA) -> bool:
    """Whether two current vectors agree within the driver's read-back tolerance (mA, per channel)."""
    return _differing(a, b, tol) == 0


def _differing(a: np.ndarray, b: Sequence[float] | np.ndarray,
               tol: float | np.ndarray = MEND_TOLERANCE_MA) -> int:
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = min(len(a), len(b))
    return int(np.count_nonzero(np.abs(a[:n] - b[:n]) > np.broadcast_to(tol, (max(n, np.size(tol)),))[:n]))


def _without_suspects(plan: JobPlan, failed: Mapping[int, str], avoided: Mapping[int, str]) -> JobPlan:
    """``plan`` with the TBUs routing only avoided as suspects taken out of its failed TBUs.

    ``failed``: the failures recorded before (a stuck TBU light also blamed keeps its state).
    """
    kept = {t: h for t, h in plan.failed_tbus.items() if t not in avoided}
    kept.update({t: failed[t] for t in avoided if t in failed})
    return replace(plan, failed_tbus=kept)


def _failed_names(
    accelerator: str | None, accelerators: Sequence[str] | None, tbu: str | None, state: str
) -> list[str]:
    """The accelerators a report names (empty for a TBU); 422 for a malformed report."""
    names = [accelerator] if accelerator is not None else [str(a) for a in accelerators or []]
    if bool(names) == (tbu is not None) or (accelerator is not None and accelerators):
        raise ServiceError("report exactly one of 'accelerator', 'accelerators' or 'tbu'")
    if len(set(names)) != len(names):
        raise ServiceError(f"'accelerators' lists one twice: {', '.join(names)}")
    if tbu is not None and state not in ("dead", "bar", "cross"):
        raise ServiceError(f"a TBU's state is dead, bar or cross, not {state!r}")
    return names


def _job_from_dict(data: Mapping[str, Any]) -> Job:
    return Job(
        str(data["name"]),
        tuple(data["accelerators"]),
        tuple((a, b) for a, b in data["links"]),
        str(data.get("topology", "links")),
    )


def _make_job(pattern: str, members: Sequence[str], links: Sequence[Sequence[str]] | None, name: str) -> Job:
    try:
        if pattern == "ring":
            return ring_job(members, name)
        if pattern == "line":
            return line_job(members, name)
        if pattern == "all-to-all":
            if len(members) < 2:
                raise FabricError("an all-to-all job needs at least 2 accelerators")
            pairs = [(a, b) for a in members for b in members if a != b]
            return replace(links_job(pairs, name), topology="all-to-all", accelerators=tuple(members))
        return links_job([list(lk) for lk in links or []], name)
    except FabricError as exc:
        raise ServiceError(str(exc)) from exc
