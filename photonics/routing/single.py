"""Shortest single routes over the routing graph, and the rules a set of routes must obey.

Dijkstra runs in C (``scipy.sparse.csgraph.dijkstra`` with one source index) over the
CSR matrix built once per graph; only the predecessor walk is Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from photonics.configuration import Hop, Route
from photonics.routing.graph import RoutingGraph, arc_index
from photonics.topology import Mesh


def shortest_path(
    graph: RoutingGraph, src: int, dst: int, csr: sp.csr_matrix | None = None
) -> Route | None:
    """Cheapest route from mesh port ``src`` to mesh port ``dst``, or None if none exists.

    ``csr`` overrides the graph's costs (same sparsity, e.g. from
    :meth:`RoutingGraph.with_costs`) and is searched afresh. Without it the graph is
    immutable, and so are its answers: the shortest-path tree of each source port is
    computed once (one csgraph Dijkstra, or :func:`shortest_trees` for many at once) and
    each route once per (source, destination), then returned from the graph's cache. The
    route is not checked for revisiting a TBU in another state; :func:`conflicts` does that.

    Example:
        >>> from photonics.routing.graph import build_graph
        >>> from photonics.topology import smartlight
        >>> r = shortest_path(build_graph(smartlight()), 5, 28)
        >>> (r.src, r.dst, len(r.hops))
        (5, 28, 11)
    """
    if csr is not None:
        s, t = graph.source(src), graph.sink(dst)
        dist, pred = dijkstra(csr, directed=True, indices=s, return_predecessors=True)
        return _walk(pred, s, t, src, dst) if np.isfinite(dist[t]) else None
    routes = graph.__dict__.setdefault("_routes", {})
    key = (src, dst)
    try:
        return routes[key]
    except KeyError:
        pass
    s, t = graph.source(src), graph.sink(dst)
    trees = graph.__dict__.setdefault("_trees", {})
    if s not in trees:
        trees[s] = dijkstra(graph.csr, directed=True, indices=s, return_predecessors=True)
    dist, pred = trees[s]
    route = _walk(pred, s, t, src, dst) if np.isfinite(dist[t]) else None
    routes[key] = route
    return route


def shortest_paths(
    graph: RoutingGraph, pairs: Sequence[tuple[int, int]], csr: sp.csr_matrix | None = None
) -> list[Route | None]:
    """Cheapest route of each (source, destination) port pair, each found independently.

    With ``csr`` (new costs), one csgraph Dijkstra call searches from every distinct
    source of the batch (its loop over sources runs in C) and nothing is cached; without
    it, as :func:`shortest_path` pair by pair, the missing source trees first in one call.
    """
    if csr is None:
        shortest_trees(graph, [src for src, _ in pairs])
        return [shortest_path(graph, src, dst) for src, dst in pairs]
    sources = sorted({graph.source(src) for src, _ in pairs})
    row = {s: i for i, s in enumerate(sources)}
    dist, pred = dijkstra(csr, directed=True, indices=sources, return_predecessors=True)
    out: list[Route | None] = []
    for src, dst in pairs:
        s, t = graph.source(src), graph.sink(dst)
        i = row[s]
        out.append(_walk(pred[i], s, t, src, dst) if np.isfinite(dist[i, t]) else None)
    return out


def shortest_trees(graph: RoutingGraph, ports: Sequence[int]) -> None:
    """Compute and cache the shortest-path trees of many source ports in one csgraph call
    (Dijkstra's loop over the sources runs in C); later :func:`shortest_path` calls from
    those ports only walk their tree.
    """
    trees = graph.__dict__.setdefault("_trees", {})
    todo = sorted({graph.source(p) for p in ports} - set(trees))
    if not todo:
        return
    dist, pred = dijkstra(graph.csr, directed=True, indices=todo, return_predecessors=True)
    for i, s in enumerate(todo):
        trees[s] = (dist[i], pred[i])


def _walk(pred: np.ndarray, s: int, t: int, src: int, dst: int) -> Route:
    """Hops of the predecessor chain ``s -> ... -> t`` (node = 2 * TBU port + is_out)."""
    nodes = [t]
    node = t
    while node != s:
        node = int(pred[node])
        nodes.append(node)
    nodes.reverse()
    # Nodes alternate in, out, in, out ...: every (in, out) pair is one TBU crossing.
    hops = tuple(Hop(a // 8, (a // 2) % 4, (b // 2) % 4) for a, b in zip(nodes[::2], nodes[1::2],
                                                                         strict=True))
    return Route(int(src), int(dst), hops)


def route_cost(graph: RoutingGraph, route: Route, cost: np.ndarray | None = None) -> float:
    """Sum of arc costs (dB) along ``route``; ``cost`` defaults to ``graph.cost``."""
    c = graph.cost if cost is None else cost
    return float(sum(c[a] for a in route_arcs(graph, route)))


def route_loss_db(graph: RoutingGraph, route: Route) -> float:
    """Physical loss (dB) along ``route``: TBU insertion losses plus link losses."""
    return route_cost(graph, route, graph.loss_db)


def route_arcs(graph: RoutingGraph, route: Route) -> list[int]:
    """Arc indices along ``route`` (TBU arcs and the link arcs between them)."""
    link_arc = _link_arc_lookup(graph)
    arcs = []
    for k, h in enumerate(route.hops):
        arcs.append(arc_index(h.tbu, h.entry, h.exit))
        if k + 1 < len(route.hops):
            nxt = route.hops[k + 1]
            arcs.append(link_arc[(4 * h.tbu + h.exit, 4 * nxt.tbu + nxt.entry)])
    return arcs


def _link_arc_lookup(graph: RoutingGraph) -> dict[tuple[int, int], int]:
    cached = getattr(graph, "_link_arcs", None)
    if cached is None:
        k0 = graph.n_tbu_arcs
        cached = {(int(a) // 2, int(b) // 2): k0 + i
                  for i, (a, b) in enumerate(zip(graph.tail[k0:], graph.head[k0:], strict=True))}
        object.__setattr__(graph, "_link_arcs", cached)
    return cached


def conflicts(mesh: Mesh, routes: Sequence[Route]) -> list[str]:
    """Every way ``routes`` break the routing rules, as readable strings (empty = valid).

    Rules: a route starts at its source's TBU port, ends at its destination's, goes from
    one end of each TBU to the other (no U-turn) and along a link between TBUs; every TBU
    port carries at most one route (so two routes share a TBU only on its two different
    paths); and every TBU is asked for one state only.
    """
    problems: list[str] = []
    peer = mesh.peer()
    port_owner: dict[int, int] = {}
    state_of: dict[int, tuple[str, int]] = {}
    for k, r in enumerate(routes):
        name = f"route {k} ({mesh.port_names[r.src]}->{mesh.port_names[r.dst]})"
        if not r.hops:
            problems.append(f"{name} has no hops")
            continue
        if 4 * r.hops[0].tbu + r.hops[0].entry != mesh.port_tbu_ports[r.src]:
            problems.append(f"{name} does not start at its source port")
        if 4 * r.hops[-1].tbu + r.hops[-1].exit != mesh.port_tbu_ports[r.dst]:
            problems.append(f"{name} does not end at its destination port")
        for i, h in enumerate(r.hops):
            if (h.entry < 2) == (h.exit < 2):
                problems.append(f"{name} U-turns in {mesh.tbu_names[h.tbu]}")
                continue
            nxt = r.hops[i + 1] if i + 1 < len(r.hops) else None
            if nxt is not None and peer[4 * h.tbu + h.exit] != 4 * nxt.tbu + nxt.entry:
                problems.append(f"{name} jumps from {mesh.tbu_names[h.tbu]} without a link")
            for g in (4 * h.tbu + h.entry, 4 * h.tbu + h.exit):
                if port_owner.setdefault(g, k) != k or (port_owner[g] == k and _used_twice(r, g)):
                    problems.append(f"{name} reuses TBU port {mesh.tbu_port_name(g)}")
            prev = state_of.setdefault(h.tbu, (h.state, k))
            if prev[0] != h.state:
                problems.append(f"{name} asks {mesh.tbu_names[h.tbu]} for {h.state}, route {prev[1]} "
                                f"for {prev[0]}")
    return sorted(set(problems))


def _used_twice(route: Route, g: int) -> bool:
    ports = [4 * h.tbu + p for h in route.hops for p in (h.entry, h.exit)]
    return ports.count(g) > 1
