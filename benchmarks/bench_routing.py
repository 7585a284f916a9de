"""Routing benchmarks: single-route speed against networkx, 6-connection requests on
SmartLight, and the exact program on a 9 x 9 hexagonal mesh with 16 connections.

Usage: python benchmarks/bench_routing.py [--only single|requests|large] [--requests 1000]
[--large 3] [--seed 0] [--rounds 7] [--cores 1]
Prints markdown tables (copied into docs/routing.md). The process pins itself to ``--cores``
CPUs (as ``taskset`` would) and caps BLAS threads before numpy loads.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable


def _pin(cores: int) -> None:
    """Run on ``cores`` CPUs with as many BLAS threads, before numpy loads."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(cores)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])


def _race(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[float, float]]:
    """Best (CPU s, wall s) of each function over ``rounds``; the functions take turns in
    every round, so all of them see the same machine load."""
    best = dict.fromkeys(fns, (math.inf, math.inf))
    for _ in range(rounds):
        for name, fn in fns.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            c, w = time.process_time() - c0, time.perf_counter() - w0
            best[name] = (min(best[name][0], c), min(best[name][1], w))
    return best


def _nx_routing_graph(graph):
    """networkx DiGraph of the routing graph itself (an in- and an out-node per TBU port)."""
    import networkx as nx

    full = nx.DiGraph()
    for a in graph.enabled:
        full.add_edge(int(graph.tail[a]), int(graph.head[a]), weight=float(graph.cost[a]))
    return full


def _nx_step_graph(top, step_cost: list[float]):
    """networkx DiGraph of the step graph our search walks (exit ports and start nodes)."""
    import networkx as nx

    steps = nx.DiGraph()
    for u, succ in enumerate(top.succ):
        for k, v in succ:
            if math.isfinite(step_cost[k]):
                steps.add_edge(u, v, weight=step_cost[k])
    return steps


