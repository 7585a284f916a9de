"""The SCPI driver base: framed exchanges, confirmed and owned settings, restart recovery.

The drivers built on it, :class:`instruments.laser.TunableLaser` (with the fiber switch
module in its mainframe) and :class:`instruments.power_meter.PowerMeter`, speak the
Keysight 8164B / 816x command set over pyvisa (``\\n`` terminations); see
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

The pieces: the tagged message and its reply (:mod:`instruments.scpi_framing`), the error
queue (:mod:`instruments.scpi_error_queue`), confirmed settings and their declarative
properties (:mod:`instruments.scpi_settings`), reply parsers (:mod:`instruments.scpi_replies`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from instruments.base import Instrument
from instruments.errors import (
    BenchConfigError,
    ConnectionLostError,
    DeviceError,
    GarbledReplyError,
    InstrumentError,
    InstrumentTimeoutError,
    SettingsUnknownError,
    TransientError,
)
from instruments.scpi_error_queue import ERROR_DRAIN_LIMIT, device_error, parse_error_entry
from instruments.scpi_framing import (
    ESR_ERROR_BITS,
    ESR_PON,
    STALE_LINES_MAX,
    TAG_MODULUS,
    Frame,
    framed_message,
    tagged_frame,
)
from instruments.scpi_settings import Setting
from instruments.transport import Transport, VisaTransport

T = TypeVar("T")

OPC_DONE = ("1", "+1")  # IEEE 488.2 *OPC? answers the NR1 "1"; some firmware writes "+1"
IDN_FIELDS = 4  # IEEE 488.2 §10.14: maker, model, serial, firmware
# A frame that reports a restart is redone after the settings are re-applied; this many
# restarts within one call mean the instrument is rebooting in a loop.
RESTART_REDOS = 2


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
            raise device_error(self.name, command, errs)

    # -- one exchange -------------------------------------------------------------------------
    def _next_tag(self) -> int:
        self._tag = self._tag % TAG_MODULUS + 1
        return self._tag

    def _frame(self, units: Sequence[str], n_replies: int | None) -> Frame:
        """Send ``*ESE <tag>;<units>;*ESR?;*ESE?`` once; read until the line that ends with the tag."""
        self._drain_waiting()
        tag = self._next_tag()
        self._send(framed_message(tag, units))
        return self._await_frame(tag, n_replies)

    def _await_frame(self, tag: int, n_replies: int | None) -> Frame:
        """Read lines until the reply to frame ``tag``, discarding up to ``STALE_LINES_MAX`` others."""
        for _ in range(STALE_LINES_MAX + 1):
            try:
                line = self.transport.read()
            except GarbledReplyError as exc:  # an undecodable line is not our reply either
                self._discard(repr(exc), tag)
                continue
            self.log.debug("%s -> %r", self.name, line)
            frame = tagged_frame(line, tag, n_replies, self.name)
            if frame is not None:
                return frame
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
                refused = self._judge_failure(exc, what, refused, final=attempt == self.retries)
            attempt += 1
        assert last is not None
        raise last

    def _refusal(self, what: str, frame: Frame, refused: int | None, *, final: bool) -> None:
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
        err = device_error(self.name, what, errs)
        if final or errs[0][0] == refused:
            raise err
        self.log.warning("%s: %s; resending once", self.name, err)
        raise _RefusedError(str(err), errs[0][0])

    def _judge_failure(self, exc: TransientError, what: str, refused: int | None, *,
                       final: bool) -> int | None:
        """Recover from a failed attempt and judge the errors it left queued like a refusal:
        raise :class:`DeviceError` when the same error repeats (or on the last try).

        A command error ends the message before its tag: no reply, but queued. Returns the
        error code now refused once (``refused`` when nothing was queued).
        """
        errs = self._after_failure(exc, what)
        if not errs:
            return refused
        err = device_error(self.name, what, errs)
        if final or errs[0][0] == refused:
            raise err from exc
        return errs[0][0]

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
            code, text = parse_error_entry(frame.replies[0], self.name)
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


class _RefusedError(TransientError):
    """A refusal resent once (it may come from a command corrupted on the line)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
