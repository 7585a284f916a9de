"""Plans as files: a running job (``lumion.plan`` v1) and recoveries as JSON-ready dicts.

A plan file holds everything needed to act on a running job later (fail an accelerator or a
TBU, program the chip again, show it on a dashboard): the job, the mesh it runs on (spec,
label and fingerprint), every link's route and figures, the mesh configuration, the heater
values now applied and their unit, the failed TBUs and accelerators, and the recoveries
applied so far. Loading validates it against a fabric and refuses, in one line, a file
made for another mesh, naming accelerators the fabric does not have, whose routes do not
start and end at the job's lanes, or whose routes collide. See docs/fabric.md.

Example:
    >>> from photonics.fabric import default_fabric, place_job, ring_job
    >>> fabric = default_fabric()
    >>> plan = place_job(fabric, ring_job(fabric.workers))
    >>> plan_from_dict(plan_to_dict(plan, fabric), fabric).routes == plan.routes
    True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from photonics.atomic import atomic_write_text
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.configuration import (
    PORT_LABELS,
    Configuration,
    Hop,
    Route,
    mesh_fingerprint,
    mesh_label,
)
from photonics.errors import LumionError
from photonics.fabric.jobs import Job, check_job, link_ports
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.plan import JobPlan, LinkResult
from photonics.routing import conflicts
from photonics.routing.graph import FAILURES
from photonics.topology import Mesh

if TYPE_CHECKING:
    from photonics.fabric.recovery import Recovery

PLAN_SCHEMA = "lumion.plan"
PLAN_VERSION = 1
HEATER_UNITS = ("mA", "rad")
_TOPOLOGIES = ("ring", "line", "links", "all-to-all")


# ---------------------------------------------------------------------------------------
# Recoveries
# ---------------------------------------------------------------------------------------
def recovery_to_dict(recovery: Recovery, mesh: Mesh | None = None) -> dict[str, Any]:
    """The JSON-ready report of one recovery: the keys ``lumion failover --json`` prints per recovery.

    ``mesh`` defaults to the mesh the recovery's configuration was made for. Heater values
    are in ``heater_unit`` (mA with a heater map, rad without); times in ms; losses in dB.
    """
    mesh = _mesh_of(recovery.plan, mesh)
    plan = recovery.plan
    unit = plan.heater_unit

    def name(i: int) -> str:
        return f"{plan.links[i].link[0]}->{plan.links[i].link[1]}"

    return {
        "failed": recovery.failed,
        "spare": recovery.spare,
        "spares": dict(getattr(recovery, "spares", {}) or {}),
        "policy": getattr(recovery, "policy", "hitless"),
        "hitless": bool(getattr(recovery, "hitless", True)),
        "job": plan.job.to_dict(),
        "rerouted_links": [name(i) for i in recovery.rerouted],
        "moved_links": [{"link": name(i), "old_route": old.to_dict(mesh),
                         "new_route": plan.links[i].route.to_dict(mesh)}
                        for i, old in getattr(recovery, "moved", ())],
        "changed_tbus": [mesh.tbu_names[t] for t in recovery.changed_tbus],
        # one suffix convention for units (docs/schemas.md): current_ma with a map, phase_rad without
        "changed_heaters": [{"channel": ch, "heater": f"heater:{ch}",
                             ("current_ma" if unit == "mA" else "phase_rad"): v}
                            for ch, v in sorted(recovery.program.items())],
        "heater_unit": unit,
        "unaffected_routes_unchanged": recovery.held_unchanged,
        "held_heater_drift": recovery.held_drift,
        "links": [lk.to_dict(mesh) for lk in plan.links],
        "timing_ms": recovery.timing_ms,
        "candidates": list(recovery.candidates),
    }


def _mesh_of(plan: JobPlan, mesh: Mesh | None) -> Mesh:
    mesh = mesh if mesh is not None else plan.configuration.mesh
    if mesh is None:
        raise FabricError("the plan's configuration does not record its mesh; pass the mesh")
    return mesh


# ---------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------
def plan_to_dict(plan: JobPlan, fabric: Fabric) -> dict[str, Any]:
    """The ``lumion.plan`` v1 document of a running job on ``fabric`` (JSON-ready).

    Heater values are in ``heater_unit``; losses, transmissions and margins in dB.
    """
    mesh = fabric.mesh
    plan.configuration.check_mesh(mesh, "the plan's configuration")
    return {
        "schema": PLAN_SCHEMA,
        "version": PLAN_VERSION,
        "fabric": fabric.name,
        "mesh_spec": fabric.mesh_spec,
        "mesh": mesh_label(mesh),
        "mesh_fingerprint": mesh_fingerprint(mesh),
        "job": plan.job.to_dict(),
        "links": [{**lk.to_dict(mesh), "reason": lk.reason, "route": lk.route.to_dict(mesh)}
                  for lk in plan.links],
        "worst_margin_db": plan.worst_margin_db if plan.links else None,
        "configuration": plan.configuration.to_dict(mesh),
        "heater_unit": plan.heater_unit,
        "heater": [float(v) for v in plan.heater],
        "failed_tbus": {mesh.tbu_names[t]: how for t, how in sorted(plan.failed_tbus.items())},
        "failed_accelerators": list(plan.failed_accelerators),
        "recoveries": [dict(r) for r in plan.recoveries],
    }


def plan_from_dict(data: Any, fabric: Fabric, source: str = "plan") -> JobPlan:
    """Read a ``lumion.plan`` v1 document for ``fabric``; one-line FabricError when it does not fit.

    Refused: another schema or version, a plan made for another mesh (fingerprint), a job
    naming accelerators the fabric does not have, a link whose route does not go from its
    transmitter's lane to its receiver's, routes that collide (a TBU port used twice, or
    one TBU asked for two states), a configuration that disagrees with a route, heater
    values of the wrong count or unit.
    """
    if not isinstance(data, dict) or data.get("schema") != PLAN_SCHEMA:
        raise FabricError(f"{source} is not a LUMION plan (expected schema {PLAN_SCHEMA!r}); "
                          "`lumion failover --out PLAN.json` writes one")
    if type(data.get("version")) is not int or data["version"] != PLAN_VERSION:
        raise FabricError(f"{source}: unsupported plan version {data.get('version')!r} "
                          f"(this software reads version {PLAN_VERSION})")
    mesh = fabric.mesh
    fingerprint = data.get("mesh_fingerprint")
    if fingerprint != mesh_fingerprint(mesh):
        raise FabricError(f"{source} was made for another mesh ({str(data.get('mesh'))[:60]}, fingerprint "
                          f"{str(fingerprint)[:40]}), not {mesh_label(mesh)} of fabric {fabric.name}; "
                          "use the fabric the plan was made with")
    job = _job_from_dict(data.get("job"), fabric, source)
    failed_tbus = _failed_tbus(data.get("failed_tbus", {}), mesh, source)
    links = _links_from_dict(data.get("links"), job, fabric, source)
    routes = [lk.route for lk in links]
    clash = conflicts(mesh, routes)
    if clash:
        raise FabricError(f"{source}: the routes collide: {clash[0]}")
    conf = _configuration(data.get("configuration"), mesh, routes, failed_tbus, source)
    heater, unit = _heater(data, mesh, source)
    failed_acc = data.get("failed_accelerators", [])
    if not isinstance(failed_acc, list) or not all(isinstance(a, str) for a in failed_acc):
        raise FabricError(f"{source}: 'failed_accelerators' must be a list of names")
    for a in failed_acc:
        fabric.accelerator(a)
    recs = data.get("recoveries", [])
    if not isinstance(recs, list) or not all(isinstance(r, dict) for r in recs):
        raise FabricError(f"{source}: 'recoveries' must be a list of recovery objects")
    return JobPlan(job, tuple(links), conf, heater, unit, failed_tbus, tuple(failed_acc), tuple(recs))


def save_plan(plan: JobPlan, fabric: Fabric, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as a ``lumion.plan`` file, atomically (all or nothing)."""
    atomic_write_text(Path(path), json.dumps(plan_to_dict(plan, fabric), indent=1))


