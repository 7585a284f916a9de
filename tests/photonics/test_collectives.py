"""Collectives: every schedule moves the data it promises (step-by-step simulation)."""

from __future__ import annotations

import itertools

import pytest

from photonics.collectives import (
    Collective,
    CollectiveError,
    Send,
    Step,
    all_to_all,
    alltoall_goal,
    halving_doubling_allreduce,
    ring_allreduce,
    simulate,
    straggler_allreduce,
    tree_allreduce,
)

ALLREDUCES = [ring_allreduce, tree_allreduce, straggler_allreduce]


@pytest.mark.parametrize("make", ALLREDUCES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [3, 4, 5, 7, 8, 10])
def test_allreduce_leaves_every_rank_with_the_full_sum(make, n):
    coll = make(n)
    out = simulate(coll)
    everyone = frozenset(range(n))
    assert out.complete
    assert all(chunk == everyone for rank in out.holdings for chunk in rank)
    assert len(out.holdings) == n
    assert all(len(r) == coll.n_chunks for r in out.holdings)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_halving_doubling_full_sum_in_2_log2_n_steps(n):
    coll = halving_doubling_allreduce(n)
    assert len(coll.steps) == 2 * (n.bit_length() - 1)
    out = simulate(coll)
    assert all(chunk == frozenset(range(n)) for rank in out.holdings for chunk in rank)


def test_halving_doubling_refuses_other_sizes():
    with pytest.raises(CollectiveError, match="power-of-two"):
        halving_doubling_allreduce(6)


def test_ring_step_count_and_sends():
    coll = ring_allreduce(5)
    assert len(coll.steps) == 8
    assert all(step.pairs == tuple((i, (i + 1) % 5) for i in range(5)) for step in coll.steps)


@pytest.mark.parametrize("combine", [False, True])
@pytest.mark.parametrize("n", [2, 3, 6, 8])
def test_all_to_all_delivers_each_block_exactly_once(n, combine):
    coll = all_to_all(n, combine=combine)
    out = simulate(coll)
    goal = alltoall_goal(n, combine)
    assert set(out.deliveries) == set(goal)
    assert all(v == 1 for v in out.deliveries.values())
    for block, dst in goal.items():
        assert block in out.holdings[dst]
    # dispatch: rank d ends with the block every other rank had for it
    for s, d in itertools.permutations(range(n), 2):
        assert s * n + d in out.holdings[d]


def test_combine_cannot_run_before_dispatch():
    n = 3
    # rank 1 returns rank 0's expert output before rank 0's block reached it
    bad = Collective("early", "alltoall", n, 2 * n * n,
                     (Step((Send(1, 0, n * n + 0 * n + 1),)),), combine=True)
    with pytest.raises(CollectiveError, match="does not hold"):
        simulate(bad)


def test_double_reduction_is_caught():
    steps = (Step((Send(0, 1, 0, "reduce"),)), Step((Send(0, 1, 0, "reduce"),)))
    with pytest.raises(CollectiveError, match="twice"):
        simulate(Collective("twice", "allreduce", 2, 1, steps))


def test_incomplete_allreduce_names_what_is_missing():
    coll = Collective("half", "allreduce", 3, 1, (Step((Send(0, 1, 0, "reduce"),)),))
    with pytest.raises(CollectiveError, match="rank 0 chunk 0 lacks"):
        simulate(coll)
    assert not simulate(coll, strict=False).complete


def test_duplicate_delivery_is_not_complete():
    n = 2
    steps = (Step((Send(0, 1, 1), Send(1, 0, 2))), Step((Send(0, 1, 1),)))
    out = simulate(Collective("dup", "alltoall", n, n * n, steps), strict=False)
    assert not out.complete
    assert "delivered 2 times" in out.missing


def test_straggler_lags_only_its_rank_and_starts_without_it():
    coll = straggler_allreduce(6, slow=2, lag_ms=7.5)
    assert coll.lag_ms == {2: 7.5}
    fast_phase = [s for s in coll.steps if s.label.startswith("fast")]
    assert fast_phase
    assert all(2 not in p for s in fast_phase for p in s.pairs)


def test_bad_sends_are_refused_with_the_step():
    with pytest.raises(CollectiveError, match="step 1: chunk 5"):
        Collective("x", "allreduce", 2, 2, (Step((Send(0, 1, 5),)),))
    with pytest.raises(CollectiveError, match="sends to itself"):
        Collective("x", "allreduce", 2, 2, (Step((Send(1, 1, 0),)),))
