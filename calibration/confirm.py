"""Verified, or named: confirm every TBU's phase by light its own fit never saw.

A fit can be wrong without looking wrong: light that crossed a mis-set TBU on the way in
can recombine both outputs of the TBU under test and shift its fringe whole, with a clean
residual (docs/calibration.md, "Verified, or named"). So after the last stage every TBU
is checked against the finished map with a measurement that took no part in its fit:

* a **different light path** where one exists (a probe that avoids the TBUs its fit's light
  crossed, so its source or outputs differ), else the fit's own path; and always
* **different drive levels**: the map (not the sweep) sets the TBU's differential phase to
  :data:`LEVELS` targets spread over a whole turn, its neighbours' heat included.

Per output the readings are fitted with ``A + B cos(theta) + C sin(theta)`` (linear least
squares over the targets): on the cross output the fringe peaks at ``theta = 0``, on the bar
output at ``pi``, so the fitted peak's position is the map's phase error at that TBU
(``offset_rad``), independent of the path's losses (they scale a fringe, never shift it).
What the cosine leaves unexplained, relative to its amplitude, is a phase-equivalent shape
error (a heater curve wrong at some levels). The **disagreement** is the root sum square of
the two; above :data:`CONFIRM_TOL_RAD` the TBU is not confirmed. A fringe of too little
contrast confirms nothing (disagreement unknown, NaN).

One light path can be wrong by itself: a cross-state TBU on it whose couplers are off 50 %
leaks ~-30 dB of the light on a second way to the TBU under test, where it beats with the
main light and shifts the fringe by up to ~0.06 rad whatever the map (seed 9000 of the
trust campaign, ``tbu:2.3.2``: +0.058 rad through both paths from port 25, within 0.003 rad
through five others, the map 0.005 rad off the truth). So a TBU light disagrees with on its
first path is asked again through other paths and judged on the median
(:func:`combine_paths`), which one misleading path cannot move.

Two paths are no majority: when the mesh offers only two, the second is often the fit's own
path, which shares whatever biased the fit and so always agrees with the map. The median of
two is their midpoint, and it confirmed a TBU 0.063 rad off (SmartLight seed 31337 with drift
tracking on: the fit's path, three cross-state TBUs, biased by -0.058 rad; the other path,
one cross-state TBU, by -0.010 rad, showed +0.054; midpoint +0.030, "confirmed"). What
decides between two is the physics of the leak: a TBU in cross cannot null its bar output
when its couplers are both off 50 % the same way (``(k1 + k2 - 1)^2``, ~-30 dB at this chip's
couplers), while in bar only their difference leaks (``(k1 - k2)^2``, ~-43 dB). So of two
paths the one crossing fewer TBUs in cross is believed (:func:`combine_paths`); with as many
on each, the one that disagrees more stands, and the TBU is re-fitted or named.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from calibration.bench import Bench, settle
from calibration.heater_map import invert_cubic
from calibration.map import DISAGREES, NO_FRINGE, NO_LIGHT_PATH, CalibrationMap
from calibration.paths import Probe

# Targets per confirmation: six phases a sixth of a turn apart. Three unknowns per output
# (A, B, C) leave three readings to judge the fringe's shape; each heater of the TBU drives
# half of them, so both curves are checked. Six set-and-reads a TBU: ~430 on SmartLight,
# ~5 % of a calibration.
LEVELS = 6
# First target (rad): off 0 and pi, so no target sits where one heater hands over to the other.
FIRST_LEVEL_RAD = np.pi / LEVELS
# A confirmed TBU's map phase is within this of what light shows (rad). The fits themselves
# are good to ~0.01-0.03 rad per heater on the realistic chip (docs/calibration.md), and
# six readings at 0.2 % meter noise resolve ~0.003 rad; a TBU 0.1 rad off (a -30 dB leak on
# bar/cross) must never pass: measured disagreements of confirmed TBUs, and of wrong ones,
# are in docs/calibration.md.
CONFIRM_TOL_RAD = 0.05
# Below this fringe contrast (amplitude / mean level over every output) the light did not see
# the TBU's fringe: the path is blocked or the TBU stuck, nothing is confirmed.
MIN_CONFIRM_CONTRAST = 0.3
# The largest fringe shift (rad) a light path's own leak is taken to explain: seen 0.055-0.061
# rad (a ~-30 dB leak through a cross-state TBU, docs/calibration.md "One path can mislead");
# 0.08 rad is a -28 dB leak. Two paths further apart than this differ by more than a leak:
# neither is believed over the other (the fit's own path always agrees with its fit, however
# wrong the fit), so the doubt stands. Below the 0.1 rad line of a TBU that must be named.
LEAK_SHIFT_RAD = 0.08


@dataclass(frozen=True)
class Confirmation:
    """One TBU's confirmation by light.

    Attributes:
        tbu: the TBU.
        offset_rad: fringe position measured minus the map's (rad, wrapped to (-pi, pi]).
        shape_rad: phase-equivalent RMS of what the cosine leaves unexplained (rad).
        disagreement_rad: ``hypot(offset_rad, shape_rad)``; NaN when no fringe was seen.
        contrast: fitted fringe amplitude over the mean level (about 1 for a clean fringe).
        independent_path: the light path avoided every TBU the fit's light crossed.
        src, outputs: the mesh ports used (the first path's, when several were asked).
        path_offsets_rad: each path's own offset when several were asked (rad).
        cross_hops: TBUs the light path crosses in the cross state (each a possible -30 dB leak
            onto a second way in: the module docstring); the first path's when several were asked.
    """

    tbu: int
    offset_rad: float
    shape_rad: float
    disagreement_rad: float
    contrast: float
    independent_path: bool
    src: int
    outputs: tuple[int, ...]
    path_offsets_rad: tuple[float, ...] = ()
    cross_hops: int = 0

    @property
    def confirmed(self) -> bool:
        """True when light agrees with the map within :data:`CONFIRM_TOL_RAD`."""
        return bool(np.isfinite(self.disagreement_rad) and self.disagreement_rad <= CONFIRM_TOL_RAD)


def level_targets(n: int = LEVELS) -> np.ndarray:
    """The differential phases (rad) a TBU is set to, a whole turn in ``n`` equal steps."""
    return FIRST_LEVEL_RAD + 2 * np.pi * np.arange(n) / n


def drive_for(cmap: CalibrationMap, base: np.ndarray, tbu: int, theta: float,
              max_current_ma: float) -> np.ndarray | None:
    """Currents (mA): ``base`` with ``tbu``'s heaters set so the map predicts differential
    ``theta`` (rad, mod 2 pi) at ``tbu``, every other heater's heat included; None when the
    needed current is above ``max_current_ma``.

    The differential is linear in the driven heater's self-phase (``D (I + K/eta) s``): one
    evaluation at unit self-phase gives the slope.
    """
    c = base.copy()
    c[2 * tbu] = c[2 * tbu + 1] = 0.0
    theta0 = float(cmap.differential(c)[tbu])
    need = float(np.mod(theta - theta0, 2 * np.pi))
    arm, phase = (0, need) if need <= np.pi else (1, 2 * np.pi - need)
    h = 2 * tbu + arm
    unit = c.copy()
    unit[h] = float(invert_cubic(np.array(1.0), cmap.rho2[h], cmap.rho3[h]))
    slope = abs(float(cmap.differential(unit)[tbu]) - theta0)
    current = float(invert_cubic(np.array(phase / max(slope, 1e-9)), cmap.rho2[h], cmap.rho3[h]))
    if not np.isfinite(current) or current > max_current_ma:
        return None
    c[h] = current
    return c


def fringe_offset(theta: np.ndarray, power_mw: np.ndarray, signs: np.ndarray) -> tuple[float, float, float]:
    """(offset, shape, contrast) of readings ``power_mw`` (levels, outputs) at targets ``theta``.

    Per output ``P = A + B cos(theta) + C sin(theta)``; a cross output (sign +1) peaks at
    ``theta = 0`` (``calibration.map.target_differential``: cross is 0, bar pi), a bar output
    (sign -1) at pi, so ``sign (B - iC)`` points at the phase error; outputs add as phasors
    weighted by their amplitude (mW).
    """
    design = np.column_stack([np.ones_like(theta), np.cos(theta), np.sin(theta)])
    coef, *_ = np.linalg.lstsq(design, power_mw, rcond=None)
    a, b, c = coef
    phasor = complex(np.sum(np.asarray(signs) * (b - 1j * c)))
    amplitude = float(np.sum(np.hypot(b, c)))
    resid = power_mw - design @ coef
    dof = max(len(theta) - 3, 1)
    shape = float(np.sqrt(np.sum(resid**2) / dof / len(signs))) / max(amplitude / len(signs), 1e-30)
    contrast = amplitude / max(float(np.sum(np.abs(a))), 1e-30)
    return float(np.angle(phasor)), shape, contrast


def confirm_tbu(bench: Bench, cmap: CalibrationMap, probe: Probe, base: np.ndarray, *,
                independent_path: bool, wavelength_nm: float, settle_s: float) -> Confirmation:
    """Set ``probe.tbu`` to :func:`level_targets` through ``cmap`` (``base``: the path TBUs set,
    the rest parked) and compare the fringe light shows with the map's prediction.
    """
    bench.select_input(probe.src, wavelength_nm)
    thetas, rows = [], []
    for theta in level_targets():
        c = drive_for(cmap, base, probe.tbu, float(theta), bench.max_current_ma)
        if c is None:
            continue
        bench.set_currents(c)
        settle(bench, settle_s)
        rows.append(10 ** (np.asarray(bench.read_powers_dbm(list(probe.outputs))) / 10))
        thetas.append(theta)
    if len(thetas) < 4:  # three unknowns per output and one reading to judge them
        return Confirmation(probe.tbu, np.nan, np.nan, np.nan, 0.0, independent_path, probe.src,
                            probe.outputs, cross_hops=cross_hops(probe))
    offset, shape, contrast = fringe_offset(np.array(thetas), np.array(rows), np.array(probe.signs))
    seen = contrast >= MIN_CONFIRM_CONTRAST
    return Confirmation(probe.tbu, offset if seen else np.nan, shape if seen else np.nan,
                        float(np.hypot(offset, shape)) if seen else np.nan, contrast, independent_path,
                        probe.src, probe.outputs, cross_hops=cross_hops(probe))


def cross_hops(probe: Probe) -> int:
    """TBUs ``probe``'s light crosses in the cross state (the state whose couplers leak most)."""
    return sum(h.state == "cross" for h in probe.hops)


def unverified_reason(confirmation: Confirmation) -> str:
    """Why ``confirmation`` left its TBU unverified, as the map records it
    (:data:`calibration.map.UNVERIFIED_REASONS`): no light path reached it (``src`` -1), a lit
    path showed no fringe (disagreement NaN), or light measured a disagreement.

    Example:
        >>> nan = float("nan")
        >>> unverified_reason(Confirmation(7, nan, nan, nan, 0.0, False, -1, ()))
        'no-light-path'
    """
    if confirmation.src < 0:
        return NO_LIGHT_PATH
    return DISAGREES if np.isfinite(confirmation.disagreement_rad) else NO_FRINGE


def unverified_warning(name: str, confirmation: Confirmation, spent: str = "") -> str:
    """The calibration's warning line for a TBU it leaves unverified, saying what light showed.

    Three cases a user acts on differently: light disagreed with the fit by so much (rad); a
    path was lit and no fringe came back (the TBU or its path may be dark); no light path
    avoiding the failed and doubtful TBUs reached it at all (``src`` -1: it was not looked at,
    so nothing says it is dark). ``spent`` is appended as given (why no re-fit was tried).

    Example:
        >>> walled = Confirmation(7, float("nan"), float("nan"), float("nan"), 0.0, False, -1, ())
        >>> unverified_warning("tbu:0.1.2", walled)[:62]
        'tbu:0.1.2: unverified: no light path avoiding the failed and d'
    """
    if unverified_reason(confirmation) == NO_LIGHT_PATH:
        return (f"{name}: unverified: no light path avoiding the failed and doubtful TBUs reaches it, "
                f"so light could not confirm its fit (not found dark{spent}); routing avoids it")
    rad = confirmation.disagreement_rad
    seen = f"{rad:.3f} rad" if np.isfinite(rad) else "no fringe through the paths tried"
    return (f"{name}: unverified: light disagrees with its fit ({seen}; tolerance {CONFIRM_TOL_RAD} rad"
            f"{spent}); routing avoids it")


def combine_paths(confirmations: list[Confirmation]) -> Confirmation:
    """One TBU's verdict from its confirmations through several light paths.

    Three or more: the median of their offsets and of their shape errors (rad), so one path
    whose own leak shifts its fringe (module docstring) neither condemns a right map nor
    clears a wrong one. Two: no median outvotes a biased path, so the path crossing fewer
    TBUs in cross is believed, and with as many on each, or further apart than a leak explains
    (:data:`LEAK_SHIFT_RAD`), the one that disagrees more (the doubt stands: the TBU is
    re-fitted, or named). ``path_offsets_rad`` keeps every path's.

    Paths that saw no fringe are left out; when none saw one, the first is returned.
    """
    seen = [c for c in confirmations if np.isfinite(c.disagreement_rad)]
    if len(seen) <= 1:
        return seen[0] if seen else confirmations[0]
    offsets = np.array([c.offset_rad for c in seen])
    if len(seen) == 2:
        apart = abs(float(np.angle(np.exp(1j * (offsets[0] - offsets[1])))))
        fewest = min(c.cross_hops for c in seen)
        cleanest = [c for c in seen if c.cross_hops == fewest or apart > LEAK_SHIFT_RAD]
        pick = max(cleanest, key=lambda c: c.disagreement_rad)
        return replace(pick, path_offsets_rad=tuple(float(x) for x in offsets))
    # offsets near +-pi wrap: take the median about the first path's, then shift back
    ref = offsets[0]
    offset = float(ref + np.median(np.angle(np.exp(1j * (offsets - ref)))))
    offset = float(np.angle(np.exp(1j * offset)))
    shape = float(np.median([c.shape_rad for c in seen]))
    first = seen[0]
    return Confirmation(first.tbu, offset, shape, float(np.hypot(offset, shape)),
                        float(np.median([c.contrast for c in seen])), any(c.independent_path for c in seen),
                        first.src, first.outputs, tuple(float(x) for x in offsets), first.cross_hops)
