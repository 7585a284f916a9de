"""Exact routing: a multi-commodity integer flow with TBU-state binaries (scipy ``milp``/HiGHS).

Variables: ``f[k, a]`` in {0, 1} for route k on enabled arc a; ``s[t]`` in {0, 1} for the
state of TBU t (1 = cross); and, for the worst-loss objective, ``z`` (dB).

Constraints:

1. Flow conservation per route and node: one unit leaves route k's source node and
   arrives at its sink node (``out - in = +1 / -1 / 0``).
2. TBU-port capacity: over all routes, the TBU arcs entering or leaving through a TBU
   port carry at most one unit, so routes share a TBU only on its two distinct paths
   (and no route reuses a port of its own).
3. State consistency: ``sum_k f[k, a] <= s[t]`` for every cross arc of TBU t and
   ``sum_k f[k, a] <= 1 - s[t]`` for every bar arc (each arc carries at most one route).

Objective: total cost ``sum c_a f[k, a]`` (dB, loss plus penalties), or the worst route
``z >= sum_a c_a f[k, a]`` plus 1e-3 x the total so no route takes a pointless detour.

All arc costs are positive (every TBU has insertion loss), so optimal flows hold no
detached cycles; any zero-cost cycle is dropped when the paths are read back.
Infeasibility reported by HiGHS is a proof that no conflict-free set exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from photonics.configuration import Hop, Route
from photonics.errors import RoutingError
from photonics.routing.graph import CROSS, RoutingGraph


@dataclass(frozen=True)
class ExactResult:
    """Routes from the integer program; ``optimal`` is False when a time limit cut it short."""

    routes: list[Route]
    optimal: bool
    objective_db: float
    status: str


def solve_exact(
    graph: RoutingGraph,
    pairs: Sequence[tuple[int, int]],
    objective: str = "total",
    time_limit_s: float | None = 120.0,
) -> ExactResult:
    """Conflict-free routes for ``pairs`` minimising total (or worst) cost, or RoutingError.

    Raises :class:`RoutingError` when HiGHS proves no conflict-free set exists, or when the
    time limit passes before any solution is found.
    """
    if objective not in ("total", "worst"):
        raise RoutingError(f"objective must be 'total' or 'worst', not {objective!r}")
    mesh = graph.mesh
    arcs = graph.enabled
    na, nk, nn = len(arcs), len(pairs), graph.n_nodes
    tbu_arc = graph.tbu[arcs] >= 0
    cost = graph.cost[arcs]
    # Node-arc incidence (out - in) of one commodity.
    cols = np.arange(na)
    inc = sp.csr_matrix(
        (np.r_[np.ones(na), -np.ones(na)], (np.r_[graph.tail[arcs], graph.head[arcs]], np.r_[cols, cols])),
        shape=(nn, na))
    # Port usage of one commodity: TBU arcs count on their entry and exit TBU ports.
    ti = np.flatnonzero(tbu_arc)
    t_of = graph.tbu[arcs[ti]]
    pin, pout = 4 * t_of + graph.entry[arcs[ti]], 4 * t_of + graph.exit[arcs[ti]]
    port_rows = sp.csr_matrix((np.ones(2 * len(ti)), (np.r_[pin, pout], np.r_[ti, ti])),
                              shape=(4 * mesh.n_tbus, na))
    # State rows: one per TBU arc: sum_k f[k,a] -/+ s[t] <= 0 / 1.
    sel = sp.csr_matrix((np.ones(len(ti)), (np.arange(len(ti)), ti)), shape=(len(ti), na))
    is_cross = graph.state[arcs[ti]] == CROSS
    s_coef = sp.csr_matrix((np.where(is_cross, -1.0, 1.0), (np.arange(len(ti)), t_of)),
                           shape=(len(ti), mesh.n_tbus))
    worst = objective == "worst"
    nz = 1 if worst else 0

    blocks_eq = sp.block_diag([inc] * nk, format="csr")
    zeros_s = sp.csr_matrix((nn * nk, mesh.n_tbus + nz))
    a_eq = sp.hstack([blocks_eq, zeros_s])
    b_eq = np.zeros(nn * nk)
    for k, (src, dst) in enumerate(pairs):
        b_eq[k * nn + graph.source(src)] = 1.0
        b_eq[k * nn + graph.sink(dst)] = -1.0
    a_port = sp.hstack([sp.hstack([port_rows] * nk), sp.csr_matrix((4 * mesh.n_tbus, mesh.n_tbus + nz))])
    a_state = sp.hstack([sp.hstack([sel] * nk), s_coef, sp.csr_matrix((len(ti), nz))])
    constraints = [
        LinearConstraint(a_eq, b_eq, b_eq),
        LinearConstraint(a_port, -np.inf, 1.0),
        LinearConstraint(a_state, -np.inf, np.where(is_cross, 0.0, 1.0)),
    ]
    c = np.r_[np.tile(cost, nk), np.zeros(mesh.n_tbus)]
    if worst:
        c = np.r_[1e-3 * c, 1.0]
        a_worst = sp.hstack([sp.block_diag([cost[None, :]] * nk), sp.csr_matrix((nk, mesh.n_tbus)),
                             -np.ones((nk, 1))])
        constraints.append(LinearConstraint(a_worst, -np.inf, 0.0))
    nvar = len(c)
    integrality = np.ones(nvar)
    upper = np.ones(nvar)
    if worst:
        integrality[-1] = 0
        upper[-1] = np.inf
    options = {"disp": False}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    res = milp(c, constraints=constraints, integrality=integrality, bounds=Bounds(0, upper),
               options=options)
    names = ", ".join(f"{mesh.port_names[s]}->{mesh.port_names[d]}" for s, d in pairs)
    if res.status == 2:
        raise RoutingError(f"no conflict-free set of routes exists for {names} "
                           "(proved by the integer program)")
    if res.x is None:
        raise RoutingError(f"the integer program found no routes for {names} within "
                           f"{time_limit_s} s ({res.message}); raise the time limit")
    flows = res.x[:na * nk].reshape(nk, na) > 0.5
    routes = [_extract(graph, arcs[flows[k]], src, dst) for k, (src, dst) in enumerate(pairs)]
    return ExactResult(routes=routes, optimal=res.status == 0, objective_db=float(res.fun),
                       status=str(res.message))


def _extract(graph: RoutingGraph, used: np.ndarray, src: int, dst: int) -> Route:
    """Follow the unit flow from the source node to the sink node (cycles are skipped)."""
    nxt = {int(graph.tail[a]): int(graph.head[a]) for a in used}
    node, sink = graph.source(src), graph.sink(dst)
    nodes = [node]
    while node != sink:
        node = nxt[node]
        nodes.append(node)
    hops = tuple(Hop(a // 8, (a // 2) % 4, (b // 2) % 4) for a, b in zip(nodes[::2], nodes[1::2],
                                                                         strict=True))
    return Route(int(src), int(dst), hops)
