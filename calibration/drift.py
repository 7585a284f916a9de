"""Drift during calibration: reference TBUs re-measured through the run, and the map compensated.

A chip whose temperature moves during a run moves every TBU's passive differential phase by
``c_t dT`` (docs/calibration.md, "The simulated chip": the common-mode phase of both arms
cancels in a TBU's split; what is left is a per-TBU coefficient ``c_t``, ~0.03 rad/K RMS on
SmartLight-class chips, of either sign). A TBU fitted early in a two-minute run and used at
its end is then off by ``c_t`` times the whole run's temperature change: 1 K/min leaves up to
~0.07 rad, 3 K/min ~0.3 rad (docs/calibration.md, "Drift during the run").

Since ``c_t`` differs per TBU, no single number corrects the map; but the temperature is one
number for the whole chip, and the procedure already measures every TBU twice: its fit (at
time ``tau_t``) and its confirmation by light at the end (at ``kappa_t``, showing the phase
moved by ``o_t``). So:

* **Reference TBUs** (:class:`Reference`): ``Options.drift_references`` TBUs whose probe crosses no
  other TBU (light from a mesh port straight into them, straight out to the meter) are
  measured at :data:`REFERENCE_LEVELS` fixed heater states (the whole current vector is
  stored at the first measurement and re-applied exactly, so nothing but the chip changes)
  every :data:`REFERENCE_INTERVAL_OPS` operations. Each measurement is a fringe position
  (:func:`calibration.confirm.fringe_offset`: independent of the laser power and path loss).
  Their phase changes ``c_k (T(t) - T(t0))`` share one temperature history: its rank-one
  estimate is the run's temperature ``T(t)`` in reference units (:class:`DriftLog`).
* **Compensation** (:func:`compensate`): each TBU's phase at the end is its fit plus what its
  confirmation saw, ``o_t``, carried on to the moment of compensation with its own rate
  ``o_t / (T(kappa_t) - T(tau_t))`` (capped, :data:`MAX_EXTRAPOLATION`). The compensated map
  is then confirmed by light again, so nothing is believed that light did not check.
* **Kelvin-equivalent**: the coefficients found for every TBU, scaled so their RMS is the
  design's :data:`DESIGN_DRIFT_RAD_PER_K`, turn the reference units into kelvin: the drift
  seen is reported in K/min (and in rad/min at the references) and recorded in the map's
  quality. A chip drifting so fast that the map cannot stay right until the run ends
  (:func:`move_after_confirm`) is refused in one line.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibration.bench import Bench, settle
from calibration.confirm import fringe_offset
from calibration.paths import Probe
from calibration.records import TBURecord, base_currents, victim_currents

# Fixed states per reference: four phases a quarter turn apart, the fewest that fit
# A + B cos + C sin with one reading to spare (16 operations per round for four references).
REFERENCE_LEVELS = 4
# Two readings of a reference whose residuals from a cosine differ by more than this (RMS,
# relative to the fringe amplitude) are not both clean: one holds a meter glitch (1 reading in
# 500 is 10 % off on the realistic bench: ~3 % of rounds), which would move the fitted fringe
# by up to ~0.1 rad and look like drift. Clean readings repeat to ~0.004 at 0.2 % meter noise.
REFERENCE_GLITCH = 0.02
# Readings of a glitched reference taken again at most (the cleanest is kept).
REFERENCE_REREADS = 2
# Operations between rounds of reference readings: ~12 s of bench time at the default 12 ms
# settling, 0.6 K at 3 K/min, so linear interpolation between rounds of a smooth warm-up is
# far inside the tolerance; ~10 rounds in a SmartLight run cost ~160 operations (~1.7 %).
REFERENCE_INTERVAL_OPS = 1000
# The design's differential drift coefficient (rad/K RMS over TBUs): 811 um arms with a ~5 %
# mismatch (docs/calibration.md, "The simulated chip"). Used only to express the drift seen
# in kelvin; the compensation itself needs no coefficient.
DESIGN_DRIFT_RAD_PER_K = 0.03
# Below this change (rad) of every reference over the run, the chip did not drift: the map is
# left as fitted (no correction, no second confirmation). Four-level reference readings
# scatter by ~0.002 rad (0.2 % meter noise), the controller's wander moves a reference by
# < 0.002 rad; 1 K/min over a SmartLight run moves the median reference by ~0.04 rad.
DRIFT_SEEN_RAD = 0.015
# A TBU's own drift rate is its confirmation offset over the temperature change since its
# fit; carried on to the compensation time it may add at most this multiple of the offset
# (a TBU re-fitted just before its confirmation has a tiny lever and a noisy rate).
MAX_EXTRAPOLATION = 1.0
# A TBU whose phase moved less than this share of the way its lever predicts is not
# extrapolated either: its lever is too short to tell its rate from the fit's own error.
MIN_LEVER_SHARE = 0.2
# Fewest TBUs with a long enough lever to say how spread the chip's drift coefficients are
# (and so to compensate, and to express the drift in kelvin).
MIN_COEFFICIENTS = 5
# The run is refused when the chip drifts so fast that, from the compensation to the end of the
# run (a second confirmation pass: END_PASSES times the first; the compensation aims at its
# end, so only what its extrapolation misses is left), its fastest TBUs (DRIFT_SIGMAS of the
# chip's measured coefficients: the largest of ~70 Gaussian draws is ~2.5 sigma) would move
# further than this (rad): a TBU confirmed within the 0.05 rad tolerance then still ends within
# 0.1 rad (the line between a right TBU and one that must be named, -26 dB of leak). Measured
# (docs/calibration.md, "Drift during the run"): SmartLight seed 9100 at 6 K/min, without this
# limit, ended with a TBU 0.134 rad off, unnamed; with it, that run is refused.
MAX_MOVE_AFTER_CONFIRM_RAD = 0.05
DRIFT_SIGMAS = 3.0
END_PASSES = 1.0


def bench_time_s(bench: Bench) -> float:
    """The bench's clock (s): the simulated bench's own (``now_s``), else the wall clock."""
    now = getattr(bench, "now_s", None)
    return float(now()) if callable(now) else time.monotonic()


@dataclass(frozen=True)
class Reference:
    """A TBU read at fixed heater states to follow the chip's temperature.

    Attributes:
        tbu, src, outputs, signs: as the TBU's probe (no other TBU on its light path).
        thetas: (levels,) the differential phases the states aimed at when chosen (rad).
        currents: (levels, n_heaters) the whole current vector of each state (mA).
    """

    tbu: int
    src: int
    outputs: tuple[int, ...]
    signs: tuple[float, ...]
    thetas: np.ndarray
    currents: np.ndarray


def reference_for(record: TBURecord, probe: Probe, records: dict[int, TBURecord], n_heaters: int,
                  max_current_ma: float) -> Reference | None:
    """The fixed states reading ``probe.tbu`` at :data:`REFERENCE_LEVELS` phases through its
    fit ``record``, every other calibrated TBU parked; None when a state needs too much current.
    """
    thetas = np.pi / REFERENCE_LEVELS + 2 * np.pi * np.arange(REFERENCE_LEVELS) / REFERENCE_LEVELS
    base = base_currents(n_heaters, records, probe)
    rows = []
    for theta in thetas:
        c = base.copy()
        c[2 * probe.tbu], c[2 * probe.tbu + 1] = victim_currents(record, float(theta))
        if not np.isfinite(c).all() or c.max() > max_current_ma:
            return None
        rows.append(c)
    return Reference(probe.tbu, probe.src, probe.outputs, probe.signs, thetas, np.array(rows))


@dataclass(frozen=True)
class ReferenceReading:
    """One reading of a reference: fringe position (rad, wrapped), contrast, and what a clean
    cosine leaves of each level's reading (relative to the fringe's amplitude).
    """

    offset_rad: float
    contrast: float
    residual: np.ndarray


def cosine_reading(thetas: np.ndarray, power_mw: np.ndarray, signs: np.ndarray) -> ReferenceReading:
    """The fringe position and contrast (:func:`calibration.confirm.fringe_offset`) and the
    relative residual of each reading (levels, outputs) of one reference.
    """
    offset, _, contrast = fringe_offset(thetas, power_mw, signs)
    design = np.column_stack([np.ones_like(thetas), np.cos(thetas), np.sin(thetas)])
    coef, *_ = np.linalg.lstsq(design, power_mw, rcond=None)
    amplitude = max(float(np.sum(np.hypot(coef[1], coef[2]))), 1e-30)
    return ReferenceReading(offset, contrast, (power_mw - design @ coef) / amplitude)


def glitch(a: np.ndarray, b: np.ndarray) -> float:
    """RMS difference of two readings' relative residuals (a glitch shows as ~0.1)."""
    return float(np.sqrt(np.mean((a - b) ** 2)))


