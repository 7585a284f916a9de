"""Compiled kernels of the nested-dissection merge (numba): one block at a time, fused.

Every (state, wavelength) block runs the whole merge tree on its own arena row: each merge
gathers its halves' cut and kept entries, forms the cut's round trip, eliminates it and
writes the merged matrix, in one pass over data that stays in the core's L1/L2 cache
(:mod:`photonics.circuit_merge` explains the algebra and builds the plan these kernels
read). These are the only implementation of the merge: there is no numpy twin to drift
apart from them.

Compiled with ``cache=True``: the machine code is written once, next to this file in
``__pycache__`` or, where the package directory is read-only (a system-wide install),
in numba's per-user cache (``~/.cache/numba``, or ``NUMBA_CACHE_DIR`` when set), and
later processes load it instead of compiling (docs/physics.md gives both times).
``nogil=True``: the solve's worker threads (:func:`photonics.circuit._run_chunked`) run
chunks of blocks side by side; numba's own thread pool (``parallel=True``/``prange``) is
not used, because its default threading layer aborts the process when two Python threads
(the control plane's request handlers, a campaign's workers) launch kernels at once.

No ``fastmath``: a block's arithmetic is the same IEEE operations in the same order on
every machine, so seeded simulations give the same bytes anywhere, whatever the thread
count or chunking.

The plan's merge table (one row per merge, children before parents) has the columns
named below; ``pool`` holds, per merge, its A cut ports, B cut ports, A kept ports, B kept
ports (local indices into each half's matrix) and the cut's link indices.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from photonics.circuit_merge import LANES, LEAF_SIZE

OUT, A_OFF, A_P, B_OFF, B_P, K, EA, EB, IDX = range(9)  # merge-table columns

_F2 = "float64[:, ::1]"
_SOLVE_SIG = (f"void(complex128[:, :, ::1], complex128[::1], int64[:, ::1], int64[::1], {_F2}, {_F2}, "
              f"{_F2}, {_F2}, int64[:, ::1], complex128[:, :, ::1])")
_REMERGE_SIG = ("void(complex128[:, :, ::1], int64[::1], complex128[::1], int64[:, ::1], int64[::1], "
                "int64[::1], float64[:, :, ::1], float64[:, :, ::1], " f"{_F2}, {_F2})")


@nb.njit(inline="always")
def _mac(dr: np.ndarray, di: np.ndarray, d: int, ar: np.ndarray, ai: np.ndarray, a: int,
         br: np.ndarray, bi: np.ndarray, b: int, sign: float) -> None:
    """``d += sign * a * b`` on the LANES lanes of entries ``d``, ``a``, ``b`` (real parts in
    ``*r``, imaginary in ``*i``). Every load comes before every store, so the compiler may
    run the four lanes as one SIMD instruction although it cannot rule out that the arrays
    overlap.
    """
    a0, a1, a2, a3 = ar[a, 0], ar[a, 1], ar[a, 2], ar[a, 3]
    i0, i1, i2, i3 = ai[a, 0], ai[a, 1], ai[a, 2], ai[a, 3]
    b0, b1, b2, b3 = br[b, 0], br[b, 1], br[b, 2], br[b, 3]
    j0, j1, j2, j3 = bi[b, 0], bi[b, 1], bi[b, 2], bi[b, 3]
    r0, r1, r2, r3 = dr[d, 0], dr[d, 1], dr[d, 2], dr[d, 3]
    s0, s1, s2, s3 = di[d, 0], di[d, 1], di[d, 2], di[d, 3]
    dr[d, 0] = r0 + sign * (a0 * b0 - i0 * j0)
    dr[d, 1] = r1 + sign * (a1 * b1 - i1 * j1)
    dr[d, 2] = r2 + sign * (a2 * b2 - i2 * j2)
    dr[d, 3] = r3 + sign * (a3 * b3 - i3 * j3)
    di[d, 0] = s0 + sign * (a0 * j0 + i0 * b0)
    di[d, 1] = s1 + sign * (a1 * j1 + i1 * b1)
    di[d, 2] = s2 + sign * (a2 * j2 + i2 * b2)
    di[d, 3] = s3 + sign * (a3 * j3 + i3 * b3)


@nb.njit(cache=True, nogil=True)
def _fill_leaves(re: np.ndarray, im: np.ndarray, T: np.ndarray, b0: int, tbus: np.ndarray) -> None:
    """TBU scattering matrices of blocks ``b0 ..`` (one per lane; lanes past the batch are
    zero) from their forward matrices ``T[b, j]`` = [T00, T01, T10, T11] of ``tbus[j]``:
    ``b[2+i] = T[i, j] a[j]`` and ``b[j] = T[i, j] a[2+i]`` (ports 0, 1 in; 2, 3 out).
    """
    nl = min(LANES, T.shape[0] - b0)
    for j in range(tbus.shape[0]):
        base = LEAF_SIZE * tbus[j]
        for q in range(LEAF_SIZE):
            for lane in range(LANES):
                re[base + q, lane] = 0.0
                im[base + q, lane] = 0.0
        for i in range(2):
            for c in range(2):
                fwd, back = base + (2 + i) * 4 + c, base + c * 4 + 2 + i
                for lane in range(nl):
                    v = T[b0 + lane, j, 2 * i + c]
                    re[fwd, lane] = re[back, lane] = v.real
                    im[fwd, lane] = im[back, lane] = v.imag


@nb.njit(cache=True, nogil=True)
def _merge(re: np.ndarray, im: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray,
           wr: np.ndarray, wi: np.ndarray) -> None:
    """One merge on LANES blocks' arena (``re``, ``im``: (entries, LANES)); ``mg`` is its
    merge-table row, ``wr``/``wi`` the temporaries.

    With ``T`` the cut's link transmissions, ``X = T B_cc T``, ``B_t = T B_ce`` and
    ``G = I - X A_cc``, the waves entering A on the cut are ``W x``,
    ``W = G^-1 [X A_ce, B_t]`` (Gauss-Jordan on ``[G | X A_ce | B_t]``, no pivoting: see
    :mod:`photonics.circuit_merge`). The merged matrix is symmetric (the circuit is
    reciprocal): its A rows are ``[A_ee, 0] + A_ce^T W`` and its B-B block
    ``B_ee + B_t^T (A_cc W_B)``; the upper triangle is computed, the lower mirrored.
    """
    out, a_off, a_p, b_off, b_p = mg[OUT], mg[A_OFF], mg[A_P], mg[B_OFF], mg[B_P]
    k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
    ne = ea + eb
    ca, cb, ka, kb, lk = ix, ix + k, ix + 2 * k, ix + 2 * k + ea, ix + 2 * k + ea + eb
    wa, wg = k + ea, k + ne  # widths of A_c = [A_cc, A_ce] and of [G | X A_ce | B_t]
    o_ac, o_x = 0, k * wa
    o_bt = o_x + k * k
    o_g = o_bt + k * eb
    o_vb = o_g + k * wg
    for i in range(k):  # A_c = A[cut, cut + kept]
        r = a_off + pool[ca + i] * a_p
        for j in range(wa):
            src = r + (pool[ca + j] if j < k else pool[ka + j - k])
            dst = o_ac + i * wa + j
            for lane in range(LANES):
                wr[dst, lane] = re[src, lane]
                wi[dst, lane] = im[src, lane]
    for i in range(k):  # X = T B_cc T and B_t = T B_ce (also the last eb columns of the system)
        ti = t_link[pool[lk + i]]
        r = b_off + pool[cb + i] * b_p
        for j in range(k + eb):
            if j < k:
                f, src, dst = ti * t_link[pool[lk + j]], r + pool[cb + j], o_x + i * k + j
            else:
                f, src, dst = ti, r + pool[kb + j - k], o_bt + i * eb + j - k
            fr, fi = f.real, f.imag
            for lane in range(LANES):
                xr, xi = re[src, lane], im[src, lane]
                wr[dst, lane] = fr * xr - fi * xi
                wi[dst, lane] = fr * xi + fi * xr
            if j >= k:
                for lane in range(LANES):
                    wr[o_g + i * wg + wa + j - k, lane] = wr[dst, lane]
                    wi[o_g + i * wg + wa + j - k, lane] = wi[dst, lane]
    for i in range(k):  # [G | X A_ce] = [I, 0] - [X A_cc, -X A_ce]
        g = o_g + i * wg
        for j in range(wa):
            for lane in range(LANES):
                wr[g + j, lane] = 0.0
                wi[g + j, lane] = 0.0
        for q in range(k):
            x = o_x + i * k + q
            a = o_ac + q * wa
            for j in range(wa):
                _mac(wr, wi, g + j, wr, wi, x, wr, wi, a + j, 1.0)
        for j in range(k):
            for lane in range(LANES):
                wr[g + j, lane] = -wr[g + j, lane]
                wi[g + j, lane] = -wi[g + j, lane]
        for lane in range(LANES):
            wr[g + i, lane] += 1.0
    for j in range(k):  # Gauss-Jordan: columns k.. become W = G^-1 [X A_ce, B_t]
        pj = o_g + j * wg
        for lane in range(LANES):  # the pivot's reciprocal, kept in its place (not read again)
            xr, xi = wr[pj + j, lane], wi[pj + j, lane]
            d = xr * xr + xi * xi
            wr[pj + j, lane], wi[pj + j, lane] = xr / d, -xi / d
        for c in range(j + 1, wg):
            for lane in range(LANES):
                pr, pim = wr[pj + j, lane], wi[pj + j, lane]
                xr, xi = wr[pj + c, lane], wi[pj + c, lane]
                wr[pj + c, lane] = xr * pr - xi * pim
                wi[pj + c, lane] = xr * pim + xi * pr
        for i in range(k):
            if i != j:
                pi = o_g + i * wg
                for c in range(j + 1, wg):
                    _mac(wr, wi, pi + c, wr, wi, pi + j, wr, wi, pj + c, -1.0)
    for i in range(ea):  # A rows, upper triangle: A_ee + A_ce^T W (A_ee only left of ea)
        r = out + i * ne
        ra = a_off + pool[ka + i] * a_p
        for j in range(i, ea):
            src = ra + pool[ka + j]
            for lane in range(LANES):
                re[r + j, lane] = re[src, lane]
                im[r + j, lane] = im[src, lane]
        for j in range(ea, ne):
            for lane in range(LANES):
                re[r + j, lane] = 0.0
                im[r + j, lane] = 0.0
        for q in range(k):
            c = o_ac + q * wa + k + i
            w = o_g + q * wg + k
            for j in range(i, ne):
                _mac(re, im, r + j, wr, wi, c, wr, wi, w + j, 1.0)
    for q in range(k):  # V_B = A_cc W_B
        v = o_vb + q * eb
        for j in range(eb):
            for lane in range(LANES):
                wr[v + j, lane] = 0.0
                wi[v + j, lane] = 0.0
        for m in range(k):
            c = o_ac + q * wa + m
            w = o_g + m * wg + wa
            for j in range(eb):
                _mac(wr, wi, v + j, wr, wi, c, wr, wi, w + j, 1.0)
    for i in range(eb):  # B-B block, upper triangle: B_ee + B_t^T V_B
        r = out + (ea + i) * ne + ea
        rb = b_off + pool[kb + i] * b_p
        for j in range(i, eb):
            src = rb + pool[kb + j]
            for lane in range(LANES):
                re[r + j, lane] = re[src, lane]
                im[r + j, lane] = im[src, lane]
        for q in range(k):
            c = o_bt + q * eb + i
            v = o_vb + q * eb
            for j in range(i, eb):
                _mac(re, im, r + j, wr, wi, c, wr, wi, v + j, 1.0)
    for i in range(ne):  # the lower triangle is the upper one's transpose
        for j in range(i + 1, ne):
            for lane in range(LANES):
                re[out + j * ne + i, lane] = re[out + i * ne + j, lane]
                im[out + j * ne + i, lane] = im[out + i * ne + j, lane]


@nb.njit(_SOLVE_SIG, cache=True, nogil=True)
def solve_blocks(T: np.ndarray, t_link: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                 re: np.ndarray, im: np.ndarray, wr: np.ndarray, wi: np.ndarray,
                 out_pos: np.ndarray, out: np.ndarray) -> None:
    """Port matrices ``out`` (B, n_ports, n_inputs) of blocks with forward matrices ``T``
    (B, n_tbus, 4), LANES blocks at a time through the whole tree on the scratch arena
    ``re``/``im`` (entries, LANES); ``out_pos`` holds the arena positions of the root's
    entries.
    """
    every = np.arange(T.shape[1])
    for b0 in range(0, T.shape[0], LANES):
        _fill_leaves(re, im, T, b0, every)
        for m in range(merges.shape[0]):
            _merge(re, im, merges[m], pool, t_link, wr, wi)
        for lane in range(min(LANES, T.shape[0] - b0)):
            for p in range(out_pos.shape[0]):
                for q in range(out_pos.shape[1]):
                    out[b0 + lane, p, q] = complex(re[out_pos[p, q], lane], im[out_pos[p, q], lane])


@nb.njit(_REMERGE_SIG, cache=True, nogil=True)
def remerge_blocks(T: np.ndarray, tbus: np.ndarray, t_link: np.ndarray, merges: np.ndarray,
                   pool: np.ndarray, order: np.ndarray, re: np.ndarray, im: np.ndarray,
                   wr: np.ndarray, wi: np.ndarray) -> None:
    """Rewrite the leaves ``tbus`` (forward matrices ``T`` (B, len(tbus), 4)) in the kept
    arenas ``re``/``im`` (groups, entries, LANES; block ``b`` is lane ``b % LANES`` of
    group ``b // LANES``) and re-run the merges ``order`` (children first).
    """
    for g in range(re.shape[0]):
        _fill_leaves(re[g], im[g], T, g * LANES, tbus)
        for m in order:
            _merge(re[g], im[g], merges[m], pool, t_link, wr, wi)
