"""Compiled collectives: every send rides a circuit of the configuration it runs on."""

from __future__ import annotations

import itertools
import math

import pytest

from photonics.collectives import (
    CollectiveError,
    CostModel,
    all_to_all,
    compile_collective,
    fixed_time_ms,
    halving_doubling_allreduce,
    rank_names,
    ring_allreduce,
    slot_fabric,
    straggler_allreduce,
    tree_allreduce,
)
from photonics.routing import conflicts


@pytest.fixture(scope="module")
def fabric():
    return slot_fabric("smartlight", 8)


@pytest.fixture(scope="module")
def compiled(fabric):
    """``compiled(make, size_bytes)``: ``make(8)`` compiled on the module's fabric, once per
    worker. Several tests ask for the same ones (the all-to-all at 1 MB and 4 GB, the ring at
    64 MB), each a few seconds of CPU; the tests only read the results."""
    cache = {}

    def get(make, size_bytes):
        if (make, size_bytes) not in cache:
            cache[make, size_bytes] = compile_collective(make(8), fabric, rank_names(fabric, 8),
                                                         size_bytes=size_bytes)
        return cache[make, size_bytes]

    return get


def _check_rounds(result, fabric):
    names = result.ranks
    sets = result.configs
    for rnd in result.rounds:
        cs = sets[rnd.config]
        route_of = dict(zip(cs.links, cs.configuration.routes, strict=True))
        assert not conflicts(fabric.mesh, list(cs.configuration.routes))
        for pair, path in rnd.paths.items():
            assert path[0] == pair[0]
            assert path[-1] == pair[1]
            for u, v in itertools.pairwise(path):
                assert (u, v) in route_of, f"{rnd.label}: hop {u}->{v} is no circuit of config {cs.index}"
                r = route_of[(u, v)]
                assert r.src in fabric.accelerator(names[u]).tx
                assert r.dst in fabric.accelerator(names[v]).rx


def _check_coverage(result):
    coll = result.collective
    chunk = coll.chunk_bytes(result.size_bytes)
    for k, step in enumerate(coll.steps):
        moved = {}
        for rnd in result.rounds:
            if rnd.step == k:
                for p, b in rnd.transfers.items():
                    moved[p] = moved.get(p, 0.0) + b
        assert moved == pytest.approx({p: step.chunks_on(*p) * chunk for p in step.pairs})


@pytest.mark.slow
@pytest.mark.parametrize("make", [ring_allreduce, tree_allreduce, halving_doubling_allreduce,
                                  all_to_all, straggler_allreduce], ids=lambda f: f.__name__)
@pytest.mark.parametrize("size_mb", [1, 4000])
def test_every_send_is_a_circuit_of_its_configuration(fabric, compiled, make, size_mb):
    result = compiled(make, size_mb * 1e6)
    _check_rounds(result, fabric)
    _check_coverage(result)
    assert result.completion_ms > 0
    # rounds run one after another
    ends = [r.end_ms for r in result.rounds]
    assert ends == sorted(ends)


@pytest.mark.slow
def test_small_buffers_keep_the_ring_large_ones_reconfigure(compiled):
    small = compiled(all_to_all, 1e6)
    large = compiled(all_to_all, 4e9)
    assert small.switches == 0
    assert small.completion_ms == pytest.approx(small.fixed_ms["ring"])
    assert large.switches > 0
    assert large.completion_ms < large.fixed_ms["ring"]
    assert any(r.mode == "reconfigure" and r.switch_ms > 0 for r in large.rounds)


@pytest.mark.slow
def test_never_worse_than_the_fixed_ring_it_can_fall_back_to(compiled):
    for make in (tree_allreduce, halving_doubling_allreduce, ring_allreduce):
        res = compiled(make, 64e6)
        assert res.completion_ms <= res.fixed_ms["ring"] + 1e-9


def test_fixed_ring_matches_the_alpha_beta_formula():
    n, size = 6, 60e6
    cost = CostModel(alpha_ms=0.01, gbps=10.0)
    expected = 2 * (n - 1) * (0.01 + size / n * 8 / 10e9 * 1e3)
    assert fixed_time_ms(ring_allreduce(n), "ring", size, cost) == pytest.approx(expected)