def read_reference(bench: Bench, ref: Reference, wavelength_nm: float, settle_s: float,
                   pattern: np.ndarray | None) -> ReferenceReading:
    """Read ``ref`` at its fixed states; a reading not like ``pattern`` (the reference's first,
    clean reading's residuals) holds a meter glitch and is taken again.

    Its states are fixed, so whatever a cosine cannot explain (the fit's small errors at those
    states) repeats reading after reading, drift or not (a common shift of equally spaced
    phases moves the fringe, never its residuals). A first reading (no ``pattern``) is taken
    twice and kept when both agree. At most :data:`REFERENCE_REREADS` readings more; the one
    nearest the pattern is kept.
    """
    bench.select_input(ref.src, wavelength_nm)
    readings: list[ReferenceReading] = []
    for _ in range(1 + REFERENCE_REREADS + (pattern is None)):
        rows = []
        for c in ref.currents:
            bench.set_currents(c)
            settle(bench, settle_s)
            rows.append(10 ** (np.asarray(bench.read_powers_dbm(list(ref.outputs))) / 10))
        r = cosine_reading(ref.thetas, np.array(rows), np.array(ref.signs))
        seen = [pattern] if pattern is not None else []
        if any(glitch(r.residual, p) <= REFERENCE_GLITCH for p in [*seen, *(x.residual for x in readings)]):
            return r
        readings.append(r)
    if pattern is None:
        return readings[-1]
    return min(readings, key=lambda x: glitch(x.residual, pattern))


