
from __future__ import annotations

import numpy as np
import pytest

from photonics.configuration import BAR_PAIRS
from photonics.errors import RoutingError
from photonics.routing import build_graph, conflicts, route_many, solve_exact
from photonics.topology import Mesh, hexagonal


def simple_paths(mesh: Mesh, src: int, dst: int, dead: frozenset[int] = frozenset(),
                 limit: int = 200_000) -> list[tuple[float, frozenset, dict, tuple]]:
    """Every route src -> dst that uses each TBU port once and one state per TBU.

    Returns (loss_db, ports used, {tbu: state}, hops) with 0.5 dB per TBU (nominal).
    """
    peer = mesh.peer()
    start, goal = int(mesh.port_tbu_ports[src]), int(mesh.port_tbu_ports[dst])
    out = []

    def walk(g: int, used: frozenset, states: dict, hops: tuple) -> None:
        if len(out) >= limit:
            raise RuntimeError("too many paths for brute force")
        t, e = divmod(g, 4)
        if t in dead:
            return
        for x in ((2, 3) if e < 2 else (0, 1)):
            h = 4 * t + x
            if h in used:
                continue
            s = "bar" if (e, x) in BAR_PAIRS else "cross"
            if states.get(t, s) != s:
                continue
            nused = used | {h}
            nstates = {**states, t: s}
            nhops = (*hops, (t, e, x))
            if h == goal:
                out.append((0.5 * len(nhops), nused, nstates, nhops))
                continue
            nxt = int(peer[h])
            if nxt < 0 or nxt in nused:
                continue
            walk(nxt, nused | {nxt}, nstates, nhops)

    walk(start, frozenset({start}), {}, ())
    return sorted(out, key=lambda p: p[0])


def best_set(mesh: Mesh, pairs: list[tuple[int, int]], dead: frozenset[int] = frozenset()) -> float | None:
    """Least total loss (dB) of a conflict-free set of routes, or None when there is none."""
    options = [simple_paths(mesh, s, d, dead) for s, d in pairs]
    floor = [p[0][0] if p else float("inf") for p in options]
    best = [float("inf")]

    def search(k: int, used: frozenset, states: dict, total: float) -> None:
        if k == len(pairs):
            best[0] = min(best[0], total)
            return
        rest = sum(floor[k + 1:])
        for loss, ports, st, _ in options[k]:
            if total + loss + rest >= best[0] - 1e-9:
                break  # options are sorted by loss
            if ports & used or any(states.get(t, s) != s for t, s in st.items()):
                continue
            search(k + 1, used | ports, {**states, **st}, total + loss)

    search(0, frozenset(), {}, 0.0)
    return None if best[0] == float("inf") else best[0]


# ---------------------------------------------------------------------------------------


def _random_requests(mesh, rng, k):
    ports = rng.choice(mesh.n_ports, 2 * k, replace=False).tolist()
    return list(zip(ports[:k], ports[k:], strict=True))


@pytest.mark.parametrize(("rows", "cols", "seed"), [(1, 2, 0), (1, 2, 1), (2, 2, 0), (2, 2, 1), (2, 2, 2)])
def test_exact_agrees_with_brute_force(rows, cols, seed):
    mesh = hexagonal(rows, cols)
    graph = build_graph(mesh)
    rng = np.random.default_rng(seed)
    feasible = infeasible = 0
    for _ in range(12):
        pairs = _random_requests(mesh, rng, int(rng.integers(2, 4)))
        brute = best_set(mesh, pairs)
        if brute is None:
            with pytest.raises(RoutingError, match="proved"):
                solve_exact(graph, pairs)
            infeasible += 1
            continue
        res = solve_exact(graph, pairs)
        assert res.optimal
        assert res.objective_db == pytest.approx(brute, abs=1e-6)
        assert not conflicts(mesh, res.routes)
        feasible += 1
    assert feasible  # both branches exercised
    assert infeasible


def test_exact_with_dead_tbus_agrees_with_brute_force():
    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(7)
    for _ in range(8):
        dead = frozenset(rng.choice(mesh.n_tbus, 2, replace=False).tolist())
        pairs = _random_requests(mesh, rng, 2)
        graph = build_graph(mesh, failed=dict.fromkeys(dead, "dead"))
        brute = best_set(mesh, pairs, dead)
        if brute is None:
            with pytest.raises(RoutingError):
                solve_exact(graph, pairs)
        else:
            assert solve_exact(graph, pairs).objective_db == pytest.approx(brute, abs=1e-6)


def test_worst_objective_is_no_worse_than_total():
    mesh = hexagonal(2, 2)
    graph = build_graph(mesh)
    pairs = [(0, 10), (5, 15)]
    total = solve_exact(graph, pairs, "total")
    worst = solve_exact(graph, pairs, "worst")
    loss = [[0.5 * len(r.hops) for r in res.routes] for res in (total, worst)]
    assert max(loss[1]) <= max(loss[0]) + 1e-9
    assert sum(loss[1]) >= sum(loss[0]) - 1e-9


def test_fast_router_finds_the_brute_force_feasible_sets():
    # auto = fast then exact: every feasible set gets routed, every infeasible one refused.
    mesh = hexagonal(2, 2)
    rng = np.random.default_rng(3)
    for _ in range(10):
        pairs = _random_requests(mesh, rng, 2)
        if best_set(mesh, pairs) is None:
            with pytest.raises(RoutingError):
                route_many(mesh, pairs, check_budget=False)
        else:
            plan = route_many(mesh, pairs, check_budget=False)
            assert not conflicts(mesh, [r.route for r in plan.routes])
