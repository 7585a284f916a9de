"""Failover of a multicast tree: a failed receiver is pruned, or its branch spliced to a spare.

Only the failed receiver's **own part** of the tree changes: the hops of its branch below
the last TBU it shares with another branch (its split, or for the first branch the place
the next branch leaves it). Every TBU another branch's light passes, the split's ratio
included, and every TBU of the other trees keeps its state bit for bit.

- **Prune** (no spare): the configuration is left exactly as it is; the failed receiver's
  share is sunk in its dead port. Darkening the branch (parking its TBUs) would send that
  share to ports nobody checked, and rebalancing the split would touch a TBU other
  branches' light passes: neither is hitless.
- **Splice** (a spare accelerator): the part below the split is re-routed from the split's
  exit to the spare's first free RX lane, over free TBUs only (no TBU of any tree, no
  failed TBU of the map); the old part's TBUs are parked. The split keeps its ratio, so the
  spare gets what its new path delivers, not an equal share: its own budget says whether
  that closes.

Then every remaining branch of every group is solved again (the same check
:func:`~photonics.fabric.multicast.plan_multicast` does: ACR and margin at each lane's
wavelengths) and its received power compared with before: beyond
:data:`BRANCH_TOL_DB` the recovery is refused, in one line naming the branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.sparse.csgraph import dijkstra

from photonics.budget import check_band
from photonics.configuration import Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.multicast import BranchResult, MulticastPlan, branch_results, group_ports
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing.graph import RoutingGraph, build_graph
from photonics.routing.multicast import BLOCKED_COST_DB, Tree, _blocked_costs, _walk_from, check_trees
from photonics.tolerances import REQUIRED_MARGIN_DB

# A held branch (its TBUs' states bit-identical) can still see its received power move: the
# circuit solve has crosstalk, so TBUs changed next to its path leak a little light into it,
# adding coherently. On the default fabric splices move held branches by 0.0002 dB at most; a
# branch that moves by more than 0.1 dB is being hit by the new path's leak (a real receiver's
# power monitor resolves ~0.1 dB), so the recovery is refused rather than called hitless.
BRANCH_TOL_DB = 0.1


@dataclass(frozen=True, eq=False)
class MulticastFailover:
    """A multicast plan after a failed receiver was pruned or spliced.

    Attributes:
        failed: the failed receiver (accelerator name).
        spare: the spare spliced in (None: pruned).
        plan: the groups as they run after the recovery (the failed receiver gone, the spare in).
        changed_tbus: TBUs whose state changed (none for a prune).
        shift_db: largest change of a remaining branch's received power (dB).
    """

    failed: str
    spare: str | None
    plan: MulticastPlan
    changed_tbus: tuple[int, ...]
    shift_db: float


def _locate(plan: MulticastPlan, failed: str) -> tuple[int, int]:
    """(group, branch) of the failed receiver; FabricError unless in exactly one group."""
    hits = [(g, dsts.index(failed)) for g, (_, dsts) in enumerate(plan.groups) if failed in dsts]
    if len(hits) != 1:
        where = "no" if not hits else f"{len(hits)}"
        raise FabricError(f"multicast failover: {failed} is a receiver of {where} group(s); "
                          "give a receiver of exactly one group")
    return hits[0]


def own_part(tree: Tree, k: int) -> int:
    """Index of the first hop of branch ``k`` that no other branch passes (its own part)."""
    others = {h.tbu for j, r in enumerate(tree.branches) if j != k for h in r.hops}
    hops = tree.branches[k].hops
    shared = [i for i, h in enumerate(hops) if h.tbu in others]
    return shared[-1] + 1 if shared else 0


def _free_rx(fabric: Fabric, plan: MulticastPlan, spare: str) -> int:
    """The spare's first RX port no group uses (FabricError when it has none or is a receiver)."""
    if any(spare == src or spare in dsts for src, dsts in plan.groups):
        raise FabricError(f"multicast failover: spare {spare} is already in a multicast group")
    used = {rx for _, rxs in group_ports(fabric, plan.groups) for rx in rxs}
    free = [p for p in fabric.accelerator(spare).rx if p not in used]
    if not free:
        raise FabricError(f"multicast failover: spare {spare} has no free RX lane")
    return free[0]


def _reroute(graph: RoutingGraph, tree: Tree, k: int, rx: int, blocked: set[int]) -> Route:
    """Branch ``k`` re-routed below its split to port ``rx`` (RoutingError: no free path)."""
    mesh = graph.mesh
    hops = tree.branches[k].hops
    cut = own_part(tree, k)
    if cut == 0:
        start, include = graph.source(tree.src), True
    else:
        fork = hops[cut - 1]
        start, include = 2 * (4 * fork.tbu + fork.exit) + 1, False
    dist, pred = dijkstra(graph.with_costs(_blocked_costs(graph, blocked)), directed=True, indices=start,
                          return_predecessors=True)
    if not dist[graph.sink(rx)] < BLOCKED_COST_DB:
        raise RoutingError(f"multicast failover: no free path from {mesh.port_names[tree.src]}'s tree "
                           f"to {mesh.port_names[rx]}; nothing changed")
    return Route(tree.src, rx, (*hops[:cut], *_walk_from(pred, start, graph.sink(rx), include)))


