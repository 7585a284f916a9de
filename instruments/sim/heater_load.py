"""What a heater channel's load does electrically: a working heater, an open one, a shorted one.

A heater driver channel is a current source with a voltage compliance (Qontrol: ``VMAX``,
12 V full scale). Into a working heater, ``V = r0 (1 + gamma I) I`` (kOhm, mA, V). Two
faults a real chip develops (a cracked heater track or lifted bond: open; a bridged pad
pair or a probe needle across the pads: short) change what flows and what the module reads:

* ``open-heater``: almost nothing flows at any voltage. Asked for a current, the source
  rises to its compliance and only the module's own sense path conducts
  (:data:`OPEN_LEAK_KOHM`); the heater never warms, so its arm's phase never moves.
* ``shorted-heater``: the current flows but through :data:`SHORT_RESISTANCE_KOHM` instead
  of the heater, so the channel reads the asked current at a voltage near zero, and (in
  voltage mode) a tiny voltage already reaches the current limit. The heater never warms.

Example:
    >>> import numpy as np
    >>> flowing, volts = drive(np.array([1.0, 1.0, 1.0]), {1: "open-heater", 2: "shorted-heater"},
    ...                        np.full(3, 0.25), np.full(3, 0.02), 12.0)
    >>> [round(float(x), 4) for x in flowing], [round(float(x), 4) for x in volts]
    ([1.0, 0.03, 1.0], [0.255, 12.0, 0.001])
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

HEATER_FAULTS = ("open-heater", "shorted-heater")
# An unloaded Q8iv channel in the vendor's recorded sessions (tests/instruments/recorded/
# qontrol_sessions.json, progs/mixed_tests.json, nothing connected) reads +0.0204 mA at
# +8.2702 V, +0.0382 mA at +10.0830 V and +0.0181 mA at +11.8553 V, less its -3 uA offset:
# 0.25-0.6 MOhm through the module's own sense path. An open heater is that load.
OPEN_LEAK_KOHM = 400.0
# A short across a heater's pads (a bridged bond, a solder splash): about an ohm of wire and
# track, 250x below the heater's 0.25 kOhm.
SHORT_RESISTANCE_KOHM = 0.001


def check_fault(how: str) -> str:
    """``how`` when it is one of :data:`HEATER_FAULTS`; ValueError naming them otherwise."""
    if how not in HEATER_FAULTS:
        raise ValueError(f"a heater fault is one of {HEATER_FAULTS}, not {how!r}")
    return how


def heating_currents(asked_ma: np.ndarray, faults: Mapping[int, str]) -> np.ndarray:
    """The current (mA) that heats each heater: none through an open or a shorted one."""
    c = np.array(asked_ma, dtype=float)
    if faults:
        c[list(faults)] = 0.0
    return c


def drive(asked_ma: np.ndarray, faults: Mapping[int, str], r0_kohm: np.ndarray, gamma_per_ma: np.ndarray,
          compliance_v: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(current that flows, mA; voltage across the channel, V) with each channel sourcing
    ``asked_ma`` into its load, within its voltage ``compliance_v`` when the load is open.
    """
    asked = np.asarray(asked_ma, dtype=float)
    flowing = asked.copy()
    volts = r0_kohm * (1 + gamma_per_ma * asked) * asked
    comp = np.broadcast_to(np.asarray(compliance_v, dtype=float), asked.shape)
    for ch, how in faults.items():
        if how == "open-heater":
            # the source rises until the sense path carries the current, or to its compliance
            volts[ch] = min(asked[ch] * OPEN_LEAK_KOHM, float(comp[ch]))
            flowing[ch] = volts[ch] / OPEN_LEAK_KOHM
        else:
            volts[ch] = asked[ch] * SHORT_RESISTANCE_KOHM
    return flowing, volts


def current_at_voltage(volts: float, how: str | None, r0_kohm: float, gamma_per_ma: float) -> float:
    """The current (mA) a channel held at ``volts`` draws through its load (voltage mode)."""
    if how == "open-heater":
        return volts / OPEN_LEAK_KOHM
    if how == "shorted-heater":
        return volts / SHORT_RESISTANCE_KOHM
    r0, g = r0_kohm, gamma_per_ma
    return float((-r0 + np.sqrt(r0 * r0 + 4 * r0 * g * volts)) / (2 * r0 * g))  # V = r0 (1 + g I) I
