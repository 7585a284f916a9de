"""Search for an all-to-all schedule at the N - 1 bound: 16 ports on smartlight.

`photonics.fabric.schedule` tries circle-method labelings of the ports and splits the
matchings that do not route (17 configurations for 16 spread ports on smartlight, against
the bound of 15). This script searches the 1-factorizations of K16 directly: it builds
one matching at a time from the pairs still uncovered, keeps a matching only if it routes
(fast router, then the exact program: conflict-free, with the same 3 dB budget margin as
`schedule`), and restarts from scratch when the uncovered pairs admit no routable perfect
matching. Every matching of the result is re-routed with `route_many` at the end, so the
schedule it prints is checked, not assumed.

Run: python benchmarks/search_matchings.py [--ports 16] [--seed 0] [--budget-s 600]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np

from photonics.errors import RoutingError
from photonics.fabric import spread_ports
from photonics.routing import route_many
from photonics.topology import smartlight

MARGIN_DB = 3.0  # as photonics.fabric.schedule's default required margin
EXACT_LIMIT_S = 20.0  # per integer program: a matching it cannot settle counts as unroutable


def _routes(mesh, pairs: list[tuple[int, int]], cache: dict) -> bool:
    """Whether ``pairs`` route together (budget and margin checked), memoised."""
    key = frozenset(frozenset(p) for p in pairs)
    if key not in cache:
        try:  # "auto": the fast router, then the exact program when it gives up
            route_many(mesh, pairs, required_margin_db=MARGIN_DB, time_limit_s=EXACT_LIMIT_S)
            cache[key] = True
        except RoutingError:
            cache[key] = False
    return cache[key]


def _random_perfect_matching(left: set[frozenset], verts: list[int], rng: np.random.Generator,
                             tries: int = 200) -> list[tuple[int, int]] | None:
    """A random perfect matching of the graph ``left`` (randomised greedy with restarts)."""
    adj = {v: [u for u in verts if u != v and frozenset((u, v)) in left] for v in verts}
    for _ in range(tries):
        free = set(verts)
        out = []
        while free:
            v = min(free, key=lambda x: (sum(u in free for u in adj[x]), rng.random()))
            cand = [u for u in adj[v] if u in free]
            if not cand:
                break
            u = cand[rng.integers(len(cand))]
            out.append((v, u))
            free -= {u, v}
        if not free:
            return out
    return None


def _cycles(edges: set[frozenset]) -> list[list[tuple[int, int]]]:
    """The cycles of a 2-regular graph, each as its edges in order around the cycle."""
    adj: dict[int, list[int]] = {}
    for e in edges:
        u, v = tuple(e)
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    seen: set[int] = set()
    out = []
    for start in adj:
        if start in seen:
            continue
        cyc, prev, node = [], None, start
        while True:
            seen.add(node)
            nxt = adj[node][0] if adj[node][0] != prev else adj[node][1]
            cyc.append((node, nxt))
            prev, node = node, nxt
            if node == start:
                break
        out.append(cyc)
    return out


def _splits(edges: set[frozenset]) -> list[tuple[list, list]]:
    """Every way to split a 2-regular graph of even cycles into two perfect matchings."""
    cycles = _cycles(edges)
    if any(len(c) % 2 for c in cycles):
        return []
    out = []
    for flips in itertools.product((0, 1), repeat=len(cycles)):
        a, b = [], []
        for cyc, f in zip(cycles, flips, strict=True):
            a += cyc[f::2]
            b += cyc[1 - f::2]
        out.append((a, b))
    return out


def _repair(mesh, chosen: list, left: set[frozenset], cache: dict, rng) -> list | None:
    """Finish a schedule stuck with one or two matchings' worth of pairs left.

    Two left (a 2-regular graph): try every split into two matchings. One left: for each
    matching already chosen, the union with the leftover is 2-regular; try its splits
    (an alternating-cycle swap), replacing the chosen matching by the two halves.
    """
    degree = 2 * len(left) // len({v for e in left for v in e})
    if degree == 2:
        for a, b in _splits(left):
            if _routes(mesh, a, cache) and _routes(mesh, b, cache):
                return [*chosen, a, b]
        return None
    if degree != 1:
        return None
    for i in rng.permutation(len(chosen)):
        union = left | {frozenset(p) for p in chosen[i]}
        for a, b in _splits(union):
            if _routes(mesh, a, cache) and _routes(mesh, b, cache):
                return [*chosen[:i], *chosen[i + 1:], a, b]
    return None


def search(ports: list[int], seed: int, budget_s: float) -> list[list[tuple[int, int]]] | None:
    """Routable perfect matchings covering every pair of ``ports`` once, or None in time."""
    mesh = smartlight()
    rng = np.random.default_rng(seed)
    cache: dict = {}
    t0 = time.perf_counter()
    all_pairs = {frozenset(p) for p in itertools.combinations(ports, 2)}
    restarts = 0
    while time.perf_counter() - t0 < budget_s:
        left = set(all_pairs)
        chosen: list[list[tuple[int, int]]] = []
        while left:
            found = None
            for _ in range(60):  # candidate matchings per step
                m = _random_perfect_matching(left, ports, rng)
                if m is None:
                    break
                if _routes(mesh, m, cache):
                    found = m
                    break
            if found is None:
                break
            chosen.append(found)
            left -= {frozenset(p) for p in found}
        if left:
            fixed = _repair(mesh, chosen, left, cache, rng)
            if fixed is not None:
                chosen, left = fixed, set()
        if not left:
            print(f"found after {restarts} restarts, {len(cache)} matchings routed, "
                  f"{time.perf_counter() - t0:.0f} s")
            return chosen
        restarts += 1
        print(f"restart {restarts}: stuck with {len(chosen)} matchings, {len(left)} pairs left, "
              f"{len(cache)} matchings routed so far", flush=True)
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=600.0)
    args = ap.parse_args(argv)
    mesh = smartlight()
    ports = spread_ports(mesh, args.ports)
    print(f"ports {ports}; bound {args.ports - 1} matchings")
    result = search(ports, args.seed, args.budget_s)
    if result is None:
        print("no schedule at the bound found within the budget (this is not a proof)")
        return 1
    for k, m in enumerate(result):
        plan = route_many(mesh, m, required_margin_db=MARGIN_DB, time_limit_s=EXACT_LIMIT_S)  # re-check
        worst = max(r.loss_db for r in plan.routes)
        print(f"matching {k}: {sorted(tuple(sorted(p)) for p in m)} method {plan.method}, "
              f"worst loss {worst:.1f} dB, min ACR {min(r.acr_db for r in plan.routes):.1f} dB")
    print(f"{len(result)} matchings for {args.ports} ports (bound {args.ports - 1})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
