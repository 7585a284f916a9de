"""SCPI drivers: tunable laser with a fiber switch module, and an 816x-style power meter.

Both follow the Keysight 8164B / 816x syntax over pyvisa (``\\n`` terminations). After
every setting the error queue is drained (``SYST:ERR?`` until ``+0``); a non-zero entry
raises :class:`~instruments.errors.DeviceError` with the instrument's own text.

The laser's mainframe also holds a 1xN fiber switch module (slot ``switch_slot``,
81595B-style ``ROUT<slot>:CHAN<ch> A,<k>``) that sends the laser into one of N fibers;
the bench config maps switch outputs to mesh ports.
"""

from __future__ import annotations

import re
from typing import Any

from instruments.base import Channel, Instrument, check_range, control, measurement
from instruments.errors import DeviceError, GarbledReplyError
from instruments.transport import Transport, VisaTransport

_ERR = re.compile(r'^([+-]?\d+)\s*,\s*"?(.*?)"?$')


def _nm(reply: str) -> float:
    """A wavelength reply in metres -> nm."""
    return _float(reply) * 1e9


def _float(reply: str) -> float:
    try:
        return float(reply)
    except ValueError as exc:
        raise GarbledReplyError(f"expected a number, got {reply!r}") from exc


def _flag(reply: str) -> bool:
    if reply.strip() not in ("0", "1"):
        raise GarbledReplyError(f"expected 0 or 1, got {reply!r}")
    return reply.strip() == "1"


class ScpiInstrument(Instrument):
    """Common SCPI: ``*IDN?``, ``*RST``, ``*CLS``, ``SYST:ERR?`` draining."""

    ids: dict[str, Any] = {}  # noqa: RUF012 -- template ids, overridden per instance

    @classmethod
    def open(cls, address: str, *, timeout_s: float = 2.0, **kwargs: Any) -> ScpiInstrument:
        """Open a VISA resource string (``TCPIP::127.0.0.1::5025::SOCKET``, ``GPIB0::20::INSTR``)."""
        return cls(VisaTransport(address, timeout_s=timeout_s), **kwargs)

    def identity(self) -> str:
        """``*IDN?``: maker, model, serial, firmware."""
        return self.query("*IDN?")

    def reset(self) -> None:
        """``*RST`` then ``*CLS``: factory settings, empty error queue."""
        self.write("*RST")
        self.write("*CLS")

    def errors(self, limit: int = 32) -> list[tuple[int, str]]:
        """Drain the error queue (``SYST:ERR?`` until code 0); returns (code, text) pairs."""
        out: list[tuple[int, str]] = []
        with self.lock:
            for _ in range(limit):
                reply = self.query("SYST:ERR?")
                m = _ERR.match(reply)
                if not m:
                    raise GarbledReplyError(f"{self.name}: SYST:ERR? gave {reply!r}")
                if int(m.group(1)) == 0:
                    return out
                out.append((int(m.group(1)), m.group(2)))
        return out

    def check_errors(self) -> None:
        """Raise :class:`DeviceError` when the error queue holds anything."""
        errs = self.errors()
        if errs:
            text = "; ".join(f"{c}: {t}" for c, t in errs)
            raise DeviceError(f"{self.name} reported {text}; check the value and the instrument's "
                              "manual", code=errs[0][0])


