"""An in-process simulated bench: the :class:`calibration.bench.Bench` protocol over a Chip.

No wire protocol, no threads: the fastest way to exercise calibration and routing against
hidden truth. ``instruments`` provides the same protocol over the real drivers.

The bench moves the chip's clock on: a reading takes the meter's averaging time
(``read_time_s``) and :meth:`DirectBench.wait` lets time pass (without sleeping), so a reading
taken too soon after a current change sees the heaters still settling. The chip's time is
simulated (its default clock stands still), so settling, drift and the laser wander advance
only with the bench's own operations and waits: a seed gives the same readings, and the
same calibration map, on any machine under any load.

Meter noise (:class:`MeterNoise`): on the ideal chip, the design's -70 dBm floor plus 0.5 % of
the reading (docs/instruments.md; the model the fits assume); on the realistic chip, a model the fits do *not*
assume: a lower floor, a smaller white relative term, a slow laser-power wander shared by
every reading, and occasional outliers (docs/calibration.md, "The simulated chip").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calibration.bench import HeaterReadback
from instruments.sim.chip import Chip
from instruments.sim.heater_device import FULL_SCALE_V, OFFSET_CLIP, READBACK_SEED_SALT, RECORDED, Readback
from photonics.errors import LumionError


class BenchLimitError(LumionError):
    """A requested current is over the bench's per-channel limit."""


@dataclass(frozen=True)
class MeterNoise:
    """Power-meter noise (linear power).

    Attributes:
        floor_dbm: additive white floor (1 sigma).
        rel: white relative noise (1 sigma, fraction of the reading).
        wander_rel: laser power wander (1 sigma over long times, fraction), an
            Ornstein-Uhlenbeck process common to every reading.
        wander_time_s: its correlation time.
        outlier_rate: probability that a reading is an outlier.
        outlier_rel: an outlier is off by this fraction times a standard normal.
    """

    floor_dbm: float = -70.0
    rel: float = 0.005
    wander_rel: float = 0.0
    wander_time_s: float = 30.0
    outlier_rate: float = 0.0
    outlier_rel: float = 0.0


IDEAL_NOISE = MeterNoise()
# A benchtop InGaAs head (Keysight 81634B-class): ~-80 dBm floor at 100 ms averaging and
# 0.2 % white noise, a laser power stability of +-0.3 % over minutes, and a glitch
# (a range change, a fiber tap) about once in 500 readings.
REALISTIC_NOISE = MeterNoise(floor_dbm=-75.0, rel=0.002, wander_rel=0.003, wander_time_s=30.0,
                             outlier_rate=0.002, outlier_rel=0.1)
READ_TIME_S = 0.5e-3  # meter averaging time per reading (s)


