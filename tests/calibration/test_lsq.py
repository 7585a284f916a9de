"""The lean bounded TRF (calibration.lsq) returns scipy.optimize.least_squares' numbers, bit for bit."""

import numpy as np
import pytest
from scipy.optimize import least_squares

from calibration.fit import fringe_model
from calibration.lsq import least_squares_trf, least_squares_trf_unbounded


def _problem(seed: int):
    """A noisy two-output fringe (one heater) with an outlier, and the fit's bounds."""
    rng = np.random.default_rng(seed)
    i = 3.85 * np.sqrt(np.linspace(0, 1, 24))
    signs = np.array([1.0, -1.0])
    p = fringe_model(i, 0, rng.uniform(0, 2 * np.pi), rng.uniform(0.4, 0.9), 0.01, np.array([0.8, 0.6]),
                     np.array([1e-3, 2e-3]), signs)
    p = p * (1 + 0.01 * rng.standard_normal(p.shape))
    p[5, 0] *= 1.3
    w = 1 / (0.005 * p + 1e-4)

    def fun(v):
        return ((fringe_model(i, 0, v[0], v[1], v[2], v[3:5], v[5:7], signs) - p) * w).ravel()

    def jac(v):
        eps = 1e-7
        return np.stack([(fun(v + eps * e) - fun(v - eps * e)) / (2 * eps) for e in np.eye(7)], axis=1)

    x0 = np.array([rng.uniform(0, 6), rng.uniform(0.3, 1.5), 0.0, 0.7, 0.7, 0.0, 0.0])
    lb = np.array([-np.inf, 0.06, -0.05, 0.0, 0.0, 0.0, 0.0])
    ub = np.array([np.inf, 6.0, 0.6, np.inf, np.inf, np.inf, np.inf])
    return fun, jac, np.clip(x0, lb + 1e-15, ub - 1e-15), lb, ub


@pytest.mark.parametrize("loss", ["soft_l1", "linear"])
@pytest.mark.parametrize("seed", range(6))
def test_same_numbers_as_scipy(seed, loss):
    fun, jac, x0, lb, ub = _problem(seed)
    ref = least_squares(fun, x0, jac=jac, bounds=(lb, ub), loss=loss, f_scale=3.0, x_scale="jac",
                        max_nfev=200)
    got = least_squares_trf(fun, jac, x0, lb, ub, loss=loss, f_scale=3.0, max_nfev=200)
    assert np.array_equal(got.x, ref.x)
    assert got.cost == ref.cost
    assert np.array_equal(got.fun, ref.fun)
    assert np.array_equal(got.jac, ref.jac)
    assert (got.nfev, got.njev, got.status) == (ref.nfev, ref.njev, ref.status)


def test_max_nfev_stops_like_scipy():
    fun, jac, x0, lb, ub = _problem(1)
    ref = least_squares(fun, x0, jac=jac, bounds=(lb, ub), loss="soft_l1", f_scale=3.0, x_scale="jac",
                        max_nfev=3)
    got = least_squares_trf(fun, jac, x0, lb, ub, f_scale=3.0, max_nfev=3)
    assert got.status == ref.status == 0
    assert np.array_equal(got.x, ref.x)


def test_refuses_what_it_does_not_implement():
    fun, jac, x0, lb, ub = _problem(0)
    with pytest.raises(ValueError, match="loss"):
        least_squares_trf(fun, jac, x0, lb, ub, loss="huber")
    with pytest.raises(ValueError, match="finite bound"):
        least_squares_trf(fun, jac, x0, np.full(7, -np.inf), np.full(7, np.inf))
    outside = x0.copy()
    outside[1] = ub[1] + 1
    with pytest.raises(ValueError, match="outside"):
        least_squares_trf(fun, jac, outside, lb, ub)


def _crosstalk_problem(seed: int):
    """A victim near quadrature read at two outputs while three aggressors are driven, with
    an outlier: fit_crosstalk's unbounded problem."""
    from calibration.fit import crosstalk_model

    rng = np.random.default_rng(seed)
    n, n_agg = 24, 3
    signs = np.array([1.0, -1.0])
    setting = np.arange(n) % 2
    drive = rng.uniform(0, 3, (n, n_agg))
    truth_f = rng.uniform(0.002, 0.03, n_agg)
    p = crosstalk_model(np.array([0.3, 0.2]), signs, setting, np.array([0.05, -0.04]), truth_f, drive)
    p = p * (1 + 0.005 * rng.standard_normal(p.shape))
    p[3, 1] *= 1.2
    w = 1 / (0.005 * p + 1e-4)

    def fun(v):
        return ((crosstalk_model(v[:2], signs, setting, v[2:4], v[4:], drive) - p) * w).ravel()

    def jac(v):
        eps = 1e-7
        return np.stack([(fun(v + eps * e) - fun(v - eps * e)) / (2 * eps) for e in np.eye(v.size)], axis=1)

    return fun, jac, np.concatenate([p.mean(axis=0), np.zeros(2 + n_agg)])


@pytest.mark.parametrize("loss", ["soft_l1", "linear"])
@pytest.mark.parametrize("seed", range(4))
def test_unbounded_same_numbers_as_scipy(seed, loss):
    """The unbounded loop (fit_crosstalk's) returns scipy's trf_no_bounds numbers, bit for bit."""
    fun, jac, x0 = _crosstalk_problem(seed)
    for max_nfev in (200, 3):
        ref = least_squares(fun, x0, jac=jac, loss=loss, f_scale=3.0, x_scale="jac", max_nfev=max_nfev)
        got = least_squares_trf_unbounded(fun, jac, x0, loss=loss, f_scale=3.0, max_nfev=max_nfev)
        assert np.array_equal(got.x, ref.x)
        assert got.cost == ref.cost
        assert np.array_equal(got.fun, ref.fun)
        assert np.array_equal(got.jac, ref.jac)
        assert (got.nfev, got.njev, got.status) == (ref.nfev, ref.njev, ref.status)
