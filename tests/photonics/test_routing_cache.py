"""The route cache answers as a fresh search would; the batched search on new costs agrees
pair by pair."""

import numpy as np

from photonics.routing import build_graph, search_path, shortest_path, shortest_paths, shortest_trees
from photonics.routing.single import route_cost
from photonics.topology import hexagonal, smartlight


def _pairs(n_ports: int, n: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(p) for p in rng.choice(n_ports, 2, replace=False)) for _ in range(n)]


def test_cached_routes_equal_fresh_searches():
    mesh = smartlight()
    graph = build_graph(mesh)
    pairs = _pairs(mesh.n_ports, 60, 1)
    for src, dst in pairs:
        cached = shortest_path(graph, src, dst)
        assert cached == search_path(graph, src, dst)  # what a fresh search finds
        csgraph = shortest_path(graph, src, dst, graph.csr)  # the other engine: same optimal cost
        assert route_cost(graph, cached) == route_cost(graph, csgraph)
        assert shortest_path(graph, src, dst) is cached  # the second ask is the cache's answer
    assert {(s, d) for s, row in graph.routes.items() for d in row} == set(pairs)


def test_batched_search_equals_pair_by_pair_on_new_costs():
    mesh = hexagonal(3, 3)
    graph = build_graph(mesh, failed={5: "dead", 9: "bar"})
    rng = np.random.default_rng(2)
    cost = graph.cost.copy()
    cost[np.isfinite(cost)] *= rng.uniform(1.0, 3.0, np.isfinite(cost).sum())
    csr = graph.with_costs(cost)
    pairs = _pairs(mesh.n_ports, 80, 3)
    batch = shortest_paths(graph, pairs, csr)
    for (src, dst), got in zip(pairs, batch, strict=True):
        one = shortest_path(graph, src, dst, csr)
        assert got == one
        base = shortest_path(graph, src, dst, graph.csr)
        if got is not None:  # optimal under the new costs: no worse than the base-cost route
            assert route_cost(graph, got, cost) <= route_cost(graph, base, cost) + 1e-12
    assert graph.routes == {}  # new costs are never cached on the graph


def test_tree_fill_matches_lazy_trees():
    mesh = smartlight()
    lazy, filled = build_graph(mesh), build_graph(mesh)
    shortest_trees(filled, range(mesh.n_ports))
    assert sum(map(len, filled.routes.values())) == mesh.n_ports * (mesh.n_ports - 1)
    pairs = _pairs(mesh.n_ports, 50, 4)
    assert shortest_paths(filled, pairs) == [shortest_path(lazy, s, d) for s, d in pairs]
