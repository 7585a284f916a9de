"""Heater maps: from a :class:`Configuration` to heater currents.

:class:`HeaterMap` is the contract the mesh controller programs through. :class:`IdealMap`
assumes the nominal heater (R0 = 250 Ohm, gamma = 0.02 /mA, pi per 1.3 mW), no passive
phase and no crosstalk: what a controller can do before the chip is calibrated. A fitted
map (``calibration.map``) implements the same method with the chip's own numbers.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from photonics.configuration import Configuration
from photonics.errors import LumionError
from photonics.physics import PhysicsDefaults


class UnreachableError(LumionError):
    """A target phase needs more current than the driver may give."""


@runtime_checkable
class HeaterMap(Protocol):
    """Anything that turns a configuration into heater currents (mA)."""

    chip_id: str | None

    def currents_for(self, configuration: Configuration, max_current_ma: float) -> np.ndarray:
        """Currents (n_heaters,) in mA realising ``configuration``, each <= ``max_current_ma``."""
        ...


# Newton on rho2 I^2 + rho3 I^3 = phase from the quadratic guess: it stops once every step
# is below NEWTON_TOL_MA (mA), or after NEWTON_MAX_STEPS (it converges in ~5).
NEWTON_TOL_MA = 1e-13
NEWTON_MAX_STEPS = 30


def invert_cubic(phase: np.ndarray, rho2: np.ndarray, rho3: np.ndarray) -> np.ndarray:
    """Smallest I >= 0 with ``rho2 I^2 + rho3 I^3 = phase`` (vectorised Newton; rad -> mA).

    One phase and one heater (the procedure asks ~3,000 times per calibration) run the same
    Newton steps on Python floats, at a tenth of numpy's per-call cost on 0-d arrays (within
    2e-15 mA of the 0-d array result: numpy's ``power`` and the C library's ``pow`` can differ
    in the last bit).

    Example:
        >>> round(float(invert_cubic(np.array(np.pi), 0.6, 0.012)), 4)
        2.2387
    """
    if np.ndim(phase) == 0 and np.ndim(rho2) == 0 and np.ndim(rho3) == 0:
        return np.array(_invert_one(float(phase), float(rho2), float(rho3)))
    phase = np.asarray(phase, dtype=float)
    if (phase < 0).any():
        raise UnreachableError("heaters only add phase: target phases must be >= 0 rad")
    rho2 = np.broadcast_to(np.asarray(rho2, float), phase.shape)
    rho3 = np.broadcast_to(np.asarray(rho3, float), phase.shape)
    i = np.sqrt(phase / rho2)  # quadratic guess, an upper bound when rho3 > 0
    for _ in range(NEWTON_MAX_STEPS):
        f, df = _cubic(i, phase, rho2, rho3)
        step = np.divide(f, df, out=np.zeros_like(f), where=df > 0)
        i = np.maximum(i - step, 0.0)
        if np.all(np.abs(step) < NEWTON_TOL_MA):
            break
    return i


def _cubic(i, phase, rho2, rho3):  # noqa: ANN001 - floats or arrays alike
    """``rho2 i^2 + rho3 i^3 - phase`` and its derivative in ``i`` (floats or arrays; ``i * i``
    is what numpy's ``i**2`` computes, ``i**3`` is ``pow`` on both).
    """
    return rho2 * (i * i) + rho3 * i**3 - phase, 2 * rho2 * i + 3 * rho3 * (i * i)


def _invert_one(phase: float, rho2: float, rho3: float) -> float:
    """:func:`invert_cubic` of one phase and heater: the same steps on Python floats (the
    guess through numpy, so a zero or negative ``rho2`` gives numpy's inf or NaN).
    """
    if phase < 0:
        raise UnreachableError("heaters only add phase: target phases must be >= 0 rad")
    i = float(np.sqrt(np.float64(phase) / rho2))
    for _ in range(NEWTON_MAX_STEPS):
        f, df = _cubic(i, phase, rho2, rho3)
        step = f / df if df > 0 else 0.0
        i = max(i - step, 0.0)
        if abs(step) < NEWTON_TOL_MA:
            break
    return i


class IdealMap:
    """The nominal heater for every channel; ignores passive phase and crosstalk."""

    chip_id: str | None = None

    def __init__(self, n_heaters: int, defaults: PhysicsDefaults | None = None,
                 r0_kohm: float = 0.25, gamma_per_ma: float = 0.02) -> None:
        d = defaults or PhysicsDefaults()
        eta = np.pi / d.heater_power_pi_mw
        self.n_heaters = n_heaters
        self.rho2 = np.full(n_heaters, eta * r0_kohm)
        self.rho3 = np.full(n_heaters, eta * r0_kohm * gamma_per_ma)

    def currents_for(self, configuration: Configuration, max_current_ma: float) -> np.ndarray:
        """Currents for the configuration's heater phases on offset-free arms."""
        state = configuration.heater_state()
        phases = np.empty(self.n_heaters)
        phases[0::2], phases[1::2] = state.phi_top, state.phi_bot
        currents = invert_cubic(phases, self.rho2, self.rho3)
        if (currents > max_current_ma).any():
            ch = int(np.argmax(currents))
            raise UnreachableError(
                f"channel {ch} needs {currents[ch]:.2f} mA, over the {max_current_ma} mA limit"
            )
        return currents
