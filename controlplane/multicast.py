"""Multicast jobs in the service: one accelerator's transmitter to several receivers through a
tree of tunable splitters (``POST /api/v1/jobs`` with ``pattern: multicast``).

A multicast job's trees are planned with :func:`photonics.fabric.multicast.plan_multicast`
on the TBUs nothing else holds (every running link's, every other tree's, every heater
state's, the failed and the suspect TBUs are given to it as dead), so placing one never
moves a running link's TBU; only the trees' heaters are written. The trees live in the
job's record (``lumion.multicast-plan``, :mod:`photonics.fabric.multicast_io`), not in the
point-to-point plan of record, whose routes keep routing around them. A failed receiver
is spliced to a free spare, or pruned when none is free
(:func:`photonics.fabric.multicast_failover.fail_receiver`: only its own part of the tree
changes). Every branch is checked by its own light (:mod:`instruments.branch_light`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from controlplane.errors import ServiceError
from photonics.errors import LumionError
from photonics.fabric import Fabric, Job
from photonics.fabric.multicast import MulticastPlan, plan_multicast
from photonics.fabric.multicast_failover import MulticastFailover, fail_receiver
from photonics.fabric.multicast_io import RunningMulticast, multicast_from_dict, multicast_to_dict
from photonics.fabric.plan import heater_values

MULTICAST = "multicast"  # the job pattern, and the key of the job's record holding its trees


def groups_of(raw: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, tuple[str, ...]]]:
    """``[{"src", "dsts"}, ...]`` as (source, receivers) pairs; 422 when malformed."""
    if not raw:
        raise ServiceError("pattern 'multicast' needs 'groups': "
                           "[{\"src\": \"gpu0\", \"dsts\": [\"gpu1\", ...]}]")
    out = []
    for g in raw:
        src, dsts = str(g["src"]), tuple(str(d) for d in g["dsts"])
        if src in dsts or len(set(dsts)) != len(dsts):
            raise ServiceError(f"multicast group {src}->{', '.join(dsts)}: its receivers must be distinct "
                               "and not its source")
        out.append((src, dsts))
    return out


def members(groups: Sequence[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Every accelerator of the groups (sources and receivers), in order of appearance."""
    return list(dict.fromkeys(a for src, dsts in groups for a in (src, *dsts)))


def job_of(name: str, groups: Sequence[tuple[str, tuple[str, ...]]]) -> Job:
    """The job record of a multicast job: its accelerators, no point-to-point links."""
    return Job(name, tuple(members(groups)), (), MULTICAST)


def record(job: Job, run: RunningMulticast, fabric: Fabric) -> dict[str, Any]:
    """The job's stored body: the job and its running trees."""
    return {**job.to_dict(), MULTICAST: multicast_to_dict(run, fabric)}


def running(body: Mapping[str, Any], fabric: Fabric, failed: Mapping[int, str]) -> RunningMulticast:
    """The trees of a stored multicast job (solved and budgeted again)."""
    return multicast_from_dict(body[MULTICAST], fabric, "a multicast job's record", failed=failed)


def tree_tbus(run: RunningMulticast) -> set[int]:
    """Every TBU the job's trees pass."""
    return {int(t) for tree in run.plan.trees for t in tree.tbus}


def avoid(held: Iterable[int], failed: Mapping[int, str]) -> dict[int, str]:
    """TBUs a tree may not use: ``held`` (others' routes, trees, states, suspects) as dead, the
    failed ones as they failed (a stuck TBU is not routed through either).
    """
    return {**{int(t): "dead" for t in held}, **{int(t): h for t, h in failed.items()}}


def plan(fabric: Fabric, groups: Sequence[tuple[str, tuple[str, ...]]],
         blocked: Mapping[int, str]) -> MulticastPlan:
    """The trees of ``groups`` over the TBUs not ``blocked``; 409 when they cannot be routed or a
    branch's budget does not close (naming it).
    """
    try:
        mplan = plan_multicast(fabric, groups, failed=blocked)
    except LumionError as exc:
        raise ServiceError(f"the multicast job does not fit around the running work: {exc}",
                           "impossible") from exc
    bad = mplan.first_failure()
    if bad is not None:
        raise ServiceError(f"the multicast job does not fit: branch {bad.src}->{bad.dst} does not close its "
                           f"budget ({bad.reason})", "impossible")
    return mplan


def program(conf: Any, heater_map: Any, tbus: Iterable[int], currents: np.ndarray,
            decimals: int) -> dict[int, float]:
    """{channel: value} of ``tbus``' heaters set to ``conf`` through ``heater_map``, those that change."""
    values, _ = heater_values(conf, heater_map)
    chans = [c for t in sorted({int(x) for x in tbus}) for c in (2 * t, 2 * t + 1)]
    return {c: float(values[c]) for c in chans
            if round(float(values[c]), decimals) != round(float(currents[c]), decimals)}


def recover(fabric: Fabric, run: RunningMulticast, failed_rx: str, spare: str | None,
            blocked: Mapping[int, str]) -> MulticastFailover:
    """Splice ``failed_rx``'s branch to ``spare`` (None: prune it); 409 naming what refused."""
    src = next((s for s, _ in run.plan.groups if s == failed_rx), None)
    if src is not None:
        raise ServiceError(f"{failed_rx} is the source of a multicast tree: its transmitter feeds every "
                           "branch, "
                           "which no spare can take over hitlessly; delete the job and place it again",
                           "impossible")
    try:
        return fail_receiver(fabric, run.plan, failed_rx, spare, failed=blocked, dark=run.dark)
    except LumionError as exc:
        raise ServiceError(str(exc), "impossible") from exc


def after(run: RunningMulticast, rec: MulticastFailover, fabric: Fabric) -> RunningMulticast:
    """The running trees after a recovery (a pruned receiver's port dark from now on: its share
    still arrives there, and nobody is hurt by it).
    """
    from photonics.fabric.multicast import group_ports

    dark = set(run.dark)
    if rec.spare is None:
        for (_, dsts), (_, rxs) in zip(run.plan.groups, group_ports(fabric, run.plan.groups), strict=True):
            dark |= {p for d, p in zip(dsts, rxs, strict=True) if d == rec.failed}
    return RunningMulticast(rec.plan, frozenset(dark), run.failed_tbus,
                            (*run.failed_accelerators, rec.failed), run.recoveries)


def job_after(job: Job, rec: MulticastFailover) -> Job:
    """The job's accelerators after a recovery: the failed receiver replaced by the spare, or gone."""
    if rec.spare is not None:
        accs = tuple(rec.spare if a == rec.failed else a for a in job.accelerators)
    else:
        accs = tuple(a for a in job.accelerators if a != rec.failed)
    return Job(job.name, accs, (), MULTICAST)
