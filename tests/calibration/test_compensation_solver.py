"""The crosstalk-compensated currents of a map are solved densely (BVLS) on chips up to
``DENSE_COMPENSATION_MAX_TBUS`` TBUs and by the sparse trust-region solver above: both give
the same currents, bounds active or not (session 39: 40-120 ms -> 2-7 ms per smartlight solve).
"""

import numpy as np
import pytest

from calibration import map as calibration_map
from calibration.map import CalibrationMap, _compensating_phases, mesh_signature
from calibration.model import crosstalk_matrix, heater_positions
from photonics.configuration import Configuration
from photonics.topology import smartlight

MESH = smartlight()


def strong_crosstalk_map(fraction: float = 0.05) -> CalibrationMap:
    rng = np.random.default_rng(4)
    n = MESH.n_heaters
    eta = np.full(n, np.pi / 1.3)
    rho2 = 0.6 * (1 + 0.05 * rng.standard_normal(n))
    return CalibrationMap(
        chip_id="chip", mesh=mesh_signature(MESH), delta=rng.uniform(0, 2 * np.pi, MESH.n_tbus),
        rho2=rho2, rho3=0.02 * rho2, eta=eta,
        crosstalk=crosstalk_matrix(heater_positions(MESH.tbu_xy), eta, fraction),
        created="2024-01-01T00:00:00+00:00", tbu_names=MESH.tbu_names,
        quality={"fit_rms_residual": 1.0, "sigma_delta_rad": np.full(MESH.n_tbus, 1e-3)},
        nearest_fraction=fraction, cutoff_tbu=1.05,
    )


def test_dense_and_sparse_solvers_agree_where_bounds_bind():
    cmap = strong_crosstalk_map()
    active = 2 * np.arange(MESH.n_tbus)  # every top heater driven
    coupling = cmap._coupling()[:, active]
    rng = np.random.default_rng(5)
    target = np.where(rng.uniform(size=MESH.n_tbus) < 0.5, 0.0, rng.uniform(1.0, 3.0, MESH.n_tbus))
    s_max = np.full(MESH.n_tbus, 2 * np.pi)
    assert np.linalg.solve(coupling.toarray(), target).min() < 0  # heaters cannot cool: bounds bind
    dense = _compensating_phases(coupling, target, s_max)
    assert MESH.n_tbus <= calibration_map.DENSE_COMPENSATION_MAX_TBUS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(calibration_map, "DENSE_COMPENSATION_MAX_TBUS", 0)
        sparse = _compensating_phases(coupling, target, s_max)
    assert dense.min() >= 0
    assert (dense == 0).any()
    # the same optimum: the dense solve (an exact active set) misses the targets no more than
    # the iterative one, which stops within its tolerances (here 2.5e-7 rad from it on one heater)
    def miss(s):
        return np.linalg.norm(coupling @ s - target)
    assert miss(dense) <= miss(sparse) + 1e-12
    np.testing.assert_allclose(dense, sparse, rtol=0, atol=1e-6)


def test_currents_are_the_same_through_either_solver(monkeypatch):
    cmap = strong_crosstalk_map(0.03)
    rng = np.random.default_rng(6)
    confs = [Configuration(rng.choice([0.0, 1.0, 0.5], MESH.n_tbus)) for _ in range(4)]
    dense = [cmap.currents_for(c, 24.0) for c in confs]
    monkeypatch.setattr(calibration_map, "DENSE_COMPENSATION_MAX_TBUS", 0)
    sparse = [cmap.currents_for(c, 24.0) for c in confs]
    np.testing.assert_allclose(np.array(dense), np.array(sparse), rtol=0, atol=1e-9)
    for conf, currents in zip(confs, dense, strict=True):
        want = 2 * np.arccos(np.sqrt(conf.cross_fraction))
        assert np.abs(np.angle(np.exp(1j * (cmap.differential(currents) - want)))).max() < 1e-6
