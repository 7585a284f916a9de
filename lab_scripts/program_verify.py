"""Verify a programmed configuration by light: each route measured against its planned loss
and its crosstalk into the other routes' receivers.

After ``lumion program`` writes a configuration, the bench laser is switched into each
route's source port (at :data:`VERIFY_NM`) and the power meter heads at its destination and
at its victims are read: the other routes' destinations (every other port for a lone
route), the ports whose leak the plan's ACR counts. The planned loss and ACR are the circuit
solve of the configuration as intended (ideal TBUs at the configuration's cross fractions,
:func:`photonics.routing.check_routes`): what a right map realises. The simulated meter,
like route_and_verify, reads the chip's own output (no facet losses), with the laser at
0 dBm, so measured loss = -reading (dB) compares like with like; the measured ACR is a
ratio of two readings of one input, so no input or facet loss enters it.

A TBU partly off (a phase error of 0.3-1 rad after calibration, a chip 5 K warmer than
when it was calibrated) costs a route under 1.5 dB, inside :data:`VERIFY_TOL_DB`, while
sending 2-20 % of its light on; where two routes share the TBU that light lands in the
other route's receiver (the audit of session 37, docs/calibration.md "Program stage"). The
loss alone called that ok; the ACR check names it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from photonics.tolerances import MIN_ACR_DB, ROUTE_TOL_DB

VERIFY_NM = 1550.0  # the chip band's centre: inside every lane of the default lane plan
# photonics.tolerances.ROUTE_TOL_DB (why 3 dB: there), the one tolerance every light check shares.
VERIFY_TOL_DB = ROUTE_TOL_DB
# A route whose light reaches another route's receiver at more than 1 % of its own (ACR under
# photonics.tolerances.MIN_ACR_DB, 20 dB) is off. Healthy calibrated chips measure 40-70 dB
# against the other routes' receivers (hex:3x4 seeds 9800-9802), 27-31 dB against every port
# of a lone smartlight route (docs/routing.md). A plan whose own ACR is lower is held to its
# plan less ACR_TOL_DB (chip crosstalk and meter noise move a right map's ACR by a few dB).
ACR_TOL_DB = ROUTE_TOL_DB


@dataclass(frozen=True)
class RouteResult:
    """One route's check (dB; measured/difference None when it could not be measured)."""

    route: str
    planned_loss_db: float
    measured_loss_db: float | None
    difference_db: float | None
    status: str  # "ok", "off" or "unverified" (no laser switch output / meter head there)
    reason: str = ""
    planned_acr_db: float | None = None  # None: no victim port (nothing to leak into)
    measured_acr_db: float | None = None  # None: no victim measured
    worst_victim: str = ""  # the victim port the measured ACR is set by
    unmetered_victims: tuple[str, ...] = ()  # victims without a meter head: crosstalk there unseen
    brightest_dbm: float | None = None  # the brightest head read with this route's source lit (not in JSON)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"route": self.route, "planned_loss_db": round(self.planned_loss_db, 3),
                "measured_loss_db": _rounded(self.measured_loss_db),
                "difference_db": _rounded(self.difference_db),
                "planned_acr_db": _rounded(self.planned_acr_db),
                "measured_acr_db": _rounded(self.measured_acr_db), "worst_victim": self.worst_victim,
                "unmetered_victims": list(self.unmetered_victims),
                "status": self.status, "reason": self.reason}


def _rounded(value: float | None) -> float | None:
    """``value`` to 1 mdB (None stays None)."""
    return None if value is None else round(value, 3)


def judge(name: str, planned_loss_db: float, measured_loss_db: float,
          tol_db: float = VERIFY_TOL_DB) -> RouteResult:
    """Compare a measured loss (dB) with the planned one; off when they differ by more than ``tol_db``."""
    diff = measured_loss_db - planned_loss_db
    return RouteResult(name, planned_loss_db, measured_loss_db, diff,
                       "ok" if abs(diff) <= tol_db else "off")


def required_acr_db(planned_acr_db: float) -> float:
    """The lowest measured ACR (dB) a route passes with: :data:`MIN_ACR_DB`, or its plan less
    :data:`ACR_TOL_DB` when the plan itself is below that floor.
    """
    return min(MIN_ACR_DB, planned_acr_db - ACR_TOL_DB)


