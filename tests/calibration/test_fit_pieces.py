"""The pieces fit_tbu is made of: the stacked residuals and Jacobian, the starts, the trial drop."""

import numpy as np
import pytest

from calibration import fit
from calibration.fit import NoiseModel, Sweep, fringe_model, sweep_currents

SIGNS = np.array([1.0, -1.0])
AMP, FLO = np.array([0.4, 0.3]), np.array([1e-3, 2e-3])
DELTA = 1.1
CURVES = {0: (0.62, 0.013), 1: (0.55, 0.009)}  # arm: (rho2 rad/mA^2, rho3 rad/mA^3)


def sweeps_of(arms, noisy=True):
    rng = np.random.default_rng(3)
    out = []
    for arm in arms:
        i = sweep_currents(3.85, 16 + 4 * arm)  # sweeps of different lengths: the stacking shows
        p = fringe_model(i, arm, DELTA, *CURVES[arm], AMP, FLO, SIGNS)
        out.append(Sweep(arm, i, p * (1 + 0.005 * rng.standard_normal(p.shape)) if noisy else p))
    return out


def problem_of(sweeps):
    weights = [1.0 / NoiseModel().sigma(s.power_mw) for s in sweeps]
    return fit._stack_sweeps(sweeps, weights, SIGNS), weights


def vector(arms):
    return np.array([DELTA, *[c for a in arms for c in CURVES[a]], *AMP, *FLO])


@pytest.mark.parametrize("arms", [[0], [1], [0, 1], [1, 0]])
def test_stacked_residuals_are_each_sweeps_weighted_misfit(arms):
    sweeps = sweeps_of(arms)
    problem, weights = problem_of(sweeps)
    v = vector(arms)
    expected = np.concatenate([
        ((fringe_model(s.current_ma, s.arm, DELTA, *CURVES[s.arm], AMP, FLO, SIGNS) - s.power_mw) * w).ravel()
        for s, w in zip(sweeps, weights, strict=True)
    ])
    np.testing.assert_allclose(problem.residuals(v), expected, rtol=1e-12, atol=1e-12)
    delta, curves, amp, flo = problem.unpack(v)
    assert delta == DELTA
    assert curves == {a: CURVES[a] for a in arms}
    np.testing.assert_array_equal(amp, AMP)
    np.testing.assert_array_equal(flo, FLO)


@pytest.mark.parametrize("arms", [[0, 1], [1, 0]])
def test_jacobian_matches_finite_differences(arms):
    problem, _ = problem_of(sweeps_of(arms))
    v = vector(arms)
    step = 1e-7 * np.maximum(np.abs(v), 1e-3)
    numeric = np.stack([(problem.residuals(v + dv) - problem.residuals(v - dv)) / (2 * h)
                        for dv, h in zip(np.diag(step), step, strict=True)], axis=1)
    np.testing.assert_allclose(problem.jacobian(v), numeric, rtol=1e-5, atol=1e-3)


def test_starts_try_the_deepest_rate_and_its_aliases_first():
    sweeps = sweeps_of([0, 1])
    _, weights = problem_of(sweeps)
    starts = fit._periodogram_starts(sweeps, weights, SIGNS)
    assert len(starts) == len(fit.ALIAS_FACTORS) + fit.SEED_RANKS - 1
    deepest = starts[0][1]
    for (_, rates), factor in zip(starts, fit.ALIAS_FACTORS, strict=False):
        assert rates == pytest.approx({a: r * factor for a, r in deepest.items()}, rel=1e-15)
    for a, (rho2, _) in CURVES.items():  # the fringe is clean: the deepest rate is near the truth
        assert deepest[a] == pytest.approx(rho2, rel=0.1)


def test_a_start_outside_the_bounds_is_moved_strictly_inside():
    sweeps = sweeps_of([0, 1])
    bounds = fit._parameter_bounds([0, 1], 2, 3.85)
    levels = fit._start_levels(sweeps, 2)
    far = (0.0, {0: 100.0, 1: 1e-6})  # rates far above and below the search range
    v0 = fit._start_vector(far, [0, 1], levels, bounds)
    lo, hi = bounds
    assert np.all(v0 > lo)
    assert np.all(v0 < hi)


def test_a_trial_still_behind_the_best_is_dropped_and_a_first_start_runs_whole():
    sweeps = sweeps_of([0, 1])
    problem, _ = problem_of(sweeps)
    bounds = fit._parameter_bounds([0, 1], 2, 3.85)
    v0 = fit._start_vector((DELTA + 1.0, {0: 0.4, 1: 0.4}), [0, 1], fit._start_levels(sweeps, 2), bounds)
    whole = fit._fit_from(problem, v0, bounds, "soft_l1", None, trial_nfev=2)
    assert whole is not None
    assert whole.status != 0
    assert fit._fit_from(problem, v0, bounds, "soft_l1", 0.0, trial_nfev=2) is None
    may_win = fit._fit_from(problem, v0, bounds, "soft_l1", np.inf, trial_nfev=2)
    assert may_win is not None
    assert may_win.cost == whole.cost


def test_an_earlier_fit_starts_with_its_cubic_term_and_needs_fewer_evaluations():
    """A refit from an earlier fit (refinement, recheck) starts at its rho3 too, not at 0: the
    start is the earlier curve, and the fit from it converges in fewer evaluations than from
    the same rates with rho3 = 0 (issue 28: refinement fits ~22 -> ~16 evaluations on
    smartlight). Before, a start carried the rates only.
    """
    sweeps = sweeps_of([0, 1])
    problem, _ = problem_of(sweeps)
    bounds = fit._parameter_bounds([0, 1], 2, 3.85)
    levels = fit._start_levels(sweeps, 2)
    rates = {a: c[0] for a, c in CURVES.items()}
    cubic = {a: c[1] for a, c in CURVES.items()}
    v_prior = fit._start_vector((DELTA, rates, cubic), [0, 1], levels, bounds)
    assert v_prior[[2, 4]].tolist() == [cubic[0], cubic[1]]  # rho3 of each arm, in its column
    v_rates = fit._start_vector((DELTA, rates), [0, 1], levels, bounds)
    assert v_rates[[2, 4]].tolist() == [0.0, 0.0]
    from_prior = fit._fit_from(problem, v_prior, bounds, "soft_l1", None, trial_nfev=0)
    from_rates = fit._fit_from(problem, v_rates, bounds, "soft_l1", None, trial_nfev=0)
    assert from_prior.nfev < from_rates.nfev
    assert from_prior.cost == pytest.approx(from_rates.cost, rel=1e-6)