class TunableLaser(ScpiInstrument):
    """Tunable laser source (81600B-style) plus a fiber switch module in the same mainframe.

    Args:
        transport: VISA transport.
        source: laser slot (``SOUR<n>``), 0 for the mainframe's laser.
        switch_slot, switch_channel: the switch module (``ROUT<slot>:CHAN<ch>``).
        switch_outputs: number of switch outputs (1..N).
    """

    def __init__(self, transport: Transport, *, source: int = 0, switch_slot: int = 1,
                 switch_channel: int = 1, switch_outputs: int = 64, retries: int = 2,
                 name: str = "laser") -> None:
        super().__init__(transport, name=name, retries=retries)
        self.ids = {"src": source, "sw": switch_slot, "swch": switch_channel}
        self.switch_outputs = switch_outputs

    wavelength_nm = control(
        "SOUR{src}:WAV?", "SOUR{src}:WAV {value}NM", "wavelength (nm, 1490..1640)", parse=_nm,
        limits=(1490.0, 1640.0), unit="nm", fmt=lambda x: f"{x:.4f}", check_errors=True)
    power_dbm = control(
        "SOUR{src}:POW?", "SOUR{src}:POW {value}DBM", "output power (dBm, -10..+13)", parse=_float,
        limits=(-10.0, 13.0), unit="dBm", fmt=lambda x: f"{x:.3f}", check_errors=True)
    output_enabled = control(
        "SOUR{src}:POW:STAT?", "SOUR{src}:POW:STAT {value}", "laser output on (bool)", parse=_flag,
        check_errors=True)

    def select_output(self, output: int) -> None:
        """``ROUT<slot>:CHAN<ch> A,<k>``: send the laser to switch output ``k`` (1..N)."""
        k = int(check_range(output, 1, self.switch_outputs, "switch output", ""))
        with self.lock:
            self.write(f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']} A,{k}")
            self.check_errors()

    def selected_output(self) -> int:
        """``ROUT<slot>:CHAN<ch>?``: the switch output now selected."""
        reply = self.query(f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']}?")
        try:
            return int(reply.split(",")[1])
        except (IndexError, ValueError) as exc:
            raise GarbledReplyError(f"{self.name}: switch reply {reply!r}, expected A,<k>") from exc


class MeterHead(Channel):
    """One power sensor: ``SENS<slot>:CHAN<chan>`` / ``READ<slot>:CHAN<chan>``."""

    wavelength_nm = control(
        "SENS{slot}:CHAN{chan}:POW:WAV?", "SENS{slot}:CHAN{chan}:POW:WAV {value}NM",
        "calibration wavelength (nm, 800..1700)", parse=_nm, limits=(800.0, 1700.0), unit="nm",
        fmt=lambda x: f"{x:.4f}", check_errors=True)
    averaging_time_s = control(
        "SENS{slot}:CHAN{chan}:POW:ATIM?", "SENS{slot}:CHAN{chan}:POW:ATIM {value}S",
        "averaging time (s, 1e-4..10)", parse=_float, limits=(1e-4, 10.0), unit="s",
        fmt=lambda x: f"{x:.4f}", check_errors=True)
    range_dbm = control(
        "SENS{slot}:CHAN{chan}:POW:RANG?", "SENS{slot}:CHAN{chan}:POW:RANG {value}DBM",
        "manual range (dBm, -60..+10, 10 dB steps)", parse=_float, limits=(-60.0, 10.0), unit="dBm",
        fmt=lambda x: f"{x:.0f}", check_errors=True)
    auto_range = control(
        "SENS{slot}:CHAN{chan}:POW:RANG:AUTO?", "SENS{slot}:CHAN{chan}:POW:RANG:AUTO {value}",
        "automatic ranging (bool)", parse=_flag, check_errors=True)
    unit_watts = control(
        "SENS{slot}:CHAN{chan}:POW:UNIT?", "SENS{slot}:CHAN{chan}:POW:UNIT {value}",
        "readings in W (True) or dBm (False)", parse=_flag, check_errors=True)
    power = measurement("READ{slot}:CHAN{chan}:POW?", "one reading, in the head's unit", parse=_float)

    def __init__(self, parent: Instrument, slot: int, chan: int) -> None:
        super().__init__(parent, slot=slot, chan=chan)
        self._dbm = False

    def read_power_dbm(self) -> float:
        """One reading in dBm (switches the head to dBm on first use)."""
        if not self._dbm:
            self.unit_watts = False
            self._dbm = True
        return self.power


class PowerMeter(ScpiInstrument):
    """Optical power meter mainframe with sensor heads addressed by (slot, channel)."""

    def __init__(self, transport: Transport, *, retries: int = 2, name: str = "power_meter") -> None:
        super().__init__(transport, name=name, retries=retries)
        self._heads: dict[tuple[int, int], MeterHead] = {}

    def channel(self, slot: int, chan: int = 1) -> MeterHead:
        """The head in ``slot``, channel ``chan`` (1-based, as on the front panel)."""
        key = (int(slot), int(chan))
        if key not in self._heads:
            check_range(key[0], 0, 64, "meter slot", "")
            check_range(key[1], 1, 4, "meter channel", "")
            self._heads[key] = MeterHead(self, *key)
        return self._heads[key]
