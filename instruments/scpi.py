"""SCPI drivers: tunable laser with a fiber switch module, and an 816x-style power meter.

Both speak the Keysight 8164B / 816x command set over pyvisa (``\\n`` terminations); see
docs/protocol-scpi.md for every command, the source of each fact and the section
"Framing and faults". What the drivers guarantee (docs/instruments.md):

* **every exchange is framed** with an IEEE 488.2 tag: the message is
  ``*ESE <tag>;<units>;*ESR?;*ESE?``, the tag a counter 1..255, and a reply is ours only
  when it ends with that tag. A late, duplicated, unsolicited or corrupted line is
  discarded (never taken for another command's reply); a missing reply (timeout, dropped
  link) reopens the session and drains the error queue before the exchange is retried.
* **every event is seen**: ``*ESR?`` in the same message reports what happened while it
  ran: an error bit makes the driver drain ``SYST:ERR?`` (a refusal raises
  :class:`DeviceError` / :class:`UnknownCommandError` with the instrument's text once it
  repeats), the Power-On bit (PON, bit 7) means the instrument **restarted**.
* **every setting is confirmed**: ``<setting>;*OPC?;<read-back>`` in one message; the
  read-back must equal what was asked, else the setting is resent (settings are absolute)
  or :class:`SettingLostError` is raised. The driver *owns* each setting it confirmed.
* **the driver knows the state or refuses to act**: after a restart, or any fault that
  may have changed the instrument behind the driver's back (a lost reply, a stray line,
  a refusal), it re-applies every setting it owns in one message and reads them all back
  before it returns or sends anything else; a setting that failed is thereby put back to
  its last confirmed value (all or nothing). When that is impossible every call raises
  :class:`SettingsUnknownError` until it succeeds (or :meth:`ScpiInstrument.reconnect`).
* **every value read is asked twice in the same message** (a reading: ``READ?`` then
  ``FETC?``) and the two copies must agree, so a reply corrupted on the line is retried,
  never returned; **every power reading carries its unit** (``POW:UNIT?`` in the same
  message): a reading in W is never taken for dBm.

The laser's mainframe also holds a 1xN fiber switch module (slot ``switch_slot``,
81595B-style ``ROUT<slot>:CHAN<ch> A,<k>``) that sends the laser into one of N fibers;
the bench config maps switch outputs to mesh ports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from instruments.base import Channel, Instrument, as_float, check_range
from instruments.errors import (
    BenchConfigError,
    ConnectionLostError,
    DeviceError,
    GarbledReplyError,
    InstrumentError,
    InstrumentTimeoutError,
    SettingLostError,
    SettingsUnknownError,
    TransientError,
    UnknownCommandError,
)
from instruments.scpi_text import split_outside_quotes
from instruments.transport import Transport, VisaTransport

T = TypeVar("T")

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
RANGE_DBM = (-60.0, 10.0)  # manual range
RANGE_STEP_DB = 10.0  # the 816x range moves in 10 dB steps: a setting is rounded to one before sending

# -- framing (IEEE 488.2) -----------------------------------------------------------------
# The tag lives in the Standard Event Status Enable register: *ESE takes 0..255 (§10.10) and
# *ESE? returns it; it has no effect unless service requests are used. 0 is its power-on
# value, so tags run 1..255 and a stale reply would need 255 newer frames to collide.
TAG_MODULUS = 255
ESR_PON = 128  # Standard Event Status Register bit 7: power on (§11.5.1.2)
ESR_ERROR_BITS = 4 | 8 | 16 | 32  # query, device-dependent, execution, command error (§11.5.1)
FRAME_TAIL = ("*ESR?", "*ESE?")
# Lines discarded while waiting for one reply before the exchange counts as failed: one
# late reply, one duplicate and one unsolicited line can precede it; 8 is ample margin.
STALE_LINES_MAX = 8
# A frame that reports a restart is redone after the settings are re-applied; this many
# restarts within one call mean the instrument is rebooting in a loop.
RESTART_REDOS = 2
# Read-back tolerances: what a confirmed setting may differ from the value sent.
# 1 pm: ten times the 81600B's 0.1 pm setting resolution (the instrument may round to it),
# far below the smallest wavelength step the calibration uses (10 pm).
WAVELENGTH_TOLERANCE_NM = 1e-3
# 0.01 dB: we send 3 decimals of dBm; a read-back in W converts back to within 1e-6 dB.
POWER_TOLERANCE_DB = 0.01
# Averaging time: sent with 4 decimals of s, read back in NR3 (8 decimals of mantissa).
ATIM_TOLERANCE_S = 1e-6
RANGE_TOLERANCE_DB = 1e-6  # range values are whole multiples of 10 dB once rounded


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


def _switch(reply: str) -> int:
    """``A,<k>`` (the switch route query) -> k."""
    try:
        return int(reply.split(",")[1])
    except (IndexError, ValueError) as exc:
        raise GarbledReplyError(f"switch reply {reply!r}, expected A,<k>") from exc


def _dbm(watts: float) -> float:
    if watts <= 0:
        raise GarbledReplyError(f"a power of {watts:g} W has no dBm value")
    return 10 * math.log10(watts * 1e3)


def _power_dbm(unit_reply: str, value_reply: str) -> float:
    """A power with the unit it is in (``+0`` dBm / ``+1`` W) -> dBm."""
    value = _float(value_reply)
    return value if not _flag(unit_reply) else _dbm(value)


def split_replies(line: str) -> list[str]:
    """A response line -> its units (IEEE 488.2 joins them with ``;``; quoted text may hold one)."""
    return [part.strip() for part in split_outside_quotes(line, ";")]


def _absolute(unit: str) -> str:
    """A program message unit made independent of the path the previous unit left."""
    return unit if unit.startswith((":", "*")) else ":" + unit


@dataclass(frozen=True)
class Setting:
    """One setting: the command, and the queries whose replies confirm it.

    Attributes:
        key: what it sets (one owned value per key); None: not owned (no read-back).
        command: the setting as sent (``SOUR0:WAV 1550.0000NM``).
        readback: queries answering the value now in force.
        parse: their replies -> the value, in the unit of ``expected``.
        expected: the value the instrument must report (as sent, after rounding).
        tolerance: largest accepted difference for numbers (same unit).
    """

    key: str | None
    command: str
    readback: tuple[str, ...] = ()
    parse: Callable[[list[str]], Any] | None = None
    expected: Any = None
    tolerance: float = 0.0

    def check(self, replies: list[str], name: str) -> None:
        """Raise :class:`SettingLostError` unless ``replies`` report :attr:`expected`."""
        if self.parse is None:
            return
        got = self.parse(replies)
        if isinstance(self.expected, float):
            ok = abs(got - self.expected) <= self.tolerance
        else:
            ok = got == self.expected
        if not ok:
            raise SettingLostError(
                f"{name}: {self.command!r} was not applied: the instrument reports {got!r}, expected "
                f"{self.expected!r}; resent, or check that nothing else controls the instrument")


@dataclass
class _Frame:
    replies: list[str]
    esr: int
    complete: bool


def scpi_control(get_cmd: str | None, set_cmd: str | None, doc: str, *,
                 parse: Callable[[str], Any] = _float, limits: tuple[float, float] | None = None,
                 unit: str = "", fmt: Callable[[float], str] = repr, tolerance: float = 0.0) -> property:
    """A property: ``get_cmd`` queried (twice, compared) and parsed; ``set_cmd`` a confirmed setting.

    Templates use the owner's ids (``{src}``, ``{slot}``) and ``{value}``. Limits are
    checked before anything is sent; numpy scalars are welcome; booleans go as 0/1. The
    setting is read back with ``get_cmd`` and must equal the value sent within
    ``tolerance`` (in the property's unit); the driver then owns it.
    """

    def fget(self: Any) -> Any:
        owner = getattr(self, "parent", self)
        return owner.query_value(get_cmd.format(**self.ids), parse)  # type: ignore[union-attr]

    def fset(self: Any, value: Any) -> None:
        expected: Any
        if isinstance(value, bool | np.bool_):
            text, expected = ("1" if value else "0"), bool(value)
        else:
            what = doc.split(" (", maxsplit=1)[0]
            text = fmt(check_range(value, *limits, what, unit) if limits else as_float(value, what))
            expected = float(text)
        query = get_cmd.format(**self.ids)  # type: ignore[union-attr]
        owner = getattr(self, "parent", self)
        owner.apply(Setting(query, set_cmd.format(value=text, **self.ids), (query,),  # type: ignore[union-attr]
                            lambda r: parse(r[0]), expected, tolerance))

    return property(fget if get_cmd else None, fset if set_cmd else None, doc=doc)


class ScpiInstrument(Instrument):
    """Common SCPI: framed exchanges, confirmed and owned settings, restart recovery.

    Args:
        transport: VISA transport.
        expected_idn: text the ``*IDN?`` reply must contain (``"8164B"``); None: any.
        retries: extra attempts after a transient fault (lost or unmatched reply, dropped
            link, setting not confirmed); see :class:`~instruments.base.Instrument`.
        name: used in log lines and error messages.

    Attributes:
        restarts: instrument restarts seen (PON) since the driver was made.
        faults: exchanges that went wrong and were recovered (or raised).
    """

    ids: dict[str, Any] = {}  # noqa: RUF012 -- template ids, overridden per instance

    def __init__(self, transport: Transport, *, expected_idn: str | None = None, retries: int = 2,
                 name: str = "instrument") -> None:
        super().__init__(transport, name=name, retries=retries)
        self.expected_idn = expected_idn
        self.restarts = 0
        self.faults = 0
        self._tag = 0
        self._owned: dict[str, Setting] = {}
        self._unsure: str | None = None  # why the owned settings are not known to hold
        self._restoring = False

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

    # -- public API ---------------------------------------------------------------------------
    def connect(self) -> str:
        """``*CLS`` (an earlier client's errors are not ours), then ``*IDN?`` checked; the identity."""
        with self.lock:
            self._attempts(["*CLS", "*OPC?"], 1, self._opc_done, "*CLS")
            idn = self.identity()
        if self.expected_idn and self.expected_idn.lower() not in idn.lower():
            raise BenchConfigError(
                f"{self.name}: the instrument answers *IDN? with {idn!r}, but the bench config "
                f"expects {self.expected_idn!r}; check the address (another instrument?) or the "
                "idn key of its section")
        return idn

    def reconnect(self) -> None:
        """Reopen the link, :meth:`connect` again, and re-apply every setting the driver owns."""
        with self.lock:
            super().reconnect()
            self._mark("a reconnect")
            self.connect()

    def identity(self) -> str:
        """``*IDN?``: maker, model, serial, firmware (four fields, IEEE 488.2 §10.14)."""
        def check(reply: str) -> str:
            if reply.count(",") != IDN_FIELDS - 1:
                raise GarbledReplyError(f"{self.name}: *IDN? gave {reply!r}, expected 4 fields")
            return reply
        return self.query_value("*IDN?", check)

    def reset(self) -> None:
        """``*RST`` (factory settings; the laser output goes off); the driver then owns nothing."""
        with self.lock:
            self.apply(Setting(None, "*RST"))
            self._owned.clear()

    @property
    def owned(self) -> dict[str, Any]:
        """The settings the driver owns: read-back query -> the value it confirmed."""
        return {k: s.expected for k, s in self._owned.items()}

    def setting(self, command: str) -> None:
        """A setting without read-back: ``command;*OPC?``; raises when the instrument refuses it."""
        self.apply(Setting(None, command))

    def write(self, command: str) -> None:
        """Same as :meth:`setting` (every SCPI command is confirmed)."""
        self.setting(command)

    def apply(self, *settings: Setting) -> None:
        """Send ``settings`` in one message with ``*OPC?`` and their read-backs; own them once confirmed."""
        what = "; ".join(s.command for s in settings)
        units, n = self._settle_units(settings)
        self._transact(units, n, lambda r: self._settled(settings, r), what)

    def query_value(self, command: str, parse: Callable[[str], T]) -> T:
        """A query asked twice in one message; the copies must agree (a corrupted reply is retried)."""
        def accept(replies: list[str]) -> T:
            first, second = replies
            if first != second:
                raise GarbledReplyError(f"{self.name}: {command} answered {first!r} then {second!r} in one "
                                        "message: a reply corrupted on the line")
            return parse(first)
        return self._transact([command, command], 2, accept, command)

    def query(self, command: str) -> str:
        """Any query (compound allowed), framed; its reply units joined with ``;``."""
        return self._transact([command], None, ";".join, command)

    def ask(self, command: str, check: Callable[[str, str], Any]) -> Any:
        """Framed query; ``check(command, reply)`` may raise a transient error to have it retried."""
        return self._transact([command], None, lambda r: check(command, ";".join(r)), command)

    def errors(self, limit: int = ERROR_DRAIN_LIMIT) -> list[tuple[int, str]]:
        """Drain the error queue (``SYST:ERR?`` until code 0); returns (code, text) pairs."""
        with self.lock:
            return self._drain_errors(limit)

    def check_errors(self, command: str | None = None) -> None:
        """Raise when the error queue holds anything (``command``: what was just sent)."""
        errs = self.errors()
        if errs:
            raise _device_error(self.name, command, errs)

    # -- one exchange -------------------------------------------------------------------------
    def _next_tag(self) -> int:
        self._tag = self._tag % TAG_MODULUS + 1
        return self._tag

    def _frame(self, units: Sequence[str], n_replies: int | None) -> _Frame:
        """Send ``*ESE <tag>;<units>;*ESR?;*ESE?`` once; read until the line that ends with the tag."""
        self._drain_waiting()
        tag = self._next_tag()
        self._send(";".join([f"*ESE {tag}", *(_absolute(u) for u in units), *FRAME_TAIL]))
        for _ in range(STALE_LINES_MAX + 1):
            try:
                line = self.transport.read()
            except GarbledReplyError as exc:  # an undecodable line is not our reply either
                self._discard(repr(exc), tag)
                continue
            self.log.debug("%s -> %r", self.name, line)
            units_in = split_replies(line)
            if len(units_in) >= len(FRAME_TAIL) and units_in[-1].lstrip("+") == str(tag):
                try:
                    esr = int(units_in[-2])
                except ValueError as exc:
                    raise GarbledReplyError(f"{self.name}: *ESR? gave {units_in[-2]!r}") from exc
                body = units_in[:-len(FRAME_TAIL)]
                return _Frame(body, esr, n_replies is None or len(body) == n_replies)
            self._discard(line, tag)
        raise GarbledReplyError(f"{self.name}: {STALE_LINES_MAX + 1} lines came, none the reply to frame "
                                f"{tag}; the link is noisy or another program shares the session")

    def _discard(self, line: str, tag: int) -> None:
        self.log.warning("%s: discarded %r while waiting for the reply to frame %d", self.name, line, tag)
        self._mark(f"an unexpected line {line!r}")

    def _drain_waiting(self) -> None:
        """Take input already waiting before a command goes out (transports that can say so)."""
        waiting = getattr(self.transport, "waiting_lines", None)
        if callable(waiting):
            for line in waiting():
                self._discard(line, self._tag + 1)

    # -- retries and recovery -------------------------------------------------------------------
    def _transact(self, units: Sequence[str], n_replies: int | None, accept: Callable[[list[str]], T],
                  what: str) -> T:
        """One framed exchange with retries, between two checks that the owned settings hold."""
        with self.lock:
            self._recover(quiet=False)
            try:
                result = self._attempts(units, n_replies, accept, what)
            except InstrumentError:
                self._recover(quiet=True)  # all or nothing: a failed setting is put back
                raise
            self._recover(quiet=False)
            return result

    def _attempts(self, units: Sequence[str], n_replies: int | None, accept: Callable[[list[str]], T],
                  what: str) -> T:
        """Up to ``1 + retries`` frames until ``accept`` takes the replies (no owned-state checks)."""
        last: InstrumentError | None = None
        refused: int | None = None
        attempt, redos = 0, 0
        while attempt <= self.retries:
            try:
                frame = self._frame(units, n_replies)
                if frame.esr & ESR_PON:
                    redos += 1
                    self._on_restart(what, redos)
                    continue  # the frame ran on a restarted instrument: redo it, settings re-applied
                if frame.esr & ESR_ERROR_BITS or not frame.complete:
                    self._refusal(what, frame, refused, final=attempt == self.retries)
                return accept(frame.replies)
            except _RefusedError as exc:
                last, refused = exc, exc.code
                self.faults += 1
            except TransientError as exc:
                last = exc
                errs = self._after_failure(exc, what)
                if errs:  # a command error ends the message before its tag: no reply, but queued
                    err = _device_error(self.name, what, errs)
                    if attempt == self.retries or errs[0][0] == refused:
                        raise err from exc
                    refused = errs[0][0]
            attempt += 1
        assert last is not None
        raise last

    def _refusal(self, what: str, frame: _Frame, refused: int | None, *, final: bool) -> None:
        """The frame flagged an error or lacks a reply: raise :class:`DeviceError` when the same
        error repeats (or on the last try), else :class:`_RefusedError` to resend once.

        A refusal may come from a command corrupted on the line, so it is resent once; the
        same error twice is the instrument's verdict.
        """
        self._mark(f"an error flagged by the instrument (ESR {frame.esr})")
        errs = self._drain_errors()
        if not errs:
            raise GarbledReplyError(f"{self.name}: {what!r}: ESR {frame.esr}, {len(frame.replies)} reply "
                                    "units and an empty error queue (a reply mangled on the line?)")
        err = _device_error(self.name, what, errs)
        if final or errs[0][0] == refused:
            raise err
        self.log.warning("%s: %s; resending once", self.name, err)
        raise _RefusedError(str(err), errs[0][0])

    def _after_failure(self, exc: TransientError, what: str) -> list[tuple[int, str]]:
        """Reopen a link that may be dead, then drain the error queue so the retry starts clean.

        Returns the errors drained: the instrument's verdict on the failed attempt (a command
        error drops the rest of the message, tag included, so it looks like a lost reply).
        """
        self.faults += 1
        self._mark(f"{type(exc).__name__} on {what!r}")
        self.log.warning("%s: %r failed (%s); recovering", self.name, what, exc)
        if isinstance(exc, InstrumentTimeoutError | ConnectionLostError):
            try:
                self.transport.reopen()
            except TransientError as again:
                self.log.warning("%s: reopening failed: %s", self.name, again)
                return []
        try:
            return self._drain_errors()
        except TransientError as again:
            self.log.warning("%s: draining the error queue failed: %s", self.name, again)
            return []

    def _drain_errors(self, limit: int = ERROR_DRAIN_LIMIT) -> list[tuple[int, str]]:
        """``SYST:ERR?`` frames until code 0 (single attempts: a fault raises)."""
        out: list[tuple[int, str]] = []
        for _ in range(limit):
            frame = self._frame(["SYST:ERR?"], 1)
            if frame.esr & ESR_PON:
                self._on_restart("SYST:ERR?", 1)
            if not frame.complete:
                raise GarbledReplyError(f"{self.name}: SYST:ERR? gave no entry")
            code, text = self._parse_error(frame.replies[0])
            if code == 0:
                return out
            out.append((code, text))
        return out

    def _on_restart(self, what: str, redos: int) -> None:
        """The instrument reported PON: count it and re-apply the owned settings."""
        self.restarts += 1
        self._mark("a restart of the instrument (PON)")
        self.log.warning("%s: the instrument restarted (PON during %r); re-applying %d settings", self.name,
                         what, len(self._owned))
        if redos > RESTART_REDOS:
            raise DeviceError(f"{self.name} restarted {redos} times during {what!r}; check its power "
                              "supply and front panel, then reconnect()")
        if not self._restoring:
            self._restore()

    def _mark(self, cause: str) -> None:
        """Something may have changed the instrument behind the driver's back."""
        if self._unsure is None:
            self._unsure = cause

    def _recover(self, *, quiet: bool) -> None:
        """If the owned settings may not hold, re-apply and read them back (or raise)."""
        if self._unsure is None or self._restoring:
            return
        cause = self._unsure
        try:
            self._restore()
        except InstrumentError as exc:
            self._unsure = cause
            if quiet:
                self.log.warning("%s: re-applying the settings after %s failed: %s", self.name, cause, exc)
                return
            raise SettingsUnknownError(
                f"{self.name}: after {cause} its settings ({', '.join(self._owned) or 'none'}) could not be "
                f"re-applied and read back ({exc}); nothing else is sent until they are: check the link "
                "and the instrument, then call reconnect()") from exc

    def _restore(self) -> None:
        """Re-apply every owned setting in one message and read each back."""
        settings = tuple(self._owned.values())
        self._unsure = None
        if not settings:
            return
        self._restoring = True
        try:
            units, n = self._settle_units(settings)
            self._attempts(units, n, lambda r: self._settled(settings, r), "re-applying the owned settings")
        finally:
            self._restoring = False
        self._unsure = None
        self.log.info("%s: %d owned settings re-applied and confirmed", self.name, len(settings))

    # -- settings ---------------------------------------------------------------------------
    @staticmethod
    def _settle_units(settings: Sequence[Setting]) -> tuple[list[str], int]:
        units = [s.command for s in settings] + ["*OPC?"] + [q for s in settings for q in s.readback]
        return units, 1 + sum(len(s.readback) for s in settings)

    def _settled(self, settings: Sequence[Setting], replies: list[str]) -> None:
        """Check ``*OPC?`` and every read-back, then own the settings (newest last)."""
        self._opc_done(replies[:1])
        k = 1
        for s in settings:
            s.check(replies[k:k + len(s.readback)], self.name)
            k += len(s.readback)
        for s in settings:
            if s.key is not None:
                self._owned.pop(s.key, None)
                self._owned[s.key] = s

    def _opc_done(self, replies: list[str]) -> None:
        if replies[0] not in OPC_DONE:
            raise GarbledReplyError(f"{self.name}: *OPC? gave {replies[0]!r}")

    def _parse_error(self, reply: str) -> tuple[int, str]:
        m = _ERR.match(reply.strip())
        if not m:
            raise GarbledReplyError(f"{self.name}: SYST:ERR? gave {reply!r}")
        return int(m.group(1)), m.group(2)


class _RefusedError(TransientError):
    """A refusal resent once (it may come from a command corrupted on the line)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


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
        switch_slot: the switch module's slot (``ROUT<slot>:CHAN<ch>``).
        switch_channel: the switch module's channel (``ROUT<slot>:CHAN<ch>``).
        switch_outputs: number of switch outputs (1..N).
        expected_idn: see :class:`ScpiInstrument`.
        retries: see :class:`ScpiInstrument`.
        name: see :class:`ScpiInstrument`.

    After a restart the driver re-applies wavelength, power, switch output **and the output
    state** it set: an output the user switched on through this driver is switched on again.
    """

    def __init__(self, transport: Transport, *, source: int = 0, switch_slot: int = 1,
                 switch_channel: int = 1, switch_outputs: int = 64, expected_idn: str | None = None,
                 retries: int = 2, name: str = "laser") -> None:
        super().__init__(transport, expected_idn=expected_idn, name=name, retries=retries)
        self.ids = {"src": source, "sw": switch_slot, "swch": switch_channel}
        self.switch_outputs = switch_outputs

    wavelength_nm = scpi_control(
        "SOUR{src}:WAV?", "SOUR{src}:WAV {value}NM", "wavelength (nm, 1490..1640)", parse=_nm,
        limits=WAVELENGTH_NM, unit="nm", fmt=lambda x: f"{x:.4f}", tolerance=WAVELENGTH_TOLERANCE_NM)
    output_enabled = scpi_control(
        "SOUR{src}:POW:STAT?", "SOUR{src}:POW:STAT {value}", "laser output on (bool)", parse=_flag)

    def _power_queries(self) -> tuple[str, str]:
        return "SOUR{src}:POW:UNIT?".format(**self.ids), "SOUR{src}:POW?".format(**self.ids)

    @property
    def power_dbm(self) -> float:
        """Output power setting (dBm, -10..+13), read with its unit (W replies converted)."""
        unit_q, pow_q = self._power_queries()

        def accept(replies: list[str]) -> float:
            u1, u2, p1, p2 = replies
            if (u1, p1) != (u2, p2):
                raise GarbledReplyError(f"{self.name}: power read twice as {u1};{p1} and {u2};{p2}")
            return _power_dbm(u1, p1)
        return self._transact([unit_q, unit_q, pow_q, pow_q], 4, accept, pow_q)

    @power_dbm.setter
    def power_dbm(self, value: Any) -> None:
        # the DBM suffix makes the setting independent of the laser's POW:UNIT
        x = float(f"{check_range(value, *LASER_POWER_DBM, 'output power', 'dBm'):.3f}")
        unit_q, pow_q = self._power_queries()
        self.apply(Setting(pow_q, "SOUR{src}:POW {x:.3f}DBM".format(x=x, **self.ids), (unit_q, pow_q),
                           lambda r: _power_dbm(*r), x, POWER_TOLERANCE_DB))

    def _route(self) -> str:
        return f"ROUT{self.ids['sw']}:CHAN{self.ids['swch']}"

    def select_output(self, output: Any) -> None:
        """``ROUT<slot>:CHAN<ch> A,<k>``: send the laser to switch output ``k`` (1..N), confirmed."""
        k = int(check_range(output, 1, self.switch_outputs, "switch output", ""))
        query = f"{self._route()}?"
        self.apply(Setting(query, f"{self._route()} A,{k}", (query,), lambda r: _switch(r[0]), k))

    def selected_output(self) -> int:
        """``ROUT<slot>:CHAN<ch>?``: the switch output now selected."""
        return self.query_value(f"{self._route()}?", _switch)


class MeterHead(Channel):
    """One power sensor: ``SENS<slot>:CHAN<chan>`` / ``READ<slot>:CHAN<chan>``."""

    parent: PowerMeter

    wavelength_nm = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:WAV?", "SENS{slot}:CHAN{chan}:POW:WAV {value}NM",
        "calibration wavelength (nm, 800..1700)", parse=_nm, limits=METER_WAVELENGTH_NM, unit="nm",
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
        "automatic ranging (bool)", parse=_flag)
    unit_watts = scpi_control(
        "SENS{slot}:CHAN{chan}:POW:UNIT?", "SENS{slot}:CHAN{chan}:POW:UNIT {value}",
        "readings in W (True) or dBm (False)", parse=_flag)

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
            return int(_flag(u1)), _float(read)
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
            check_range(key[0], 0, 64, "meter slot", "")
            check_range(key[1], 1, 4, "meter channel", "")
            self._heads[key] = MeterHead(self, *key)
        return self._heads[key]
