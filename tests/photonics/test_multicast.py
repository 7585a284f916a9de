"""Optical multicast: splitter trees on the mesh, their budgets, and collectives that use them."""

from __future__ import annotations

import numpy as np
import pytest

from photonics.collectives import (
    by_pattern,
    chain_broadcast,
    compile_collective,
    flat_allgather,
    flat_broadcast,
    merged_steps,
    rank_names,
    simulate,
    slot_fabric,
    tree_broadcast,
    tree_multicast_allreduce,
)
from photonics.collectives.compile import tree_step_time_ms
from photonics.collectives.cost import CostModel
from photonics.collectives.steps import Collective, CollectiveError, Send, Step
from photonics.configuration import Configuration
from photonics.errors import RoutingError
from photonics.fabric import default_fabric
from photonics.fabric.multicast import plan_multicast
from photonics.routing.graph import build_graph
from photonics.routing.multicast import (
    check_trees,
    route_tree,
    route_trees,
    split_fractions,
    trees_configuration,
)
from photonics.topology import smartlight


@pytest.fixture(scope="module")
def mesh():
    return smartlight()


@pytest.fixture(scope="module")
def graph(mesh):
    return build_graph(mesh)


def _linked(mesh, route):
    """Every hop's exit is wired to the next hop's entry, from the source port to the destination port."""
    links = {int(p): int(q) for p, q in mesh.links} | {int(q): int(p) for p, q in mesh.links}
    assert 4 * route.hops[0].tbu + route.hops[0].entry == mesh.port_tbu_ports[route.src]
    assert 4 * route.hops[-1].tbu + route.hops[-1].exit == mesh.port_tbu_ports[route.dst]
    for a, b in zip(route.hops, route.hops[1:], strict=False):
        assert links[4 * a.tbu + a.exit] == 4 * b.tbu + b.entry


@pytest.mark.parametrize("dsts", [[4], [4, 8], [4, 8, 12], [0, 13, 20, 27]])
def test_tree_branches_are_wired_routes_that_part_only_at_splits(mesh, graph, dsts):
    tree = route_tree(graph, 1, dsts)
    assert tree.dsts == tuple(dsts)
    for r in tree.branches:
        _linked(mesh, r)
    entry = {}
    for r in tree.branches:
        for h in r.hops:  # one entry per TBU: light never enters a TBU of the tree twice
            assert entry.setdefault(h.tbu, h.entry) == h.entry
    exits = {}
    for r in tree.branches:
        for h in r.hops:
            exits.setdefault(h.tbu, set()).add(h.exit)
    assert sorted(t for t, x in exits.items() if len(x) == 2) == [t for t, _ in tree.splits]
    assert len(tree.splits) == len(dsts) - 1


def test_splits_give_every_destination_the_same_power_in_the_circuit_solve(mesh, graph):
    tree = route_tree(graph, 1, [4, 8, 12])
    check = check_trees(mesh, trees_configuration(mesh, [tree]), [tree])[0]
    assert check.spread_db < 0.1  # equal shares, across the default lane's 0.8 nm slot
    # an unequal split would put one destination >= 1 dB below: the solve sees what the ratios do
    bad = trees_configuration(mesh, [tree])
    frac = bad.cross_fraction.copy()
    t0, f0 = tree.splits[0]
    frac[t0] = 0.5 if abs(f0 - 0.5) > 0.1 else 0.2
    skew = check_trees(mesh, Configuration(frac, bad.routes, mesh=mesh), [tree])[0]
    assert skew.spread_db > 1.0


def test_split_ratio_follows_the_losses_below_it(mesh, graph):
    """Nominal losses: the side with the longer path gets more light, by exactly its extra loss."""
    from photonics.physics import nominal_params

    tree = route_tree(graph, 1, [4, 8])
    (t, f), = tree.splits
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    lossier = nominal_params(mesh.n_tbus, mesh.n_links)
    lossier.loss_db[:] = params.loss_db * 2
    f2 = split_fractions(mesh, tree, lossier)[t]
    long_side_is_cross = f > 0.5
    assert (f2 > f) == long_side_is_cross  # doubling every loss widens the gap towards the long side
    assert 0 < f < 1


