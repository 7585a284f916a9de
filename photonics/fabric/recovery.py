"""Accelerator failover and failed-TBU repair: splice around a failure, re-routing only the
affected links, and fall back to moving the fewest other links when a splice cannot close
(docs/fabric.md; the mechanics are in :mod:`photonics.fabric.splice`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from photonics.configuration import Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric.jobs import Job
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.plan import MAX_CURRENT_MA, CurrentMap, JobPlan, failures_with_map
from photonics.fabric.splice import POLICIES, Candidate, Context, Option, heater_program, isolated, search
from photonics.fabric.timing import TimingModel, recovery_timing
from photonics.physics import PhysicsDefaults, TBUParams
from photonics.routing import parse_failed
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

DEFAULT_POLICY = "fewest-moves"
# Assignments of spares to simultaneously failed accelerators tried at most (each is a
# route and a circuit solve): 5 spares for 4 failures is 120; more is a rack, not a mesh.
MAX_ASSIGNMENTS = 720


@dataclass(frozen=True, eq=False)
class Recovery:
    """The result of a failover (or a failed-TBU repair).

    Attributes:
        failed: the failed accelerator (or TBU name for :func:`fail_tbu`).
        spare: the spare spliced in (None for a TBU repair).
        plan: the job as it runs after the recovery.
        rerouted: indices (into ``plan.links``) of the links that were re-routed.
        changed_tbus: TBUs whose state changed.
        program: ``{channel: new value}``, only channels whose value changes.
        held_unchanged: True when every route not re-routed kept its hops, its TBUs'
            states and its heater values exactly (computed, see :func:`held_unchanged`).
        held_drift: the largest change (mA or rad) the heater map asked for on a held
            channel (held channels are never written; non-zero only for maps that
            compensate thermal crosstalk).
        timing_ms: breakdown from :func:`recovery_timing`.
        candidates: per option tried (a spare, or an assignment of spares): worst new loss
            and margin, whether every link closes, TBUs changed, or why it failed.
        spares: ``{replaced accelerator: spare}`` (a joint failover names several).
        policy: ``"hitless"`` or ``"fewest-moves"``, as asked.
        hitless: False when held links had to move (the fewest-moves fallback).
        moved: ``(link index, old route)`` of every held link that moved.
    """

    failed: str
    spare: str | None
    plan: JobPlan
    rerouted: tuple[int, ...]
    changed_tbus: tuple[int, ...]
    program: dict[int, float]
    held_unchanged: bool
    held_drift: float
    timing_ms: dict[str, float]
    candidates: tuple[dict[str, Any], ...]
    spares: dict[str, str] = field(default_factory=dict)
    policy: str = "hitless"
    hitless: bool = True
    moved: tuple[tuple[int, Route], ...] = ()

    def to_dict(self, mesh: Mesh | None = None) -> dict[str, Any]:
        """JSON-ready form (:func:`~photonics.fabric.plan_io.recovery_to_dict`; keys in docs/fabric.md)."""
        from photonics.fabric.plan_io import recovery_to_dict

        return recovery_to_dict(self, mesh)


def held_unchanged(before: JobPlan, after_routes: Sequence[Route], after_conf: Configuration,
                   after_heater: np.ndarray, held: Sequence[int]) -> bool:
    """True when each held link's route, its TBUs' states and their heater values are identical.

    Compares bit for bit: the hops, ``cross_fraction`` at the held TBUs, and the heater
    values of both arms of every held TBU (``np.array_equal``, no tolerance).
    """
    if any(before.links[i].route != after_routes[i] for i in held):
        return False
    tbus = np.array(sorted({t for i in held for t in before.links[i].route.tbus}), dtype=int)
    if tbus.size == 0:
        return True
    channels = np.concatenate([2 * tbus, 2 * tbus + 1])
    return bool(np.array_equal(before.configuration.cross_fraction[tbus], after_conf.cross_fraction[tbus])
                and np.array_equal(before.heater[channels], after_heater[channels]))


def table_loss(table: Sequence[Mapping[str, Any]], name: str | None) -> float:
    """Worst new loss (dB) recorded for candidate ``name``."""
    for row in table:
        if row["spare"] == name and "worst_new_loss_db" in row:
            return float(row["worst_new_loss_db"])
    return float("inf")


@dataclass(frozen=True)
class _Options:
    """The keyword options every recovery takes."""

    heater_map: CurrentMap | None
    params: TBUParams | None
    timing: TimingModel
    defaults: PhysicsDefaults | None
    required_margin_db: float
    max_current_ma: float
    park_freed: bool
    policy: str


def _recover(fabric: Fabric, before: JobPlan, options: Sequence[Option], affected: list[int],
             failed_tbus: dict[int, str], label: str, out: Sequence[str], opts: _Options,
             t0: float) -> Recovery:
    """Search, program and time one recovery; the new plan keeps the history."""
    ctx = Context(fabric, before, failed_tbus, opts.params, opts.defaults, opts.required_margin_db,
                  opts.park_freed)
    cand, table, hitless = search(ctx, options, affected, opts.policy)
    return _finish(ctx, cand, table, hitless, label, out, opts, t0)


def _finish(ctx: Context, cand: Candidate, table: list[dict[str, Any]], hitless: bool, label: str,
            out: Sequence[str], opts: _Options, t0: float) -> Recovery:
    fabric, before = ctx.fabric, ctx.before
    prog = heater_program(ctx, cand, opts.heater_map, opts.max_current_ma)
    dead = tuple(dict.fromkeys((*before.failed_accelerators, *out)))
    plan = JobPlan(cand.option.job, tuple(cand.results), cand.conf, prog.applied, prog.unit,
                   dict(ctx.failed), dead, before.recoveries)
    held_idx = [i for i in range(len(cand.routes)) if i not in cand.rerouted]
    same = held_unchanged(before, cand.routes, cand.conf, prog.applied, held_idx)
    compute_ms = (time.perf_counter() - t0) * 1e3
    relock = max((fabric.lane(cand.routes[i].dst).relock_ms for i in cand.rerouted), default=0.0)
    if opts.timing.relock_ms is not None:
        relock = opts.timing.relock_ms
    timing = recovery_timing(opts.timing, compute_ms, prog.channels, relock, len(cand.rerouted),
                             max_phase_step_rad=prog.phase_step_rad)
    spare = ",".join(cand.option.spares.values()) or None
    # a fallback whose released links all found their old routes again disturbed nothing
    hitless = same and not cand.moved
    rec = Recovery(label, spare, plan, cand.rerouted, tuple(int(t) for t in cand.changed), prog.channels,
                   same, prog.drift, timing, tuple(table), dict(cand.option.spares), opts.policy,
                   hitless, cand.moved)
    return _recorded(rec, before, fabric.mesh)


def _recorded(rec: Recovery, before: JobPlan, mesh: Mesh) -> Recovery:
    """``rec`` whose plan keeps the history: the earlier plan's recoveries plus this one."""
    from photonics.fabric.plan_io import recovery_to_dict

    plan = replace(rec.plan, recoveries=(*before.recoveries, recovery_to_dict(rec, mesh)))
    return replace(rec, plan=plan)


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise FabricError(f"unknown recovery policy {policy!r}; choose {' or '.join(POLICIES)}")


