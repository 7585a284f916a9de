"""What the procedure knows of each TBU and crosstalk victim, and the currents that follow from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from calibration.evaluate import wrap
from calibration.fit import TBUFit
from calibration.heater_map import invert_cubic
from calibration.map import target_differential
from calibration.model import self_phase
from calibration.paths import Probe


@dataclass
class TBURecord:
    """What is known of one TBU: its fitted differential phase and per-arm effective curves."""

    delta: float
    g2: list[float]
    g3: list[float]
    sigma_delta: float
    sigma_phase_2pi: list[float]
    rms_residual: float
    rms_residual_rel: float
    stage: str
    src: int
    outputs: list[int]
    base_ma: dict[str, float] = field(default_factory=dict)
    hops: list[int] = field(default_factory=list)
    seq: int = 0
    changed: int = 0
    # The fit's light crossed TBUs not calibrated then (a bootstrap fit through unknown
    # splits): a dead TBU's -60 dB leak can pass for a fringe there, so a failure seen
    # through this TBU blames it first (calibration.procedure.bootstrap).
    through_unknown: bool = False

    @classmethod
    def from_fit(cls, fit: TBUFit, probe: Probe, stage: str,
                 base_ma: dict[str, float] | None = None, seq: int = 0) -> TBURecord:
        """Record of a fit made with ``probe``.

        ``base_ma``: non-zero currents of the TBU's crosstalk neighbours during the sweeps
        (their heat is inside the fitted ``delta``). ``seq``: ordinal of the measurement in
        the run; ``changed`` (set by the caller) is the ordinal at which the TBU's fit last
        changed materially, so measurements whose light crossed it earlier are suspect.
        """
        return cls(fit.delta, fit.rho2.tolist(), fit.rho3.tolist(), fit.sigma_delta,
                   fit.sigma_phase_2pi.tolist(), fit.rms_residual, fit.rms_residual_rel,
                   stage, probe.src, list(probe.outputs), dict(base_ma or {}),
                   sorted({h.tbu for h in probe.hops}), seq, seq)

    def effect(self, arm: int, current_ma: float) -> float:
        """Fitted effect (rad) of heater ``arm`` at ``current_ma`` on the TBU's differential."""
        return float(self.g2[arm] * current_ma**2 + self.g3[arm] * current_ma**3)

    def differs_from(self, other: TBURecord, tol_rad: float) -> bool:
        """True when the two fits set this TBU's split differently by more than ``tol_rad``.

        Compares the differential phase at every current up to the 2 pi point of each arm
        (delta included, wrapped), which is what decides where light goes.
        """
        for arm, sign in ((0, 1.0), (1, -1.0)):
            i2pi = float(invert_cubic(np.array(2 * np.pi), self.g2[arm], self.g3[arm]))
            i = np.linspace(0.0, i2pi, 9)
            a = self.delta + sign * self_phase(i, self.g2[arm], self.g3[arm])
            b = other.delta + sign * self_phase(i, other.g2[arm], other.g3[arm])
            if np.max(np.abs(wrap(a - b))) > tol_rad:
                return True
        return False


@dataclass
class CrosstalkRecord:
    """Measured differential crosstalk on one victim TBU.

    ``fraction[k]``: the victim's differential phase shift per rad of ``heaters[k]``'s fitted
    effect on its own TBU (dimensionless), ``sigma`` its 1-sigma uncertainty.
    """

    victim: int
    heaters: list[int]
    fraction: list[float]
    sigma: list[float]
    rms_residual: float
    readings: int



def tbu_currents(record: TBURecord, cross_fraction: float) -> tuple[float, float]:
    """(top, bottom) currents (mA) putting a calibrated TBU at ``cross_fraction``.

    Uses the effective (differential) curves, which already include the heater's heat on
    its partner arm, so no crosstalk correction is needed for a single TBU.
    """
    return _tbu_currents(float(cross_fraction), float(record.delta), float(record.g2[0]), float(record.g2[1]),
                         float(record.g3[0]), float(record.g3[1]))


# Every measurement parks all calibrated TBUs (a calibration asks ~14,000 times for ~300
# distinct curves and states): the Newton inversion is done once per fit and state. The key
# is the record's numbers themselves, so a re-fitted TBU never reads a stale entry.
_CURRENTS_CACHE_SIZE = 4096


@lru_cache(maxsize=_CURRENTS_CACHE_SIZE)
def _tbu_currents(cross_fraction: float, delta: float, g2_top: float, g2_bot: float, g3_top: float,
                  g3_bot: float) -> tuple[float, float]:
    phase, arm = target_differential(np.array([cross_fraction]), np.array([delta]))
    a = int(arm[0])
    i = float(invert_cubic(phase, (g2_top, g2_bot)[a], (g3_top, g3_bot)[a])[0])
    return (i, 0.0) if a == 0 else (0.0, i)


def base_currents(n_heaters: int, records: dict[int, TBURecord], probe: Probe | None,
                  other_arm: set[int] | frozenset[int] = frozenset()) -> np.ndarray:
    """Currents for a measurement (mA).

    Path TBUs in their states, other calibrated TBUs parked cross, uncalibrated TBUs (and
    the TBU under test) at 0 mA. TBUs in ``other_arm`` reach their state through the heater
    :func:`tbu_currents` does not use (:func:`other_arm_currents`): the same light path with
    their heat on their other arms, which a map's crosstalk entries must predict.
    """
    c = np.zeros(n_heaters)
    states = {h.tbu: h.state for h in probe.hops} if probe else {}
    for t, rec in records.items():
        if probe is not None and t == probe.tbu:
            continue
        frac = 0.0 if states.get(t) == "bar" else 1.0
        c[2 * t], c[2 * t + 1] = (other_arm_currents if t in other_arm else tbu_currents)(rec, frac)
    return c


def other_arm_currents(record: TBURecord, cross_fraction: float) -> tuple[float, float]:
    """(top, bottom) currents (mA) putting a calibrated TBU at ``cross_fraction`` through the
    heater :func:`tbu_currents` leaves at 0 mA: it adds ``2 pi`` minus the cheaper heater's
    phase (at most ``2 pi``, inside the fitted sweep's ``3 pi``).
    """
    phase, arm = target_differential(np.array([float(cross_fraction)]), np.array([float(record.delta)]))
    a = 1 - int(arm[0])
    i = float(invert_cubic(np.array(2 * np.pi - phase[0]), record.g2[a], record.g3[a]))
    return (i, 0.0) if a == 0 else (0.0, i)



def victim_currents(record: TBURecord, theta: float) -> tuple[float, float]:
    """(top, bottom) currents (mA) putting a calibrated TBU's differential phase at ``theta``."""
    need = float(np.mod(theta - record.delta, 2 * np.pi))
    if need <= np.pi:
        return float(invert_cubic(np.array(need), record.g2[0], record.g3[0])), 0.0
    return 0.0, float(invert_cubic(np.array(2 * np.pi - need), record.g2[1], record.g3[1]))