def judge_crosstalk(result: RouteResult, planned_acr_db: float, measured_acr_db: float | None,
                    worst_victim: str, unmetered: tuple[str, ...]) -> RouteResult:
    """``result`` (a route judged by its loss) with its ACR (dB) judged too: off when the
    measured ACR is under :func:`required_acr_db` (its light reaches another receiver).
    """
    result = replace(result, planned_acr_db=planned_acr_db, measured_acr_db=measured_acr_db,
                     worst_victim=worst_victim, unmetered_victims=unmetered)
    need = required_acr_db(planned_acr_db)
    if measured_acr_db is None or result.status != "ok" or measured_acr_db >= need:
        return result  # a loss off is said first; its ACR stays in the record
    why = (f"ACR {measured_acr_db:.1f} dB into {worst_victim} (planned {planned_acr_db:.1f} dB, "
           f"at least {need:.1f} dB needed)")
    return replace(result, status="off", reason=why)


def planned_checks(mesh: Any, conf: Any) -> list[tuple[float, float]]:
    """(planned loss, planned ACR) (dB, loss positive) of each route of ``conf`` at
    :data:`VERIFY_NM` (ideal TBUs); the ACR is inf for a route with no victim port.
    """
    from photonics.routing import check_routes

    checks = check_routes(mesh, conf, list(conf.routes), None, wavelengths_nm=[VERIFY_NM])
    return [(-c.transmission_db, c.acr_db) for c in checks]


def planned_losses_db(mesh: Any, conf: Any) -> list[float]:
    """Planned loss (dB, positive) of each route of ``conf`` at :data:`VERIFY_NM` (ideal TBUs)."""
    return [loss for loss, _ in planned_checks(mesh, conf)]


def victims(mesh: Any, conf: Any, src: int, dst: int) -> list[int]:
    """The ports a route's leak is judged at, as the plan's ACR counts them
    (:func:`photonics.routing.check_routes`): the other routes' destinations, or every
    other port for a lone route.
    """
    if len(conf.routes) > 1:
        return [q for r in conf.routes if (q := mesh.port_index(r.dst)) != dst]
    return [q for q in range(mesh.n_ports) if q not in (src, dst)]


def _measurable(bench: Any, src: int, dst: int) -> str:
    """Why the route cannot be measured on this bench ('' when it can)."""
    if getattr(bench, "laser", None) is None or src not in getattr(bench, "switch_outputs", {}):
        return f"no laser switch output feeds {bench.mesh.port_names[src]}"
    if getattr(bench, "meter", None) is None or dst not in getattr(bench, "meter_channels", {}):
        return f"no power meter head at {bench.mesh.port_names[dst]}"
    return ""


def verify_routes(bench: Any, conf: Any, tol_db: float = VERIFY_TOL_DB) -> list[RouteResult]:
    """Measure every route of the programmed ``conf`` on ``bench`` (see module docstring)."""
    mesh = bench.mesh
    results = []
    for route, (planned, planned_acr) in zip(conf.routes, planned_checks(mesh, conf), strict=True):
        src, dst = mesh.port_index(route.src), mesh.port_index(route.dst)
        name = f"{mesh.port_names[src]}->{mesh.port_names[dst]}"
        why = _measurable(bench, src, dst)
        if why:
            results.append(RouteResult(name, planned, None, None, "unverified", why))
            continue
        heads = getattr(bench, "meter_channels", {})
        seen = [q for q in victims(mesh, conf, src, dst) if q in heads]
        unmetered = tuple(mesh.port_names[q] for q in victims(mesh, conf, src, dst) if q not in heads)
        bench.select_input(src, VERIFY_NM)
        dbm = [float(x) for x in bench.read_powers_dbm([dst, *seen])]
        result = replace(judge(name, planned, -dbm[0], tol_db), brightest_dbm=max(dbm))
        if not math.isfinite(planned_acr):  # no victim port on this mesh: nothing to leak into
            results.append(result)
            continue
        if seen:
            worst = int(max(range(len(seen)), key=lambda k: dbm[1 + k]))
            result = judge_crosstalk(result, planned_acr, dbm[0] - dbm[1 + worst],
                                     mesh.port_names[seen[worst]], unmetered)
        elif unmetered:
            result = replace(result, planned_acr_db=planned_acr, unmetered_victims=unmetered)
        results.append(result)
    return results


def first_off(results: list[RouteResult]) -> RouteResult | None:
    """The first route off by more than the tolerance, or None."""
    return next((r for r in results if r.status == "off"), None)


