"""Unbounded trust-region least squares, lean: the crosstalk fits' inner loop.

:func:`least_squares_trf_unbounded` is ``scipy.optimize.least_squares(fun, x0, jac=jac,
method="trf", loss="soft_l1" or "linear", f_scale=..., x_scale="jac", tr_solver="exact",
max_nfev=...)`` without bounds and with its default tolerances (1e-8), written out without
the wrappers, input checks and generic helpers around it: the same operations in the same
order on the same arrays (the SVD is the same LAPACK ``gesdd`` call ``scipy.linalg.svd``
makes), so it returns the same numbers, bit for bit (``tests/calibration/test_lsq.py``).
The fits are small, so the ~1 ms per iteration scipy spends in its wrappers and checks, not
arithmetic, was most of their time. The bounded fringe fits run the same algorithm
compiled, their model inside the loop (:mod:`photonics.fringe_fit_kernels`, issue 28).

The algorithm, its constants and the code it follows are scipy's
(``scipy/optimize/_lsq/trf.py`` and ``common.py``, BSD-3-Clause, Nikolay Mayorov 2016):
Branch, Coleman and Li, SIAM J. Sci. Comput. 21(1), 1999, with the exact trust-region
solver of More (1977) on one SVD per iteration.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, get_lapack_funcs

EPS = np.finfo(float).eps
LOSSES = ("linear", "soft_l1")  # the robust losses written out here; others go to scipy


@dataclass
class LsqResult:
    """What ``scipy.optimize.least_squares`` returns and the fits use.

    Attributes:
        x: solution.
        cost: half the sum of the (robust) loss of the residuals at ``x``.
        fun: residuals at ``x`` (not scaled by the loss).
        jac: Jacobian at ``x``, scaled by the robust loss as scipy returns it.
        nfev, njev: function and Jacobian evaluations.
        status: scipy's termination status (0: max_nfev reached, 1: gtol, 2: ftol, 3: xtol, 4: both).
    """

    x: np.ndarray
    cost: float
    fun: np.ndarray
    jac: np.ndarray
    nfev: int
    njev: int
    status: int


# LAPACK's SVD and its workspace size are kept per (shape, dtype) of the Jacobians solved: every
# calibration's fits use the same three shapes (their residual and parameter counts follow the
# sweep points), and the lookup with the workspace query costs ~5 us a call (5 % of a 44 x 10
# SVD). Bounded, as shapes follow the Options a long-running service may be given per request.
GESDD_KEPT = 64


@functools.lru_cache(maxsize=GESDD_KEPT)
def _gesdd(shape: tuple[int, int], dtype: np.dtype) -> tuple[Callable, int]:
    """LAPACK's ``gesdd`` for ``dtype`` and its workspace size for a ``shape`` matrix."""
    gesdd, gesdd_lwork = get_lapack_funcs(("gesdd", "gesdd_lwork"), dtype=dtype, ilp64="preferred")
    work, info = gesdd_lwork(shape[0], shape[1], compute_uv=True, full_matrices=False)
    if info != 0:
        raise ValueError(f"Internal work array size computation failed: {info}")
    return gesdd, int(work.real)


def _svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scipy.linalg.svd(a, full_matrices=False)``: the same LAPACK call, its workspace size kept."""
    gesdd, lwork = _gesdd(a.shape, a.dtype)
    u, s, v, info = gesdd(a, compute_uv=True, lwork=lwork, full_matrices=False, overwrite_a=False)
    if info > 0:
        raise LinAlgError("SVD did not converge")
    if info < 0:
        raise ValueError(f"illegal value in {-info}th argument of internal gesdd")
    return u, s, v


def _norm(x: np.ndarray) -> float:
    """``numpy.linalg.norm`` of a real vector (the same dot product and square root)."""
    return math.sqrt(x.dot(x))


def _soft_l1(f: np.ndarray, f_scale: float, rho: np.ndarray) -> np.ndarray:
    """The same as scipy's soft_l1 loss with its derivatives, scaled by ``f_scale`` (written into ``rho``)."""
    z = (f / f_scale) ** 2
    t = 1 + z
    rho[0] = 2 * (t**0.5 - 1)
    rho[1] = t**-0.5
    rho[2] = -0.5 * t**-1.5
    rho[0] *= f_scale**2
    rho[2] /= f_scale**2
    return rho