@dataclass
class DriftLog:
    """The references' readings through a run and the temperature history they imply.

    ``times_s`` (rounds,), ``phases`` (rounds, references): each reference's phase change
    since the first round (rad, unwrapped along time); ``patterns``: each reference's first
    reading's residuals (to tell a glitch).
    """

    references: list[Reference] = field(default_factory=list)
    patterns: list[np.ndarray] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)
    raw: list[list[float]] = field(default_factory=list)
    ops: int = 0

    @property
    def phases(self) -> np.ndarray:
        """(rounds, references) phase change of each reference since the first round (rad)."""
        if not self.raw:
            return np.zeros((0, len(self.references)))
        p = np.unwrap(np.array(self.raw), axis=0)
        return p - p[0]

    def record(self, time_s: float, offsets: Sequence[float]) -> None:
        """Add one round of readings taken at ``time_s``."""
        self.times_s.append(float(time_s))
        self.raw.append([float(x) for x in offsets])

    def seen_rad(self) -> float:
        """The largest change of any reference over the run so far (rad)."""
        p = self.phases
        return float(np.max(np.abs(p))) if p.size else 0.0

    def drifted(self) -> bool:
        """True when some reference moved more than :data:`DRIFT_SEEN_RAD`."""
        return len(self.times_s) >= 2 and self.seen_rad() > DRIFT_SEEN_RAD

    def history(self) -> np.ndarray:
        """The chip's temperature at each round, in reference units (rad at a unit-norm set of
        reference coefficients): the rank-one part of :attr:`phases`, 0 at the first round,
        signed so that it rises over the run.
        """
        p = self.phases
        if len(p) < 2:
            return np.zeros(len(p))
        u, s, _ = np.linalg.svd(p, full_matrices=False)
        temp = u[:, 0] * s[0]
        return -temp if temp[-1] < 0 else temp

    def temperature(self, t_s: float | np.ndarray) -> np.ndarray:
        """Temperature (reference units) at ``t_s``: linear between rounds, held before the first,
        continued at the last rounds' slope after the last (the compensation aims at the end of
        the run, a little after the last round).
        """
        if len(self.times_s) < 2:
            return np.zeros_like(np.asarray(t_s, float))
        hist, times = self.history(), np.array(self.times_s)
        inside = np.interp(t_s, times, hist)
        slope = (hist[-1] - hist[-2]) / max(times[-1] - times[-2], 1e-12)
        return np.where(np.asarray(t_s) > times[-1], hist[-1] + slope * (np.asarray(t_s) - times[-1]), inside)

    def rate_rad_per_min(self) -> float:
        """The fastest reference's average rate of change over the run (rad/min)."""
        span = self.times_s[-1] - self.times_s[0] if len(self.times_s) >= 2 else 0.0
        if span <= 0:
            return 0.0
        return float(np.max(np.abs(self.phases[-1]))) / span * 60.0