def test_torus_needs_a_composite_size():
    res = compile_collective(ring_allreduce(7), slot_fabric("smartlight", 7),
                             rank_names(slot_fabric("smartlight", 7), 7), size_bytes=1e6)
    assert res.fixed_ms["torus"] is None
    assert math.isfinite(res.fixed_ms["ring"])


def test_straggler_beats_a_late_ring_when_the_lag_is_long(fabric):
    names = rank_names(fabric, 8)
    lag = 200.0
    strag = compile_collective(straggler_allreduce(8, lag_ms=lag), fabric, names, size_bytes=64e6)
    ring = compile_collective(ring_allreduce(8), fabric, names, size_bytes=64e6)
    assert strag.completion_ms < ring.completion_ms + lag
    # nothing the straggler sends or receives starts before it arrives
    for r in strag.rounds:
        if any(7 in p for p in r.transfers):
            assert r.start_ms >= lag


def test_too_many_ranks_is_refused(fabric):
    with pytest.raises(CollectiveError, match="fewer than 12 ranks"):
        rank_names(fabric, 12)
    with pytest.raises(CollectiveError, match="different accelerators"):
        compile_collective(ring_allreduce(3), fabric, ["gpu0", "gpu0", "gpu1"], size_bytes=1e6)


def test_forwarding_shares_circuits_and_counts_hops():
    from photonics.collectives import shortest_paths, step_time_ms

    cost = CostModel(alpha_ms=1.0, gbps=8.0)  # 1 ms per hop, 1 byte per ns: 1e6 bytes take 1 ms
    paths = shortest_paths([(0, 1), (1, 2), (2, 3), (3, 0)], 4)
    t, used = step_time_ms({(0, 2): 1e6, (1, 2): 1e6}, paths, cost)
    assert used == {(0, 2): [0, 1, 2], (1, 2): [1, 2]}
    # circuit 1->2 carries both transfers (2 ms of bytes); the longest path has 2 hops
    assert t == pytest.approx(2 * 1.0 + 2.0)
    t, used = step_time_ms({(0, 2): 1e6}, shortest_paths([(0, 1)], 4), cost)
    assert t == math.inf
    assert used == {}


def test_torus_links():
    from photonics.collectives import fixed_edges

    edges = fixed_edges("torus", 8)  # 2 x 4
    out_degree = {r: sum(1 for a, _ in edges if a == r) for r in range(8)}
    assert set(out_degree.values()) == {3}  # 2 rows: up and down are the same neighbour
    assert (0, 1) in edges
    assert (1, 0) in edges
    assert (0, 4) in edges
    with pytest.raises(CollectiveError, match="no such factors"):
        fixed_edges("torus", 7)


def test_a_fabric_keeps_its_routed_circuit_sets_across_compilations(monkeypatch):
    """The rounds of a collective do not depend on its buffer size, and every compilation
    places the same ring fallback: a second compilation on the same fabric routes nothing it
    routed before and gives the same configurations; another fabric routes its own.
    """
    from photonics.collectives import compile as compile_module

    calls = []
    real = compile_module.route_links
    monkeypatch.setattr(compile_module, "route_links", lambda *a, **k: calls.append(a) or real(*a, **k))
    fab = slot_fabric("smartlight", 4)
    names = rank_names(fab, 4)
    small = compile_collective(ring_allreduce(4), fab, names, size_bytes=1e6)
    routed = len(calls)
    large = compile_collective(ring_allreduce(4), fab, names, size_bytes=4e9)
    assert routed > 0
    assert len(calls) == routed
    assert [(c.links, c.ports, c.worst_loss_db) for c in large.configs] == \
        [(c.links, c.ports, c.worst_loss_db) for c in small.configs]
    compile_collective(ring_allreduce(4), slot_fabric("smartlight", 4), names, size_bytes=1e6)
    assert len(calls) == 2 * routed
