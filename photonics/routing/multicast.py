"""Optical multicast: one source port to several destination ports through tunable splitters.

A multicast :class:`Tree` is one :class:`~photonics.configuration.Route` per destination,
all from the same source, sharing their first hops and parting at **split** TBUs: a TBU
of the tree whose light enters at one port and leaves at both ports of the other end,
its cross fraction set so that every destination receives the same power.

Routing (:func:`route_tree`): the nearest destination first, by the graph's shortest path;
then each further destination by one multi-source Dijkstra from every place the tree can
still branch (the free exit of a TBU the tree crosses without splitting), over the graph
with every TBU already used (by this tree or by ``blocked``) removed. A greedy Steiner
tree: not always the tree of least loss, but each branch it adds is the cheapest one
from the tree built so far. A tree never uses a TBU twice, and trees routed one after the
other (:func:`route_trees`) never share a TBU.

Split ratios (:func:`split_fractions`): with ``R(x)`` the power needed at point ``x`` per
unit power delivered to each destination below it (1 at a destination; an element of
transmission ``T`` divides by ``T``; a split adds its two sides), a split sends
``R(side) / (R(bar side) + R(cross side))`` of its light to each side, so on the nominal
losses every destination gets the same power: ``1 / R(source)`` of what was launched.
The circuit solve (:func:`check_trees`) then measures what each destination really gets,
at its lane's wavelengths, with the chip's couplers, crosstalk and leaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse.csgraph import dijkstra

from photonics.configuration import Configuration, Hop, Route, hop_state
from photonics.errors import RoutingError
from photonics.physics import TBUParams, nominal_params
from photonics.routing.graph import RoutingGraph, build_graph
from photonics.routing.verify import Lanes, lane_power, route_wavelengths_nm
from photonics.topology import Mesh

# Arcs of TBUs a tree may not use get this cost instead of being dropped from the CSR (the
# sparsity must stay that of the graph); any distance at or above it means "no way".
BLOCKED_COST_DB = 1e9


@dataclass(frozen=True)
class Tree:
    """One source to several destinations: a branch per destination and the splits.

    Attributes:
        src: mesh port index of the transmitter.
        branches: one route per destination, in the order they were added.
        splits: ``(TBU index, cross fraction)`` of every TBU where branches part.
    """

    src: int
    branches: tuple[Route, ...]
    splits: tuple[tuple[int, float], ...] = ()

    @property
    def dsts(self) -> tuple[int, ...]:
        """Destination ports, one per branch."""
        return tuple(r.dst for r in self.branches)

    @property
    def tbus(self) -> frozenset[int]:
        """Every TBU the tree uses."""
        return frozenset(h.tbu for r in self.branches for h in r.hops)

    def cross_fractions(self) -> dict[int, float]:
        """``{TBU: cross fraction}`` the tree needs (0 bar, 1 cross, between for a split)."""
        out = {h.tbu: 1.0 if h.state == "cross" else 0.0 for r in self.branches for h in r.hops}
        out.update(dict(self.splits))
        return out

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form with names."""
        return {"src": mesh.port_names[self.src], "dsts": [mesh.port_names[d] for d in self.dsts],
                "splits": [{"tbu": mesh.tbu_names[t], "cross_fraction": f} for t, f in self.splits],
                "branches": [r.to_dict(mesh) for r in self.branches]}


@dataclass(frozen=True)
class TreeCheck:
    """Circuit-solve figures of one tree (dB, worst case over its lane's wavelengths).

    ``transmission_db[k]``: power reaching destination k per watt launched (negative);
    ``spread_db``: largest difference between two destinations at one wavelength;
    ``acr_db``: worst destination's transmission minus the worst leak into a victim port
    (the other trees' destinations, or for a lone tree every port it does not feed).
    """

    transmission_db: tuple[float, ...]
    spread_db: float
    worst_leak_db: float
    worst_leak_port: int
    acr_db: float
    wavelengths_nm: tuple[float, ...]


def _neighbours(mesh: Mesh) -> dict[int, tuple[int, int]]:
    """Global TBU port -> (link index, global TBU port at the link's other end)."""
    out: dict[int, tuple[int, int]] = {}
    for k, (p, q) in enumerate(mesh.links):
        out[int(p)] = (k, int(q))
        out[int(q)] = (k, int(p))
    return out


def _blocked_costs(graph: RoutingGraph, tbus: set[int] | frozenset[int]) -> np.ndarray:
    """The graph's costs with every arc of ``tbus`` made unusable."""
    cost = graph.cost.copy()
    for t in tbus:
        cost[8 * t:8 * t + 8] = BLOCKED_COST_DB
    return cost


