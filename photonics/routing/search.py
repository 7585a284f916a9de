"""Point-to-point search over the routing graph: A* with a topological lower bound, in Python.

Why not ``scipy.sparse.csgraph``: its Dijkstra validates and converts the matrix on every
call (~21 us on smartlight), more than a whole search here, and it cannot stop at the
target. This search runs over plain Python lists built once per mesh.

**Search graph.** Nodes are TBU *exit* ports (global index ``4*tbu + local``), plus one
virtual start node per mesh port (``4*n_tbus + port``). A step ``u -> v`` is "cross the
link at exit ``u``, then the TBU behind it, leaving at ``v``" and costs the link arc plus
the TBU arc of the routing graph; a start step costs the first TBU arc only. A route from
mesh port ``src`` to ``dst`` is a walk from ``src``'s start node to ``dst``'s TBU port
(as an exit). Every step is one TBU, so a route's hop count is its step count.

**Lower bound.** ``hops(v)``: the fewest steps from ``v`` to the target in the mesh's
*topology* (breadth-first, every arc present), computed once per mesh and target port.
Failed TBUs and costs only remove arcs or raise costs, so ``hops(v) * step`` (``step``:
the cheapest step under the costs searched) never overestimates: the heuristic is
admissible and consistent (ALT / A*, Hart, Nilsson & Raphael 1968).

**Exactness certificate.** Before any heap work the search walks down ``hops`` (each step
one hop nearer) along the cheapest arcs. If that walk's cost equals the lower bound of
the start, no route can be cheaper and it is returned: on a uniform-loss mesh without
failures nearby this is the common case and costs one step per TBU. Otherwise A*
decides (ties broken towards the target, then by node index: deterministic).
"""

from __future__ import annotations

import heapq
import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from photonics.configuration import Hop, Route
from photonics.topology import Mesh

# A route certified by its lower bound may exceed the bound by float rounding only: sums of
# up to ~1e4 arc costs round by far less than 1e-12 relative, and real cost differences
# between routes (dB of loss, penalties) are many orders of magnitude larger.
CERTIFICATE_RTOL = 1e-12

# Local exit ports on the far end of a TBU from an entry port (no U-turn inside a TBU).
_FAR_END = ((2, 3), (2, 3), (0, 1), (0, 1))

_TOPOLOGIES: weakref.WeakKeyDictionary[Mesh, SearchTopology] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class SearchTopology:
    """The search graph of one mesh, independent of costs and failures (built once per mesh).

    Attributes:
        succ: per node, ``((step, next node), ...)``.
        tail: per step, the node it leaves.
        hop: per step, the :class:`Hop` it makes (shared, immutable).
        tbu_arc: per step, the routing graph's TBU arc.
        link_arc: per step, the routing graph's link arc, or ``n_arcs`` (no link: start steps).
        start: per mesh port, its virtual start node.
        goal: per mesh port, its TBU port (reached as an exit).
        n_inner: number of non-start steps (they come first; start steps last).
        next_pad: (n_nodes, 2) the next node of each node's first and second step (or
            ``n_nodes``, a padding node, when it has fewer).
        down_options: per node, the four flat ``(step, next, ...)`` tuples of its steps that
            may go one hop nearer: none, the second, the first, both.
        reverse: (n_nodes, n_nodes) CSR of the reversed steps, for the hop counts.
    """

    succ: list[tuple[tuple[int, int], ...]]
    tail: list[int]
    hop: list[Hop]
    tbu_arc: np.ndarray
    link_arc: np.ndarray
    start: list[int]
    goal: list[int]
    n_inner: int
    reverse: object
    next_pad: np.ndarray
    down_options: list[tuple[tuple[int, ...], ...]]
    _bounds: dict[int, tuple[list[float], list[tuple[int, ...]]]] = field(
        default_factory=dict, repr=False)

    def bounds(self, port: int) -> tuple[list[float], list[tuple[int, ...]]]:
        """Hop counts to mesh port ``port`` and, per node, the steps that go one hop nearer as
        a flat ``(step, next, step, next)`` tuple (both from the topology alone; cached per
        port).

        ``hops[v]``: fewest steps from node ``v`` to ``port``'s TBU port. Nodes that cannot
        reach it at all get ``n_nodes + 1``: any finite bound is admissible for them (their
        true remaining cost is infinite) and keeps ``hops * step`` finite.
        """
        try:
            return self._bounds[port]
        except KeyError:
            pass
        from scipy.sparse.csgraph import dijkstra

        d = dijkstra(self.reverse, directed=True, indices=self.goal[port], unweighted=True)
        d[np.isinf(d)] = len(self.succ) + 1
        d_ext = np.append(d, np.nan)  # the padding node ("no step") is never one hop nearer
        nearer = d_ext[self.next_pad] == d[:, None] - 1.0
        codes = (2 * nearer[:, 0] + nearer[:, 1]).tolist()
        down = [opts[c] for opts, c in zip(self.down_options, codes, strict=True)]
        self._bounds[port] = (d.tolist(), down)
        return self._bounds[port]