def _soft_l1_cost(f: np.ndarray, f_scale: float) -> float:
    """The soft_l1 cost alone (scipy's ``cost_only`` branch)."""
    z = (f / f_scale) ** 2
    t = 1 + z
    return 0.5 * f_scale**2 * (2 * (t**0.5 - 1)).sum()  # ndarray.sum: np.sum's reduction, no dispatch


def _robust_scale(J: np.ndarray, f: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same as scipy's ``scale_for_robust_loss_function`` (in place)."""
    J_scale = rho[1] + 2 * rho[2] * f**2
    J_scale[J_scale < EPS] = EPS
    J_scale **= 0.5
    f *= rho[1] / J_scale
    J *= J_scale[:, np.newaxis]
    return J, f


def _solve_tr(n: int, m: int, uf: np.ndarray, s: np.ndarray, V: np.ndarray, Delta: float,
              initial_alpha: float, rtol: float = 0.01, max_iter: int = 10) -> tuple[np.ndarray, float]:
    """The same as scipy's ``solve_lsq_trust_region`` (More's method on one SVD)."""
    suf = s * uf
    if m >= n:
        threshold = EPS * m * s[0]
        full_rank = s[-1] > threshold
    else:
        full_rank = False
    if full_rank:
        p = -V.dot(uf / s)
        if _norm(p) <= Delta:
            return p, 0.0

    def phi_and_derivative(alpha: float) -> tuple[float, float]:
        denom = s**2 + alpha
        p_norm = _norm(suf / denom)
        return p_norm - Delta, -(suf**2 / denom**3).sum() / p_norm

    alpha_upper = _norm(suf) / Delta
    if full_rank:
        phi, phi_prime = phi_and_derivative(0.0)
        alpha_lower = -phi / phi_prime
    else:
        alpha_lower = 0.0
    if initial_alpha is None or (not full_rank and initial_alpha == 0):
        alpha = max(0.001 * alpha_upper, (alpha_lower * alpha_upper) ** 0.5)
    else:
        alpha = initial_alpha
    for _ in range(max_iter):
        if alpha < alpha_lower or alpha > alpha_upper:
            alpha = max(0.001 * alpha_upper, (alpha_lower * alpha_upper) ** 0.5)
        phi, phi_prime = phi_and_derivative(alpha)
        if phi < 0:
            alpha_upper = alpha
        ratio = phi / phi_prime
        alpha_lower = max(alpha_lower, alpha - ratio)
        alpha -= (phi + Delta) * ratio / Delta
        if np.abs(phi) < rtol * Delta:
            break
    p = -V.dot(suf / (s**2 + alpha))
    p *= Delta / _norm(p)
    return p, alpha


def _update_tr_radius(Delta: float, actual_reduction: float, predicted_reduction: float,
                      step_norm: float) -> tuple[float, float]:
    """The next trust radius and the reduction ratio, as scipy's ``update_tr_radius``."""
    if predicted_reduction > 0:
        ratio = actual_reduction / predicted_reduction
    elif predicted_reduction == actual_reduction == 0:
        ratio = 1
    else:
        ratio = 0
    if ratio < 0.25:
        Delta = 0.25 * step_norm
    elif ratio > 0.75 and step_norm > 0.95 * Delta:
        Delta *= 2.0
    return Delta, ratio


def _termination(actual_reduction: float, cost: float, step_norm: float, x_norm: float, ratio: float,
                 ftol: float, xtol: float) -> int | None:
    """The termination status as scipy's ``check_termination``: 2 ftol, 3 xtol, 4 both, None: go on."""
    ftol_ok = actual_reduction < ftol * cost and ratio > 0.25
    xtol_ok = step_norm < xtol * (xtol + x_norm)
    return 4 if ftol_ok and xtol_ok else 2 if ftol_ok else 3 if xtol_ok else None


def least_squares_trf_unbounded(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    loss: str = "soft_l1",
    f_scale: float = 1.0,
    max_nfev: int | None = None,
    ftol: float = 1e-8,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
) -> LsqResult:
    """``scipy.optimize.least_squares(fun, x0, jac=jac, loss=loss, f_scale=f_scale,
    x_scale="jac", max_nfev=max_nfev)`` without bounds: scipy's ``trf_no_bounds`` loop
    with the exact trust-region solver, written out like scipy's bounded loop (the
    same operations on the same arrays, so the same numbers; the crosstalk fits, ~70 per
    calibration, spent most of their time in scipy's wrappers).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, not {loss!r}")
    x0 = np.atleast_1d(x0).astype(float)
    x = x0.copy()
    f = np.atleast_1d(fun(x0))
    J = np.atleast_2d(jac(x0))
    if not np.all(np.isfinite(f)):
        raise ValueError("Residuals are not finite in the initial point.")
    f_true = f.copy()
    nfev = njev = 1
    m, n = J.shape
    robust = loss == "soft_l1"
    rho = np.empty((3, m))
    if robust:
        _soft_l1(f, f_scale, rho)
        cost = 0.5 * np.sum(rho[0])
        J, f = _robust_scale(J, f, rho)
    else:
        cost = 0.5 * np.dot(f, f)
    g = J.T.dot(f)
    scale_inv = (J**2).sum(axis=0) ** 0.5  # scipy's compute_jac_scale
    scale_inv[scale_inv == 0] = 1
    scale = 1 / scale_inv
    Delta = _norm(x0 * scale_inv)
    if Delta == 0:
        Delta = 1.0
    if max_nfev is None:
        max_nfev = x0.size * 100
    alpha = 0.0
    status = None
    while True:
        g_norm = np.abs(g).max()
        if g_norm < gtol:
            status = 1
        if status is not None or nfev == max_nfev:
            break
        d = scale
        g_h = d * g
        J_h = J * d
        U, s, V = _svd(J_h)
        V = V.T
        uf = U.T.dot(f)
        actual_reduction = -1
        while actual_reduction <= 0 and nfev < max_nfev:
            step_h, alpha = _solve_tr(n, m, uf, s, V, Delta, initial_alpha=alpha)
            Js = J_h.dot(step_h)  # scipy's evaluate_quadratic without a diagonal
            predicted_reduction = -(0.5 * np.dot(Js, Js) + np.dot(step_h, g_h))
            step = d * step_h
            x_new = x + step
            f_new = np.atleast_1d(fun(x_new))
            nfev += 1
            step_h_norm = _norm(step_h)
            if not np.isfinite(f_new).all():
                Delta = 0.25 * step_h_norm
                continue
            cost_new = _soft_l1_cost(f_new, f_scale) if robust else 0.5 * np.dot(f_new, f_new)
            actual_reduction = cost - cost_new
            Delta_new, ratio = _update_tr_radius(Delta, actual_reduction, predicted_reduction, step_h_norm)
            status = _termination(actual_reduction, cost, _norm(step), _norm(x), ratio, ftol, xtol)
            if status is not None:
                break
            alpha *= Delta / Delta_new
            Delta = Delta_new
        if actual_reduction > 0:
            x = x_new
            f = f_new
            f_true = f.copy()
            cost = cost_new
            J = np.atleast_2d(jac(x))
            njev += 1
            if robust:
                _soft_l1(f, f_scale, rho)
                J, f = _robust_scale(J, f, rho)
            g = J.T.dot(f)
            scale_inv = np.maximum((J**2).sum(axis=0) ** 0.5, scale_inv)
            scale = 1 / scale_inv
    return LsqResult(x=x, cost=float(cost), fun=f_true, jac=J, nfev=nfev, njev=njev,
                     status=0 if status is None else status)
