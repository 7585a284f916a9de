"""The electrical check: is every heater a heater, from the driver's own voltage and current read-back?

Before any light is measured, every channel is read at zero and at :data:`PROBE_MA`; the
difference of the two readings of one channel cancels the module's fixed offset (up to
11 uA and 0.9 mV on the recorded modules), and leaves its scatter (0.3 uA, 0.4 mV a
reading), which is 600x below the figures the verdicts compare. A channel is named:

* ``open-heater``: the module refused the probe at its voltage compliance (Qontrol
  ``E01``), or less than :data:`MIN_CURRENT_FRACTION` of the probe flowed, or what flowed
  needed more than :data:`OPEN_RATIO` times a working heater's voltage: the heater track
  or its bond is broken, so it never heats its arm;
* ``shorted-heater``: the probe flowed at less than :data:`SHORT_RATIO` times a working
  heater's voltage: its pads are bridged, the current bypasses the heater.

Either kind is recorded in the map against the heater's TBU (never driven, avoided by
routing) before light could mistake the TBU's missing fringe for a dead or stuck TBU.

Example:
    >>> import numpy as np
    >>> zero = HeaterReadback(np.zeros(3), np.zeros(3), np.zeros(3, bool))
    >>> probe = HeaterReadback(np.array([0.255, 12.0, 0.001]), np.array([1.0, 0.03, 1.0]), np.zeros(3, bool))
    >>> [f.kind for f in classify(zero, probe, PROBE_MA)]
    ['open-heater', 'shorted-heater']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.bench import Bench, ElectricalBench, HeaterReadback
from calibration.options import NOMINAL_GAMMA_PER_MA, NOMINAL_R0_KOHM

HEATER_FAULT_KINDS = ("open-heater", "shorted-heater")
# The probe current (mA): a nominal heater then shows 0.26 V, 600x the voltage scatter of a
# reading and 300x the largest recorded offset, while heating its arm by only ~0.6 rad and
# dissipating 0.26 mW (all heaters together ~37 mW on SmartLight, far below any power limit).
PROBE_MA = 1.0
# A working heater's resistance is r0 (1 + gamma I): r0 = 0.25 kOhm +- 5 % (+- 10 % on a chip
# of twice the usual spread) and gamma I = 2 % at the probe: 0.65..1.36x nominal measured
# over 14,200 heaters at 1x and 2x spread (benchmarks/bench_heater_check.py). An open heater
# reads through the module's sense path (~400 kOhm, 1600x nominal), a short about an ohm
# (1/250 of nominal). 4x and 1/5 of nominal sit 3x beyond the healthy extremes and far from
# both faults.
OPEN_RATIO = 4.0
SHORT_RATIO = 0.2
# Below this share of the probe flowing, the source could not drive its load at all (it sat
# at its compliance): an open circuit whatever the voltage reads.
MIN_CURRENT_FRACTION = 0.5


@dataclass(frozen=True)
class HeaterFault:
    """One heater the electrical check condemns.

    Attributes:
        channel: heater channel (``2 * tbu + arm``).
        kind: "open-heater" or "shorted-heater".
        milliamps: the current that flowed at the probe, offset removed (mA).
        volts: the voltage it took, offset removed (V); NaN when the module refused the probe.
        refused: the module refused the probe at its voltage compliance.
    """

    channel: int
    kind: str
    milliamps: float
    volts: float
    refused: bool = False

    def evidence(self, probe_ma: float = PROBE_MA) -> str:
        """What the read-back showed, against what a working heater shows (one clause)."""
        nominal_v = nominal_volts(probe_ma)
        if self.refused:
            return (f"the driver refused {probe_ma:.3g} mA at its voltage compliance (a working heater "
                    f"needs {nominal_v:.2f} V)")
        return (f"asked {probe_ma:.3g} mA it read {self.milliamps:.4f} mA at {self.volts:.4f} V (a working "
                f"heater: {probe_ma:.3g} mA at {nominal_v:.2f} V)")

    def advice(self) -> str:
        """The cause and what to do about it (one clause)."""
        if self.kind == "open-heater":
            return ("the heater or its bond wire is open, so it cannot heat its arm: check the wire "
                    "bonds / probe needles of this channel, then recalibrate")
        return ("the heater's pads are shorted, so the current bypasses it: look for a bridged bond "
                "or solder splash on this channel, then recalibrate")


def nominal_volts(current_ma: float) -> float:
    """Voltage (V) across the nominal heater at ``current_ma``."""
    return NOMINAL_R0_KOHM * (1 + NOMINAL_GAMMA_PER_MA * current_ma) * current_ma


def classify(zero: HeaterReadback, probe: HeaterReadback, probe_ma: float | np.ndarray,
             channels: np.ndarray | None = None) -> list[HeaterFault]:
    """The heaters the two readings condemn (channel order); see the module docstring.

    ``probe_ma``: the current asked of every channel (mA), or one per channel;
    ``channels``: the channels to judge (default: all).
    """
    di = np.asarray(probe.milliamps, float) - np.asarray(zero.milliamps, float)
    dv = np.asarray(probe.volts, float) - np.asarray(zero.volts, float)
    asked = np.broadcast_to(np.asarray(probe_ma, float), di.shape)
    out = []
    for ch in (range(len(di)) if channels is None else (int(c) for c in channels)):
        r_nominal = nominal_volts(float(asked[ch])) / float(asked[ch])
        if probe.refused[ch]:
            out.append(HeaterFault(ch, "open-heater", float("nan"), float("nan"), refused=True))
        elif di[ch] < MIN_CURRENT_FRACTION * asked[ch] or dv[ch] > OPEN_RATIO * r_nominal * di[ch]:
            out.append(HeaterFault(ch, "open-heater", float(di[ch]), float(dv[ch])))
        elif dv[ch] < SHORT_RATIO * r_nominal * di[ch]:
            out.append(HeaterFault(ch, "shorted-heater", float(di[ch]), float(dv[ch])))
    return out


def check_heaters(bench: Bench, probe_ma: float = PROBE_MA) -> list[HeaterFault] | None:
    """Read every channel at zero and at ``probe_ma``, leave every heater at zero, and return the
    heaters condemned; None when the bench reads no voltage and current back (not checked).
    """
    if not isinstance(bench, ElectricalBench):
        return None
    n = bench.mesh.n_heaters
    zero = bench.heater_readback(np.zeros(n))
    try:
        probe = bench.heater_readback(np.full(n, float(probe_ma)))
    finally:
        bench.set_currents(np.zeros(n))
    return classify(zero, probe, probe_ma)
