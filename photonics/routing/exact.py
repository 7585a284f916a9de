"""Exact routing: a multi-commodity integer flow with TBU-state binaries (scipy ``milp``/HiGHS).

Variables: ``f[k, a]`` in {0, 1} for route k on enabled arc a; ``s[t]`` in {0, 1} for the
state of TBU t (1 = cross); and, for the worst-loss objective, ``z`` (dB).

Constraints:

1. Flow conservation per route and node: one unit leaves route k's source node and
   arrives at its sink node (``out - in = +1 / -1 / 0``).
2. TBU-port capacity: over all routes, the TBU arcs entering or leaving through a TBU
   port carry at most one unit, so routes share a TBU only on its two distinct paths
   (and no route reuses a port of its own).
3. State consistency per light path of a TBU (a0-b0 and a1-b1 in bar, a0-b1 and a1-b0
   in cross), both directions together: ``sum_k (f[k, a] + f[k, a']) <= s[t]`` for a
   cross path, ``<= 1 - s[t]`` for a bar path. One row per arc (``f[k, a] <= s[t]``) is
   also exact but its LP relaxation lets a half-set TBU carry half a route each way;
   the path rows close that gap and cut the 9 x 9, 16-connection proofs from 6-46 s
   to 1.5-3 s (docs/routing.md).

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
from scipy.sparse.csgraph import dijkstra

from photonics.configuration import Hop, Route
from photonics.errors import RoutingError
from photonics.routing.graph import RoutingGraph, no_path_reason

# Pruning bounds tried before the full program, dB above the shortest paths: most optima
# on these meshes lie within 1-2 dB of them, and a pruned program is far smaller.
_TRIAL_SLACKS_DB = (1.0, 4.0)



class RoutingTimeoutError(RoutingError):
    """The integer program ran out of time before it found any routes: an answer that depends
    on the time limit and on how fast the machine is, not a proof that none exist.
    """

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
    incumbent_db: float | None = None,
) -> ExactResult:
    """Conflict-free routes for ``pairs`` minimising total (or worst) cost, or RoutingError.

    ``incumbent_db`` is the objective of a known conflict-free solution (e.g. from the fast
    router). Each route's arcs are pruned to those on a path no costlier than any better
    solution allows (shortest-path bounds from both ends), which keeps the program small
    without losing optimality: programs pruned 1 dB, then 4 dB above the shortest paths
    (or at the incumbent, if tighter) come first, and only when neither holds a solution
    does the full program run (it is what proves infeasibility).

    Raises :class:`RoutingError` when HiGHS proves no conflict-free set exists, or when the
    time limit passes before any solution is found.
    """
    if objective not in ("total", "worst"):
        raise RoutingError(f"objective must be 'total' or 'worst', not {objective!r}")
    d_src, d_dst = _distances(graph, pairs)
    shortest = np.array([d_src[k, graph.sink(t)] for k, (_, t) in enumerate(pairs)])
    if not np.isfinite(shortest).all():
        k = int(np.argmin(np.isfinite(shortest)))
        raise RoutingError(no_path_reason(graph, pairs[k][0], pairs[k][1], "check the failed TBUs"))

    def budget_per_route(bound: float) -> np.ndarray:
        # A solution better than `bound` has route k cheaper than this.
        return shortest + (bound - shortest.sum()) if objective == "total" else np.full(len(pairs), bound)

    # Pruned programs first, from a tight bound up: if a pruned optimum lies within its
    # bound, no better solution exists outside it. A solution beyond the bound is an
    # incumbent: one more program pruned at its objective contains it, so it certifies.
    base = shortest.sum() if objective == "total" else shortest.max()
    for slack in _TRIAL_SLACKS_DB:
        bound = base + slack if incumbent_db is None else min(base + slack, incumbent_db + 1e-6)
        keep = _keep(graph, d_src, d_dst, budget_per_route(bound))
        res = _solve(graph, pairs, objective, time_limit_s, keep)
        if res is None:  # nothing within this bound: widen it (then the full program)
            continue
        if res.optimal and res.objective_db <= bound + 1e-9:
            return res
        again = _solve(graph, pairs, objective, time_limit_s,
                       _keep(graph, d_src, d_dst, budget_per_route(res.objective_db + 1e-6)))
        return again if again is not None else res
    res = _solve(graph, pairs, objective, time_limit_s, None)
    names = ", ".join(f"{graph.mesh.port_names[s]}->{graph.mesh.port_names[d]}" for s, d in pairs)
    if res is None:
        raise RoutingError(f"no conflict-free set of routes exists for {names} "
                           "(proved by the integer program)")
    return res


def _distances(graph: RoutingGraph, pairs: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Shortest costs from every route's source node and to every route's sink node."""
    d_src = dijkstra(graph.csr, directed=True, indices=[graph.source(s) for s, _ in pairs])
    d_dst = dijkstra(graph.csr.T.tocsr(), directed=True, indices=[graph.sink(t) for _, t in pairs])
    return np.atleast_2d(d_src), np.atleast_2d(d_dst)


