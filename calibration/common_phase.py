"""Common-phase calibration: each TBU's common (global) arm phase, measured by interference.

The fringe fits (:mod:`calibration.fit`) give each TBU's differential phase, all a split
needs. A unitary or a ring filter also needs the phase light picks up crossing each TBU
(the mean of its arms' passive phases plus its propagation phase): where two paths meet,
their difference decides the result. This stage measures it with the bench only (laser
into one port, power meter at two ports, heaters driven through the finished map):

1. **Design** (:func:`calibration.interferometers.design`): Mach-Zehnders made of the mesh,
   one splitter and one combiner TBU at 50:50 and two arms of TBUs at bar or cross, chosen
   so that their arm sums span every combination of common phases light can show.
2. **Measure** (:func:`measure`): for each, the common mode of one arm TBU is swept over a
   turn (both heaters, :data:`SWEEP_POINTS` settings through
   :func:`calibration.phase_drive.currents_for_state`); the normalised difference of the two
   combiner outputs, ``(P0 - P1) / (P0 + P1)``, is a fringe whose first harmonic gives its
   position (laser power and path loss scale it, never shift it).
3. **Fit** (:func:`fit_common`): the model (nominal chip, the map's differential phases,
   the common phases sought) predicts every fringe's position; its change with the common
   phases is the arms' signs (+1 on arm A, -1 on arm B), so the fringes give an integer
   linear system modulo 2 pi, solved exactly (:func:`calibration.integer_phases.solve`), then
   refined by Gauss-Newton on the model's own predictions and exact Jacobian.
   Directions no fringe sees (a phase added at a mesh port's vertex to every TBU that meets
   there, in the alternating signs the links allow: it moves no power reading, only the
   phase of the mesh ports' light) are left at the least-norm solution: a unitary is then
   exact up to the phases of its input and output ports, which a power meter cannot see.
4. **Check**: a quarter more interferometers than the span needs are measured too; their
   residual after the fit is the stage's figure of merit (``common_phase.rms_residual_rad``
   in the map's quality) and a fit whose residual exceeds :data:`CHECK_TOL_RAD` is named.

Cost: :data:`SWEEP_POINTS` set-and-read operations per interferometer (two ports read at
once): 360 on ``square:6x6``, 240 on ``hex:3x3``, 520 on SmartLight (docs/calibration.md,
"Common phases").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from calibration import integer_phases
from calibration.bench import Bench, settle
from calibration.interferometers import Interferometer, design
from calibration.map import CalibrationMap
from calibration.phase_drive import currents_for_state
from photonics.circuit import solve
from photonics.circuit_gradient import power_jacobian
from photonics.configuration import Configuration
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.synthesis import chip_model

SWEEP_POINTS = 8  # settings per fringe: the first harmonic of 8 points is free of harmonics 2-6
CHECK_FRACTION = 0.25  # extra interferometers measured to check the fit, as a share of the span
MIN_CHECKS = 4
GAUSS_NEWTON_STEPS = 4  # the linear solve is within ~0.05 rad; each step shrinks that ~10x
# Singular values of the fringes' Jacobian below this fraction of the largest are directions no
# fringe sees (a mesh port's phase, above): the step leaves them alone (least norm)
GAUSS_NEWTON_RCOND = 1e-3
# Largest RMS (rad) of the fringes' residuals after the fit before the stage names its result
# doubtful: the map's per-heater residual (~0.01-0.02 rad, docs/calibration.md) summed over an
# interferometer's ~6 TBUs, times two.
CHECK_TOL_RAD = 0.1
MIN_CONTRAST = 0.2  # a fringe of smaller normalised amplitude has lost its arms (a dead TBU)
TWO_PI = 2 * np.pi


def sweep_offsets(points: int = SWEEP_POINTS) -> np.ndarray:
    """Common-mode offsets (rad) of a sweep, centred on 0 so a heater scale error biases
    the fringe's position only to second order.
    """
    return -np.pi + TWO_PI * (np.arange(points) + 0.5) / points


def wrap(x: np.ndarray) -> np.ndarray:
    """Phases wrapped to [-pi, pi)."""
    return np.mod(np.asarray(x, float) + np.pi, TWO_PI) - np.pi


def sweep_states(mesh: Any, ifm: Interferometer, delta: np.ndarray, points: int = SWEEP_POINTS) -> MeshState:
    """Heater-made arm phases (points, n_tbus) of an interferometer's sweep: every TBU's split
    from the map's ``delta``, the swept TBU's both heaters raised by ``pi + offset``.
    """
    base = Configuration(ifm.fractions(mesh), mesh=mesh).heater_state(delta, 0.0)
    lift = np.pi + sweep_offsets(points)
    top = np.tile(base.phi_top, (points, 1))
    bot = np.tile(base.phi_bot, (points, 1))
    top[:, ifm.swept] += lift
    bot[:, ifm.swept] += lift
    return MeshState(top, bot)


def fringe(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position (rad) and amplitude of the first harmonic of sweeps ``d`` (..., points)."""
    psi = sweep_offsets(d.shape[-1])
    z = (d * np.exp(-1j * psi)).sum(axis=-1) * 2 / d.shape[-1]
    return np.angle(z), np.abs(z)


