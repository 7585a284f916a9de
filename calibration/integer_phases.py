"""Phases from integer combinations of them, modulo 2 pi: ``A @ c = b (mod 2 pi)``.

An interferometer's fringe gives the sum of the common phases on one arm less those on the
other (``A`` has entries +1, -1, 0). Modulo 2 pi such a system is not solved by real linear
algebra: ``c1 + c2 = b1`` and ``c1 - c2 = b2`` fix ``c1`` only modulo pi, and which half is
right only a third combination can say. Row and column operations with integer coefficients
and determinant +-1 are exact modulo 2 pi, so a diagonal form ``P A Q = D``
(:func:`diagonal_form`) solves the system: ``y = Q^-1 c`` has ``d_i y_i = (P b)_i``, and every
choice of the ``d_i`` turns of ``y_i`` satisfies every row. :func:`refines` says whether a new
row tells what the rows already taken do not (it is not an integer combination of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TWO_PI = 2 * np.pi


def diagonal_form(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Unimodular integer ``p`` (m x m) and ``q`` (n x n) with ``p @ a @ q`` diagonal, the
    diagonal (length min(m, n), nonzero first) and the rank.

    Example:
        >>> p, d, q, r = diagonal_form(np.array([[1, 1], [1, -1]]))
        >>> sorted(np.abs(d).tolist()), r
        ([1, 2], 2)
    """
    a = np.array(a, dtype=np.int64)
    m, n = a.shape
    p, q = np.eye(m, dtype=np.int64), np.eye(n, dtype=np.int64)
    rank = 0
    while rank < min(m, n):
        sub = np.abs(a[rank:, rank:])
        if not sub.any():
            break
        while True:
            masked = np.where(sub > 0, sub, np.iinfo(np.int64).max)
            i, j = np.unravel_index(int(np.argmin(masked)), masked.shape)
            i, j = i + rank, j + rank
            a[[rank, i]], p[[rank, i]] = a[[i, rank]], p[[i, rank]]
            a[:, [rank, j]], q[:, [rank, j]] = a[:, [j, rank]], q[:, [j, rank]]
            piv = a[rank, rank]
            f = a[:, rank] // piv
            f[rank] = 0
            a -= np.outer(f, a[rank])
            p -= np.outer(f, p[rank])
            g = a[rank] // piv
            g[rank] = 0
            a -= np.outer(a[:, rank], g)
            q -= np.outer(q[:, rank], g)
            if not a[rank + 1:, rank].any() and not a[rank, rank + 1:].any():
                break
            sub = np.abs(a[rank:, rank:])  # remainders smaller than the pivot: take one as pivot
        rank += 1
    return p, np.diagonal(a).copy(), q, rank


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A solution ``c`` in [0, 2 pi) of ``a @ c = b (mod 2 pi)`` for integer ``a`` (rows may be
    dependent: their disagreement, with noisy ``b``, is left to the caller's refinement);
    directions no row sees stay 0.
    """
    p, d, q, rank = diagonal_form(a)
    pb = p @ np.asarray(b, float)
    y = np.zeros(a.shape[1])
    y[:rank] = pb[:rank] / d[:rank]
    return np.mod(q @ y, TWO_PI)


def refines(taken: np.ndarray, row: np.ndarray) -> bool:
    """Whether ``row`` is not an integer combination of the rows ``taken`` (it then tells a
    phase combination, or a turn of one, that they leave open).
    """
    return Lattice.of(taken).refined_by(row)


@dataclass(frozen=True)
class Lattice:
    """The integer combinations of some rows, in diagonal form (:func:`diagonal_form`), to
    test many rows against one set (the form is the costly part of :func:`refines`).

    Attributes:
        d: the diagonal (nonzero first); empty when there are no rows.
        q: the unimodular column transform; None when there are no rows.
        rank: how many of ``d`` are nonzero.
    """

    d: np.ndarray
    q: np.ndarray | None
    rank: int

    @classmethod
    def of(cls, taken: np.ndarray) -> Lattice:
        """The lattice of the rows ``taken`` (m x n, integer-valued)."""
        if not len(taken):
            return cls(np.zeros(0, np.int64), None, 0)
        _, d, q, rank = diagonal_form(taken)
        return cls(d, q, rank)

    def refined_by(self, row: np.ndarray) -> bool:
        """Whether ``row`` is not in the lattice (see :func:`refines`)."""
        if self.q is None:
            return bool(np.any(row))
        x = np.rint(row).astype(np.int64) @ self.q
        if x[self.rank:].any():
            return True
        return bool((x[:self.rank] % self.d[:self.rank]).any())