def _nx_bounds(graph, top, step: float, dst: int) -> tuple[list[float], list[float]]:
    """Our lower bound of the cost to port ``dst`` on the nodes of both networkx graphs.

    Step graph: ``hops(v) * step``, exactly ours. Routing graph: out-node ``2u + 1`` is exit
    port ``u`` (``hops(u) * step``); in-node ``2p`` adds the cheapest TBU arc to the better of
    entry port ``p``'s two exits.
    """
    import numpy as np

    hops, _ = top.bounds(dst)
    tbu_cost = graph.cost[: graph.n_tbu_arcs]
    cheapest = float(tbu_cost[np.isfinite(tbu_cost)].min())
    on_full = [0.0] * graph.n_nodes
    for p in range(4 * graph.mesh.n_tbus):
        far = 4 * (p // 4) + (2 if p % 4 < 2 else 0)
        on_full[2 * p] = cheapest + min(hops[far], hops[far + 1]) * step
        on_full[2 * p + 1] = hops[p] * step
    return [h * step for h in hops], on_full


def bench_single(seed: int, rounds: int) -> None:
    """Single routes against networkx on one core, like for like.

    Uncached: every call searches afresh on a prebuilt graph (ours: `search_path`, A* with
    a lower bound from the mesh's hop counts; networkx: `dijkstra_path`, its default
    `bidirectional_dijkstra`, and `astar_path` given the same bound, on the routing graph
    and on the step graph our search walks). networkx returns a node list and ours a Route
    with its hops; the conversion is not charged to networkx. Cached: both sides hold the
    answers already; the floor is a bare dict lookup.
    """
    import networkx as nx
    import numpy as np

    from photonics.errors import RoutingError
    from photonics.physics import fabricated_params
    from photonics.routing import build_graph, route, shortest_path, shortest_trees
    from photonics.routing.search import topology
    from photonics.topology import smartlight

    mesh = smartlight()
    rng = np.random.default_rng(seed)
    pairs = [tuple(int(p) for p in rng.choice(mesh.n_ports, 2, replace=False)) for _ in range(200)]
    n = len(pairs)
    c0 = time.process_time()
    top = topology(mesh)
    for p in range(mesh.n_ports):
        top.bounds(p)
    t_tables = time.process_time() - c0
    cases = {
        "nominal (0.5 dB per TBU)": build_graph(mesh),
        "fabricated losses (seed 1)": build_graph(
            mesh, fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(1))),
        "3 failed TBUs (2 dead, 1 stuck)": build_graph(
            mesh, failed={"tbu:1.2.1": "dead", "tbu:1.1.2": "dead", "tbu:0.4.0": "bar"}),
    }
    print(f"### Single route, smartlight ({mesh.n_tbus} TBUs, 568 nodes, 812 arcs), {n} random "
          f"port pairs, one core ({sorted(os.sched_getaffinity(0))}), load average "
          f"{os.getloadavg()[0]:.1f} at the start\n")
    print(f"Uncached, CPU time per route (best of {rounds} alternated rounds); the last column is "
          "networkx's best over ours, on CPU time (and on wall clock).\n")
    print("| costs | `dijkstra_path` | `bidirectional_dijkstra` | `astar_path`, our bound | "
          "`bidirectional_dijkstra`, step graph | `astar_path`, step graph, our bound | **ours** "
          "| networkx's best / ours |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, graph in cases.items():
        _bench_uncached(label, graph, pairs, rounds)
    _bench_cached(cases["nominal (0.5 dB per TBU)"], pairs, rounds)
    graph = build_graph(mesh)
    full = _nx_routing_graph(graph)
    src_in = [graph.source(p) for p in range(mesh.n_ports)]
    dst_out = [graph.sink(p) for p in range(mesh.n_ports)]
    ports = range(mesh.n_ports)
    fresh = [build_graph(mesh) for _ in range(2 * rounds)]

    def nx_lazy() -> None:
        cache: dict = {}
        for s, d in pairs:
            if s not in cache:
                cache[s] = nx.single_source_dijkstra(full, src_in[s])[1]
            cache[s][dst_out[d]]

    def ours_lazy() -> None:
        g = fresh.pop()
        for s, d in pairs:
            shortest_path(g, s, d)

    fill = _race({"nx": lambda: [nx.single_source_dijkstra(full, src_in[p])[1] for p in ports],
                  "ours": lambda: shortest_trees(fresh.pop(), ports)}, rounds)
    lazy = _race({"nx": nx_lazy, "ours": ours_lazy}, rounds)
    print("\nFilling the caches (CPU time; ratio networkx / ours, CPU and wall clock):\n")
    print("| mode | networkx | ours | networkx / ours |")
    print("|---|---:|---:|---:|")
    print(f"| cache fill: every route between the {mesh.n_ports} ports (networkx: "
          "`single_source_dijkstra` per source; ours: `shortest_trees`) | "
          f"{fill['nx'][0] * 1e3:.1f} ms | {fill['ours'][0] * 1e3:.1f} ms | "
          f"{fill['nx'][0] / fill['ours'][0]:.1f}x ({fill['nx'][1] / fill['ours'][1]:.1f}x) |")
    print(f"| fresh graph, {n} routes, each side filling its cache as it goes (per route) | "
          f"{lazy['nx'][0] / n * 1e6:.1f} us | {lazy['ours'][0] / n * 1e6:.1f} us | "
          f"{lazy['nx'][0] / lazy['ours'][0]:.1f}x ({lazy['nx'][1] / lazy['ours'][1]:.1f}x) |")
    c0 = time.process_time()
    for _ in range(20):
        build_graph(mesh)
    t_build = (time.process_time() - c0) / 20

    def full_route() -> None:
        for s, d in pairs[:40]:
            with contextlib.suppress(RoutingError):  # a few pairs have no port-disjoint route
                route(mesh, s, d, check_budget=False)

    t_full = _race({"route": full_route}, 2)["route"][0] / 40
    print(f"\nOnce per mesh: the search graph and the hop counts to all {mesh.n_ports} ports, "
          f"{t_tables * 1e3:.1f} ms CPU (networkx's A* is given the same bounds for free). "
          f"`build_graph` once per chip/failure set: {t_build * 1e6:.0f} us; a full `route()` "
          f"(graph, path, circuit-solve check, budget): {t_full * 1e3:.1f} ms.\n")


def _bench_uncached(label: str, graph, pairs: list[tuple[int, int]], rounds: int) -> None:
    """One table row: every networkx way and ours on ``graph``'s costs, after checking that
    ours, csgraph's Dijkstra and networkx's A* agree on every optimal cost."""
    import networkx as nx
    import numpy as np
    from scipy.sparse.csgraph import dijkstra

    from photonics.routing import search_path
    from photonics.routing.search import step_costs, topology
    from photonics.routing.single import route_cost

    mesh = graph.mesh
    top = topology(mesh)
    cost, step = step_costs(np.append(graph.cost, 0.0), top.tbu_arc, top.link_arc, top.n_inner)
    full, steps = _nx_routing_graph(graph), _nx_step_graph(top, cost)
    bounds = [_nx_bounds(graph, top, step, d) for d in range(mesh.n_ports)]
    src_in = [graph.source(p) for p in range(mesh.n_ports)]  # plain lists: no helper of
    dst_out = [graph.sink(p) for p in range(mesh.n_ports)]  # ours runs on networkx's side
    start, goal = top.start, top.goal
    ok = []
    for s, d in pairs:
        ref = dijkstra(graph.csr, indices=src_in[s])[dst_out[d]]
        ours = search_path(graph, s, d)
        assert (ours is None) == (not np.isfinite(ref)), "ours and csgraph disagree on reachability"
        if ours is not None:
            ok.append((s, d))
            assert abs(route_cost(graph, ours) - ref) < 1e-9, "ours is not optimal"
            theirs = nx.astar_path_length(steps, start[s], goal[d], lambda u, _, h=bounds[d][0]: h[u])
            assert abs(theirs - ref) < 1e-9, "networkx's A* with our bound is not optimal"
    m = len(ok)
    t = _race({
        "dijkstra": lambda: [nx.dijkstra_path(full, src_in[s], dst_out[d]) for s, d in ok],
        "bidir": lambda: [nx.bidirectional_dijkstra(full, src_in[s], dst_out[d]) for s, d in ok],
        "astar": lambda: [nx.astar_path(full, src_in[s], dst_out[d], lambda u, _, h=bounds[d][1]: h[u])
                          for s, d in ok],
        "bidir steps": lambda: [nx.bidirectional_dijkstra(steps, start[s], goal[d]) for s, d in ok],
        "astar steps": lambda: [nx.astar_path(steps, start[s], goal[d], lambda u, _, h=bounds[d][0]: h[u])
                                for s, d in ok],
        "ours": lambda: [search_path(graph, s, d) for s, d in ok],
    }, rounds)
    ours = t.pop("ours")
    best = min(t, key=lambda w: t[w][0])
    cells = " | ".join(f"{c / m * 1e6:.1f} us" for c, _ in t.values())
    print(f"| {label} ({m} routable) | {cells} | **{ours[0] / m * 1e6:.1f} us** | "
          f"**{t[best][0] / ours[0]:.1f}x** ({t[best][1] / ours[1]:.1f}x) |")


def _bench_cached(graph, pairs: list[tuple[int, int]], rounds: int) -> None:
    """Answers asked before: the same 200 pairs, every answer already held on both sides."""
    import networkx as nx

    from photonics.routing import shortest_path

    n = len(pairs)
    full = _nx_routing_graph(graph)
    src_in = {s: graph.source(s) for s, _ in pairs}
    dst_out = [graph.sink(p) for p in range(graph.mesh.n_ports)]
    trees = {s: nx.single_source_dijkstra(full, v)[1] for s, v in src_in.items()}
    by_port = {s: {d: tree[dst_out[d]] for d in range(graph.mesh.n_ports) if dst_out[d] in tree}
               for s, tree in trees.items()}  # keyed by port, as ours: no translation per ask
    answers = {(s, d): by_port[s][d] for s, d in pairs}
    for s, d in pairs:
        shortest_path(graph, s, d)
    routes = graph.routes
    reps = 200  # 200 x 200 lookups per timing: far above the clock's resolution
    t = _race({
        "tuple": lambda: [[answers[s, d] for s, d in pairs] for _ in range(reps)],
        "nx": lambda: [[by_port[s][d] for s, d in pairs] for _ in range(reps)],
        "dict": lambda: [[routes[s][d] for s, d in pairs] for _ in range(reps)],
        "ours": lambda: [[shortest_path(graph, s, d) for s, d in pairs] for _ in range(reps)],
    }, rounds)
    per = n * reps
    ns = {k: c / per * 1e9 for k, (c, _) in t.items()}
    print("\nCached (asked before): every answer already held on both sides, keyed by port, "
          "CPU time per route. A bare dict lookup in the same loop is the floor, and "
          "networkx's answer is one. Ratios: networkx / this, on CPU time (wall clock).\n")
    print("| lookup | per route | networkx / this |")
    print("|---|---:|---:|")
    rows = (("networkx: `paths[s][t]` (its `single_source_dijkstra` paths, by port)", "nx"),
            ("a dict keyed by `(s, t)` tuples (a tuple is built and hashed per lookup)", "tuple"),
            ("ours: `graph.routes[s][t]` (the route cache itself)", "dict"),
            ("ours: `shortest_path(graph, s, t)` (a function call, then that cache)", "ours"))
    for label, key in rows:
        print(f"| {label} | {ns[key]:.0f} ns | {t['nx'][0] / t[key][0]:.2f}x "
              f"({t['nx'][1] / t[key][1]:.2f}x) |")


def bench_requests(n: int, seed: int) -> None:
    """Random 6-connection requests on smartlight through ``route_many`` (method auto)."""
    import numpy as np

    from photonics.errors import RoutingError
    from photonics.routing import route_many
    from photonics.topology import smartlight

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
    import numpy as np

    from photonics.errors import RoutingError
    from photonics.routing import build_graph, negotiate, solve_exact
    from photonics.topology import hexagonal

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
    parser.add_argument("--rounds", type=int, default=7, help="alternated timing rounds (best of)")
    args = parser.parse_args(argv)
    _pin(args.cores)
    if args.only in (None, "single"):
        bench_single(args.seed, args.rounds)
    if args.only in (None, "requests"):
        bench_requests(args.requests, args.seed)
    if args.only in (None, "large"):
        bench_large(args.large, args.seed, args.time_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
