"""Compiled bounded trust-region least squares of the fringe model (numba): the calibration's
fringe fits (:func:`calibration.fit.fit_tbu`) in one call per start.

The fringe model (:class:`calibration.fit._StackedSweeps`): readings ``i`` of every sweep of
one TBU, each seen at ``k`` outputs, with the parameter vector
``v = [delta, (rho2, rho3) per swept arm, amplitude_mw (k), floor_mw (k)]``::

    theta_i = delta + arm_sign_i (rho2 I_i^2 + rho3 I_i^3)
    model_io = floor_o + amplitude_o (1 + sign_o cos theta_i) / 2
    residual_io = (model_io - reading_io) weight_io

:func:`fringe_trf` is the loop of :func:`calibration.lsq.least_squares_trf` (scipy's
``least_squares(method="trf", x_scale="jac", tr_solver="exact")`` with bounds, the
``"linear"`` or ``"soft_l1"`` loss; Branch, Coleman and Li 1999, More 1977; scipy's code,
BSD-3-Clause, Nikolay Mayorov 2016) with the residuals and the Jacobian above evaluated in
place: the same steps, the same constants, the same termination. The arithmetic is not
bit for bit the numpy loop's (sums run in another order, the SVD is LAPACK's ``gesdd``
through numba), so fits agree with scipy's to its tolerances, not to the last bit
(tests/calibration/test_lsq.py). Per start it costs a few hundred microseconds where the
numpy loop spent ~0.4 ms per evaluation in numpy's per-call overhead (issue 28).

Numba's dispatcher runs it (``cache=True``: compiled once per machine): the SVD calls
LAPACK through numba's runtime, which the kernel loader's numba-free object code cannot.
No ``fastmath``: a seeded calibration gives the same bytes on any machine with the same
libraries.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

EPS = float(np.finfo(np.float64).eps)
_JIT = {"cache": True, "nogil": True}


@nb.njit(**_JIT)
def _theta(v: np.ndarray, i2: np.ndarray, i3: np.ndarray, arm_sign: np.ndarray,
           col: np.ndarray) -> np.ndarray:
    th = np.empty(i2.shape[0])
    for i in range(i2.shape[0]):
        c = col[i]
        th[i] = v[0] + arm_sign[i] * (v[c] * i2[i] + v[c + 1] * i3[i])
    return th


@nb.njit(**_JIT)
def fringe_residuals(v: np.ndarray, i2: np.ndarray, i3: np.ndarray, arm_sign: np.ndarray, col: np.ndarray,
                     signs: np.ndarray, power: np.ndarray, weights: np.ndarray, off: int) -> np.ndarray:
    """(n k,) weighted residuals of the fringe model at ``v`` (readings row-major)."""
    n, k = power.shape
    th = _theta(v, i2, i3, arm_sign, col)
    r = np.empty(n * k)
    for i in range(n):
        c = math.cos(th[i])
        for o in range(k):
            model = v[off + k + o] + v[off + o] * (1 + signs[o] * c) / 2
            r[i * k + o] = (model - power[i, o]) * weights[i, o]
    return r


@nb.njit(**_JIT)
def fringe_jacobian(v: np.ndarray, i2: np.ndarray, i3: np.ndarray, arm_sign: np.ndarray, col: np.ndarray,
                    signs: np.ndarray, weights: np.ndarray, off: int, n_par: int) -> np.ndarray:
    """(n k, n_par) derivative of :func:`fringe_residuals` by every parameter."""
    n, k = weights.shape
    th = _theta(v, i2, i3, arm_sign, col)
    J = np.zeros((n * k, n_par))
    for i in range(n):
        s, c = math.sin(th[i]), math.cos(th[i])
        for o in range(k):
            w = weights[i, o]
            row = i * k + o
            dtheta = -v[off + o] * signs[o] * s / 2 * w
            J[row, 0] = dtheta
            J[row, col[i]] = dtheta * arm_sign[i] * i2[i]
            J[row, col[i] + 1] = dtheta * arm_sign[i] * i3[i]
            J[row, off + o] = (1 + signs[o] * c) / 2 * w
            J[row, off + o + k] = w
    return J


@nb.njit(**_JIT)
def _norm(x: np.ndarray) -> float:
    acc = 0.0
    for v in x:
        acc += v * v
    return math.sqrt(acc)


@nb.njit(**_JIT)
def _dot(a: np.ndarray, b: np.ndarray) -> float:
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@nb.njit(**_JIT)
def _soft_l1(f: np.ndarray, f_scale: float, rho: np.ndarray) -> None:
    """Scipy's soft_l1 loss and its two derivatives, scaled by ``f_scale``, into ``rho`` (3, m)."""
    for i in range(f.shape[0]):
        z = (f[i] / f_scale) ** 2
        t = 1 + z
        rho[0, i] = 2 * (t**0.5 - 1) * f_scale**2
        rho[1, i] = t**-0.5
        rho[2, i] = -0.5 * t**-1.5 / f_scale**2


