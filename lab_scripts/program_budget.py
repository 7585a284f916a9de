"""``lumion program`` and the link budget: a configuration is held to the budget ``lumion route``
holds a plan to, before anything is sent.

Light checks a programmed route against its own plan (``lab_scripts.program_verify``), so a
hand-edited configuration whose link cannot close its budget (a longer detour, a lane too weak
for the path) would be written and then measured "ok": the light matches the bad plan. Here each
route of the configuration gets the check ``lumion route`` refuses plans by, the same function
(:func:`photonics.routing.budget_routes`: the circuit solve of the configuration as intended, at
every wavelength of the lane's channels across their slots, then
:func:`photonics.budget.link_budget`), and the first link that does not close is refused in one
line (exit 3), nothing sent.

The lane: ``--transceiver``, else the one a ``lumion route --json`` file records (what it was
planned for), else ``lumion route``'s default (``dwdm-10g-zr``). Two kinds of route are named as
not checked instead of being held to a lane nobody declared: the branches of split light (a
source feeding several routes: a ``lumion synthesize --splitter`` configuration, whose branches
carry a fraction of the input each; only a configuration with a TBU between bar and cross has
any) when no lane is named, and the links of a ``lumion.plan``
without ``--transceiver`` (their lanes are the fabric's, which the plan names but does not record).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from lab_scripts.errors import CliError
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text

# Where the lane a configuration is held to came from (``budget.lane_from`` in --json).
FROM_OPTION, FROM_FILE, FROM_DEFAULT = "--transceiver", "file", "default"


def lane_of(doc: Any, path: str, given: str | None) -> tuple[str | None, str | None]:
    """(lane profile name, where it came from) for the configuration file ``path`` (``doc``: its
    JSON, :func:`_document`).

    ``given`` (``--transceiver``) wins; else the ``transceiver`` a ``lumion route --json`` file
    records; else the default lane. A ``lumion.plan`` without ``--transceiver``: (None, None), its
    fabric's lanes are not in the file. An unknown profile name is an ``input`` error.
    """
    from photonics.budget import DEFAULT_TRANSCEIVER, TRANSCEIVER_PROFILES

    name, source = given, FROM_OPTION
    if name is None:
        if isinstance(doc, dict) and doc.get("schema") == "lumion.plan":
            return None, None
        recorded = doc.get("transceiver") if isinstance(doc, dict) and "configuration" in doc else None
        name, source = (recorded, FROM_FILE) if recorded is not None else (DEFAULT_TRANSCEIVER, FROM_DEFAULT)
    if not isinstance(name, str) or name not in TRANSCEIVER_PROFILES:
        where = "--transceiver" if source == FROM_OPTION else f"{path} names transceiver"
        raise CliError(f"{where} {str(name)[:60]!r}: no such lane profile; choose from "
                       f"{', '.join(TRANSCEIVER_PROFILES)}", "input", "BudgetError")
    return name, source


def _document(path: str) -> Any:
    """The configuration file's JSON, read once for the lane and the plan's fabric (None when it
    cannot be read: the configuration's loader has read it already and said why).
    """
    try:
        return json.loads(read_text(path, DATA_FILE_MAX_BYTES, "configuration"))
    except (OSError, ValueError):
        return None


def _route_name(mesh: Any, route: Any) -> str:
    return f"{mesh.port_names[route.src]}->{mesh.port_names[route.dst]}"


def _not_checked(conf: Any, mesh: Any, lane: str | None, lane_from: str | None,
                 plan_fabric: str | None) -> tuple[list[bool], str | None]:
    """Which routes are held to the lane, and why the others are not (None when all are)."""
    if lane is None:
        why = (f"a lumion.plan's links carry the lanes of its fabric ({plan_fabric or 'not named'}), which "
               "the plan does not record; give --transceiver to check them against a lane")
        return [False] * len(conf.routes), why
    fan_out = Counter(r.src for r in conf.routes)
    splits = lane_from == FROM_DEFAULT and _splits_light(conf)
    held = [not splits or fan_out[r.src] == 1 for r in conf.routes]
    if all(held):
        return held, None
    split = sorted({mesh.port_names[r.src] for r, h in zip(conf.routes, held, strict=True) if not h})
    return held, (f"split light ({', '.join(split)} feeds several routes, each a fraction of its input) is "
                  "held to no lane unless one is named; give --transceiver to check its branches")


def _splits_light(conf: Any) -> bool:
    """Whether any TBU is set between bar and cross: only such a TBU splits a source's light.

    A configuration of bar and cross alone sends each source's light one way, so routes it lists
    from one source are not branches of split light (a route listed twice, or a "branch" to a
    port the light does not reach): each is a link, held to the lane like any other.
    """
    return any(0.0 < x < 1.0 for x in conf.cross_fraction)


def check_budget(conf: Any, mesh: Any, path: str, given: str | None, heater_map: Any,
                 trust_unverified: bool) -> dict[str, Any]:
    """Refuse (:class:`~photonics.errors.RoutingError`, one line, nothing sent) a configuration
    with a route its lane's budget does not carry; else the ``budget`` object of ``--json``.

    Checked as ``lumion route`` checks a plan: nominal TBUs, the calibration map's failed TBUs
    as failed (``lumion route --map`` plans around the same ones), every wavelength of the lane.
    """
    from photonics.budget import TRANSCEIVER_PROFILES
    from photonics.errors import RoutingError
    from photonics.routing import budget_refusal, budget_routes

    doc = _document(path)
    lane, lane_from = lane_of(doc, path, given)
    held, why_not = _not_checked(conf, mesh, lane, lane_from, _plan_fabric(doc) if lane is None else None)
    out: dict[str, Any] = {"transceiver": lane, "lane_from": lane_from, "required_margin_db": None,
                           "routes": [], "not_checked": why_not}
    if lane is None or not conf.routes:
        out["routes"] = [{"route": _route_name(mesh, r), "margin_db": None, "status": "not checked"}
                         for r in conf.routes]
        return out
    avoided = {} if heater_map is None else heater_map.failed_tbus(avoid_unverified=not trust_unverified)
    failed = {mesh.tbu_index(name): how for name, how in avoided.items()}
    budgets = budget_routes(mesh, conf, list(conf.routes), tx=TRANSCEIVER_PROFILES[lane], failed=failed)
    for route, (_, budget), hold in zip(conf.routes, budgets, held, strict=True):
        if hold and not budget.ok:
            context = f"lane {lane}, {_lane_from_text(lane_from)}"
            raise RoutingError(f"route {budget_refusal(mesh, route, budget, context)}: nothing was sent; "
                               "plan it with lumion route or name the lane the link carries (--transceiver)")
    out["required_margin_db"] = budgets[0][1].required_margin_db
    out["routes"] = [{"route": _route_name(mesh, r), "margin_db": round(b.margin_db, 3),
                      "status": "ok" if hold else "not checked"}
                     for r, (_, b), hold in zip(conf.routes, budgets, held, strict=True)]
    return out


def _lane_from_text(lane_from: str | None) -> str:
    texts = {FROM_OPTION: "given", FROM_FILE: "the file's", FROM_DEFAULT: "the default"}
    return texts.get(lane_from or "", "")


def _plan_fabric(doc: Any) -> str | None:
    """The fabric a ``lumion.plan`` document names (None when it names none)."""
    name = doc.get("fabric") if isinstance(doc, dict) else None
    return name[:60] if isinstance(name, str) else None


def budget_lines(b: dict[str, Any] | None) -> list[str]:
    """What ``lumion program`` prints about the budget check (stdout); nothing for a heater state."""
    if b is None or not b["routes"]:
        return []
    if b["transceiver"] is None:
        return [f"link budget NOT checked: {b['not_checked']}"]
    lines = [f"link budget, lane {b['transceiver']} ({_lane_from_text(b['lane_from'])}), at least "
             f"{b['required_margin_db']:g} dB margin:"]
    for r in b["routes"]:
        state = "ok" if r["status"] == "ok" else "NOT checked"
        lines.append(f"  {r['route']}: margin {r['margin_db']:.2f} dB {state}")
    if b["not_checked"]:
        lines.append(f"  NOT checked: {b['not_checked']}")
    return lines
