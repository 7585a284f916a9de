"""Verify a programmed configuration by light: each route measured against its planned loss.

After ``lumion program`` writes a configuration, the bench laser is switched into each
route's source port (at :data:`VERIFY_NM`) and the power meter head at its destination is
read. The planned loss is the circuit solve of the configuration as intended (ideal TBUs at
the configuration's cross fractions, :func:`photonics.routing.check_routes`): what a right
map realises. The simulated meter, like route_and_verify, reads the chip's own output (no
facet losses), with the laser at 0 dBm, so measured loss = -reading (dB) compares like with like.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from photonics.tolerances import ROUTE_TOL_DB

VERIFY_NM = 1550.0  # the chip band's centre: inside every lane of the default lane plan
# photonics.tolerances.ROUTE_TOL_DB (why 3 dB: there), the one tolerance every light check shares.
VERIFY_TOL_DB = ROUTE_TOL_DB


@dataclass(frozen=True)
class RouteResult:
    """One route's check (dB; measured/difference None when it could not be measured)."""

    route: str
    planned_loss_db: float
    measured_loss_db: float | None
    difference_db: float | None
    status: str  # "ok", "off" or "unverified" (no laser switch output / meter head there)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"route": self.route, "planned_loss_db": round(self.planned_loss_db, 3),
                "measured_loss_db": _rounded(self.measured_loss_db),
                "difference_db": _rounded(self.difference_db),
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


def planned_losses_db(mesh: Any, conf: Any) -> list[float]:
    """Planned loss (dB, positive) of each route of ``conf`` at :data:`VERIFY_NM` (ideal TBUs)."""
    from photonics.routing import check_routes

    checks = check_routes(mesh, conf, list(conf.routes), None, wavelengths_nm=[VERIFY_NM])
    return [-c.transmission_db for c in checks]


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
    for route, planned in zip(conf.routes, planned_losses_db(mesh, conf), strict=True):
        src, dst = mesh.port_index(route.src), mesh.port_index(route.dst)
        name = f"{mesh.port_names[src]}->{mesh.port_names[dst]}"
        why = _measurable(bench, src, dst)
        if why:
            results.append(RouteResult(name, planned, None, None, "unverified", why))
            continue
        bench.select_input(src, VERIFY_NM)
        measured = -float(bench.read_powers_dbm([dst])[0])
        results.append(judge(name, planned, measured, tol_db))
    return results


def first_off(results: list[RouteResult]) -> RouteResult | None:
    """The first route off by more than the tolerance, or None."""
    return next((r for r in results if r.status == "off"), None)


def verification(bench: Any, conf: Any, skip: bool) -> dict[str, Any]:
    """The ``verification`` object of ``lumion program --json`` (``status``: ok, off, unverified, skipped)."""
    if skip:
        return {"status": "skipped", "tolerance_db": VERIFY_TOL_DB, "wavelength_nm": VERIFY_NM, "routes": []}
    results = verify_routes(bench, conf)
    status = "off" if first_off(results) else \
        "unverified" if any(r.status == "unverified" for r in results) or not results else "ok"
    return {"status": status, "tolerance_db": VERIFY_TOL_DB, "wavelength_nm": VERIFY_NM,
            "routes": [r.to_dict() for r in results]}


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
                         f"{r['measured_loss_db']:.2f} dB ({r['difference_db']:+.2f} dB) {r['status']}")
    return lines


def off_line(v: dict[str, Any]) -> str | None:
    """The one stderr line for the first route off by more than the tolerance, or None."""
    r = next((r for r in v["routes"] if r["status"] == "off"), None)
    if r is None:
        return None
    return (f"lumion program: route {r['route']} measured {r['measured_loss_db']:.2f} dB loss, planned "
            f"{r['planned_loss_db']:.2f} dB ({r['difference_db']:+.2f} dB, "
            f"tolerance {v['tolerance_db']:g} dB): "
            "the chip does not do what was programmed; check the calibration map (--map) and the bench")
