"""The chip's plan of record: every running job's links in one :class:`JobPlan`, changed hitlessly.

One chip has one configuration, so the service keeps one plan per chip whose job is the
concatenation of the running jobs' links (each job's links in its order, jobs oldest
first). Failover and failed-TBU repair then run on that plan with the fabric's own
functions and hold **every** other link, whichever job it belongs to; placing a job routes
only its links around the held ones; removing a job parks only the TBUs it alone used.
Each returns the new plan and the heater program (``{channel: value}``) of the channels
that change, never a held TBU's channel.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from photonics.configuration import PARK_STATE, Configuration
from photonics.errors import RoutingError
from photonics.fabric import (
    WRITE_RESOLUTION,
    CurrentMap,
    Fabric,
    FabricError,
    Job,
    JobPlan,
    check_job,
    evaluate,
    heater_values,
    link_ports,
    route_links,
)
from photonics.routing import parse_failed
from photonics.tolerances import REQUIRED_MARGIN_DB

CHIP_JOB = "chip"  # the name of the plan-of-record's job (the union of the running jobs)


def empty_plan(fabric: Fabric, heater_map: CurrentMap | None) -> JobPlan:
    """The plan of an idle chip: no links, every TBU parked."""
    conf = Configuration.parked(fabric.mesh)
    heater, unit = heater_values(conf, heater_map)
    return JobPlan(Job(CHIP_JOB, (), (), "links"), (), conf, heater, unit)


def merged_job(jobs: Sequence[Job]) -> Job:
    """The plan-of-record's job: every job's accelerators and links, in order."""
    return Job(
        CHIP_JOB,
        tuple(a for j in jobs for a in j.accelerators),
        tuple(lk for j in jobs for lk in j.links),
        "links",
    )


def program_for(before: np.ndarray, after: np.ndarray, channels: np.ndarray) -> dict[int, float]:
    """{channel: new value} for ``channels`` whose value moves by more than the write resolution."""
    return {int(ch): float(after[ch]) for ch in channels if abs(after[ch] - before[ch]) > WRITE_RESOLUTION}


def _tbu_channels(tbus: Sequence[int] | np.ndarray) -> np.ndarray:
    t = np.asarray(sorted({int(x) for x in tbus}), dtype=int)
    return np.sort(np.concatenate([2 * t, 2 * t + 1])) if t.size else np.zeros(0, dtype=int)


def place(
    fabric: Fabric, plan: JobPlan, job: Job, heater_map: CurrentMap | None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
) -> tuple[JobPlan, dict[int, float]]:
    """Add ``job``'s links to the chip's plan, routed around every running link.

    Raises:
        FabricError: the job needs lanes its accelerators lack, no route exists around the
            running links, or a link (new or running) would no longer close its budget.
    """
    check_job(fabric, job)
    mesh = fabric.mesh
    failed = dict(plan.failed_tbus)
    all_job = merged_job([plan.job, job])
    pairs = link_ports(fabric, all_job.links)[len(plan.links) :]
    try:
        new = route_links(mesh, pairs, held=plan.routes, failed=parse_failed(mesh, failed))
    except RoutingError as exc:
        raise FabricError(f"job {job.name!r} does not fit around the running jobs: {exc}") from None
    split = plan.configuration.cross_fraction.copy()
    for r in new:
        for t, s in r.states().items():
            split[t] = 1.0 if s == "cross" else 0.0
    routes = (*plan.routes, *new)
    conf = Configuration(split, routes, mesh=mesh)
    results = evaluate(
        fabric, all_job.links, routes, conf, failed=failed, required_margin_db=required_margin_db
    )
    bad = [r for r in results if not r.budget_ok]
    if bad:
        raise FabricError(
            f"job {job.name!r} refused: link {bad[0].link[0]}->{bad[0].link[1]} would not close "
            f"its budget ({bad[0].reason})"
        )
    wanted, unit = heater_values(conf, heater_map)
    changed = np.flatnonzero(split != plan.configuration.cross_fraction)
    program = program_for(plan.heater, wanted, _tbu_channels(changed))
    heater = plan.heater.copy()
    for ch, v in program.items():
        heater[ch] = v
    out = JobPlan(all_job, tuple(results), conf, heater, unit, failed, plan.failed_accelerators)
    return out, program


def remove(
    fabric: Fabric, plan: JobPlan, links: Sequence[int], heater_map: CurrentMap | None, remaining: Job
) -> tuple[JobPlan, dict[int, float]]:
    """Take the links at indices ``links`` out of the chip's plan; park the TBUs only they used.

    ``remaining`` is the plan's new job (the other jobs' links, in order). TBUs that failed
    keep their state (a stuck TBU cannot be parked).
    """
    mesh = fabric.mesh
    drop = set(links)
    kept = [lk for i, lk in enumerate(plan.links) if i not in drop]
    if [lk.link for lk in kept] != list(remaining.links):
        raise FabricError("internal: the remaining job does not match the links kept")
    live = {t for lk in kept for t in lk.route.tbus}
    freed = sorted({t for i in drop for t in plan.links[i].route.tbus} - live - set(plan.failed_tbus))
    split = plan.configuration.cross_fraction.copy()
    split[freed] = 1.0 if PARK_STATE == "cross" else 0.0
    routes = tuple(lk.route for lk in kept)
    conf = Configuration(split, routes, mesh=mesh)
    results = evaluate(fabric, remaining.links, routes, conf, failed=plan.failed_tbus) if kept else []
    wanted, unit = heater_values(conf, heater_map)
    program = program_for(plan.heater, wanted, _tbu_channels(freed))
    heater = plan.heater.copy()
    for ch, v in program.items():
        heater[ch] = v
    out = JobPlan(
        remaining, tuple(results), conf, heater, unit, dict(plan.failed_tbus), plan.failed_accelerators
    )
    return out, program
