"""The optical power meter driver (816x-style mainframe) and its sensor heads.

Heads are addressed by (slot, channel): ``SENS<slot>:CHAN<chan>`` / ``READ<slot>:CHAN<chan>``.
Every reading is asked twice in one message (``READ?`` then ``FETC?``) with the unit it is
in, so a corrupted reply is retried and a reading in W is never taken for dBm. The
exchanges (framing, confirmed settings, restart recovery) are
:class:`instruments.scpi.ScpiInstrument`'s; every command is in docs/protocol-scpi.md.
"""

from __future__ import annotations

from typing import Any

from instruments.base import Channel, check_range
from instruments.errors import DeviceError, GarbledReplyError
from instruments.scpi import ScpiInstrument
from instruments.scpi_replies import parse_flag, parse_float, parse_nm, watts_to_dbm
from instruments.scpi_settings import WAVELENGTH_TOLERANCE_NM, scpi_control
from instruments.transport import Transport

UNIT_DBM, UNIT_W = 0, 1  # 816x / 8164B POW:UNIT codes (query answers +0 / +1)
METER_WAVELENGTH_NM = (800.0, 1700.0)  # InGaAs 8163x / N774x heads
ATIM_S = (1e-4, 10.0)  # averaging time
RANGE_DBM = (-60.0, 10.0)  # manual range
# Slot and channel numbers a head is addressed by (``SENS<slot>:CHAN<chan>``): slots from
# 0, kept permissive because mainframes and multi-port meters number them differently;
# channels 1-4 as on the front panel.
METER_SLOTS = (0, 64)
HEAD_CHANNELS = (1, 4)
RANGE_STEP_DB = 10.0  # the 816x range moves in 10 dB steps: a setting is rounded to one before sending
# Read-back tolerances: what a confirmed setting may differ from the value sent.
# Averaging time: sent with 4 decimals of s, read back in NR3 (8 decimals of mantissa).
ATIM_TOLERANCE_S = 1e-6
RANGE_TOLERANCE_DB = 1e-6  # range values are whole multiples of 10 dB once rounded


class MeterHead(Channel):
    """One power sensor: ``SENS<slot>:CHAN<chan>`` / ``READ<slot>:CHAN<chan>``."""

    parent: PowerMeter

    wavelength_nm = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:WAV?", "SENS{slot}:CHAN{chan}:POW:WAV {value}NM",
        "calibration wavelength (nm, 800..1700)", parse=parse_nm, limits=METER_WAVELENGTH_NM, unit="nm",
        fmt=lambda x: f"{x:.4f}", tolerance=WAVELENGTH_TOLERANCE_NM)
    averaging_time_s = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:ATIM?", "SENS{slot}:CHAN{chan}:POW:ATIM {value}S",
        "averaging time (s, 1e-4..10)", limits=ATIM_S, unit="s", fmt=lambda x: f"{x:.4f}",
        tolerance=ATIM_TOLERANCE_S)
    range_dbm = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:RANG?", "SENS{slot}:CHAN{chan}:POW:RANG {value}DBM",
        "manual range (dBm, -60..+10, rounded to 10 dB steps)", limits=RANGE_DBM, unit="dBm",
        fmt=lambda x: f"{RANGE_STEP_DB * round(x / RANGE_STEP_DB):.0f}", tolerance=RANGE_TOLERANCE_DB)
    auto_range = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:RANG:AUTO?", "SENS{slot}:CHAN{chan}:POW:RANG:AUTO {value}",
        "automatic ranging (bool)", parse=parse_flag)
    unit_watts = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:UNIT?", "SENS{slot}:CHAN{chan}:POW:UNIT {value}",
        "readings in W (True) or dBm (False)", parse=parse_flag)

    def __init__(self, parent: PowerMeter, slot: int, chan: int) -> None:
        super().__init__(parent, slot=slot, chan=chan)

    def _read(self) -> tuple[int, float]:
        """One reading with the unit it is in: ``UNIT?`` twice, ``READ?`` and ``FETC?`` in one message.

        ``FETC?`` returns the reading ``READ?`` just took (816x PG: READ is INIT + FETCh), so
        the two must be the same text; a difference is a reply corrupted on the line.
        """
        unit_q = "SENS{slot}:CHAN{chan}:POW:UNIT?".format(**self.ids)
        read_q = "READ{slot}:CHAN{chan}:POW?".format(**self.ids)
        fetch_q = "FETC{slot}:CHAN{chan}:POW?".format(**self.ids)

        def accept(replies: list[str]) -> tuple[int, float]:
            u1, u2, read, fetched = replies
            if u1 != u2 or read != fetched:
                raise GarbledReplyError(
                    f"{self.parent.name}: head {self.ids} answered unit {u1}/{u2}, READ? {read} but FETC? "
                    f"{fetched}: a reply corrupted on the line, or the head measures continuously "
                    "(INIT:CONT ON: switch it off)")
            return int(parse_flag(u1)), parse_float(read)
        return self.parent._transact([unit_q, unit_q, read_q, fetch_q], 4, accept, read_q)

    def read_power_dbm(self) -> float:
        """One reading in dBm, whatever unit the head was left in.

        A reading in W is converted here and the head is switched to dBm for the next
        ones (a setting the driver then owns); a W reading of zero or less (noise after
        zeroing) is taken again in dBm.
        """
        unit, value = self._read()
        if unit == UNIT_DBM:
            return value
        self.unit_watts = False
        if value > 0:
            return watts_to_dbm(value)
        unit, value = self._read()
        if unit != UNIT_DBM:
            raise DeviceError(f"{self.parent.name}: head {self.ids} stays in W after POW:UNIT 0; "
                              "check the instrument (reference mode on?)")
        return value

    def read_power_w(self) -> float:
        """One reading in W, whatever unit the head was left in (dBm replies converted)."""
        unit, value = self._read()
        return value if unit == UNIT_W else 1e-3 * 10 ** (value / 10)


class PowerMeter(ScpiInstrument):
    """Optical power meter mainframe with sensor heads addressed by (slot, channel).

    After a restart the driver re-applies every head setting it owns (wavelength,
    averaging time, range, auto range, unit) before the next reading is taken.
    """

    def __init__(self, transport: Transport, *, expected_idn: str | None = None, retries: int = 2,
                 name: str = "power_meter") -> None:
        super().__init__(transport, expected_idn=expected_idn, name=name, retries=retries)
        self._heads: dict[tuple[int, int], MeterHead] = {}

    def channel(self, slot: Any, chan: Any = 1) -> MeterHead:
        """The head in ``slot``, channel ``chan`` (1-based, as on the front panel)."""
        key = (int(slot), int(chan))
        if key not in self._heads:
            check_range(key[0], *METER_SLOTS, "meter slot", "")
            check_range(key[1], *HEAD_CHANNELS, "meter channel", "")
            self._heads[key] = MeterHead(self, *key)
        return self._heads[key]
