"""Many routes at once: sequential shortest paths with negotiated rip-up-and-reroute.

PathFinder-style negotiated congestion (McMurchie & Ebeling, FPGA 1995) over two kinds
of resource: TBU ports (capacity one route each) and TBU states (one state per TBU).
Every route is first laid with plain shortest paths; while any resource is over-used,
the routes touching an over-used resource are ripped up and rerouted with arc costs

    (base + history) * (1 + present_factor * occupancy_by_other_routes)

where ``history`` grows on resources that stay contested and ``present_factor`` grows
every pass, so routes that have cheap alternatives move away first. This is a heuristic:
when it gives up, the exact program (:mod:`photonics.routing.exact`) decides.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from photonics.configuration import Route
from photonics.errors import RoutingError
from photonics.routing.graph import CROSS, RoutingGraph, no_path_reason
from photonics.routing.single import conflicts, shortest_path


def _usage(route: Route) -> tuple[list[int], list[int], list[int]]:
    """The TBU ports ``route`` takes, and its TBUs with the state each is asked for (1 = cross)."""
    ports = [4 * h.tbu + p for h in route.hops for p in (h.entry, h.exit)]
    tbus = [h.tbu for h in route.hops]
    sides = [CROSS if h.state == "cross" else 0 for h in route.hops]
    return ports, tbus, sides


def negotiate(
    graph: RoutingGraph,
    pairs: Sequence[tuple[int, int]],
    max_passes: int = 40,
    present0: float = 0.5,
    present_growth: float = 1.6,
    history_step: float = 0.5,
) -> tuple[list[Route] | None, int]:
    """Conflict-free routes for ``pairs`` of mesh ports, or None if negotiation gives up.

    Returns ``(routes, passes)``. Raises :class:`RoutingError` when a pair has no path even
    on an empty mesh (dead TBUs cut it off): that is a proof, not a give-up.
    """
    mesh = graph.mesh
    n = mesh.n_tbus
    k0 = graph.n_tbu_arcs
    t, st = graph.tbu[:k0], graph.state[:k0]
    pin = 4 * t + graph.entry[:k0]
    pout = 4 * t + graph.exit[:k0]
    base = graph.cost.copy()
    port_use = np.zeros(4 * n)
    state_use = np.zeros((n, 2))
    port_hist = np.zeros(4 * n)
    state_hist = np.zeros((n, 2))
    routes: list[Route | None] = [None] * len(pairs)
    present = present0
    # One CSR matrix for every search of the call, each route's costs written into its data
    # (the graph's sparsity never changes): :meth:`RoutingGraph.with_costs` per route built and
    # validated a new matrix each time, a tenth of a rack simulation's CPU.
    costs = graph.with_costs(base)
    arcs = graph.csr_arc

    # each route's usage, worked out once when it is laid (it was recomputed for every rip-up,
    # every re-lay and every pass's search for contested routes: a fifth of a rack simulation's
    # CPU); the counts are small integers in floats, so adding them in any order is exact
    usage: list[tuple[list[int], list[int], list[int]]] = [([], [], [])] * len(pairs)

    def apply(k: int, sign: float) -> None:
        ports, tbus, sides = usage[k]
        np.add.at(port_use, ports, sign)
        np.add.at(state_use, (tbus, sides), sign)

    for passes in range(1, max_passes + 1):
        if passes == 1:
            todo = range(len(pairs))
        else:
            hot_ports = set(np.flatnonzero(port_use > 1).tolist())
            hot_tbus = set(np.flatnonzero((state_use > 0).all(axis=1)).tolist())
            todo = [k for k, r in enumerate(routes) if r is not None and (
                hot_ports.intersection(usage[k][0]) or hot_tbus.intersection(usage[k][1]))]
        for k in todo:
            src, dst = pairs[k]
            if routes[k] is not None:
                apply(k, -1.0)
            if passes == 1 and k == 0:
                cost = base
            else:
                occ = port_use[pin] + port_use[pout] + state_use[t, 1 - st]
                hist = port_hist[pin] + port_hist[pout] + state_hist[t, 1 - st]
                cost = base.copy()
                cost[:k0] = (base[:k0] + hist) * (1.0 + present * occ)
            costs.data = cost[arcs]
            r = shortest_path(graph, src, dst, costs)
            if r is None:
                raise RoutingError(no_path_reason(graph, src, dst, "check --failed"))
            routes[k] = r
            usage[k] = _usage(r)
            apply(k, +1.0)
        over_ports = np.maximum(port_use - 1, 0)
        over_states = (state_use > 0).all(axis=1)
        done = [r for r in routes if r is not None]
        if not over_ports.any() and not over_states.any() and not conflicts(mesh, done):
            return done, passes
        port_hist += history_step * over_ports
        state_hist += history_step * over_states[:, None] * (state_use > 0)
        present *= present_growth
    return None, max_passes
