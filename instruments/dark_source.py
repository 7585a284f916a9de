"""Whether a check by light had any light to check with: a dark source is said, never blamed on the mesh.

A check by light (``lumion program``'s routes and heater states, a failover's links read by
the bench laser and power meter) compares readings with a plan. When the source sends
nothing (the laser's output switched off, a dead laser that still reports itself on, a
fiber switch or input fibre broken) every reading is the meter's floor, and the plan
comparison calls every route off with "check the calibration map": the mesh blamed for a
dark source. Two things tell a dark source apart:

* the laser says its output is off (``SOUR:POW:STAT?`` 0, :attr:`laser.output_enabled`):
  nothing was sent, nothing is judged;
* no meter head read light from any input lit: every reading more than
  :data:`DARK_BELOW_LASER_DB` under the laser's power. One TBU absorbing all light (dead)
  darkens only the routes that cross it, so when no TBU is common to every dark route the
  source is named; when one is (a lone route), both are named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from instruments.errors import InstrumentError
from photonics.errors import LumionError

# A reading this far (dB) under the laser's set power is no light from it: the simulated
# meter's floor with the laser off reads -66 to -80 dBm (hex:3x4 seed 3, 0 dBm laser), a
# real InGaAs head's -70 to -90 dBm; a lit input on a calibrated chip puts -1 to -12 dBm at
# its route's end and, with a TBU pi off, at least -20 dBm at some other head; a port no
# route feeds reads -25 to -51 dBm of crosstalk. 55 dB sits 10 dB over the floor's highest
# reading and 4 dB under the darkest lit port.
DARK_BELOW_LASER_DB = 55.0
SHOWN_TBUS = 4  # TBUs named in the line (the rest counted)


def laser_off(bench: Any) -> str:
    """Why the bench laser sends nothing by its own word ('' when it says its output is on, or
    cannot say: a laser without the query is trusted to be on and judged by the readings).
    """
    laser = getattr(bench, "laser", None)
    if laser is None:
        return ""
    try:
        on = laser.output_enabled
    except (AttributeError, InstrumentError, OSError, LumionError):  # cannot say: the readings decide
        return ""
    if on is False or on == 0:
        return ("the bench laser reports its output off (SOUR:POW:STAT 0): no light was sent, nothing was "
                "verified by light; switch the laser's output on and run again")
    return ""


def dark_readings(brightest_dbm: Sequence[float], laser_dbm: float, common_tbus: Sequence[str]) -> str:
    """Why every input lit read no light ('' when some head saw light).

    ``brightest_dbm``: per input lit, its brightest reading over every head read (dBm);
    ``common_tbus``: the TBUs every lit input's light crosses (a dead one would darken them all).
    """
    if not brightest_dbm:
        return ""
    floor = laser_dbm - DARK_BELOW_LASER_DB
    if not all(x < floor for x in brightest_dbm):  # NaN is light seen: judged as it reads
        return ""
    n = len(brightest_dbm)
    inputs = f"any of the {n} inputs" if n > 1 else "the input"
    said = (f"no light reached any power meter head from {inputs} lit (brightest {max(brightest_dbm):.1f} "
            f"dBm, every reading more than {DARK_BELOW_LASER_DB:g} dB under the laser's {laser_dbm:.1f} dBm"
            "): the source is dark (laser dead or off, fiber switch, input fibre)")
    if not common_tbus:
        return said + ", not the mesh: no TBU is common to the routes lit; check the laser and the switch"
    named = ", ".join(common_tbus[:SHOWN_TBUS])
    more = f" and {len(common_tbus) - SHOWN_TBUS} more" if len(common_tbus) > SHOWN_TBUS else ""
    return (said + f", or a TBU every lit light crosses absorbs it ({named}{more}, e.g. dead); check the "
            "laser and the switch first")
