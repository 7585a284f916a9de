"""Clements decomposition of a unitary into a rectangular lattice of 2x2 blocks.

Clements et al., "Optimal design for universal multiport interferometers", Optica 3, 1460
(2016): null the entries below the anti-diagonals alternately from the right (columns) and
from the left (rows), then push the left-hand blocks through the remaining diagonal, so
that ``U = D B_K ... B_1`` with every ``B_k`` acting on neighbouring modes ``(m, m + 1)``
and ``D`` diagonal. The blocks fill ``N`` columns of a rectangular lattice
(:func:`lattice_columns`), ``N (N - 1) / 2`` in all.

Each block is ``[[e^{j phi} cos(theta), -sin(theta)], [e^{j phi} sin(theta), cos(theta)]]``
on modes ``(m, m + 1)``: ``cos(theta)^2`` of mode ``m``'s power stays on ``m``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photonics.errors import StateError

UNITARY_TOL = 1e-8  # largest |U^H U - I| entry accepted as unitary (a target typed to 9 digits)


@dataclass(frozen=True)
class Block:
    """One 2x2 block on modes ``(m, m + 1)`` (angles in rad)."""

    m: int
    theta: float
    phi: float

    def matrix(self) -> np.ndarray:
        """The 2x2 matrix of the block."""
        c, s, e = np.cos(self.theta), np.sin(self.theta), np.exp(1j * self.phi)
        return np.array([[e * c, -s], [e * s, c]])


def _embed(n: int, m: int, b: np.ndarray) -> np.ndarray:
    out = np.eye(n, dtype=complex)
    out[m:m + 2, m:m + 2] = b
    return out


def _angles(r: complex | None) -> tuple[float, float]:
    """theta, phi of the block whose ratio of entries is ``r`` (None: the divisor is 0)."""
    if r is None:
        return np.pi / 2, 0.0
    return float(np.arctan(abs(r))), float(np.angle(r))


def check_unitary(u: np.ndarray) -> np.ndarray:
    """``u`` as a complex square array, or :class:`StateError` saying why it is not unitary."""
    u = np.asarray(u, dtype=complex)
    if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] < 2:
        raise StateError(f"a unitary target must be a square matrix of size >= 2, not shape {u.shape}")
    err = float(np.abs(u.conj().T @ u - np.eye(len(u))).max())
    if not np.isfinite(err) or err > UNITARY_TOL:
        raise StateError(f"the target is not unitary (largest |U^H U - I| entry {err:.2g} > {UNITARY_TOL}); "
                         "give a unitary matrix, or port powers for a splitter")
    return u


def decompose(u: np.ndarray) -> tuple[list[Block], np.ndarray]:
    """Blocks ``B_1 .. B_K`` (in the order light meets them) and ``D`` with ``U = D B_K .. B_1``."""
    u = check_unitary(u).copy()
    n = len(u)
    right: list[Block] = []  # applied as B^-1 from the right: they act first on the light
    left: list[Block] = []  # applied from the left
    for k, i in enumerate(range(n - 2, -1, -1)):
        if k % 2 == 0:
            for j in reversed(range(n - 1 - i)):
                row, col = i + j + 1, j  # null u[row, col] with a block on columns (col, col+1)
                den = u[row, col + 1]
                blk = Block(col, *_angles(None if den == 0 else u[row, col] / den))
                u = u @ np.linalg.inv(_embed(n, col, blk.matrix()))
                right.append(blk)
        else:
            for j in range(n - 1 - i):
                row, col = i + j + 1, j  # null u[row, col] with a block on rows (row-1, row)
                den = u[row - 1, col]
                blk = Block(row - 1, *_angles(None if den == 0 else -u[row, col] / den))
                u = _embed(n, row - 1, blk.matrix()) @ u
                left.append(blk)
    d = np.diag(u).copy()
    # U = L_1^-1 .. L_p^-1 D R_q .. R_1: push D to the far left through every L^-1
    after: list[Block] = []
    for blk in reversed(left):
        sub = np.linalg.inv(blk.matrix()) @ np.diag(d[blk.m:blk.m + 2])
        phase, moved = _split_phases(sub)
        d[blk.m:blk.m + 2] = phase
        after.append(Block(blk.m, moved.theta, moved.phi))
    return right + after, d  # after: B'_p .. B'_1, the order light meets them


def _split_phases(sub: np.ndarray) -> tuple[np.ndarray, Block]:
    """``sub = diag(e^{j a}, e^{j b}) B(theta, phi)`` for a 2x2 unitary ``sub``."""
    c = abs(sub[1, 1])
    theta = float(np.arccos(min(1.0, c)))
    b = np.angle(sub[1, 1]) if c > 1e-12 else np.angle(sub[1, 0])
    a = np.angle(-sub[0, 1]) if np.sin(theta) > 1e-12 else np.angle(sub[0, 0])
    ref = sub[1, 0] if np.sin(theta) > 1e-12 else sub[0, 0]
    phi = float(np.angle(ref) - (b if np.sin(theta) > 1e-12 else a))
    return np.exp(1j * np.array([a, b])), Block(0, theta, phi)


def reconstruct(blocks: list[Block], d: np.ndarray) -> np.ndarray:
    """``D B_K .. B_1`` as a matrix (the decomposition's check)."""
    n = len(d)
    u = np.eye(n, dtype=complex)
    for blk in blocks:
        u = _embed(n, blk.m, blk.matrix()) @ u
    return np.diag(d) @ u


def lattice_columns(blocks: list[Block], n: int) -> list[int]:
    """Column of every block in the rectangular lattice: the earliest after both its modes'
    previous blocks, in the column parity of its pair (pairs (m, m+1) with ``m`` even in
    even columns).
    """
    free = np.zeros(n + 1, dtype=int)  # first column each mode is free from
    cols = []
    for blk in blocks:
        c = max(free[blk.m], free[blk.m + 1])
        if c % 2 != blk.m % 2:
            c += 1
        cols.append(c)
        free[blk.m] = free[blk.m + 1] = c + 1
    return cols
