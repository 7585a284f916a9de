"""Multicast plans as files: ``lumion.multicast-plan`` v1 (a running configuration of trees).

Written by ``lumion collective --multicast --out`` and by ``lumion failover --plan MC.json
--out``; read by ``lumion failover --plan`` for a failed receiver (prune or splice,
:mod:`photonics.fabric.multicast_failover`). It holds what acting on the trees later needs:
the mesh (spec, label, fingerprint), each group (source, receivers) with its tree (routes
and split ratios), the configuration, the failed TBUs, the ports left dark by pruned
receivers, the recoveries applied so far, and the fabric it was made on (``fabric_file``,
:func:`fabric_for`). Heater values are not stored: they follow
from the configuration through whatever heater map programs it.

Loading checks the file against a fabric and refuses in one line a file for another mesh,
accelerators the fabric does not have, trees that do not start and end at the groups'
lanes (as :func:`~photonics.fabric.multicast.group_ports` hands them out), trees sharing a
TBU, a tree through a dead TBU, or a configuration that disagrees with a tree. The branch
figures are not trusted from the file: every tree is solved and budgeted again.

Example:
    >>> from photonics.fabric import default_fabric
    >>> from photonics.fabric.multicast import plan_multicast
    >>> fab = default_fabric()
    >>> p = plan_multicast(fab, [("gpu0", ["gpu1", "gpu2"])])
    >>> again = multicast_from_dict(multicast_to_dict(RunningMulticast(p), fab), fab)
    >>> again.plan.trees == p.trees
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from photonics.atomic import atomic_write_text
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.configuration import Configuration, mesh_fingerprint, mesh_label
from photonics.errors import LumionError
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.multicast import Group, MulticastPlan, branch_results, group_ports
from photonics.fabric.plan_io import _failed_tbus, _route_from_dict
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing.multicast import Tree, check_trees
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

MULTICAST_PLAN_SCHEMA = "lumion.multicast-plan"
MULTICAST_PLAN_VERSION = 1


@dataclass(frozen=True, eq=False)
class RunningMulticast:
    """A multicast plan as it runs: the plan, and what acting on it again must remember.

    Attributes:
        plan: the groups, trees, configuration and branch figures.
        dark: mesh ports of pruned receivers (their share still arrives there: no victim).
        failed_tbus: TBU index -> dead/bar/cross, never routed through.
        failed_accelerators: receivers that failed, in order.
        recoveries: each recovery's report (JSON-ready), in order.
    """

    plan: MulticastPlan
    dark: frozenset[int] = frozenset()
    failed_tbus: Mapping[int, str] | None = None
    failed_accelerators: tuple[str, ...] = ()
    recoveries: tuple[dict[str, Any], ...] = ()


def multicast_to_dict(run: RunningMulticast, fabric: Fabric) -> dict[str, Any]:
    """The ``lumion.multicast-plan`` v1 document (JSON-ready; transmissions and margins in dB)."""
    mesh = fabric.mesh
    plan = run.plan
    plan.configuration.check_mesh(mesh, "the multicast plan's configuration")
    body = plan.to_dict(fabric)
    return {
        "schema": MULTICAST_PLAN_SCHEMA,
        "version": MULTICAST_PLAN_VERSION,
        "fabric": fabric.name,
        "mesh_spec": fabric.mesh_spec,
        "mesh": mesh_label(mesh),
        "mesh_fingerprint": mesh_fingerprint(mesh),
        "groups": body["groups"],
        "ok": body["ok"],
        "worst_margin_db": body["worst_margin_db"],
        "configuration": plan.configuration.to_dict(mesh),
        "dark_ports": [mesh.port_names[p] for p in sorted(run.dark)],
        "failed_tbus": {mesh.tbu_names[t]: how for t, how in sorted((run.failed_tbus or {}).items())},
        "failed_accelerators": list(run.failed_accelerators),
        "recoveries": [dict(r) for r in run.recoveries],
        "fabric_file": fabric.to_dict(),
    }


def fabric_for(data: Any, default: Fabric, source: str = "multicast plan") -> Fabric:
    """The fabric to act on a multicast plan with when none is given: ``default`` when the plan
    is on its mesh (the default fabric carries a collective's ranks on the same lanes, and its
    spares), else the fabric the plan records (``fabric_file``; e.g. a collective's slots on
    ``hex:RxC``). FabricError when that record is bad.
    """
    record = data.get("fabric_file") if isinstance(data, dict) else None
    if not isinstance(record, dict) or data.get("mesh_fingerprint") == mesh_fingerprint(default.mesh):
        return default
    try:
        return Fabric.from_dict(record, f"{source}: fabric_file")
    except LumionError as exc:
        raise FabricError(str(exc)) from None


def is_multicast_plan(data: Any) -> bool:
    """Whether a parsed JSON document declares itself a multicast plan."""
    return isinstance(data, dict) and data.get("schema") == MULTICAST_PLAN_SCHEMA


def multicast_from_dict(
    data: Any,
    fabric: Fabric,
    source: str = "multicast plan",
    *,
    params: TBUParams | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    failed: Mapping[int, str] | None = None,
) -> RunningMulticast:
    """Read a ``lumion.multicast-plan`` v1 document for ``fabric``; one-line FabricError when it
    does not fit (module docstring). The trees are solved and budgeted again here.

    ``failed``: TBUs failed besides the file's (a heater map's); the file's win.
    """
    if not is_multicast_plan(data):
        raise FabricError(f"{source} is not a LUMION multicast plan (expected schema "
                          f"{MULTICAST_PLAN_SCHEMA!r}); `lumion collective --multicast --out MC.json` "
                          "writes one")
    if type(data.get("version")) is not int or data["version"] != MULTICAST_PLAN_VERSION:
        raise FabricError(f"{source}: unsupported multicast plan version {data.get('version')!r} "
                          f"(this software reads version {MULTICAST_PLAN_VERSION})")
    mesh = fabric.mesh
    if data.get("mesh_fingerprint") != mesh_fingerprint(mesh):
        raise FabricError(f"{source} was made for another mesh ({str(data.get('mesh'))[:60]}), not "
                          f"{mesh_label(mesh)} of fabric {fabric.name}; give the fabric it was made with "
                          "(--fabric)")
    failed = {**(failed or {}), **_failed_tbus(data.get("failed_tbus", {}), mesh, source)}
    groups, trees = _groups(data.get("groups"), fabric, source)
    ports = group_ports(fabric, groups)
    for (src, dsts), tree, (tx, rxs) in zip(groups, trees, ports, strict=True):
        _check_ports(tree, src, dsts, tx, rxs, mesh, source)
    conf = _configuration(data.get("configuration"), mesh, trees, failed, source)
    dark = frozenset(_ports(data.get("dark_ports", []), mesh, source))
    failed_acc = data.get("failed_accelerators", [])
    if not isinstance(failed_acc, list) or \
            not all(isinstance(a, str) and a in fabric.names for a in failed_acc):
        raise FabricError(f"{source}: 'failed_accelerators' must list accelerators of fabric {fabric.name}")
    recs = data.get("recoveries", [])
    if not isinstance(recs, list) or not all(isinstance(r, dict) for r in recs):
        raise FabricError(f"{source}: 'recoveries' must be a list of recovery objects")
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    checks = check_trees(mesh, conf, trees, params, lanes=[fabric.lane(tx) for tx, _ in ports],
                         failed=failed, dark=dark)
    branches = branch_results(fabric, groups, ports, checks, defaults, required_margin_db)
    plan = MulticastPlan(tuple(groups), tuple(trees), tuple(checks), branches, conf)
    return RunningMulticast(plan, dark, failed, tuple(failed_acc), tuple(recs))


def save_multicast(run: RunningMulticast, fabric: Fabric, path: str | os.PathLike[str]) -> None:
    """Write ``run`` as a ``lumion.multicast-plan`` file, atomically (all or nothing)."""
    atomic_write_text(Path(path), json.dumps(multicast_to_dict(run, fabric), indent=1))


def load_multicast(path: str | os.PathLike[str], fabric: Fabric, **kwargs: Any) -> RunningMulticast:
    """Read a multicast plan file for ``fabric``; FabricError naming the file when it is bad."""
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "multicast plan file"))
    except FileNotFoundError:
        raise FabricError(f"multicast plan file {path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise FabricError(f"multicast plan file {path} is not valid JSON: {exc}") from None
    return multicast_from_dict(data, fabric, str(path), **kwargs)


# ---------------------------------------------------------------------------------------
# Parts
# ---------------------------------------------------------------------------------------
def _groups(data: Any, fabric: Fabric, source: str) -> tuple[list[Group], list[Tree]]:
    """(groups, trees) as the file lists them; FabricError on a malformed or unknown entry."""
    if not isinstance(data, list) or not data:
        raise FabricError(f"{source}: 'groups' must list at least one multicast group")
    groups, trees = [], []
    for k, row in enumerate(data):
        where = f"{source}: group {k}"
        if not isinstance(row, dict) or not isinstance(row.get("src"), str) or \
                not isinstance(row.get("dsts"), list) or not row["dsts"] or \
                not all(isinstance(d, str) for d in row["dsts"]):
            raise FabricError(f"{where} must be an object with src (a name) and dsts (a list of names)")
        unknown = [a for a in (row["src"], *row["dsts"]) if a not in fabric.names]
        if unknown:
            raise FabricError(f"{where} names {', '.join(unknown)}, not accelerators of fabric {fabric.name} "
                              f"({', '.join(fabric.names)})")
        groups.append((row["src"], tuple(row["dsts"])))
        trees.append(_tree(row.get("tree"), fabric.mesh, f"{where} ({row['src']})"))
    return groups, trees


def _tree(data: Any, mesh: Mesh, where: str) -> Tree:
    if not isinstance(data, dict) or not isinstance(data.get("branches"), list) or \
            not isinstance(data.get("splits", []), list):
        raise FabricError(f"{where}: 'tree' must be an object with branches and splits")
    branches = tuple(_route_from_dict(b, mesh, f"{where} branch {j}") for j, b in enumerate(data["branches"]))
    try:
        splits = tuple((mesh.tbu_index(s["tbu"]), float(s["cross_fraction"])) for s in data.get("splits", []))
        src = mesh.port_index(data["src"])
    except (KeyError, TypeError, ValueError, LumionError) as exc:
        raise FabricError(f"{where}: malformed tree ({type(exc).__name__}: {exc})"[:300]) from None
    if not all(0.0 <= f <= 1.0 for _, f in splits):
        raise FabricError(f"{where}: a split's cross_fraction must be between 0 and 1")
    return Tree(src, branches, splits)


def _check_ports(tree: Tree, src: str, dsts: Sequence[str], tx: int, rxs: Sequence[int], mesh: Mesh,
                 source: str) -> None:
    """The tree starts at the source's TX lane and each branch ends at its receiver's RX lane."""
    names = mesh.port_names
    if tree.src != tx or len(tree.branches) != len(dsts):
        raise FabricError(f"{source}: {src}'s tree starts at {names[tree.src]} with {len(tree.branches)} "
                          f"branch(es), but {src} transmits on {names[tx]} to {len(dsts)} receiver(s); give "
                          "the fabric the plan was made with (--fabric)")
    for d, rx, branch in zip(dsts, rxs, tree.branches, strict=True):
        if (branch.src, branch.dst) != (tx, rx):
            raise FabricError(f"{source}: branch {src}->{d} goes {names[branch.src]} -> "
                              f"{names[branch.dst]}, but {d} receives on {names[rx]}; give the fabric "
                              "the plan was made with (--fabric)")


def _configuration(data: Any, mesh: Mesh, trees: Sequence[Tree], failed: Mapping[int, str],
                   source: str) -> Configuration:
    """The file's configuration, checked against every tree (shared or dead TBUs refused)."""
    try:
        conf = Configuration.from_dict(data, mesh, f"{source}: configuration")
    except LumionError as exc:
        raise FabricError(str(exc)) from None
    owner: dict[int, int] = {}
    for k, tree in enumerate(trees):
        for t, want in tree.cross_fractions().items():
            name = mesh.tbu_names[t]
            if owner.setdefault(t, k) != k:
                raise FabricError(f"{source}: groups {owner[t]} and {k} both use {name}; trees share no TBU")
            if failed.get(t) == "dead":
                raise FabricError(f"{source}: group {k}'s tree routes through {name}, which failed (dead)")
            if conf.cross_fraction[t] != want:
                raise FabricError(f"{source}: the configuration sets {name} to cross fraction "
                                  f"{conf.cross_fraction[t]:g}, but group {k}'s tree needs {want:g}")
    routes = tuple(r for tree in trees for r in tree.branches)
    return Configuration(conf.cross_fraction, routes, {"multicast": True}, mesh=mesh)


def _ports(data: Any, mesh: Mesh, source: str) -> list[int]:
    if not isinstance(data, list):
        raise FabricError(f"{source}: 'dark_ports' must be a list of port names")
    try:
        return [mesh.port_index(p) for p in data]
    except (LumionError, TypeError, ValueError) as exc:
        raise FabricError(f"{source}: dark_ports: {exc}"[:300]) from None
