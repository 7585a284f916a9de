"""Drift during calibration (issue 26 item 4): references followed, the map compensated or the run
refused naming the drift, no false alarm on a stable chip."""

import numpy as np
import pytest

from calibration.digest import map_digest
from calibration.drift import DriftLog, coefficients_of, compensate
from calibration.evaluate import wrap
from calibration.map import CalibrationError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import OFF_RAD, tbu_errors
from photonics.topology import hexagonal, smartlight

FAST = Options(points=12, refine_points=16, crosstalk_repeats=0, drift_references=4)


def drifting_chip(mesh, seed, k_per_min):
    """A realistic chip on a frozen clock whose temperature rises ``k_per_min`` from the start."""
    chip = Chip(mesh, seed, clock=lambda: 0.0)
    if k_per_min:
        chip.set_temperature_profile(lambda t_s: k_per_min * t_s / 60.0)
    return chip


def run(chip, options=FAST):
    return calibrate(DirectBench(chip), options, progress=Progress(stream=None))


# -- the compensation itself, on made-up readings ------------------------------------------
def linear_log(rate_per_s, times):
    """A drift log whose four references moved as ``c_k rate t``."""
    log = DriftLog()
    coeff = np.array([0.5, -1.0, 0.2, 0.8])
    for t in times:
        log.record(t, coeff * rate_per_s * t)
    return log


def test_compensation_carries_each_tbu_to_the_aim_at_its_own_rate_and_leaves_outliers():
    rng = np.random.default_rng(1)
    log = linear_log(0.01, np.arange(0.0, 101.0, 10.0))
    temp = lambda t: float(log.temperature(t))  # noqa: E731
    c = rng.normal(0.0, 0.3, 30)  # rad per reference unit
    fitted = {t: float(t) for t in range(30)}  # fitted through the run, confirmed at its end
    confirmed = {t: 95.0 + t / 10 for t in range(30)}
    offsets = {t: c[t] * (temp(confirmed[t]) - temp(fitted[t])) for t in range(30)}
    offsets[7] = 3.0  # a pi-ish jump no drift explains: left to the confirmation's re-fit
    aim = 110.0
    corrections, sigma = compensate(offsets, fitted, confirmed, log, aim)
    assert 7 not in corrections
    assert sigma == pytest.approx(0.3, rel=0.5)
    for t, corr in corrections.items():
        truth = c[t] * (temp(aim) - temp(fitted[t]))
        assert corr == pytest.approx(truth, abs=1e-9), t
    # the temperature history is the references' common part, rising, 0 at the start
    assert abs(log.temperature(0.0)) < 1e-12
    assert log.temperature(100.0) > 0


def test_offsets_within_the_fits_own_error_are_not_touched():
    log = linear_log(0.01, np.arange(0.0, 101.0, 10.0))
    fitted = {t: float(t) for t in range(10)}
    confirmed = dict.fromkeys(range(10), 100.0)
    offsets = {t: 0.01 * (-1) ** t for t in range(10)}
    _levers, coefficients = coefficients_of(offsets, fitted, confirmed, log)
    assert len(coefficients) == 10
    corrections, _ = compensate(offsets, fitted, confirmed, log, 110.0)
    assert corrections == {}


# -- calibrations ---------------------------------------------------------------------------
@pytest.mark.slow  # 42 s in the quick suite at load 12-27 (issue 29)
def test_a_chip_drifting_too_fast_is_refused_in_one_line_naming_the_drift_rate():
    """Old code refused this run only as 'light disagrees with N of M TBUs' (no rate, nothing
    about drift seen); now the references measure it and the line says how fast."""
    chip = drifting_chip(hexagonal(2, 2), 7, 60.0)
    with pytest.raises(CalibrationError) as info:
        run(chip)
    line = str(info.value)
    assert "\n" not in line
    assert "refused: the chip drifted" in line
    assert "rad/min at its reference TBUs" in line
    k_per_min = float(line.split("~")[1].split(" K/min", maxsplit=1)[0])
    assert 30.0 < k_per_min < 120.0  # the chip drifts 60 K/min; its coefficients are ~10 draws
    assert "stabilise its temperature" in line


@pytest.mark.slow  # 22 s in the quick suite at load 12-27 (issue 29)
def test_a_stable_chip_is_not_refused_nor_compensated_and_its_map_matches_one_without_tracking():
    chip = drifting_chip(hexagonal(2, 2), 7, 0.0)
    tracked = run(chip).cmap
    drift = tracked.quality["drift"]
    assert drift["reference_rounds"] >= 2
    assert len(drift["reference_tbus"]) == 4
    assert drift["drift_compensated_tbus"] == 0
    assert drift["drift_seen_rad"] < 0.015
    assert not tracked.failed
    plain = run(drifting_chip(hexagonal(2, 2), 7, 0.0), Options(points=12, refine_points=16,
                                                                crosstalk_repeats=0, drift_references=0)).cmap
    assert "drift" not in plain.quality
    # the same chip, the readings a little later (the references took some): within noise
    assert np.max(np.abs(wrap(tracked.delta - plain.delta))) < 0.02


@pytest.mark.slow  # 21 s in the quick suite at load 12-27 (issue 29)
def test_drift_tracking_is_deterministic():
    a = run(drifting_chip(hexagonal(2, 2), 7, 5.0)).cmap
    b = run(drifting_chip(hexagonal(2, 2), 7, 5.0)).cmap
    assert map_digest(a) == map_digest(b)
    assert a.quality["drift"] == b.quality["drift"]


COMPENSATION_BUDGET = 13_000  # operations: the default 10,000 plus room for the re-fits at 3 K/min


@pytest.mark.slow
def test_a_smartlight_chip_drifting_3k_per_min_is_compensated_and_nothing_is_silently_off():
    """Old code refused this chip at 3 K/min ('light disagrees with 35 of 71 TBUs', phases moved
    by 0.091 rad RMS, up to 0.341 rad). Now it is compensated: against the chip as it is at the
    end of the run no TBU is 0.1 rad off (the trust campaign's silent line), the TBUs' RMS error
    is that of a stable chip (0.011 rad on this seed at 0 K/min), and the map says how fast the
    chip drifted."""
    chip = drifting_chip(smartlight(), 9100, 3.0)
    # 3 K/min is three times the trust campaign's drift mode: this chip's compensation needs
    # ~9,900 readings plus its re-fits, past the default 10,000 budget (a hard limit since
    # 9b52e5c: the re-fits it cannot afford are named unverified, not silent). The test
    # asks whether compensation works, so it gives the run the readings that takes.
    options = Options(drift_references=4, max_operations=COMPENSATION_BUDGET)
    result = calibrate(DirectBench(chip), options, progress=Progress(stream=None))
    off, _ = tbu_errors(result.cmap, chip)
    healthy = [t for t in range(chip.mesh.n_tbus) if t not in result.cmap.failed]
    assert len(healthy) >= chip.mesh.n_tbus - 1
    assert off[healthy].max() < OFF_RAD
    assert np.sqrt(np.mean(off[healthy] ** 2)) < 0.02
    drift = result.cmap.quality["drift"]
    assert drift["drift_k_per_min"] == pytest.approx(3.0, rel=0.35)
    assert drift["drift_compensated_tbus"] > 35