def verification(bench: Any, conf: Any, skip: bool) -> dict[str, Any]:
    """The ``verification`` object of ``lumion program --json`` (``status``: ok, off, unverified, skipped)."""
    if skip:
        return {"status": "skipped", "tolerance_db": VERIFY_TOL_DB, "wavelength_nm": VERIFY_NM, "routes": []}
    from instruments.dark_source import laser_off  # here: lumion --help loads this module, not instruments

    off = laser_off(bench)
    if off:  # nothing sent: nothing measured, nothing judged
        name = lambda p: bench.mesh.port_names[bench.mesh.port_index(p)]  # noqa: E731 - one-line lookup
        results = [RouteResult(f"{name(r.src)}->{name(r.dst)}", loss, None, None, "unverified", off)
                   for r, (loss, _) in zip(conf.routes, planned_checks(bench.mesh, conf), strict=True)]
    else:
        results = verify_routes(bench, conf)
    dark = off or source_dark(bench, conf, results)
    status = "off" if first_off(results) or dark else \
        "unverified" if any(r.status == "unverified" for r in results) or not results else "ok"
    return {"status": status, "tolerance_db": VERIFY_TOL_DB, "wavelength_nm": VERIFY_NM,
            "routes": [r.to_dict() for r in results], "dark": dark or None}


def source_dark(bench: Any, conf: Any, results: list[RouteResult]) -> str:
    """Why no route's source sent light (instruments.dark_source), '' when some head saw it."""
    from instruments.dark_source import dark_readings
    from instruments.state_check import laser_mw

    lit = [r for r, res in zip(conf.routes, results, strict=True) if res.brightest_dbm is not None]
    brightest = [res.brightest_dbm for res in results if res.brightest_dbm is not None]
    common = set.intersection(*[{h.tbu for h in r.hops} for r in lit]) if lit else set()
    names = [bench.mesh.tbu_names[t] for t in sorted(common)]
    return dark_readings(brightest, 10 * math.log10(laser_mw(bench)), names)


def verification_lines(v: dict[str, Any]) -> list[str]:
    """What ``lumion program`` prints about the check by light (stdout)."""
    if v["status"] == "skipped":
        return ["routes NOT verified by light (--no-verify)"]
    if not v["routes"]:
        return ["routes NOT verified by light: the configuration names no routes"]
    lines = [f"verified by light at {v['wavelength_nm']:g} nm (tolerance {v['tolerance_db']:g} dB):"]
    for r in v["routes"]:
        if r["measured_loss_db"] is None:
            lines.append(f"  {r['route']}: planned {r['planned_loss_db']:.2f} dB, NOT verified by light "
                         f"({r['reason']})")
        else:
            lines.append(f"  {r['route']}: planned {r['planned_loss_db']:.2f} dB, measured "
                         f"{r['measured_loss_db']:.2f} dB ({r['difference_db']:+.2f} dB){_acr_text(r)} "
                         f"{r['status']}")
    if v.get("dark"):
        lines.append(f"  NOT verified by light: {v['dark']}")
    return lines


def _acr_text(r: dict[str, Any]) -> str:
    """The ACR part of a route's line: measured vs planned, and victims no meter head sees."""
    text = ""
    if r.get("measured_acr_db") is not None:
        text = (f", ACR {r['measured_acr_db']:.1f} dB (planned {r['planned_acr_db']:.1f}) "
                f"into {r['worst_victim']}")
    if r.get("unmetered_victims"):
        text += f", crosstalk NOT measured at {', '.join(r['unmetered_victims'])} (no meter head)"
    return text


def off_line(v: dict[str, Any]) -> str | None:
    """The one stderr line for a dark source (said first: the routes' readings are not the chip's)
    or for the first route off by more than the tolerance, or None.
    """
    if v.get("dark"):
        return f"lumion program: {v['dark']}; the routes' readings say nothing about the chip"
    r = next((r for r in v["routes"] if r["status"] == "off"), None)
    if r is None:
        return None
    if r.get("reason"):  # off by its crosstalk, its loss within the tolerance
        return (f"lumion program: route {r['route']} sends its light into another route's receiver: "
                f"{r['reason']}, loss {r['measured_loss_db']:.2f} dB vs {r['planned_loss_db']:.2f} dB "
                "planned: the chip does not do what was programmed; check the calibration map (--map) "
                "and the bench (a TBU on the route may have moved since calibration)")
    return (f"lumion program: route {r['route']} measured {r['measured_loss_db']:.2f} dB loss, planned "
            f"{r['planned_loss_db']:.2f} dB ({r['difference_db']:+.2f} dB, "
            f"tolerance {v['tolerance_db']:g} dB): "
            "the chip does not do what was programmed; check the calibration map (--map) and the bench")
