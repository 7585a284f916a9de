"""Hitless accelerator failover and failed-TBU repair: splice around a failure, re-routing only
the affected links (docs/fabric.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from photonics.configuration import PARK_STATE, Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric.jobs import Job, check_job, link_ports
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.plan import (
    MAX_CURRENT_MA,
    WRITE_RESOLUTION,
    CurrentMap,
    JobPlan,
    _stuck_states,
    evaluate,
    heater_values,
    held_graph,
    route_links,
)
from photonics.fabric.timing import TimingModel, _phase_step, recovery_timing
from photonics.physics import PhysicsDefaults, TBUParams
from photonics.routing import (
    RoutingGraph,
    parse_failed,
    route_loss_db,
)
from photonics.topology import Mesh


# ---------------------------------------------------------------------------------------
# Splicing: the common core of failover and failed-TBU repair
# ---------------------------------------------------------------------------------------
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
        candidates: per spare tried: name, worst new loss, TBUs changed, or why it failed.
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


@dataclass(frozen=True)
class _Candidate:
    name: str | None
    job: Job
    routes: list[Route]
    losses: list[float]
    conf: Configuration
    changed: np.ndarray


def _candidate(fabric: Fabric, before: JobPlan, job: Job, affected: list[int], failed: dict[int, str],
               params: TBUParams | None, park_freed: bool, name: str | None,
               graph: RoutingGraph | None = None) -> _Candidate:
    mesh = fabric.mesh
    pairs = link_ports(fabric, job.links)
    held = [i for i in range(len(job.links)) if i not in affected]
    old = before.routes
    for i in held:  # substituting one accelerator must not move anyone else's lanes
        if (old[i].src, old[i].dst) != pairs[i]:
            raise FabricError(f"internal: link {job.links[i]} changed ports during a splice")
    held_routes = [old[i] for i in held]
    graph = graph or held_graph(mesh, held_routes, failed, params)
    new = route_links(mesh, [pairs[i] for i in affected], held=held_routes, failed=failed,
                      params=params, graph=graph)
    routes = list(old)
    for i, r in zip(affected, new, strict=True):
        routes[i] = r
    split = before.configuration.cross_fraction.copy()
    if park_freed:
        live = {t for r in routes for t in r.tbus}
        freed = [t for i in affected for t in old[i].tbus if t not in live]
        split[freed] = 1.0 if PARK_STATE == "cross" else 0.0
    for r in new:
        for t, s in r.states().items():
            split[t] = 1.0 if s == "cross" else 0.0
    split = _stuck_states(split, failed)
    conf = Configuration(split, tuple(routes), mesh=mesh)
    graph_losses = [route_loss_db(graph, r) for r in new]
    losses = [before.links[i].loss_db for i in range(len(routes))]
    for i, loss in zip(affected, graph_losses, strict=True):
        losses[i] = loss
    return _Candidate(name, job, routes, losses, conf, conf.changed_tbus(before.configuration))


def _finish(fabric: Fabric, before: JobPlan, cand: _Candidate, affected: list[int], failed: dict[int, str],
            label: str, heater_map: CurrentMap | None, params: TBUParams | None,
            defaults: PhysicsDefaults | None, required_margin_db: float, max_current_ma: float,
            timing: TimingModel, t0: float, candidates: list[dict[str, Any]],
            failed_accelerators: tuple[str, ...]) -> Recovery:
    mesh = fabric.mesh
    results = evaluate(fabric, cand.job.links, cand.routes, cand.conf, params=params, failed=failed,
                       defaults=defaults, required_margin_db=required_margin_db, loss_db=cand.losses)
    bad = [results[i] for i in affected if not results[i].budget_ok]
    if bad:
        raise FabricError(f"{bad[0].link[0]}->{bad[0].link[1]} refused: {bad[0].reason}")
    wanted, unit = heater_values(cand.conf, heater_map, max_current_ma)
    held_idx = [i for i in range(len(cand.routes)) if i not in affected]
    held_tbus = {t for i in held_idx for t in cand.routes[i].tbus}
    held_ch = np.array(sorted(c for t in held_tbus for c in (2 * t, 2 * t + 1)), dtype=int)
    # Held channels are never written: a crosstalk-compensating map may ask for a tiny
    # change there, which we report as drift instead of touching a live link.
    writable = np.ones(mesh.n_heaters, dtype=bool)
    writable[held_ch] = False
    delta = np.abs(wanted - before.heater)
    write = np.flatnonzero(writable & (delta > WRITE_RESOLUTION))
    applied = before.heater.copy()
    applied[write] = wanted[write]
    drift = float(delta[held_ch].max()) if held_ch.size else 0.0
    program = {int(ch): float(wanted[ch]) for ch in write}
    plan = JobPlan(cand.job, tuple(results), cand.conf, applied, unit, dict(failed), failed_accelerators)
    same = held_unchanged(before, cand.routes, cand.conf, applied, held_idx)
    compute_ms = (time.perf_counter() - t0) * 1e3
    relock = max((fabric.lane(cand.routes[i].dst).relock_ms for i in affected), default=0.0)
    if timing.relock_ms is not None:
        relock = timing.relock_ms
    rec = Recovery(label, cand.name, plan, tuple(affected), tuple(int(t) for t in cand.changed), program,
                   same, drift, recovery_timing(timing, compute_ms, program, relock, len(affected),
                                                max_phase_step_rad=_phase_step(delta, write, unit)),
                   tuple(candidates))
    return _recorded(rec, before, mesh)


def _recorded(rec: Recovery, before: JobPlan, mesh: Mesh) -> Recovery:
    """``rec`` whose plan keeps the history: the earlier plan's recoveries plus this one."""
    from photonics.fabric.plan_io import recovery_to_dict

    plan = replace(rec.plan, recoveries=(*before.recoveries, recovery_to_dict(rec, mesh)))
    return replace(rec, plan=plan)


