"""Fringe fits: heater current sweeps of one TBU -> passive differential phase and heater curves.

A TBU seen from one input and one output is a single Mach-Zehnder, and for *any* coupler
ratios and arm losses its power transmission is exactly ``A + B cos(theta)``, ``theta`` the
total top-minus-bottom arm phase (see ``photonics.physics``: the cross path has its
maximum at ``theta = 0``, the bar path its minimum). We write it as::

    P = b + a (1 + s cos(theta)) / 2        s = +1 cross output, -1 bar output
    theta = delta + sigma * (rho2 I^2 + rho3 I^3)   sigma = +1 top heater, -1 bottom heater

``a`` (mW) carries the insertion loss of the whole light path and ``b`` (mW) the finite
extinction, so both are fitted. ``delta = alpha_top - alpha_bot`` (rad) is the only
passive phase power readings can show. One TBU is fitted jointly: its top sweep and its
bottom sweep share ``delta`` and the per-output ``a`` and ``b``.

Fits are weighted nonlinear least squares (``scipy.optimize.least_squares``) on power in
linear units, with a robust loss, seeded by a periodogram over the fringe rate in ``I^2``
(the sweep is uniform in ``I^2`` so the fringe is nearly periodic there) and restarted
from the neighbouring rates (half and double) so half-period aliasing cannot stick.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import OptimizeResult, least_squares

from calibration.lsq import LOSSES, LsqResult, least_squares_trf_unbounded
from calibration.options import TRIAL_EVALUATIONS

# The nominal heater (R0 = 250 Ohm, eta = pi / 1.3 mW) has rho2 = 0.60 rad/mA^2: the rate
# search spans a factor 5 either way, far wider than any fabrication spread.
RHO2_SEARCH = (0.12, 3.0)
# rho3 / rho2 is the resistance tempco (about 0.02 /mA); the bound keeps the curve monotone
# and physical over the sweep.
RHO3_RATIO_BOUNDS = (-0.1, 0.2)
# A start whose fit already explains the readings to within this RMS (in units of the
# meter's sigma) cannot be beaten by an aliased start, so the remaining starts are skipped.
GOOD_ENOUGH_RMS = 2.0
# Function evaluations a fit may take from one start.
MAX_NFEV = 200
# Periodogram minima tried per arm as starts: the deepest and the next two, since noise or
# stray light can rank the true fringe rate second.
SEED_RANKS = 3
# The deepest rate is also tried at its half and double: a fit started at an alias of the
# true rate settles in a local minimum the least-squares step cannot leave.
ALIAS_FACTORS = (1.0, 0.5, 2.0)
# The robust loss's scale (in meter sigmas): residuals beyond ~3 sigma count as outliers.
ROBUST_SCALE = 3.0
# A start's fringe amplitude is at least this (mW): at zero the phases would have no effect
# on the model and their Jacobian columns would vanish.
MIN_START_AMPLITUDE_MW = 1e-12
# Starts are moved this far inside the bounds: the trust-region solver needs a strictly
# feasible start.
BOUND_MARGIN = 1e-15
# scipy.optimize.least_squares' default ftol, xtol and gtol, which the fringe fits keep.
FTOL = 1e-8


@dataclass(frozen=True)
class Sweep:
    """One heater swept with everything else fixed.

    Attributes:
        arm: 0 for the top heater, 1 for the bottom heater.
        current_ma: (n,) currents applied (mA).
        power_mw: (n, n_outputs) powers read at the observed outputs (mW, linear).
    """

    arm: int
    current_ma: np.ndarray
    power_mw: np.ndarray


@dataclass(frozen=True)
class NoiseModel:
    """Power-meter noise used to weight the fit: sigma = rel * P + floor_mw + model_floor * max(P).

    ``model_floor`` (a fraction of the fringe's peak) keeps fringe minima from dominating:
    there the reading is set by stray light the single-MZI model does not describe.
    """

    rel: float = 0.005
    floor_mw: float = 1e-7
    model_floor: float = 2e-3

    def sigma(self, power_mw: np.ndarray) -> np.ndarray:
        """Standard deviation (mW) assumed for each reading."""
        p = np.maximum(np.asarray(power_mw, float), 0.0)
        peak = p.max(axis=0, keepdims=True) if p.ndim > 1 else p.max()
        return self.rel * p + self.floor_mw + self.model_floor * peak


@dataclass(frozen=True)
class TBUFit:
    """Result of a joint fit of one TBU's sweeps.

    Attributes:
        delta: alpha_top - alpha_bot (rad, wrapped to [0, 2 pi)).
        rho2, rho3: (2,) per arm (top, bot), rad/mA^2 and rad/mA^3: the heater's effect on
            the TBU's differential phase (its own phase minus what leaks onto the other arm).
        amplitude_mw, floor_mw: (n_outputs,) fitted ``a`` and ``b``.
        signs: (n_outputs,) +1 cross, -1 bar.
        sigma_delta: 1-sigma uncertainty of delta (rad).
        sigma_rho2, sigma_rho3: (2,) 1-sigma uncertainties.
        sigma_phase_2pi: (2,) 1-sigma uncertainty of each arm's curve at its 2 pi current (rad).
        rms_residual: RMS of the normalised residuals (1 means "as noisy as the meter").
        rms_residual_rel: RMS residual relative to the fringe amplitude (dimensionless).
        residuals: normalised residuals, per sweep (for plots).
        n_points: readings used.
    """

    delta: float
    rho2: np.ndarray
    rho3: np.ndarray
    amplitude_mw: np.ndarray
    floor_mw: np.ndarray
    signs: np.ndarray
    sigma_delta: float
    sigma_rho2: np.ndarray
    sigma_rho3: np.ndarray
    sigma_phase_2pi: np.ndarray
    rms_residual: float
    rms_residual_rel: float
    n_points: int
    residuals: list[np.ndarray] = field(default_factory=list, repr=False)


def fringe_model(
    current_ma: np.ndarray, arm: int, delta: float, rho2: float, rho3: float,
    amplitude_mw: np.ndarray, floor_mw: np.ndarray, signs: np.ndarray,
) -> np.ndarray:
    """Predicted powers (n, n_outputs) in mW for one heater sweep (see module docstring)."""
    i = np.asarray(current_ma, float)
    sigma = 1.0 if arm == 0 else -1.0
    theta = delta + sigma * (rho2 * i**2 + rho3 * i**3)
    return floor_mw[None, :] + amplitude_mw[None, :] * (1 + signs[None, :] * np.cos(theta)[:, None]) / 2


def sweep_currents(i_max_ma: float, n: int) -> np.ndarray:
    """``n`` currents from 0 to ``i_max_ma`` (mA), uniform in I^2 so the fringe is near-periodic."""
    return i_max_ma * np.sqrt(np.linspace(0.0, 1.0, n))


def periodogram(
    x: np.ndarray, power_mw: np.ndarray, weights: np.ndarray, rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted sinusoid fit P ~ c0 + c1 cos(r x) + c2 sin(r x) for every trial rate r.

    Args:
        x: (n,) the swept variable (here I^2, mA^2).
        power_mw: (n, k) readings of k outputs.
        weights: (n, k) 1/sigma of each reading.
        rates: (m,) trial rates (rad per unit of x).

    Returns:
        (chi2 (m,), c1 (m, k), c2 (m, k)): residual sum of squares summed over outputs,
        and the cosine/sine coefficients for each rate and output.
    """
    n_rates, k = len(rates), power_mw.shape[1]
    chi2 = np.zeros(n_rates)
    c1 = np.zeros((n_rates, k))
    c2 = np.zeros((n_rates, k))
    cos, sin, products = _sinusoids(x, rates)
    for j in range(k):
        w2 = weights[:, j] ** 2
        y = power_mw[:, j]
        # Normal equations per rate (3 x 3, symmetric): [1, cos, sin] against itself and y,
        # weighted; every rate's system at once (products @ w2 is one BLAS pass over them).
        s_c, s_s, s_cc, s_cs, s_ss = products @ w2
        wy = w2 * y
        ata = (np.full(n_rates, w2.sum()), s_c, s_s, s_cc, s_cs, s_ss)
        coef = _solve_normal3(ata, (np.full(n_rates, wy.sum()), cos @ wy, sin @ wy))
        resid = (coef[0][:, None] + coef[1][:, None] * cos + coef[2][:, None] * sin - y[None, :]) \
            * weights[None, :, j]
        chi2 += (resid**2).sum(1)
        c1[:, j], c2[:, j] = coef[1], coef[2]
    return chi2, c1, c2


# Sinusoid grids kept by :func:`_sinusoids`: a calibration sweeps every TBU over the same one
# or two current grids (the bootstrap's and the refinement's points) at the same trial rates.
SINUSOIDS_KEPT = 8


def _sinusoids(x: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cos, sin, products)`` of :func:`periodogram` for the grid ``x`` and ``rates``: cos and
    sin of ``rates x`` (m, n) and the five products its normal equations need (5, m, n).

    They depend on the grid and the rates alone, which repeat from TBU to TBU (in a SmartLight
    calibration two pairs make 300 of 450 periodograms), so the last :data:`SINUSOIDS_KEPT`
    are kept (read-only), keyed by the arrays' bytes: the same values, computed the same way,
    hence the same fits.
    """
    x, rates = np.ascontiguousarray(x, float), np.ascontiguousarray(rates, float)
    return _sinusoids_of(x.tobytes(), rates.tobytes())


@functools.lru_cache(maxsize=SINUSOIDS_KEPT)
def _sinusoids_of(x_bytes: bytes, rates_bytes: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_sinusoids` of the float64 vectors held in ``x_bytes`` and ``rates_bytes``."""
    x, rates = np.frombuffer(x_bytes), np.frombuffer(rates_bytes)
    arg = rates[:, None] * x[None, :]
    cos, sin = np.cos(arg), np.sin(arg)  # (m, n)
    products = np.stack([cos, sin, cos * cos, cos * sin, sin * sin])  # (5, m, n)
    for a in (cos, sin, products):
        a.setflags(write=False)
    return cos, sin, products


# Added to the diagonal of each periodogram's normal equations (relative to its largest
# entry): keeps the system positive definite where a rate's cos and sin are nearly constant.
NORMAL_RIDGE = 1e-12


def _solve_normal3(ata: tuple[np.ndarray, ...], aty: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Solve every symmetric positive definite 3 x 3 system ``A c = b`` of a batch by Cholesky
    (backward stable for such systems, no pivoting needed), in closed form over the batch:
    ``ata`` = (a00, a01, a02, a11, a12, a22), ``aty`` = (b0, b1, b2), each (m,). A batched
    ``np.linalg.solve`` on (m, 3, 3) cost most of a fit's periodogram (one LAPACK call per rate).
    """
    a00, a01, a02, a11, a12, a22 = ata
    ridge = NORMAL_RIDGE * np.maximum(np.maximum(a00, a11), a22)
    l00 = np.sqrt(a00 + ridge)
    l10, l20 = a01 / l00, a02 / l00
    l11 = np.sqrt(np.maximum(a11 + ridge - l10 * l10, ridge))
    l21 = (a12 - l20 * l10) / l11
    l22 = np.sqrt(np.maximum(a22 + ridge - l20 * l20 - l21 * l21, ridge))
    b0, b1, b2 = aty
    z0 = b0 / l00  # L z = b
    z1 = (b1 - l10 * z0) / l11
    z2 = (b2 - l20 * z0 - l21 * z1) / l22
    c2 = z2 / l22  # L^T c = z
    c1 = (z1 - l21 * c2) / l11
    c0 = (z0 - l10 * c1 - l20 * c2) / l00
    return c0, c1, c2


@functools.lru_cache(maxsize=SINUSOIDS_KEPT)
def _trial_rates(n: int) -> np.ndarray:
    """``n`` trial heater rates spaced evenly in log over :data:`RHO2_SEARCH` (read-only: kept)."""
    rates = np.geomspace(*RHO2_SEARCH, n)
    rates.setflags(write=False)
    return rates


def _seed_rates(x: np.ndarray, p: np.ndarray, w: np.ndarray, n_best: int = SEED_RANKS) -> list[float]:
    """Best local minima of the periodogram over the plausible heater rates (rad/mA^2)."""
    span = max(float(x.max() - x.min()), 1e-9)
    # Resolution a tenth of a fringe over the whole sweep; the fit refines from there.
    n = int(np.clip(10 * RHO2_SEARCH[1] * span / (2 * np.pi) * 4, 200, 4000))
    rates = _trial_rates(n)
    chi2, _, _ = periodogram(x, p, w, rates)
    interior = (chi2[1:-1] <= chi2[:-2]) & (chi2[1:-1] <= chi2[2:])
    idx = np.flatnonzero(interior) + 1
    if idx.size == 0:
        idx = np.array([int(np.argmin(chi2))])
    best = idx[np.argsort(chi2[idx])][:n_best]
    return [float(rates[i]) for i in best]


def _delta_seed(x: np.ndarray, p: np.ndarray, w: np.ndarray, rate: float, arm: int,
                signs: np.ndarray) -> float:
    """The delta implied by the sinusoid of ``rate`` (see module docstring for the signs)."""
    _, c1, c2 = periodogram(x, p, w, np.array([rate]))
    sigma = 1.0 if arm == 0 else -1.0
    # s a/2 cos(delta + sigma r x) = s a/2 (cos delta cos rx - sigma sin delta sin rx)
    cos_d = (signs * c1[0]).sum()
    sin_d = (-sigma * signs * c2[0]).sum()
    return float(np.arctan2(sin_d, cos_d))


# A start: (delta seed (rad), rho2 seed (rad/mA^2) per swept arm).
# (delta, rho2 per arm) of a start; an earlier fit's start also carries its rho3 per arm.
Start = tuple[float, dict[int, float]] | tuple[float, dict[int, float], dict[int, float]]
# One start's fit: the lean TRF's result, or scipy's for the losses it does not write out
# (both carry x, cost, fun, jac and status).
FitResult = LsqResult | OptimizeResult


@dataclass(frozen=True, eq=False)
class _StackedSweeps:
    """Every sweep of one TBU as one least-squares problem over the parameter vector
    ``v = [delta, (rho2, rho3) per swept arm, amplitude_mw (k), floor_mw (k)]``.

    The readings are stacked in sweep order (as the residual vector runs) with the powers of
    I each point needs precomputed: the residuals and the Jacobian are then a handful of array
    operations per call, with the same arithmetic per element as :func:`fringe_model` (the
    fits call them ~40 times per start).
    """

    arms: list[int]
    signs: np.ndarray  # (k,) +1 cross, -1 bar
    i2: np.ndarray  # (n,) current squared of every reading (mA^2)
    i3: np.ndarray  # (n,) current cubed (mA^3)
    arm_sign: np.ndarray  # (n,) +1 where the top heater is swept, -1 the bottom one
    rho2_col: np.ndarray  # (n,) column of v holding the rho2 of the reading's sweep (rho3: next)
    power_mw: np.ndarray  # (n, k) readings
    weights: np.ndarray  # (n, k) 1/sigma of each reading (1/mW)

    @property
    def n_outputs(self) -> int:
        """Outputs every sweep is read at (k)."""
        return len(self.signs)

    @property
    def amp_col(self) -> int:
        """Column of v holding the first output's amplitude (the floors follow the amplitudes)."""
        return 1 + 2 * len(self.arms)

    @property
    def n_par(self) -> int:
        """Length of the parameter vector v."""
        return self.amp_col + 2 * self.n_outputs

    def unpack(self, v: np.ndarray) -> tuple[float, dict[int, tuple[float, float]], np.ndarray, np.ndarray]:
        """(delta (rad), {arm: (rho2, rho3)}, amplitude_mw (k), floor_mw (k)) of a parameter vector."""
        k, off = self.n_outputs, self.amp_col
        curves = {a: (float(v[1 + 2 * n]), float(v[2 + 2 * n])) for n, a in enumerate(self.arms)}
        return v[0], curves, v[off:off + k], v[off + k:off + 2 * k]

    def theta(self, v: np.ndarray) -> np.ndarray:
        """(n,) total arm phase difference (rad) at every reading."""
        return v[0] + self.arm_sign * (v[self.rho2_col] * self.i2 + v[self.rho2_col + 1] * self.i3)

    def residuals(self, v: np.ndarray) -> np.ndarray:
        """(n k,) weighted residuals (model - reading) / sigma, readings in row-major order."""
        k, off, signs = self.n_outputs, self.amp_col, self.signs
        amp, flo = v[off:off + k], v[off + k:off + 2 * k]
        model = flo[None, :] + amp[None, :] * (1 + signs[None, :] * np.cos(self.theta(v))[:, None]) / 2
        return ((model - self.power_mw) * self.weights).ravel()

    def jacobian(self, v: np.ndarray) -> np.ndarray:
        """(n k, n_par) derivative of :meth:`residuals` by every parameter."""
        k, off, signs, wts = self.n_outputs, self.amp_col, self.signs, self.weights
        n, outs = len(self.i2), np.arange(k)
        rows, col2, amp_cols = np.arange(n), self.rho2_col, off + outs
        amp = v[off:off + k]
        theta = self.theta(v)
        J = np.zeros((n, k, self.n_par))
        dtheta = -amp[None, :] * signs[None, :] * np.sin(theta)[:, None] / 2 * wts
        J[:, :, 0] = dtheta
        J[rows, :, col2] = dtheta * self.arm_sign[:, None] * self.i2[:, None]
        J[rows, :, col2 + 1] = dtheta * self.arm_sign[:, None] * self.i3[:, None]
        J[:, outs, amp_cols] = (1 + signs[None, :] * np.cos(theta)[:, None]) / 2 * wts
        J[:, outs, amp_cols + k] = wts
        return J.reshape(n * k, self.n_par)


def _stack_sweeps(sweeps: list[Sweep], weights: list[np.ndarray], signs: np.ndarray) -> _StackedSweeps:
    """The joint least-squares problem of ``sweeps`` (``weights``: 1/sigma per reading)."""
    cur = np.concatenate([s.current_ma for s in sweeps]).astype(float)
    sweep_of = np.concatenate([np.full(len(s.current_ma), n) for n, s in enumerate(sweeps)])
    return _StackedSweeps(
        arms=[s.arm for s in sweeps], signs=signs, i2=cur**2, i3=cur**3,
        arm_sign=np.where(np.array([s.arm for s in sweeps])[sweep_of] == 0, 1.0, -1.0),
        rho2_col=1 + 2 * sweep_of,
        power_mw=np.concatenate([s.power_mw for s in sweeps]), weights=np.concatenate(weights),
    )


def _periodogram_starts(sweeps: list[Sweep], weights: list[np.ndarray], signs: np.ndarray) -> list[Start]:
    """Starts from each sweep's best periodogram rates: the best with its half and double
    (the aliasing guard), then the runners-up; delta is seeded from the first sweep's best rate.
    """
    per_arm_rates = {s.arm: _seed_rates(s.current_ma**2, s.power_mw, w)
                     for s, w in zip(sweeps, weights, strict=True)}
    first = sweeps[0]
    delta0 = _delta_seed(first.current_ma**2, first.power_mw, weights[0], per_arm_rates[first.arm][0],
                         first.arm, signs)
    starts: list[Start] = []
    for rank in range(SEED_RANKS):
        for factor in ALIAS_FACTORS if rank == 0 else (1.0,):
            rates = {a: c[min(rank, len(c) - 1)] * factor for a, c in per_arm_rates.items()}
            starts.append((delta0, rates))
    return starts


def _parameter_bounds(arms: list[int], n_outputs: int, i_max_ma: float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds of the parameter vector (see :class:`_StackedSweeps`)."""
    lo, hi = [-np.inf], [np.inf]
    for _ in arms:
        # rho2: the rate search widened by 2 either way; rho3: RHO3_RATIO_BOUNDS of the largest
        # rate (the lower one also over the top current, so the curve stays monotone)
        lo += [RHO2_SEARCH[0] / 2, RHO3_RATIO_BOUNDS[0] * RHO2_SEARCH[1] / max(i_max_ma, 1e-9)]
        hi += [RHO2_SEARCH[1] * 2, RHO3_RATIO_BOUNDS[1] * RHO2_SEARCH[1]]
    lo += [0.0] * (2 * n_outputs)
    hi += [np.inf] * (2 * n_outputs)
    return np.array(lo), np.array(hi)


def _start_levels(sweeps: list[Sweep], n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """(highest, lowest but not negative) reading of every output over all sweeps (mW)."""
    top = np.array([max(float(np.max(s.power_mw[:, j])) for s in sweeps) for j in range(n_outputs)])
    bottom = np.array([max(min(float(np.min(s.power_mw[:, j])) for s in sweeps), 0.0)
                       for j in range(n_outputs)])
    return top, bottom


def _start_vector(start: Start, arms: list[int], levels: tuple[np.ndarray, np.ndarray],
                  bounds: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The parameter vector of a start: its rho3 (none but an earlier fit's), the fringe
    spanning the readings' range.
    """
    delta0, rates = start[0], start[1]
    cubic = start[2] if len(start) > 2 else {}
    top, bottom = levels
    v0 = [delta0]
    for a in arms:
        v0 += [rates[a], cubic.get(a, 0.0)]
    v0 += list(np.maximum(top - bottom, MIN_START_AMPLITUDE_MW)) + list(bottom)
    lo, hi = bounds
    return np.clip(np.array(v0), lo + BOUND_MARGIN, hi - BOUND_MARGIN)


def fit_tbu(
    sweeps: list[Sweep],
    signs: np.ndarray,
    noise: NoiseModel | None = None,
    loss: str = "soft_l1",
    prior: tuple[float, np.ndarray, np.ndarray] | None = None,
    trial_nfev: int = TRIAL_EVALUATIONS,
) -> TBUFit:
    """Joint fit of a TBU's heater sweeps (one or both arms), all seen at the same outputs.

    Args:
        sweeps: one :class:`Sweep` per arm (top and/or bottom), at most one per arm.
        signs: (n_outputs,) +1 for an output on the TBU's cross path, -1 for the bar path.
        noise: reading noise model used for weights.
        loss: robust loss of ``least_squares`` ("soft_l1", "huber", "linear", ...).
        prior: optional (delta, rho2 (2,), rho3 (2,)) of an earlier fit, added as the first
            start (its rho3 included: a refit then starts on the earlier curve).
        trial_nfev: a start after the first runs this many evaluations, then is dropped
            when its cost is still above the best start's final cost (default
            :data:`TRIAL_EVALUATIONS`; on smartlight the dropped aliased starts took ~4/5 of
            all fitting time). 0 runs every start to its end (the maps of releases before
            issue 28): a later start that ends at the *same* minimum a hair lower is then
            kept, so a fit can differ by ~1e-6; see docs/calibration.md ("What a calibration
            costs").

    Returns:
        The :class:`TBUFit`; arms that were not swept keep NaN coefficients.
    """
    noise = noise or NoiseModel()
    signs = np.asarray(signs, float)
    arms = [s.arm for s in sweeps]
    if len(set(arms)) != len(arms) or not sweeps:
        raise ValueError("give one sweep per arm (top = 0, bottom = 1)")
    weights = [1.0 / noise.sigma(s.power_mw) for s in sweeps]
    starts = _periodogram_starts(sweeps, weights, signs)
    if prior is not None and np.isfinite(prior[0]):  # an earlier fit is the likeliest start: first
        starts.insert(0, (float(prior[0]), {a: float(prior[1][a]) for a in arms},
                          {a: float(prior[2][a]) for a in arms if np.isfinite(prior[2][a])}))
    problem = _stack_sweeps(sweeps, weights, signs)
    best = _best_of_starts(problem, starts, sweeps, loss, trial_nfev)
    return _fit_result(problem, best, sweeps)


def _fit_from(problem: _StackedSweeps, v0: np.ndarray, bounds: tuple[np.ndarray, np.ndarray], loss: str,
              best_cost: float | None, trial_nfev: int) -> FitResult | None:
    """One start's fit, or None when its trial shows it cannot beat ``best_cost`` (see fit_tbu)."""
    lo, hi = bounds
    if loss not in LOSSES:  # a loss the lean copy of scipy's TRF does not write out: scipy's own
        return least_squares(problem.residuals, v0, jac=problem.jacobian, bounds=(lo, hi), loss=loss,
                             f_scale=ROBUST_SCALE, x_scale="jac", max_nfev=MAX_NFEV)
    if best_cost is not None and trial_nfev > 0:
        # A later start first runs trial_nfev evaluations; the cost only falls from there,
        # and one still above the best so far is dropped (see the docstring of fit_tbu).
        trial = fringe_least_squares(problem, v0, lo, hi, loss, trial_nfev)
        if trial.status != 0:
            return trial  # it converged within the trial: that is its whole fit
        if trial.cost >= best_cost:
            return None
        # it may win: run it whole (the same path, on to convergence)
    return fringe_least_squares(problem, v0, lo, hi, loss, MAX_NFEV)


def fringe_least_squares(problem: _StackedSweeps, v0: np.ndarray, lo: np.ndarray, hi: np.ndarray, loss: str,
                         max_nfev: int) -> LsqResult:
    """``scipy.optimize.least_squares(problem.residuals, v0, jac=problem.jacobian, bounds=(lo, hi),
    loss=loss, f_scale=ROBUST_SCALE, x_scale="jac", max_nfev=max_nfev)`` for ``loss`` in
    :data:`calibration.lsq.LOSSES`, compiled with the fringe model evaluated inside the loop
    (:func:`photonics.fringe_fit_kernels.fringe_trf`: scipy's algorithm and constants, its sums
    in another order; issue 28). ``v0`` lies inside the bounds (:func:`_start_vector`).
    """
    from photonics.compiled_calls import compiled_call
    from photonics.fringe_fit_kernels import fringe_trf

    x, cost, fun, jac, nfev, njev, status = compiled_call(  # a signal meanwhile is raised after it
        fringe_trf, np.asarray(v0, dtype=float), lo, hi, problem.i2, problem.i3, problem.arm_sign,
        problem.rho2_col, problem.signs, problem.power_mw, problem.weights, problem.amp_col,
        loss == "soft_l1", ROBUST_SCALE, max_nfev, FTOL, FTOL, FTOL)
    return LsqResult(x=x, cost=float(cost), fun=fun, jac=jac, nfev=int(nfev), njev=int(njev),
                     status=int(status))


def _best_of_starts(problem: _StackedSweeps, starts: list[Start], sweeps: list[Sweep], loss: str,
                    trial_nfev: int) -> FitResult:
    """The lowest-cost fit over ``starts``, stopping at the first that is good enough."""
    i_max = max(float(s.current_ma.max()) for s in sweeps)
    bounds = _parameter_bounds(problem.arms, problem.n_outputs, i_max)
    levels = _start_levels(sweeps, problem.n_outputs)
    best = None
    for start in starts:
        v0 = _start_vector(start, problem.arms, levels, bounds)
        res = _fit_from(problem, v0, bounds, loss, None if best is None else best.cost, trial_nfev)
        if res is None:
            continue
        if best is None or res.cost < best.cost:
            best = res
        if np.sqrt(np.mean(best.fun**2)) < GOOD_ENOUGH_RMS:
            break
    assert best is not None  # there is always a start, and the first one always runs
    return best


def _covariance(best: FitResult, n_par: int) -> np.ndarray:
    """(n_par, n_par) parameter covariance: the Gauss-Newton inverse scaled by the reduced chi^2."""
    dof = max(best.fun.size - n_par, 1)
    s2 = 2 * best.cost / dof
    return np.linalg.pinv(best.jac.T @ best.jac) * s2


def _arm_curves(arms: list[int], curves: dict[int, tuple[float, float]], cov: np.ndarray, sd: np.ndarray
                ) -> dict[str, np.ndarray]:
    """The :class:`TBUFit` fields that are (2,) per arm (top, bottom; NaN where not swept):
    rho2, rho3, their sigmas (``sd``: every parameter's), and the sigma of the arm's phase at
    its 2 pi current (rad), which delta's uncertainty is part of.
    """
    fields = ("rho2", "rho3", "sigma_rho2", "sigma_rho3", "sigma_phase_2pi")
    out = {name: np.full(2, np.nan) for name in fields}
    for n, a in enumerate(arms):
        out["rho2"][a], out["rho3"][a] = curves[a]
        out["sigma_rho2"][a], out["sigma_rho3"][a] = sd[1 + 2 * n], sd[2 + 2 * n]
        i2pi = float(_current_for(2 * np.pi, out["rho2"][a], out["rho3"][a]))
        g = np.zeros(len(cov))  # d(phase at i2pi) / d(parameters)
        g[0] = 1.0
        g[1 + 2 * n], g[2 + 2 * n] = i2pi**2, i2pi**3
        out["sigma_phase_2pi"][a] = float(np.sqrt(max(g @ cov @ g, 0.0)))
    return out


def _fit_result(problem: _StackedSweeps, best: FitResult, sweeps: list[Sweep]) -> TBUFit:
    """The :class:`TBUFit` of the winning fit: parameters, uncertainties and residuals."""
    delta, curves, amp, flo = problem.unpack(best.x)
    signs = problem.signs
    cov = _covariance(best, problem.n_par)
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    raw = problem.residuals(best.x)
    chunks = np.cumsum([s.power_mw.size for s in sweeps])[:-1]
    abs_res = np.concatenate([
        (fringe_model(s.current_ma, s.arm, delta, *curves[s.arm], amp, flo, signs) - s.power_mw).ravel()
        for s in sweeps
    ])
    peak = max(float(np.max(s.power_mw)) for s in sweeps)
    return TBUFit(
        delta=float(np.mod(delta, 2 * np.pi)),
        amplitude_mw=amp, floor_mw=flo, signs=signs, sigma_delta=float(sd[0]),
        **_arm_curves(problem.arms, curves, cov, sd),
        rms_residual=float(np.sqrt(np.mean(raw**2))),
        rms_residual_rel=float(np.sqrt(np.mean(abs_res**2)) / max(peak, 1e-30)),  # 1e-30: all-dark sweeps
        n_points=int(best.fun.size),
        residuals=[r.reshape(s.power_mw.shape) for r, s in zip(np.split(raw, chunks), sweeps, strict=True)],
    )


def _current_for(phase: float, rho2: float, rho3: float) -> float:
    """Current (mA) where rho2 I^2 + rho3 I^3 reaches ``phase`` (rad); Newton from the quadratic."""
    i = np.sqrt(phase / rho2)
    for _ in range(40):
        f = rho2 * i**2 + rho3 * i**3 - phase
        df = 2 * rho2 * i + 3 * rho3 * i**2
        if df <= 0:
            break
        step = f / df
        i = max(i - step, 0.0)
        if abs(step) < 1e-12:
            break
    return float(i)


# ---------------------------------------------------------------------------------------
# Crosstalk: a victim TBU held at quadrature, neighbouring heaters driven one at a time
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrosstalkFit:
    """Result of :func:`fit_crosstalk`.

    Attributes:
        fraction: (n_aggressors,) victim differential shift per rad of each aggressor's drive.
        sigma: (n_aggressors,) 1-sigma uncertainties of ``fraction``.
        offset: (2,) the victim's residual phase error at its two quadrature settings (rad);
            only their sum is well determined (their difference trades against ``level_mw``,
            which changes ``fraction`` only by the cosine of the offsets, < 0.1 %).
        level_mw: (n_outputs,) mean power ``c`` per output.
        rms_residual: RMS weighted residual (sigma units).
    """

    fraction: np.ndarray
    sigma: np.ndarray
    offset: np.ndarray
    level_mw: np.ndarray
    rms_residual: float


def crosstalk_model(level: np.ndarray, signs: np.ndarray, setting: np.ndarray, offset: np.ndarray,
                    fraction: np.ndarray, drive: np.ndarray) -> np.ndarray:
    """Powers (n_readings, n_outputs) of a victim held near quadrature.

    ``P = c (1 - s q sin(eps_q + sum_k F_k x_k))``: setting ``q`` = 0 puts the victim at
    theta = pi/2 (``q`` sign +1), setting 1 at 3 pi/2 (sign -1); ``c = b + a/2`` per output
    (with the extinction floor ``b`` << ``a`` the fringe amplitude is ``a/2 = c``), ``x`` the
    aggressors' drives (rad of their fitted effect), ``F`` the crosstalk fractions.
    """
    qsign = np.where(np.asarray(setting) == 0, 1.0, -1.0)
    phi = np.asarray(offset)[np.asarray(setting)] + np.asarray(drive) @ np.asarray(fraction)
    return level[None, :] * (1 - signs[None, :] * (qsign * np.sin(phi))[:, None])


def fit_crosstalk(power_mw: np.ndarray, signs: np.ndarray, setting: np.ndarray, drive: np.ndarray,
                  noise: NoiseModel | None = None, loss: str = "soft_l1") -> CrosstalkFit:
    """Weighted least-squares fit of crosstalk fractions from quadrature readings.

    Args:
        power_mw: (n_readings, n_outputs) linear powers.
        signs: (n_outputs,) +1 cross output, -1 bar output of the victim.
        setting: (n_readings,) 0 (victim at pi/2) or 1 (at 3 pi/2); both must occur.
        drive: (n_readings, n_aggressors) drive of each aggressor in each reading (rad).
        noise: reading noise model for the weights.
        loss: robust loss.
    """
    noise = noise or NoiseModel()
    p = np.asarray(power_mw, float)
    signs = np.asarray(signs, float)
    setting = np.asarray(setting, int)
    drive = np.asarray(drive, float)
    n_out, n_agg = p.shape[1], drive.shape[1]
    w = 1.0 / noise.sigma(p)

    def unpack(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return v[:n_out], v[n_out:n_out + 2], v[n_out + 2:]

    def residuals(v: np.ndarray) -> np.ndarray:
        c, eps, f = unpack(v)
        return ((crosstalk_model(c, signs, setting, eps, f, drive) - p) * w).ravel()

    def jacobian(v: np.ndarray) -> np.ndarray:
        c, eps, f = unpack(v)
        qsign = np.where(setting == 0, 1.0, -1.0)
        phi = eps[setting] + drive @ f
        n = len(setting)
        J = np.zeros((n, n_out, n_out + 2 + n_agg))
        for o in range(n_out):
            J[:, o, o] = (1 - signs[o] * qsign * np.sin(phi)) * w[:, o]
        dphi = -(c[None, :] * signs[None, :]) * (qsign * np.cos(phi))[:, None] * w  # (n, n_out)
        for q in (0, 1):
            J[:, :, n_out + q] = dphi * (setting == q)[:, None]
        J[:, :, n_out + 2:] = dphi[:, :, None] * drive[:, None, :]
        return J.reshape(n * n_out, -1)

    v0 = np.concatenate([np.maximum(np.mean(p, axis=0), 1e-12), np.zeros(2), np.zeros(n_agg)])
    if loss in LOSSES:  # the lean copy of scipy's unbounded TRF: the same numbers
        res = least_squares_trf_unbounded(residuals, jacobian, v0, loss=loss, f_scale=ROBUST_SCALE,
                                          max_nfev=MAX_NFEV)
    else:
        res = least_squares(residuals, v0, jac=jacobian, loss=loss, f_scale=ROBUST_SCALE, x_scale="jac",
                            max_nfev=MAX_NFEV)
    m, n_par = res.fun.size, v0.size
    s2 = 2 * res.cost / max(m - n_par, 1)
    cov = np.linalg.pinv(res.jac.T @ res.jac) * s2
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    c, eps, f = unpack(res.x)
    raw = residuals(res.x)
    return CrosstalkFit(fraction=f.copy(), sigma=sd[n_out + 2:].copy(), offset=eps.copy(),
                        level_mw=c.copy(), rms_residual=float(np.sqrt(np.mean(raw**2))))
