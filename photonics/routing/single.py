"""Shortest single routes over the routing graph, and the rules a set of routes must obey.

Two engines, one optimal cost:

* **On the graph's own costs** (:func:`shortest_path` without ``csr``, :func:`search_path`):
  A* in :mod:`photonics.routing.search`, over plain lists built once per mesh, with a lower
  bound from the mesh's hop counts. On nominal or mildly varying losses it touches little
  more than the route itself, so a single route costs microseconds; answers are cached on
  the graph (``graph.routes``).
* **On new costs** (``csr``, what the negotiated router sends on every pass):
  ``scipy.sparse.csgraph.dijkstra`` in C. Congestion costs make the hop bound weak, and a
  search over most of the graph is faster in C than in Python; it also keeps the router's
  choice among equal-cost routes as it was.

Both are exact; among routes of equal cost they may pick different ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from photonics.configuration import Hop, Route
from photonics.routing.graph import RoutingGraph, arc_index
from photonics.routing.search import SearchTopology, search, step_costs, topology
from photonics.topology import Mesh


def shortest_path(
    graph: RoutingGraph, src: int, dst: int, csr: sp.csr_matrix | None = None
) -> Route | None:
    """Cheapest route from mesh port ``src`` to mesh port ``dst``, or None if none exists.

    Without ``csr`` the graph is immutable, and so are its answers: each (source,
    destination) is searched once (:func:`search_path`) and then answered from the graph's
    route cache, ``graph.routes[src][dst]`` (plain dicts). ``csr`` overrides the graph's costs (same
    sparsity, e.g. from :meth:`RoutingGraph.with_costs`) and is searched afresh by csgraph's
    Dijkstra, uncached. The route is not checked for revisiting a TBU in another state;
    :func:`conflicts` does that.

    Example:
        >>> from photonics.routing.graph import build_graph
        >>> from photonics.topology import smartlight
        >>> r = shortest_path(build_graph(smartlight()), 5, 28)
        >>> (r.src, r.dst, len(r.hops))
        (5, 28, 11)
    """
    if csr is None:
        try:
            return graph.routes[src][dst]
        except KeyError:
            route = search_path(graph, src, dst)
            graph.routes.setdefault(src, {})[dst] = route
            return route
    s, t = graph.source(src), graph.sink(dst)
    dist, pred = dijkstra(csr, directed=True, indices=s, return_predecessors=True)
    return _walk(pred, s, t, src, dst) if np.isfinite(dist[t]) else None


def search_path(graph: RoutingGraph, src: int, dst: int) -> Route | None:
    """Cheapest route on the graph's own costs, searched afresh (the route cache is neither
    read nor written): what :func:`shortest_path` computes on a cache miss.

    Example:
        >>> from photonics.routing.graph import build_graph
        >>> from photonics.topology import smartlight
        >>> g = build_graph(smartlight(), failed={"tbu:1.2.1": "dead"})
        >>> r = search_path(g, 5, 28)
        >>> len(r.hops), g.mesh.tbu_index("tbu:1.2.1") in r.tbus, g.routes
        (11, False, {})
    """
    top, cost, step = _search_costs(graph)
    return search(top, cost, step, src, dst)


def shortest_paths(
    graph: RoutingGraph, pairs: Sequence[tuple[int, int]], csr: sp.csr_matrix | None = None
) -> list[Route | None]:
    """Cheapest route of each (source, destination) port pair, each found independently.

    Without ``csr``, as :func:`shortest_path` pair by pair (cached). With ``csr`` (new
    costs), one csgraph Dijkstra call searches from every distinct source of the batch
    (its loop over sources runs in C) and nothing is cached.
    """
    if csr is None:
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
    """Fill the graph's route cache with the routes from ``ports`` to every other mesh port,
    so later :func:`shortest_path` calls from those ports are dictionary hits.
    """
    for src in sorted({int(p) for p in ports}):
        for dst in range(graph.mesh.n_ports):
            if dst != src:
                shortest_path(graph, src, dst)


def _search_costs(graph: RoutingGraph) -> tuple[SearchTopology, list[float], float]:
    """The mesh's search topology and the step costs of the graph's own costs (derived once
    per graph, then kept on it).
    """
    state = graph.search_state
    if state is None:
        top = topology(graph.mesh)
        cost, step = step_costs(np.append(graph.cost, 0.0), top.tbu_arc, top.link_arc, top.n_inner)
        state = (top, cost, step)
        object.__setattr__(graph, "search_state", state)
    return state


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
        twice = _ports_used_twice(r)
        for i, h in enumerate(r.hops):
            if (h.entry < 2) == (h.exit < 2):
                problems.append(f"{name} U-turns in {mesh.tbu_names[h.tbu]}")
                continue
            nxt = r.hops[i + 1] if i + 1 < len(r.hops) else None
            if nxt is not None and peer[4 * h.tbu + h.exit] != 4 * nxt.tbu + nxt.entry:
                problems.append(f"{name} jumps from {mesh.tbu_names[h.tbu]} without a link")
            for g in (4 * h.tbu + h.entry, 4 * h.tbu + h.exit):
                if port_owner.setdefault(g, k) != k or (port_owner[g] == k and g in twice):
                    problems.append(f"{name} reuses TBU port {mesh.tbu_port_name(g)}")
            prev = state_of.setdefault(h.tbu, (h.state, k))
            if prev[0] != h.state:
                problems.append(f"{name} asks {mesh.tbu_names[h.tbu]} for {h.state}, route {prev[1]} "
                                f"for {prev[0]}")
    return sorted(set(problems))


def _ports_used_twice(route: Route) -> set[int]:
    """The TBU ports ``route`` passes more than once (counted once per route, not per port:
    the negotiated router asks for the conflicts of every pass's routes).
    """
    seen: set[int] = set()
    twice: set[int] = set()
    for h in route.hops:
        for g in (4 * h.tbu + h.entry, 4 * h.tbu + h.exit):
            (twice if g in seen else seen).add(g)
    return twice
