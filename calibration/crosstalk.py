"""Thermal crosstalk measured on the bench: victims at quadrature, aggressor heaters driven.

See docs/calibration.md ("Thermal crosstalk") for the method and what power readings can show.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from calibration.bench import Bench, settle
from calibration.fit import NoiseModel, fit_crosstalk
from calibration.heater_map import invert_cubic
from calibration.model import crosstalk_matrix, heater_positions
from calibration.options import Options
from calibration.paths import Probe
from calibration.records import CrosstalkRecord, TBURecord, victim_currents
from photonics.topology import Mesh


def aggressor_current(record: TBURecord, arm: int, now_ma: float, drive_rad: float,
                      max_current_ma: float) -> tuple[float, float]:
    """Current (mA) adding ``drive_rad`` to a heater's fitted effect, and the drive reached.

    With whole turns of 2 pi the aggressor's own TBU keeps its split, so light paths
    through it are undisturbed.
    """
    g_now = record.effect(arm, now_ma)
    i = min(float(invert_cubic(np.array(g_now + drive_rad), record.g2[arm], record.g3[arm])),
            max_current_ma)
    return i, record.effect(arm, i) - g_now


def crosstalk_readings(n_aggressors: int, options: Options) -> int:
    """Set-and-read operations to measure one victim with ``n_aggressors`` neighbours."""
    per_setting = sum(len(d) for d in options.crosstalk_drives_rad)
    return 2 * options.crosstalk_baseline + options.crosstalk_repeats * n_aggressors * per_setting


def measure_crosstalk(bench: Bench, probe: Probe, base: np.ndarray, records: dict[int, TBURecord],
                      aggressors: list[int], options: Options, noise: NoiseModel) -> CrosstalkRecord:
    """Hold ``probe.tbu`` at quadrature (pi/2, then 3 pi/2) and drive each aggressor heater.

    At quadrature a shift of the victim's differential phase by ``x`` changes its outputs by
    ``-+ c sin(x)``: first order, while every TBU on the light paths sits at bar or cross,
    where a small shift changes the transmission only to second order. Each setting starts and
    ends with baseline readings (no aggressor driven); each aggressor heater is then driven by
    each of the setting's ``options.crosstalk_drives_rad`` on top of its base current (whole
    turns: its own TBU keeps its split; two levels: no mirror solution). All readings of a
    victim are fitted together (:func:`calibration.fit.fit_crosstalk`).
    """
    victim = probe.tbu
    bench.select_input(probe.src, options.wavelength_nm)
    powers, setting, drives = [], [], []
    n_b = options.crosstalk_baseline
    for q, theta in enumerate((np.pi / 2, 3 * np.pi / 2)):
        cv = base.copy()
        cv[2 * victim], cv[2 * victim + 1] = victim_currents(records[victim], theta)
        levels = options.crosstalk_drives_rad[q]
        schedule = ([(-1, 0.0)] * (n_b - n_b // 2)
                    + [(k, level) for k in range(len(aggressors)) for level in levels
                       for _ in range(options.crosstalk_repeats)]
                    + [(-1, 0.0)] * (n_b // 2))
        for k, level in schedule:
            c = cv.copy()
            x = np.zeros(len(aggressors))
            if k >= 0:
                j = aggressors[k]
                c[j], x[k] = aggressor_current(records[j // 2], j % 2, c[j], level, bench.max_current_ma)
            bench.set_currents(c)
            settle(bench, options.settle_s)
            powers.append(10 ** (np.asarray(bench.read_powers_dbm(list(probe.outputs))) / 10))
            setting.append(q)
            drives.append(x)
    fit = fit_crosstalk(np.array(powers), np.array(probe.signs), np.array(setting), np.array(drives),
                        noise, loss=options.loss)
    return CrosstalkRecord(victim, list(aggressors), fit.fraction.tolist(), fit.sigma.tolist(),
                           fit.rms_residual, len(powers))


def crosstalk_map(mesh: Mesh, eta: np.ndarray, options: Options,
                  crosstalk: dict[int, CrosstalkRecord] | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """K (rad/mW): the fallback law, with measured differential entries put in.

    Power readings show only ``K[top_t, j] - K[bot_t, j]``; a measured entry keeps the
    law's common part ``(K[top_t, j] + K[bot_t, j]) / 2`` (invisible to every split) and
    takes the measured difference. A measured fraction ``F`` (victim shift per rad of the
    aggressor's fitted effect ``g = (1 - f) s``) is ``F (1 - f) eta`` in rad/mW.

    Returns ``(K, fitted)``: ``fitted`` is an (n, 4) array of [victim TBU, heater, K
    difference (rad/mW), its sigma].
    """
    f = options.crosstalk_fraction
    law = crosstalk_matrix(heater_positions(mesh.tbu_xy), eta, nearest_fraction=f,
                           cutoff=options.crosstalk_cutoff_tbu, partner_fraction=f,
                           decay_length=options.crosstalk_decay_tbu).tolil()
    fitted = []
    for t, rec in sorted((crosstalk or {}).items()):
        for j, frac, sig in zip(rec.heaters, rec.fraction, rec.sigma, strict=True):
            scale = (1 - f) * eta[j]
            diff, common = frac * scale, (law[2 * t, j] + law[2 * t + 1, j]) / 2
            law[2 * t, j], law[2 * t + 1, j] = common + diff / 2, common - diff / 2
            fitted.append([t, j, diff, sig * scale])
    return law.tocsr(), np.array(fitted, float).reshape(-1, 4)


