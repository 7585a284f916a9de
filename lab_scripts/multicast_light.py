"""``lumion failover --plan MC.json --bench``: program a multicast failover and check it by light.

The running trees are written whole (every heater, through the map) and every branch read:
the held branches' reference. A splice then writes only its changed heaters (limits first,
all or nothing, read back: the bench's :meth:`set_currents`, as point-to-point failover
writes), waits the thermal settle and reads every branch again, judged by
:class:`photonics.fabric.verify.LinkLight` (:mod:`instruments.branch_light`, shared with the
control plane's multicast jobs):

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

from instruments.branch_light import (  # noqa: F401 - judge, moved, refusal, unverified re-exported
    branch_names,
    branch_probes,
    judge,
    moved,
    read_branches,
    refusal,
    unverified,
)
from photonics.fabric.verify import LinkLight, summary


class MulticastBench:
    """The opened bench of a multicast failover: its meters and the currents it holds (mA)."""

    def __init__(self, bench: Any, fabric: Any, settle_s: float) -> None:
        from instruments.light_meter import LightMeter

        self.bench, self.fabric, self.settle_s = bench, fabric, settle_s
        self.meter = LightMeter(bench)
        self.currents = np.zeros(bench.mesh.n_heaters)

    def probes(self, plan: Any) -> list[Any]:
        """One light-meter probe per branch (the tree's source port to the receiver's port)."""
        return branch_probes(self.fabric, plan)

    def place(self, plan: Any, currents: np.ndarray) -> tuple[dict[str, Any], dict[str, tuple[str, float]]]:
        """Write ``currents`` whole, settle, read every branch: (the placement's verification,
        each measured branch's (meter, dBm): the reference the recovery is held to).
        """
        self.write(currents)
        names = branch_names(plan)
        probes = self.probes(plan)
        readings = self.meter.measure(probes, range(len(probes)))
        checks = [LinkLight(i, n, True, r.meter, r.planned_dbm, r.measured_dbm, reason=r.reason,
                            unlit=r.unlit)
                  for i, (n, r) in enumerate(zip(names, readings, strict=True))]
        ref = {n: (r.meter, r.measured_dbm) for n, r in zip(names, readings, strict=True)
               if r.meter is not None and r.measured_dbm is not None}
        return summary(checks), ref

    def check(self, plan: Any, new: Sequence[str],
              before: Mapping[str, tuple[str, float]]) -> list[LinkLight]:
        """Every branch of ``plan`` measured now by its own light; the ``new`` ones against their
        plan, the others also held to their reading ``before`` (by the same meter).
        """
        return read_branches(self.meter, self.fabric, plan, new, before)

    def write(self, currents: np.ndarray) -> None:
        """Set every heater current (mA; the driver writes only the changed ones) and settle."""
        self.bench.set_currents(np.asarray(currents, float))
        self.currents = np.asarray(currents, float).copy()
        time.sleep(self.settle_s)

    def close(self) -> None:
        """Stop the meter's threads and close the bench."""
        self.meter.close()
        self.bench.close()
