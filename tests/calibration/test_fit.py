"""Fringe fits recover known parameters from synthetic, noisy fringes."""

import numpy as np
import pytest

from calibration.fit import NoiseModel, Sweep, fit_tbu, fringe_model, periodogram, sweep_currents


def synthetic(rng, delta, rho2, rho3, n=24, i_max=3.85, signs=(1.0, -1.0), rel=0.005,
              outlier=False):
    signs = np.array(signs)
    amp = rng.uniform(0.2, 0.6, len(signs))
    flo = amp * 10 ** (-rng.uniform(25, 40, len(signs)) / 10)
    sweeps = []
    for arm in (0, 1):
        i = sweep_currents(i_max, n)
        p = fringe_model(i, arm, delta, rho2[arm], rho3[arm], amp, flo, signs)
        p = np.abs(p * (1 + rel * rng.standard_normal(p.shape)) + 1e-7 * rng.standard_normal(p.shape))
        if outlier:
            p[n // 2, 0] *= 3.0
        sweeps.append(Sweep(arm, i, p))
    return sweeps, signs


def curve_error(fit, rho2, rho3, arm, i_max=3.2):
    i = np.linspace(0, i_max, 50)
    return np.max(np.abs((fit.rho2[arm] - rho2[arm]) * i**2 + (fit.rho3[arm] - rho3[arm]) * i**3))


@pytest.mark.parametrize("seed", range(6))
def test_recovers_parameters_with_noise(seed):
    rng = np.random.default_rng(seed)
    delta = rng.uniform(0, 2 * np.pi)
    rho2 = rng.uniform(0.5, 0.72, 2)
    rho3 = rho2 * rng.uniform(0.015, 0.025, 2)
    sweeps, signs = synthetic(rng, delta, rho2, rho3)
    fit = fit_tbu(sweeps, signs)
    assert abs(np.angle(np.exp(1j * (fit.delta - delta)))) < 0.01
    for arm in (0, 1):
        assert curve_error(fit, rho2, rho3, arm) < 0.02
    # Uncertainties are honest: the error is within a few reported sigmas.
    assert abs(np.angle(np.exp(1j * (fit.delta - delta)))) < 5 * fit.sigma_delta + 1e-3
    assert 0.3 < fit.rms_residual < 3.0


def test_single_output_and_bar_sign():
    rng = np.random.default_rng(7)
    rho2, rho3 = np.array([0.6, 0.65]), np.array([0.012, 0.013])
    sweeps, signs = synthetic(rng, 1.0, rho2, rho3, signs=(-1.0,))
    fit = fit_tbu(sweeps, signs)
    assert abs(np.angle(np.exp(1j * (fit.delta - 1.0)))) < 0.01
    assert curve_error(fit, rho2, rho3, 1) < 0.02


def test_outlier_does_not_pull_fit():
    rng = np.random.default_rng(3)
    rho2, rho3 = np.array([0.6, 0.58]), np.array([0.012, 0.011])
    sweeps, signs = synthetic(rng, 2.0, rho2, rho3, outlier=True)
    fit = fit_tbu(sweeps, signs, loss="soft_l1")
    assert curve_error(fit, rho2, rho3, 0) < 0.03


def test_aliased_start_is_rejected():
    """A start at half or double the true rate (the aliasing trap) must not win."""
    rng = np.random.default_rng(11)
    rho2, rho3 = np.array([0.62, 0.6]), np.array([0.012, 0.012])
    sweeps, signs = synthetic(rng, 0.4, rho2, rho3)
    for wrong in (0.5, 2.0):
        fit = fit_tbu(sweeps, signs, prior=(0.4, rho2 * wrong, rho3 * wrong))
        assert curve_error(fit, rho2, rho3, 0) < 0.02


def test_periodogram_finds_the_rate():
    x = np.linspace(0, 14, 40)
    p = (1 + np.cos(0.6 * x + 0.3))[:, None]
    rates = np.linspace(0.2, 2.0, 500)
    chi2, _, _ = periodogram(x, p, np.ones_like(p), rates)
    assert abs(rates[np.argmin(chi2)] - 0.6) < 0.01


def test_noise_model_floors():
    s = NoiseModel(rel=0.01, floor_mw=1e-6, model_floor=0.0).sigma(np.array([[0.0], [1.0]]))
    assert s[0, 0] == pytest.approx(1e-6)
    assert s[1, 0] == pytest.approx(0.01 + 1e-6)


def test_periodogram_solves_each_rate_as_weighted_least_squares():
    """The batched closed-form (Cholesky) solve of every rate's 3 x 3 normal equations gives
    what a per-rate weighted least-squares solve gives: the same residual, and the same
    cosine and sine coefficients where the rate is resolved over the sweep.
    """
    rng = np.random.default_rng(28)
    x = sweep_currents(6.0, 25) ** 2
    p = np.stack([0.5 + 0.4 * np.cos(0.7 * x + 1), 0.5 - 0.4 * np.cos(0.7 * x + 1)], 1)
    p = np.abs(p + 0.003 * rng.standard_normal(p.shape))
    w = 1 / NoiseModel().sigma(p)
    rates = np.geomspace(0.05, 3.0, 60)
    chi2, c1, c2 = periodogram(x, p, w, rates)
    for m, r in enumerate(rates):
        want = 0.0
        for j in range(2):
            basis = np.stack([np.ones_like(x), np.cos(r * x), np.sin(r * x)], 1) * w[:, j, None]
            coef, *_ = np.linalg.lstsq(basis, p[:, j] * w[:, j], rcond=None)
            want += float(np.sum((basis @ coef - p[:, j] * w[:, j]) ** 2))
            if r * (x.max() - x.min()) > 2 * np.pi:  # a whole fringe: the coefficients are defined
                np.testing.assert_allclose([c1[m, j], c2[m, j]], coef[1:], rtol=1e-7, atol=1e-9)
        assert chi2[m] == pytest.approx(want, rel=1e-6, abs=1e-9)
