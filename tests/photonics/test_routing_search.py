"""The A* search finds optimal routes: the same cost as an independent Dijkstra (csgraph) on
every cost model the router uses and with failed TBUs; new costs per call (csgraph) agree."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from photonics.physics import fabricated_params
from photonics.routing import CostModel, build_graph, search_path, shortest_path, shortest_paths
from photonics.routing.search import search, step_costs, topology
from photonics.routing.single import route_cost
from photonics.topology import hexagonal, smartlight

SMARTLIGHT = smartlight()


def _pairs(n_ports: int, n: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(p) for p in rng.choice(n_ports, 2, replace=False)) for _ in range(n)]


def _reference(graph, csr, src: int, dst: int) -> float:
    """Cheapest cost by csgraph's Dijkstra over the full routing graph (inf: no route)."""
    return float(dijkstra(csr, directed=True, indices=graph.source(src))[graph.sink(dst)])


def _assert_valid(mesh, route) -> None:
    """The route starts and ends at its ports, never U-turns and follows links."""
    peer = mesh.peer()
    assert 4 * route.hops[0].tbu + route.hops[0].entry == mesh.port_tbu_ports[route.src]
    assert 4 * route.hops[-1].tbu + route.hops[-1].exit == mesh.port_tbu_ports[route.dst]
    for a, b in zip(route.hops, route.hops[1:], strict=False):
        assert peer[4 * a.tbu + a.exit] == 4 * b.tbu + b.entry
    assert all((h.entry < 2) != (h.exit < 2) for h in route.hops)


CASES = {
    "nominal": {},
    "failed": {"failed": {3: "dead", 7: "bar", 12: "cross", 20: "dead", 33: "dead"}},
    "fabricated": {"params": "fabricated"},
    "heater and reserved": {"costs": CostModel(heater_db_per_mw=0.05), "reserved": [1, 2, 5, 30]},
    "stuck penalty": {"failed": {10: "bar", 11: "cross"}, "costs": CostModel(stuck_db=0.7)},
}


@pytest.mark.parametrize("mesh", [SMARTLIGHT, hexagonal(3, 3)], ids=["smartlight", "hex3x3"])
@pytest.mark.parametrize("case", list(CASES))
def test_search_cost_equals_csgraph_dijkstra(mesh, case):
    kw = dict(CASES[case])
    if kw.get("params") == "fabricated":
        kw["params"] = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(7))
    graph = build_graph(mesh, **kw)
    unreachable = 0
    for src, dst in _pairs(mesh.n_ports, 150, 11):
        ref = _reference(graph, graph.csr, src, dst)
        got = search_path(graph, src, dst)
        if got is None:
            assert ref == np.inf
            unreachable += 1
            continue
        _assert_valid(mesh, got)
        assert route_cost(graph, got) == pytest.approx(ref, abs=1e-9)
    if case == "failed":
        assert unreachable  # the dead TBUs do cut some ports off: the None path is exercised


def test_new_costs_per_call_are_optimal_and_never_cached():
    mesh = hexagonal(4, 4)
    graph = build_graph(mesh, failed={5: "dead", 9: "bar"})
    rng = np.random.default_rng(3)
    pairs = _pairs(mesh.n_ports, 120, 5)
    for trial in range(3):  # congestion-like costs: base times 1-4, some arcs much dearer
        cost = graph.cost.copy()
        on = np.isfinite(cost)
        cost[on] *= rng.uniform(1.0, 4.0, on.sum()) * np.where(rng.random(on.sum()) < 0.1, 20.0, 1.0)
        csr = graph.with_costs(cost)
        batch = shortest_paths(graph, pairs, csr)
        for (src, dst), got in zip(pairs, batch, strict=True):
            ref = _reference(graph, csr, src, dst)
            one = shortest_path(graph, src, dst, csr)
            assert got == one
            if got is None:
                assert ref == np.inf
            else:
                assert route_cost(graph, got, cost) == pytest.approx(ref, abs=1e-9), trial
    assert graph.routes == {}  # new costs never touch the route cache


def test_zero_costs_and_a_zero_bound_still_give_optimal_routes():
    # step = 0 turns A* into plain Dijkstra: same optimal costs as the bounded search.
    graph = build_graph(SMARTLIGHT)
    top = topology(SMARTLIGHT)
    cost, step = step_costs(np.append(graph.cost, 0.0), top.tbu_arc, top.link_arc, top.n_inner)
    assert step == pytest.approx(0.5)
    for src, dst in _pairs(SMARTLIGHT.n_ports, 60, 2):
        bounded = search(top, cost, step, src, dst)
        plain = search(top, cost, 0.0, src, dst)
        assert route_cost(graph, bounded) == pytest.approx(route_cost(graph, plain), abs=1e-12)
    free = [0.0] * len(cost)  # every route costs 0: any walk is optimal, and it must end
    r = search(top, free, 0.0, 5, 28)
    _assert_valid(SMARTLIGHT, r)


def test_route_cache_is_plain_dicts_and_a_replaced_graph_starts_empty():
    graph = build_graph(SMARTLIGHT)
    r = shortest_path(graph, 5, 28)
    assert graph.routes[5][28] is r
    assert shortest_path(graph, 5, 28) is r
    dearer = graph.cost.copy()
    dearer[[h.tbu * 8 + 2 * h.entry + h.exit % 2 for h in r.hops]] += 5.0  # its TBU arcs
    other = replace(graph, cost=dearer, csr=graph.with_costs(dearer))
    assert other.routes == {}
    moved = shortest_path(other, 5, 28)
    assert moved != r
    assert route_cost(other, moved) == pytest.approx(_reference(other, other.csr, 5, 28), abs=1e-9)


def test_same_answer_on_every_fresh_graph():
    pairs = _pairs(SMARTLIGHT.n_ports, 40, 9)
    first = [search_path(build_graph(SMARTLIGHT), s, d) for s, d in pairs]
    again = [search_path(build_graph(smartlight()), s, d) for s, d in pairs]  # a new Mesh object too
    assert first == again
