"""SCPI drivers: tunable laser with a fiber switch module, and an 816x-style power meter.

Both speak the Keysight 8164B / 816x command set over pyvisa (``\\n`` terminations); see
docs/protocol-scpi.md for every command and the source of each fact. What the drivers
guarantee (DESIGN.md §6):

* **connect**: ``*CLS`` (an error an earlier client left in the queue is never blamed on
  our next setting), then ``*IDN?`` checked against the model the bench config expects.
* **every setting** travels as ``<setting>;*OPC?`` in one message, so the driver waits
  until the instrument has finished (a laser retuning, a switch moving) and a dropped
  connection loses the setting *and* its reply together: the retry resends both (settings
  are absolute, so resending is safe) or the call raises. Then ``SYST:ERR?`` is drained;
  any entry raises (:class:`UnknownCommandError` for -1xx command errors,
  :class:`DeviceError` otherwise) with the instrument's own text.
* **every power reading** asks for the unit in the same message
  (``SENS1:CHAN1:POW:UNIT?;:READ1:CHAN1:POW?``), so a reading in W is never taken for dBm,
  whoever changed the unit (another program, a reboot, a reconnect).
* a query the instrument does not answer is followed by ``SYST:ERR?``: when the
  instrument rejected it, the timeout becomes a :class:`DeviceError` at once (no retries).

The laser's mainframe also holds a 1xN fiber switch module (slot ``switch_slot``,
81595B-style ``ROUT<slot>:CHAN<ch> A,<k>``) that sends the laser into one of N fibers;
the bench config maps switch outputs to mesh ports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from instruments.base import Channel, Instrument, as_float, check_range
from instruments.errors import (
    BenchConfigError,
    DeviceError,
    GarbledReplyError,
    InstrumentTimeoutError,
    TransientError,
    UnknownCommandError,
)
from instruments.transport import Transport, VisaTransport

_ERR = re.compile(r'^([+-]?\d+)\s*,\s*"?(.*?)"?$')
OPC_DONE = ("1", "+1")  # IEEE 488.2 *OPC? answers the NR1 "1"; some firmware writes "+1"
ERROR_DRAIN_LIMIT = 32  # SYST:ERR? queries before giving up on an endless queue (queues hold ~30)
COMMAND_ERRORS = (-199, -100)  # SCPI-99 -1xx: the instrument did not understand the command
IDN_FIELDS = 4  # IEEE 488.2 §10.14: maker, model, serial, firmware
UNIT_DBM, UNIT_W = 0, 1  # 816x / 8164B POW:UNIT codes (query answers +0 / +1)
WAVELENGTH_NM = (1490.0, 1640.0)  # 81600B-class tunable laser of the bench
LASER_POWER_DBM = (-10.0, 13.0)
METER_WAVELENGTH_NM = (800.0, 1700.0)  # InGaAs 8163x / N774x heads
ATIM_S = (1e-4, 10.0)  # averaging time
RANGE_DBM = (-60.0, 10.0)  # manual range, 10 dB steps


def _float(reply: str) -> float:
    try:
        return float(reply)
    except ValueError as exc:
        raise GarbledReplyError(f"expected a number, got {reply!r}") from exc


def _nm(reply: str) -> float:
    """A wavelength reply in metres -> nm."""
    return _float(reply) * 1e9


def _flag(reply: str) -> bool:
    """A boolean reply: ``0``/``1`` (or ``+0``/``+1``)."""
    value = reply.strip().lstrip("+")
    if value not in ("0", "1"):
        raise GarbledReplyError(f"expected 0 or 1, got {reply!r}")
    return value == "1"


def _unit_and_value(reply: str) -> tuple[int, float]:
    """``+0;-1.2E+001`` (the reply to ``...:UNIT?;:...POW?``) -> (unit code, value)."""
    unit, sep, value = reply.partition(";")
    if not sep:
        raise GarbledReplyError(f"expected <unit>;<power>, got {reply!r}")
    return int(_flag(unit)), _float(value)


def _dbm(watts: float) -> float:
    if watts <= 0:
        raise GarbledReplyError(f"a power of {watts:g} W has no dBm value")
    return 10 * math.log10(watts * 1e3)


def scpi_control(get_cmd: str | None, set_cmd: str | None, doc: str, *,
                 parse: Callable[[str], Any] = _float, limits: tuple[float, float] | None = None,
                 unit: str = "", fmt: Callable[[float], str] = repr) -> property:
    """A property: ``get_cmd`` queried and parsed; ``set_cmd`` sent as a verified setting.

    Templates use the owner's ids (``{src}``, ``{slot}``) and ``{value}``. Limits are
    checked before anything is sent; numpy scalars are welcome; booleans go as 0/1.
    """

    def fget(self: Any) -> Any:
        return self.ask(get_cmd.format(**self.ids), lambda _cmd, reply: parse(reply))  # type: ignore[union-attr]

    def fset(self: Any, value: Any) -> None:
        if isinstance(value, bool | np.bool_):
            text = "1" if value else "0"
        else:
            what = doc.split(" (", maxsplit=1)[0]
            text = fmt(check_range(value, *limits, what, unit) if limits else as_float(value, what))
        owner = getattr(self, "parent", self)
        owner.setting(set_cmd.format(value=text, **self.ids))  # type: ignore[union-attr]

    return property(fget if get_cmd else None, fset if set_cmd else None, doc=doc)


class ScpiInstrument(Instrument):
    """Common SCPI: ``*CLS``/``*IDN?`` on connect, verified settings, error queue draining.

    Args:
        transport: VISA transport.
        expected_idn: text the ``*IDN?`` reply must contain (``"8164B"``); None: any.
        retries, name: see :class:`~instruments.base.Instrument`.
    """

    ids: dict[str, Any] = {}  # noqa: RUF012 -- template ids, overridden per instance

    def __init__(self, transport: Transport, *, expected_idn: str | None = None, retries: int = 2,
                 name: str = "instrument") -> None:
        super().__init__(transport, name=name, retries=retries)
        self.expected_idn = expected_idn

    @classmethod
    def open(cls, address: str, *, timeout_s: float = 2.0, **kwargs: Any) -> ScpiInstrument:
        """Open a VISA resource (``TCPIP::127.0.0.1::5025::SOCKET``) and :meth:`connect`."""
        inst = cls(VisaTransport(address, timeout_s=timeout_s), **kwargs)
        try:
            inst.connect()
        except BaseException:
            inst.close()
            raise
        return inst

    def connect(self) -> str:
        """``*CLS`` then ``*IDN?`` (checked against ``expected_idn``); returns the identity."""
        with self.lock:
            self.write("*CLS")
            idn = self.identity()
        if self.expected_idn and self.expected_idn.lower() not in idn.lower():
            raise BenchConfigError(
                f"{self.name}: the instrument answers *IDN? with {idn!r}, but the bench config "
                f"expects {self.expected_idn!r}; check the address (another instrument?) or the "
                "idn key of its section")
        return idn

    def reconnect(self) -> None:
        """Reopen the link, then :meth:`connect` again (clear the queue, check the model)."""
        with self.lock:
            super().reconnect()
            self.connect()

    def identity(self) -> str:
        """``*IDN?``: maker, model, serial, firmware (four fields, IEEE 488.2 §10.14)."""
        def check(_cmd: str, reply: str) -> str:
            if reply.count(",") != IDN_FIELDS - 1:
                raise GarbledReplyError(f"{self.name}: *IDN? gave {reply!r}, expected 4 fields")
            return reply
        return self.ask("*IDN?", check)

    def reset(self) -> None:
        """``*RST`` (factory settings; the laser output goes off), verified like a setting."""
        self.setting("*RST")

    def setting(self, command: str) -> None:
        """Send ``command;*OPC?``, wait for the ``1``, then raise if the error queue holds anything."""
        def done(_cmd: str, reply: str) -> None:
            if reply.strip() not in OPC_DONE:
                raise GarbledReplyError(f"{self.name}: *OPC? after {command!r} gave {reply!r}")
        with self.lock:
            self.ask(f"{command};*OPC?", done)
            self.check_errors(command)

    def errors(self, limit: int = ERROR_DRAIN_LIMIT) -> list[tuple[int, str]]:
        """Drain the error queue (``SYST:ERR?`` until code 0); returns (code, text) pairs."""
        out: list[tuple[int, str]] = []
        with self.lock:
            for _ in range(limit):
                code, text = self.ask("SYST:ERR?", self._parse_error)
                if code == 0:
                    return out
                out.append((code, text))
        return out

    def check_errors(self, command: str | None = None) -> None:
        """Raise when the error queue holds anything (``command``: what was just sent)."""
        errs = self.errors()
        if errs:
            raise _device_error(self.name, command, errs)

    def _parse_error(self, _cmd: str, reply: str) -> tuple[int, str]:
        m = _ERR.match(reply.strip())
        if not m:
            raise GarbledReplyError(f"{self.name}: SYST:ERR? gave {reply!r}")
        return int(m.group(1)), m.group(2)

    def _exchange(self, command: str) -> str:
        """A query; when it times out, ask the error queue whether the instrument refused it."""
        try:
            return super()._exchange(command)
        except InstrumentTimeoutError:
            errs = self._errors_after_timeout()
            if errs:
                raise _device_error(self.name, command, errs) from None
            raise

    def _errors_after_timeout(self) -> list[tuple[int, str]]:
        """Errors queued by a query that got no reply ([] when that cannot be told)."""
        out: list[tuple[int, str]] = []
        try:
            self.transport.clear()  # a late reply must not be taken for SYST:ERR?'s
            for _ in range(ERROR_DRAIN_LIMIT):
                self._send("SYST:ERR?")
                code, text = self._parse_error("SYST:ERR?", self.transport.read())
                if code == 0:
                    break
                out.append((code, text))
        except TransientError:
            return out
        return out


def _device_error(name: str, command: str | None, errs: list[tuple[int, str]]) -> DeviceError:
    text = "; ".join(f"{c}: {t}" for c, t in errs)
    what = f"{command!r}" if command else "a command"
    if COMMAND_ERRORS[0] <= errs[0][0] <= COMMAND_ERRORS[1]:
        return UnknownCommandError(
            f"{name} rejected {what}: {text}; the driver and the instrument disagree on the command "
            "set: check the model (*IDN?) and its firmware", code=errs[0][0])
    return DeviceError(f"{name} refused {what}: {text}; check the value against the instrument's "
                       "limits and state (locked? output off?)", code=errs[0][0])


class TunableLaser(ScpiInstrument):
    """Tunable laser source (81600B-style, slot 0) plus a fiber switch module in the same mainframe.

    Args:
        transport: VISA transport.
        source: laser slot (``SOUR<n>``), 0 for the 8164B's back-loadable laser.
        switch_slot, switch_channel: the switch module (``ROUT<slot>:CHAN<ch>``).
        switch_outputs: number of switch outputs (1..N).
        expected_idn, retries, name: see :class:`ScpiInstrument`.
    """

    def __init__(self, transport: Transport, *, source: int = 0, switch_slot: int = 1,
                 switch_channel: int = 1, switch_outputs: int = 64, expected_idn: str | None = None,
                 retries: int = 2, name: str = "laser") -> None:
        super().__init__(transport, expected_idn=expected_idn, name=name, retries=retries)
        self.ids = {"src": source, "sw": switch_slot, "swch": switch_channel}
        self.switch_outputs = switch_outputs

    wavelength_nm = scpi_control(
        "SOUR{src}:WAV?", "SOUR{src}:WAV {value}NM", "wavelength (nm, 1490..1640)", parse=_nm,
        limits=WAVELENGTH_NM, unit="nm", fmt=lambda x: f"{x:.4f}")
    output_enabled = scpi_control(
        "SOUR{src}:POW:STAT?", "SOUR{src}:POW:STAT {value}", "laser output on (bool)", parse=_flag)

    @property
    def power_dbm(self) -> float:
        """Output power setting (dBm, -10..+13), read with its unit (W replies converted)."""
        cmd = "SOUR{src}:POW:UNIT?;:SOUR{src}:POW?".format(**self.ids)

        def parse(_cmd: str, reply: str) -> float:
            unit, value = _unit_and_value(reply)
            return value if unit == UNIT_DBM else _dbm(value)
        return self.ask(cmd, parse)

    @power_dbm.setter
    def power_dbm(self, value: Any) -> None:
        # the DBM suffix makes the setting independent of the laser's POW:UNIT
        x = check_range(value, *LASER_POWER_DBM, "output power", "dBm")
        self.setting("SOUR{src}:POW {x:.3f}DBM".format(x=x, **self.ids))

    def select_output(self, output: Any) -> None:
        """``ROUT<slot>:CHAN<ch> A,<k>``: send the laser to switch output ``k`` (1..N)."""
        k = int(check_range(output, 1, self.switch_outputs, "switch output", ""))
        self.setting(f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']} A,{k}")

    def selected_output(self) -> int:
        """``ROUT<slot>:CHAN<ch>?``: the switch output now selected."""
        def parse(_cmd: str, reply: str) -> int:
            try:
                return int(reply.split(",")[1])
            except (IndexError, ValueError) as exc:
                raise GarbledReplyError(f"{self.name}: switch reply {reply!r}, expected A,<k>") from exc
        return self.ask(f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']}?", parse)


class MeterHead(Channel):
    """One power sensor: ``SENS<slot>:CHAN<chan>`` / ``READ<slot>:CHAN<chan>``."""

    parent: ScpiInstrument

    wavelength_nm = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:WAV?", "SENS{slot}:CHAN{chan}:POW:WAV {value}NM",
        "calibration wavelength (nm, 800..1700)", parse=_nm, limits=METER_WAVELENGTH_NM, unit="nm",
        fmt=lambda x: f"{x:.4f}")
    averaging_time_s = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:ATIM?", "SENS{slot}:CHAN{chan}:POW:ATIM {value}S",
        "averaging time (s, 1e-4..10)", limits=ATIM_S, unit="s", fmt=lambda x: f"{x:.4f}")
    range_dbm = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:RANG?", "SENS{slot}:CHAN{chan}:POW:RANG {value}DBM",
        "manual range (dBm, -60..+10, 10 dB steps)", limits=RANGE_DBM, unit="dBm",
        fmt=lambda x: f"{x:.0f}")
    auto_range = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:RANG:AUTO?", "SENS{slot}:CHAN{chan}:POW:RANG:AUTO {value}",
        "automatic ranging (bool)", parse=_flag)
    unit_watts = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:UNIT?", "SENS{slot}:CHAN{chan}:POW:UNIT {value}",
        "readings in W (True) or dBm (False)", parse=_flag)

    def __init__(self, parent: ScpiInstrument, slot: int, chan: int) -> None:
        super().__init__(parent, slot=slot, chan=chan)

    def _read(self) -> tuple[int, float]:
        """One reading with the unit it is in: ``UNIT?;:READ?`` in one message."""
        cmd = "SENS{slot}:CHAN{chan}:POW:UNIT?;:READ{slot}:CHAN{chan}:POW?".format(**self.ids)
        return self.ask(cmd, lambda _cmd, reply: _unit_and_value(reply))

    def read_power_dbm(self) -> float:
        """One reading in dBm, whatever unit the head was left in.

        A reading in W is converted here and the head is switched to dBm for the next
        ones; a W reading of zero or less (noise after zeroing) is taken again in dBm.
        """
        unit, value = self._read()
        if unit == UNIT_DBM:
            return value
        self.unit_watts = False
        if value > 0:
            return _dbm(value)
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
    """Optical power meter mainframe with sensor heads addressed by (slot, channel)."""

    def __init__(self, transport: Transport, *, expected_idn: str | None = None, retries: int = 2,
                 name: str = "power_meter") -> None:
        super().__init__(transport, expected_idn=expected_idn, name=name, retries=retries)
        self._heads: dict[tuple[int, int], MeterHead] = {}

    def channel(self, slot: Any, chan: Any = 1) -> MeterHead:
        """The head in ``slot``, channel ``chan`` (1-based, as on the front panel)."""
        key = (int(slot), int(chan))
        if key not in self._heads:
            check_range(key[0], 0, 64, "meter slot", "")
            check_range(key[1], 1, 4, "meter channel", "")
            self._heads[key] = MeterHead(self, *key)
        return self._heads[key]
