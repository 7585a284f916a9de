"""What ``lumion program`` prints about a heater state's check by light.

The check itself (light each input, read every metered port, compare with the synthesis's
prediction; name the TBU arms whose pi error light could not see) is
:mod:`instruments.state_check`, shared with the control plane's ``POST /api/v1/states``; its
names are re-exported here for ``lumion program``, the tests and the benchmarks.
"""

from __future__ import annotations

from typing import Any

from instruments.state_check import (  # noqa: F401 - re-exported
    PI_VISIBLE,
    STATE_TOL,
    state_verification,
    verify_state,
)


def state_verification_lines(v: dict[str, Any]) -> list[str]:
    """What ``lumion program`` prints about a state's check by light (stdout)."""
    if v["status"] == "skipped":
        return ["heater state NOT verified by light (--no-verify)"]
    against = (f"the synthesis's prediction (chip model: {v['chip']})" if v["prediction"] == "synthesis"
               else "the map's model of the state (the file carries no prediction)")
    nm = ", ".join(f"{x:.4f}".rstrip("0").rstrip(".") for x in v["wavelengths_nm"])
    but = " (except the TBU arms named last)" if v["not_verifiable"] else ""
    lines = [f"verified by light{but} at {nm} nm against {against}; tolerance {v['tolerance']:g} of the "
             "input's power at each port:"]
    several = len(v["wavelengths_nm"]) > 1
    for r in v["inputs"]:
        at = f"  into {r['port']}" + (f" at {r['wavelength_nm']:.4f} nm" if several else "")
        if r["worst"] is None:
            lines.append(f"{at}: NOT verified by light ({r['reason']})")
            continue
        w = r["worst"]
        tail = f" {r['status']}" + (f" ({r['reason']})" if r["reason"] else "")
        lines.append(f"{at}: out {r['measured_total']:.3f} of the input (predicted "
                     f"{r['predicted_total']:.3f}); worst {w['port']}: measured {w['measured']:.3f}, "
                     f"predicted {w['predicted']:.3f} ({w['difference']:+.3f}){tail}")
    if v["not_verifiable"]:
        lines.append(blind_line(v))
    if v.get("dark"):
        lines.append(f"  NOT verified by light: {v['dark']}")
    return lines


def blind_line(v: dict[str, Any]) -> str:
    """The line naming the arms whose pi error this check could not see (the rest is verified)."""
    arms = ", ".join(f"{b['tbu']} {b['arm']} (at most {b['largest_change']:.3f})"
                     for b in v["not_verifiable"])
    return (f"  NOT verifiable by light: a pi error on one arm of these TBUs moves no checked port by more "
            f"than {v['pi_visible']:.2f} of the input (the tolerance plus a right state's worst reading), "
            f"so it could pass: {arms}; the rest is checked as above")


def state_off_line(v: dict[str, Any]) -> str | None:
    """The one stderr line naming, for each input off, its worst port with the error and the
    other ports off (None when every port is within the tolerance); a dark source is said
    instead (the readings are then not the chip's).
    """
    if v.get("dark"):
        return f"lumion program: {v['dark']}; the heater state's readings say nothing about the chip"
    said = []
    for r in v["inputs"]:
        if r["status"] != "off":
            continue
        w, others = r["worst"], [p for p in r["off_ports"] if p != r["worst"]["port"]]
        at = f" at {r['wavelength_nm']:.4f} nm" if len(v["wavelengths_nm"]) > 1 else ""
        said.append(f"into {r['port']}{at}, {w['port']} measured {w['measured']:.3f} of the input, predicted "
                    f"{w['predicted']:.3f} ({w['difference']:+.3f})"
                    + (f", also off: {', '.join(others)}" if others else ""))
    if not said:
        return None
    return (f"lumion program: light disagrees with the heater state's prediction by more than "
            f"{v['tolerance']:g} of the input's power: {'; '.join(said)}: the chip does not do what was "
            "synthesized; check that the map (--map) is this chip's, phase-calibrated and recent, and that "
            "the state was synthesized with it (lumion synthesize --map)")