class DirectBench:
    """Laser + power meter + heater driver wrapped around a simulated :class:`Chip`."""

    def __init__(
        self,
        chip: Chip,
        *,
        laser_power_dbm: float = 0.0,
        noise: MeterNoise | None = None,
        max_current_ma: float = 24.0,
        read_time_s: float = READ_TIME_S,
        seed: int = 12345,
        readback: Readback = RECORDED,
    ) -> None:
        self.chip = chip
        self.mesh = chip.mesh
        self.chip_id = chip.chip_id
        self.max_current_ma = max_current_ma
        self.laser_power_dbm = laser_power_dbm
        self.noise = noise or (IDEAL_NOISE if getattr(chip, "model", "ideal") == "ideal" else REALISTIC_NOISE)
        self.read_time_s = read_time_s
        self.operations = 0
        self._rng = np.random.default_rng(seed)
        self._input = 0
        self._wavelength_nm = 1550.0
        self._wander = 0.0
        # The heater module's read-back, as the simulated Qontrol module reads (offset per
        # channel, scatter per reading), from its own generator: the meter's draws stay put.
        self.readback = readback
        self._readback_rng = np.random.default_rng([READBACK_SEED_SALT, int(chip.seed)])
        draw = self._readback_rng.standard_normal
        n_h = chip.mesh.n_heaters
        rb = readback
        self._offsets_ma = np.clip(rb.current_offset_mean_ma + rb.current_offset_sd_ma * draw(n_h),
                                   -OFFSET_CLIP["mA"], OFFSET_CLIP["mA"])
        self._offsets_v = np.clip(rb.voltage_offset_mean_v + rb.voltage_offset_sd_v * draw(n_h),
                                  -OFFSET_CLIP["V"], OFFSET_CLIP["V"])

    @property
    def noise_floor_mw(self) -> float:
        """The meter's white noise floor (mW)."""
        return 10 ** (self.noise.floor_dbm / 10)

    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set all heater currents (mA); refuses values over the limit before applying any."""
        c = np.asarray(currents_ma, dtype=float)
        # min/max are NaN when any value is, and NaN fails both comparisons: two reductions
        # check range and finiteness (this runs at every current setting)
        if c.size and not (c.min() >= 0 and c.max() <= self.max_current_ma):
            bad = int(np.argmax((c > self.max_current_ma) | (c < 0) | ~np.isfinite(c)))
            raise BenchLimitError(
                f"channel {bad}: {c[bad]:.3f} mA is outside 0..{self.max_current_ma} mA"
            )
        self.chip.set_currents(c)

    def currents(self) -> np.ndarray:
        """The heater currents now applied (mA)."""
        return self.chip.currents_ma.copy()

    def heater_readback(self, currents_ma: np.ndarray) -> HeaterReadback:
        """Set every heater current (mA), then read each channel's voltage and current as the
        module measures them: what flows into its load within the module's 12 V compliance
        (an open heater takes almost nothing, a shorted one shows almost no voltage), plus the
        channel's offset and a fresh scatter. Nothing is refused: the source sits at compliance.
        """
        self.set_currents(currents_ma)
        flowing, volts = self.chip.electrical(FULL_SCALE_V)
        rb, rng = self.readback, self._readback_rng
        n = len(flowing)
        volts = volts + self._offsets_v + rb.voltage_scatter_v * rng.standard_normal(n)
        milliamps = flowing + self._offsets_ma + rb.current_scatter_ma * rng.standard_normal(n)
        return HeaterReadback(volts=volts, milliamps=milliamps, refused=np.zeros(n, dtype=bool))

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` of (simulated) time pass: heaters settle, the chip may drift."""
        self._advance(seconds)

    def now_s(self) -> float:
        """The bench's clock (s): the chip's."""
        return self.chip.now_s()

    def _advance(self, seconds: float) -> None:
        """Move the clock on; the laser wander follows its Ornstein-Uhlenbeck law."""
        n = self.noise
        if n.wander_rel and seconds > 0:
            a = math.exp(-seconds / n.wander_time_s)
            kick = n.wander_rel * math.sqrt(1 - a * a) * self._rng.standard_normal()
            self._wander = a * self._wander + kick
        self.chip.advance(seconds)

    def select_input(self, port: int, wavelength_nm: float = 1550.0) -> None:
        """Send the laser into mesh port ``port``."""
        self._input = self.mesh.port_index(port)
        self._wavelength_nm = float(wavelength_nm)

    def read_powers_dbm(self, ports: Sequence[int]) -> np.ndarray:
        """Noisy power meter readings (dBm) at ``ports``; each reading takes ``read_time_s``."""
        self.operations += 1
        self._advance(self.read_time_s)
        p_in = 10 ** (self.laser_power_dbm / 10) * (1 + self._wander)
        mw = self.chip.output_power_mw(self._input, self._wavelength_nm, p_in)[list(ports)]
        n = self.noise
        rel = n.rel * self._rng.standard_normal(mw.shape)
        if n.outlier_rate:
            hit = self._rng.random(mw.shape) < n.outlier_rate
            rel = rel + hit * n.outlier_rel * self._rng.standard_normal(mw.shape)
        floor_mw = 10 ** (n.floor_dbm / 10)  # noise_floor_mw, without a property call per reading
        noisy = np.abs(mw * (1 + rel) + floor_mw * self._rng.standard_normal(mw.shape))
        return 10 * np.log10(np.maximum(noisy, 1e-12))