def normalised(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """``(P0 - P1) / (P0 + P1)``: the combiner's split, free of laser power and path loss."""
    return (p0 - p1) / np.maximum(p0 + p1, 1e-300)


def model_fringes(params: TBUParams, ifms: list[Interferometer], delta: np.ndarray,
                  wavelength_nm: float, mesh: Any) -> tuple[np.ndarray, np.ndarray]:
    """Position and amplitude of every interferometer's fringe on the chip model ``params``."""
    pos, amp = np.empty(len(ifms)), np.empty(len(ifms))
    for k, ifm in enumerate(ifms):
        y = solve(mesh, sweep_states(mesh, ifm, delta), [wavelength_nm], params, inputs=[ifm.src])
        p = np.abs(y[:, 0, list(ifm.dets), 0]) ** 2
        pos[k], amp[k] = fringe(normalised(p[:, 0], p[:, 1]))
    return pos, amp


def model_jacobian(params: TBUParams, ifms: list[Interferometer], delta: np.ndarray,
                   wavelength_nm: float, mesh: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every fringe's position on the model and its derivative with respect to every TBU's
    common phase (rad/rad; exact, from :func:`photonics.circuit_gradient.power_jacobian`: a
    common phase is both heaters' phase at the reference wavelength).
    """
    scale = wavelength_nm / params.center_wavelength_nm  # heater phases scale as lambda0 / lambda
    pos, jac = np.empty(len(ifms)), np.empty((len(ifms), mesh.n_tbus))
    for k, ifm in enumerate(ifms):
        p, dp = power_jacobian(mesh, sweep_states(mesh, ifm, delta), [wavelength_nm], params,
                               inputs=[ifm.src], outputs=list(ifm.dets))
        p, dp = p[:, 0, :, 0], dp[:, 0, :, :, :, 0].sum(axis=2) * scale  # (K, 2), (K, n, 2)
        total = np.maximum(p.sum(axis=1), 1e-300)
        d = (p[:, 0] - p[:, 1]) / total
        dd = ((dp[..., 0] - dp[..., 1]) - d[:, None] * (dp[..., 0] + dp[..., 1])) / total[:, None]
        psi = np.exp(-1j * sweep_offsets(len(d)))
        z, dz = (d * psi).sum(), (dd * psi[:, None]).sum(axis=0)
        pos[k], jac[k] = np.angle(z), np.imag(dz / z)
    return pos, jac


def measure(bench: Bench, cmap: CalibrationMap, ifms: list[Interferometer], wavelength_nm: float,
            settle_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Every interferometer's fringe on the bench: position (rad) and amplitude."""
    pos, amp = np.empty(len(ifms)), np.empty(len(ifms))
    for k, ifm in enumerate(ifms):
        states = sweep_states(bench.mesh, ifm, cmap.delta)
        bench.select_input(ifm.src, wavelength_nm)
        d = np.empty(len(states.phi_top))
        for i in range(len(d)):
            bench.set_currents(currents_for_state(cmap, MeshState(states.phi_top[i], states.phi_bot[i]),
                                                  bench.max_current_ma))
            settle(bench, settle_s)
            mw = 10 ** (np.asarray(bench.read_powers_dbm(list(ifm.dets)), float) / 10)
            d[i] = normalised(mw[0], mw[1])
        pos[k], amp[k] = fringe(d)
    return pos, amp


@dataclass(frozen=True)
class CommonFit:
    """The stage's result.

    Attributes:
        common: (n_tbus,) common phases (rad, NaN for TBUs on no interferometer's arm).
        residual_rad: per interferometer, measured minus modelled fringe position after the fit.
        contrast: per interferometer, the measured fringe's amplitude (normalised, 0..1).
        unseen: TBUs on no interferometer's arm.
    """

    common: np.ndarray
    residual_rad: np.ndarray
    contrast: np.ndarray
    unseen: list[int]

    @property
    def rms_residual_rad(self) -> float:
        """RMS of the fringes' residuals (rad)."""
        return float(np.sqrt(np.mean(self.residual_rad ** 2))) if len(self.residual_rad) else 0.0


def fit_common(mesh: Any, cmap: CalibrationMap, ifms: list[Interferometer], measured: np.ndarray,
               wavelength_nm: float, n_span: int) -> tuple[np.ndarray, np.ndarray]:
    """Common phases explaining the measured fringe positions, and the residuals (rad).

    The first ``n_span`` interferometers tell every combination light can (the exact integer
    solve); all of them enter the Gauss-Newton refinement.
    """
    n = mesh.n_tbus
    signs = np.array([ifm.signs(n) for ifm in ifms]).reshape(len(ifms), n)
    zero = np.zeros(n)
    at_zero, _ = model_fringes(chip_model(mesh, cmap.delta, zero), ifms, cmap.delta, wavelength_nm, mesh)
    c = integer_phases.solve(signs[:n_span], wrap(measured[:n_span] - at_zero[:n_span]))
    for _ in range(GAUSS_NEWTON_STEPS):
        now, jac = model_jacobian(chip_model(mesh, cmap.delta, c), ifms, cmap.delta, wavelength_nm, mesh)
        step = np.linalg.lstsq(jac, wrap(measured - now), rcond=GAUSS_NEWTON_RCOND)[0]
        c = np.mod(c + step, TWO_PI)
    now, _ = model_fringes(chip_model(mesh, cmap.delta, c), ifms, cmap.delta, wavelength_nm, mesh)
    return c, wrap(measured - now)


def calibrate_common(bench: Bench, cmap: CalibrationMap, wavelength_nm: float = 1550.0,
                     settle_s: float = 0.012) -> CommonFit:
    """Design, measure and fit the common phases of ``bench``'s chip through ``cmap``."""
    failed = set(cmap.failed)  # an unverified TBU's fit may be wrong: no fringe is read through it
    span, checks, unseen = plan(bench.mesh, failed)
    ifms = span + checks
    pos, amp = measure(bench, cmap, ifms, wavelength_nm, settle_s)
    common, resid = fit_common(bench.mesh, cmap, ifms, pos, wavelength_nm, len(span))
    common = common.copy()
    common[unseen] = np.nan
    common[sorted(failed)] = np.nan
    return CommonFit(common, resid, amp, unseen)


def plan(mesh: Any, failed: set[int]) -> tuple[list[Interferometer], list[Interferometer], list[int]]:
    """The spanning interferometers, the checks, and the TBUs no interferometer sees."""
    span, unseen, rest = design(mesh, failed)
    n_checks = max(MIN_CHECKS, round(CHECK_FRACTION * len(span)))
    step = max(1, len(rest) // max(n_checks, 1))
    return span, rest[::step][:n_checks], unseen


def with_common(cmap: CalibrationMap, found: CommonFit, operations: int) -> CalibrationMap:
    """``cmap`` with the common phases and the stage's figures in its quality."""
    quality = dict(cmap.quality)
    quality["common_phase"] = {
        "interferometers": len(found.residual_rad), "operations": int(operations),
        "rms_residual_rad": round(found.rms_residual_rad, 6),
        "max_residual_rad": round(float(np.abs(found.residual_rad).max(initial=0.0)), 6),
        "min_contrast": round(float(found.contrast.min()), 4) if len(found.contrast) else 0.0,
        "unseen": [cmap.tbu_names[t] if cmap.tbu_names else t for t in found.unseen],
    }
    return replace(cmap, common=found.common, quality=quality)


def doubts(found: CommonFit, names: tuple[str, ...] | list[str]) -> list[str]:
    """One warning line per reason not to trust the common phases (empty when none)."""
    out = []
    if found.rms_residual_rad > CHECK_TOL_RAD:
        out.append(f"common phases: the fringes disagree with the fit by {found.rms_residual_rad:.3f} rad "
                   f"RMS (> {CHECK_TOL_RAD}); a unitary or filter through this map may miss its fidelity")
    if len(found.contrast) and found.contrast.min() < MIN_CONTRAST:
        out.append(f"common phases: an interferometer's fringe has contrast {found.contrast.min():.2f} "
                   f"(< {MIN_CONTRAST}): a TBU on its arms passes little light")
    if found.unseen:
        out.append("common phases: no interferometer reaches "
                   + ", ".join(names[t] for t in found.unseen[:5]))
    return out


def run_stage(bench: Bench, cmap: CalibrationMap, max_operations: int | None, spent: int,
              wavelength_nm: float = 1550.0, settle_s: float = 0.012) -> tuple[CalibrationMap, list[str]]:
    """The stage after a finished calibration that spent ``spent`` of ``max_operations``
    (None: no limit): the map with common phases, and its warnings. The stage gives way when
    the budget left cannot pay for it (the map stays power-only, and a warning says so); its
    readings count against the same budget (:class:`calibration.budget.BudgetedBench`
    guarantees it).
    """
    from calibration.budget import BudgetedBench

    failed = set(cmap.failed)
    span, checks, _ = plan(bench.mesh, failed)
    need = SWEEP_POINTS * (len(span) + len(checks))
    left = None if max_operations is None else max(max_operations - spent, 0)
    if left is not None and need > left:
        warning = (f"common phases not measured: the stage needs {need} operations and the budget of "
                   f"{max_operations} leaves {left}; the map is power-only (raise Options.max_operations)")
        warned = [*cmap.quality.get("warnings", []), warning]
        out = replace(cmap, quality={**cmap.quality, "warnings": warned})
        return out, [warning]
    start = bench.operations
    limit = None if left is None else start + left
    budgeted = BudgetedBench(bench, limit, max_operations,
                             lambda: f"in the common-phase stage ({bench.operations - start} readings in)")
    found = calibrate_common(budgeted, cmap, wavelength_nm, settle_s)  # type: ignore[arg-type]
    names = cmap.tbu_names or tuple(str(t) for t in range(cmap.n_tbus))
    warnings = doubts(found, names)
    out = with_common(cmap, found, bench.operations - start)
    if warnings:
        out.quality["warnings"] = [*out.quality.get("warnings", []), *warnings]
    return out, warnings
