"""Compiled kernels of the nested-dissection merge (numba): one block at a time, fused.

Every (state, wavelength) block runs the whole merge tree on its own arena row: each merge
gathers its halves' cut and kept entries, forms the cut's round trip, eliminates it and
writes the merged matrix, in one pass over data that stays in the core's L1/L2 cache
(:mod:`photonics.circuit_merge` explains the algebra and builds the plan these kernels
read). These are the only implementation of the merge: there is no numpy twin to drift
apart from them. The gradient's batched pass lives here too (:func:`keep_blocks` runs the
same merges and keeps what their adjoint reads; :func:`adjoint_blocks` hands the waves down
the tree, :mod:`photonics.circuit_gradient` explains the algebra), so it is compiled the
same way and can never run against a stale copy of the merge.

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

import math

import numba as nb
import numpy as np

from photonics.merge_layout import LANES, LEAF_SIZE

OUT, A_OFF, A_P, B_OFF, B_P, K, EA, EB, IDX = range(9)  # merge-table columns

ROWS_SIDE_BY_SIDE_MIN_CUT = 3  # one-lane build: a merge's products run with four neighbouring
# entries of a row side by side (_row_dots) from this cut size k up; below it the rows are a few
# entries long and the scalar pairs (_dot2) were faster. Smartlight's one-lane merges alone, in one
# process (CPU 1, load 1.8; side by side 8 then 4 entries at a time): the 60 with k <= 2 25 us as
# pairs against 31 side by side; the 7 with k = 3 10.8 against 9.4, the 3 with k = 6 21.7 against
# 13.9 (docs/physics.md, "One wavelength")
_JIT = {"nogil": True, "error_model": "numpy"}  # no Python exceptions: a division by zero gives
# inf/nan (the caller then falls back to sparse LU), as numpy would


def build(lanes: int) -> dict:
    """The merge kernels for arenas of ``lanes`` lanes per entry: one source, compiled per
    lane count (``lanes`` is a compile-time constant inside). ``LANES`` merges that many blocks
    side by side in SIMD registers, as groups of four lanes (a *quad*: :func:`_get` reads an
    entry's quads, :func:`_madd` multiplies and adds them, :func:`_put` writes them); 1 is the
    single-block build (one wavelength of a simulated chip's reading, or a one-wavelength
    solve), which would otherwise compute empty lanes. Every lane runs the same IEEE operations
    in the same order whatever the lane count, so every build gives the same bytes per block.
    The one-lane build has no lanes to fill, so it runs four neighbouring entries of a row side by
    side instead (:func:`_row_dots` for a merge's products from :data:`ROWS_SIDE_BY_SIDE_MIN_CUT` up,
    :func:`_mac_row`, :func:`_mac_rows2` and :func:`_mul_row` for the elimination): each entry still
    the same operations in the same order as in one lane of the SIMD builds, so the same bytes.
    Returns ``{"solve_blocks": ..., "remerge_blocks": ..., "keep_blocks": ..., "adjoint_blocks": ...,
    "cotangent_blocks": ...}`` (the gradient's three in both builds: a one-wavelength gradient runs
    the one-lane build, as the value does).
    """
    if lanes not in (1, 4, 8):  # _get, _put and _madd spell out quads of four lanes for SIMD, or one
        raise ValueError(f"the merge kernels are built for 1, 4 or 8 lanes, not {lanes}")

    @nb.njit(inline="always", **_JIT)
    def _at(e: int) -> int:
        """Flat position of entry ``e``'s first lane, unsigned: numba then skips its negative-
        index wrap-around, whose extra arithmetic on every access kept the loops scalar.
        """
        return np.uint64(e) * np.uint64(lanes)

    @nb.njit(inline="always", **_JIT)
    def _get4(xr: np.ndarray, xi: np.ndarray, p: int) -> tuple:
        """The four lanes from flat position ``p`` (unsigned): real parts, then imaginary."""
        u1, u2, u3 = np.uint64(1), np.uint64(2), np.uint64(3)
        return (xr[p], xr[p + u1], xr[p + u2], xr[p + u3], xi[p], xi[p + u1], xi[p + u2], xi[p + u3])

    @nb.njit(inline="always", **_JIT)
    def _put4(dr: np.ndarray, di: np.ndarray, p: int, v: tuple) -> None:
        """Write the quad ``v`` (:func:`_get4`'s layout) from flat position ``p``."""
        u1, u2, u3 = np.uint64(1), np.uint64(2), np.uint64(3)
        dr[p], dr[p + u1], dr[p + u2], dr[p + u3] = v[0], v[1], v[2], v[3]
        di[p], di[p + u1], di[p + u2], di[p + u3] = v[4], v[5], v[6], v[7]

    @nb.njit(inline="always", **_JIT)
    def _put8(dr: np.ndarray, di: np.ndarray, p: int, v: tuple, w: tuple) -> None:
        """Write the quads ``v`` then ``w`` from flat position ``p``: the eight real parts, then the
        eight imaginary ones (the compiler may not move a store to ``dr`` past one to ``di``,
        which may overlap it, so stores in this order can be one 8-lane store each).
        """
        u1, u2, u3, u4 = np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4)
        u5, u6, u7 = np.uint64(5), np.uint64(6), np.uint64(7)
        dr[p], dr[p + u1], dr[p + u2], dr[p + u3] = v[0], v[1], v[2], v[3]
        dr[p + u4], dr[p + u5], dr[p + u6], dr[p + u7] = w[0], w[1], w[2], w[3]
        di[p], di[p + u1], di[p + u2], di[p + u3] = v[4], v[5], v[6], v[7]
        di[p + u4], di[p + u5], di[p + u6], di[p + u7] = w[4], w[5], w[6], w[7]

    @nb.njit(inline="always", **_JIT)
    def _madd4(acc: tuple, x: tuple, y: tuple, sign: float) -> tuple:
        """``acc + sign * x * y`` on a quad's four lanes (complex, :func:`_get4`'s layout)."""
        r0, r1, r2, r3, s0, s1, s2, s3 = acc
        a0, a1, a2, a3, i0, i1, i2, i3 = x
        b0, b1, b2, b3, j0, j1, j2, j3 = y
        return (r0 + sign * (a0 * b0 - i0 * j0), r1 + sign * (a1 * b1 - i1 * j1),
                r2 + sign * (a2 * b2 - i2 * j2), r3 + sign * (a3 * b3 - i3 * j3),
                s0 + sign * (a0 * j0 + i0 * b0), s1 + sign * (a1 * j1 + i1 * b1),
                s2 + sign * (a2 * j2 + i2 * b2), s3 + sign * (a3 * j3 + i3 * b3))

    @nb.njit(inline="always", **_JIT)
    def _mul4(x: tuple, y: tuple) -> tuple:
        """``x * y`` on a quad's four lanes."""
        a0, a1, a2, a3, i0, i1, i2, i3 = x
        b0, b1, b2, b3, j0, j1, j2, j3 = y
        return (a0 * b0 - i0 * j0, a1 * b1 - i1 * j1, a2 * b2 - i2 * j2, a3 * b3 - i3 * j3,
                a0 * j0 + i0 * b0, a1 * j1 + i1 * b1, a2 * j2 + i2 * b2, a3 * j3 + i3 * b3)

    @nb.njit(inline="always", **_JIT)
    def _get(xr: np.ndarray, xi: np.ndarray, x: int) -> tuple:
        """Entry ``x``'s lanes: one quad (:func:`_get4`) in the 4-lane build, a pair of quads in
        the 8-lane one; a one-lane build fills lane 0 of a quad and leaves the other three at
        zero, unused.
        """
        p = _at(x)
        if lanes == 1:
            return (xr[p], 0.0, 0.0, 0.0, xi[p], 0.0, 0.0, 0.0)
        if lanes == 8:
            return (_get4(xr, xi, p), _get4(xr, xi, p + np.uint64(4)))
        return _get4(xr, xi, p)

    @nb.njit(inline="always", **_JIT)
    def _zero() -> tuple:
        """A zero value for :func:`_dot`'s accumulator (:func:`_get`'s layout)."""
        z = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        if lanes == 8:
            return (z, z)
        return z

    @nb.njit(inline="always", **_JIT)
    def _put(dr: np.ndarray, di: np.ndarray, d: int, v: tuple) -> None:
        """Write the lanes ``v`` (:func:`_get`'s layout) to entry ``d``."""
        p = _at(d)
        if lanes == 1:
            dr[p], di[p] = v[0], v[4]
        elif lanes == 8:  # every real part before every imaginary one: a quad's stores to
            _put8(dr, di, p, v[0], v[1])  # ``dr`` then ``di`` would keep the quads apart
        else:
            _put4(dr, di, p, v)

    @nb.njit(inline="always", **_JIT)
    def _madd(acc: tuple, x: tuple, y: tuple, sign: float) -> tuple:
        """``acc + sign * x * y`` on every lane (:func:`_get`'s layout), quad by quad."""
        if lanes == 8:
            return (_madd4(acc[0], x[0], y[0], sign), _madd4(acc[1], x[1], y[1], sign))
        return _madd4(acc, x, y, sign)

    @nb.njit(inline="always", **_JIT)
    def _mul(x: tuple, y: tuple) -> tuple:
        """``x * y`` on every lane (:func:`_get`'s layout)."""
        if lanes == 8:
            return (_mul4(x[0], y[0]), _mul4(x[1], y[1]))
        return _mul4(x, y)

    @nb.njit(inline="always", **_JIT)
    def _bcast(xr: np.ndarray, xi: np.ndarray, p: int) -> tuple:
        """The entry at flat position ``p`` (unsigned) in all four places of a quad (:func:`_get4`'s
        layout): the one-lane build's multiplier of four neighbouring entries of a row.
        """
        x, y = xr[p], xi[p]
        return (x, x, x, x, y, y, y, y)

    @nb.njit(inline="always", **_JIT)
    def _row_dots(dr: np.ndarray, di: np.ndarray, d: int, m: int, xr: np.ndarray, xi: np.ndarray, a: int,
                  sa: int, yr: np.ndarray, yi: np.ndarray, b: int, sb: int, n: int, sign: float,
                  zero: bool) -> None:
        """One lane: ``d[c] = s + sign * sum_q x[a + q sa] y[b + c + q sb]`` for the ``m`` neighbouring
        entries ``c < m`` of a row, ``s`` zero (``zero``) or ``d[c]`` itself; the terms added one by one
        in ``q`` order (:func:`_dot`'s sum, so the same bytes), four entries at a time (a quad, each
        ``x`` broadcast to its four places), the last few one by one. The row ``d`` never overlaps
        ``x`` or ``y``. Eight at a time (two quads a pass, one 8-wide vector) was no faster warm and
        slower cold (its larger code), in the A/B of docs/physics.md's "One wavelength".
        """
        z = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        c = 0
        while c + 4 <= m:
            p = _at(d + c)
            u = z if zero else _get4(dr, di, p)
            for q in range(n):
                u = _madd4(u, _bcast(xr, xi, _at(a + q * sa)), _get4(yr, yi, _at(b + c + q * sb)), sign)
            _put4(dr, di, p, u)
            c += 4
        while c < m:
            u = z if zero else _get(dr, di, d + c)
            _put(dr, di, d + c, _dot(u, xr, xi, a, sa, yr, yi, b + c, sb, n, sign))
            c += 1

    @nb.njit(inline="always", **_JIT)
    def _mac_row(dr: np.ndarray, di: np.ndarray, d: int, ar: np.ndarray, ai: np.ndarray, a: int,
                 br: np.ndarray, bi: np.ndarray, b: int, n: int, sign: float) -> None:
        """``d[q] += sign * a * b[q]`` for ``q < n`` (entries ``d + q``, ``a``, ``b + q``; real
        parts in the flat ``*r``, imaginary in ``*i``) on the ``lanes`` lanes. The one-lane build
        loads the multiplier ``a`` once for the row (it never lies in the row written; the
        compiler cannot prove that, so it would reload it for every entry): 1.3x faster there.
        The SIMD builds load it per entry, as before: hoisting its parts measured slower
        (register pressure). In each entry every load comes before every store, so the lanes
        run as SIMD instructions although the compiler cannot rule out that the arrays overlap.
        """
        if lanes == 1:  # one block: four neighbouring entries at a time (a quad of the row)
            x = _bcast(ar, ai, _at(a))
            q = 0
            while q + 4 <= n:
                e = _at(d + q)
                _put4(dr, di, e, _madd4(_get4(dr, di, e), x, _get4(br, bi, _at(b + q)), sign))
                q += 4
            x0, y0 = x[0], x[4]
            while q < n:
                e, f = _at(d + q), _at(b + q)
                z0, w0 = br[f], bi[f]
                r0, s0 = dr[e], di[e]
                dr[e], di[e] = r0 + sign * (x0 * z0 - y0 * w0), s0 + sign * (x0 * w0 + y0 * z0)
                q += 1
            return
        for q in range(n):  # the multiplier loaded per entry measured faster
            _put(dr, di, d + q, _madd(_get(dr, di, d + q), _get(ar, ai, a), _get(br, bi, b + q), sign))

    @nb.njit(inline="always", **_JIT)
    def _mul_row(dr: np.ndarray, di: np.ndarray, d: int, fr: np.ndarray, fi: np.ndarray, f: int,
                 n: int) -> None:
        """``d[q] = d[q] * f`` for ``q < n`` on the ``lanes`` lanes (``f`` never lies in the row;
        loaded once in the one-lane build, per entry in the SIMD ones, as in :func:`_mac_row`).
        """
        if lanes == 1:
            y = _bcast(fr, fi, _at(f))
            q = 0
            while q + 4 <= n:
                e = _at(d + q)
                _put4(dr, di, e, _mul4(_get4(dr, di, e), y))
                q += 4
            z0, w0 = y[0], y[4]
            while q < n:
                e = _at(d + q)
                x0, y0 = dr[e], di[e]
                dr[e], di[e] = x0 * z0 - y0 * w0, x0 * w0 + y0 * z0
                q += 1
            return
        for q in range(n):
            _put(dr, di, d + q, _mul(_get(dr, di, d + q), _get(fr, fi, f)))

    @nb.njit(inline="always", **_JIT)
    def _scaled(dr: np.ndarray, di: np.ndarray, d: int, sr: np.ndarray, si: np.ndarray, s: int,
                f: complex) -> None:
        """``d = f * s`` on the ``lanes`` lanes, ``f`` the same complex number in every lane."""
        d, s = _at(d), _at(s)
        fr, fi = f.real, f.imag
        for lane in range(lanes):
            u = np.uint64(lane)
            xr, xi = sr[s + u], si[s + u]
            dr[d + u], di[d + u] = fr * xr - fi * xi, fr * xi + fi * xr

    @nb.njit(inline="always", **_JIT)
    def _copy(dr: np.ndarray, di: np.ndarray, d: int, sr: np.ndarray, si: np.ndarray, s: int) -> None:
        """``d = s`` on the ``lanes`` lanes."""
        d, s = _at(d), _at(s)
        for lane in range(lanes):
            u = np.uint64(lane)
            dr[d + u], di[d + u] = sr[s + u], si[s + u]

    @nb.njit(inline="always", **_JIT)
    def _fill(dr: np.ndarray, di: np.ndarray, d: int, vr: float, vi: float) -> None:
        """``d = vr + j vi`` in every lane."""
        d = _at(d)
        for lane in range(lanes):
            dr[d + np.uint64(lane)], di[d + np.uint64(lane)] = vr, vi

    @nb.njit(**_JIT)
    def _fill_leaves(re: np.ndarray, im: np.ndarray, T: np.ndarray, b0: int, tbus: np.ndarray) -> None:
        """TBU scattering matrices of blocks ``b0 ..`` (one per lane; lanes past the batch are
        zero) from their forward matrices ``T[b, j]`` = [T00, T01, T10, T11] of TBU ``tbus[j]``
        (of TBU ``j`` when ``tbus`` is empty):
        ``b[2+i] = T[i, j] a[j]`` and ``b[j] = T[i, j] a[2+i]`` (ports 0, 1 in; 2, 3 out).
        """
        nl = min(lanes, T.shape[0] - b0)
        for j in range(T.shape[1]):
            base = LEAF_SIZE * (tbus[j] if tbus.shape[0] else j)
            for q in range(LEAF_SIZE):
                for lane in range(lanes):
                    re[base + q, lane] = 0.0
                    im[base + q, lane] = 0.0
            for i in range(2):
                for c in range(2):
                    fwd, back = base + (2 + i) * 4 + c, base + c * 4 + 2 + i
                    for lane in range(nl):
                        v = T[b0 + lane, j, 2 * i + c]
                        re[fwd, lane] = re[back, lane] = v.real
                        im[fwd, lane] = im[back, lane] = v.imag

    @nb.njit(inline="always", **_JIT)
    def _dot(acc: tuple, xr: np.ndarray, xi: np.ndarray, a: int, sa: int, yr: np.ndarray,
             yi: np.ndarray, b: int, sb: int, n: int, sign: float) -> tuple:
        """``acc + sign * sum_q x[a + q sa] y[b + q sb]`` over ``q < n`` on the lanes, the terms
        added one by one in ``q`` order exactly as a row update adds them to a stored entry (so the
        same bytes), but in registers: no load or store of the sum per term.
        """
        for q in range(n):
            if lanes == 1:
                e, f = _at(a + q * sa), _at(b + q * sb)
                x0, y0, z0, w0 = xr[e], xi[e], yr[f], yi[f]
                acc = (acc[0] + sign * (x0 * z0 - y0 * w0), acc[1], acc[2], acc[3],
                       acc[4] + sign * (x0 * w0 + y0 * z0), acc[5], acc[6], acc[7])
            else:
                acc = _madd(acc, _get(xr, xi, a + q * sa), _get(yr, yi, b + q * sb), sign)
        return acc

    @nb.njit(inline="always", **_JIT)
    def _dot2(acc: tuple, acd: tuple, xr: np.ndarray, xi: np.ndarray, a: int, sa: int, yr: np.ndarray,
              yi: np.ndarray, b: int, sb: int, n: int, sign: float) -> tuple:
        """:func:`_dot` for two neighbouring columns ``b`` and ``b + 1`` at once (accumulators
        ``acc``, ``acd``): each ``x`` entry is loaded once for both.
        """
        for q in range(n):
            if lanes == 1:
                e, f = _at(a + q * sa), _at(b + q * sb)
                g = f + np.uint64(lanes)
                x0, y0 = xr[e], xi[e]
                z0, w0, z1, w1 = yr[f], yi[f], yr[g], yi[g]
                acc = (acc[0] + sign * (x0 * z0 - y0 * w0), acc[1], acc[2], acc[3],
                       acc[4] + sign * (x0 * w0 + y0 * z0), acc[5], acc[6], acc[7])
                acd = (acd[0] + sign * (x0 * z1 - y0 * w1), acd[1], acd[2], acd[3],
                       acd[4] + sign * (x0 * w1 + y0 * z1), acd[5], acd[6], acd[7])
            else:
                x, f = _get(xr, xi, a + q * sa), b + q * sb
                acc = _madd(acc, x, _get(yr, yi, f), sign)
                acd = _madd(acd, x, _get(yr, yi, f + 1), sign)
        return acc, acd

    @nb.njit(inline="always", **_JIT)
    def _mac_rows2(dr: np.ndarray, di: np.ndarray, d: int, e: int, a: int, c: int, br: np.ndarray,
                   bi: np.ndarray, b: int, n: int, sign: float) -> None:
        """:func:`_mac_row` on two rows at once, ``d[q] += sign * a * b[q]`` and ``e[q] += sign * c *
        b[q]`` (multipliers ``a``, ``c`` in ``dr``/``di``, never in the rows written): each entry of
        ``b`` is loaded once for both rows; each entry gets the same single update as before.
        """
        if lanes == 1:
            xa, xc = _bcast(dr, di, _at(a)), _bcast(dr, di, _at(c))
            q = 0
            while q + 4 <= n:
                g, h = _at(d + q), _at(e + q)
                y = _get4(br, bi, _at(b + q))
                u, v = _madd4(_get4(dr, di, g), xa, y, sign), _madd4(_get4(dr, di, h), xc, y, sign)
                _put4(dr, di, g, u)
                _put4(dr, di, h, v)
                q += 4
            x0, y0, x1, y1 = xa[0], xa[4], xc[0], xc[4]
            while q < n:
                g, h, f = _at(d + q), _at(e + q), _at(b + q)
                z0, w0 = br[f], bi[f]
                r0, s0, r1, s1 = dr[g], di[g], dr[h], di[h]
                dr[g], di[g] = r0 + sign * (x0 * z0 - y0 * w0), s0 + sign * (x0 * w0 + y0 * z0)
                dr[h], di[h] = r1 + sign * (x1 * z0 - y1 * w0), s1 + sign * (x1 * w0 + y1 * z0)
                q += 1
            return
        for q in range(n):  # every load of the entry before its stores
            y = _get(br, bi, b + q)
            u = _madd(_get(dr, di, d + q), _get(dr, di, a), y, sign)
            v = _madd(_get(dr, di, e + q), _get(dr, di, c), y, sign)
            _put(dr, di, d + q, u)
            _put(dr, di, e + q, v)

    @nb.njit(inline="always", **_JIT)
    def _starts(re: np.ndarray, im: np.ndarray, d: int, src: int, pool: np.ndarray, kept: int, j0: int,
                n_kept: int, m: int) -> None:
        """One lane: the first values of a merged row's entries ``j0 .. j0 + m`` written to the row
        at ``d``: the half's kept entry ``src + pool[kept + j]`` for ``j < n_kept``, zero after.
        """
        for j in range(j0, j0 + m):
            e = _at(d + j - j0)
            if j < n_kept:
                f = _at(src + pool[kept + j])
                re[e], im[e] = re[f], im[f]
            else:
                re[e], im[e] = 0.0, 0.0

    @nb.njit(inline="always", **_JIT)
    def _merge_rows_one(re: np.ndarray, im: np.ndarray, out: int, a_off: int, a_p: int, b_off: int,
                        b_p: int, ka: int, kb: int, k: int, ea: int, eb: int, pool: np.ndarray,
                        wr: np.ndarray, wi: np.ndarray, o_ac: int, o_bt: int, o_vb: int, w0: int, wa: int,
                        wg: int) -> None:
        """:func:`_merge`'s products after the elimination, in the one-lane build: the A rows
        ``A_ee + A_ce^T W``, ``V_B = A_cc W_B`` and the B-B block ``B_ee + B_t^T V_B``, each row's
        upper-triangle entries computed side by side (:func:`_row_dots`) from their first values
        written in place (the output never overlaps its halves: :func:`photonics.circuit_merge._compact`),
        then copied to their mirror places. Every entry the same sum in the same order as the SIMD
        builds' :func:`_dot2`: the same bytes.
        """
        ne = ea + eb
        for i in range(ea):  # A rows
            r = out + i * ne
            _starts(re, im, r + i, a_off + pool[ka + i] * a_p, pool, ka, i, ea, ne - i)
            _row_dots(re, im, r + i, ne - i, wr, wi, o_ac + k + i, wa, wr, wi, w0 + i, wg, k, 1.0, False)
            for j in range(i + 1, ne):
                _copy(re, im, out + j * ne + i, re, im, r + j)
        for q in range(k):  # V_B
            _row_dots(wr, wi, o_vb + q * eb, eb, wr, wi, o_ac + q * wa, 1, wr, wi, w0 + ea, wg, k, 1.0, True)
        for i in range(eb):  # B-B block
            r = out + (ea + i) * ne + ea
            _starts(re, im, r + i, b_off + pool[kb + i] * b_p, pool, kb, i, eb, eb - i)
            _row_dots(re, im, r + i, eb - i, wr, wi, o_bt + i, eb, wr, wi, o_vb + i, eb, k, 1.0, False)
            for j in range(i + 1, eb):
                _copy(re, im, out + (ea + j) * ne + ea + i, re, im, r + j)

    @nb.njit(**_JIT)
    def _merge(re: np.ndarray, im: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray,
               wr: np.ndarray, wi: np.ndarray) -> None:
        """One merge on ``lanes`` blocks' arena (``re``, ``im``: flat (entries x lanes)); ``mg`` is
        its merge-table row, ``wr``/``wi`` the temporaries (flat).

        With ``T`` the cut's link transmissions, ``X = T B_cc T``, ``B_t = T B_ce`` and
        ``G = I - X A_cc``, the waves entering A on the cut are ``W x``,
        ``W = G^-1 [X A_ce, B_t]`` (Gauss-Jordan on ``[G | X A_ce | B_t]``, no pivoting: see
        :mod:`photonics.circuit_merge`). The merged matrix is symmetric (the circuit is
        reciprocal): its A rows are ``[A_ee, 0] + A_ce^T W`` and its B-B block
        ``B_ee + B_t^T (A_cc W_B)``; the upper triangle is computed and each entry written to
        both its places. The products run as dot products summed in registers (:func:`_dot2`),
        each starting from the entry's first value (a kept entry of a half, or zero), so every
        entry is the same sum in the same order as row-by-row multiply-adds would give.
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
            for j in range(k):
                _copy(wr, wi, o_ac + i * wa + j, re, im, r + pool[ca + j])
            for j in range(ea):
                _copy(wr, wi, o_ac + i * wa + k + j, re, im, r + pool[ka + j])
        for i in range(k):  # X = T B_cc T and B_t = T B_ce (also the last eb columns of the system)
            ti = t_link[pool[lk + i]]
            r = b_off + pool[cb + i] * b_p
            for j in range(k):
                _scaled(wr, wi, o_x + i * k + j, re, im, r + pool[cb + j], ti * t_link[pool[lk + j]])
            for j in range(eb):
                _scaled(wr, wi, o_bt + i * eb + j, re, im, r + pool[kb + j], ti)
                _copy(wr, wi, o_g + i * wg + wa + j, wr, wi, o_bt + i * eb + j)
        for i in range(k):  # [G | X A_ce] = [I, 0] - [X A_cc, -X A_ce]
            g, x = o_g + i * wg, o_x + i * k
            if lanes == 1 and k >= ROWS_SIDE_BY_SIDE_MIN_CUT:  # the row's neighbouring entries side by side
                _row_dots(wr, wi, g, k, wr, wi, x, 1, wr, wi, o_ac, wa, k, -1.0, True)
                _row_dots(wr, wi, g + k, ea, wr, wi, x, 1, wr, wi, o_ac + k, wa, k, 1.0, True)
                wr[_at(g + i)] += 1.0
                continue
            for j in range(0, wa - 1, 2):
                sg, sh = -1.0 if j < k else 1.0, -1.0 if j + 1 < k else 1.0
                if sg == sh:
                    u, v = _dot2(_zero(), _zero(), wr, wi, x, 1, wr, wi, o_ac + j, wa, k, sg)
                else:  # the pair straddles G's last column
                    u = _dot(_zero(), wr, wi, x, 1, wr, wi, o_ac + j, wa, k, sg)
                    v = _dot(_zero(), wr, wi, x, 1, wr, wi, o_ac + j + 1, wa, k, sh)
                _put(wr, wi, g + j, u)
                _put(wr, wi, g + j + 1, v)
            if wa % 2:
                j = wa - 1
                _put(wr, wi, g + j, _dot(_zero(), wr, wi, x, 1, wr, wi, o_ac + j, wa, k,
                                         -1.0 if j < k else 1.0))
            d = _at(g + i)
            for lane in range(lanes):
                wr[d + np.uint64(lane)] += 1.0
        for j in range(k):  # Gauss-Jordan: columns k.. become W = G^-1 [X A_ce, B_t]
            pj = o_g + j * wg
            d = _at(pj + j)
            for lane in range(lanes):  # the pivot's reciprocal, kept in its place (not read again)
                u = d + np.uint64(lane)
                xr, xi = wr[u], wi[u]
                n2 = xr * xr + xi * xi
                wr[u], wi[u] = xr / n2, -xi / n2
            _mul_row(wr, wi, pj + j + 1, wr, wi, pj + j, wg - j - 1)
            held = -1  # rows other than j, two per pass over the pivot row
            for i in range(k):
                if i == j:
                    continue
                pi = o_g + i * wg
                if held < 0:
                    held = pi
                    continue
                _mac_rows2(wr, wi, held + j + 1, pi + j + 1, held + j, pi + j, wr, wi, pj + j + 1,
                           wg - j - 1, -1.0)
                held = -1
            if held >= 0:
                _mac_row(wr, wi, held + j + 1, wr, wi, held + j, wr, wi, pj + j + 1, wg - j - 1, -1.0)
        w0 = o_g + k  # W[q, j] at w0 + q * wg + j
        if lanes == 1 and k >= ROWS_SIDE_BY_SIDE_MIN_CUT:  # each row's entries side by side
            _merge_rows_one(re, im, out, a_off, a_p, b_off, b_p, ka, kb, k, ea, eb, pool, wr, wi, o_ac, o_bt,
                            o_vb, w0, wa, wg)
            return
        for i in range(ea):  # A rows, upper triangle: A_ee + A_ce^T W (A_ee only left of ea)
            r = out + i * ne
            ra = a_off + pool[ka + i] * a_p
            c = o_ac + k + i  # A_ce^T[i, q] at c + q * wa
            j = i
            while j < ne:
                u0 = _get(re, im, ra + pool[ka + j]) if j < ea else _zero()
                if j + 1 < ne:
                    u1 = _get(re, im, ra + pool[ka + j + 1]) if j + 1 < ea else _zero()
                    u, v = _dot2(u0, u1, wr, wi, c, wa, wr, wi, w0 + j, wg, k, 1.0)
                    _put(re, im, r + j, u)
                    _put(re, im, out + j * ne + i, u)
                    _put(re, im, r + j + 1, v)
                    _put(re, im, out + (j + 1) * ne + i, v)
                    j += 2
                else:
                    u = _dot(u0, wr, wi, c, wa, wr, wi, w0 + j, wg, k, 1.0)
                    _put(re, im, r + j, u)
                    _put(re, im, out + j * ne + i, u)
                    j += 1
        for q in range(k):  # V_B = A_cc W_B
            v, c = o_vb + q * eb, o_ac + q * wa
            for j in range(0, eb - 1, 2):
                u, s = _dot2(_zero(), _zero(), wr, wi, c, 1, wr, wi, w0 + ea + j, wg, k, 1.0)
                _put(wr, wi, v + j, u)
                _put(wr, wi, v + j + 1, s)
            if eb % 2:
                _put(wr, wi, v + eb - 1, _dot(_zero(), wr, wi, c, 1, wr, wi, w0 + ea + eb - 1, wg, k, 1.0))
        for i in range(eb):  # B-B block, upper triangle: B_ee + B_t^T V_B
            r = out + (ea + i) * ne + ea
            rb = b_off + pool[kb + i] * b_p
            j = i
            while j < eb:
                u0 = _get(re, im, rb + pool[kb + j])
                if j + 1 < eb:
                    u1 = _get(re, im, rb + pool[kb + j + 1])
                    u, v = _dot2(u0, u1, wr, wi, o_bt + i, eb, wr, wi, o_vb + j, eb, k, 1.0)
                    _put(re, im, r + j, u)
                    _put(re, im, out + (ea + j) * ne + ea + i, u)
                    _put(re, im, r + j + 1, v)
                    _put(re, im, out + (ea + j + 1) * ne + ea + i, v)
                    j += 2
                else:
                    u = _dot(u0, wr, wi, o_bt + i, eb, wr, wi, o_vb + j, eb, k, 1.0)
                    _put(re, im, r + j, u)
                    _put(re, im, out + (ea + j) * ne + ea + i, u)
                    j += 1

    @nb.njit(inline="always", **_JIT)
    def _transfer(phi_top: np.ndarray, phi_bot: np.ndarray, s: int, scale: np.ndarray, w: int,
                  amp_top: np.ndarray, amp_bot: np.ndarray, c_top: np.ndarray, c_bot: np.ndarray,
                  t2t1: np.ndarray, s2s1: np.ndarray, t2s1: np.ndarray, s2t1: np.ndarray,
                  dst: np.ndarray) -> None:
        """Forward matrices ``dst`` (n, 4) of state ``s`` at wavelength ``w``
        (:func:`transfer_blocks`' arguments).
        """
        sc = scale[w]
        for t in range(phi_top.shape[1]):
            x, y = phi_top[s, t] * sc + c_top[w, t], phi_bot[s, t] * sc + c_bot[w, t]
            top = amp_top[t] * complex(math.cos(x), math.sin(x))
            bot = amp_bot[t] * complex(math.cos(y), math.sin(y))
            dst[t, 0] = t2t1[w, t] * top - s2s1[w, t] * bot
            dst[t, 1] = 1j * (t2s1[w, t] * top + s2t1[w, t] * bot)
            dst[t, 2] = 1j * (s2t1[w, t] * top + t2s1[w, t] * bot)
            dst[t, 3] = t2t1[w, t] * bot - s2s1[w, t] * top

    @nb.njit(inline="always", **_JIT)
    def _solve_group(T: np.ndarray, t0: int, b0: int, every: np.ndarray, t_link: np.ndarray,
                     merges: np.ndarray, pool: np.ndarray, re: np.ndarray, im: np.ndarray, wr_f: np.ndarray,
                     wi_f: np.ndarray, out_pos: np.ndarray, out: np.ndarray) -> bool:
        """Blocks ``b0 ..`` of ``out`` (``lanes`` of them, fewer at the batch's end) through the
        whole tree: leaves from ``T`` (their forward matrices at ``T[t0 ..]``), every merge, the
        root's entries ``out_pos`` into ``out``. Returns whether every entry written is finite
        (``x - x`` is 0 for a finite ``x``, nan for inf or nan: no branch).
        """
        _fill_leaves(re, im, T, t0, every)
        re_f, im_f = re.reshape(re.size), im.reshape(im.size)
        for m in range(merges.shape[0]):
            _merge(re_f, im_f, merges[m], pool, t_link, wr_f, wi_f)
        return _write_root(re_f, im_f, b0, out_pos, out)

    @nb.njit(inline="always", **_JIT)
    def _out4(out: np.ndarray, b: int, p: int, q: int, v: tuple, c: tuple) -> tuple:
        """Write quad ``v`` (:func:`_get4`'s layout) to blocks ``b .. b + 3`` at ``out[:, p, q]``;
        ``c`` plus each lane's finiteness check (``x - x`` is 0 for a finite ``x``, nan for inf
        or nan: no branch).
        """
        x0, x1, x2, x3, y0, y1, y2, y3 = v
        out[b, p, q], out[b + 1, p, q] = complex(x0, y0), complex(x1, y1)
        out[b + 2, p, q], out[b + 3, p, q] = complex(x2, y2), complex(x3, y3)
        return (c[0] + ((x0 - x0) + (y0 - y0)), c[1] + ((x1 - x1) + (y1 - y1)),
                c[2] + ((x2 - x2) + (y2 - y2)), c[3] + ((x3 - x3) + (y3 - y3)))

    @nb.njit(inline="always", **_JIT)
    def _write_root(re_f: np.ndarray, im_f: np.ndarray, b0: int, out_pos: np.ndarray,
                    out: np.ndarray) -> bool:
        """The root's entries ``out_pos`` of lanes ``0 ..`` into blocks ``b0 ..`` of ``out``; whether
        all are finite. A full group reads each entry's lanes together (one pass over the root,
        where a pass per lane read it once per lane) and sums each lane's check apart: one
        running sum was a chain of dependent adds, one per entry, that the loop waited on
        (no ``fastmath``, so the compiler may not split it itself).
        """
        n_b = min(lanes, out.shape[0] - b0)
        if lanes > 1 and n_b == lanes:
            c, d = (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)
            for p in range(out_pos.shape[0]):
                for q in range(out_pos.shape[1]):
                    v = _get(re_f, im_f, out_pos[p, q])
                    if lanes == 8:
                        c = _out4(out, b0, p, q, v[0], c)
                        d = _out4(out, b0 + 4, p, q, v[1], d)
                    else:
                        c = _out4(out, b0, p, q, v, c)
            return ((c[0] + c[1]) + (c[2] + c[3])) + ((d[0] + d[1]) + (d[2] + d[3])) == 0.0
        check = 0.0
        for lane in range(n_b):
            u = np.uint64(lane)
            for p in range(out_pos.shape[0]):
                for q in range(out_pos.shape[1]):
                    e = _at(out_pos[p, q]) + u
                    x, y = re_f[e], im_f[e]
                    out[b0 + lane, p, q] = complex(x, y)
                    check += (x - x) + (y - y)
        return check == 0.0

    @nb.njit(cache=True, **_JIT)
    def solve_blocks(T: np.ndarray, t_link: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                     re: np.ndarray, im: np.ndarray, wr: np.ndarray, wi: np.ndarray,
                     out_pos: np.ndarray, out: np.ndarray) -> int:
        """Port matrices ``out`` (B, n_ports, n_inputs) of blocks with forward matrices ``T``
        (B, n_tbus, 4), ``lanes`` blocks at a time through the whole tree on the scratch arena
        ``re``/``im`` (entries, lanes); ``out_pos`` holds the arena positions of the root's
        entries. Returns 1 when every entry of ``out`` is finite, else 0 (the caller then
        falls back to sparse LU).
        """
        every = np.empty(0, dtype=np.int64)  # no list: every TBU, in order
        wr_f, wi_f = wr.reshape(wr.size), wi.reshape(wi.size)
        ok = True
        for b0 in range(0, T.shape[0], lanes):
            ok &= _solve_group(T, b0, b0, every, t_link, merges, pool, re, im, wr_f, wi_f, out_pos, out)
        return 1 if ok else 0

    @nb.njit(cache=True, **_JIT)
    def solve_phases(phi_top: np.ndarray, phi_bot: np.ndarray, scale: np.ndarray, amp_top: np.ndarray,
                     amp_bot: np.ndarray, c_top: np.ndarray, c_bot: np.ndarray, t2t1: np.ndarray,
                     s2s1: np.ndarray, t2s1: np.ndarray, s2t1: np.ndarray, start: int, T: np.ndarray,
                     t_link: np.ndarray, merges: np.ndarray, pool: np.ndarray, re: np.ndarray,
                     im: np.ndarray, wr: np.ndarray, wi: np.ndarray, out_pos: np.ndarray,
                     out: np.ndarray) -> int:
        """The whole solve of blocks ``start .. start + B`` (state-major: block ``s W + w``) in one
        call, ``B = out.shape[0]``: each group's forward matrices from the heater phases
        (:func:`transfer_blocks`' arguments) into ``T`` (``lanes``, n_tbus, 4: one group's, reused
        by the next; the rows past the batch's end zero), then :func:`solve_blocks`' merges on
        them into ``out`` (B, n_ports, n_inputs). The same operations as the two kernels called one
        after the other, so the same bytes, without the Python and the second foreign call between
        them (at one wavelength the call, not the arithmetic, was most of a solve), and without a
        batch-long array of forward matrices written to memory (4.5 kB a block on smartlight,
        besides the output's 25.6: the sparse fallback computes them again, with
        :func:`transfer_blocks`). Returns 1 when every entry is finite, else 0.
        """
        n_wl = scale.shape[0]
        every = np.empty(0, dtype=np.int64)
        wr_f, wi_f = wr.reshape(wr.size), wi.reshape(wi.size)
        ok = True
        for b0 in range(0, out.shape[0], lanes):
            for lane in range(lanes):
                if b0 + lane < out.shape[0]:
                    s, w = divmod(start + b0 + lane, n_wl)
                    _transfer(phi_top, phi_bot, s, scale, w, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1,
                              s2t1, T[lane])
                else:  # past the batch: zero leaves, as solve_blocks' groups have there
                    T[lane, :, :] = 0.0
            ok &= _solve_group(T, 0, b0, every, t_link, merges, pool, re, im, wr_f, wi_f, out_pos, out)
        return 1 if ok else 0

    @nb.njit(cache=True, **_JIT)
    def remerge_blocks(T: np.ndarray, tbus: np.ndarray, t_link: np.ndarray, merges: np.ndarray,
                       pool: np.ndarray, order: np.ndarray, re: np.ndarray, im: np.ndarray,
                       wr: np.ndarray, wi: np.ndarray) -> None:
        """Rewrite the leaves ``tbus`` (forward matrices ``T`` (B, len(tbus), 4)) in the kept
        arenas ``re``/``im`` (groups, entries, lanes; block ``b`` is lane ``b % lanes`` of
        group ``b // lanes``) and re-run the merges ``order`` (children first).
        """
        wr_f, wi_f = wr.reshape(wr.size), wi.reshape(wi.size)
        for g in range(re.shape[0]):
            _fill_leaves(re[g], im[g], T, g * lanes, tbus)
            re_f, im_f = re[g].reshape(re[g].size), im[g].reshape(im[g].size)
            for m in order:
                _merge(re_f, im_f, merges[m], pool, t_link, wr_f, wi_f)

    @nb.njit(**_JIT)
    def _keep(mg: np.ndarray, wr: np.ndarray, wi: np.ndarray, sr: np.ndarray, si: np.ndarray,
              s_off: int) -> None:
        """After :func:`_merge`: copy what its adjoint needs from the temporaries to the kept
        store ``sr``/``si`` (flat, entries x lanes) at ``s_off``: ``A_c = A[cut, cut + kept]``
        (k x (k + ea)), then ``W = G^-1 [X A_ce, B_t]`` (k x ne), both row-major.
        """
        k, ea, eb = mg[K], mg[EA], mg[EB]
        ne = ea + eb
        wa, wg = k + ea, k + ne
        o_g = k * wa + k * k + k * eb  # where _merge keeps the reduced system [I | W]
        for e in range(k * wa):
            _copy(sr, si, s_off + e, wr, wi, e)
        for i in range(k):
            for c in range(ne):
                _copy(sr, si, s_off + k * wa + i * ne + c, wr, wi, o_g + i * wg + k + c)

    @nb.njit(cache=True, **_JIT)
    def keep_blocks(T: np.ndarray, t_link: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                    s_offs: np.ndarray, re: np.ndarray, im: np.ndarray, wr: np.ndarray, wi: np.ndarray,
                    sr: np.ndarray, si: np.ndarray, out_pos: np.ndarray, out: np.ndarray) -> None:
        """:func:`solve_blocks` that also keeps, per merge, ``A_c`` and ``W`` (:func:`_keep`) in
        ``sr``/``si`` (groups, kept entries, lanes; block ``b`` in lane ``b % lanes`` of group
        ``b // lanes``) at ``s_offs``: everything :func:`adjoint_blocks` reads.
        """
        every = np.empty(0, dtype=np.int64)
        re_f, im_f = re.reshape(re.size), im.reshape(im.size)
        wr_f, wi_f = wr.reshape(wr.size), wi.reshape(wi.size)
        for g in range(sr.shape[0]):
            b0 = g * lanes
            _fill_leaves(re, im, T, b0, every)
            sr_f, si_f = sr[g].reshape(sr[g].size), si[g].reshape(si[g].size)
            for m in range(merges.shape[0]):
                _merge(re_f, im_f, merges[m], pool, t_link, wr_f, wi_f)
                _keep(merges[m], wr_f, wi_f, sr_f, si_f, s_offs[m])
            for lane in range(min(lanes, T.shape[0] - b0)):
                for p in range(out_pos.shape[0]):
                    for q in range(out_pos.shape[1]):
                        out[b0 + lane, p, q] = complex(re[out_pos[p, q], lane], im[out_pos[p, q], lane])

    @nb.njit(**_JIT)
    def _split(fr: np.ndarray, fi: np.ndarray, sr: np.ndarray, si: np.ndarray, mg: np.ndarray,
               pool: np.ndarray, t_link: np.ndarray, s_off: int, fo: np.ndarray, m: int) -> None:
        """The waves entering a merge's halves from the waves entering the merged node, on
        lanes blocks: kept ports keep theirs, A's cut gets ``u = W x`` and B's cut
        ``v = T (A_cc u + A_ce x_A)``. ``fo``: field offsets of the node, A and B (each field
        is ports x ``m`` excitations, flat entries x lanes); ``A_c`` and ``W`` at ``s_off``.
        """
        k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
        ne, wa = ea + eb, k + mg[EA]
        ca, cb, ka, kb, lk = ix, ix + k, ix + 2 * k, ix + 2 * k + ea, ix + 2 * k + ea + eb
        fn, fa, fb = fo[0], fo[1], fo[2]
        for j in range(ea):
            for e in range(m):
                _copy(fr, fi, fa + pool[ka + j] * m + e, fr, fi, fn + j * m + e)
        for j in range(eb):
            for e in range(m):
                _copy(fr, fi, fb + pool[kb + j] * m + e, fr, fi, fn + (ea + j) * m + e)
        o_w = s_off + k * wa
        # Each wave is a dot product summed in registers (:func:`_dot`, two excitations a pass
        # with :func:`_dot2`), its terms in the order the stored sums took them: the same bytes
        # with no load and store of the sum per term.
        for i in range(k):  # u = W x: row i of W against column e of x (x's rows m apart)
            du, w = fa + pool[ca + i] * m, o_w + i * ne
            for e in range(0, m - 1, 2):
                u0, u1 = _dot2(_zero(), _zero(), sr, si, w, 1, fr, fi, fn + e, m, ne, 1.0)
                _put(fr, fi, du + e, u0)
                _put(fr, fi, du + e + 1, u1)
            if m % 2:
                _put(fr, fi, du + m - 1, _dot(_zero(), sr, si, w, 1, fr, fi, fn + m - 1, m, ne, 1.0))
        for i in range(k):  # v = T (A_cc u + A_ce x_A)
            dv, ti = fb + pool[cb + i] * m, t_link[pool[lk + i]]
            for e in range(m):
                acc = _zero()
                for q in range(k):  # u's rows are A's cut ports, in pool order
                    acc = _dot(acc, sr, si, s_off + i * wa + q, 0, fr, fi, fa + pool[ca + q] * m + e, 0, 1,
                               1.0)
                acc = _dot(acc, sr, si, s_off + i * wa + k, 1, fr, fi, fn + e, m, ea, 1.0)
                _put(fr, fi, dv + e, acc)
                _scaled(fr, fi, dv + e, fr, fi, dv + e, ti)

    @nb.njit(cache=True, **_JIT)
    def adjoint_blocks(sr: np.ndarray, si: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                       t_link: np.ndarray, s_offs: np.ndarray, f_offs: np.ndarray, root_x: np.ndarray,
                       leaf_off: np.ndarray, n_in: int, fr: np.ndarray, fi: np.ndarray,
                       z: np.ndarray) -> None:
        """``z[b, t, 2i + j] = sum_q Fa[2+i, q] Fi[j, q] + Fa[j, q] Fi[2+i, q]`` for every TBU
        ``t`` of blocks kept by :func:`keep_blocks`: the derivative of a real objective with
        respect to the TBU's ``T[i, j]``, with ``Fi``/``Fa`` the waves entering its four ports
        when the root is lit by ``root_x[b]`` (root ports x 2 n_in: the inputs, then the
        objective's cotangent on the outputs). The waves come down the tree root first
        (:func:`_split`); ``f_offs`` (n_merges, 3) and ``leaf_off`` are field offsets (already
        times the excitation count); ``fr``/``fi`` (entries + 4, lanes) are scratch.
        """
        m = root_x.shape[2]
        root = f_offs[merges.shape[0] - 1, 0]
        acc = fr.shape[0] - 4  # the four sums of one TBU
        fr_f, fi_f = fr.reshape(fr.size), fi.reshape(fi.size)
        for g in range(sr.shape[0]):
            b0 = g * lanes
            nl = min(lanes, root_x.shape[0] - b0)
            for p in range(root_x.shape[1]):
                for e in range(m):
                    for lane in range(lanes):
                        v = root_x[b0 + lane, p, e] if lane < nl else 0.0j
                        fr[root + p * m + e, lane], fi[root + p * m + e, lane] = v.real, v.imag
            sr_f, si_f = sr[g].reshape(sr[g].size), si[g].reshape(si[g].size)
            for mi in range(merges.shape[0] - 1, -1, -1):
                _split(fr_f, fi_f, sr_f, si_f, merges[mi], pool, t_link, s_offs[mi], f_offs[mi], m)
            for t in range(leaf_off.shape[0]):
                base = leaf_off[t]
                for i in range(2):
                    for j in range(2):
                        d, v = acc + 2 * i + j, _zero()
                        for q in range(n_in):  # summed in registers, in the stored sum's order
                            v = _dot(v, fr_f, fi_f, base + (2 + i) * m + n_in + q, 0, fr_f, fi_f,
                                     base + j * m + q, 0, 1, 1.0)
                            v = _dot(v, fr_f, fi_f, base + j * m + n_in + q, 0, fr_f, fi_f,
                                     base + (2 + i) * m + q, 0, 1, 1.0)
                        _put(fr_f, fi_f, d, v)
                        for lane in range(nl):
                            z[b0 + lane, t, 2 * i + j] = complex(fr[d, lane], fi[d, lane])


    @nb.njit(**_JIT)
    def _seed_root(cr: np.ndarray, ci: np.ndarray, root: int, n_root: int, G: np.ndarray, b0: int,
                   out_slot: np.ndarray, in_slot: np.ndarray) -> None:
        """The root's cotangent on lanes blocks ``b0 ..``: the symmetric part of the objective's
        ``G`` (outputs x inputs) placed at the root's ports (``dY`` is symmetric, so only that
        part reaches the heaters, and a symmetric cotangent stays symmetric on the way down).
        """
        nl = min(lanes, G.shape[0] - b0)
        for e in range(n_root * n_root):
            _fill(cr, ci, root + e, 0.0, 0.0)
        for p in range(G.shape[1]):
            for q in range(G.shape[2]):
                o, i = out_slot[p], in_slot[q]
                d, t = _at(root + o * n_root + i), _at(root + i * n_root + o)
                for lane in range(nl):
                    u = np.uint64(lane)
                    v = 0.5 * G[b0 + lane, p, q]
                    cr[d + u] += v.real
                    ci[d + u] += v.imag
                    cr[t + u] += v.real
                    ci[t + u] += v.imag

    @nb.njit(**_JIT)
    def _cotangent_rows(wr: np.ndarray, wi: np.ndarray, sr: np.ndarray, si: np.ndarray, cr: np.ndarray,
                        ci: np.ndarray, mg: np.ndarray, pool: np.ndarray, t_link: np.ndarray,
                        s_off: int) -> None:
        """A merge's three k x ne products into the temporaries ``wr``/``wi``: ``R = T (A_cc W +
        [A_ce, 0])`` (the waves entering B's cut per wave entering the node), then ``M = W C``
        and ``N = R C`` with ``C`` the node's cotangent (row-major at the merge's output).
        """
        out, k, ea, eb, ix = mg[OUT], mg[K], mg[EA], mg[EB], mg[IDX]
        ne, wa = ea + eb, k + ea
        lk = ix + 2 * k + ea + eb
        o_w, o_m, o_n = s_off + k * wa, k * ne, 2 * k * ne
        # Every entry a dot product summed in registers (:func:`_dot`; two columns a pass with
        # :func:`_dot2`), its terms in the order the stored row updates took them: the same bytes.
        for i in range(k):  # R[i, c] = t_i (A_ce[i, c] (c < ea) + sum_q A_cc[i, q] W[q, c])
            r, ti = i * ne, t_link[pool[lk + i]]
            for c in range(ne):
                start = _get(sr, si, s_off + i * wa + k + c) if c < ea else _zero()
                _put(wr, wi, r + c, _dot(start, sr, si, s_off + i * wa, 1, sr, si, o_w + c, ne, k, 1.0))
                _scaled(wr, wi, r + c, wr, wi, r + c, ti)
        for i in range(k):  # M = W C and N = R C: row i against columns q, q + 1 of C (rows ne apart)
            for q in range(0, ne - 1, 2):
                m0, m1 = _dot2(_zero(), _zero(), sr, si, o_w + i * ne, 1, cr, ci, out + q, ne, ne, 1.0)
                n0, n1 = _dot2(_zero(), _zero(), wr, wi, i * ne, 1, cr, ci, out + q, ne, ne, 1.0)
                _put(wr, wi, o_m + i * ne + q, m0)
                _put(wr, wi, o_m + i * ne + q + 1, m1)
                _put(wr, wi, o_n + i * ne + q, n0)
                _put(wr, wi, o_n + i * ne + q + 1, n1)
            if ne % 2:
                q = ne - 1
                m0 = _dot(_zero(), sr, si, o_w + i * ne, 1, cr, ci, out + q, ne, ne, 1.0)
                _put(wr, wi, o_m + i * ne + q, m0)
                _put(wr, wi, o_n + i * ne + q, _dot(_zero(), wr, wi, i * ne, 1, cr, ci, out + q, ne, ne, 1.0))

    @nb.njit(**_JIT)
    def _half_cotangent(cr: np.ndarray, ci: np.ndarray, h_off: int, h_p: int, cut: int, kept: int,
                        k: int, e0: int, eh: int, out: int, ne: int, wr: np.ndarray, wi: np.ndarray,
                        o_p: int, pr: np.ndarray, pi: np.ndarray, o_q: int, pool: np.ndarray) -> None:
        """One half's cotangent ``P C P^T`` (symmetric, written whole at ``h_off``, ``h_p`` ports
        a row), with ``P = [Q; [I at the half's kept columns e0 .. e0 + eh]]``: cut-cut ``(Q C) Q^T``
        (``Q C`` at ``o_p`` in ``wr``/``wi``, ``Q`` at ``o_q`` in ``pr``/``pi``, both k x ne),
        cut-kept ``(Q C)`` at the kept columns, kept-kept ``C`` itself.
        """
        for i in range(k):
            ri = h_off + pool[cut + i] * h_p
            for j in range(i, k):
                d = ri + pool[cut + j]  # summed in registers, in the stored sum's order
                _put(cr, ci, d, _dot(_zero(), wr, wi, o_p + i * ne, 1, pr, pi, o_q + j * ne, 1, ne, 1.0))
                _copy(cr, ci, h_off + pool[cut + j] * h_p + pool[cut + i], cr, ci, d)
            for j in range(eh):
                d = ri + pool[kept + j]
                _copy(cr, ci, d, wr, wi, o_p + i * ne + e0 + j)
                _copy(cr, ci, h_off + pool[kept + j] * h_p + pool[cut + i], cr, ci, d)
        for i in range(eh):
            ri = h_off + pool[kept + i] * h_p
            for j in range(eh):
                _copy(cr, ci, ri + pool[kept + j], cr, ci, out + (e0 + i) * ne + e0 + j)

    @nb.njit(cache=True, **_JIT)
    def cotangent_blocks(sr: np.ndarray, si: np.ndarray, merges: np.ndarray, pool: np.ndarray,
                         t_link: np.ndarray, s_offs: np.ndarray, G: np.ndarray, out_slot: np.ndarray,
                         in_slot: np.ndarray, leaf_off: np.ndarray, cr: np.ndarray, ci: np.ndarray,
                         wr: np.ndarray, wi: np.ndarray, z: np.ndarray) -> None:
        """:func:`adjoint_blocks`' ``z`` (the objective's derivative with respect to every TBU's
        ``T[i, j]``) by the cotangent of every node's matrix instead of the waves of every lit
        port: with ``P_A`` (``P_B``) the waves entering half A's (B's) ports per wave entering the
        node (``[W; I]``, ``[T (A_cc W + [A_ce, 0]); I]``), a node's cotangent ``C`` gives its
        halves ``P C P^T``. About ``2 k ne^2`` multiply-adds per merge whatever the number of
        ports the objective reads, against ``2 k ne`` per lit port for the waves: cheaper once the
        objective reads about as many inputs as a node has ports. ``G`` (B, outputs, inputs) is
        the objective's cotangent (``dL = Re sum G dY``), ``out_slot``/``in_slot`` its rows' and
        columns' ports in the root's matrix; ``cr``/``ci`` (arena entries, lanes) hold every
        node's cotangent at the arena's offsets, ``leaf_off`` every TBU's; ``wr``/``wi`` (3 k ne of
        the largest merge, lanes) the products.
        """
        n_m = merges.shape[0]
        root, n_root = merges[n_m - 1, OUT], merges[n_m - 1, EA] + merges[n_m - 1, EB]
        cr_f, ci_f = cr.reshape(cr.size), ci.reshape(ci.size)
        wr_f, wi_f = wr.reshape(wr.size), wi.reshape(wi.size)
        for g in range(sr.shape[0]):
            b0 = g * lanes
            _seed_root(cr_f, ci_f, root, n_root, G, b0, out_slot, in_slot)
            sr_f, si_f = sr[g].reshape(sr[g].size), si[g].reshape(si[g].size)
            for mi in range(n_m - 1, -1, -1):
                mg = merges[mi]
                k, ea, eb, ix = mg[K], mg[EA], mg[EB], mg[IDX]
                ne, s_off = ea + eb, s_offs[mi]
                _cotangent_rows(wr_f, wi_f, sr_f, si_f, cr_f, ci_f, mg, pool, t_link, s_off)
                _half_cotangent(cr_f, ci_f, mg[A_OFF], mg[A_P], ix, ix + 2 * k, k, 0, ea, mg[OUT], ne,
                                wr_f, wi_f, k * ne, sr_f, si_f, s_off + k * (k + ea), pool)
                _half_cotangent(cr_f, ci_f, mg[B_OFF], mg[B_P], ix + k, ix + 2 * k + ea, k, ea, eb, mg[OUT],
                                ne, wr_f, wi_f, 2 * k * ne, wr_f, wi_f, 0, pool)
            for t in range(leaf_off.shape[0]):
                for i in range(2):
                    for j in range(2):
                        e = _at(leaf_off[t] + (2 + i) * 4 + j)
                        for lane in range(min(lanes, G.shape[0] - b0)):
                            u = e + np.uint64(lane)
                            z[b0 + lane, t, 2 * i + j] = 2.0 * complex(cr_f[u], ci_f[u])

    @nb.njit(cache=True, **_JIT)
    def transfer_blocks(phi_top: np.ndarray, phi_bot: np.ndarray, scale: np.ndarray, amp_top: np.ndarray,
                        amp_bot: np.ndarray, c_top: np.ndarray, c_bot: np.ndarray, t2t1: np.ndarray,
                        s2s1: np.ndarray, t2s1: np.ndarray, s2t1: np.ndarray, out: np.ndarray) -> None:
        """Forward matrices ``out`` (S, W, n, 4) = [T00, T01, T10, T11] of every TBU for heater
        phases ``phi_top``/``phi_bot`` (S, n, rad at the reference wavelength) at W wavelengths:
        heater phase scale ``scale`` (W,), arm amplitudes ``amp_*`` (n,), arm phase constants
        ``c_*`` and coupler products (W, n) (:class:`photonics.circuit.TransferConstants`).
        The complex operations of :func:`photonics.circuit.arm_factors` and
        :func:`photonics.circuit.arm_transfers` in the same order (a real times a complex
        multiplies as complex, ``exp(j x)`` is ``cos x + j sin x`` from libm, as numpy's: written
        so here, without the ``exp(0)`` and the complex product by ``j`` numba's ``exp`` adds, it
        is 10 % faster), so the same bytes, in one pass instead of a dozen numpy passes over
        (S, W, n) temporaries. :func:`solve_phases` runs the same :func:`_transfer` per block.
        The same in every lane build (nothing here is per lane); the solve calls the ``LANES`` one.
        """
        for s in range(phi_top.shape[0]):
            for w in range(scale.shape[0]):
                _transfer(phi_top, phi_bot, s, scale, w, amp_top, amp_bot, c_top, c_bot, t2t1, s2s1, t2s1,
                          s2t1, out[s, w])

    return {"solve_blocks": solve_blocks, "remerge_blocks": remerge_blocks, "keep_blocks": keep_blocks,
            "adjoint_blocks": adjoint_blocks, "cotangent_blocks": cotangent_blocks,
            "transfer_blocks": transfer_blocks, "solve_phases": solve_phases}


KERNELS = {lanes: build(lanes) for lanes in (LANES, 1)}
solve_blocks, remerge_blocks = KERNELS[LANES]["solve_blocks"], KERNELS[LANES]["remerge_blocks"]
keep_blocks, adjoint_blocks = KERNELS[LANES]["keep_blocks"], KERNELS[LANES]["adjoint_blocks"]
cotangent_blocks = KERNELS[LANES]["cotangent_blocks"]


def c_entry_points(lanes: int = LANES) -> dict:
    """The kernels of ``lanes`` lanes (:data:`KERNELS`) as C functions over raw pointers and
    sizes (numba ``cfunc``s), whose machine code :mod:`photonics.kernel_loader` keeps and
    loads in later processes without importing numba. Arguments: each array as its data
    pointer followed by its dimensions.
    """
    from numba import carray, cfunc
    from numba import types as nt

    i8, pc, pf, pi = nt.int64, nt.CPointer(nt.complex128), nt.CPointer(nt.float64), nt.CPointer(nt.int64)
    solve_blocks, remerge_blocks = KERNELS[lanes]["solve_blocks"], KERNELS[lanes]["remerge_blocks"]
    keep_blocks, adjoint_blocks = KERNELS[lanes]["keep_blocks"], KERNELS[lanes]["adjoint_blocks"]
    cotangent_blocks, transfer_blocks = KERNELS[lanes]["cotangent_blocks"], KERNELS[lanes]["transfer_blocks"]
    solve_phases = KERNELS[lanes]["solve_phases"]

    @cfunc(nt.void(pf, pf, i8, i8, pf, i8, pf, pf, pf, pf, pf, pf, pf, pf, pc), **_JIT)
    def transfer_c(pt, pb, s, n, sc, w, at, ab, ct, cb, a, b, c, d, out):  # noqa: ANN001
        transfer_blocks(carray(pt, (s, n)), carray(pb, (s, n)), carray(sc, (w,)), carray(at, (n,)),
                        carray(ab, (n,)), carray(ct, (w, n)), carray(cb, (w, n)), carray(a, (w, n)),
                        carray(b, (w, n)), carray(c, (w, n)), carray(d, (w, n)), carray(out, (s, w, n, 4)))

    @cfunc(i8(pc, i8, i8, pc, i8, pi, i8, pi, i8, pf, pf, i8, pf, pf, i8, pi, i8, i8, pc), **_JIT)
    def solve_c(T, b, n, tl, n_links, mg, m, pool, n_pool, re, im, size, wr, wi, w_size, op, p, q,  # noqa: ANN001
                out):  # noqa: ANN001
        return solve_blocks(carray(T, (b, n, 4)), carray(tl, (n_links,)), carray(mg, (m, 9)),
                            carray(pool, (n_pool,)),
                            carray(re, (size, lanes)), carray(im, (size, lanes)), carray(wr, (w_size, lanes)),
                            carray(wi, (w_size, lanes)), carray(op, (p, q)), carray(out, (b, p, q)))

    @cfunc(i8(pf, pf, i8, i8, pf, i8, pf, pf, pf, pf, pf, pf, pf, pf, i8, pc, i8, pc, i8, pi, i8, pi, i8, pf,
              pf, i8, pf, pf, i8, pi, i8, i8, pc), **_JIT)
    def phases_c(pt, pb, s, n, sc, w, at, ab, ct, cb, a, b, c, d, start, T, nb_, tl, n_links, mg, m,  # noqa: ANN001
                 pool, n_pool, re, im, size, wr, wi, w_size, op, p, q, out):  # noqa: ANN001
        # T: one group's forward matrices (lanes, n, 4), reused; nb_: the batch (out's blocks)
        return solve_phases(carray(pt, (s, n)), carray(pb, (s, n)), carray(sc, (w,)), carray(at, (n,)),
                            carray(ab, (n,)), carray(ct, (w, n)), carray(cb, (w, n)), carray(a, (w, n)),
                            carray(b, (w, n)), carray(c, (w, n)), carray(d, (w, n)), start,
                            carray(T, (lanes, n, 4)), carray(tl, (n_links,)), carray(mg, (m, 9)),
                            carray(pool, (n_pool,)), carray(re, (size, lanes)), carray(im, (size, lanes)),
                            carray(wr, (w_size, lanes)), carray(wi, (w_size, lanes)), carray(op, (p, q)),
                            carray(out, (nb_, p, q)))

    entries = {}
    if lanes == 1:  # one block (a one-wavelength solve): its arguments packed once (solve_packed)
        entries["solve_packed"] = _packed_entry(solve_phases, lanes)

    @cfunc(nt.void(pc, i8, i8, pi, pc, i8, pi, i8, pi, i8, pi, i8, pf, pf, i8, i8, pf, pf, i8), **_JIT)
    def remerge_c(T, b, n, tbus, tl, n_links, mg, m, pool, n_pool, order, n_order, re, im, g, size,  # noqa: ANN001
                  wr, wi, w_size):  # noqa: ANN001
        remerge_blocks(carray(T, (b, n, 4)), carray(tbus, (n,)), carray(tl, (n_links,)), carray(mg, (m, 9)),
                       carray(pool, (n_pool,)), carray(order, (n_order,)), carray(re, (g, size, lanes)),
                       carray(im, (g, size, lanes)), carray(wr, (w_size, lanes)), carray(wi, (w_size, lanes)))

    @cfunc(nt.void(pc, i8, i8, pc, i8, pi, i8, pi, i8, pi, pf, pf, i8, pf, pf, i8, pf, pf, i8, i8, pi, i8,
                   i8, pc), **_JIT)
    def keep_c(T, b, n, tl, n_links, mg, m, pool, n_pool, s_offs, re, im, size, wr, wi, w_size,  # noqa: ANN001
               sr, si, g, s_size, op, p, q, out):  # noqa: ANN001
        keep_blocks(carray(T, (b, n, 4)), carray(tl, (n_links,)), carray(mg, (m, 9)), carray(pool, (n_pool,)),
                    carray(s_offs, (m,)), carray(re, (size, lanes)), carray(im, (size, lanes)),
                    carray(wr, (w_size, lanes)), carray(wi, (w_size, lanes)), carray(sr, (g, s_size, lanes)),
                    carray(si, (g, s_size, lanes)), carray(op, (p, q)), carray(out, (b, p, q)))

    @cfunc(nt.void(pf, pf, i8, i8, pi, i8, pi, i8, pc, i8, pi, pi, pc, i8, i8, i8, pi, i8, i8, pf, pf, i8,
                   pc), **_JIT)
    def adjoint_c(sr, si, g, s_size, mg, m, pool, n_pool, tl, n_links, s_offs, f_offs, rx, b, r, e,  # noqa: ANN001
                  leaf, n, n_in, fr, fi, f_rows, z):  # noqa: ANN001
        adjoint_blocks(carray(sr, (g, s_size, lanes)), carray(si, (g, s_size, lanes)), carray(mg, (m, 9)),
                       carray(pool, (n_pool,)), carray(tl, (n_links,)), carray(s_offs, (m,)),
                       carray(f_offs, (m, 3)), carray(rx, (b, r, e)), carray(leaf, (n,)), n_in,
                       carray(fr, (f_rows, lanes)), carray(fi, (f_rows, lanes)), carray(z, (b, n, 4)))

    @cfunc(nt.void(pf, pf, i8, i8, pi, i8, pi, i8, pc, i8, pi, pc, i8, i8, i8, pi, pi, pi, i8, pf, pf, i8,
                   pf, pf, i8, pc), **_JIT)
    def cotangent_c(sr, si, g, s_size, mg, m, pool, n_pool, tl, n_links, s_offs, G, b, p, q, o_slot,  # noqa: ANN001
                    i_slot, leaf, n, cr, ci, size, wr, wi, w_size, z):  # noqa: ANN001
        cotangent_blocks(carray(sr, (g, s_size, lanes)), carray(si, (g, s_size, lanes)), carray(mg, (m, 9)),
                         carray(pool, (n_pool,)), carray(tl, (n_links,)), carray(s_offs, (m,)),
                         carray(G, (b, p, q)), carray(o_slot, (p,)), carray(i_slot, (q,)), carray(leaf, (n,)),
                         carray(cr, (size, lanes)), carray(ci, (size, lanes)), carray(wr, (w_size, lanes)),
                         carray(wi, (w_size, lanes)), carray(z, (b, n, 4)))

    return {"solve_blocks": solve_c, "remerge_blocks": remerge_c, "keep_blocks": keep_c,
            "adjoint_blocks": adjoint_c, "cotangent_blocks": cotangent_c, "transfer_blocks": transfer_c,
            "solve_phases": phases_c, **entries}


def _packed_entry(solve_phases, lanes: int):  # noqa: ANN001 - a numba kernel; returns a cfunc
    """``solve_packed(args, phi_top, phi_bot, out) -> int``: ``solve_phases``' C entry point
    (``phases_c`` of :func:`c_entry_points`) with every argument but the heater phases and the
    output read from ``args``, an int64 array holding ``phases_c``' 33 arguments in their order
    (pointers as integers; the slots of ``phi_bot`` and ``out`` unused, ``phi_top``'s holding
    :func:`photonics.circuit_merge.data_word` instead). The three arrays come as the addresses of
    their numpy array objects (ctypes' ``py_object``), each array's data pointer read from word
    ``args[0]`` of its object (the caller checks they are C-contiguous ndarrays of the right dtype
    and shape). The same kernel on the same arrays: the same bytes. Why: a caller that solves one
    block over and over (:class:`photonics.circuit.PreparedSolve` at one wavelength) packs the
    arguments that do not change once, and each call passes four words instead of converting 33
    ctypes arguments or exporting three buffers. Right after another program's call has evicted
    the caches, those conversions' code and objects were most of our call's cold penalty
    (docs/physics.md, "One wavelength").
    """
    from numba import carray, cfunc
    from numba import types as nt
    from numba.core.extending import intrinsic

    i8, pc, pf, pi = nt.int64, nt.CPointer(nt.complex128), nt.CPointer(nt.float64), nt.CPointer(nt.int64)

    def as_pointer(ty):  # noqa: ANN001 - an int64 address as a typed pointer (LLVM inttoptr)
        @intrinsic
        def cast(_typingctx, _address):  # noqa: ANN001
            def codegen(context, builder, _signature, args):  # noqa: ANN001
                return builder.inttoptr(args[0], context.get_value_type(ty))

            return ty(nt.int64), codegen

        return cast

    fp, cp, ip = as_pointer(pf), as_pointer(pc), as_pointer(pi)

    @cfunc(i8(pi, i8, i8, i8), **_JIT)
    def packed_c(args, top, bot, res):  # noqa: ANN001
        a = carray(args, (_PACKED_ARGS,))
        s, n, w, n_links, m, n_pool = a[2], a[3], a[5], a[18], a[20], a[22]
        size, w_size, p, q = a[25], a[28], a[30], a[31]
        word = a[0]  # each array object's data pointer: word ``word`` of the object
        pt, pb = carray(ip(top), (word + 1,))[word], carray(ip(bot), (word + 1,))[word]
        out = carray(ip(res), (word + 1,))[word]
        return solve_phases(carray(fp(pt), (s, n)), carray(fp(pb), (s, n)), carray(fp(a[4]), (w,)),
                            carray(fp(a[6]), (n,)), carray(fp(a[7]), (n,)), carray(fp(a[8]), (w, n)),
                            carray(fp(a[9]), (w, n)), carray(fp(a[10]), (w, n)), carray(fp(a[11]), (w, n)),
                            carray(fp(a[12]), (w, n)), carray(fp(a[13]), (w, n)), a[14],
                            carray(cp(a[15]), (lanes, n, 4)), carray(cp(a[17]), (n_links,)),
                            carray(ip(a[19]), (m, 9)), carray(ip(a[21]), (n_pool,)),
                            carray(fp(a[23]), (size, lanes)), carray(fp(a[24]), (size, lanes)),
                            carray(fp(a[26]), (w_size, lanes)), carray(fp(a[27]), (w_size, lanes)),
                            carray(ip(a[29]), (p, q)), carray(cp(out), (a[16], p, q)))

    return packed_c


_PACKED_ARGS = 33  # solve_packed's args: phases_c's argument list, one int64 each