def _keep(graph: RoutingGraph, d_src: np.ndarray, d_dst: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """(n_routes, n_enabled) mask of arcs on some path of route k costing at most limit[k]."""
    arcs = graph.enabled
    through = d_src[:, graph.tail[arcs]] + graph.cost[arcs][None, :] + d_dst[:, graph.head[arcs]]
    return through <= limit[:, None] + 1e-9


def _solve(graph: RoutingGraph, pairs: Sequence[tuple[int, int]], objective: str,
           time_limit_s: float | None, keep: np.ndarray | None) -> ExactResult | None:
    """One integer program over the kept arcs; None when HiGHS proves it infeasible."""
    # scipy.optimize (~0.5 s of CPU to import) only when an integer program is solved: every
    # `lumion route`, `failover` or `schedule` imports this module, and most never call it
    from scipy.optimize import Bounds, LinearConstraint, milp

    mesh = graph.mesh
    arcs = graph.enabled
    nk, nn, nt = len(pairs), graph.n_nodes, mesh.n_tbus
    if keep is None:
        keep = np.ones((nk, len(arcs)), dtype=bool)
    col_k, col_j = np.nonzero(keep)  # one column per (route, kept arc)
    nf = len(col_k)
    a = arcs[col_j]
    tail, head, cost = graph.tail[a], graph.head[a], graph.cost[a]
    cols = np.arange(nf)
    worst = objective == "worst"
    nvar = nf + nt + (1 if worst else 0)
    # 1. Flow conservation: out - in = +1 at the source, -1 at the sink.
    a_eq = sp.csr_matrix((np.r_[np.ones(nf), -np.ones(nf)],
                          (np.r_[col_k * nn + tail, col_k * nn + head], np.r_[cols, cols])),
                         shape=(nk * nn, nvar))
    b_eq = np.zeros(nk * nn)
    for k, (src, dst) in enumerate(pairs):
        b_eq[k * nn + graph.source(src)] = 1.0
        b_eq[k * nn + graph.sink(dst)] = -1.0
    # 2. TBU-port capacity over all routes.
    tb = np.flatnonzero(graph.tbu[a] >= 0)
    t_of = graph.tbu[a[tb]]
    pin, pout = 4 * t_of + graph.entry[a[tb]], 4 * t_of + graph.exit[a[tb]]
    a_port = sp.csr_matrix((np.ones(2 * len(tb)), (np.r_[pin, pout], np.r_[tb, tb])),
                           shape=(4 * nt, nvar))
    # 3. State consistency, one row per TBU light path (its two directions together):
    #    sum_k f[k, a] over the path's arcs - s[t] <= 0 (cross), + s[t] <= 1 (bar). Tighter
    #    than a row per arc: a half-set state cannot carry half a route each way.
    row = _path_row(graph, a[tb])
    path_rows = np.arange(4 * nt)
    path_cross = (path_rows % 4) >= 2  # row 4t + 2*state + a-side port
    a_state = sp.csr_matrix(
        (np.r_[np.ones(len(tb)), np.where(path_cross, -1.0, 1.0)],
         (np.r_[row, path_rows], np.r_[tb, nf + path_rows // 4])),
        shape=(4 * nt, nvar))
    constraints = [
        LinearConstraint(a_eq, b_eq, b_eq),
        LinearConstraint(a_port, -np.inf, 1.0),
        LinearConstraint(a_state, -np.inf, np.where(path_cross, 0.0, 1.0)),
    ]
    c = np.r_[cost, np.zeros(nt)]
    integrality = np.ones(nvar)
    upper = np.ones(nvar)
    if worst:
        c = np.r_[1e-3 * c, 1.0]
        a_worst = sp.csr_matrix((np.r_[cost, -np.ones(nk)], (np.r_[col_k, np.arange(nk)],
                                                              np.r_[cols, np.full(nk, nvar - 1)])),
                                shape=(nk, nvar))
        constraints.append(LinearConstraint(a_worst, -np.inf, 0.0))
        integrality[-1] = 0
        upper[-1] = np.inf
    options: dict = {"disp": False}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    res = milp(c, constraints=constraints, integrality=integrality, bounds=Bounds(0, upper),
               options=options)
    if res.status == 2:
        return None
    if res.x is None:
        names = ", ".join(f"{mesh.port_names[s]}->{mesh.port_names[d]}" for s, d in pairs)
        raise RoutingTimeoutError(f"the integer program found no routes for {names} within "
                           f"{time_limit_s} s ({res.message}); raise the time limit")
    used = res.x[:nf] > 0.5
    routes = [_extract(graph, a[used & (col_k == k)], src, dst) for k, (src, dst) in enumerate(pairs)]
    obj = float(res.fun) if not worst else float(res.x[-1])
    return ExactResult(routes=routes, optimal=res.status == 0, objective_db=obj, status=str(res.message))


def _path_row(graph: RoutingGraph, arcs: np.ndarray) -> np.ndarray:
    """Row ``4 t + 2 state + p`` of each TBU arc's light path; ``p`` is its end-a port."""
    e, x = graph.entry[arcs], graph.exit[arcs]
    return 4 * graph.tbu[arcs] + 2 * graph.state[arcs] + np.where(e < 2, e, x)


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
