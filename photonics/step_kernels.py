"""Compiled kernels of a single-wavelength step (numba): what a simulated bench does per
heater setting and per reading, one call each instead of a few dozen small numpy calls.

* :func:`settle_step` (a heater setting): every heater's arm phase with thermal crosstalk
  (``own + K @ heat``, ``K`` in CSR form) and the first-order settling bookkeeping of the
  simulated chip (``instruments.sim.chip.Chip.set_currents``).
* :func:`step_transfers` (a reading): which TBUs' heater phases moved since the held state,
  their forward transfer matrices at one wavelength, and the merge-table rows on their paths
  to the root, ascending: what :func:`photonics.circuit_merge.remerge` then re-runs
  (:meth:`photonics.circuit_solver.CircuitSolver.update_phases`).

Each does the IEEE operations of the numpy code it replaces in the same order (no
``fastmath``, so no reassociation and no fused multiply-add): scipy's CSR product sums each
row from 0 in stored order, ``exp(j x)`` is libm's ``cos x + j sin x`` as numpy's, and a real
times a complex multiplies as complex, as numpy's promotion does (as
:func:`photonics.circuit_kernels.transfer_blocks`). So a seeded simulation gives the same
bytes as before these kernels existed (tests/photonics/test_step_kernels.py).

Loaded like the merge kernels (:mod:`photonics.kernel_loader`): compiled once per machine
as C functions, their object code mapped by later processes without importing numba.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_JIT = {"nogil": True, "error_model": "numpy"}


@nb.njit(cache=True, **_JIT)
def settle_step(s: np.ndarray, eta: np.ndarray, kappa: np.ndarray, has_kappa: bool, indptr: np.ndarray,
                indices: np.ndarray, data: np.ndarray, to: np.ndarray, fast_left: np.ndarray,
                slow_left: np.ndarray, fast: float, slow: float, slow_share: float) -> None:
    """One heater setting, in place. ``s`` (n,): each heater's cubic self-phase (rad) at its
    new current; ``eta`` (rad/mW) its thermo-optic efficiency, ``kappa`` (1/mW) the rise of that
    efficiency with heat (used when ``has_kappa``); ``indptr, indices, data``: the crosstalk
    matrix K (rad/mW) in CSR form. The new settled phases are
    ``s (1 + kappa s / eta) + K @ (s / eta)``. ``to`` holds the phases the heaters were settling
    to and becomes the new ones; ``fast_left``/``slow_left`` (rad) what the two thermal
    responses had left to move at the last setting, ``fast``/``slow`` how much of it is still
    to come now (``exp(-t / tau)``, 0 once settled), ``slow_share`` the slow tail's share of a
    step. As ``Chip.set_currents`` in numpy: ``left + share * (new - to)``.
    """
    n = s.shape[0]
    fast_share = 1 - slow_share
    for i in range(n):
        acc = 0.0
        for jj in range(indptr[i], indptr[i + 1]):
            j = indices[jj]
            acc += data[jj] * (s[j] / eta[j])
        own = s[i] * (1 + kappa[i] * s[i] / eta[i]) if has_kappa else s[i]
        new = own + acc
        step = new - to[i]
        fast_left[i] = fast * fast_left[i] + fast_share * step
        slow_left[i] = slow * slow_left[i] + slow_share * step
        to[i] = new


@nb.njit(cache=True, **_JIT)
def step_transfers(top: np.ndarray, bot: np.ndarray, held_top: np.ndarray, held_bot: np.ndarray,
                   stale: np.ndarray, scale: float, amp_top: np.ndarray, amp_bot: np.ndarray,
                   c_top: np.ndarray, c_bot: np.ndarray, t2t1: np.ndarray, s2s1: np.ndarray,
                   t2s1: np.ndarray, s2t1: np.ndarray, paths: np.ndarray, mark: np.ndarray,
                   changed: np.ndarray, tbus: np.ndarray, T: np.ndarray, order: np.ndarray,
                   counts: np.ndarray) -> None:
    """One reading's state against the held one, at one wavelength.

    ``top``/``bot`` (n,): the new heater phases (rad); ``held_top``/``held_bot`` the held ones,
    overwritten with the new. ``stale`` (n, uint8): TBUs whose arena entries are stale anyway
    (written and re-merged with the changed ones). Writes ``changed[:k]`` (the TBUs whose phases
    differ), ``tbus[:k2]`` (changed or stale, ascending), their forward matrices
    ``T[:k2]`` = [T00, T01, T10, T11] from the per-TBU constants of
    :class:`photonics.circuit_solver.TransferCache` (``scale``: the heater phase scale), and
    ``order[:m]``, the merge-table rows above them, ascending; ``paths`` (n, depth) lists each
    TBU's merge rows bottom-up (-1 past the root), ``mark`` (n_merges, uint8) is zero scratch
    and left zero. ``counts`` = [k, k2, m].
    """
    n = top.shape[0]
    k = 0
    k2 = 0
    for t in range(n):
        moved = top[t] != held_top[t] or bot[t] != held_bot[t]
        if moved:
            changed[k] = t
            k += 1
            held_top[t] = top[t]
            held_bot[t] = bot[t]
        if moved or stale[t]:
            tbus[k2] = t
            k2 += 1
    for i in range(k2):
        t = tbus[i]
        a = amp_top[t] * np.exp(1j * (held_top[t] * scale + c_top[t]))
        b = amp_bot[t] * np.exp(1j * (held_bot[t] * scale + c_bot[t]))
        T[i, 0] = t2t1[t] * a - s2s1[t] * b
        T[i, 1] = 1j * (t2s1[t] * a + s2t1[t] * b)
        T[i, 2] = 1j * (s2t1[t] * a + t2s1[t] * b)
        T[i, 3] = t2t1[t] * b - s2s1[t] * a
        for d in range(paths.shape[1]):
            r = paths[t, d]
            if r < 0 or mark[r]:
                break  # the rest of this path is marked already
            mark[r] = 1
    m = 0
    for r in range(mark.shape[0]):
        if mark[r]:
            order[m] = r
            m += 1
            mark[r] = 0
    counts[0] = k
    counts[1] = k2
    counts[2] = m


def c_entry_points() -> dict:
    """The kernels as C functions over raw pointers and sizes (numba ``cfunc``s), for
    :mod:`photonics.kernel_loader`: each array as its data pointer followed by its dimensions.
    """
    from numba import carray, cfunc
    from numba import types as nt

    i8, pc, pf, pi, pb = (nt.int64, nt.CPointer(nt.complex128), nt.CPointer(nt.float64),
                          nt.CPointer(nt.int64), nt.CPointer(nt.uint8))

    @cfunc(nt.void(pf, pf, pf, i8, pi, pi, pf, i8, pf, pf, pf, i8, nt.float64, nt.float64, nt.float64),
           **_JIT)
    def settle_c(s, eta, kappa, has_kappa, indptr, indices, data, nnz, to, fl, sl, n, fast, slow,  # noqa: ANN001
                 share):  # noqa: ANN001
        settle_step(carray(s, (n,)), carray(eta, (n,)), carray(kappa, (n,)), has_kappa != 0,
                    carray(indptr, (n + 1,)), carray(indices, (nnz,)), carray(data, (nnz,)), carray(to, (n,)),
                    carray(fl, (n,)), carray(sl, (n,)), fast, slow, share)

    @cfunc(nt.void(pf, pf, pf, pf, pb, i8, nt.float64, pf, pf, pf, pf, pf, pf, pf, pf, pi, i8, pb, i8, pi, pi,
                   pc, pi, pi), **_JIT)
    def transfers_c(top, bot, ht, hb, stale, n, scale, at, ab, ct, cb, a, b, c, d, paths, depth, mark,  # noqa: ANN001
                    n_merges, changed, tbus, T, order, counts):  # noqa: ANN001
        step_transfers(carray(top, (n,)), carray(bot, (n,)), carray(ht, (n,)), carray(hb, (n,)),
                       carray(stale, (n,)), scale, carray(at, (n,)), carray(ab, (n,)), carray(ct, (n,)),
                       carray(cb, (n,)), carray(a, (n,)), carray(b, (n,)), carray(c, (n,)), carray(d, (n,)),
                       carray(paths, (n, depth)), carray(mark, (n_merges,)), carray(changed, (n,)),
                       carray(tbus, (n,)), carray(T, (n, 4)), carray(order, (n_merges,)),
                       carray(counts, (3,)))

    return {"settle_step": settle_c, "step_transfers": transfers_c}
