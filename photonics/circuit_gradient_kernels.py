"""Compiled kernels of the circuit gradient (numba): the merge with its eliminations kept,
and the top-down pass that recovers every internal wave from them.

:mod:`photonics.circuit_gradient` explains the algebra. These kernels read the same merge
table and pool as :mod:`photonics.circuit_kernels` (same columns, same ports, same order),
one (state, wavelength) block at a time, on plain complex arrays:

* :func:`forward_blocks` runs every merge of the tree, keeping each node's matrix in the
  block's arena (exactly where :func:`photonics.circuit_kernels.solve_blocks` puts it) and
  each merge's elimination ``W = G^-1 [X A_ce, B_t]`` (the waves entering A on the cut per
  unit wave entering the merged node) in a second store;
* :func:`field_blocks` walks the tree root first: given the waves entering the root (the
  mesh ports) for a set of excitations, every merge hands its halves the waves entering
  their ports, ``u = W x`` on A's cut and ``v = T (A_cc u + A_ce x_A)`` on B's, down to the
  four waves entering every TBU.

Same conventions as the production kernels: no pivoting (passive networks keep every
round trip well conditioned; a non-finite result is reported by the caller), no
``fastmath`` (seeded results are the same bytes on every machine), ``nogil`` (the caller's
worker threads run chunks of blocks side by side), ``cache=True``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from photonics.merge_layout import LEAF_SIZE

OUT, A_OFF, A_P, B_OFF, B_P, K, EA, EB, IDX = range(9)  # merge-table columns (circuit_kernels')

_JIT = {"nogil": True, "error_model": "numpy", "cache": True}


@nb.njit(**_JIT)
def _leaves(ar: np.ndarray, T: np.ndarray) -> None:
    """TBU scattering matrices into one block's arena: ``b[2+i] = T[i, j] a[j]`` and
    ``b[j] = T[i, j] a[2+i]`` (ports 0, 1 at end a; 2, 3 at end b); ``T`` is (n_tbus, 4).
    """
    for t in range(T.shape[0]):
        base = LEAF_SIZE * t
        for q in range(LEAF_SIZE):
            ar[base + q] = 0.0
        for i in range(2):
            for c in range(2):
                v = T[t, 2 * i + c]
                ar[base + (2 + i) * 4 + c] = v
                ar[base + c * 4 + 2 + i] = v


@nb.njit(**_JIT)
def _merge_keep(ar: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray,
                w: np.ndarray, w_off: int, g: np.ndarray) -> None:
    """One merge on a block's arena ``ar``; writes ``W`` (k x ne, row-major) at ``w[w_off:]``.

    ``g`` is scratch of at least k (k + ne) + k^2 + k eb entries: ``[G | X A_ce | B_t]``
    reduced in place by Gauss-Jordan to ``[I | W]``, then ``X``, then ``V = A_cc W_B``.
    """
    a_off, a_p, b_off, b_p = mg[A_OFF], mg[A_P], mg[B_OFF], mg[B_P]
    k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
    ne = ea + eb
    ca, cb, ka, kb, lk = ix, ix + k, ix + 2 * k, ix + 2 * k + ea, ix + 2 * k + ea + eb
    wg = k + ne
    xo, vo = k * wg, k * wg + k * k  # X and V = A_cc W_B after the system
    for i in range(k):  # X = T B_cc T
        ti = t_link[pool[lk + i]]
        rb = b_off + pool[cb + i] * b_p
        for q in range(k):
            g[xo + i * k + q] = ti * t_link[pool[lk + q]] * ar[rb + pool[cb + q]]
    for i in range(k):  # [G | X A_ce | B_t], G = I - X A_cc, B_t = T B_ce
        ti = t_link[pool[lk + i]]
        rb = b_off + pool[cb + i] * b_p
        for c in range(k + ea):
            col = pool[ca + c] if c < k else pool[ka + c - k]
            acc = 0.0j
            for q in range(k):
                acc += g[xo + i * k + q] * ar[a_off + pool[ca + q] * a_p + col]
            g[i * wg + c] = -acc if c < k else acc
        g[i * wg + i] += 1.0
        for j in range(eb):
            g[i * wg + k + ea + j] = ti * ar[rb + pool[kb + j]]
    for j in range(k):  # Gauss-Jordan, no pivoting
        piv = 1.0 / g[j * wg + j]
        for c in range(j + 1, wg):
            g[j * wg + c] *= piv
        for i in range(k):
            if i != j:
                f = g[i * wg + j]
                for c in range(j + 1, wg):
                    g[i * wg + c] -= f * g[j * wg + c]
    for i in range(k):
        for c in range(ne):
            w[w_off + i * ne + c] = g[i * wg + k + c]
    for q in range(k):  # V = A_cc W_B
        for j in range(eb):
            acc = 0.0j
            for m in range(k):
                acc += ar[a_off + pool[ca + q] * a_p + pool[ca + m]] * w[w_off + m * ne + ea + j]
            g[vo + q * eb + j] = acc
    _write_merged(ar, mg, pool, t_link, w, w_off, g[vo:])


@nb.njit(**_JIT)
def _write_merged(ar: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray,
                  w: np.ndarray, w_off: int, v: np.ndarray) -> None:
    """The merged matrix from ``W``: ``[[A_ee + A_ce^T W_A, A_ce^T W_B], [.^T, B_ee +
    B_t^T V]]`` with ``V = A_cc W_B`` (k x eb) given (symmetric: the upper triangle is
    computed, the lower mirrored).
    """
    out, a_off, a_p, b_off, b_p = mg[OUT], mg[A_OFF], mg[A_P], mg[B_OFF], mg[B_P]
    k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
    ne = ea + eb
    ca, cb, ka, kb, lk = ix, ix + k, ix + 2 * k, ix + 2 * k + ea, ix + 2 * k + ea + eb
    for i in range(ea):
        ra = a_off + pool[ka + i] * a_p
        for j in range(i, ne):
            acc = ar[ra + pool[ka + j]] if j < ea else 0.0j
            for q in range(k):
                acc += ar[a_off + pool[ca + q] * a_p + pool[ka + i]] * w[w_off + q * ne + j]
            ar[out + i * ne + j] = acc
    for i in range(eb):
        rb = b_off + pool[kb + i] * b_p
        for j in range(i, eb):
            acc = ar[rb + pool[kb + j]]
            for q in range(k):  # (B_t^T)[i, q] = t_q B[cb_q, kb_i]
                acc += t_link[pool[lk + q]] * ar[b_off + pool[cb + q] * b_p + pool[kb + i]] * v[q * eb + j]
            ar[out + (ea + i) * ne + ea + j] = acc
    for i in range(ne):
        for j in range(i + 1, ne):
            ar[out + j * ne + i] = ar[out + i * ne + j]


@nb.njit(**_JIT)
def forward_blocks(T: np.ndarray, t_link: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                   w_offs: np.ndarray, arena: np.ndarray, w: np.ndarray, g: np.ndarray) -> None:
    """Every node's matrix ``arena[b]`` and every merge's ``W`` (``w[b]`` at ``w_offs``) of
    blocks ``b`` with forward matrices ``T[b]`` (n_tbus, 4); ``g`` is scratch.
    """
    for b in range(T.shape[0]):
        _leaves(arena[b], T[b])
        for m in range(merges.shape[0]):
            _merge_keep(arena[b], merges[m], pool, t_link, w[b], w_offs[m], g)


@nb.njit(**_JIT)
def _split(ar: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray, w: np.ndarray,
           w_off: int, f: np.ndarray, fo: np.ndarray, m_exc: int) -> None:
    """Waves entering a merge's halves from the waves entering it (``fo``: field offsets
    of the node, A and B; each field is (ports x m_exc), row-major).
    """
    a_off, a_p = mg[A_OFF], mg[A_P]
    k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
    ne = ea + eb
    ca, cb, ka, kb, lk = ix, ix + k, ix + 2 * k, ix + 2 * k + ea, ix + 2 * k + ea + eb
    fn, fa, fb = fo[0], fo[1], fo[2]
    for j in range(ea):  # kept ports keep their waves
        for e in range(m_exc):
            f[fa + pool[ka + j] * m_exc + e] = f[fn + j * m_exc + e]
    for j in range(eb):
        for e in range(m_exc):
            f[fb + pool[kb + j] * m_exc + e] = f[fn + (ea + j) * m_exc + e]
    for i in range(k):  # u = W x on A's cut (inner loops run along the excitations)
        du = fa + pool[ca + i] * m_exc
        for e in range(m_exc):
            f[du + e] = 0.0
        for c in range(ne):
            wv = w[w_off + i * ne + c]
            src = fn + c * m_exc
            for e in range(m_exc):
                f[du + e] += wv * f[src + e]
    for i in range(k):  # v = T (A_cc u + A_ce x_A) on B's cut
        ti = t_link[pool[lk + i]]
        ra = a_off + pool[ca + i] * a_p
        dv = fb + pool[cb + i] * m_exc
        for e in range(m_exc):
            f[dv + e] = 0.0
        for q in range(k):
            av = ti * ar[ra + pool[ca + q]]
            src = fa + pool[ca + q] * m_exc
            for e in range(m_exc):
                f[dv + e] += av * f[src + e]
        for j in range(ea):
            av = ti * ar[ra + pool[ka + j]]
            src = fn + j * m_exc
            for e in range(m_exc):
                f[dv + e] += av * f[src + e]


@nb.njit(**_JIT)
def field_blocks(arena: np.ndarray, w: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                 t_link: np.ndarray, w_offs: np.ndarray, f_offs: np.ndarray, root_x: np.ndarray,
                 leaf_off: np.ndarray, f: np.ndarray, out: np.ndarray) -> None:
    """Waves entering every TBU port, ``out[b]`` (n_tbus, 4, m_exc), for the excitations
    ``root_x[b]`` (root ports x m_exc) of blocks solved by :func:`forward_blocks`.

    ``f_offs`` (n_merges, 3): field offsets of each merge's node, A and B; ``leaf_off``:
    field offset of every TBU; ``f`` is scratch for every node's field of one block.
    """
    m_exc = root_x.shape[2]
    root = f_offs[merges.shape[0] - 1, 0]
    for b in range(arena.shape[0]):
        for p in range(root_x.shape[1]):
            for e in range(m_exc):
                f[root + p * m_exc + e] = root_x[b, p, e]
        for m in range(merges.shape[0] - 1, -1, -1):
            _split(arena[b], merges[m], pool, t_link, w[b], w_offs[m], f, f_offs[m], m_exc)
        for t in range(out.shape[1]):
            for r in range(4):
                for e in range(m_exc):
                    out[b, t, r, e] = f[leaf_off[t] + r * m_exc + e]
