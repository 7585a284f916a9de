"""Every branch of a multicast tree read by its own light, and what a recovery's reading means.

Shared by ``lumion failover --plan MC.json --bench`` (lab_scripts.multicast_light) and the
control plane's multicast jobs (``POST /api/v1/jobs`` with ``pattern: multicast``, and a
receiver's failure): a branch is the tree's source port to one receiver's port, read by the
light meter (:class:`instruments.light_meter.LightMeter`; a transceiver meter reads the
receiver once more with the tree's source lane dark and takes the difference, so other
accelerators' light wandering through parked TBUs is not counted), judged by
:class:`photonics.fabric.verify.LinkLight`: a new branch against its plan within
:data:`~photonics.tolerances.ROUTE_TOL_DB`, a held branch also against its reading before
within :data:`~photonics.tolerances.HELD_TOL_DB` (moved more: refused, a tree's held branches
being the promise of a hitless recovery); a branch no meter reaches is ``not measured``,
named, never ``ok``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from photonics.fabric.verify import NOT_MEASURED, OFF, LinkLight, summary
from photonics.tolerances import HELD_TOL_DB, ROUTE_TOL_DB


def branch_names(plan: Any) -> list[str]:
    """``src->dst`` of every branch of a MulticastPlan, groups in order, branches in order."""
    return [f"{src}->{d}" for src, dsts in plan.groups for d in dsts]


def branch_probes(fabric: Any, plan: Any) -> list[Any]:
    """One light-meter probe per branch of a MulticastPlan (the tree's source port to the
    receiver's port, the branch's planned transmission, the source lane's launch).
    """
    from instruments.light_meter import Probe
    from photonics.fabric.multicast import group_ports

    out = []
    for (tx, rxs), branches in zip(group_ports(fabric, plan.groups), plan.branches, strict=True):
        launch = fabric.lane(tx).tx_power_dbm
        out += [Probe(tx, rx, b.transmission_db, launch) for rx, b in zip(rxs, branches, strict=True)]
    return out


def reference(meter: Any, fabric: Any, plan: Any) -> dict[str, tuple[str, float]]:
    """Every branch of ``plan`` read now by its own light: branch name -> (meter, dBm), for the
    branches a meter reached (a recovery's held branches are then held to it).
    """
    probes = branch_probes(fabric, plan)
    readings = meter.measure(probes, range(len(probes)))
    return {n: (r.meter, r.measured_dbm) for n, r in zip(branch_names(plan), readings, strict=True)
            if r.meter is not None and r.measured_dbm is not None}


def read_branches(meter: Any, fabric: Any, plan: Any, new: Sequence[str],
                  before: Mapping[str, tuple[str, float]]) -> list[LinkLight]:
    """Every branch of ``plan`` measured now by its own light (``meter``: a LightMeter); the
    ``new`` ones against their plan, the others also held to their reading ``before`` (branch
    name -> (meter, dBm), by the same meter).
    """
    names = branch_names(plan)
    probes = branch_probes(fabric, plan)
    readings = meter.measure(probes, range(len(probes)))
    out = []
    for i, (n, r) in enumerate(zip(names, readings, strict=True)):
        ref = before.get(n) if n not in new else None
        was = ref[1] if ref is not None and ref[0] == r.meter else None
        out.append(LinkLight(i, n, n in new, r.meter, r.planned_dbm, r.measured_dbm, was, r.reason,
                             unlit=r.unlit))
    return out


def moved(c: LinkLight) -> bool:
    """A held branch whose power moved beyond :data:`HELD_TOL_DB` across the recovery (off its
    plan before or not: the move is this recovery's doing).
    """
    change = c.change_db
    return not c.rerouted and change is not None and not abs(change) <= HELD_TOL_DB


def refusal(checks: Sequence[LinkLight]) -> str | None:
    """One line naming the first branch light rejects, or None: a held branch that moved, the
    spliced branch off its plan, or a held branch off its plan that was not before (a branch
    already off before the recovery is reported, not blamed on it).
    """
    for c in checks:
        if moved(c):
            return (f"light refused the recovery: held branch {c.link} moved {c.change_db:+.2f} dB (measured "
                    f"{c.measured_dbm:.2f} dBm, {c.before_dbm:.2f} dBm before, by the {c.meter}), beyond the "
                    f"{HELD_TOL_DB:g} dB held tolerance")
        if c.status == OFF and (c.rerouted or not c.off_before):
            what = "spliced branch" if c.rerouted else "held branch"
            return (f"light refused the recovery: {what} {c.describe()}, beyond the {ROUTE_TOL_DB:g} dB "
                    "tolerance")
    return None


def judge(checks: Sequence[LinkLight]) -> tuple[dict[str, Any], str | None]:
    """(the verification of a recovery, the one-line refusal when light rejects it, else None).

    A held branch that moved beyond :data:`HELD_TOL_DB` makes the status ``off`` (a
    point-to-point recovery reports such a link as ``hit`` and keeps it; a tree's held
    branches are the promise of a hitless recovery, so it is rejected). A branch off its
    plan before the recovery too makes it ``off`` without a refusal.
    """
    v = summary(checks)
    if any(moved(c) for c in checks):
        v = {**v, "status": OFF}
    return v, refusal(checks)


def unverified(checks: Sequence[LinkLight]) -> list[str]:
    """Branches no meter reached (named in the answer, never called ok)."""
    return [c.link for c in checks if c.status == NOT_MEASURED]
