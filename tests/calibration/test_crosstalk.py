"""Thermal crosstalk: the simulated law, and the quadrature fit that measures it."""

import numpy as np
import pytest

from calibration.evaluate import differential_fraction
from calibration.fit import NoiseModel, crosstalk_model, fit_crosstalk
from calibration.model import crosstalk_matrix, heater_positions, neighbour_heaters
from instruments.sim.chip import Chip, draw_truth
from photonics.topology import hexagonal, smartlight


def fractions(K, eta):
    return K.toarray() / np.asarray(eta)[None, :]


def test_original_law_unchanged():
    """Without the new parameters the law is the original one: the partner gets f, others (d0/d)^2."""
    mesh = hexagonal(1, 2)
    pos = heater_positions(mesh.tbu_xy)
    eta = np.full(mesh.n_heaters, 2.4)
    F = fractions(crosstalk_matrix(pos, eta, 0.01), eta)
    assert F[0, 1] == pytest.approx(0.01)
    others = F.copy()
    others[np.arange(mesh.n_heaters), np.arange(mesh.n_heaters) ^ 1] = 0
    assert 0 < others.max() < 2e-4


def test_neighbour_law():
    mesh = smartlight()
    pos = heater_positions(mesh.tbu_xy)
    eta = np.full(mesh.n_heaters, 2.4)
    F = fractions(crosstalk_matrix(pos, eta, 0.01, partner_fraction=0.008, decay_length=0.1), eta)
    n = mesh.n_heaters
    assert np.allclose(F[np.arange(n) ^ 1, np.arange(n)], 0.008)
    F[np.arange(n) ^ 1, np.arange(n)] = 0
    assert F.max() == pytest.approx(0.01)  # nearest heater of a neighbouring TBU
    d = np.linalg.norm(pos[:, None] - pos[None, :], axis=2)
    nz = F > 0
    assert d[nz].max() <= 1.05
    # decays with distance: exp(-(d - d0) / 0.1)
    np.testing.assert_allclose(F[nz], 0.01 * np.exp(-(d[nz] - d[nz].min()) / 0.1))
    # and the differential (what moves a split) is a sizeable part of it
    t, j = np.nonzero(F[0::2] + F[1::2])
    assert np.median(np.abs(F[2 * t, j] - F[2 * t + 1, j])) > 0.002
    # neighbour_heaters lists exactly the heaters with an entry on a TBU's arms
    nb = neighbour_heaters(pos)
    for tbu in range(mesh.n_tbus):
        assert nb[tbu] == sorted(set(np.flatnonzero(F[2 * tbu] + F[2 * tbu + 1])))


def test_truth_is_seeded_with_one_percent_neighbour_crosstalk():
    mesh = smartlight()
    a, b = draw_truth(mesh, 4), draw_truth(mesh, 4)
    assert (a.heaters.crosstalk != b.heaters.crosstalk).nnz == 0
    np.testing.assert_array_equal(a.heaters.rho2, b.heaters.rho2)
    F = fractions(a.heaters.crosstalk, a.heaters.eta)
    n = mesh.n_heaters
    partner = F[np.arange(n) ^ 1, np.arange(n)]
    assert np.ptp(partner) < 1e-12  # one chip-wide fraction (+-20 % between chips)
    assert 0.004 < partner[0] < 0.016
    F[np.arange(n) ^ 1, np.arange(n)] = 0
    assert 0.006 < F.max() < 0.02
    assert draw_truth(mesh, 5).heaters.crosstalk.nnz == a.heaters.crosstalk.nnz
    assert (draw_truth(mesh, 5).heaters.crosstalk != a.heaters.crosstalk).nnz > 0


@pytest.mark.parametrize("n_out", [1, 2])
def test_fit_crosstalk_recovers_fractions(n_out):
    rng = np.random.default_rng(n_out)
    n_agg, drive = 7, 6 * np.pi
    true = rng.uniform(-0.008, 0.008, n_agg)
    signs = np.array([1.0, -1.0][:n_out])
    setting, drives = [], []
    for q in (0, 1):
        for k in [-1, *range(n_agg), -1]:
            x = np.zeros(n_agg)
            if k >= 0:
                x[k] = drive
            setting.append(q)
            drives.append(x)
    setting, drives = np.array(setting), np.array(drives)
    level = rng.uniform(0.05, 0.3, n_out)
    p = crosstalk_model(level, signs, setting, np.array([0.01, -0.007]), true, drives)
    p = p * (1 + 0.005 * rng.standard_normal(p.shape))
    fit = fit_crosstalk(p, signs, setting, drives, NoiseModel())
    pull = (fit.fraction - true) / fit.sigma
    assert np.max(np.abs(fit.fraction - true)) < 0.001
    assert np.max(np.abs(pull)) < 4
    # Only the sum of the two offsets is identifiable (their difference trades against c).
    assert fit.offset.sum() == pytest.approx(0.003, abs=0.012)  # ~4 sigma


def test_differential_fraction():
    chip = Chip(hexagonal(1, 1), seed=2)
    h = chip.truth.heaters
    F = fractions(h.crosstalk, h.eta)
    got = differential_fraction(h.crosstalk, h.eta, np.array([0, 1]), np.array([2, 5]))
    np.testing.assert_allclose(got, [F[0, 2] - F[1, 2], F[2, 5] - F[3, 5]])
