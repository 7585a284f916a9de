"""Routing benchmarks: single-route speed against networkx, 6-connection requests on
SmartLight, and the exact program on a 9 x 9 hexagonal mesh with 16 connections.

Usage: python benchmarks/bench_routing.py [--requests 1000] [--large 3] [--seed 0]
Prints markdown tables (copied into docs/routing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import numpy as np

from photonics.errors import RoutingError
from photonics.routing import (
    build_graph,
    negotiate,
    route,
    route_many,
    shortest_path,
    shortest_paths,
    shortest_trees,
    solve_exact,
)
from photonics.routing.single import route_cost
from photonics.topology import hexagonal, smartlight


def _best_of(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_single(seed: int) -> None:
    """Single routes against networkx on the same DiGraph, like for like, one core.

    Uncached: every call searches afresh (ours: csgraph Dijkstra over the graph's CSR
    matrix given explicitly, plus the hop walk that builds the Route; networkx: its
    `dijkstra_path`, which stops at the target, and its `bidirectional_dijkstra`).
    Cache fill: the shortest-path trees of all 40 source ports (ours: `shortest_trees`,
    one csgraph call; networkx: `single_source_dijkstra` per source, which also builds
    the path to every node). Cached: every pair asked before (ours: the graph's route
    cache; networkx: the path dictionaries of the fill). Fill + queries: a fresh graph
    answering the 200 pairs, each side building its per-source cache as it goes.
    """
    import networkx as nx

    mesh = smartlight()
    graph = build_graph(mesh)
    G = nx.DiGraph()
    for a in graph.enabled:
        G.add_edge(int(graph.tail[a]), int(graph.head[a]), weight=float(graph.cost[a]))
    rng = np.random.default_rng(seed)
    pairs = [tuple(int(p) for p in rng.choice(mesh.n_ports, 2, replace=False)) for _ in range(200)]
    for s, d in pairs:  # same answers (cost) from both
        ours = shortest_path(graph, s, d)
        theirs = nx.dijkstra_path_length(G, graph.source(s), graph.sink(d))
        assert abs(route_cost(graph, ours) - theirs) < 1e-9
    n = len(pairs)
    csr = graph.csr
    # networkx gets the port -> node maps as plain lists (no helper calls on its side)
    src_node = [graph.source(p) for p in range(mesh.n_ports)]
    dst_node = [graph.sink(p) for p in range(mesh.n_ports)]
    t_cold = _best_of(lambda: [shortest_path(graph, s, d, csr) for s, d in pairs]) / n
    t_nx = _best_of(lambda: [nx.dijkstra_path(G, src_node[s], dst_node[d]) for s, d in pairs]) / n
    t_nx_bi = _best_of(lambda: [nx.bidirectional_dijkstra(G, src_node[s], dst_node[d]) for s, d in pairs]) / n
    t_batch = _best_of(lambda: shortest_paths(graph, pairs, csr)) / n
    ports = range(mesh.n_ports)
    fresh = [build_graph(mesh) for _ in range(5)]
    t_fill = _best_of(lambda: shortest_trees(fresh.pop(), ports))
    t_nx_fill = _best_of(lambda: [nx.single_source_dijkstra(G, src_node[p])[1] for p in ports])
    trees = [nx.single_source_dijkstra(G, src_node[p])[1] for p in ports]
    t_hit = _best_of(lambda: [shortest_path(graph, s, d) for s, d in pairs]) / n
    t_nx_hit = _best_of(lambda: [trees[s][dst_node[d]] for s, d in pairs]) / n
    fresh = [build_graph(mesh) for _ in range(5)]

    def ours_lazy() -> None:
        g = fresh.pop()
        for s, d in pairs:
            shortest_path(g, s, d)

    def nx_lazy() -> None:
        cache: dict = {}
        for s, d in pairs:
            if s not in cache:
                cache[s] = nx.single_source_dijkstra(G, src_node[s])[1]
            cache[s][dst_node[d]]

    t_lazy, t_nx_lazy = _best_of(ours_lazy) / n, _best_of(nx_lazy) / n
    t_build = _best_of(lambda: build_graph(mesh))

    def full() -> None:
        for s, d in pairs[:40]:
            with contextlib.suppress(RoutingError):  # a few pairs have no port-disjoint route
                route(mesh, s, d, check_budget=False)

    t_full = _best_of(full, 2) / 40
    print(f"### Single route, smartlight (71 TBUs, 568 nodes, 812 arcs), {n} random port pairs, "
          f"one core ({sorted(os.sched_getaffinity(0))})\n")
    print("| mode | networkx | ours | networkx / ours |")
    print("|---|---:|---:|---:|")
    print(f"| uncached, per route: `dijkstra_path` (stops at the target) | {t_nx * 1e6:.0f} us "
          f"| {t_cold * 1e6:.0f} us | {t_nx / t_cold:.1f}x |")
    print(f"| uncached, per route: `bidirectional_dijkstra` | {t_nx_bi * 1e6:.0f} us "
          f"| {t_cold * 1e6:.0f} us | {t_nx_bi / t_cold:.1f}x |")
    print(f"| uncached, {n} routes in one call (ours: `shortest_paths`, one csgraph call for the batch; "
          f"networkx: `bidirectional_dijkstra` per pair) | {t_nx_bi * 1e6:.0f} us | {t_batch * 1e6:.1f} us "
          f"| {t_nx_bi / t_batch:.1f}x |")
    print(f"| cache fill: trees of all {mesh.n_ports} source ports | {t_nx_fill * 1e3:.2f} ms "
          f"| {t_fill * 1e3:.2f} ms | {t_nx_fill / t_fill:.1f}x |")
    print(f"| fresh graph, {n} routes, caches built as needed (per route) | {t_nx_lazy * 1e6:.1f} us "
          f"| {t_lazy * 1e6:.1f} us | {t_nx_lazy / t_lazy:.1f}x |")
    print(f"| cached, per route (asked before): a dictionary lookup on both sides | {t_nx_hit * 1e6:.2f} us "
          f"| {t_hit * 1e6:.2f} us | {t_nx_hit / t_hit:.1f}x |")
    print(f"\n`build_graph` once per chip/failure set: {t_build * 1e6:.0f} us; a full `route()` (graph, "
          f"path, circuit-solve check, budget): {t_full * 1e3:.1f} ms.\n")


def bench_requests(n: int, seed: int) -> None:
    mesh = smartlight()
    sides = {"top edge -> bottom edge (12 x 12 ports)": (list(range(4, 16)), list(range(24, 36))),
             "left edge -> right edge (8 x 8 ports)": ([0, 1, 2, 3, 36, 37, 38, 39], list(range(16, 24)))}
    print(f"### {n} random requests of 6 simultaneous connections on smartlight (method auto)\n")
    print("| ports | routed (fast) | routed (exact) | proved infeasible | budget refused | "
          "time/request median (max) | TBUs/path median (max) | dB/path median (max) | "
          "ACR median (min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, (left, right) in sides.items():
        rng = np.random.default_rng(seed)
        fast = exact = infeasible = refused = 0
        times, hops, loss, acr = [], [], [], []
        for _ in range(n):
            pairs = list(zip(rng.choice(left, 6, replace=False).tolist(),
                             rng.choice(right, 6, replace=False).tolist(), strict=True))
            t0 = time.perf_counter()
            try:
                plan = route_many(mesh, pairs)
            except RoutingError as exc:
                if "proved" in str(exc):
                    infeasible += 1
                elif "refused" in str(exc):
                    refused += 1
                else:
                    raise
                times.append(time.perf_counter() - t0)
                continue
            times.append(time.perf_counter() - t0)
            fast += plan.method == "fast"
            exact += plan.method == "exact"
            hops += [len(r.route.hops) for r in plan.routes]
            loss += [r.loss_db for r in plan.routes]
            acr += [r.acr_db for r in plan.routes]

        def med(x: list[float], worst=max) -> str:
            return f"{statistics.median(x):.1f} ({worst(x):.1f})" if x else "-"

        print(f"| {label} | {fast / n:.1%} | {exact / n:.1%} | {infeasible / n:.1%} | {refused / n:.1%} | "
              f"{statistics.median(times) * 1e3:.1f} ms ({max(times) * 1e3:.0f} ms) | "
              f"{med(hops)} | {med(loss)} | {med(acr, min)} |")
    print("\nSmartLight's own 6x6 switch: 15 TBUs and about 10 dB per path.\n")


def bench_large(instances: int, seed: int, time_limit: float) -> None:
    """The exact program on 9 x 9 with 16 connections; wall clock and CPU seconds.

    On a shared machine the wall clock includes waiting for a core; the CPU time (this
    process, HiGHS included) does not. The fast router's time is the load yardstick.
    """
    mesh = hexagonal(9, 9)
    graph = build_graph(mesh)
    print(f"### 9 x 9 hexagonal mesh ({mesh.n_tbus} TBUs, {mesh.n_ports} ports), 16 connections "
          f"between 32 random ports, exact program (load average {os.getloadavg()[0]:.1f} at start)\n")
    print("| instance | fast router | exact, cold (no incumbent): wall / CPU | exact, fed the fast result: "
          "wall / CPU | total loss fast -> optimal |")
    print("|---|---:|---:|---:|---:|")
    rng = np.random.default_rng(seed)

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def since(t0: tuple[float, float]) -> str:
        return f"{time.perf_counter() - t0[0]:.2f} / {time.process_time() - t0[1]:.2f} s"

    for i in range(instances):
        ports = rng.choice(mesh.n_ports, 32, replace=False).tolist()
        pairs = list(zip(ports[:16], ports[16:], strict=True))
        t0 = time.perf_counter()
        routes, passes = negotiate(graph, pairs)
        t_fast = time.perf_counter() - t0
        fast_cost = sum(0.5 * len(r.hops) for r in routes) if routes else None
        t0 = clock()
        try:
            res = solve_exact(graph, pairs, time_limit_s=time_limit)
            cold = f"{since(t0)} ({'optimal' if res.optimal else 'time limit'})"
            best = round(res.objective_db, 6)
        except RoutingError as exc:
            why = "infeasible" if "proved" in str(exc) else "no answer"
            cold = f"{since(t0)} ({why})"
            best = None
        warm = "-"
        if fast_cost is not None:
            t0 = clock()
            solve_exact(graph, pairs, time_limit_s=time_limit, incumbent_db=fast_cost)
            warm = since(t0)
        fast = f"{t_fast * 1e3:.0f} ms ({passes} passes)" if routes else f"gave up ({t_fast * 1e3:.0f} ms)"
        total = f"{fast_cost if fast_cost is not None else '-'} -> {best if best is not None else '-'} dB"
        print(f"| {i} | {fast} | {cold} | {warm} | {total} |")
        sys.stdout.flush()
    print()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1000, help="random 6-connection requests")
    parser.add_argument("--large", type=int, default=3, help="9 x 9 instances")
    parser.add_argument("--time-limit", type=float, default=300.0, help="exact program limit (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["single", "requests", "large"], help="run one section")
    parser.add_argument("--cores", type=int, default=1, help="CPUs to run on (default 1)")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):  # like taskset: numpy/scipy here are single-threaded anyway
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cores])
    if args.only in (None, "single"):
        bench_single(args.seed)
    if args.only in (None, "requests"):
        bench_requests(args.requests, args.seed)
    if args.only in (None, "large"):
        bench_large(args.large, args.seed, args.time_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
