"""Multichannel heater driver: a daisy chain of Qontrol modules (Q8iv, Q8b, Q8a) over serial.

The wire protocol is the vendor's own (:mod:`instruments.qontrol_protocol`), ASCII or
binary. On open the driver asks ``ID?``, resets and reads the daisy chain (``NUP=0``,
``NUPALL?``, ``NCHAN?``) and takes each module's full scale from its type; channels are
numbered across the chain as the vendor library numbers them.

=======================  ====================================  =======================
ASCII command            meaning                               reply
=======================  ====================================  =======================
``I<ch>=<mA>``           set one channel's current             ``OK``
``IVEC<first>=v,...``    set consecutive channels of a module  ``OK``
``V<ch>=<V>``            set one channel's voltage             ``OK``
``I<ch>?`` / ``V<ch>?``  one current / voltage                 ``+1.2500 mA`` / ``+0.3100 V``
``IALL?`` / ``VALL?``    every channel, one line each          ``+1.2500 mA`` ...
``IMAX<ch>=`` / ``VMAX``  channel current / voltage limit       ``OK``
``ID?``, ``NUPALL?``     identity, daisy chain                 ``Q8iv-00A1``, ``Q8iv-00A1: 0``
=======================  ====================================  =======================

Every exchange is framed: input already waiting is taken and examined before a command
goes out (a late reply is never read as the next one's; an unsolicited ``E90`` means a
module restarted, so the chip's state is unknown); a reply that does not fit its command
forces a resynchronisation (``ID?`` until the id comes back) before anything else is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from instruments import qontrol_protocol as qp
from instruments.base import Instrument, as_float, check_range
from instruments.errors import (
    BadChannelError,
    ConnectionLostError,
    DeviceError,
    GarbledReplyError,
    HeaterFaultError,
    InstrumentError,
    InstrumentTimeoutError,
    LimitError,
    ModuleResetError,
    OverCurrentError,
    OverVoltageError,
    TransientError,
    UnknownCommandError,
)
from instruments.transport import SerialTransport, Transport

FULL_SCALE_MA = qp.MODULE_TYPES["Q8iv"][1]  # the Q8iv, the heater driver of the design
FULL_SCALE_V = qp.MODULE_TYPES["Q8iv"][2]
# Total-power guard: heaters are assumed no hotter than this resistance (kOhm; nominal is
# 0.25 kOhm rising ~2 %/mA), so R_max * I^2 over-estimates the electrical power.
WORST_RESISTANCE_KOHM = 0.35
# In voltage mode the coolest (lowest) resistance dissipates most: P = V^2 / R_min.
LOWEST_RESISTANCE_KOHM = 0.2
MAX_TOTAL_POWER_MW = 1000.0
CHANNELS_PER_MODULE = 8
BAUDRATE = 115200
ASCII_DECIMALS = 4  # the modules report 4 decimals (0.1 uA, 0.1 mV); we send as many
# Replies come back after the module's firmware and the USB-serial adapter's latency timer
# (FTDI: 1 ms when tuned, 16 ms by default); the vendor's recorded sessions show 2-28 ms.
REPLY_TURNAROUND_S = 0.002
# Every exchange ends with a query whose reply marks its end (a setting: a read-back of
# its channel; a query: ID?), so a reply that came late or twice is never taken for ours.
SENTINEL = b"ID?\n"
# A reading is asked this many times in one write and the answers must agree within the
# scatter below: a byte changed on the line inside a value is otherwise indistinguishable
# from the value (a changed digit above the last moves it by >= 1 uA x 10).
QUERY_COPIES = 2
# Real modules report measured values, not settings (the vendor's recorded sessions,
# instruments/sim/heater_device.py ``Readback``): each channel has a fixed zero offset
# (-11.2..+1.9 uA, +0..0.9 mV recorded) and every reading a fresh scatter (consecutive
# readings 0..1.4 uA and 0..1.9 mV apart). The two are treated apart:
# * SCATTER_TOLERANCE: two readings of one channel, or a read-back and the setting plus
#   the channel's known offset, agree within this (mA / V): 2x the largest recorded
#   difference (~10 sigma of one reading). 3 uA is ~9 mrad of heater phase.
# * OFFSET_LIMIT: a channel's offset, learned from its first confirmed setting and
#   remembered, is at most this (mA / V): 2x the largest recorded. A read-back further off
#   is not a module reading with an offset but a setting not held.
SCATTER_TOLERANCE = {"mA": 0.003, "V": 0.005}
OFFSET_LIMIT = {"mA": 0.025, "V": 0.010}
# A limit (IMAX, VMAX) reads back as set (a stored number, not a measurement: no offset),
# within the scatter tolerance that also covers a binary word's rounding (0.37 uA).
MEASURED = ("I", "V")  # the settings whose read-back is a measurement (offset and scatter)
# The learned offset is the mean of the read-back residuals, over at most this many (so it
# keeps following a slow change of the module's offset with temperature).
OFFSET_AVERAGING = 16
# The codes a read-back query itself can draw (a setting's own refusal, E01/E02, cannot).
QUERY_REFUSALS = qp.RESEND_CODES | {qp.E_UNKNOWN_COMMAND, qp.E_BAD_PARAMETER, qp.E_BAD_CHANNEL}
VERIFY_MODES = ("last", "all")
# A heater channel whose module reaches its voltage compliance (E01) on a current that the
# hottest heater assumed (WORST_RESISTANCE_KOHM) takes at less than this share of the
# compliance is not a heater too resistive for the setting but an open one.
OPEN_HEATER_SHARE = 0.5
# How long a resynchronisation waits for the module's id after flushing (s).
RESYNC_TRIES = 3

_ERROR_TYPES: dict[int, type[DeviceError]] = {
    qp.E_OVER_VOLTAGE: OverVoltageError, qp.E_OVER_CURRENT: OverCurrentError,
    qp.E_UNKNOWN_COMMAND: UnknownCommandError, qp.E_BAD_CHANNEL: BadChannelError,
}
_ADVICE: dict[int, str] = {
    qp.E_OVER_VOLTAGE: "voltage compliance reached; check the heater for an open circuit or raise vmax",
    qp.E_OVER_CURRENT: "over the channel's current limit (imax); lower it or raise imax",
    qp.E_UNKNOWN_COMMAND: "the firmware does not know this command; check the firmware version",
    qp.E_BAD_PARAMETER: "the value was refused; check its range for this module type",
    qp.E_BAD_CHANNEL: "no such channel; check the daisy chain (NUPALL?)",
}


def _fmt(x: float) -> str:
    return f"{x:.{ASCII_DECIMALS}f}"


def _unit(name: str) -> str:
    return "mA" if name in ("I", "IMAX") else "V"


def readback_misses(residuals: np.ndarray, offsets: np.ndarray, unit: str) -> np.ndarray:
    """Which read-backs do not confirm their setting.

    ``residuals``: reading minus setting; ``offsets``: each channel's known offset (NaN
    where not yet learned, then anything within :data:`OFFSET_LIMIT` passes and becomes
    it). Example:

        >>> readback_misses(np.array([-0.0102, 0.0004, -0.0102]), np.array([np.nan, 0.0, 0.0]), "mA")
        array([False, False,  True])
    """
    known = np.isfinite(offsets)
    off = np.where(known, offsets, 0.0)
    limit = np.where(known, SCATTER_TOLERANCE[unit], OFFSET_LIMIT[unit] + SCATTER_TOLERANCE[unit])
    return np.abs(residuals - off) > limit


def held_settings(readings: np.ndarray, offsets: np.ndarray, known: np.ndarray, full: np.ndarray,
                  unit: str) -> np.ndarray:
    """What each channel holds, from its readings (mA or V).

    A channel whose reading, less its known offset, is within the scatter of the setting
    this driver confirmed holds exactly that setting; one of unknown offset reading within
    :data:`OFFSET_LIMIT` of zero holds zero; any other holds its reading less its offset (0
    where unknown: up to OFFSET_LIMIT off), on the command grid and within ``0..full``.
    """
    corrected = readings - np.nan_to_num(offsets)
    known_offset = np.isfinite(offsets)
    confirms = known_offset & (np.abs(corrected - known) <= SCATTER_TOLERANCE[unit])
    estimate = np.clip(np.round(corrected, ASCII_DECIMALS), 0.0, full)
    # a reading within a module's offset of zero is a channel at zero: a smaller setting is
    # no use (a heater's phase goes as I^2: 25 uA moves it by ~1e-4 rad)
    zero = ~known_offset & (np.abs(readings) <= OFFSET_LIMIT[unit])
    return np.where(confirms, known, np.where(zero, 0.0, estimate))


class HeaterDriver(Instrument):
    """A daisy chain of Qontrol current/voltage modules driving the chip's heaters.

    Args:
        transport: an open transport (``SerialTransport`` for real use).
        binary: use the binary protocol for settings and reads (faster on the wire).
        verify: which channels of a vector setting are read back in the same exchange:
            ``"last"`` (the exchange's end marker; a corrupted byte inside the vector goes
            unseen) or ``"all"`` (every channel; about 3x the wire time of a whole-chip write).
        retries: extra attempts after a command was lost on the line (E14/E15/E16, time-out).
        max_total_power_mw: limit on the summed heater power (mW), checked before every
            setting against ``worst_resistance_kohm * I^2`` of the currents the driver
            would then hold (it reads every current at open).
        worst_resistance_kohm: the hottest heater resistance assumed by that estimate.
        n_channels: for exact-message tests only: skip the chain enumeration and assume
            this many Q8iv channels (nothing is sent at construction).
    """

    def __init__(self, transport: Transport, *, binary: bool = False, verify: str = "last",
                 retries: int = 2, name: str = "heater_driver",
                 max_total_power_mw: float = MAX_TOTAL_POWER_MW,
                 worst_resistance_kohm: float = WORST_RESISTANCE_KOHM,
                 n_channels: int | None = None) -> None:
        super().__init__(transport, name=name, retries=retries)
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, not {verify!r}")
        self.binary = bool(binary)
        self.max_total_power_mw = float(max_total_power_mw)
        self.worst_resistance_kohm = float(worst_resistance_kohm)
        self.device_id = ""
        self.exchanges = 0  # command-and-reply round trips so far (each waits one turnaround)
        # exchanges that went out of step (time-out, garbage, dropped link) so far: a caller
        # that sees this change knows a command may have reached the module in a form it
        # did not intend (a cut or corrupted line) and reads the module back
        self.resyncs = 0
        self.verify = verify
        self.reply_turnaround_s = REPLY_TURNAROUND_S
        self._needs_resync = False
        self.n_channels = 0
        self.known_currents_ma = np.zeros(0)
        if n_channels is None:
            self.chain = self._enumerate()
        else:
            n_mod = -(-n_channels // CHANNELS_PER_MODULE)
            self.chain = qp.build_chain([(f"Q8iv-{k:04X}", k) for k in range(n_mod)])
        self._index_channels(n_channels)
        self.known_currents_ma = np.zeros(self.n_channels)
        if n_channels is None:
            self.known_currents_ma = self.currents()

    @classmethod
    def open(cls, url: str, *, baudrate: int = BAUDRATE, timeout_s: float = 1.0, **kwargs: Any
             ) -> HeaterDriver:
        """Open a serial device path or URL (``/dev/ttyUSB0``, ``lumionsim://heater``)."""
        return cls(SerialTransport(url, baudrate=baudrate, timeout_s=timeout_s), **kwargs)

    @property
    def baudrate(self) -> int:
        """Line rate (bit/s) for time-on-wire estimates."""
        return int(getattr(self.transport, "baudrate", BAUDRATE))

    # -- the chain ------------------------------------------------------------------------
    def _enumerate(self) -> list[qp.Module]:
        with self.lock:
            self.transport.waiting_lines()  # a power-up E90 or noise from before we came
            self.device_id = self.identity()
            self._transact(b"NUP=0\n", "NUP=0", self._ok)
            entries = self._transact(b"NUPALL?\nNCHAN?\n", "NUPALL?", self._chain_reply)
        try:
            chain = qp.build_chain(entries[:-1])
        except ValueError as exc:
            raise InstrumentError(f"{self.name}: {exc}; check the modules and their backplane") from exc
        total = sum(m.n_channels for m in chain)
        if total != entries[-1][1]:
            raise InstrumentError(f"{self.name}: NUPALL? lists {total} channels but NCHAN? says "
                                  f"{entries[-1][1]}; reseat the daisy-chain cables")
        return chain

    def _index_channels(self, n_channels: int | None) -> None:
        self.n_channels = n_channels or sum(m.n_channels for m in self.chain)
        self.module_of = np.concatenate([[k] * m.n_channels for k, m in enumerate(self.chain)]
                                        )[: self.n_channels].astype(int)
        self.i_full_ma = np.array([self.chain[k].i_full_ma for k in self.module_of])
        self.v_full_v = np.array([self.chain[k].v_full_v for k in self.module_of])
        self.max_current_ma = self.i_full_ma.copy()
        self.max_voltage_v = self.v_full_v.copy()
        # each channel's read-back offset (I in mA, V in V), learned from its first confirmed
        # setting and averaged over later ones; NaN until then
        self.offsets = {name: np.full(self.n_channels, np.nan) for name in MEASURED}
        self._offset_samples = {name: np.zeros(self.n_channels, dtype=int) for name in MEASURED}
        # channels set inside a vector whose own read-back was skipped (verify="last"): their
        # offset is learned at the next IALL? (a reading within OFFSET_LIMIT of the setting)
        self._unread = np.zeros(self.n_channels, dtype=bool)

    # -- framing ------------------------------------------------------------------------
    def _transact(self, payload: bytes, what: str, collect: Callable[[str, list[str]], Any]) -> Any:
        """Send ``payload`` and feed reply lines to ``collect`` until it returns non-None.

        Resends after a command lost on the line; resynchronises first when an earlier
        exchange ended out of step.
        """
        with self.lock:
            for attempt in range(self.retries + 1):
                try:
                    if self._needs_resync:
                        self._resync()
                    return self._once(payload, what, collect)
                except (UnknownCommandError, LimitError) as exc:
                    # we only send commands and values the module accepts: a refusal of one
                    # means it arrived corrupted -- resend it once in step before believing it
                    self._needs_resync = True
                    if attempt == self.retries:
                        raise
                    self.log.warning("%s: %s refused (%s); resending in case it was corrupted",
                                     self.name, what, exc)
                except TransientError as exc:
                    self._needs_resync = True
                    if attempt == self.retries:
                        raise
                    self.log.warning("%s: %s failed (%s); retry %d/%d", self.name, what, exc,
                                     attempt + 1, self.retries)
                    if isinstance(exc, ConnectionLostError):
                        self._reopen_quietly()
        raise AssertionError("unreachable")

    def _reopen_quietly(self) -> None:
        """Reopen after a dropped link; a failure here shows up as the next attempt's error."""
        try:
            self.transport.reopen()
        except TransientError as again:
            self.log.warning("%s: reopening failed: %s", self.name, again)

    def _once(self, payload: bytes, what: str, collect: Callable[[str, list[str]], Any]) -> Any:
        self._check_stale(self.transport.waiting_lines())
        self.log.debug("%s <- %r", self.name, payload)
        self.transport.write_bytes(payload)
        self.exchanges += 1
        lines: list[str] = []
        while True:
            line = self.transport.read().lstrip(qp.ACK)
            self.log.debug("%s -> %r", self.name, line)
            if (qp.parse_error(line) or (None,))[0] == qp.E_POWERED_UP:
                self._module_reset(line)
            lines.append(line)
            result = collect(what, lines)
            if result is not None:
                return result

    def _check_stale(self, lines: list[str]) -> None:
        for line in lines:
            err = qp.parse_error(line)
            if err and err[0] == qp.E_POWERED_UP:
                self._module_reset(line)
            self.log.warning("%s: discarded stale input %r (a late or repeated reply, or an unasked report)",
                             self.name, line)

    def _module_reset(self, line: str) -> None:
        self.known_currents_ma = np.zeros(self.n_channels)
        raise ModuleResetError(
            f"{self.name}: a module reported {line!r} (powered up): its outputs restarted at zero "
            "and the chip's state is not what was programmed; read the currents back (resync) "
            "before programming again")

    def _raise_if_error(self, what: str, line: str) -> None:
        err = qp.parse_error(line)
        if err is None:
            return
        code, ch = err
        if code == qp.E_POWERED_UP:
            self._module_reset(line)
        desc = qp.ERRORS.get(code, "unrecognised error code")
        if code in qp.RESEND_CODES:
            raise GarbledReplyError(f"{self.name}: {what!r} was lost on the line (E{code:02d} {desc}); "
                                    "resending")
        if code == qp.E_BAD_PARAMETER:
            raise LimitError(f"{self.name}: {what!r} refused (E{code:02d} {desc}) on channel {ch}: "
                             f"{_ADVICE[code]}")
        exc = _ERROR_TYPES.get(code, DeviceError)
        advice = _ADVICE.get(code, "see the module's manual")
        raise exc(f"{self.name}: {what!r} refused (E{code:02d} {desc}) on channel {ch}: {advice}",
                  code=code, channel=ch)

    def _resync(self) -> None:
        """Get back in step: flush, ask ``ID?``, and drop every line until the id comes back."""
        self.resyncs += 1
        for _ in range(RESYNC_TRIES):
            self._check_stale(self.transport.waiting_lines())
            self.transport.write_bytes(b"ID?\n")
            try:
                while True:
                    line = self.transport.read().lstrip(qp.ACK)
                    if qp.parse_device_id(line):
                        self._needs_resync = False
                        return
                    self._check_stale([line])
            except InstrumentTimeoutError:
                continue
        raise InstrumentTimeoutError(f"{self.name}: the module does not answer ID? in step; check "
                                     "power, cable and baud rate, then reconnect()")

    # -- reply collectors -----------------------------------------------------------------
    def _ok(self, what: str, lines: list[str]) -> bool | None:
        self._raise_if_error(what, lines[-1])
        if lines[-1] == "OK":
            return True
        raise GarbledReplyError(f"{self.name}: {what!r} got {lines[-1]!r}, expected OK or E<code>:<ch>")

    def _chain_reply(self, what: str, lines: list[str]) -> list[tuple[str, int]] | None:
        line = lines[-1]
        if line.isdigit():
            return [qp.parse_chain_line(x) for x in lines[:-1]] + [("", int(line))]  # type: ignore[list-item]
        if qp.parse_chain_line(line) is None:
            raise GarbledReplyError(f"{self.name}: {what} gave {line!r}, expected 'Q8iv-00A1: 0'")
        return None

    def _values(self, unit: str, count: int) -> Callable[[str, list[str]], np.ndarray | None]:
        """A query's reply: the query is asked twice, then ``ID?``; both answers must agree.

        The module answers in order, so the ``2 * count`` lines just before the id are ours
        and anything earlier is stale (a reply that came late or twice), dropped and never
        taken for this query's answer. Asking twice catches a byte changed on the line in a
        value, which no other check could see in a reading. The answers are measurements, so
        they agree within the scatter (:data:`SCATTER_TOLERANCE`), not character for
        character; the value is their mean. Limits (``IMAX?``) are not asked this way.
        """
        window = QUERY_COPIES * count

        def collect(what: str, lines: list[str]) -> np.ndarray | None:
            if qp.parse_device_id(lines[-1]) is None:
                return None
            lines = self._without_reports(lines)
            ours = lines[:-1][-window:]
            for line in ours:
                self._raise_if_error(what, line)
            values = [qp.parse_value(x, unit) for x in ours]
            if len(ours) < window or None in values:
                raise GarbledReplyError(f"{self.name}: {what!r} got {ours!r}, expected {window} "
                                        f"value(s) in {unit}")
            first, second = np.array(values[:count], float), np.array(values[count:], float)
            apart = np.abs(first - second)
            if (apart > SCATTER_TOLERANCE[unit]).any():
                k = int(np.argmax(apart))
                raise GarbledReplyError(f"{self.name}: two answers to {what!r} differ by {apart[k]:.4f} "
                                        f"{unit} (line {k}: {ours[k]!r}, {ours[count + k]!r}), more than a "
                                        "module's scatter; asking again")
            self._check_stale(lines[:-1 - window])
            return (first + second) / 2

        return collect

    def _without_reports(self, lines: list[str]) -> list[str]:
        """Lines minus the reports a module sends about itself (``E30``, ``E31``), logged."""
        kept = []
        for line in lines:
            if (qp.parse_error(line) or (None,))[0] in qp.REPORT_CODES:
                self.log.warning("%s: the module reported %r", self.name, line)
            else:
                kept.append(line)
        return kept

    def _confirmed(self, name: str, channels: Sequence[int], expected: Sequence[float]
                   ) -> Callable[[str, list[str]], list[float] | None]:
        """A setting's reply: ``OK`` (or an error) then the read-back that follows it in the same write.

        The read-back both frames the exchange (an ``OK`` that came late or twice is not
        taken for this one) and confirms what the module now holds: within the scatter of
        the setting plus the channel's offset (:func:`readback_misses`), which a first
        confirmation learns.
        """
        n = len(expected)
        unit = _unit(name)

        def collect(what: str, lines: list[str]) -> list[float] | None:
            lines = self._without_reports(lines)
            refused = (qp.parse_error(lines[-1]) or (None,))[0] in QUERY_REFUSALS if lines else False
            if refused and len(lines) >= 2 and (lines[-2] == "OK" or qp.parse_error(lines[-2])):
                self._raise_if_error(what, lines[-2])
                raise GarbledReplyError(f"{self.name}: the read-back after {what!r} was refused "
                                        f"({lines[-1]}); resending")
            if len(lines) < n + 1:
                return None
            values = [qp.parse_value(x, unit) for x in lines[-n:]]
            reply = lines[-n - 1]
            if None in values or not (reply == "OK" or qp.parse_error(reply)):
                return None  # not yet at our reply: earlier lines are stale
            self._raise_if_error(what, reply)
            self._check_stale(lines[:-n - 1])
            self._check_readback(name, what, channels, np.array(values, float), np.array(expected, float))
            return values  # type: ignore[return-value]

        return collect

    def _check_readback(self, name: str, what: str, channels: Sequence[int], values: np.ndarray,
                        expected: np.ndarray) -> None:
        """Refuse a read-back that does not confirm its setting; learn the offsets of one that does."""
        unit = _unit(name)
        chans = np.asarray(channels, dtype=int)
        offsets = self.offsets[name][chans] if name in MEASURED else np.zeros(len(chans))
        bad = np.flatnonzero(readback_misses(values - expected, offsets, unit))
        if bad.size:
            k = int(bad[0])
            known = np.isfinite(offsets[k])
            why = (f"its known offset {offsets[k]:+.4f} {unit} +- {SCATTER_TOLERANCE[unit]}" if known
                   else f"the {OFFSET_LIMIT[unit]} {unit} a module's offset may reach")
            raise GarbledReplyError(f"{self.name}: after {what!r} channel {chans[k]} reads {values[k]:+.4f} "
                                    f"{unit} where {expected[k]:.4f} was set, beyond {why}; not "
                                    "confirmed, resending")
        if name in MEASURED:
            self._learn_offsets(name, chans, values - expected)

    def _learn_offsets(self, name: str, chans: np.ndarray, residuals: np.ndarray) -> None:
        """Running mean of each channel's read-back residual (over the last OFFSET_AVERAGING)."""
        count = np.minimum(self._offset_samples[name][chans] + 1, OFFSET_AVERAGING)
        old = np.nan_to_num(self.offsets[name][chans])
        self.offsets[name][chans] = old + (residuals - old) / count
        self._offset_samples[name][chans] = count

    def _learn_unread(self, readings: np.ndarray) -> None:
        """Learn the offsets of channels set without their own read-back, where the reading allows.

        A reading further from the setting than a module's offset may be leaves the offset
        unknown: :meth:`currents` then reports the reading, and a controller rewrites it.
        """
        chans = np.flatnonzero(self._unread)
        if chans.size:
            residuals = readings[chans] - self.known_currents_ma[chans]
            fits = ~readback_misses(residuals, np.full(chans.size, np.nan), "mA")
            self._learn_offsets("I", chans[fits], residuals[fits])
            self._unread[chans] = False

    def confirmed_channels(self) -> np.ndarray:
        """(n_channels,) bool: channels whose current this driver has confirmed (offset known).

        A reading of any other channel cannot tell its setting from the module's offset.
        Channels set inside a vector whose read-back was skipped (``verify="last"``) count
        as confirmed: their offset is learned at the next ``IALL?``.
        """
        return np.isfinite(self.offsets["I"]) | self._unread

    def _ask_values(self, ascii_cmd: str, code: int, channel: int, unit: str, count: int,
                    all_channels: bool = False) -> np.ndarray:
        if self.binary:
            payload = qp.binary_frame(code, channel, 0, read=True, all_channels=all_channels)
        else:
            payload = (ascii_cmd + "\n").encode("ascii")
        return self._transact(payload * QUERY_COPIES + SENTINEL, ascii_cmd, self._values(unit, count))

    # -- checks ---------------------------------------------------------------------------
    def _channel(self, channel: object) -> int:
        ch = as_float(channel, "channel")
        if ch != int(ch) or not 0 <= ch < self.n_channels:
            raise LimitError(f"{self.name}: channel {channel!r} is not in 0..{self.n_channels - 1}; "
                             "nothing was sent")
        return int(ch)

    def _current(self, ch: int, value: object) -> float:
        return check_range(value, 0.0, float(self.max_current_ma[ch]), f"channel {ch} current", "mA")

    def _check_total_power(self, first: int, values: Sequence[float]) -> np.ndarray:
        """The currents after setting ``values`` from channel ``first``; refuses over the limit."""
        after = self.known_currents_ma.copy()
        after[first:first + len(values)] = values
        total = float(self.worst_resistance_kohm * np.sum(after**2))
        if total > self.max_total_power_mw:
            raise LimitError(
                f"{self.name}: total heater power would reach {total:.1f} mW (estimated with "
                f"{self.worst_resistance_kohm} kOhm heaters), over the {self.max_total_power_mw} mW "
                "limit; nothing was sent. Lower some currents or raise max_total_power_mw."
            )
        return after

    def _quantise(self, first: int, values: Sequence[float], full: np.ndarray) -> list[float]:
        """What the module will really hold: 4 decimals in ASCII, 1/65535 of full scale in binary."""
        if self.binary:
            scales = full[first:first + len(values)]
            return [qp.from_word(qp.to_word(v, f), f) for v, f in zip(values, scales, strict=True)]
        return [round(v, ASCII_DECIMALS) for v in values]

    # -- settings -------------------------------------------------------------------------
    def _readback(self, name: str, channel: int) -> bytes:
        if self.binary:
            return qp.binary_frame(qp.CMD_CODES[name], channel, 0, read=True)
        return f"{name}{channel}?\n".encode("ascii")

    def _set(self, name: str, channel: int, value: float, full: np.ndarray) -> None:
        if self.binary:
            payload = qp.binary_frame(qp.CMD_CODES[name], channel, qp.to_word(value, full[channel]))
        else:
            payload = f"{name}{channel}={_fmt(value)}\n".encode("ascii")
        check = self._confirmed(name, [channel], [value])
        self._transact(payload + self._readback(name, channel), f"{name}{channel}={_fmt(value)}", check)

    def _set_vector(self, first: int, values: Sequence[float]) -> None:
        """Currents of consecutive channels within one module, in one command."""
        what = f"IVEC{first}=" + ",".join(_fmt(v) for v in values)
        if self.binary:
            words = [qp.to_word(v, self.i_full_ma[first + k]) for k, v in enumerate(values)]
            payload = qp.binary_frame(qp.CMD_CODES["I"], first, words)
        else:
            payload = (what + "\n").encode("ascii")
        last = first + len(values) - 1
        checked = range(first, last + 1) if self.verify == "all" else [last]
        expected = [values[ch - first] for ch in checked]
        check = self._confirmed("I", list(checked), expected)
        self._transact(payload + b"".join(self._readback("I", ch) for ch in checked), what, check)
        skipped = np.setdiff1d(np.arange(first, last + 1), list(checked))
        self._unread[skipped] = np.isnan(self.offsets["I"][skipped])

    def open_heater(self, exc: OverVoltageError, asked_ma: float) -> OverVoltageError:
        """The error to raise for a current setting refused at the voltage compliance: a
        :class:`HeaterFaultError` naming the open heater when a working one takes ``asked_ma``
        well within the compliance, else ``exc`` itself (the heater is just too resistive).
        """
        ch = exc.channel
        if ch is None or not 0 <= ch < self.n_channels:
            return exc
        vmax = float(self.max_voltage_v[ch])
        needs = self.worst_resistance_kohm * asked_ma
        if needs >= OPEN_HEATER_SHARE * vmax:
            return exc
        return HeaterFaultError(
            f"{self.name}: channel {ch} reached its {vmax:g} V compliance on {asked_ma:.4f} mA, which a "
            f"working heater takes at under {needs:.2f} V: the heater on channel {ch} is open (a broken "
            "track or bond wire) and cannot heat its arm; check its bonds, then run `lumion calibrate` "
            "to record it in the map (routing then avoids its TBU)", code=exc.code, channel=ch)

    def set_current(self, channel: int, current_ma: float) -> None:
        """``I<ch>=<mA>``: set one channel's current (mA, 0..imax).

        Raises:
            HeaterFaultError: the channel's heater is open (:meth:`open_heater`).
        """
        ch = self._channel(channel)
        x = self._quantise(ch, [self._current(ch, current_ma)], self.i_full_ma)[0]
        with self.lock:
            after = self._check_total_power(ch, [x])
            try:
                self._set("I", ch, x, self.i_full_ma)
            except OverVoltageError as exc:
                raise self.open_heater(exc, x) from exc
            self.known_currents_ma = after

    def set_block(self, first: int, currents_ma: Sequence[float] | np.ndarray) -> None:
        """Set consecutive channels ``first..first+len-1`` (mA): one vector command per module."""
        values = np.atleast_1d(np.asarray(currents_ma, dtype=float))
        a = self._channel(first)
        self._channel(a + len(values) - 1)
        xs = self._quantise(a, [self._current(a + k, v) for k, v in enumerate(values)], self.i_full_ma)
        with self.lock:
            after = self._check_total_power(a, xs)
            for start, stop in self._module_runs(a, a + len(xs)):
                part = xs[start - a:stop - a]
                try:
                    if len(part) == 1:
                        self._set("I", start, part[0], self.i_full_ma)
                    else:
                        self._set_vector(start, part)
                except OverVoltageError as exc:
                    k = (exc.channel if exc.channel is not None else start) - a
                    raise self.open_heater(exc, xs[k] if 0 <= k < len(xs) else 0.0) from exc
                self.known_currents_ma[start:stop] = part
            self.known_currents_ma = after

    def _module_runs(self, start: int, stop: int) -> list[tuple[int, int]]:
        """Split channels ``start..stop-1`` at module boundaries."""
        out: list[tuple[int, int]] = []
        ch = start
        while ch < stop:
            module = self.chain[self.module_of[ch]]
            end = min(stop, module.first + module.n_channels)
            out.append((ch, end))
            ch = end
        return out

    def set_voltage(self, channel: int, voltage_v: float) -> None:
        """``V<ch>=<V>``: voltage mode on one channel (V, 0..vmax)."""
        ch = self._channel(channel)
        x = check_range(voltage_v, 0.0, float(self.max_voltage_v[ch]), f"channel {ch} voltage", "V")
        x = self._quantise(ch, [x], self.v_full_v)[0]
        # the current that would dissipate the worst-case V^2/R_min in a worst-case heater
        equivalent_ma = float(np.sqrt(x**2 / LOWEST_RESISTANCE_KOHM / self.worst_resistance_kohm))
        with self.lock:
            after = self._check_total_power(ch, [equivalent_ma])
            self._set("V", ch, x, self.v_full_v)
            self.known_currents_ma = after

    def set_max_current(self, channel: int, limit_ma: float) -> None:
        """``IMAX<ch>=<mA>``: the channel's current limit (mA, up to the module's full scale)."""
        ch = self._channel(channel)
        x = check_range(limit_ma, 0.0, float(self.i_full_ma[ch]), f"channel {ch} current limit", "mA")
        self._set("IMAX", ch, x, self.i_full_ma)
        self.max_current_ma[ch] = x

    def set_max_voltage(self, channel: int, limit_v: float) -> None:
        """``VMAX<ch>=<V>``: the channel's voltage compliance (V, up to the module's full scale)."""
        ch = self._channel(channel)
        x = check_range(limit_v, 0.0, float(self.v_full_v[ch]), f"channel {ch} voltage limit", "V")
        self._set("VMAX", ch, x, self.v_full_v)
        self.max_voltage_v[ch] = x

    # -- reads ----------------------------------------------------------------------------
    def identity(self) -> str:
        """``ID?``: the id of the module on the host's cable, ``Q<type>-<hex serial>``."""

        def collect(what: str, lines: list[str]) -> str:
            self._raise_if_error(what, lines[-1])
            if qp.parse_device_id(lines[-1]) is None:
                raise GarbledReplyError(f"{self.name}: {what} got {lines[-1]!r}, expected Q8iv-00A1")
            return lines[-1]

        return self._transact(b"ID?\n", "ID?", collect)

    def channel_count(self) -> int:
        """``NCHAN?``: channels over the whole daisy chain."""

        def collect(what: str, lines: list[str]) -> int:
            self._raise_if_error(what, lines[-1])
            if not lines[-1].isdigit():
                raise GarbledReplyError(f"{self.name}: {what} got {lines[-1]!r}, expected a count")
            return int(lines[-1])

        return self._transact(b"NCHAN?\n", "NCHAN?", collect)

    def current(self, channel: int) -> float:
        """``I<ch>?``: what one channel holds (mA), read as :meth:`currents` reads every channel."""
        ch = self._channel(channel)
        reading = self._ask_values(f"I{ch}?", qp.CMD_CODES["I"], ch, "mA", 1)
        sl = slice(ch, ch + 1)
        return float(held_settings(reading, self.offsets["I"][sl], self.known_currents_ma[sl],
                                   self.i_full_ma[sl], "mA")[0])

    def voltage(self, channel: int) -> float:
        """``V<ch>?``: one channel's voltage (V)."""
        ch = self._channel(channel)
        return float(self._ask_values(f"V{ch}?", qp.CMD_CODES["V"], ch, "V", 1)[0])

    def measured_currents(self) -> np.ndarray:
        """``IALL?``: every channel's current as the modules measure it (mA, offset and scatter in)."""
        return self._ask_values("IALL?", qp.CMD_CODES["I"], 0, "mA", self.n_channels, True)

    def currents(self) -> np.ndarray:
        """What every channel holds (mA), from ``IALL?`` (:func:`held_settings`); resyncs the power guard.

        A channel whose reading confirms the setting this driver made returns that setting
        exactly; any other its reading less its offset (unknown until the channel's first
        confirmed setting: up to :data:`OFFSET_LIMIT` off).
        """
        with self.lock:
            readings = self.measured_currents()
            self._learn_unread(readings)
            held = held_settings(readings, self.offsets["I"], self.known_currents_ma, self.i_full_ma, "mA")
            self.known_currents_ma = held.copy()
        return held

    def voltages(self) -> np.ndarray:
        """``VALL?``: every channel's voltage (V)."""
        return self._ask_values("VALL?", qp.CMD_CODES["V"], 0, "V", self.n_channels, True)

    def vip(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(voltage V, current mA, electrical power mW) of every channel."""
        with self.lock:
            v, i = self.voltages(), self.currents()
        return v, i, v * i

    def reconnect(self) -> None:
        """Reopen the link and get back in step with the module."""
        with self.lock:
            super().reconnect()
            self._needs_resync = True
            self.resyncs += 1
