"""The fringe fits' compiled bounded TRF (photonics.fringe_fit_kernels) against
scipy.optimize.least_squares, and the crosstalk fits' lean unbounded TRF (calibration.lsq),
bit for bit scipy's numbers.
"""

import numpy as np
import pytest
from scipy.optimize import least_squares

from calibration import fit as fit_module
from calibration import lsq
from calibration.fit import NoiseModel, Sweep, fringe_least_squares, fringe_model
from calibration.lsq import least_squares_trf_unbounded


def _fringe_problem(seed: int, arms: tuple[int, ...] = (0,)):
    """Noisy two-output fringes of one or both heaters with an outlier: the fit's stacked
    problem, its bounds and a start inside them (as fit_tbu builds them).
    """
    rng = np.random.default_rng(seed)
    signs = np.array([1.0, -1.0])
    delta, rho2 = rng.uniform(0, 2 * np.pi), rng.uniform(0.4, 0.9, 2)
    sweeps = []
    for arm in arms:
        i = 3.85 * np.sqrt(np.linspace(0, 1, 24))
        p = fringe_model(i, arm, delta, rho2[arm], 0.01, np.array([0.8, 0.6]), np.array([1e-3, 2e-3]), signs)
        p = p * (1 + 0.01 * rng.standard_normal(p.shape))
        p[5, 0] *= 1.3
        sweeps.append(Sweep(arm, i, np.abs(p)))
    weights = [1.0 / NoiseModel().sigma(s.power_mw) for s in sweeps]
    problem = fit_module._stack_sweeps(sweeps, weights, signs)
    bounds = fit_module._parameter_bounds(problem.arms, problem.n_outputs, 3.85)
    start = (rng.uniform(0, 6), {a: rng.uniform(0.3, 1.5) for a in arms}, {})
    v0 = fit_module._start_vector(start, problem.arms, fit_module._start_levels(sweeps, 2), bounds)
    return problem, v0, bounds


def _modified_jacobian(problem, x, loss):
    """The Jacobian ``least_squares`` returns at ``x``: scaled by the loss's curvature (its
    ``scale_for_robust_loss_function``), so that J^T J approximates the Hessian.
    """
    jac = problem.jacobian(x)
    if loss == "linear":
        return jac
    z = (problem.residuals(x) / fit_module.ROBUST_SCALE) ** 2  # soft_l1: rho(z) = 2 (sqrt(1 + z) - 1)
    scale = (1 + z) ** -0.5 - z * (1 + z) ** -1.5  # rho'(z) + 2 rho''(z) z
    return jac * np.sqrt(np.maximum(scale, np.finfo(float).eps))[:, None]


# Two runs of the same algorithm stop where a step gains less than ftol (scipy's 1e-8) of the
# cost; a path perturbed by rounding stops up to a few such steps apart (1.25e-8 seen): ten ftols.
SAME_MINIMUM_COST_REL = 1e-7


@pytest.mark.parametrize("loss", ["soft_l1", "linear"])
@pytest.mark.parametrize(("seed", "arms"), [(s, (0,)) for s in range(4)] + [(s, (0, 1)) for s in range(4)])
def test_compiled_fringe_fit_reaches_scipys_minimum(seed, arms, loss):
    """The same algorithm with its sums in another order: the same minimum to scipy's own
    tolerances, reached the same way (status, evaluations).

    "The same minimum" is judged by cost, as scipy's stopping rule is: the two runs may stop
    at points along a flat valley whose costs differ by about ``ftol`` (the parameters there
    by 1e-3 relative), which is where ULP-level differences put them on a CPU whose numpy
    takes AVX-512 paths for ``power`` (seeds 2 and 0 with ``linear``, session 40).
    """
    problem, v0, (lo, hi) = _fringe_problem(seed, arms)
    ref = least_squares(problem.residuals, v0, jac=problem.jacobian, bounds=(lo, hi), loss=loss,
                        f_scale=fit_module.ROBUST_SCALE, x_scale="jac", max_nfev=200)
    got = fringe_least_squares(problem, v0, lo, hi, loss, 200)
    assert got.status == ref.status > 0
    assert abs(got.nfev - ref.nfev) <= 2
    assert got.cost == pytest.approx(ref.cost, rel=SAME_MINIMUM_COST_REL)
    moved = problem.jacobian(ref.x) @ (got.x - ref.x)  # the step from scipy's point to ours, in residuals
    assert 0.5 * moved @ moved <= SAME_MINIMUM_COST_REL * ref.cost  # what that step costs to first order
    np.testing.assert_allclose(got.fun, problem.residuals(got.x), rtol=1e-12, atol=1e-12)
    jac_here = _modified_jacobian(problem, got.x, loss)  # scipy's returned kind, at our point
    np.testing.assert_allclose(got.jac, jac_here, rtol=1e-4, atol=1e-6 * np.abs(ref.jac).max())


def test_compiled_fringe_fit_stops_at_max_nfev_like_scipy():
    problem, v0, (lo, hi) = _fringe_problem(1, (0, 1))
    ref = least_squares(problem.residuals, v0, jac=problem.jacobian, bounds=(lo, hi), loss="soft_l1",
                        f_scale=fit_module.ROBUST_SCALE, x_scale="jac", max_nfev=3)
    got = fringe_least_squares(problem, v0, lo, hi, "soft_l1", 3)
    assert got.status == ref.status == 0
    assert got.nfev == ref.nfev == 3
    np.testing.assert_allclose(got.x, ref.x, rtol=1e-9, atol=1e-12)


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


def test_the_kept_svd_routine_follows_the_dtype_and_stays_bounded():
    """The SVD's LAPACK routine is kept per shape *and* dtype: a float64 Jacobian after a float32
    one of the same shape gets double precision (kept by shape alone, it went through sgesdd),
    and at most GESDD_KEPT routines are kept however many shapes come."""
    rng = np.random.default_rng(20261128)
    a = rng.normal(size=(37, 9))
    lsq._svd(a.astype(np.float32))
    u, s, v = lsq._svd(a)
    assert u.dtype == s.dtype == v.dtype == np.float64
    np.testing.assert_allclose((u * s) @ v, a, rtol=0, atol=1e-12)
    for m in range(10, 10 + 2 * lsq.GESDD_KEPT):
        lsq._svd(rng.normal(size=(m, 3)))
    assert lsq._gesdd.cache_info().currsize == lsq.GESDD_KEPT
