"""The simulated chip: a mesh with hidden fabrication truth, driven by heater currents.

Everything a real chip hides is drawn here from one seed: per-TBU coupler errors, losses,
passive arm phases, per-heater resistance and efficiency, and a thermal crosstalk matrix.
Only the simulated instruments read it; calibration must recover it through them, and
tests compare what calibration found against :attr:`Chip.truth`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from calibration.model import HeaterModel, crosstalk_matrix, heater_positions, heater_voltage_v
from photonics.circuit import solve
from photonics.errors import StateError
from photonics.physics import PhysicsDefaults, TBUParams, fabricated_params, split_phases
from photonics.state import MeshState
from photonics.topology import Mesh

FAILURE_MODES = ("dead", "bar", "cross")
DEAD_LOSS_DB = 60.0
CROSSTALK_DECAY_TBU = 0.1  # decay length of inter-TBU thermal crosstalk (TBU lengths)


@dataclass(frozen=True, eq=False)
class ChipTruth:
    """Hidden parameters of a simulated chip."""

    params: TBUParams
    heaters: HeaterModel
    r0_kohm: np.ndarray
    gamma_per_ma: np.ndarray


def draw_truth(
    mesh: Mesh,
    seed: int,
    defaults: PhysicsDefaults | None = None,
    crosstalk_fraction: float = 0.01,
) -> ChipTruth:
    """Seeded hidden truth: fabrication errors, heater coefficients, crosstalk.

    Heaters: R0 = 250 Ohm +- 5 %, efficiency pi / P_pi (P_pi = 1.3 mW) +- 5 %,
    resistance tempco gamma = 0.02 /mA +- 10 %; so pi needs about 2.3 mA.
    Crosstalk: ``crosstalk_fraction`` (+-20 % per chip) on the partner arm and on the
    nearest heater of a neighbouring TBU, decaying exponentially (see the comment below).
    """
    d = defaults or PhysicsDefaults()
    rng = np.random.default_rng(seed)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng, d)
    n_h = mesh.n_heaters
    r0 = 0.25 * (1 + 0.05 * rng.standard_normal(n_h))
    eta = np.pi / d.heater_power_pi_mw * (1 + 0.05 * rng.standard_normal(n_h))
    gamma = 0.02 * (1 + 0.1 * rng.standard_normal(n_h))
    alpha = np.empty(n_h)
    alpha[0::2], alpha[1::2] = params.offset_top, params.offset_bot
    xfrac = crosstalk_fraction * (1 + 0.2 * rng.standard_normal())
    # Crosstalk law (docs/calibration.md, "Thermal crosstalk"): the other arm of the same TBU
    # gets xfrac of a heater's phase; the nearest heater of a *neighbouring* TBU gets
    # crosstalk_fraction +- 20 % (chip-wide) and farther ones decay as exp(-(d - d0) / 0.1 TBU
    # lengths) up to 1.05 TBU lengths; every heater pair varies +- 10 % around the law.
    # These draws come after all others, so the rest of the truth is unchanged per seed.
    nfrac = crosstalk_fraction * (1 + 0.2 * rng.standard_normal())
    K = crosstalk_matrix(heater_positions(mesh.tbu_xy), eta, nearest_fraction=max(nfrac, 0.0),
                         partner_fraction=max(xfrac, 0.0), decay_length=CROSSTALK_DECAY_TBU,
                         spread=0.1, rng=rng)
    heaters = HeaterModel(alpha=alpha, rho2=eta * r0, rho3=eta * r0 * gamma, eta=eta, crosstalk=K)
    return ChipTruth(params=params, heaters=heaters, r0_kohm=r0, gamma_per_ma=gamma)


class Chip:
    """A simulated mesh chip whose optics follow its heater currents.

    Thread-safe: the simulated instruments (possibly on server threads) share one chip.

    Example:
        >>> from photonics.topology import hexagonal
        >>> chip = Chip(hexagonal(1, 1), seed=1)
        >>> chip.set_currents(np.zeros(chip.mesh.n_heaters))
        >>> chip.output_power_mw(0, 1550.0).shape
        (12,)
    """

    def __init__(
        self,
        mesh: Mesh,
        seed: int = 0,
        *,
        defaults: PhysicsDefaults | None = None,
        crosstalk_fraction: float = 0.01,
        failed: dict[int, str] | None = None,
    ) -> None:
        self.mesh = mesh
        self.seed = seed
        self.chip_id = f"sim-{mesh.kind}-{mesh.rows}x{mesh.cols}-seed{seed}"
        self.truth = draw_truth(mesh, seed, defaults, crosstalk_fraction)
        self.currents_ma = np.zeros(mesh.n_heaters)
        self.failed: dict[int, str] = {}
        self._lock = threading.RLock()
        self._cache: dict[tuple, np.ndarray] = {}
        for tbu, how in (failed or {}).items():
            self.fail_tbu(tbu, how)

    # -- electrical -------------------------------------------------------------------
    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set every heater current (mA)."""
        c = np.asarray(currents_ma, dtype=float)
        if c.shape != (self.mesh.n_heaters,) or not np.isfinite(c).all() or (c < 0).any():
            raise StateError(f"need {self.mesh.n_heaters} finite, non-negative currents (mA)")
        with self._lock:
            self.currents_ma = c.copy()
            self._cache.clear()

    def set_current(self, channel: int, current_ma: float) -> None:
        """Set one heater current (mA)."""
        with self._lock:
            c = self.currents_ma.copy()
            c[channel] = current_ma
            self.set_currents(c)

    def voltages_v(self) -> np.ndarray:
        """Voltage across every heater (V)."""
        return heater_voltage_v(self.currents_ma, self.truth.r0_kohm, self.truth.gamma_per_ma)

    def electrical_power_mw(self) -> np.ndarray:
        """Electrical power of every heater (mW)."""
        return self.voltages_v() * self.currents_ma

    # -- faults -----------------------------------------------------------------------
    def fail_tbu(self, tbu: int, how: str) -> None:
        """Break a TBU: "dead" (blocks light), or stuck in "bar" / "cross" (heaters ignored)."""
        if how not in FAILURE_MODES:
            raise StateError(f"failure mode must be one of {FAILURE_MODES}, not {how!r}")
        with self._lock:
            self.failed[self.mesh.tbu_index(tbu)] = how
            self._cache.clear()

    def repair_all(self) -> None:
        """Undo every injected TBU failure."""
        with self._lock:
            self.failed.clear()
            self._cache.clear()

    # -- optics -----------------------------------------------------------------------
    def heater_state(self) -> MeshState:
        """Heater-induced arm phases (rad, crosstalk included, passive phase excluded)."""
        with self._lock:
            phases = self.truth.heaters.phases(self.currents_ma, with_alpha=False)
            top, bot = phases[0::2].copy(), phases[1::2].copy()
            params = self.truth.params
            for tbu, how in self.failed.items():
                if how in ("bar", "cross"):
                    t, b = split_phases(1.0 if how == "cross" else 0.0,
                                        params.offset_top[tbu], params.offset_bot[tbu])
                    top[tbu], bot[tbu] = float(t), float(b)
            return MeshState(top, bot)

    def optical_params(self) -> TBUParams:
        """TBU parameters with dead TBUs made opaque."""
        params = self.truth.params
        dead = [t for t, how in self.failed.items() if how == "dead"]
        if not dead:
            return params
        loss = params.loss_db.copy()
        loss[dead] = DEAD_LOSS_DB
        return replace(params, loss_db=loss)

    def output_field(self, input_port: int, wavelength_nm: float) -> np.ndarray:
        """Complex field at every mesh port (n_ports,) for unit field into ``input_port``."""
        key = (int(input_port), round(float(wavelength_nm), 9))
        with self._lock:
            if key not in self._cache:
                S = solve(self.mesh, self.heater_state(), [wavelength_nm], self.optical_params(),
                          inputs=[int(input_port)])
                self._cache[key] = S[0, 0, :, 0]
            return self._cache[key]

    def output_power_mw(self, input_port: int, wavelength_nm: float, input_mw: float = 1.0) -> np.ndarray:
        """Optical power (mW) at every mesh port for ``input_mw`` entering ``input_port``."""
        return input_mw * np.abs(self.output_field(input_port, wavelength_nm)) ** 2
