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


def invert_cubic(phase: np.ndarray, rho2: np.ndarray, rho3: np.ndarray) -> np.ndarray:
    """Smallest I >= 0 with ``rho2 I^2 + rho3 I^3 = phase`` (vectorised Newton; rad -> mA).

    Example:
        >>> round(float(invert_cubic(np.array(np.pi), 0.6, 0.012)), 4)
        2.2387
    """
    phase = np.asarray(phase, dtype=float)
    if (phase < 0).any():
        raise UnreachableError("heaters only add phase: target phases must be >= 0 rad")
    rho2 = np.broadcast_to(np.asarray(rho2, float), phase.shape)
    rho3 = np.broadcast_to(np.asarray(rho3, float), phase.shape)
    i = np.sqrt(phase / rho2)  # quadratic guess, an upper bound when rho3 > 0
    for _ in range(30):
        f = rho2 * i**2 + rho3 * i**3 - phase
        df = 2 * rho2 * i + 3 * rho3 * i**2
        step = np.divide(f, df, out=np.zeros_like(f), where=df > 0)
        i = np.maximum(i - step, 0.0)
        if np.all(np.abs(step) < 1e-13):
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