def load_plan(path: str | os.PathLike[str], fabric: Fabric) -> JobPlan:
    """Read a plan file for ``fabric``; FabricError naming the file when it is bad."""
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "plan file"))
    except FileNotFoundError:
        raise FabricError(f"plan file {path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise FabricError(f"plan file {path} is not valid JSON: {exc}") from None
    return plan_from_dict(data, fabric, str(path))


# ---------------------------------------------------------------------------------------
# Parts
# ---------------------------------------------------------------------------------------
def _job_from_dict(data: Any, fabric: Fabric, source: str) -> Job:
    if not isinstance(data, dict):
        raise FabricError(f"{source}: 'job' must be an object with name, topology, accelerators, links")
    accs, raw_links = data.get("accelerators"), data.get("links")
    if not isinstance(accs, list) or not all(isinstance(a, str) for a in accs):
        raise FabricError(f"{source}: job accelerators must be a list of names")
    if not isinstance(raw_links, list) or not all(
            isinstance(lk, list) and len(lk) == 2 and all(isinstance(x, str) for x in lk)
            for lk in raw_links):
        raise FabricError(f"{source}: job links must be a list of [a, b] name pairs")
    topology = data.get("topology", "links")
    if topology not in _TOPOLOGIES:
        raise FabricError(f"{source}: job topology must be one of {', '.join(_TOPOLOGIES)}, not {topology!r}")
    named = dict.fromkeys([*accs, *(x for lk in raw_links for x in lk)])
    unknown = [a for a in named if a not in fabric.names]
    if unknown:
        raise FabricError(f"{source}: the job names {', '.join(unknown)}, not accelerators of fabric "
                          f"{fabric.name} ({', '.join(fabric.names)})")
    stray = [x for lk in raw_links for x in lk if x not in accs]
    if stray:
        raise FabricError(f"{source}: job link uses {stray[0]}, not in the job's accelerators")
    job = Job(str(data.get("name", "job")), tuple(accs), tuple((a, b) for a, b in raw_links), topology)
    check_job(fabric, job)
    return job


def _route_from_dict(data: Any, mesh: Mesh, where: str) -> Route:
    try:
        hops = tuple(Hop(mesh.tbu_index(h["tbu"]), PORT_LABELS.index(h["entry"]),
                         PORT_LABELS.index(h["exit"])) for h in data["tbus"])
        return Route(mesh.port_index(data["src"]), mesh.port_index(data["dst"]), hops)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, LumionError) as exc:
        raise FabricError(f"{where}: malformed route ({type(exc).__name__}: {exc})"[:300]) from None


