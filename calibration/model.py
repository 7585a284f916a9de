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
only, and ``P_j = self_phase_j / eta_j`` the heat of heater j (mW).
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

    @property
    def n_heaters(self) -> int:
        """Number of heaters."""
        return len(self.rho2)

    def heat_mw(self, current_ma: np.ndarray) -> np.ndarray:
        """Heat (mW) each heater dissipates at ``current_ma``."""
        return self_phase(current_ma, self.rho2, self.rho3) / self.eta

    def phases(self, current_ma: np.ndarray, with_alpha: bool = True) -> np.ndarray:
        """Total arm phases (rad) for heater currents (mA), crosstalk included."""
        own = self_phase(current_ma, self.rho2, self.rho3)
        total = own + self.crosstalk @ (own / self.eta)
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
) -> sp.csr_matrix:
    """Sparse thermal crosstalk K (rad/mW) decaying with distance.

    The nearest heater (the other arm of the same TBU, ``d0`` apart) picks up
    ``nearest_fraction`` of a heater's phase; farther heaters get that times ``(d0/d)^2``;
    beyond ``cutoff`` TBU lengths nothing (DESIGN.md: 1 % nearest, decaying with distance).
    """
    from scipy.spatial import cKDTree

    tree = cKDTree(positions)
    pairs = tree.query_pairs(cutoff, output_type="ndarray")
    if len(pairs) == 0:
        return sp.csr_matrix((len(positions), len(positions)))
    d = np.linalg.norm(positions[pairs[:, 0]] - positions[pairs[:, 1]], axis=1)
    d0 = d.min()
    frac = nearest_fraction * (d0 / d) ** 2
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    j = np.concatenate([pairs[:, 1], pairs[:, 0]])
    # phase on i per mW on j: a fraction of what j's own heat does to j.
    vals = np.concatenate([frac, frac]) * eta[j]
    return sp.csr_matrix((vals, (i, j)), shape=(len(positions), len(positions)))
