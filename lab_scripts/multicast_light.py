"""``lumion failover --plan MC.json --bench``: program a multicast failover and check it by light.

The running trees are written whole (every heater, through the map) and every branch read:
the held branches' reference. A splice then writes only its changed heaters (limits first,
all or nothing, read back: the bench's :meth:`set_currents`, as point-to-point failover
writes), waits the thermal settle and reads every branch again, judged by
:class:`photonics.fabric.verify.LinkLight`:

* every branch is read by its own transmitter's light: a transceiver meter reads the
  receiver once more with the tree's source lane dark and takes the difference (a tree
  leaves other accelerators' lasers on, their light wandering through parked TBUs into a
  receiver: +4.4 dB on gpu0 -> gpu1 of the simulated seed-4371 chip, read plainly);
* the spliced branch (the spare's) against its planned power, within
  :data:`~photonics.tolerances.ROUTE_TOL_DB`;
* every held branch against its planned power *and* against its reading before, within
  :data:`~photonics.tolerances.HELD_TOL_DB` (moved more: ``hit``);
* a branch no meter reaches is ``not measured``, named, never ``ok``.

A branch off or hit puts the chip back to the trees before the splice and refuses the
recovery (:class:`~photonics.fabric.verify.VerificationError`, one line naming the branch);
no re-route around suspect TBUs is tried for a tree (point-to-point failover's repair loop).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from photonics.fabric.verify import NOT_MEASURED, OFF, LinkLight, summary
from photonics.tolerances import HELD_TOL_DB, ROUTE_TOL_DB


def branch_names(plan: Any) -> list[str]:
    """``src->dst`` of every branch of a MulticastPlan, groups in order, branches in order."""
    return [f"{src}->{d}" for src, dsts in plan.groups for d in dsts]


class MulticastBench:
    """The opened bench of a multicast failover: its meters and the currents it holds (mA)."""

    def __init__(self, bench: Any, fabric: Any, settle_s: float) -> None:
        from instruments.light_meter import LightMeter

        self.bench, self.fabric, self.settle_s = bench, fabric, settle_s
        self.meter = LightMeter(bench)
        self.currents = np.zeros(bench.mesh.n_heaters)

    def probes(self, plan: Any) -> list[Any]:
        """One light-meter probe per branch (the tree's source port to the receiver's port)."""
        from instruments.light_meter import Probe
        from photonics.fabric.multicast import group_ports

        out = []
        for (tx, rxs), branches in zip(group_ports(self.fabric, plan.groups), plan.branches, strict=True):
            launch = self.fabric.lane(tx).tx_power_dbm
            out += [Probe(tx, rx, b.transmission_db, launch) for rx, b in zip(rxs, branches, strict=True)]
        return out

    def place(self, plan: Any, currents: np.ndarray) -> tuple[dict[str, Any], dict[str, tuple[str, float]]]:
        """Write ``currents`` whole, settle, read every branch: (the placement's verification,
        each measured branch's (meter, dBm): the reference the recovery is held to).
        """
        self.write(currents)
        names = branch_names(plan)
        probes = self.probes(plan)
        readings = self.meter.measure(probes, range(len(probes)))
        checks = [LinkLight(i, n, True, r.meter, r.planned_dbm, r.measured_dbm, reason=r.reason)
                  for i, (n, r) in enumerate(zip(names, readings, strict=True))]
        ref = {n: (r.meter, r.measured_dbm) for n, r in zip(names, readings, strict=True)
               if r.meter is not None and r.measured_dbm is not None}
        return summary(checks), ref

    def check(self, plan: Any, new: Sequence[str],
              before: Mapping[str, tuple[str, float]]) -> list[LinkLight]:
        """Every branch of ``plan`` measured now by its own light; the ``new`` ones against their
        plan, the others also held to their reading ``before`` (by the same meter).
        """
        names = branch_names(plan)
        probes = self.probes(plan)
        readings = self.meter.measure(probes, range(len(probes)))
        out = []
        for i, (n, r) in enumerate(zip(names, readings, strict=True)):
            ref = before.get(n) if n not in new else None
            was = ref[1] if ref is not None and ref[0] == r.meter else None
            out.append(LinkLight(i, n, n in new, r.meter, r.planned_dbm, r.measured_dbm, was, r.reason))
        return out

    def write(self, currents: np.ndarray) -> None:
        """Set every heater current (mA; the driver writes only the changed ones) and settle."""
        self.bench.set_currents(np.asarray(currents, float))
        self.currents = np.asarray(currents, float).copy()
        time.sleep(self.settle_s)

    def close(self) -> None:
        """Stop the meter's threads and close the bench."""
        self.meter.close()
        self.bench.close()


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