def topology(mesh: Mesh) -> SearchTopology:
    """The (cached) search graph of ``mesh``."""
    top = _TOPOLOGIES.get(mesh)
    if top is None:
        top = _build_topology(mesh)
        _TOPOLOGIES[mesh] = top
    return top


def _build_topology(mesh: Mesh) -> SearchTopology:
    """Steps of every exit port (through its link) and of every mesh port's start node."""
    import scipy.sparse as sp

    n, n_links = mesh.n_tbus, len(mesh.links)
    n_arcs = 8 * n + 2 * n_links
    # Link arc ids as build_graph lays them out: out(p) -> in(q) first, then out(q) -> in(p).
    link_out = np.full(4 * n, -1, dtype=np.int64)
    link_out[mesh.links[:, 0]] = 8 * n + np.arange(n_links)
    link_out[mesh.links[:, 1]] = 8 * n + n_links + np.arange(n_links)
    peer = mesh.peer()
    linked = np.flatnonzero(link_out >= 0)
    tails = np.concatenate([linked, 4 * n + np.arange(mesh.n_ports)])
    entries = np.concatenate([peer[linked], mesh.port_tbu_ports]).astype(np.int64)
    links = np.concatenate([link_out[linked], np.full(mesh.n_ports, n_arcs)])
    hop_of_arc = [Hop(a // 8, (a // 2) % 4, _FAR_END[(a // 2) % 4][a % 2]) for a in range(8 * n)]
    tail: list[int] = []
    heads: list[int] = []
    tbu_arc: list[int] = []
    link_arc: list[int] = []
    for u, p, lk in zip(tails.tolist(), entries.tolist(), links.tolist(), strict=True):
        t, e = divmod(p, 4)
        for k, x in enumerate(_FAR_END[e]):
            tail.append(u)
            heads.append(4 * t + x)
            tbu_arc.append(8 * t + 2 * e + k)
            link_arc.append(lk)
    n_nodes = 4 * n + mesh.n_ports
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n_nodes)]
    for k, (u, v) in enumerate(zip(tail, heads, strict=True)):
        succ[u].append((k, v))
    reverse = sp.csr_matrix((np.ones(len(tail)), (heads, tail)), shape=(n_nodes, n_nodes))
    link_arr = np.asarray(link_arc, dtype=np.int64)
    next_pad = np.full((n_nodes, 2), n_nodes, dtype=np.int64)
    options = []
    for u, steps in enumerate(succ):
        flat = [(k, v) for k, v in steps] + [()] * (2 - len(steps))
        next_pad[u, : len(steps)] = [v for _, v in steps]
        first, second = (tuple(x) for x in flat)
        options.append(((), second, first, first + second))
    return SearchTopology(
        succ=[tuple(s) for s in succ], tail=tail, hop=[hop_of_arc[a] for a in tbu_arc],
        tbu_arc=np.asarray(tbu_arc, dtype=np.int64), link_arc=link_arr,
        start=(4 * n + np.arange(mesh.n_ports)).tolist(), goal=mesh.port_tbu_ports.tolist(),
        n_inner=2 * len(linked), reverse=reverse, next_pad=next_pad, down_options=options,
    )


