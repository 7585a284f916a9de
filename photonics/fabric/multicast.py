"""Multicast circuits on the fabric: one accelerator's transmitter to several receivers.

A multicast group ``(src, (dst, ...))`` is routed as a tree of tunable splitters
(:mod:`photonics.routing.multicast`), solved at the TX lane's own wavelengths, and every
branch is budgeted like a point-to-point link (:func:`photonics.budget.link_budget`)
with the power that branch really receives: the split's share *is* in the loss. A
group of one destination is an ordinary circuit (a tree with no split).

Lanes: a group takes one TX lane of its source and one RX lane of each destination; the
lanes of one configuration are handed out in order, as :func:`~photonics.fabric.link_ports`
does for point-to-point links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from photonics.budget import check_band, link_budget
from photonics.configuration import Configuration
from photonics.fabric.model import Fabric, FabricError
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing.graph import RoutingGraph, build_graph
from photonics.routing.multicast import Tree, TreeCheck, check_trees, route_trees, trees_configuration
from photonics.tolerances import REQUIRED_MARGIN_DB

Group = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class BranchResult:
    """One branch of a multicast group as budgeted (dB; transmission negative)."""

    src: str
    dst: str
    transmission_db: float
    margin_db: float
    budget_ok: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"link": f"{self.src}->{self.dst}", "transmission_db": self.transmission_db,
                "margin_db": self.margin_db, "budget_ok": self.budget_ok, "reason": self.reason}


@dataclass(frozen=True, eq=False)
class MulticastPlan:
    """Routed, solved and budgeted multicast groups of one configuration."""

    groups: tuple[Group, ...]
    trees: tuple[Tree, ...]
    checks: tuple[TreeCheck, ...]
    branches: tuple[tuple[BranchResult, ...], ...]
    configuration: Configuration

    @property
    def ok(self) -> bool:
        """Every branch of every group closes its budget."""
        return all(b.budget_ok for group in self.branches for b in group)

    @property
    def worst_margin_db(self) -> float:
        """Smallest branch margin (dB)."""
        return min(b.margin_db for group in self.branches for b in group)

    def first_failure(self) -> BranchResult | None:
        """The first branch whose budget does not close (None when all do)."""
        return next((b for group in self.branches for b in group if not b.budget_ok), None)

    def to_dict(self, fabric: Fabric) -> dict[str, Any]:
        """JSON-ready form."""
        mesh = fabric.mesh
        return {"groups": [{"src": src, "dsts": list(dsts), "tree": tree.to_dict(mesh),
                            "acr_db": check.acr_db, "spread_db": check.spread_db,
                            "branches": [b.to_dict() for b in branches]}
                           for (src, dsts), tree, check, branches
                           in zip(self.groups, self.trees, self.checks, self.branches, strict=True)],
                "ok": self.ok, "worst_margin_db": self.worst_margin_db}


def group_ports(fabric: Fabric, groups: Sequence[Group]) -> list[tuple[int, tuple[int, ...]]]:
    """(TX port, RX ports) per group, each accelerator's lanes used in order (FabricError when short)."""
    used_tx: dict[str, int] = {}
    used_rx: dict[str, int] = {}
    out = []
    for src, dsts in groups:
        acc = fabric.accelerator(src)
        i = used_tx.get(src, 0)
        if i >= len(acc.tx):
            raise FabricError(f"{src} has no TX lane left for its multicast to {', '.join(dsts)} "
                              f"({len(acc.tx)} lane(s))")
        used_tx[src] = i + 1
        rx = []
        for d in dsts:
            dacc = fabric.accelerator(d)
            j = used_rx.get(d, 0)
            if j >= len(dacc.rx):
                raise FabricError(f"{d} has no RX lane left for {src}'s multicast ({len(dacc.rx)} lane(s))")
            used_rx[d] = j + 1
            rx.append(dacc.rx[j])
        out.append((acc.tx[i], tuple(rx)))
    return out


def plan_multicast(
    fabric: Fabric,
    groups: Sequence[tuple[str, Sequence[str]]],
    *,
    params: TBUParams | None = None,
    failed: Mapping[int, str] | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    graph: RoutingGraph | None = None,
) -> MulticastPlan:
    """Route, solve and budget ``groups`` together in one configuration.

    Raises:
        FabricError: an unknown accelerator or not enough lanes.
        RoutingError: a tree cannot be routed (its TBUs may not be shared with another).
        BudgetError: a lane the chip cannot carry.

    Example:
        >>> from photonics.fabric import default_fabric
        >>> p = plan_multicast(default_fabric(), [("gpu0", ["gpu1", "gpu2"])])
        >>> p.ok, len(p.trees[0].splits)
        (True, 1)
    """
    mesh = fabric.mesh
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    norm = tuple((str(src), tuple(str(d) for d in dsts)) for src, dsts in groups)
    ports = group_ports(fabric, norm)
    for tx, rxs in ports:
        for rx in rxs:
            check_band(fabric.lane(tx), fabric.lane(rx), defaults)
    graph = graph or build_graph(mesh, params)
    trees = route_trees(mesh, ports, params, failed, graph)
    conf = trees_configuration(mesh, trees)
    checks = check_trees(mesh, conf, trees, params, lanes=[fabric.lane(tx) for tx, _ in ports],
                         failed=dict(failed or {}))
    branches = branch_results(fabric, norm, ports, checks, defaults, required_margin_db)
    return MulticastPlan(norm, tuple(trees), tuple(checks), branches, conf)


def branch_results(
    fabric: Fabric,
    groups: Sequence[Group],
    ports: Sequence[tuple[int, tuple[int, ...]]],
    checks: Sequence[TreeCheck],
    defaults: PhysicsDefaults,
    required_margin_db: float,
) -> tuple[tuple[BranchResult, ...], ...]:
    """Each branch of each group budgeted like a point-to-point link
    (:func:`photonics.budget.link_budget`) at its solved transmission; one row per group.
    """
    rows = []
    for (src, dsts), (tx, rxs), check in zip(groups, ports, checks, strict=True):
        rows.append(tuple(
            BranchResult(src, d, t_db, b.margin_db, b.ok, b.reason)
            for d, rx, t_db in zip(dsts, rxs, check.transmission_db, strict=True)
            for b in (link_budget(-t_db, fabric.lane(tx), fabric.lane(rx), defaults, required_margin_db),)
        ))
    return tuple(rows)
