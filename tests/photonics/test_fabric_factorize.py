"""The 1-factorization search, on acceptance rules small enough to reason about."""

from __future__ import annotations

import itertools

import pytest

from photonics.fabric.factorize import (
    canonical,
    complete_pairs,
    factorizations,
    is_factorization,
    perfect_matchings,
    search_factorization,
)


def test_perfect_matchings_of_k6():
    ms = list(perfect_matchings(complete_pairs(range(6))))
    assert len(ms) == len(set(ms)) == 15  # 5 * 3 * 1
    for m in ms:
        assert sorted(v for p in m for v in p) == list(range(6))


def test_factorizations_of_k6_are_the_six_known():
    fs = list(factorizations(complete_pairs(range(6))))
    assert len(fs) == len(set(fs)) == 6  # K6 has exactly six 1-factorizations
    assert all(is_factorization(f, range(6)) for f in fs)


def test_two_regular_graph_with_odd_cycles_has_no_factorization():
    triangles = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]
    assert list(factorizations(triangles)) == []


def _refuse_with(*bad: tuple[int, int]):
    """Accept a matching unless it holds two of the ``bad`` pairs (a synthetic mesh rule)."""
    bad_set = {tuple(sorted(p)) for p in bad}

    def accept(m, thorough=True):
        return sum(p in bad_set for p in m) < 2
    return accept


def test_search_satisfies_a_rule_the_circle_method_breaks():
    # The circle method on 0..7 puts (1, 6) and (2, 5) in one round (r = 0: (r + i, r - i)).
    accept = _refuse_with((1, 6), (2, 5), (3, 4), (0, 7))
    found, stats = search_factorization(list(range(8)), accept, seed=3)
    assert found is not None
    assert is_factorization(found, range(8))
    assert len(found) == 7
    assert all(accept(m) for m in found)
    assert stats.checks <= 400


def test_search_is_deterministic_for_a_seed():
    accept = _refuse_with((0, 1), (2, 3), (4, 5), (6, 7), (8, 9))
    a, _ = search_factorization(list(range(10)), accept, seed=7)
    b, _ = search_factorization(list(range(10)), accept, seed=7)
    assert a is not None
    assert a == b


def test_search_gives_up_within_its_budget():
    calls = []

    def never(m, thorough=True):
        calls.append(m)
        return False
    found, stats = search_factorization(list(range(8)), never, max_checks=25)
    assert found is None
    assert stats.checks == len(calls) <= 25  # every question counted, none asked twice
    assert len(set(calls)) == len(calls)


def test_odd_or_repeated_vertices_refused():
    with pytest.raises(ValueError, match="even"):
        search_factorization([0, 1, 2], lambda m, t=True: True)
    with pytest.raises(ValueError, match="distinct"):
        search_factorization([0, 0, 1, 2], lambda m, t=True: True)


def test_canonical_form():
    assert canonical([(3, 1), (0, 2)]) == ((0, 2), (1, 3))
    assert len(complete_pairs(range(5))) == len(list(itertools.combinations(range(5), 2)))
