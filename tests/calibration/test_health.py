"""Fit health: dark, flat (stuck), out of range, and the warnings on doubtful fits."""

import numpy as np
import pytest

from calibration.fit import Sweep, fit_tbu, fringe_model, sweep_currents
from calibration.health import diagnosis, failure, record_warnings, stuck_state
from calibration.records import TBURecord

SIGNS = np.array([1.0, -1.0])  # a cross output and a bar output
CURRENTS = sweep_currents(3.85, 24)


def sweeps_of(level_cross, level_bar, rho2=0.6, amplitude=0.5, rng=None):
    """Two sweeps of a TBU: a real fringe of ``amplitude`` on top of steady levels (mW)."""
    rng = rng or np.random.default_rng(0)
    out = []
    for arm in (0, 1):
        p = fringe_model(CURRENTS, arm, 0.4, rho2, 0.02 * rho2, np.full(2, amplitude), np.zeros(2), SIGNS)
        p = p + np.array([level_cross, level_bar])
        out.append(Sweep(arm, CURRENTS, np.abs(p * (1 + 0.002 * rng.standard_normal(p.shape)))))
    return out


def test_a_real_fringe_passes():
    sw = sweeps_of(1e-4, 1e-4)
    fit = fit_tbu(sw, SIGNS)
    assert failure(fit, sw, 24.0) is None


def test_no_light_is_dark_and_dead():
    sw = sweeps_of(1e-9, 1e-9, amplitude=1e-9)
    fit = fit_tbu(sw, SIGNS)
    assert failure(fit, sw) == "dark"
    assert diagnosis(fit, sw) == "dead"


def test_stuck_tbu_is_flat_and_named_by_its_bright_output():
    for cross, bar, state in ((0.3, 3e-4, "cross"), (3e-4, 0.3, "bar")):
        sw = sweeps_of(cross, bar, amplitude=0.0)
        fit = fit_tbu(sw, SIGNS)
        assert failure(fit, sw) == "flat"
        assert stuck_state(fit) == state
        assert diagnosis(fit, sw) == state


def test_dim_flat_readings_are_stray_light_around_a_dead_tbu():
    sw = sweeps_of(2e-5, 1e-5, amplitude=0.0)  # -47 dBm, no fringe
    fit = fit_tbu(sw, SIGNS)
    assert failure(fit, sw) == "flat"
    assert diagnosis(fit, sw) == "dead"


def test_a_heater_the_driver_cannot_take_to_2pi_is_out_of_range():
    sw = sweeps_of(1e-4, 1e-4)
    fit = fit_tbu(sw, SIGNS)
    assert failure(fit, sw, max_current_ma=2.0) == "range"


def test_warnings_name_what_is_doubtful():
    rec = TBURecord(delta=1.0, g2=[0.6, 0.35], g3=[0.01, 0.01], sigma_delta=0.0, sigma_phase_2pi=[0.0, 0.0],
                    rms_residual=6.2, rms_residual_rel=0.01, stage="refine", src=0, outputs=[1])
    lines = record_warnings(rec, 4.0)
    assert any("residual 6.2 sigma" in w for w in lines)
    assert any("heaters differ" in w for w in lines)
    assert any("at the fit's bound" in w for w in record_warnings(
        TBURecord(**{**rec.__dict__, "g2": [0.06, 0.06], "rms_residual": 1.0}), 4.0))
    assert record_warnings(TBURecord(**{**rec.__dict__, "g2": [0.6, 0.58], "rms_residual": 1.0}), 4.0) == []


@pytest.mark.parametrize("tbu", [0, 3])
def test_a_dead_tbu_at_a_mesh_port_is_found_against_the_power_its_path_should_carry(tbu):
    """Issue 26: a dead TBU's 60 dB-down leak at a port cleared the absolute -60 dBm floor
    (-59.8 dBm) and passed as healthy; judged against the path's expected power it is dead."""
    from calibration.procedure import Options, Progress, calibrate
    from instruments.sim.chip import Chip
    from instruments.sim.direct import DirectBench
    from photonics.topology import hexagonal

    mesh = hexagonal(1, 1)
    assert tbu in {int(g) // 4 for g in mesh.port_tbu_ports}  # it owns a mesh port
    chip = Chip(mesh, 3, clock=lambda: 0.0, failed={tbu: "dead"})
    result = calibrate(DirectBench(chip), Options(points=12, refine_points=16, crosstalk_repeats=0),
                       progress=Progress(stream=None))
    assert result.cmap.failed == {tbu: "dead"}
    assert any(w.startswith(f"{mesh.tbu_names[tbu]}: failed (dead)") for w in result.cmap.quality["warnings"])


def test_expected_peak_errs_low():
    from calibration.health import expected_peak_dbm

    assert expected_peak_dbm(0) == pytest.approx(-24.5)
    assert expected_peak_dbm(10, laser_dbm=3.0) == pytest.approx(3.0 - 24.0 - 5.5)