# A TBU's offset is the chip's drift when its implied coefficient is within this many robust
# sigmas of the chip's spread (c_t is Gaussian: 5 sigma is exceeded once in ~1.7 million TBUs);
# beyond it the offset is something else (a fit spoiled by its path, a broken TBU) and is left
# to the confirmation's re-fit or naming.
OUTLIER_SIGMA = 5.0
# What a TBU's offset may hold besides drift (rad): the fits' and the confirmation's own error
# (0.01-0.03 rad per heater on the realistic chip, docs/calibration.md).
FIT_ERROR_RAD = 0.02
# A normal distribution's median absolute value is 0.674 sigma.
MAD_TO_SIGMA = 1.4826


def coefficients_of(offsets: dict[int, float], fitted_s: dict[int, float], confirmed_s: dict[int, float],
                    log: DriftLog) -> tuple[dict[int, float], dict[int, float]]:
    """(lever per TBU, coefficient per TBU with a long enough lever) in reference units.

    A TBU's lever is the temperature change between its fit and its confirmation; its
    coefficient is its offset over its lever, for levers of at least :data:`MIN_LEVER_SHARE`
    of the run's span (shorter ones cannot tell drift from the fit's own error).
    """
    span = float(np.ptp(log.history())) if log.times_s else 0.0
    levers, coefficients = {}, {}
    for t, o in offsets.items():
        if not np.isfinite(o) or t not in fitted_s or t not in confirmed_s:
            continue
        levers[t] = float(log.temperature(confirmed_s[t]) - log.temperature(fitted_s[t]))
        if span > 0 and abs(levers[t]) >= MIN_LEVER_SHARE * span:
            coefficients[t] = o / levers[t]
    return levers, coefficients


def coefficient_sigma(coefficients: dict[int, float]) -> float | None:
    """Robust spread (1 sigma) of the TBUs' drift coefficients; None with too few to say."""
    c = np.abs(np.array(list(coefficients.values()), float))
    if c.size < MIN_COEFFICIENTS:
        return None
    return MAD_TO_SIGMA * float(np.median(c))


