"""A job's communication pattern as rounds of directed logical links between its accelerators.

A round is one set of circuits lit at the same time: a ring or a line is one round; an
all-to-all is time-multiplexed over the circle-method matchings (``n - 1`` rounds for even
``n``, ``n`` for odd ``n``), each pair of a matching joined both ways.
"""

from __future__ import annotations

from collections.abc import Sequence

from photonics.fabric import circle_factorization, line_job, ring_job

Link = tuple[str, str]
Rounds = tuple[tuple[Link, ...], ...]


def logical_rounds(pattern: str, members: Sequence[str]) -> Rounds:
    """Rounds of directed links ``(a, b)`` (a's TX lane to b's RX lane) for ``pattern`` over ``members``.

    Example:
        >>> logical_rounds("ring", ["a", "b", "c"])
        ((('a', 'b'), ('b', 'c'), ('c', 'a')),)
        >>> len(logical_rounds("all-to-all", ["a", "b", "c", "d"]))
        3
    """
    if pattern == "ring":
        return (ring_job(members).links,)
    if pattern == "line":
        return (line_job(members).links,)
    if pattern == "all-to-all":
        n = len(members)
        even = n + n % 2  # odd n: a dummy vertex, whose partner sits the round out
        rounds = []
        for matching in circle_factorization(even):
            links: list[Link] = []
            for i, j in matching:
                if i < n and j < n:
                    links += [(members[i], members[j]), (members[j], members[i])]
            rounds.append(tuple(links))
        return tuple(rounds)
    raise ValueError(f"unknown pattern {pattern!r}")


def members_of(rounds: Rounds) -> tuple[str, ...]:
    """Accelerators named in ``rounds``, in first-seen order."""
    return tuple(dict.fromkeys(a for r in rounds for link in r for a in link))
