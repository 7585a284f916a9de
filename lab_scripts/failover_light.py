"""``lumion failover --bench``: program each recovery on a bench and verify it by light.

The placed (or loaded) plan is written whole and its links read (the held links' reference);
each failure's recovery writes only its changed heaters, waits the thermal settle and reads
every link again. :func:`photonics.fabric.verify.verified_recovery` judges them (3 dB from
plan: off; a held link moving more than 0.5 dB: hit), repairs around the TBUs light blames
(the chip put back first; at most 3 attempts) and refuses what it cannot repair: the chip
then holds the plan before that failure (docs/fabric.md, "Verified by light"). Without a
bench every recovery says ``verified: "not measured"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from photonics.fabric.verify import Effects, not_measured, summary, verified_recovery, with_avoided

NO_BENCH = "no bench: give --bench (a bench config, or sim) to measure the links by light"
# What a recovery's ``verified`` says, from its verification status (as the control plane's).
VERIFIED = {"ok": "by light", "partly measured": "partly", "not measured": "not measured", "off": "off"}


def dark_line(v: dict[str, Any] | None, what: str) -> str | None:
    """The exit-5 line when the meter's source sent no light while ``what`` (the placement, a
    recovery) was read (``v["dark"]``, photonics.fabric.verify.summary), else None: kept as
    programmed, but its light was not seen -- as ``lumion program`` says it, never exit 0.
    """
    if not v or not v.get("dark"):
        return None
    return (f"light did not see {what}: {v['dark']}; its links {', '.join(v['not_measured'])} are NOT "
            "verified by light (kept as programmed: nothing was judged, no TBU blamed)")


def unmeasured(rec: Any) -> dict[str, Any]:
    """The light keys of a recovery made without a bench."""
    links = [f"{a}->{b}" for a, b in rec.plan.job.links]
    return {"verified": "not measured", "verification": not_measured(links, rec.rerouted, NO_BENCH),
            "light_attempts": [], "suspect_tbus": []}


def received_dbm(r: Any) -> float:
    """What a link's receiver reads with every transmitter lit (dBm): a reading of its own light
    (``dark_dbm`` read with its transmitter disabled, instruments.light_meter) plus that dark
    light, in mW; any other reading as it is.
    """
    if r.dark_dbm is None or not np.isfinite(r.dark_dbm) or r.meter != "transceivers":
        return float(r.measured_dbm)
    return float(10 * np.log10(10 ** (r.measured_dbm / 10) + 10 ** (r.dark_dbm / 10)))


class BenchRun:
    """The bench a ``lumion failover --bench`` run programs, its currents and its meters."""

    def __init__(self, bench: Any, fabric: Any, settle_s: float, repair: bool) -> None:
        from instruments.light_meter import PlanLight

        self.bench, self.fabric, self.settle_s, self.repair = bench, fabric, settle_s, repair
        self.light = PlanLight(bench, fabric)
        self.currents = np.zeros(bench.mesh.n_heaters)
        self.reference: dict[int, tuple[str, float]] = {}

    def place(self, plan: Any) -> dict[str, Any]:
        """Write ``plan``'s currents whole, settle, read its links: the placement's verification.

        Every link is new light here, so each is judged by its own transmitter's light and the
        light the others put into its receiver (ACR under MIN_ACR_DB: off), as a recovery's
        re-routed links are: a placement crossing a TBU off since calibration is not ok.
        """
        from instruments.light_meter import probes_for

        self._write(np.asarray(plan.heater, float))
        readings = self.light.meter.measure(probes_for(plan, self.fabric), range(len(plan.links)))
        # held links are read later as their receivers see them (own light and others' together)
        self.reference = {i: (r.meter, received_dbm(r)) for i, r in enumerate(readings)
                          if r.meter is not None and r.measured_dbm is not None}
        from photonics.fabric.verify import LinkLight

        return summary([LinkLight(i, f"{lk.link[0]}->{lk.link[1]}", True, r.meter, r.planned_dbm,
                                  r.measured_dbm, reason=r.reason, others_dbm=r.dark_dbm, unlit=r.unlit)
                        for i, (lk, r) in enumerate(zip(plan.links, readings, strict=True))])

    def recover(self, plan: Any, compute: Callable[[Any], Any]) -> tuple[Any, dict[str, Any]]:
        """One failure: (the recovery light accepted, its light keys). VerificationError when light
        refuses every attempt (the chip then holds ``plan`` again).
        """
        start = self.currents.copy()

        def apply(rec: Any) -> None:
            written = start.copy()
            for ch, value in rec.program.items():
                written[int(ch)] = value
            self._write(written)

        def restore(_rec: Any, _why: str) -> None:
            self._write(start)

        def measure(rec: Any, ref: Mapping[int, tuple[str, float]]) -> Any:
            return self.light.checks(plan, rec, ref)

        effects = Effects(lambda avoid: compute(with_avoided(plan, avoid)), apply, measure, restore,
                          self.reference)
        v = verified_recovery(effects, self.bench.mesh.tbu_names, repair=self.repair)
        self.reference = {i: (row["meter"], row["measured_dbm"]) for i, row in
                          enumerate(v.verification["links"]) if row["measured_dbm"] is not None}
        return v.recovery, {"verified": VERIFIED[v.verification["status"]], "verification": v.verification,
                            "light_attempts": list(v.attempts),
                            "suspect_tbus": [self.bench.mesh.tbu_names[t] for t in v.suspect_tbus]}

    def _write(self, currents: np.ndarray) -> None:
        """Set every heater current (mA; the driver writes only the changed ones) and settle."""
        self.bench.set_currents(currents)
        self.currents = np.asarray(currents, float).copy()
        time.sleep(self.settle_s)

    def close(self) -> None:
        """Stop the meter's threads and close the bench."""
        self.light.close()
        self.bench.close()
