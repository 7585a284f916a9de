"""Bounded trust-region-reflective least squares, lean: the fringe fits' inner loop.

:func:`least_squares_trf` is ``scipy.optimize.least_squares(fun, x0, jac=jac, bounds=(lb, ub),
method="trf", loss="soft_l1" or "linear", f_scale=..., x_scale="jac", tr_solver="exact",
max_nfev=...)`` with its default tolerances (1e-8), written out without the wrappers,
input checks and generic helpers around it: the same operations in the same order on the
same arrays (the SVD is the same LAPACK ``gesdd`` call ``scipy.linalg.svd`` makes), so it
returns the same numbers, bit for bit (``tests/calibration/test_lsq.py`` compares it with
scipy on fringe fits). The fringe fits are small (9-11 parameters, 30-100 residuals), so
the ~1 ms per iteration scipy spends in its wrappers and checks, not arithmetic, was most of
a calibration's fitting time.

The algorithm, its constants and the code it follows are scipy's
(``scipy/optimize/_lsq/trf.py`` and ``common.py``, BSD-3-Clause, Nikolay Mayorov 2016):
Branch, Coleman and Li, SIAM J. Sci. Comput. 21(1), 1999, with the exact trust-region
solver of More (1977) on one SVD per iteration.
"""

from __future__ import annotations

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


_GESDD: dict[tuple[int, int], tuple] = {}


def _svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scipy.linalg.svd(a, full_matrices=False)``: the same LAPACK call, its workspace size cached."""
    key = a.shape
    if key not in _GESDD:
        gesdd, gesdd_lwork = get_lapack_funcs(("gesdd", "gesdd_lwork"), (a,), ilp64="preferred")
        work, info = gesdd_lwork(a.shape[0], a.shape[1], compute_uv=True, full_matrices=False)
        if info != 0:
            raise ValueError(f"Internal work array size computation failed: {info}")
        _GESDD[key] = (gesdd, int(work.real))
    gesdd, lwork = _GESDD[key]
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


def _active(x: np.ndarray, lb: np.ndarray, ub: np.ndarray, rtol: float) -> np.ndarray:
    """The same as scipy's ``find_active_constraints``."""
    active = np.zeros_like(x, dtype=int)
    if rtol == 0:
        active[x <= lb] = -1
        active[x >= ub] = 1
        return active
    lower_dist = x - lb
    upper_dist = ub - x
    lower_threshold = rtol * np.maximum(1, np.abs(lb))
    upper_threshold = rtol * np.maximum(1, np.abs(ub))
    active[np.isfinite(lb) & (lower_dist <= np.minimum(upper_dist, lower_threshold))] = -1
    active[np.isfinite(ub) & (upper_dist <= np.minimum(lower_dist, upper_threshold))] = 1
    return active


def _strictly_feasible(x: np.ndarray, lb: np.ndarray, ub: np.ndarray, rstep: float = 1e-10) -> np.ndarray:
    """The same as scipy's ``make_strictly_feasible``; the common case (well inside) costs two comparisons."""
    if rstep == 0 and (x > lb).all() and (x < ub).all():
        return x.copy()  # no constraint active at rtol 0, nothing tight
    x_new = x.copy()
    active = _active(x, lb, ub, rstep)
    lower_mask = active == -1
    upper_mask = active == 1
    if rstep == 0:
        x_new[lower_mask] = np.nextafter(lb[lower_mask], ub[lower_mask])
        x_new[upper_mask] = np.nextafter(ub[upper_mask], lb[upper_mask])
    else:
        x_new[lower_mask] = lb[lower_mask] + rstep * np.maximum(1, np.abs(lb[lower_mask]))
        x_new[upper_mask] = ub[upper_mask] - rstep * np.maximum(1, np.abs(ub[upper_mask]))
    tight = (x_new < lb) | (x_new > ub)
    x_new[tight] = 0.5 * (lb[tight] + ub[tight])
    return x_new