def _assignments(job: Job, victims: Sequence[str], spares: Sequence[str]) -> list[Option]:
    """Every injective assignment of ``spares`` to ``victims``, as substituted jobs."""
    out = []
    for chosen in itertools.islice(itertools.permutations(spares, len(victims)), MAX_ASSIGNMENTS):
        new = job
        for v, s in zip(victims, chosen, strict=True):
            new = new.substitute(v, s)
        out.append(Option(",".join(chosen), new, dict(zip(victims, chosen, strict=True))))
    return out


def _spares_left(fabric: Fabric, job: Job, victims: Sequence[str], dead: Sequence[str]) -> list[str]:
    """Spares not in the job and not failed; FabricError saying why when too few are left."""
    spares = [s for s in fabric.spares if s not in job.accelerators and s not in dead]
    if len(spares) >= len(victims):
        return spares
    used = [s for s in fabric.spares if s in job.accelerators]
    gone = [s for s in fabric.spares if s in dead]
    detail = "; ".join(x for x in (
        f"in use: {', '.join(used)}" if used else "", f"failed: {', '.join(gone)}" if gone else "",
    ) if x) or "the fabric declares none"
    what = victims[0] if len(victims) == 1 else f"{len(victims)} accelerators ({', '.join(victims)})"
    left = f"; {len(spares)} free" if spares else ""
    raise FabricError(f"no spare accelerator left to replace {what} ({detail}{left}); "
                      "cable another spare to the mesh, or shrink the job")