@nb.njit(**_JIT)
def _soft_l1_cost(f: np.ndarray, f_scale: float) -> float:
    acc = 0.0
    for i in range(f.shape[0]):
        t = 1 + (f[i] / f_scale) ** 2
        acc += 2 * (t**0.5 - 1)
    return 0.5 * f_scale**2 * acc


@nb.njit(**_JIT)
def _robust_scale(J: np.ndarray, f: np.ndarray, rho: np.ndarray) -> None:
    """Scipy's ``scale_for_robust_loss_function``, in place."""
    for i in range(f.shape[0]):
        js = rho[1, i] + 2 * rho[2, i] * f[i] ** 2
        js = EPS if js < EPS else js  # (a NaN stays NaN, as in scipy)
        js = js**0.5
        f[i] *= rho[1, i] / js
        for j in range(J.shape[1]):
            J[i, j] *= js


@nb.njit(**_JIT)
def _cl_scaling(x: np.ndarray, g: np.ndarray, lb: np.ndarray,
                ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scipy's ``CL_scaling_vector`` (Coleman-Li)."""
    v = np.ones_like(x)
    dv = np.zeros_like(x)
    for i in range(x.shape[0]):
        if g[i] < 0 and np.isfinite(ub[i]):
            v[i] = ub[i] - x[i]
            dv[i] = -1
        if g[i] > 0 and np.isfinite(lb[i]):
            v[i] = x[i] - lb[i]
            dv[i] = 1
    return v, dv


@nb.njit(**_JIT)
def _strictly_feasible(x: np.ndarray, lb: np.ndarray, ub: np.ndarray, rstep: float) -> np.ndarray:
    """Scipy's ``make_strictly_feasible`` (with its ``find_active_constraints``: where a value
    is near both bounds, the upper one is written last and wins).
    """
    x_new = x.copy()
    for i in range(x.shape[0]):
        act = 0
        if rstep == 0:
            if x[i] <= lb[i]:
                act = -1
            if x[i] >= ub[i]:
                act = 1
        else:
            lower_dist, upper_dist = x[i] - lb[i], ub[i] - x[i]
            if np.isfinite(lb[i]) and lower_dist <= min(upper_dist, rstep * max(1.0, abs(lb[i]))):
                act = -1
            if np.isfinite(ub[i]) and upper_dist <= min(lower_dist, rstep * max(1.0, abs(ub[i]))):
                act = 1
        if act == -1:
            x_new[i] = np.nextafter(lb[i], ub[i]) if rstep == 0 else lb[i] + rstep * max(1.0, abs(lb[i]))
        elif act == 1:
            x_new[i] = np.nextafter(ub[i], lb[i]) if rstep == 0 else ub[i] - rstep * max(1.0, abs(ub[i]))
        if x_new[i] < lb[i] or x_new[i] > ub[i]:
            x_new[i] = 0.5 * (lb[i] + ub[i])
    return x_new


@nb.njit(**_JIT)
def _step_to_bound(x: np.ndarray, s: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> tuple[float, np.ndarray]:
    """Scipy's ``step_size_to_bound``: the step to the nearest bound along ``s`` and which bounds it hits."""
    steps = np.full(x.shape[0], np.inf)
    for i in range(x.shape[0]):
        if s[i] != 0:
            steps[i] = max((lb[i] - x[i]) / s[i], (ub[i] - x[i]) / s[i])
    min_step = steps.min()
    hits = np.zeros(x.shape[0], dtype=np.int64)
    for i in range(x.shape[0]):
        if steps[i] == min_step:
            hits[i] = 1 if s[i] > 0 else (-1 if s[i] < 0 else 0)
    return min_step, hits


@nb.njit(**_JIT)
def _intersect_tr(x: np.ndarray, s: np.ndarray, Delta: float) -> tuple[float, float]:
    """Scipy's ``intersect_trust_region``."""
    a = _dot(s, s)
    if a == 0:
        raise ValueError("`s` is zero.")
    b = _dot(x, s)
    c = _dot(x, x) - Delta**2
    if c > 0:
        raise ValueError("`x` is not within the trust region.")
    d = math.sqrt(b * b - a * c)
    q = -(b + math.copysign(d, b))
    t1 = q / a
    t2 = c / q
    return (t1, t2) if t1 < t2 else (t2, t1)


@nb.njit(**_JIT)
def _quadratic_1d(J: np.ndarray, g: np.ndarray, s: np.ndarray, diag: np.ndarray, s0: np.ndarray,
                  with_s0: bool) -> tuple[float, float, float]:
    """Scipy's ``build_quadratic_1d`` (with ``diag``; ``c`` 0 without ``s0``)."""
    v = J.dot(s)
    a = _dot(v, v)
    a += _dot(s * diag, s)
    a *= 0.5
    b = _dot(g, s)
    if not with_s0:
        return a, b, 0.0
    u = J.dot(s0)
    b += _dot(u, v)
    c = 0.5 * _dot(u, u) + _dot(g, s0)
    b += _dot(s0 * diag, s)
    c += 0.5 * _dot(s0 * diag, s0)
    return a, b, c


@nb.njit(**_JIT)
def _minimize_1d(a: float, b: float, lb: float, ub: float, c: float) -> tuple[float, float]:
    """Scipy's ``minimize_quadratic_1d``: the first of lb, ub (and the extremum inside) with the
    least value.
    """
    best_t, best_y = lb, lb * (a * lb + b) + c
    y = ub * (a * ub + b) + c
    if y < best_y:
        best_t, best_y = ub, y
    if a != 0:
        extremum = -0.5 * b / a
        if lb < extremum < ub:
            y = extremum * (a * extremum + b) + c
            if y < best_y:
                best_t, best_y = extremum, y
    return best_t, best_y


@nb.njit(**_JIT)
def _evaluate_quadratic(J: np.ndarray, g: np.ndarray, s: np.ndarray, diag: np.ndarray) -> float:
    Js = J.dot(s)
    q = _dot(Js, Js)
    q += _dot(s * diag, s)
    return 0.5 * q + _dot(s, g)


@nb.njit(**_JIT)
def _phi_and_derivative(alpha: float, suf: np.ndarray, s: np.ndarray, Delta: float) -> tuple[float, float]:
    denom = s**2 + alpha
    p_norm = _norm(suf / denom)
    return p_norm - Delta, -(suf**2 / denom**3).sum() / p_norm


@nb.njit(**_JIT)
def _solve_tr(n: int, m: int, uf: np.ndarray, s: np.ndarray, V: np.ndarray, Delta: float,
              initial_alpha: float) -> tuple[np.ndarray, float]:
    """Scipy's ``solve_lsq_trust_region`` (More's method on one SVD; rtol 0.01, 10 iterations)."""
    rtol, max_iter = 0.01, 10
    suf = s * uf
    full_rank = False
    if m >= n:
        full_rank = s[-1] > EPS * m * s[0]
    if full_rank:
        p = -V.dot(uf / s)
        if _norm(p) <= Delta:
            return p, 0.0
    alpha_upper = _norm(suf) / Delta
    if full_rank:
        phi, phi_prime = _phi_and_derivative(0.0, suf, s, Delta)
        alpha_lower = -phi / phi_prime
    else:
        alpha_lower = 0.0
    if not full_rank and initial_alpha == 0:
        alpha = max(0.001 * alpha_upper, (alpha_lower * alpha_upper) ** 0.5)
    else:
        alpha = initial_alpha
    for _ in range(max_iter):
        if alpha < alpha_lower or alpha > alpha_upper:
            alpha = max(0.001 * alpha_upper, (alpha_lower * alpha_upper) ** 0.5)
        phi, phi_prime = _phi_and_derivative(alpha, suf, s, Delta)
        if phi < 0:
            alpha_upper = alpha
        ratio = phi / phi_prime
        alpha_lower = max(alpha_lower, alpha - ratio)
        alpha -= (phi + Delta) * ratio / Delta
        if abs(phi) < rtol * Delta:
            break
    p = -V.dot(suf / (s**2 + alpha))
    p *= Delta / _norm(p)
    return p, alpha


@nb.njit(**_JIT)
def _select_step(x: np.ndarray, J_h: np.ndarray, diag_h: np.ndarray, g_h: np.ndarray, p: np.ndarray,
                 p_h: np.ndarray, d: np.ndarray, Delta: float, lb: np.ndarray, ub: np.ndarray,
                 theta: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Scipy's ``select_step`` of the trust region reflective algorithm."""
    x_p = x + p
    if np.all((x_p >= lb) & (x_p <= ub)):
        return p, p_h, -_evaluate_quadratic(J_h, g_h, p_h, diag_h)
    p_stride, hits = _step_to_bound(x, p, lb, ub)
    r_h = p_h.copy()
    for i in range(r_h.shape[0]):
        if hits[i] != 0:
            r_h[i] *= -1
    r = d * r_h
    p = p * p_stride
    p_h = p_h * p_stride
    x_on_bound = x + p
    _, to_tr = _intersect_tr(p_h, r_h, Delta)
    to_bound, _ = _step_to_bound(x_on_bound, r, lb, ub)
    r_stride = min(to_bound, to_tr)
    if r_stride > 0:
        r_stride_l = (1 - theta) * p_stride / r_stride
        r_stride_u = theta * to_bound if r_stride == to_bound else to_tr
    else:
        r_stride_l = 0.0
        r_stride_u = -1.0
    if r_stride_l <= r_stride_u:
        a, b, c = _quadratic_1d(J_h, g_h, r_h, diag_h, p_h, True)
        r_stride, r_value = _minimize_1d(a, b, r_stride_l, r_stride_u, c)
        r_h = r_h * r_stride + p_h
        r = r_h * d
    else:
        r_value = np.inf
    p = p * theta
    p_h = p_h * theta
    p_value = _evaluate_quadratic(J_h, g_h, p_h, diag_h)
    ag_h = -g_h
    ag = d * ag_h
    to_tr = Delta / _norm(ag_h)
    to_bound, _ = _step_to_bound(x, ag, lb, ub)
    ag_stride = theta * to_bound if to_bound < to_tr else to_tr
    a, b, _ = _quadratic_1d(J_h, g_h, ag_h, diag_h, ag_h, False)
    ag_stride, ag_value = _minimize_1d(a, b, 0.0, ag_stride, 0.0)
    ag_h = ag_h * ag_stride
    ag = ag * ag_stride
    if p_value < r_value and p_value < ag_value:
        return p, p_h, -p_value
    if r_value < p_value and r_value < ag_value:
        return r, r_h, -r_value
    return ag, ag_h, -ag_value


@nb.njit(**_JIT)
def fringe_trf(x0: np.ndarray, lb: np.ndarray, ub: np.ndarray, i2: np.ndarray, i3: np.ndarray,
               arm_sign: np.ndarray, col: np.ndarray, signs: np.ndarray, power: np.ndarray,
               weights: np.ndarray, off: int, robust: bool, f_scale: float, max_nfev: int, ftol: float,
               xtol: float, gtol: float) -> tuple:
    """Minimise the fringe model's ``sum(loss(residual**2)) / 2`` within ``lb <= x <= ub`` from ``x0``
    (inside the bounds): ``(x, cost, residuals at x, Jacobian at x scaled by the loss, nfev, njev,
    status)``, status as scipy's (0: max_nfev reached, 1 gtol, 2 ftol, 3 xtol, 4 ftol and xtol).
    """
    n_par = x0.shape[0]
    x = _strictly_feasible(x0, lb, ub, 1e-10)
    x_start = x.copy()
    f = fringe_residuals(x, i2, i3, arm_sign, col, signs, power, weights, off)
    J = fringe_jacobian(x, i2, i3, arm_sign, col, signs, weights, off, n_par)
    m, n = J.shape
    rho = np.empty((3, m))
    f_true = f.copy()
    nfev = 1
    njev = 1
    if robust:
        _soft_l1(f, f_scale, rho)
        cost = 0.5 * rho[0].sum()
        _robust_scale(J, f, rho)
    else:
        cost = 0.5 * _dot(f, f)
    g = J.T.dot(f)
    scale_inv = (J**2).sum(axis=0) ** 0.5
    for j in range(n):
        if scale_inv[j] == 0:
            scale_inv[j] = 1.0
    scale = 1 / scale_inv
    v, dv = _cl_scaling(x, g, lb, ub)
    for j in range(n):
        if dv[j] != 0:
            v[j] *= scale_inv[j]
    Delta = _norm(x_start * scale_inv / v**0.5)
    if Delta == 0:
        Delta = 1.0
    f_aug = np.zeros(m + n)
    J_aug = np.zeros((m + n, n))
    alpha = 0.0
    status = -1
    x_new = x
    f_new = f
    cost_new = cost
    while True:
        v, dv = _cl_scaling(x, g, lb, ub)
        g_norm = np.abs(g * v).max()
        if g_norm < gtol:
            status = 1
        if status != -1 or nfev == max_nfev:
            break
        for j in range(n):
            if dv[j] != 0:
                v[j] *= scale_inv[j]
        d = v**0.5 * scale
        diag_h = g * dv * scale
        g_h = d * g
        f_aug[:m] = f
        for i in range(m):
            for j in range(n):
                J_aug[i, j] = J[i, j] * d[j]
        J_aug[m:] = 0.0
        for j in range(n):
            J_aug[m + j, j] = diag_h[j] ** 0.5
        J_h = J_aug[:m]
        U, s, Vt = np.linalg.svd(J_aug, full_matrices=False)
        V = Vt.T.copy()
        uf = U.T.dot(f_aug)
        theta = max(0.995, 1 - g_norm)
        actual_reduction = -1.0
        while actual_reduction <= 0 and nfev < max_nfev:
            p_h, alpha = _solve_tr(n, m, uf, s, V, Delta, alpha)
            p = d * p_h
            step, step_h, predicted_reduction = _select_step(x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub,
                                                             theta)
            x_new = _strictly_feasible(x + step, lb, ub, 0.0)
            f_new = fringe_residuals(x_new, i2, i3, arm_sign, col, signs, power, weights, off)
            nfev += 1
            step_h_norm = _norm(step_h)
            if not np.all(np.isfinite(f_new)):
                Delta = 0.25 * step_h_norm
                continue
            cost_new = _soft_l1_cost(f_new, f_scale) if robust else 0.5 * _dot(f_new, f_new)
            actual_reduction = cost - cost_new
            # the trust radius (scipy's update_tr_radius)
            if predicted_reduction > 0:
                ratio = actual_reduction / predicted_reduction
            elif predicted_reduction == actual_reduction == 0:
                ratio = 1.0
            else:
                ratio = 0.0
            Delta_new = Delta
            if ratio < 0.25:
                Delta_new = 0.25 * step_h_norm
            elif ratio > 0.75 and step_h_norm > 0.95 * Delta:
                Delta_new = Delta * 2.0
            # termination (scipy's check_termination)
            ftol_ok = actual_reduction < ftol * cost and ratio > 0.25
            xtol_ok = _norm(step) < xtol * (xtol + _norm(x))
            if ftol_ok and xtol_ok:
                status = 4
            elif ftol_ok:
                status = 2
            elif xtol_ok:
                status = 3
            if status != -1:
                break
            alpha *= Delta / Delta_new
            Delta = Delta_new
        if actual_reduction > 0:
            x = x_new
            f = f_new
            f_true = f.copy()
            cost = cost_new
            J = fringe_jacobian(x, i2, i3, arm_sign, col, signs, weights, off, n_par)
            njev += 1
            if robust:
                _soft_l1(f, f_scale, rho)
                _robust_scale(J, f, rho)
            g = J.T.dot(f)
            scale_inv = np.maximum((J**2).sum(axis=0) ** 0.5, scale_inv)
            scale = 1 / scale_inv
    return x, cost, f_true, J, nfev, njev, max(status, 0)
