"""An in-process simulated bench: the :class:`calibration.bench.Bench` protocol over a Chip.

No wire protocol, no threads: the fastest way to exercise calibration and routing against
hidden truth. ``instruments`` provides the same protocol over the real drivers.
Power meter noise follows DESIGN.md: a -70 dBm floor plus 0.5 % of the reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from instruments.sim.chip import Chip
from photonics.errors import LumionError


class BenchLimitError(LumionError):
    """A requested current is over the bench's per-channel limit."""


class DirectBench:
    """Laser + power meter + heater driver wrapped around a simulated :class:`Chip`."""

    def __init__(
        self,
        chip: Chip,
        *,
        laser_power_dbm: float = 0.0,
        noise_floor_dbm: float = -70.0,
        noise_fraction: float = 0.005,
        max_current_ma: float = 24.0,
        seed: int = 12345,
    ) -> None:
        self.chip = chip
        self.mesh = chip.mesh
        self.chip_id = chip.chip_id
        self.max_current_ma = max_current_ma
        self.laser_power_dbm = laser_power_dbm
        self.noise_floor_mw = 10 ** (noise_floor_dbm / 10)
        self.noise_fraction = noise_fraction
        self.operations = 0
        self._rng = np.random.default_rng(seed)
        self._input = 0
        self._wavelength_nm = 1550.0

    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set all heater currents (mA); refuses values over the limit before applying any."""
        c = np.asarray(currents_ma, dtype=float)
        if (c > self.max_current_ma).any() or (c < 0).any():
            bad = int(np.argmax((c > self.max_current_ma) | (c < 0)))
            raise BenchLimitError(
                f"channel {bad}: {c[bad]:.3f} mA is outside 0..{self.max_current_ma} mA"
            )
        self.chip.set_currents(c)

    def currents(self) -> np.ndarray:
        """The heater currents now applied (mA)."""
        return self.chip.currents_ma.copy()

    def select_input(self, port: int, wavelength_nm: float = 1550.0) -> None:
        """Send the laser into mesh port ``port``."""
        self._input = self.mesh.port_index(port)
        self._wavelength_nm = float(wavelength_nm)

    def read_powers_dbm(self, ports: Sequence[int]) -> np.ndarray:
        """Noisy power meter readings (dBm) at ``ports``."""
        self.operations += 1
        p_in = 10 ** (self.laser_power_dbm / 10)
        mw = self.chip.output_power_mw(self._input, self._wavelength_nm, p_in)[list(ports)]
        noisy = mw * (1 + self.noise_fraction * self._rng.standard_normal(mw.shape))
        noisy = np.abs(noisy + self.noise_floor_mw * self._rng.standard_normal(mw.shape))
        return 10 * np.log10(np.maximum(noisy, 1e-12))
