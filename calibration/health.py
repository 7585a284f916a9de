"""Fits that say when they fail: is a TBU's fringe real, and if not, why.

A fringe fit always returns numbers; these checks decide whether they mean anything:

* **dark**: no reading of either sweep rises above :data:`DARK_DBM`, or, when every TBU on
  the probe's path is calibrated (so the power the path should carry is known from the
  model and the laser, :func:`expected_peak_dbm`), the peak is more than
  :data:`DEAD_MARGIN_DB` below it. No light reached the TBU's outputs: the TBU is dead
  (opaque), or something on the probe's light path is. A dead TBU leaks ~60 dB down: at a
  mesh port or one hop from one, that leak alone cleared the absolute -60 dBm floor
  (-59.8 dBm seen, issue 26); against the expected power it is 40-60 dB short.
* **flat**: light arrives but the heaters do not modulate it (fitted fringe contrast below
  :data:`MIN_CONTRAST`). Bright (above :data:`LIT_DBM`): the TBU is stuck (in bar or cross,
  its heaters open or ignored), and the output the light leaves by tells the state. Dim: it
  is stray light around a dead TBU (:func:`diagnosis`).
* **range**: a fitted heater would need more than the driver's limit for 2 pi: the TBU
  could not be set (a fit of stray light, or a heater far off nominal). Treated as a failure.
* **poor**: the residual is many times the meter's noise (``Options.poor_fit_residual``).
* **at bounds**: a heater rate pinned to the fit's search bounds.
* **mismatched heaters**: a TBU's two heaters, made side by side, differ by more than
  :data:`HEATER_MISMATCH` in efficiency.

Dark and flat fits are *failures*: the procedure tries other light paths before it blames
the TBU, and a TBU that fails through a path of known-good TBUs is recorded as failed.
The rest are *warnings*, reported in the map's quality and by ``lumion calibrate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calibration.fit import RHO2_SEARCH, Sweep, TBUFit
from calibration.heater_map import invert_cubic
from photonics.physics import PhysicsDefaults

# Datasheet worst cases (photonics.physics sources): 3.6 dB per facet, 8.4 dB of access routing.
FACET_WORST_DB = 3.6
ACCESS_WORST_DB = 8.4

# Below this peak (dBm, laser at 0 dBm) a sweep is at the meter's floor (-70 to -80 dBm):
# there is nothing to fit. A weak but clean fringe (-45 dBm through a lossy path) is kept.
DARK_DBM = -60.0
# A TBU whose fringe is flat passes its light whole when it is stuck: a probe path (access +
# up to ~15 TBUs at 0.5 dB) then delivers more than this (dBm). A flat reading below it is
# stray light around a dead TBU.
LIT_DBM = -35.0
# Fitted fringe amplitude / (amplitude + floor) at the brightest output. A working TBU's
# fringe swings between bar and cross (extinction 30-45 dB: contrast ~1); a stuck TBU's
# readings only carry the meter's noise (< 0.05 even with an outlier, soft-l1 weighted).
MIN_CONTRAST = 0.3
# A path of calibrated TBUs delivers the laser power less the facets, the access waveguides
# and 0.5 dB per TBU (photonics.physics defaults; the worst facet and access figures make the
# expectation low, never high). A working TBU's fringe peaks within a few dB of it (coupler
# imbalance, a TBU's extinction); a dead TBU's leak is 60 dB down. Halfway: 30 dB.
DEAD_MARGIN_DB = 30.0
# A flat fringe within this of the expected power is a TBU passing its light whole (stuck);
# further down it is stray light around a dead TBU.
LIT_MARGIN_DB = 20.0
# A TBU's two heaters are drawn side by side (R0 +-5 %, efficiency +-5 %): a 30 % difference
# in rate means one fit is wrong or one heater is damaged.
HEATER_MISMATCH = 0.3
# A rate within 1 % of the fit's bounds is pinned there, not found.
BOUND_MARGIN = 0.01


def peak_dbm(sweeps: Sequence[Sweep]) -> float:
    """Brightest reading of the sweeps (dBm)."""
    peak = max(float(np.max(s.power_mw)) for s in sweeps)
    return float(10 * np.log10(max(peak, 1e-30)))


def contrast(fit: TBUFit) -> float:
    """Fitted fringe contrast ``a / (a + b)`` at the output with the largest fringe (0..1)."""
    a = np.asarray(fit.amplitude_mw, float)
    b = np.asarray(fit.floor_mw, float)
    o = int(np.argmax(a + b))
    return float(a[o] / max(a[o] + b[o], 1e-30))


def expected_peak_dbm(n_hops: int, laser_dbm: float = 0.0, defaults: PhysicsDefaults | None = None) -> float:
    """Power (dBm) a path of ``n_hops`` set TBUs plus the TBU under test delivers at its peak:
    the laser less two facets, two access waveguides and the TBUs' insertion loss (the
    datasheet's worst figures, so the expectation errs low).
    """
    d = defaults or PhysicsDefaults()
    return laser_dbm - 2 * (FACET_WORST_DB + ACCESS_WORST_DB) - (n_hops + 1) * d.tbu_loss_db


def failure(fit: TBUFit, sweeps: Sequence[Sweep], max_current_ma: float = np.inf,
            expected_dbm: float | None = None) -> str | None:
    """"dark", "flat", "range" or None (the fringe is real and usable).

    "dark": the peak is below :data:`DARK_DBM`, or ``expected_dbm`` (the power a path of
    known TBUs should carry, :func:`expected_peak_dbm`) less :data:`DEAD_MARGIN_DB`.
    "range": a fitted heater needs more than ``max_current_ma`` for 2 pi, so the TBU could
    not be set (a fit of stray light, or a heater far off nominal).
    """
    peak = peak_dbm(sweeps)
    if peak < DARK_DBM or (expected_dbm is not None and peak < expected_dbm - DEAD_MARGIN_DB):
        return "dark"
    if contrast(fit) < MIN_CONTRAST:
        return "flat"
    for arm in (0, 1):
        r2, r3 = fit.rho2[arm], fit.rho3[arm]
        if np.isfinite(r2) and float(invert_cubic(np.array(2 * np.pi), r2, r3)) > max_current_ma:
            return "range"
    return None


def diagnosis(fit: TBUFit, sweeps: Sequence[Sweep], expected_dbm: float | None = None) -> str:
    """What a failed fit through known-good TBUs says of the TBU: "dead", "bar" or "cross".

    Stuck ("bar"/"cross") needs a flat fringe carrying the path's light: above
    :data:`LIT_DBM`, and within :data:`LIT_MARGIN_DB` of ``expected_dbm`` when known.
    """
    lit = LIT_DBM if expected_dbm is None else min(LIT_DBM, expected_dbm - LIT_MARGIN_DB)
    if failure(fit, sweeps, expected_dbm=expected_dbm) == "flat" and peak_dbm(sweeps) >= lit:
        return stuck_state(fit)
    return "dead"


def stuck_state(fit: TBUFit) -> str:
    """State of a TBU whose fit is flat: "cross" or "bar", from the output that carries the light.

    ``fit.signs``: +1 for the output on the TBU's cross path, -1 on its bar path. The floor
    ``b`` of a flat fit is the steady power at each output.
    """
    level = np.asarray(fit.amplitude_mw, float) + np.asarray(fit.floor_mw, float)
    return "cross" if float(fit.signs[int(np.argmax(level))]) > 0 else "bar"


def record_warnings(record: Any, poor_fit_residual: float) -> list[str]:
    """What is doubtful about a TBU's final fit (a ``TBURecord``: ``g2``, ``rms_residual``)."""
    out = []
    if record.rms_residual > poor_fit_residual:
        out.append(f"fit residual {record.rms_residual:.1f} sigma (> {poor_fit_residual})")
    lo, hi = RHO2_SEARCH[0] / 2, RHO2_SEARCH[1] * 2
    for arm, name in ((0, "top"), (1, "bottom")):
        r = float(record.g2[arm])
        if np.isfinite(r) and (r <= lo * (1 + BOUND_MARGIN) or r >= hi * (1 - BOUND_MARGIN)):
            out.append(f"{name} heater rate {r:.3f} rad/mA^2 at the fit's bound")
    a, b = (float(v) for v in record.g2)
    if np.isfinite(a) and np.isfinite(b) and abs(a - b) > HEATER_MISMATCH * max(a, b):
        out.append(f"its two heaters differ: {a:.3f} vs {b:.3f} rad/mA^2")
    return out