def test_failed_and_blocked_tbus_are_never_used(mesh, graph):
    free = route_tree(graph, 1, [4, 8, 12])
    victim = sorted(free.tbus)[len(free.tbus) // 2]
    again = route_trees(mesh, [(1, [4, 8, 12])], failed={victim: "dead"})[0]
    assert victim not in again.tbus
    a, b = route_trees(mesh, [(1, [4, 8]), (9, [16, 20])])
    assert not a.tbus & b.tbus


def test_bad_requests_are_refused_in_one_line(graph):
    with pytest.raises(RoutingError, match="different destinations"):
        route_tree(graph, 1, [4, 4])
    with pytest.raises(RoutingError, match="different destinations"):
        route_tree(graph, 1, [1])
    with pytest.raises(RoutingError, match="no free path"):
        route_tree(graph, 1, [4], blocked=frozenset(range(graph.mesh.n_tbus)))


def test_split_loss_is_in_every_branch_budget():
    fab = default_fabric()
    three = plan_multicast(fab, [("gpu0", ["gpu1", "gpu2", "gpu3"])])
    four = plan_multicast(fab, [("gpu0", ["gpu1", "gpu2", "gpu3", "gpu4"])])
    one = plan_multicast(fab, [("gpu0", ["gpu1"])])
    assert three.ok
    assert not four.ok
    assert "budget short" in four.first_failure().reason
    # splitting 1-to-3 costs at least the ideal 10 log10(3) dB against the lone branch
    assert one.branches[0][0].transmission_db - min(three.checks[0].transmission_db) > 10 * np.log10(3)


def test_broadcast_and_allgather_are_checked_by_the_simulator():
    for make in (chain_broadcast, tree_broadcast, flat_broadcast, flat_allgather):
        for n in (2, 3, 5, 8):
            assert simulate(make(n)).complete
    assert simulate(tree_multicast_allreduce(6)).complete
    early = Collective("bad", "broadcast", 3, 1, (Step((Send(1, 2, 0),)),))
    with pytest.raises(CollectiveError, match="does not hold"):
        simulate(early)
    summed = Collective("bad", "allgather", 2, 2, (Step((Send(0, 1, 0, "reduce"),)),))
    with pytest.raises(CollectiveError, match="only copies"):
        simulate(summed)


def test_merging_keeps_data_dependencies():
    assert len(merged_steps(flat_broadcast(4)).steps) == 1
    chain = chain_broadcast(5)
    assert merged_steps(chain).steps == chain.steps  # no fan-out: nothing to merge
    mc = merged_steps(tree_multicast_allreduce(4))
    assert simulate(mc).complete
    assert len(mc.steps) < len(tree_multicast_allreduce(4).steps)


def test_a_tree_carries_a_chunk_once_but_different_chunks_one_after_the_other():
    cost = CostModel(alpha_ms=0.0, gbps=8.0)  # 1 ms per MB
    trees = ((0, (1, 2)),)
    both = {(0, 1): 1e6, (0, 2): 1e6}
    same = tree_step_time_ms(both, {(0, 1): frozenset({0}), (0, 2): frozenset({0})}, trees, cost)[0]
    different = tree_step_time_ms(both, {(0, 1): frozenset({0}), (0, 2): frozenset({1})}, trees, cost)[0]
    assert same == pytest.approx(1.0)
    assert different == pytest.approx(2.0)
    assert tree_step_time_ms({(1, 0): 1e6}, {(1, 0): frozenset({0})}, trees, cost)[0] == np.inf


def test_multicast_broadcast_beats_point_to_point_where_the_budget_allows():
    fab = slot_fabric("smartlight", 4)
    names = rank_names(fab, 4)
    mc = compile_collective(flat_broadcast(4), fab, names, size_bytes=64e6, multicast=True)
    chain = compile_collective(chain_broadcast(4), fab, names, size_bytes=64e6)
    assert mc.multicast_rounds == 1
    assert len(mc.rounds) == 1
    assert mc.completion_ms == pytest.approx(0.01 + 64e6 * 8 / 10e9 * 1e3)  # one alpha + the buffer once
    assert mc.completion_ms < chain.completion_ms
    assert mc.first_run_ms > mc.completion_ms  # the first run pays the switch from a parked chip


def test_no_tree_wider_than_the_budget_and_multicast_used_only_where_it_pays():
    fab = slot_fabric("smartlight", 8)
    names = rank_names(fab, 8)
    mc = compile_collective(flat_broadcast(8), fab, names, size_bytes=1e6, multicast=True)
    trees = [c for c in mc.configs if c.trees]
    assert trees
    assert all(c.worst_margin_db >= 3.0 for c in trees)
    assert max(len(ds) for c in trees for _, ds in c.trees) <= 3
    p2p = compile_collective(flat_broadcast(8), fab, names, size_bytes=1e6)
    assert mc.completion_ms <= p2p.completion_ms  # the DP keeps point-to-point rounds when trees lose


def test_ring_allreduce_is_unchanged_by_the_multicast_option():
    fab = slot_fabric("smartlight", 4)
    names = rank_names(fab, 4)
    a = compile_collective(by_pattern("ring", 4), fab, names, size_bytes=8e6)
    b = compile_collective(by_pattern("ring", 4), fab, names, size_bytes=8e6, multicast=True)
    assert a.completion_ms == b.completion_ms
    assert b.multicast_rounds == 0
