"""Knobs of the calibration procedure, each with its default and the reason for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

# A start after the first runs this many evaluations on trial and is dropped when its cost is
# still above the best start's final cost (a trust-region fit's cost never rises, so it could
# only win by overtaking later). Measured on smartlight seeds 7000-7003 (issue 28): every later
# start that went on to win was already at 0.04-0.15 of the best cost after 10 evaluations
# (0.17-0.53 after 5), while the losing aliased starts, ~80 % of all fitting time, stay 3-100x
# above it to their end (up to MAX_NFEV evaluations).
# (Here, not in calibration.fit: importing the knobs must not import scipy.optimize, which
# every `lumion program` and `lumion serve` start paid for.)
TRIAL_EVALUATIONS = 10

# Nominal heater, used only to choose the sweep range: R0 = 250 Ohm, tempco 0.02 /mA.
NOMINAL_R0_KOHM = 0.25
NOMINAL_GAMMA_PER_MA = 0.02


@dataclass(frozen=True)
class Options:
    """Knobs of :func:`calibrate`.

    Attributes:
        points: readings per heater sweep in the bootstrap pass.
        refine_points: readings per heater sweep in the refinement pass (0 skips it).
        sweep_phase_rad: nominal phase the sweep reaches (3 pi: over one full fringe for
            any heater within +-30 % of nominal).
        crosstalk_fraction: assumed crosstalk fraction f (design value 1 %) on the partner arm
            of the same TBU (never measurable from power readings) and, for the fallback law,
            on the nearest heater of a neighbouring TBU.
        crosstalk_decay_tbu: decay length (TBU lengths) of the fallback law between TBUs.
        crosstalk_cutoff_tbu: neighbours within this distance (TBU lengths) get a K entry.
        crosstalk_repeats: readings per aggressor heater and victim setting in the
            crosstalk measurement (0: do not measure, use the fallback law everywhere).
        crosstalk_baseline: readings per victim setting with no aggressor driven.
        crosstalk_drives_rad: per victim setting (pi/2, 3 pi/2), how far each aggressor heater
            is driven (its fitted effect on its own TBU's differential phase), one reading per
            drive; whole turns of 2 pi leave its TBU's split unchanged. Two levels (4 pi, 2 pi)
            remove the mirror ambiguity of a single level (``sin(x) = sin(pi - x)``: a strong
            neighbour could fit ~7x too large); the low level is read at one setting only. The
            drives stay near the swept range (3 pi): a real heater's curve extrapolated to
            6-8 pi is off by 0.3-0.9 rad, which breaks the whole turns.
        max_operations: operation budget of the whole run (None: no limit; "auto": the
            mesh's nominal plan times a margin, :func:`calibration.budget.operation_budget`:
            10,000 on SmartLight); crosstalk victims that do not fit in it keep the fallback law.
        recheck_passes: at most this many passes re-measuring TBUs whose fit is suspect (see
            :func:`calibrate`, step 2b); 0 turns rechecks off.
        recheck_tol_rad: a re-fit that moves a TBU's differential phase by more than this
            (anywhere over its working range) counts as a material change.
        poor_fit_residual: a fit whose RMS normalised residual exceeds this is re-measured
            once through another light path.
        settle_s: wait after every current change before reading (s): six time constants of
            the slowest thermal tail a SmartLight-class chip shows (~2 ms substrate), so a
            reading sees < 1e-4 of the previous phase step.
        wavelength_nm: laser wavelength.
        loss: robust loss for the fits.
        drift_references: TBUs re-measured at fixed heater states through the run to follow
            the chip's temperature (:mod:`calibration.drift`): a drift seen is compensated in
            the map or, too fast, refuses the run. 4 (the default) is the working value: one
            reference with a small drift coefficient (a quarter of TBUs have < 0.01 rad/K)
            hardly sees the drift; all four are that small once in ~250 chips. It costs ~176
            operations (~2 %) on SmartLight. 0 turns drift tracking off (``lumion calibrate
            --no-drift-tracking``): a chip that drifts is then only caught when light disagrees
            with a quarter of the finished map (docs/calibration.md, "Drift during the run").
        fit_trial_evaluations: a later start of a fringe fit still behind the best after this
            many evaluations is dropped (default :data:`TRIAL_EVALUATIONS`,
            issue 28: on smartlight seed 7000 the losing starts took 6.1 of 7.5 s of
            fitting). 0 runs every start to its end (the maps of earlier releases; a fit
            can differ by ~1e-6, :func:`calibration.fit.fit_tbu`).
    """

    points: int = 16
    refine_points: int = 24
    sweep_phase_rad: float = 3 * np.pi
    crosstalk_fraction: float = 0.01
    crosstalk_decay_tbu: float = 0.1
    crosstalk_cutoff_tbu: float = 1.05
    crosstalk_repeats: int = 1
    crosstalk_baseline: int = 2
    crosstalk_drives_rad: tuple[tuple[float, ...], tuple[float, ...]] = ((4 * np.pi, 2 * np.pi), (4 * np.pi,))
    max_operations: int | Literal["auto"] | None = "auto"
    recheck_passes: int = 4
    recheck_tol_rad: float = 0.15
    poor_fit_residual: float = 4.0
    settle_s: float = 0.012
    wavelength_nm: float = 1550.0
    loss: str = "soft_l1"
    fit_trial_evaluations: int = TRIAL_EVALUATIONS
    drift_references: int = 4

