"""Wavelength dependence of the TBU: heater phase ~ lambda0/lambda, coupler slope."""

import subprocess
import sys

import numpy as np
import pytest

from photonics.circuit import solve, solve_sparse
from photonics.physics import (
    PhysicsDefaults,
    heater_phase_scale,
    kappa_at,
    nominal_params,
    split_phases,
)
from photonics.state import MeshState
from photonics.topology import hexagonal

FLAT_IDEAL = PhysicsDefaults().lossless()  # 50:50 couplers with zero slope, no loss


def _bar(mesh_tbus: int = 1) -> MeshState:
    top, bot = split_phases(np.zeros(mesh_tbus))  # bar: a pi on the top heater
    return MeshState(np.atleast_1d(top), np.atleast_1d(bot))


def test_a_pi_set_at_1550_is_not_pi_at_1560(single_tbu):
    params = nominal_params(1, 0, FLAT_IDEAL)
    S = solve(single_tbu, _bar(), [1550.0, 1560.0], params)[0]
    P = np.abs(S) ** 2  # (wl, out, in); ports 0=a0 1=a1 2=b0 3=b1
    assert P[0, 3, 0] == pytest.approx(0.0, abs=1e-30)  # a perfect bar at the reference
    # at 1560 nm the heater gives pi * 1550/1560: the cross leak is cos^2(phi / 2)
    phi = np.pi * 1550.0 / 1560.0
    assert P[1, 3, 0] == pytest.approx(np.cos(phi / 2) ** 2, rel=1e-12)
    assert P[1, 3, 0] == pytest.approx(1.01e-4, rel=0.01)  # -40 dB: no longer a clean bar
    assert P[1, 2, 0] + P[1, 3, 0] == pytest.approx(1.0, abs=1e-12)  # still lossless


def test_heater_scale_and_coupler_slope_closed_forms():
    assert heater_phase_scale(1560.0) == pytest.approx(1550.0 / 1560.0)
    assert heater_phase_scale(1550.0) == 1.0
    k = kappa_at(np.array([0.5, 0.52]), np.array([1540.0, 1550.0, 1560.0]), 0.0025)
    np.testing.assert_allclose(k, [[0.475, 0.495], [0.5, 0.52], [0.525, 0.545]], atol=1e-15)
    assert kappa_at(0.99, 1600.0, 0.0025) == 1.0  # clipped: a coupler cannot exceed all
    np.testing.assert_array_equal(kappa_at(np.array([0.3, 0.6]), np.array([1500.0, 1600.0]), 0.0),
                                  [[0.3, 0.6], [0.3, 0.6]])


def test_extinction_varies_across_the_band(single_tbu):
    d = PhysicsDefaults()
    params = nominal_params(1, 0, d)
    wl = np.array([1530.0, 1540.0, 1550.0, 1560.0, 1565.0])
    cross = MeshState(np.zeros(1), np.zeros(1))  # equal arms: no heater phase to scale
    P = np.abs(solve(single_tbu, cross, wl, params)[0]) ** 2
    er_db = 10 * np.log10(P[:, 3, 0] / P[:, 2, 0])  # wanted (cross) over leaked (bar)
    # closed form: two equal couplers leak (1 - 2 kappa)^2 into bar, kappa = kappa0 + s (wl - wl0)
    kappa = 0.5 + d.coupler_imbalance + d.coupler_slope_per_nm * (wl - 1550.0)
    leak = (1 - 2 * kappa) ** 2
    np.testing.assert_allclose(er_db, 10 * np.log10((1 - leak) / leak), rtol=1e-9)
    assert er_db[2] == pytest.approx(35.0, abs=0.01)  # the datasheet's 35 dB at the reference
    assert er_db.max() - er_db.min() > 10.0  # and far from flat across the C band
    assert er_db[4] < 22.0


def test_new_terms_vanish_at_the_reference_and_with_zero_slope(single_tbu):
    rng = np.random.default_rng(5)
    mesh = hexagonal(2, 2)
    state = MeshState.random(mesh, rng)
    sloped = nominal_params(mesh.n_tbus, mesh.n_links)
    flat = nominal_params(mesh.n_tbus, mesh.n_links, PhysicsDefaults(coupler_slope_per_nm=0.0))
    np.testing.assert_array_equal(solve(mesh, state, 1550.0, sloped), solve(mesh, state, 1550.0, flat))
    # with zero slope, a cross state (no heater phase) is the same at every wavelength
    p = nominal_params(1, 0, PhysicsDefaults(coupler_slope_per_nm=0.0))
    cross = MeshState(np.zeros(1), np.zeros(1))
    P = np.abs(solve(single_tbu, cross, [1530.0, 1550.0, 1565.0], p)[0]) ** 2
    np.testing.assert_allclose(P, np.broadcast_to(P[1], P.shape), atol=1e-15)


def test_merge_and_sparse_agree_across_the_band():
    rng = np.random.default_rng(11)
    mesh = hexagonal(2, 3)
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    states = MeshState.random(mesh, rng, n_states=2)
    wl = np.linspace(1530.0, 1565.0, 5)
    np.testing.assert_allclose(solve(mesh, states, wl, params), solve_sparse(mesh, states, wl, params),
                               atol=1e-12)


def test_importing_the_circuit_does_not_import_scipy_sparse():
    code = "import sys, photonics.circuit; sys.exit(1 if 'scipy.sparse' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