# ---------------------------------------------------------------------------------------
# Failover
# ---------------------------------------------------------------------------------------
def failover(
    fabric: Fabric,
    job: Job,
    failed: str | Sequence[str],
    current_plan: JobPlan,
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    max_current_ma: float = MAX_CURRENT_MA,
    park_freed: bool = False,
    policy: str = DEFAULT_POLICY,
) -> Recovery:
    """Replace the failed accelerator(s) of the running ``job`` by spares.

    ``failed`` is one name or several that failed together: their spares are chosen
    jointly, over every assignment of free spares to them. First the hitless splice: only
    the links touching a failed accelerator are re-routed, the others' TBUs are reserved so
    they stay bit-identical. Best: every link closes its budget, then the largest worst
    margin of the new links, then the fewest TBUs changed. When no splice closes,
    ``policy="hitless"`` refuses; ``"fewest-moves"`` (the default) re-places the job moving
    the fewest held links, and says which moved (``Recovery.moved``, ``hitless`` False).
    ``park_freed`` parks the TBUs the old links no longer use (more heater writes); by
    default they are left as they are: they carry no light from a live transmitter, and the
    circuit check of the whole new configuration (ACR against every live receiver) is what
    decides that this is safe.

    Raises:
        FabricError: a failed name is not in the job, too few spares are left (the message
            names the spares and what they already replace), or nothing closes (the message
            gives each option's reason).
    """
    t0 = time.perf_counter()
    _check_policy(policy)
    victims = [failed] if isinstance(failed, str) else [str(v) for v in failed]
    if not victims or len(set(victims)) != len(victims):
        raise FabricError("name each failed accelerator once (at least one)")
    if job is not current_plan.job and job != current_plan.job:
        raise FabricError("the job does not match the plan it is said to run on")
    for v in victims:
        if v not in job.accelerators:
            raise FabricError(f"{v} is not in job {job.name!r} ({', '.join(job.accelerators)}); "
                              "nothing to fail over")
    dead = (*current_plan.failed_accelerators, *victims)
    spares = _spares_left(fabric, job, victims, dead)
    affected = [i for i, (a, b) in enumerate(job.links) if a in victims or b in victims]
    opts = _Options(heater_map, params, timing or TimingModel(), defaults, required_margin_db,
                    max_current_ma, park_freed, policy)
    label = ",".join(victims)
    try:
        return _recover(fabric, current_plan, _assignments(job, victims, spares), affected,
                        failures_with_map(fabric.mesh, heater_map, current_plan.failed_tbus), label,
                        victims, opts, t0)
    except FabricError as exc:
        raise FabricError(f"no spare can be spliced in for {label}: {exc}") from None


# ---------------------------------------------------------------------------------------
# Failed TBUs
# ---------------------------------------------------------------------------------------
def fail_tbu(
    fabric: Fabric,
    current_plan: JobPlan,
    tbu: int | str,
    how: str = "dead",
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    max_current_ma: float = MAX_CURRENT_MA,
    policy: str = DEFAULT_POLICY,
) -> Recovery:
    """Recover from a TBU that died (or got stuck) during the job.

    A link is affected when its route uses the TBU and the TBU can no longer give it its
    state: always for "dead", for a stuck TBU only when the route needs the other state.
    When the TBU cuts accelerators off (:func:`~photonics.fabric.splice.isolated`: no route
    at all from their TX lanes to another accelerator, or into their RX lanes), no
    re-routing can help: they are swapped for spares exactly as :func:`failover` would
    (jointly, and then listed in ``failed_accelerators``). Otherwise the affected links are re-routed (with
    ``policy`` deciding the fallback as for :func:`failover`). With no link affected the
    plan is returned unchanged (empty program). The failed TBU's heaters are never written.
    """
    t0 = time.perf_counter()
    _check_policy(policy)
    mesh = fabric.mesh
    failed = failures_with_map(mesh, heater_map, current_plan.failed_tbus)
    try:
        failed.update(parse_failed(mesh, {tbu: how}))
    except RoutingError as exc:
        raise FabricError(str(exc)) from None
    t = mesh.tbu_index(tbu) if not isinstance(tbu, str) or not tbu.isdigit() else int(tbu)
    label = mesh.tbu_names[t]
    affected = [i for i, lk in enumerate(current_plan.links)
                if t in lk.route.tbus and (how == "dead" or lk.route.states()[t] != how)]
    job = current_plan.job
    opts = _Options(heater_map, params, timing or TimingModel(), defaults, required_margin_db,
                    max_current_ma, False, policy)
    cut = _cut_accelerators(fabric, current_plan, affected, failed, params)
    try:
        if cut:
            victims = [a for a in job.accelerators if a in cut]
            spares = _spares_left(fabric, job, victims, (*current_plan.failed_accelerators, *victims))
            touched = [i for i, (a, b) in enumerate(job.links) if a in victims or b in victims]
            return _recover(fabric, current_plan, _assignments(job, victims, spares),
                            sorted({*affected, *touched}), failed, label, victims, opts, t0)
        return _recover(fabric, current_plan, [Option(None, job)], affected, failed, label, (), opts, t0)
    except FabricError as exc:
        why = f"; it cuts the lane of {', '.join(cut)}" if cut else ""
        raise FabricError(f"cannot recover from {label} ({how}){why}: {exc}") from None


def _cut_accelerators(fabric: Fabric, plan: JobPlan, affected: Sequence[int], failed: Mapping[int, str],
                      params: TBUParams | None) -> list[str]:
    """Job accelerators the failures cut off (none when no link is affected), in job order."""
    if not affected:
        return []
    job = plan.job
    pool = [*job.accelerators,
            *(s for s in fabric.spares if s not in job.accelerators and s not in plan.failed_accelerators)]
    cut = isolated(fabric, failed, pool, params)
    return [a for a in job.accelerators if a in cut]