def _compare(before: MulticastPlan, after: tuple[tuple[BranchResult, ...], ...]) -> float:
    """Largest power shift of a branch present before and after; refuses beyond BRANCH_TOL_DB."""
    old = {(b.src, b.dst): b.transmission_db for row in before.branches for b in row}
    worst = 0.0
    for row in after:
        for b in row:
            if (b.src, b.dst) not in old:
                continue
            shift = abs(b.transmission_db - old[(b.src, b.dst)])
            if not shift <= BRANCH_TOL_DB:
                raise FabricError(f"multicast failover refused: branch {b.src}->{b.dst} moved {shift:.3f} dB "
                                  f"(tolerance {BRANCH_TOL_DB:g} dB); nothing changed")
            worst = max(worst, shift)
    return worst


def fail_receiver(
    fabric: Fabric,
    plan: MulticastPlan,
    failed_rx: str,
    spare: str | None = None,
    *,
    params: TBUParams | None = None,
    failed: Mapping[int, str] | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    graph: RoutingGraph | None = None,
    dark: frozenset[int] = frozenset(),
) -> MulticastFailover:
    """Prune ``failed_rx`` from ``plan`` or, with ``spare``, splice its branch to the spare.

    ``params``, ``failed``, ``defaults``, ``required_margin_db``: as given to
    :func:`~photonics.fabric.multicast.plan_multicast` for ``plan``. ``dark``: ports of
    receivers pruned before (no victims in the ACR, like the one pruned now). ``plan`` is
    not changed.

    Raises:
        FabricError: the receiver is in no (or several) groups, the spare is busy or has no
            free RX lane, a branch moved beyond :data:`BRANCH_TOL_DB`, or a branch's budget
            does not close.
        RoutingError: no free path from the tree to the spare.
    """
    mesh = fabric.mesh
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    g, k = _locate(plan, failed_rx)
    ports = group_ports(fabric, plan.groups)
    tree = plan.trees[g]
    dead_port = ports[g][1][k]
    cross = plan.configuration.cross_fraction.copy()
    if spare is None:
        new_tree = Tree(tree.src, tuple(r for j, r in enumerate(tree.branches) if j != k), tree.splits)
        dsts = tuple(d for j, d in enumerate(plan.groups[g][1]) if j != k)
        rxs = tuple(p for j, p in enumerate(ports[g][1]) if j != k)
        dark = dark | {dead_port}
    else:
        rx = _free_rx(fabric, plan, spare)
        check_band(fabric.lane(ports[g][0]), fabric.lane(rx), defaults)
        own = {h.tbu for h in tree.branches[k].hops[own_part(tree, k):]}
        blocked = {t for tr in plan.trees for t in tr.tbus} - own | set((failed or {}).keys())
        branch = _reroute(graph or build_graph(mesh, params), tree, k, rx, blocked)
        new_tree = Tree(tree.src, tuple(branch if j == k else r for j, r in enumerate(tree.branches)),
                        tree.splits)
        parked = Configuration.parked(mesh).cross_fraction
        cross[list(own)] = parked[list(own)]
        for t, f in new_tree.cross_fractions().items():
            cross[t] = f
        dsts = tuple(spare if j == k else d for j, d in enumerate(plan.groups[g][1]))
        rxs = tuple(rx if j == k else p for j, p in enumerate(ports[g][1]))
    held = {t for j, tr in enumerate(plan.trees) if j != g for t in tr.tbus} | \
        {h.tbu for j, r in enumerate(tree.branches) if j != k for h in r.hops}
    changed = np.flatnonzero(cross != plan.configuration.cross_fraction)
    if held & set(changed.tolist()):  # by construction never; a wrong answer must not be silent
        raise FabricError("internal: multicast failover would change a TBU another branch passes")
    trees = [new_tree if j == g else tr for j, tr in enumerate(plan.trees)]
    groups = [(plan.groups[g][0], dsts) if j == g else grp for j, grp in enumerate(plan.groups)]
    all_ports = [(ports[g][0], rxs) if j == g else p for j, p in enumerate(ports)]
    keep = [j for j, (_, ds) in enumerate(groups) if ds]  # a group of one pruned receiver is gone
    trees, groups, all_ports = ([x[j] for j in keep] for x in (trees, groups, all_ports))
    conf = Configuration(cross, tuple(r for tr in trees for r in tr.branches), {"multicast": True}, mesh=mesh)
    checks = check_trees(mesh, conf, trees, params, lanes=[fabric.lane(tx) for tx, _ in all_ports],
                         failed=dict(failed or {}), dark=dark)
    branches = branch_results(fabric, groups, all_ports, checks, defaults, required_margin_db)
    shift = _compare(plan, branches)
    new = MulticastPlan(tuple(groups), tuple(trees), tuple(checks), branches, conf)
    bad = new.first_failure()
    if bad is not None:
        raise FabricError(f"multicast failover refused: branch {bad.src}->{bad.dst} does not close "
                          f"({bad.reason}); nothing changed")
    return MulticastFailover(failed_rx, spare, new, tuple(int(t) for t in changed), shift)