# ---------------------------------------------------------------------------------------
# Failover
# ---------------------------------------------------------------------------------------
def failover(
    fabric: Fabric,
    job: Job,
    failed: str,
    current_plan: JobPlan,
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
    max_current_ma: float = MAX_CURRENT_MA,
    park_freed: bool = False,
) -> Recovery:
    """Replace accelerator ``failed`` of the running ``job`` by the best spare, hitlessly.

    The spare minimising the worst new link loss wins (ties: fewest TBUs changed). Only
    the links that touched ``failed`` are re-routed; the others' TBUs are reserved, so
    they stay bit-identical. ``park_freed`` parks the TBUs the old links no longer use
    (more heater writes); by default they are left as they are: they carry no light from
    a live transmitter, and the circuit check of the whole new configuration (ACR against
    every live receiver) is what decides that this is safe.

    Raises:
        FabricError: ``failed`` is not in the job, no spare is left (the message names the
            spares and what they already replace), or no spare can be spliced in (the
            message gives each spare's reason).
    """
    t0 = time.perf_counter()
    timing = timing or TimingModel()
    if job is not current_plan.job and job != current_plan.job:
        raise FabricError("the job does not match the plan it is said to run on")
    if failed not in job.accelerators:
        raise FabricError(f"{failed} is not in job {job.name!r} ({', '.join(job.accelerators)}); "
                          "nothing to fail over")
    dead = (*current_plan.failed_accelerators, failed)
    spares = [s for s in fabric.spares if s not in job.accelerators and s not in dead]
    if not spares:
        used = [s for s in fabric.spares if s in job.accelerators]
        gone = [s for s in fabric.spares if s in dead]
        detail = "; ".join(x for x in (
            f"in use: {', '.join(used)}" if used else "", f"failed: {', '.join(gone)}" if gone else "",
        ) if x) or "the fabric declares none"
        raise FabricError(f"no spare accelerator left to replace {failed} ({detail}); "
                          "cable another spare to the mesh, or shrink the job")
    affected = [i for i, (a, b) in enumerate(job.links) if failed in (a, b)]
    failed_tbus = dict(current_plan.failed_tbus)
    cands: list[_Candidate] = []
    table: list[dict[str, Any]] = []
    # Every spare is routed around the same held links: build their graph once.
    held_routes = [r for i, r in enumerate(current_plan.routes) if i not in affected]
    graph = held_graph(fabric.mesh, held_routes, failed_tbus, params)
    for s in spares:
        new_job = job.substitute(failed, s)
        try:
            check_job(fabric, new_job)
            c = _candidate(fabric, current_plan, new_job, affected, failed_tbus, params, park_freed, s,
                           graph)
        except (RoutingError, FabricError) as exc:
            table.append({"spare": s, "ok": False, "reason": str(exc)})
            continue
        worst = max((c.losses[i] for i in affected), default=0.0)
        table.append({"spare": s, "ok": True, "worst_new_loss_db": worst, "changed_tbus": len(c.changed)})
        cands.append(c)
    # Losses are sums of per-TBU numbers; round so float noise cannot beat the tie-break.
    order = sorted(range(len(cands)), key=lambda k: (round(table_loss(table, cands[k].name), 9),
                                                      len(cands[k].changed), k))
    reasons = [f"{row['spare']}: {row['reason']}" for row in table if not row["ok"]]
    for k in order:
        try:
            return _finish(fabric, current_plan, cands[k], affected, failed_tbus, failed, heater_map, params,
                           defaults, required_margin_db, max_current_ma, timing, t0, table, dead)
        except FabricError as exc:
            reasons.append(f"{cands[k].name}: {exc}")
    raise FabricError(f"no spare can be spliced in for {failed}: " + "; ".join(reasons))


def table_loss(table: Sequence[Mapping[str, Any]], name: str | None) -> float:
    """Worst new loss (dB) recorded for candidate ``name``."""
    for row in table:
        if row["spare"] == name:
            return float(row["worst_new_loss_db"])
    return float("inf")


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
    required_margin_db: float = 3.0,
    max_current_ma: float = MAX_CURRENT_MA,
) -> Recovery:
    """Re-route only the links through a TBU that died (or got stuck) during the job.

    A link is affected when its route uses the TBU and the TBU can no longer give it its
    state: always for "dead", for a stuck TBU only when the route needs the other state.
    With no link affected the plan is returned unchanged (empty program).
    """
    t0 = time.perf_counter()
    timing = timing or TimingModel()
    mesh = fabric.mesh
    failed = dict(current_plan.failed_tbus)
    try:
        failed.update(parse_failed(mesh, {tbu: how}))
    except RoutingError as exc:
        raise FabricError(str(exc)) from None
    t = mesh.tbu_index(tbu) if not isinstance(tbu, str) or not tbu.isdigit() else int(tbu)
    affected = [i for i, lk in enumerate(current_plan.links)
                if t in lk.route.tbus and (how == "dead" or lk.route.states()[t] != how)]
    job = current_plan.job
    try:
        cand = _candidate(fabric, current_plan, job, affected, failed, params, False, None)
    except RoutingError as exc:
        raise FabricError(f"cannot route around {mesh.tbu_names[t]} ({how}): {exc}") from None
    return _finish(fabric, current_plan, cand, affected, failed, mesh.tbu_names[t], heater_map, params,
                   defaults, required_margin_db, max_current_ma, timing, t0, [],
                   current_plan.failed_accelerators)
