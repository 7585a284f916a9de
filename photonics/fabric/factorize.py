"""Search for a 1-factorization of K_N whose every matching passes a check (routes on a mesh).

The circle method gives one 1-factorization of K_N; a mesh may fail to route some of its
matchings under every relabeling of the ports. This module searches the 1-factorizations
themselves. It is pure combinatorics: whether a matching is acceptable is a callable
(:func:`photonics.fabric.matchings.schedule` passes "routes conflict-free within the link
budget", memoised), and the search only decides which matchings to ask about.

**Greedy with an exhaustive end game.** Matchings are taken one at a time from the pairs
still uncovered (a regular graph whose degree drops by one per matching): a few random
perfect matchings of it are drawn, the ones whose pairs' shortest routes collide least
are asked first, and the first acceptable one is kept. Once the uncovered graph is
:data:`END_DEGREE`-regular, every 1-factorization of it is enumerated (a cubic graph on
16 vertices has a few dozen). When none is acceptable the search repairs instead of
restarting: it returns one kept matching to the uncovered pairs and enumerates the
1-factorizations of that union (on the alternating cycles of the two, the pairs can be
re-split), and only when no repair works does it drop the latest matchings and redraw.

**Bounded.** Every question asked counts against ``max_checks`` (a count, not a clock, so
a seed gives the same answer on a loaded machine); the search returns None when it is
spent, and the caller falls back to what it had.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Pair = tuple[int, int]  # (low, high) vertex labels
Matching = tuple[Pair, ...]  # sorted pairs: one canonical form per matching
Option = tuple[list[Matching], tuple[Matching, ...]]  # (matchings kept, a factorization of the rest)

# Below this degree the uncovered graph is split exhaustively: a cubic graph on 16
# vertices has a few dozen 1-factorizations, a 4-regular one can have thousands.
END_DEGREE = 3
# Random perfect matchings drawn (and asked, least colliding first) per greedy step.
# 24 draws cost microseconds and give the collision score enough choice.
DRAWS_PER_STEP = 24
# Latest matchings dropped when neither a step nor its repair succeeds, times the number of
# times it happened: one more than the repair already re-splits, so the redraw changes what
# the repair could not; growing, so pairs that keep the end game stuck are reached early.
BACKTRACK = 2
# Questions between two progress reports inside a step (an end game can ask dozens).
PROGRESS_EVERY = 10


def pair(a: int, b: int) -> Pair:
    """The canonical (low, high) form of a pair."""
    return (a, b) if a < b else (b, a)


def canonical(pairs: Iterable[Sequence[int]]) -> Matching:
    """The canonical form of a matching: each pair (low, high), pairs sorted."""
    return tuple(sorted(pair(int(a), int(b)) for a, b in pairs))


def complete_pairs(verts: Sequence[int]) -> frozenset[Pair]:
    """Every pair of ``verts`` (the edges of K_N)."""
    return frozenset(pair(a, b) for a, b in itertools.combinations(verts, 2))


def is_factorization(matchings: Sequence[Matching], verts: Sequence[int]) -> bool:
    """Whether ``matchings`` are perfect matchings of ``verts`` covering every pair once."""
    every = sorted(p for m in matchings for p in m)
    perfect = all(sorted(v for p in m for v in p) == sorted(verts) for m in matchings)
    return perfect and every == sorted(complete_pairs(verts))


def _adjacency(edges: Iterable[Pair]) -> dict[int, set[int]]:
    adj: dict[int, set[int]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    return adj


def perfect_matchings(edges: Iterable[Pair]) -> Iterator[Matching]:
    """Every perfect matching of the graph ``edges`` (exhaustive; for sparse graphs).

    Example:
        >>> list(perfect_matchings([(0, 1), (1, 2), (2, 3), (0, 3)]))
        [((0, 1), (2, 3)), ((0, 3), (1, 2))]
    """
    adj = _adjacency(edges)

    def extend(free: frozenset[int], chosen: tuple[Pair, ...]) -> Iterator[Matching]:
        if not free:
            yield tuple(sorted(chosen))
            return
        v = min(free)
        for u in sorted(adj[v] & free):
            yield from extend(free - {u, v}, (*chosen, pair(u, v)))

    yield from extend(frozenset(adj), ())


def factorizations(edges: Iterable[Pair]) -> Iterator[tuple[Matching, ...]]:
    """Every 1-factorization of the regular graph ``edges``, each once (matchings sorted).

    Exhaustive (a matching, then the factorizations of the rest): meant for degree at
    most :data:`END_DEGREE`.

    Example:
        >>> sorted(factorizations([(0, 1), (1, 2), (2, 3), (0, 3)]))
        [(((0, 1), (2, 3)), ((0, 3), (1, 2)))]
    """
    edges = frozenset(edges)
    if not edges:
        yield ()
        return
    first = min(edges)  # the matching holding it comes first: each factorization once
    for m in perfect_matchings(edges):
        if first in m:
            for rest in factorizations(edges - set(m)):
                yield (m, *rest)


def random_matching(edges: frozenset[Pair], rng: np.random.Generator) -> Matching | None:
    """A random perfect matching of ``edges`` (greedy, least-free-neighbours first), or None.

    The vertex with the fewest free neighbours is matched first (ties at random) so the
    greedy rarely paints itself into a corner; None if it does.
    """
    adj = _adjacency(edges)
    free = set(adj)
    out: list[Pair] = []
    while free:
        keys = {v: (len(adj[v] & free), rng.random()) for v in free}
        v = min(free, key=keys.__getitem__)
        cand = sorted(adj[v] & free)
        if not cand:
            return None
        u = cand[int(rng.integers(len(cand)))]
        out.append(pair(u, v))
        free -= {u, v}
    return canonical(out)


def collisions(matching: Matching, clash: Mapping[Pair, frozenset[Pair]]) -> int:
    """How many two-pair subsets of ``matching`` collide in ``clash`` (pair -> colliding pairs)."""
    return sum(b in clash.get(a, ()) for a, b in itertools.combinations(matching, 2))


@dataclass
class SearchStats:
    """What a search did: questions asked, repairs tried and backtracks taken."""

    checks: int = 0
    repairs: int = 0
    backtracks: int = 0
    steps: list[int] = field(default_factory=list)  # matchings kept after each step


class _BudgetSpentError(Exception):
    """The question budget is spent."""


def search_factorization(
    verts: Sequence[int],
    accept: Callable[[Matching, bool], bool],
    *,
    clash: Mapping[Pair, frozenset[Pair]] | None = None,
    seed: int = 0,
    max_checks: int = 400,
    progress: Callable[[int, int, SearchStats], None] | None = None,
) -> tuple[list[Matching] | None, SearchStats]:
    """N - 1 perfect matchings of ``verts`` covering every pair once, each ``accept``-ed.

    Args:
        verts: an even number of distinct vertex labels.
        accept: whether a (canonical) matching is acceptable; called at most once per
            matching, at most ``max_checks`` times in all.
        clash: for each pair, the pairs it tends to conflict with (e.g. whose shortest
            routes share a TBU port); matchings with fewer such collisions are asked first.
        seed: seed of the random draws (same seed, same answers: same result).
        max_checks: the question budget.
        progress: called as ``progress(kept, needed, stats)`` after each step.

    Returns:
        (the matchings, or None when the budget ran out; what the search did).
    """
    n = len(verts)
    if n % 2 or len(set(verts)) != n:
        raise ValueError("a 1-factorization needs an even number of distinct vertices")
    rng = np.random.default_rng(seed)
    clash = clash or {}
    kept: list[Matching] = []
    memo: dict[tuple[Matching, bool], bool] = {}
    stats = SearchStats()

    def score(m: Matching) -> int:
        return collisions(m, clash)

    def ok(m: Matching, thorough: bool = True) -> bool:
        """``accept`` memoised: a quick refusal may be asked again thoroughly, nothing twice."""
        known = {t: memo[(m, t)] for t in (False, True) if (m, t) in memo}
        if any(known.values()):
            return True
        if thorough in known or (not thorough and known):
            return False
        if stats.checks >= max_checks:
            raise _BudgetSpentError
        stats.checks += 1
        memo[(m, thorough)] = bool(accept(m, thorough))
        if progress is not None and stats.checks % PROGRESS_EVERY == 0:
            progress(len(kept), n - 1, stats)
        return memo[(m, thorough)]

    def all_ok(ms: Sequence[Matching], thorough: bool) -> bool:
        order = sorted(ms, key=lambda m: (not any((m, t) in memo for t in (False, True)), score(m)))
        return all(ok(m, thorough) for m in order)  # known answers first, then the least colliding

    def options(base: list[Matching], left: frozenset[Pair]) -> list[Option]:
        """Every 1-factorization of ``left`` (least colliding first), each after ``base``."""
        return [(base, f) for f in sorted(factorizations(left), key=lambda f: sum(score(m) for m in f))]

    def settle(opts: list[Option]) -> list[Matching] | None:
        """The first option whose matchings are all accepted: every option asked quickly
        first (cheap refusals), then thoroughly, those with fewest matchings still in doubt
        first (often one thorough question settles them).
        """
        def doubtful(f: tuple[Matching, ...]) -> int:
            return sum(not (memo.get((m, False)) or memo.get((m, True))) for m in f)

        for thorough in (False, True):
            order = sorted(opts, key=lambda o: doubtful(o[1])) if thorough else opts
            found = next(([*base, *f] for base, f in order if all_ok(f, thorough)), None)
            if found is not None:
                return found
        return None

    def repair(kept: list[Matching], left: frozenset[Pair]) -> list[Matching] | None:
        """Re-split the uncovered pairs together with one kept matching (alternating cycles)."""
        stats.repairs += 1
        return settle([o for i in rng.permutation(len(kept))
                       for o in options([*kept[:i], *kept[i + 1:]], left | frozenset(kept[i]))])

    def step(kept: list[Matching], left: frozenset[Pair]) -> list[Matching] | None:
        """The kept matchings after one more step, or None when the step is stuck."""
        degree = 2 * len(left) // n
        if degree > END_DEGREE - 1:
            draws = list(dict.fromkeys(m for _ in range(DRAWS_PER_STEP) if (m := random_matching(left, rng))))
            asks = sorted(draws, key=score)  # stable: ties keep the draw order
            return next(([*kept, m] for m in asks if ok(m)), None)
        return settle(options(kept, left)) or repair(kept, left)

    left = complete_pairs(verts)
    try:
        while left:
            nxt = step(kept, left)
            if nxt is None:
                stats.backtracks += 1
                nxt = kept[:max(0, len(kept) - BACKTRACK * stats.backtracks)]
            kept = nxt
            left = complete_pairs(verts) - {p for m in kept for p in m}
            stats.steps.append(len(kept))
            if progress is not None:
                progress(len(kept), n - 1, stats)
    except _BudgetSpentError:
        return None, stats
    return kept, stats
