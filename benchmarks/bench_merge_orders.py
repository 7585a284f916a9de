"""Complex multiply-adds of the merge plan against other elimination orders (issue 28).

The flop floor of `bench_circuit_vs_sax.py` is the plan's multiply-adds per (state,
wavelength) block (`photonics.circuit_merge.merge_macs`) times numpy matmul's best time per
multiply-add: a tree with fewer multiply-adds lowers the floor itself. For each mesh this
prints the plan's count, split by the merge's products, and what the same merge would cost on
other trees over the same TBUs:

* `window 3/10`, `window 1/5`, `window 1/10`: today's rule (the straight cut, along x or y,
  crossing the fewest links, the most even split on a tie) with the halves allowed to be
  more uneven than today's 2/5 .. 3/5;
* `lookahead`: each straight cut (window 1/5 .. 4/5) scored by its own merge plus the trees
  today's rule builds on its two halves, the cheapest taken, recursively;
* `greedy fewest ports`, `greedy cheapest merge`: bottom-up, join the two linked clusters
  whose joined cluster has the fewest ports (a min-fill order), or whose merge costs least.

A tree's cost is the kernel's count for each merge (`merge_cost`, the same formula as
`merge_macs`, checked against it on today's tree). Also printed: `k ne (ne + 1) / 2` summed
over today's merges, the products of a rank-k symmetric update of each merged matrix alone
(what no elimination of the same cuts can go below).

Run: python benchmarks/bench_merge_orders.py [--meshes smartlight,hex:6x6]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from photonics.circuit_merge import _bisect, merge_macs, merge_plan
from photonics.topology import Mesh, hexagonal, smartlight, square

Tree = "int | tuple[Tree, Tree]"


def make_mesh(name: str) -> Mesh:
    """``smartlight``, ``hex:RxC`` or ``square:RxC``."""
    if name == "smartlight":
        return smartlight()
    kind, size = name.split(":")
    rows, cols = (int(v) for v in size.split("x"))
    return {"hex": hexagonal, "square": square}[kind](rows, cols)


def merge_cost(k: int, ea: int, eb: int) -> int:
    """Multiply-adds of one merge with a cut of ``k`` links and ``ea``/``eb`` ports kept of its
    halves (:func:`photonics.circuit_merge.merge_macs`' terms).
    """
    ne = ea + eb
    gj = k * (k * (k + ne - 1) - k * (k - 1) // 2)
    return k * k * (k + ea) + gj + k * (ea * ne - ea * (ea - 1) // 2) + k * k * eb + k * (eb * (eb + 1) // 2)


class Graph:
    """TBUs and the links between them: ports of a cluster, links between two clusters."""

    def __init__(self, mesh: Mesh) -> None:
        self.n = mesh.n_tbus
        self.centers = mesh.tbu_centers()
        self.links = mesh.links // 4
        self.adj = np.zeros((self.n, self.n), dtype=np.int64)
        np.add.at(self.adj, (self.links[:, 0], self.links[:, 1]), 1)
        np.add.at(self.adj, (self.links[:, 1], self.links[:, 0]), 1)

    def ports(self, tbus) -> int:
        """Ports of a cluster: its TBUs' four each, less both ends of every link inside it."""
        s = sorted(tbus)
        return 4 * len(s) - int(self.adj[np.ix_(s, s)].sum())

    def cost(self, a, b) -> int:
        """Multiply-adds of merging clusters ``a`` and ``b``."""
        k = int(self.adj[np.ix_(sorted(a), sorted(b))].sum())
        return merge_cost(k, self.ports(a) - k, self.ports(b) - k)


def tree_cost(g: Graph, tree) -> tuple[set, int]:
    """TBUs and multiply-adds of ``tree`` (a TBU, a pair of trees, or ``_bisect``'s dict)."""
    if isinstance(tree, dict):
        tree = int(tree["tbus"][0]) if not tree["children"] else tree["children"]
    if isinstance(tree, (int, np.integer)):
        return {int(tree)}, 0
    (a, ca), (b, cb) = tree_cost(g, tree[0]), tree_cost(g, tree[1])
    return a | b, ca + cb + g.cost(a, b)


def today(g: Graph, tbus: np.ndarray) -> dict:
    """Today's tree on ``tbus`` (:func:`photonics.circuit_merge._bisect`)."""
    return _bisect(np.asarray(tbus), g.centers, g.links)


def straight_cuts(g: Graph, tbus: np.ndarray, low: float):
    """Every straight cut of ``tbus`` along x or y with each half at least ``low`` of them."""
    xy, n = g.centers[tbus], len(tbus)
    for axis in (0, 1):
        order = np.lexsort((xy[:, 1 - axis], xy[:, axis]))
        for half in range(max(1, int(low * n)), n - max(1, int(low * n)) + 1):
            if 1 <= half < n:
                yield axis, half, tbus[order[:half]], tbus[order[half:]]


def windowed(g: Graph, tbus: np.ndarray, low: float):
    """Today's rule (fewest links cut, then the most even split) with halves down to ``low``."""
    if len(tbus) == 1:
        return int(tbus[0])
    best = None
    for axis, half, a, b in straight_cuts(g, tbus, low):
        k = int(g.adj[np.ix_(np.sort(a), np.sort(b))].sum())
        key = (k, abs(2 * half - len(tbus)), axis)
        if best is None or key < best[0]:
            best = (key, a, b)
    return windowed(g, best[1], low), windowed(g, best[2], low)


def lookahead(g: Graph, tbus: np.ndarray, low: float = 0.2):
    """Each straight cut scored by its merge plus today's trees on its halves; cheapest taken."""
    if len(tbus) == 1:
        return int(tbus[0])
    best = None
    for _, _, a, b in straight_cuts(g, tbus, low):
        total = g.cost(a, b) + tree_cost(g, today(g, a))[1] + tree_cost(g, today(g, b))[1]
        if best is None or total < best[0]:
            best = (total, a, b)
    return lookahead(g, best[1], low), lookahead(g, best[2], low)


def greedy(g: Graph, score) -> object:
    """Bottom-up: join the pair of linked clusters with the lowest ``score(k, pa, pb)`` (``k``
    links between them, ``pa``/``pb`` their ports).
    """
    links = {i: {} for i in range(g.n)}  # cluster -> {linked cluster: links between them}
    for a, b in g.links:
        links[a][b] = links[a].get(b, 0) + 1
        links[b][a] = links[b].get(a, 0) + 1
    ports = dict.fromkeys(range(g.n), 4)
    trees: dict[int, object] = {i: i for i in range(g.n)}
    for new in itertools.count(g.n):
        if len(trees) == 1:
            return next(iter(trees.values()))
        _, i, j = min((score(k, ports[i], ports[j]), i, j)
                      for i in links for j, k in links[i].items() if i < j)
        k = links[i].pop(j)
        links[j].pop(i)
        joined: dict[int, int] = {}
        for old in (i, j):
            for c, n in links.pop(old).items():
                joined[c] = joined.get(c, 0) + n
                links[c].pop(old)
        for c, n in joined.items():
            links[c][new] = n
        links[new] = joined
        ports[new] = ports.pop(i) + ports.pop(j) - 2 * k
        trees[new] = (trees.pop(i), trees.pop(j))
    raise AssertionError("unreachable")


def terms(mesh: Mesh) -> dict[str, int]:
    """Today's multiply-adds by product, and the rank-k symmetric update's count."""
    plan = merge_plan(mesh)
    k, ea, eb = (plan.merges[:, c].astype(np.int64) for c in (5, 6, 7))
    ne = ea + eb
    return {"X [A_cc, A_ce]": int((k * k * (k + ea)).sum()),
            "Gauss-Jordan": int((k * (k * (k + ne - 1) - k * (k - 1) // 2)).sum()),
            "A rows": int((k * (ea * ne - ea * (ea - 1) // 2)).sum()), "V_B": int((k * k * eb).sum()),
            "B-B": int((k * (eb * (eb + 1) // 2)).sum()), "root merge": merge_cost(*plan.merges[-1, 5:8]),
            "k ne (ne + 1) / 2": int((k * ne * (ne + 1) // 2).sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default="smartlight,hex:6x6", help="comma-separated meshes")
    args = ap.parse_args()
    orders = {
        "window 3/10": lambda g, t: windowed(g, t, 0.3), "window 1/5": lambda g, t: windowed(g, t, 0.2),
        "window 1/10": lambda g, t: windowed(g, t, 0.1), "lookahead": lookahead,
        "greedy fewest ports": lambda g, _: greedy(g, lambda k, pa, pb: pa + pb - 2 * k),
        "greedy cheapest merge": lambda g, _: greedy(g, lambda k, pa, pb: merge_cost(k, pa - k, pb - k)),
    }
    print("| mesh | order | multiply-adds per block | vs today | to build (s) |")
    print("|---|---|---|---|---|")
    for name in args.meshes.split(","):
        mesh = make_mesh(name)
        g, tbus = Graph(mesh), np.arange(mesh.n_tbus)
        base = merge_macs(merge_plan(mesh))
        assert tree_cost(g, today(g, tbus))[1] == base, "the cost model is not the kernel's count"
        print(f"| {name} | today (straight cuts, window 2/5) | {base:,} | 1.000 | |")
        for label, build in orders.items():
            t = time.process_time()
            cost = tree_cost(g, build(g, tbus))[1]
            print(f"| {name} | {label} | {cost:,} | {cost / base:.3f} | {time.process_time() - t:.1f} |",
                  flush=True)
        print(f"  {name}, today's plan by product: " + ", ".join(
            f"{key} {val:,} ({val / base:.0%})" for key, val in terms(mesh).items()))


if __name__ == "__main__":
    main()
