"""Heater-phase model: drive current (mA) to optical phase (rad), with thermal crosstalk.

Per heater (the iPronics/SmartLight calibration model)::

    phi(I) = alpha + rho2 * I**2 + rho3 * I**3

``alpha`` is the arm's passive phase (rad), ``rho2`` (rad/mA^2) and ``rho3`` (rad/mA^3)
the heater's efficiency. Physically the heated phase follows dissipated power, and a
resistor whose resistance rises with temperature, ``R(I) = R0 (1 + gamma I)``, dissipates
``P = R0 I^2 + R0 gamma I^3``: so ``rho2 = eta R0`` and ``rho3 = eta R0 gamma`` with
``eta`` (rad/mW) the thermo-optic efficiency. The current form is what we fit, because
the driver sets current and it needs no separate voltage reading; the power form is what
crosstalk uses, because neighbouring arms feel the heat, not the current.

Crosstalk: ``phi_i += sum_j K[i, j] * P_j`` with ``K`` (rad/mW) sparse, nearest heaters
only, and ``P_j = self_phase_j / eta_j`` the heat of heater j (mW). Only differential
entries ``K[top_t, j] - K[bot_t, j]`` change a TBU's split; see docs/calibration.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def self_phase(current_ma: np.ndarray, rho2: np.ndarray, rho3: np.ndarray) -> np.ndarray:
    """Phase a heater adds to its own arm (rad): ``rho2 I^2 + rho3 I^3``.

    Example:
        >>> float(self_phase(np.array(2.0), 0.6, 0.01))
        2.48
    """
    i = np.asarray(current_ma, dtype=float)
    return rho2 * i**2 + rho3 * i**3


def max_self_phase(max_current_ma: float, rho2: np.ndarray, rho3: np.ndarray) -> np.ndarray:
    """Largest phase (rad) a heater reaches at currents 0 .. ``max_current_ma``.

    With ``rho3 < 0`` (a negative resistance tempco) the curve peaks at ``-2 rho2 / (3 rho3)``
    and falls after it, so the phase at the limit is not the reach.

    Example:
        >>> float(max_self_phase(10.0, 0.6, -0.03))  # peaks at 13.3 mA, beyond the limit
        30.0
        >>> round(float(max_self_phase(24.0, 0.6, -0.03)), 2)  # peak at 13.3 mA
        35.56
    """
    rho2 = np.asarray(rho2, float)
    rho3 = np.asarray(rho3, float)
    peak = np.where(rho3 < 0, -2 * rho2 / (3 * np.where(rho3 < 0, rho3, -1.0)), np.inf)
    return self_phase(np.minimum(float(max_current_ma), peak), rho2, rho3)


def heater_power_mw(current_ma: np.ndarray, r0_kohm: np.ndarray, gamma_per_ma: np.ndarray) -> np.ndarray:
    """Electrical power (mW) of a heater with ``R(I) = R0 (1 + gamma I)``; mA^2 x kOhm = mW."""
    i = np.asarray(current_ma, dtype=float)
    return r0_kohm * (1 + gamma_per_ma * i) * i**2


def heater_voltage_v(current_ma: np.ndarray, r0_kohm: np.ndarray, gamma_per_ma: np.ndarray) -> np.ndarray:
    """Voltage (V) across a heater at ``current_ma``: mA x kOhm = V."""
    i = np.asarray(current_ma, dtype=float)
    return r0_kohm * (1 + gamma_per_ma * i) * i


@dataclass(frozen=True, eq=False)
class HeaterModel:
    """Per-heater model parameters, arrays of shape (n_heaters,), plus crosstalk K.

    Attributes:
        alpha: passive phase of each arm (rad).
        rho2: rad/mA^2. rho3: rad/mA^3.
        eta: thermo-optic efficiency (rad/mW); converts self-phase to heat for crosstalk.
        crosstalk: sparse (n_heaters, n_heaters) K in rad/mW, zero diagonal.
    """

    alpha: np.ndarray
    rho2: np.ndarray
    rho3: np.ndarray
    eta: np.ndarray
    crosstalk: sp.csr_matrix
    kappa_per_mw: np.ndarray | None = None

    @property
    def n_heaters(self) -> int:
        """Number of heaters."""
        return len(self.rho2)

    def heat_mw(self, current_ma: np.ndarray) -> np.ndarray:
        """Heat (mW) each heater dissipates at ``current_ma`` (the cubic law's power)."""
        return self_phase(current_ma, self.rho2, self.rho3) / self.eta

    def own_phase(self, current_ma: np.ndarray) -> np.ndarray:
        """Phase each heater adds to its own arm (rad); ``current_ma`` (n_heaters,) or (n_heaters, n).

        With ``kappa_per_mw`` (a thermo-optic coefficient rising with temperature) the phase
        is ``eta P (1 + kappa P)``, ``P`` the heat: not a cubic in current.
        """
        i = np.asarray(current_ma, float)
        col = (slice(None),) + (None,) * (i.ndim - 1)
        s = self_phase(i, self.rho2[col], self.rho3[col])
        if self.kappa_per_mw is None:
            return s
        return s * (1 + self.kappa_per_mw[col] * s / self.eta[col])

    def phases(self, current_ma: np.ndarray, with_alpha: bool = True) -> np.ndarray:
        """Total arm phases (rad) for heater currents (mA) (n_heaters,), crosstalk included.

        The same arithmetic as ``own_phase(I) + crosstalk @ heat_mw(I)`` with the cubic
        evaluated once (a simulated chip computes this at every current setting).
        """
        s = self_phase(np.asarray(current_ma, dtype=float), self.rho2, self.rho3)
        own = s if self.kappa_per_mw is None else s * (1 + self.kappa_per_mw * s / self.eta)
        total = own + self.crosstalk @ (s / self.eta)
        return total + self.alpha if with_alpha else total


def heater_positions(tbu_xy: np.ndarray, arm_separation: float = 0.1) -> np.ndarray:
    """(n_heaters, 2) heater centres in TBU lengths: TBU midpoint +- half the arm separation.

    Channel ``2i`` (top arm) sits on the left of the TBU's a->b direction, ``2i+1`` right.
    """
    a, b = tbu_xy[:, 0], tbu_xy[:, 1]
    d = (b - a) / np.linalg.norm(b - a, axis=1, keepdims=True)
    left = np.stack([-d[:, 1], d[:, 0]], axis=1)
    mid = (a + b) / 2
    pos = np.empty((2 * len(tbu_xy), 2))
    pos[0::2] = mid + 0.5 * arm_separation * left
    pos[1::2] = mid - 0.5 * arm_separation * left
    return pos


def crosstalk_matrix(
    positions: np.ndarray,
    eta: np.ndarray,
    nearest_fraction: float = 0.01,
    cutoff: float = 1.05,
    *,
    partner_fraction: float | None = None,
    decay_length: float | None = None,
    spread: float = 0.0,
    rng: np.random.Generator | None = None,
) -> sp.csr_matrix:
    """Sparse thermal crosstalk K (rad/mW) decaying with distance.

    Heaters come in pairs (channels ``2t``, ``2t+1`` are the two arms of TBU t, as
    :func:`heater_positions` lays them out). Two laws:

    * ``partner_fraction=None`` (the original law): the nearest heater (``d0`` apart, the
      other arm of the same TBU) picks up ``nearest_fraction`` of a heater's phase,
      farther heaters that times ``(d0/d)^2``.
    * ``partner_fraction`` given (the simulated chip's law, docs/calibration.md): the other
      arm of the same TBU picks up ``partner_fraction``; heaters of *other* TBUs pick up
      ``nearest_fraction`` at the smallest inter-TBU distance ``d0`` and decay as
      ``exp(-(d - d0) / decay_length)`` (or ``(d0/d)^2`` without ``decay_length``).

    Beyond ``cutoff`` TBU lengths nothing. ``spread`` (with ``rng``) multiplies each
    heater pair's fraction by ``1 + spread * N(0, 1)`` (clipped at 0), the same both ways;
    with ``partner_fraction`` given only pairs on different TBUs vary.
    """
    from scipy.spatial import cKDTree

    tree = cKDTree(positions)
    pairs = tree.query_pairs(cutoff, output_type="ndarray")
    if len(pairs) == 0:
        return sp.csr_matrix((len(positions), len(positions)))
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]  # deterministic order for the spread
    d = np.linalg.norm(positions[pairs[:, 0]] - positions[pairs[:, 1]], axis=1)
    same = pairs[:, 0] // 2 == pairs[:, 1] // 2
    varies = np.ones(len(d), bool) if partner_fraction is None else ~same
    if partner_fraction is None:
        d0 = d.min()
        frac = nearest_fraction * (d0 / d) ** 2
    else:
        frac = np.full(len(d), float(partner_fraction))
        if (~same).any():
            d_other = d[~same]
            d0 = d_other.min()
            if decay_length:
                frac[~same] = nearest_fraction * np.exp(-(d_other - d0) / decay_length)
            else:
                frac[~same] = nearest_fraction * (d0 / d_other) ** 2
    if spread and rng is not None:
        frac[varies] *= np.maximum(1 + spread * rng.standard_normal(int(varies.sum())), 0.0)
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    j = np.concatenate([pairs[:, 1], pairs[:, 0]])
    # phase on i per mW on j: a fraction of what j's own heat does to j.
    vals = np.concatenate([frac, frac]) * eta[j]
    return sp.csr_matrix((vals, (i, j)), shape=(len(positions), len(positions)))


def neighbour_heaters(positions: np.ndarray, cutoff: float = 1.05) -> list[list[int]]:
    """Per TBU t, the heaters of *other* TBUs within ``cutoff`` of either of t's arms (sorted).

    These are the aggressors whose heat has a K entry on t's arms, and so on its
    differential phase.
    """
    from scipy.spatial import cKDTree

    tree = cKDTree(positions)
    n_t = len(positions) // 2
    out: list[list[int]] = []
    for t in range(n_t):
        near = set(tree.query_ball_point(positions[2 * t], cutoff))
        near |= set(tree.query_ball_point(positions[2 * t + 1], cutoff))
        out.append(sorted(j for j in near if j // 2 != t))
    return out