def _number(row: Mapping[str, Any], key: str, where: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise FabricError(f"{where}: {key} must be a number, not {value!r}"[:300])
    return float(value)


def _links_from_dict(data: Any, job: Job, fabric: Fabric, source: str) -> list[LinkResult]:
    mesh = fabric.mesh
    if not isinstance(data, list) or len(data) != len(job.links):
        raise FabricError(f"{source}: 'links' must list one routed link per job link ({len(job.links)})")
    ports = link_ports(fabric, job.links)
    out = []
    for k, (row, (a, b), (tx, rx)) in enumerate(zip(data, job.links, ports, strict=True)):
        where = f"{source}: link {k} ({a}->{b})"
        if not isinstance(row, dict):
            raise FabricError(f"{where} must be an object")
        if row.get("link") != f"{a}->{b}":
            raise FabricError(f"{where}: listed as {str(row.get('link'))[:40]!r}; "
                              "links must follow the job's order")
        route = _route_from_dict(row.get("route"), mesh, where)
        if (route.src, route.dst) != (tx, rx):
            names = mesh.port_names
            raise FabricError(f"{where}: its route goes {names[route.src]} -> {names[route.dst]}, "
                              f"but {a} transmits on {names[tx]} and {b} receives on {names[rx]}")
        ok = row.get("budget_ok")
        if not isinstance(ok, bool):
            raise FabricError(f"{where}: budget_ok must be true or false")
        reason = row.get("reason")
        figures = [_number(row, key, where) for key in ("loss_db", "transmission_db", "acr_db", "margin_db")]
        out.append(LinkResult((a, b), route, *figures, ok, None if reason is None else str(reason)))
    return out


def _failed_tbus(data: Any, mesh: Mesh, source: str) -> dict[int, str]:
    if not isinstance(data, dict):
        raise FabricError(f"{source}: 'failed_tbus' must map TBU names to dead, bar or cross")
    out = {}
    for name, how in data.items():
        try:
            t = mesh.tbu_index(name)
        except LumionError as exc:
            raise FabricError(f"{source}: failed_tbus: {exc}") from None
        if how not in FAILURES:
            raise FabricError(f"{source}: failed TBU {name}: give {', '.join(FAILURES)}, not {how!r}"[:300])
        out[t] = how
    return out


def _configuration(data: Any, mesh: Mesh, routes: list[Route], failed: Mapping[int, str],
                   source: str) -> Configuration:
    try:
        conf = Configuration.from_dict(data, mesh, f"{source}: configuration")
    except LumionError as exc:
        raise FabricError(str(exc)) from None
    for k, r in enumerate(routes):
        for t, state in r.states().items():
            if failed.get(t) == "dead":
                raise FabricError(f"{source}: link {k} routes through {mesh.tbu_names[t]}, "
                                  "which failed (dead)")
            want = 1.0 if state == "cross" else 0.0
            if conf.cross_fraction[t] != want:
                raise FabricError(f"{source}: the configuration sets {mesh.tbu_names[t]} to "
                                  f"{conf.states()[t]}, but link {k}'s route needs {state}")
    return Configuration(conf.cross_fraction, tuple(routes), mesh=mesh)


def _heater(data: Mapping[str, Any], mesh: Mesh, source: str) -> tuple[np.ndarray, str]:
    unit = data.get("heater_unit")
    if unit not in HEATER_UNITS:
        raise FabricError(f"{source}: heater_unit must be one of {', '.join(HEATER_UNITS)}, "
                          f"not {unit!r}"[:300])
    values = data.get("heater")
    if not isinstance(values, list) or len(values) != mesh.n_heaters:
        raise FabricError(f"{source}: 'heater' must list {mesh.n_heaters} values (one per heater channel)")
    try:
        heater = np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise FabricError(f"{source}: heater values must be numbers") from None
    if not np.isfinite(heater).all():
        raise FabricError(f"{source}: heater values must be finite numbers")
    return heater, unit