def _cl_scaling(x: np.ndarray, g: np.ndarray, lb: np.ndarray, ub: np.ndarray,
                lb_fin: np.ndarray, ub_fin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same as scipy's ``CL_scaling_vector`` (Coleman-Li), the finiteness of the bounds precomputed."""
    v = np.ones_like(x)
    dv = np.zeros_like(x)
    mask = (g < 0) & ub_fin
    v[mask] = ub[mask] - x[mask]
    dv[mask] = -1
    mask = (g > 0) & lb_fin
    v[mask] = x[mask] - lb[mask]
    dv[mask] = 1
    return v, dv


def _step_to_bound(x: np.ndarray, s: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> tuple[float, np.ndarray]:
    """The same as scipy's ``step_size_to_bound``."""
    non_zero = np.nonzero(s)
    s_non_zero = s[non_zero]
    steps = np.empty_like(x)
    steps.fill(np.inf)
    with np.errstate(over="ignore"):
        steps[non_zero] = np.maximum((lb - x)[non_zero] / s_non_zero, (ub - x)[non_zero] / s_non_zero)
    min_step = np.min(steps)
    return min_step, np.equal(steps, min_step) * np.sign(s).astype(int)


def _intersect_tr(x: np.ndarray, s: np.ndarray, Delta: float) -> tuple[float, float]:
    """The same as scipy's ``intersect_trust_region``."""
    a = np.dot(s, s)
    if a == 0:
        raise ValueError("`s` is zero.")
    b = np.dot(x, s)
    c = np.dot(x, x) - Delta**2
    if c > 0:
        raise ValueError("`x` is not within the trust region.")
    d = np.sqrt(b * b - a * c)
    q = -(b + math.copysign(d, b))
    t1 = q / a
    t2 = c / q
    return (t1, t2) if t1 < t2 else (t2, t1)


def _quadratic_1d(J: np.ndarray, g: np.ndarray, s: np.ndarray, diag: np.ndarray,
                  s0: np.ndarray | None = None) -> tuple:
    """The same as scipy's ``build_quadratic_1d`` (with ``diag``)."""
    v = J.dot(s)
    a = np.dot(v, v)
    a += np.dot(s * diag, s)
    a *= 0.5
    b = np.dot(g, s)
    if s0 is None:
        return a, b
    u = J.dot(s0)
    b += np.dot(u, v)
    c = 0.5 * np.dot(u, u) + np.dot(g, s0)
    b += np.dot(s0 * diag, s)
    c += 0.5 * np.dot(s0 * diag, s0)
    return a, b, c


def _minimize_1d(a: float, b: float, lb: float, ub: float, c: float = 0) -> tuple[float, float]:
    """The same as scipy's ``minimize_quadratic_1d``."""
    t = [lb, ub]
    if a != 0:
        extremum = -0.5 * b / a
        if lb < extremum < ub:
            t.append(extremum)
    t = np.asarray(t)
    y = t * (a * t + b) + c
    i = np.argmin(y)
    return t[i], y[i]


def _evaluate_quadratic(J: np.ndarray, g: np.ndarray, s: np.ndarray, diag: np.ndarray) -> float:
    """The same as scipy's ``evaluate_quadratic`` for one step."""
    Js = J.dot(s)
    q = np.dot(Js, Js)
    q += np.dot(s * diag, s)
    return 0.5 * q + np.dot(s, g)


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


def _select_step(x: np.ndarray, J_h: np.ndarray, diag_h: np.ndarray, g_h: np.ndarray, p: np.ndarray,
                 p_h: np.ndarray, d: np.ndarray, Delta: float, lb: np.ndarray, ub: np.ndarray,
                 theta: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The same as scipy's ``select_step`` of the trust region reflective algorithm."""
    x_p = x + p
    if ((x_p >= lb) & (x_p <= ub)).all():
        return p, p_h, -_evaluate_quadratic(J_h, g_h, p_h, diag_h)
    p_stride, hits = _step_to_bound(x, p, lb, ub)
    r_h = np.copy(p_h)
    r_h[hits.astype(bool)] *= -1
    r = d * r_h
    p *= p_stride
    p_h *= p_stride
    x_on_bound = x + p
    _, to_tr = _intersect_tr(p_h, r_h, Delta)
    to_bound, _ = _step_to_bound(x_on_bound, r, lb, ub)
    r_stride = min(to_bound, to_tr)
    if r_stride > 0:
        r_stride_l = (1 - theta) * p_stride / r_stride
        r_stride_u = theta * to_bound if r_stride == to_bound else to_tr
    else:
        r_stride_l = 0
        r_stride_u = -1
    if r_stride_l <= r_stride_u:
        a, b, c = _quadratic_1d(J_h, g_h, r_h, diag_h, s0=p_h)
        r_stride, r_value = _minimize_1d(a, b, r_stride_l, r_stride_u, c=c)
        r_h *= r_stride
        r_h += p_h
        r = r_h * d
    else:
        r_value = np.inf
    p *= theta
    p_h *= theta
    p_value = _evaluate_quadratic(J_h, g_h, p_h, diag_h)
    ag_h = -g_h
    ag = d * ag_h
    to_tr = Delta / _norm(ag_h)
    to_bound, _ = _step_to_bound(x, ag, lb, ub)
    ag_stride = theta * to_bound if to_bound < to_tr else to_tr
    a, b = _quadratic_1d(J_h, g_h, ag_h, diag_h)
    ag_stride, ag_value = _minimize_1d(a, b, 0, ag_stride)
    ag_h *= ag_stride
    ag *= ag_stride
    if p_value < r_value and p_value < ag_value:
        return p, p_h, -p_value
    if r_value < p_value and r_value < ag_value:
        return r, r_h, -r_value
    return ag, ag_h, -ag_value


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


def least_squares_trf(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    loss: str = "soft_l1",
    f_scale: float = 1.0,
    max_nfev: int | None = None,
    ftol: float = 1e-8,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
) -> LsqResult:
    """Minimise ``sum(loss(fun(x)**2)) / 2`` within ``lb <= x <= ub`` (see module docstring).

    ``fun`` returns the residuals (m,), ``jac`` their Jacobian (m, n) as a new array (it is
    scaled in place). At least one bound must be finite (scipy runs a different loop
    without bounds). ``loss`` is one of :data:`LOSSES`.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, not {loss!r}")
    x0 = np.atleast_1d(x0).astype(float)
    lb = np.asarray(lb, dtype=float)
    ub = np.asarray(ub, dtype=float)
    if lb.shape != x0.shape or ub.shape != x0.shape:
        raise ValueError("Inconsistent shapes between bounds and `x0`.")
    if np.any(lb >= ub):
        raise ValueError("Each lower bound must be strictly less than each upper bound.")
    if not np.all((x0 >= lb) & (x0 <= ub)):
        raise ValueError("Initial guess is outside of provided bounds")
    if np.all(lb == -np.inf) and np.all(ub == np.inf):
        raise ValueError("least_squares_trf needs at least one finite bound")
    lb_fin, ub_fin = np.isfinite(lb), np.isfinite(ub)
    x = _strictly_feasible(x0, lb, ub)
    x0 = x
    f = np.array(fun(x), dtype=float)
    J = np.array(jac(x), dtype=float)
    if not np.all(np.isfinite(f)):
        raise ValueError("Residuals are not finite in the initial point.")
    m, n = J.shape
    robust = loss == "soft_l1"
    rho = np.empty((3, m))
    f_true = f.copy()
    nfev = njev = 1
    if robust:
        _soft_l1(f, f_scale, rho)
        cost = 0.5 * np.sum(rho[0])
        J, f = _robust_scale(J, f, rho)
    else:
        cost = 0.5 * np.dot(f, f)
    g = J.T.dot(f)
    scale_inv = (J**2).sum(axis=0) ** 0.5
    scale_inv[scale_inv == 0] = 1
    scale = 1 / scale_inv
    v, dv = _cl_scaling(x, g, lb, ub, lb_fin, ub_fin)
    v[dv != 0] *= scale_inv[dv != 0]
    Delta = _norm(x0 * scale_inv / v**0.5)
    if Delta == 0:
        Delta = 1.0
    f_augmented = np.zeros(m + n)
    J_augmented = np.empty((m + n, n))
    diag_rows, diag_cols = m + np.arange(n), np.arange(n)
    if max_nfev is None:
        max_nfev = x0.size * 100
    alpha = 0.0
    status = None
    while True:
        v, dv = _cl_scaling(x, g, lb, ub, lb_fin, ub_fin)
        g_norm = np.abs(g * v).max()
        if g_norm < gtol:
            status = 1
        if status is not None or nfev == max_nfev:
            break
        v[dv != 0] *= scale_inv[dv != 0]
        d = v**0.5 * scale
        diag_h = g * dv * scale
        g_h = d * g
        f_augmented[:m] = f
        J_augmented[:m] = J * d
        J_h = J_augmented[:m]
        J_augmented[m:] = 0.0  # np.diag(diag_h**0.5), written in place
        J_augmented[diag_rows, diag_cols] = diag_h**0.5
        U, s, V = _svd(J_augmented)
        V = V.T
        uf = U.T.dot(f_augmented)
        theta = max(0.995, 1 - g_norm)
        actual_reduction = -1
        while actual_reduction <= 0 and nfev < max_nfev:
            p_h, alpha = _solve_tr(n, m, uf, s, V, Delta, initial_alpha=alpha)
            p = d * p_h
            step, step_h, predicted_reduction = _select_step(x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub,
                                                             theta)
            x_new = _strictly_feasible(x + step, lb, ub, rstep=0)
            f_new = np.array(fun(x_new), dtype=float)
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
            J = np.array(jac(x), dtype=float)
            njev += 1
            if robust:
                _soft_l1(f, f_scale, rho)
                J, f = _robust_scale(J, f, rho)
            g = J.T.dot(f)
            scale_inv = np.maximum((J**2).sum(axis=0) ** 0.5, scale_inv)
            scale = 1 / scale_inv
    return LsqResult(x=x, cost=float(cost), fun=f_true, jac=J, nfev=nfev, njev=njev,
                     status=0 if status is None else status)


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
    with the exact trust-region solver, written out like :func:`least_squares_trf` (the
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