def step_costs(arc_cost: np.ndarray, tbu_idx: np.ndarray, link_idx: np.ndarray,
               n_inner: int) -> tuple[list[float], float]:
    """Cost of every step (dB; ``inf`` if an arc is disabled) and the cheapest non-start step
    (the ``step`` of the lower bound; 0 if none is enabled).

    ``arc_cost[tbu_idx[k]] + arc_cost[link_idx[k]]`` is step ``k``'s cost; the first
    ``n_inner`` steps are the non-start ones (start steps come last).
    """
    cost = arc_cost[tbu_idx] + arc_cost[link_idx]
    step = float(cost[:n_inner].min()) if n_inner else 0.0
    return cost.tolist(), (step if 0.0 < step < math.inf else 0.0)


def search(top: SearchTopology, cost: list[float], step: float, src: int, dst: int) -> Route | None:
    """Cheapest route from mesh port ``src`` to ``dst`` under step costs ``cost``, or None.

    ``step`` must not exceed any non-start step's cost (see :func:`step_costs`). The lower
    bound of the start is ``min over its steps (cost + hops(next) * step)``: every route
    leaves it by one of them and needs at least ``hops(next)`` more steps of at least
    ``step`` each. A walk down the hop counts that meets it is optimal.
    """
    s, goal = top.start[src], top.goal[dst]
    hops, down = top.bounds(dst)
    (k1, v1), (k2, v2) = top.succ[s]  # a start node has two steps: the TBU's two far exits
    bound = min(cost[k1] + hops[v1] * step, cost[k2] + hops[v2] * step)
    if bound == math.inf:
        return None
    hop = top.hop
    found = _descent(down, cost, step, hops, hop, s, goal, bound)
    if found is None:
        path = _astar(top.succ, cost, step, hops, s, goal, top.tail)
        if path is None:
            return None
        found = [hop[k] for k in path]
    return Route(src, dst, tuple(found))


def _descent(down: list, cost: list[float], step: float, hops: list[float], hop: list[Hop], s: int,
             goal: int, bound: float) -> list[Hop] | None:
    """Hops of the walk from ``s`` one hop nearer ``goal`` each time along the cheaper step, or
    None as soon as its cost provably exceeds ``bound`` (beyond float rounding).

    After a step to ``v`` the walk's cost plus ``hops(v) * step`` is at most ``bound`` if
    and only if its excess stays within the slack; every later step adds ``cost - step``.
    """
    slack = abs(bound) * CERTIFICATE_RTOL
    path: list[Hop] = []
    u, first = s, True
    excess = 0.0
    while u != goal:
        d = down[u]
        if len(d) == 2:
            k, v = d
            c = cost[k]
        elif d:
            k, v, k2, v2 = d
            c, c2 = cost[k], cost[k2]
            if c2 < c:
                k, v, c = k2, v2, c2
        else:
            return None
        if first:
            excess, first = c + hops[v] * step - bound, False
        else:
            excess += c - step
        if excess > slack:
            return None
        path.append(hop[k])
        u = v
    return path


def _astar(succ: list, cost: list[float], step: float, hops: list[float], s: int, goal: int,
           tail: list[int]) -> list[int] | None:
    """A* from ``s`` to ``goal``: the steps of a cheapest walk, or None when there is none.

    Heap entries are ``(f, hops, node)``: among equal ``f`` the node nearer the target goes
    first (the search runs straight down a tie instead of across it). Nodes are reopened
    when a cheaper walk reaches them, so float rounding in the bound cannot cost optimality.
    """
    best = {s: 0.0}
    parent: dict[int, int] = {}
    heap = [(hops[s] * step, hops[s], s)]
    pop, push, inf = heapq.heappop, heapq.heappush, math.inf
    while heap:
        f, h, u = pop(heap)
        if u == goal:
            path = []
            while u != s:
                k = parent[u]
                path.append(k)
                u = tail[k]
            path.reverse()
            return path
        g = best[u]
        if g + h * step < f:  # stale entry: u was reached more cheaply since
            continue
        for k, v in succ[u]:
            nd = g + cost[k]
            if nd < best.get(v, inf):
                best[v] = nd
                parent[v] = k
                hv = hops[v]
                push(heap, (nd + hv * step, hv, v))
    return None