def _branch_points(branches: Sequence[Route], split: set[int]) -> dict[int, tuple[Route, int]]:
    """Out-node of every free exit the tree could branch at -> (branch, hop index) it leaves."""
    out: dict[int, tuple[Route, int]] = {}
    for r in branches:
        for i, h in enumerate(r.hops):
            if h.tbu in split:
                continue
            other = h.exit ^ 1  # the other port at the same end of the TBU
            out.setdefault(2 * (4 * h.tbu + other) + 1, (r, i))
    return out


def _walk_from(pred: np.ndarray, start: int, sink: int, include_start: bool = False) -> list[Hop]:
    """Hops of the predecessor chain from ``start`` to ``sink``.

    ``start`` is a branch point's out-node (its TBU is not a new hop) or, with
    ``include_start``, the source's in-node.
    """
    nodes = [sink]
    while nodes[-1] != start:
        nodes.append(int(pred[nodes[-1]]))
    nodes = nodes[::-1] if include_start else nodes[::-1][1:]  # in, out, in, out, ...
    return [Hop(a // 8, (a // 2) % 4, (b // 2) % 4) for a, b in zip(nodes[::2], nodes[1::2], strict=True)]


def _nearest(dist: np.ndarray, graph: RoutingGraph, todo: Sequence[int]) -> int | None:
    """The destination of ``todo`` with the smallest finite distance (None: none reachable)."""
    best = min(todo, key=lambda d: (float(dist[graph.sink(d)]), d))
    return best if dist[graph.sink(best)] < BLOCKED_COST_DB else None


def _unreachable(mesh: Mesh, src: int, todo: Sequence[int]) -> RoutingError:
    names = ", ".join(mesh.port_names[d] for d in todo)
    return RoutingError(f"multicast from {mesh.port_names[src]}: no free path from the tree to {names}")


def route_tree(graph: RoutingGraph, src: int, dsts: Sequence[int], params: TBUParams | None = None,
               blocked: set[int] | frozenset[int] = frozenset()) -> Tree:
    """A multicast tree from mesh port ``src`` to every port of ``dsts`` (see module docstring).

    Destinations join in order of their distance from the tree built so far (the nearest
    first). ``blocked``: TBUs the tree may not use (e.g. other trees of the same
    configuration, failed TBUs). ``params``: the losses the split ratios equalise
    (nominal when omitted).

    Raises:
        RoutingError: a destination repeats or equals the source, or cannot be reached.

    Example:
        >>> from photonics.routing.graph import build_graph
        >>> from photonics.topology import smartlight
        >>> g = build_graph(smartlight())
        >>> t = route_tree(g, 1, [4, 8, 12])
        >>> sorted(t.dsts), len(t.splits)
        ([4, 8, 12], 2)
    """
    mesh = graph.mesh
    if not dsts or len(set(dsts)) != len(dsts) or src in dsts:
        raise RoutingError(f"multicast from {mesh.port_names[src]}: give one or more different "
                           "destinations other than the source")
    used = set(blocked)
    s = graph.source(src)
    dist, pred = dijkstra(graph.with_costs(_blocked_costs(graph, used)), directed=True, indices=s,
                          return_predecessors=True)
    todo = list(dsts)
    first = _nearest(dist, graph, todo)
    if first is None:
        raise _unreachable(mesh, src, todo)
    branches = [Route(src, first, tuple(_walk_from(pred, s, graph.sink(first), include_start=True)))]
    todo.remove(first)
    split: set[int] = set()
    while todo:
        used = {h.tbu for r in branches for h in r.hops} | set(blocked)
        points = _branch_points(branches, split)
        if not points:
            raise _unreachable(mesh, src, todo)
        csr = graph.with_costs(_blocked_costs(graph, used))
        dist, pred, origin = dijkstra(csr, directed=True, indices=sorted(points), min_only=True,
                                      return_predecessors=True)
        d = _nearest(dist, graph, todo)
        if d is None:
            raise _unreachable(mesh, src, todo)
        start = int(origin[graph.sink(d)])
        stem, i = points[start]
        fork = stem.hops[i]
        hops = (*stem.hops[:i], Hop(fork.tbu, fork.entry, fork.exit ^ 1),
                *_walk_from(pred, start, graph.sink(d)))
        branches.append(Route(src, d, hops))
        split.add(fork.tbu)
        todo.remove(d)
    by_dst = {r.dst: r for r in branches}
    tree = Tree(src, tuple(by_dst[d] for d in dsts))
    fractions = split_fractions(mesh, tree, params)
    return Tree(src, tree.branches, tuple((t, fractions[t]) for t in sorted(split)))


def split_fractions(mesh: Mesh, tree: Tree, params: TBUParams | None = None) -> dict[int, float]:
    """Cross fraction of every split TBU that equalises the destinations' power (nominal losses)."""
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    neighbours = _neighbours(mesh)
    ports = {int(g): k for k, g in enumerate(mesh.port_tbu_ports)}
    exits: dict[int, set[int]] = {}
    entries: dict[int, int] = {}
    for r in tree.branches:
        for h in r.hops:
            entries[h.tbu] = h.entry
            exits.setdefault(h.tbu, set()).add(h.exit)
    dsts = set(tree.dsts)
    out: dict[int, float] = {}

    def need_exit(t: int, x: int) -> float:
        g = 4 * t + x
        if g in ports:
            if ports[g] not in dsts:
                where = mesh.port_names[ports[g]]
                raise RoutingError(f"internal: multicast branch leaves the mesh at {where}")
            return 1.0
        link, q = neighbours[g]
        return need_tbu(q // 4) * 10 ** (float(params.link_loss_db[link]) / 10)

    def need_tbu(t: int) -> float:
        sides = {x: need_exit(t, x) for x in sorted(exits[t])}
        if len(sides) == 2:
            cross = next(x for x in sides if hop_state(entries[t], x) == "cross")
            out[t] = sides[cross] / sum(sides.values())
        return sum(sides.values()) * 10 ** (float(params.loss_db[t]) / 10)

    first = tree.branches[0].hops[0].tbu
    need_tbu(first)
    return out


def route_trees(mesh: Mesh, groups: Sequence[tuple[int, Sequence[int]]], params: TBUParams | None = None,
                failed: Mapping[int, str] | None = None, graph: RoutingGraph | None = None) -> list[Tree]:
    """One tree per ``(src, dsts)`` group, none sharing a TBU, largest group first.

    Failed TBUs (``{index: "dead"|"bar"|"cross"}``) are never used: a stuck TBU cannot
    split, and a tree needs each of its TBUs in the state it asks for.
    """
    graph = graph or build_graph(mesh, params)
    used = set((failed or {}).keys())
    out: dict[int, Tree] = {}
    for k in sorted(range(len(groups)), key=lambda i: -len(groups[i][1])):
        src, dsts = groups[k]
        tree = route_tree(graph, int(src), [int(d) for d in dsts], params, used)
        used |= tree.tbus
        out[k] = tree
    return [out[k] for k in range(len(groups))]


def trees_configuration(mesh: Mesh, trees: Sequence[Tree]) -> Configuration:
    """The mesh configuration realising ``trees`` (TBUs on no tree parked)."""
    conf = Configuration.parked(mesh).cross_fraction.copy()
    for tree in trees:
        for t, f in tree.cross_fractions().items():
            conf[t] = f
    routes = tuple(r for tree in trees for r in tree.branches)
    return Configuration(conf, routes, {"multicast": True}, mesh=mesh)


def check_trees(mesh: Mesh, configuration: Configuration, trees: Sequence[Tree],
                params: TBUParams | None = None, *, lanes: Lanes = None,
                failed: Mapping[int, str] | None = None,
                dark: frozenset[int] = frozenset()) -> list[TreeCheck]:
    """Solve the mesh in ``configuration`` and measure every tree at its TX lane's wavelengths.

    ``lanes``: the TX lane of each tree (one per tree), one lane for all, or the default.
    ``dark``: ports whose receiver is gone (a pruned branch still ends there): no victim.

    Example:
        >>> from photonics.routing.graph import build_graph
        >>> from photonics.topology import smartlight
        >>> m = smartlight()
        >>> t = route_tree(build_graph(m), 1, [4, 8, 12])
        >>> c = check_trees(m, trees_configuration(m, [t]), [t])[0]
        >>> round(c.spread_db, 1) < 1.0, min(c.transmission_db) > -20
        (True, True)
    """
    if not trees:
        return []
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    waves = route_wavelengths_nm(len(trees), lanes)
    powers = lane_power(mesh, configuration, [t.src for t in trees], waves, params, failed)
    all_dsts = [set(t.dsts) for t in trees]
    out = []
    for k, tree in enumerate(trees):
        p = powers[k]  # (W, P)
        signal = p[:, list(tree.dsts)]  # (W, D)
        others = set().union(*(d for j, d in enumerate(all_dsts) if j != k))
        victims = sorted(others) if len(trees) > 1 else \
            [q for q in range(mesh.n_ports) if q != tree.src and q not in all_dsts[k] and q not in dark]
        tx_db = 10 * np.log10(signal.min(axis=0))
        spread = float((10 * np.log10(signal.max(axis=1) / signal.min(axis=1))).max())
        if victims:
            leak = p[:, victims]
            ratio = 10 * np.log10(signal.min(axis=1) / leak.max(axis=1))
            acr = float(ratio.min())
            worst_port = int(victims[int(np.argmax(leak.max(axis=0)))])
            worst_leak = float(10 * np.log10(leak.max()))
        else:
            acr, worst_port, worst_leak = float("inf"), -1, float("-inf")
        out.append(TreeCheck(tuple(float(x) for x in tx_db), spread, worst_leak, worst_port, acr, waves[k]))
    return out
