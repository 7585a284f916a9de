"""The control plane's light checks: every recovery's links measured against their plan.

One :class:`RecoveryLight` per service wraps the bench's meters
(:class:`~instruments.light_meter.LightMeter`: the accelerators' transceivers, else the bench
laser and power meter). A recovery reads the running links once before it writes (the held
links' reference) and every link of the new plan after the settle; the fabric's verify
stage (:mod:`photonics.fabric.verify`) judges them and drives the repair loop
(docs/controlplane.md, "Verified by light").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from instruments.light_meter import LightMeter, Reading, probes_for
from photonics.fabric.verify import LinkLight


class RecoveryLight:
    """The meters of the service's bench, as the recovery path uses them."""

    def __init__(self, bench: Any, fabric: Any) -> None:
        self.fabric = fabric
        self.meter = LightMeter(bench)

    def read(self, plan: Any) -> list[Reading]:
        """One reading per link of ``plan`` (a JobPlan), in link order."""
        return self.meter.measure(probes_for(plan, self.fabric))

    def before(self, plan: Any) -> dict[int, tuple[str, float]]:
        """The running links' readings before a recovery: link index -> (meter, dBm)."""
        return {i: (r.meter, r.measured_dbm) for i, r in enumerate(self.read(plan))
                if r.meter is not None and r.measured_dbm is not None}

    def checks(self, before_plan: Any, rec: Any, before: Mapping[int, tuple[str, float]]) -> list[LinkLight]:
        """Every link of ``rec.plan`` measured now, each held link with its reading before."""
        links = rec.plan.links
        old = before_plan.links
        held = [i not in rec.rerouted and i < len(old) and old[i].route == lk.route
                for i, lk in enumerate(links)]
        new = [i for i, h in enumerate(held) if not h]
        # a new link's reading must be its own transmitter's light (instruments.light_meter)
        readings = self.meter.measure(probes_for(rec.plan, self.fabric), new)
        out = []
        for i, (lk, r) in enumerate(zip(links, readings, strict=True)):
            ref = before.get(i) if held[i] else None
            out.append(LinkLight(i, f"{lk.link[0]}->{lk.link[1]}", not held[i], r.meter, r.planned_dbm,
                                 r.measured_dbm, ref[1] if ref and ref[0] == r.meter else None, r.reason))
        return out

    def close(self) -> None:
        """Stop the meter's reader threads."""
        self.meter.close()