def compensate(offsets: dict[int, float], fitted_s: dict[int, float], confirmed_s: dict[int, float],
               log: DriftLog, aim_s: float) -> tuple[dict[int, float], float | None]:
    """(correction per TBU (rad), the coefficients' spread in reference units or None).

    A TBU's phase at ``aim_s`` is its fit plus what its confirmation saw (``offsets``, rad,
    light minus map), plus its own rate times the temperature change from its confirmation
    to ``aim_s`` (at most :data:`MAX_EXTRAPOLATION` times the offset; none without a long
    enough lever). Offsets within :data:`FIT_ERROR_RAD` are left alone (light confirmed those
    TBUs already). Only offsets the drift explains are corrected: within
    :data:`OUTLIER_SIGMA` spreads of the chip's coefficients times the TBU's lever, plus
    :data:`FIT_ERROR_RAD`. Nothing is corrected when too few TBUs say what the spread is.
    """
    levers, coefficients = coefficients_of(offsets, fitted_s, confirmed_s, log)
    sigma = coefficient_sigma(coefficients)
    if sigma is None:
        return {}, None
    temp_aim = float(log.temperature(aim_s))
    corrections = {}
    for t, lever in levers.items():
        o = offsets[t]
        if abs(o) <= FIT_ERROR_RAD or abs(o) > OUTLIER_SIGMA * sigma * abs(lever) + FIT_ERROR_RAD:
            continue  # within the fits' own error (light confirmed it), or not the chip's drift
        ahead = 0.0
        if t in coefficients:
            ahead = float(np.clip((temp_aim - float(log.temperature(confirmed_s[t]))) / lever,
                                  -MAX_EXTRAPOLATION, MAX_EXTRAPOLATION))
        corrections[t] = o * (1.0 + ahead)
    return corrections, sigma


def kelvin_per_minute(log: DriftLog, sigma: float | None) -> float | None:
    """The run's average temperature rate (K/min, kelvin-equivalent): the temperature history
    in reference units times kelvin per unit (the coefficients' spread ``sigma`` over the
    design's :data:`DESIGN_DRIFT_RAD_PER_K`); None when the spread is unknown.
    """
    span = log.times_s[-1] - log.times_s[0] if len(log.times_s) >= 2 else 0.0
    if sigma is None or span <= 0:
        return None
    hist = log.history()
    return float(abs(hist[-1] - hist[0]) * sigma / DESIGN_DRIFT_RAD_PER_K / span * 60.0)


def rate_per_s(log: DriftLog) -> float:
    """The temperature's rate of change over the last two rounds (reference units per s)."""
    if len(log.times_s) < 2:
        return 0.0
    hist = log.history()
    return float(abs(hist[-1] - hist[-2]) / max(log.times_s[-1] - log.times_s[-2], 1e-12))


def move_after_confirm(log: DriftLog, sigma: float | None, pass_s: float) -> float:
    """How far (rad) the chip's fastest TBUs move from the compensation to the end of the run:
    :data:`DRIFT_SIGMAS` coefficient spreads times the temperature's present rate times
    :data:`END_PASSES` confirmation passes of ``pass_s`` seconds (0 when the spread is unknown).
    """
    if sigma is None:
        return 0.0
    return DRIFT_SIGMAS * sigma * rate_per_s(log) * END_PASSES * pass_s


def drift_summary(log: DriftLog, sigma: float | None, corrected: int, names: Sequence[str],
                  pass_s: float = 0.0) -> dict[str, Any]:
    """What the map's quality records of the drift seen during the run (TBUs by ``names``)."""
    rate_k = kelvin_per_minute(log, sigma)
    return {
        "reference_tbus": [names[r.tbu] for r in log.references],
        "reference_rounds": len(log.times_s),
        "reference_operations": log.ops,
        "drift_seen_rad": log.seen_rad(),
        "drift_rad_per_min": log.rate_rad_per_min(),
        "drift_k_per_min": rate_k,
        "drift_compensated_tbus": corrected,
        "drift_move_after_confirm_rad": move_after_confirm(log, sigma, pass_s),
    }
