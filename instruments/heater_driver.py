"""Multichannel heater driver, Qontrol-style ASCII over serial (115200 8N1, ``\\n``).

Several daisy-chained modules (8 channels each, Q8iv-class) appear as one device whose
channels are numbered across the chain; ``nchan?`` gives the total. Full scale is
24 mA / 12 V per channel. Every command is one line; settings answer ``OK``, queries a
value, and any command may answer ``E<code>:<ch>`` (see :data:`ERROR_CODES`).

=====================  ===================================  ======================
command                meaning                              reply
=====================  ===================================  ======================
``i<ch>=<mA>``         set one channel's current            ``OK``
``i<a>:<b>=<mA>,...``  set channels a..b (vector set)       ``OK``
``v<ch>=<V>``          set one channel's voltage            ``OK``
``i<ch>?``/``v<ch>?``  read one current (mA) / voltage (V)  ``1.2500``
``iall?``              every current, comma separated       ``0.0000,1.2500,...``
``vipall?``            ``V:mA:mW`` per channel, commas      ``0.31:1.2500:0.39,...``
``imax<ch>=<mA>``      channel current limit                ``OK``
``vmax<ch>=<V>``       channel voltage compliance           ``OK``
``id?`` / ``nchan?``   identity / channel count             ``Q8iv-sim ...`` / ``144``
=====================  ===================================  ======================
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from instruments.base import Instrument, as_float, check_range
from instruments.errors import (
    BadChannelError,
    DeviceError,
    GarbledReplyError,
    LimitError,
    OverCurrentError,
    OverVoltageError,
    UnknownCommandError,
)
from instruments.transport import SerialTransport, Transport

FULL_SCALE_MA = 24.0
FULL_SCALE_V = 12.0
# Total-power guard: heaters are assumed no hotter than this resistance (kOhm; nominal is
# 0.25 kOhm rising ~2 %/mA), so R_max * I^2 over-estimates the electrical power.
WORST_RESISTANCE_KOHM = 0.35
# In voltage mode the coolest (lowest) resistance dissipates most: P = V^2 / R_min.
LOWEST_RESISTANCE_KOHM = 0.2
MAX_TOTAL_POWER_MW = 1000.0
CHANNELS_PER_MODULE = 8
BAUDRATE = 115200

# code -> (exception, advice)
ERROR_CODES: dict[int, tuple[type[DeviceError], str]] = {
    1: (UnknownCommandError, "the firmware does not know this command; check the driver version"),
    2: (BadChannelError, "no such channel; check nchan? and the daisy chain"),
    3: (LimitError, "value malformed or out of range"),  # type: ignore[dict-item]
    4: (OverCurrentError, "over the channel's current limit (imax); lower it or raise imax"),
    5: (OverVoltageError, "voltage compliance reached; check the heater for an open circuit or raise vmax"),
}
COMM_ERROR = 10  # the module saw a framing/parity error: transient, retried
_ERR = re.compile(r"^E(\d+):(\d+)$")


def _fmt(x: float) -> str:
    return f"{x:.4f}"


class HeaterDriver(Instrument):
    """Qontrol-style multichannel current driver.

    Args:
        transport: an open transport (``SerialTransport`` for real use).
        n_channels: channel count; asked with ``nchan?`` when None.
        retries: extra attempts on transient errors.
        max_total_power_mw: limit on the summed heater power (mW), checked before every
            current setting against ``worst_resistance_kohm * I^2`` of the currents the
            driver would then hold. The driver starts from 0 mA (a module's power-on state)
            and tracks what it sets and reads; call :meth:`currents` to resync after
            another program changed the module.
        worst_resistance_kohm: the hottest heater resistance assumed by that estimate.
    """

    def __init__(self, transport: Transport, *, n_channels: int | None = None, retries: int = 2,
                 name: str = "heater_driver", max_total_power_mw: float = MAX_TOTAL_POWER_MW,
                 worst_resistance_kohm: float = WORST_RESISTANCE_KOHM) -> None:
        super().__init__(transport, name=name, retries=retries)
        self.n_channels = n_channels if n_channels is not None else self.channel_count()
        self.max_current_ma = np.full(self.n_channels, FULL_SCALE_MA)
        self.max_voltage_v = np.full(self.n_channels, FULL_SCALE_V)
        self.max_total_power_mw = float(max_total_power_mw)
        self.worst_resistance_kohm = float(worst_resistance_kohm)
        self.known_currents_ma = np.zeros(self.n_channels)

    @classmethod
    def open(cls, url: str, *, baudrate: int = BAUDRATE, timeout_s: float = 1.0, **kwargs: object
             ) -> HeaterDriver:
        """Open a serial device path or URL (``/dev/ttyUSB0``, ``lumionsim://heater``)."""
        return cls(SerialTransport(url, baudrate=baudrate, timeout_s=timeout_s), **kwargs)  # type: ignore[arg-type]

    @property
    def baudrate(self) -> int:
        """Line rate (bit/s) for time-on-wire estimates."""
        return int(getattr(self.transport, "baudrate", BAUDRATE))

    # -- replies -------------------------------------------------------------------------
    def _ok(self, command: str, reply: str) -> None:
        if reply == "OK":
            return
        self._raise_device_error(command, reply)

    def _raise_device_error(self, command: str, reply: str) -> None:
        m = _ERR.match(reply)
        if not m:
            raise GarbledReplyError(f"{self.name}: {command!r} got {reply!r}, expected OK or E<code>:<ch>")
        code, ch = int(m.group(1)), int(m.group(2))
        if code == COMM_ERROR:
            raise GarbledReplyError(f"{self.name}: the driver saw a garbled {command!r} (E10); resending")
        exc, advice = ERROR_CODES.get(code, (DeviceError, "unknown error code; see the manual"))
        if exc is LimitError:
            raise LimitError(f"{self.name}: {command!r} refused (E{code:02d}) on channel {ch}: {advice}")
        raise exc(f"{self.name}: {command!r} refused (E{code:02d}) on channel {ch}: {advice}",
                  code=code, channel=ch)

    def _number(self, command: str, reply: str) -> float:
        try:
            return float(reply)
        except ValueError:
            self._raise_device_error(command, reply)
            raise

    def _numbers(self, command: str, reply: str) -> np.ndarray:
        try:
            values = np.array([float(v) for v in reply.split(",")])
        except ValueError:
            self._raise_device_error(command, reply)
            raise
        if len(values) != self.n_channels:
            raise GarbledReplyError(f"{self.name}: {command!r} gave {len(values)} values, "
                                    f"expected {self.n_channels}")
        return values

    # -- checks ----------------------------------------------------------------------------
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

    # -- commands --------------------------------------------------------------------------
    def identity(self) -> str:
        """``id?``: the driver's identity string."""
        return self.query("id?")

    def channel_count(self) -> int:
        """``nchan?``: channels over the whole daisy chain."""
        return int(self.ask("nchan?", self._number))

    def set_current(self, channel: int, current_ma: float) -> None:
        """``i<ch>=<mA>``: set one channel's current (mA, 0..imax)."""
        ch = self._channel(channel)
        x = self._current(ch, current_ma)
        after = self._check_total_power(ch, [x])
        self.ask(f"i{ch}={_fmt(x)}", self._ok)
        self.known_currents_ma = after

    def set_block(self, first: int, currents_ma: Sequence[float] | np.ndarray) -> None:
        """Set consecutive channels ``first..first+len-1`` in one command (vector set, mA)."""
        values = np.atleast_1d(np.asarray(currents_ma, dtype=float))
        if len(values) == 1:
            self.set_current(first, values[0])
            return
        a = self._channel(first)
        b = self._channel(a + len(values) - 1)
        xs = [self._current(a + k, v) for k, v in enumerate(values)]
        after = self._check_total_power(a, xs)
        self.ask(f"i{a}:{b}=" + ",".join(_fmt(x) for x in xs), self._ok)
        self.known_currents_ma = after

    def set_voltage(self, channel: int, voltage_v: float) -> None:
        """``v<ch>=<V>``: voltage mode on one channel (V, 0..vmax)."""
        ch = self._channel(channel)
        x = check_range(voltage_v, 0.0, float(self.max_voltage_v[ch]), f"channel {ch} voltage", "V")
        # the current that would dissipate the worst-case V^2/R_min in a worst-case heater
        equivalent_ma = float(np.sqrt(x**2 / LOWEST_RESISTANCE_KOHM / self.worst_resistance_kohm))
        after = self._check_total_power(ch, [equivalent_ma])
        self.ask(f"v{ch}={_fmt(x)}", self._ok)
        self.known_currents_ma = after

    def current(self, channel: int) -> float:
        """``i<ch>?``: one channel's current (mA)."""
        return self.ask(f"i{self._channel(channel)}?", self._number)

    def voltage(self, channel: int) -> float:
        """``v<ch>?``: one channel's voltage (V)."""
        return self.ask(f"v{self._channel(channel)}?", self._number)

    def currents(self) -> np.ndarray:
        """``iall?``: every channel's current (mA); also resyncs the total-power guard."""
        values = self.ask("iall?", self._numbers)
        self.known_currents_ma = np.asarray(values, dtype=float).copy()
        return values

    def vip(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``vipall?``: (voltage V, current mA, power mW) of every channel."""

        def parse(command: str, reply: str) -> np.ndarray:
            try:
                rows = np.array([[float(x) for x in item.split(":")] for item in reply.split(",")])
            except ValueError:
                self._raise_device_error(command, reply)
                raise
            if rows.shape != (self.n_channels, 3):
                raise GarbledReplyError(f"{self.name}: vipall? gave shape {rows.shape}")
            return rows

        rows = self.ask("vipall?", parse)
        return rows[:, 0], rows[:, 1], rows[:, 2]

    def set_max_current(self, channel: int, limit_ma: float) -> None:
        """``imax<ch>=<mA>``: the channel's current limit (mA, up to full scale)."""
        ch = self._channel(channel)
        x = check_range(limit_ma, 0.0, FULL_SCALE_MA, f"channel {ch} current limit", "mA")
        self.ask(f"imax{ch}={_fmt(x)}", self._ok)
        self.max_current_ma[ch] = x

    def set_max_voltage(self, channel: int, limit_v: float) -> None:
        """``vmax<ch>=<V>``: the channel's voltage compliance (V, up to full scale)."""
        ch = self._channel(channel)
        x = check_range(limit_v, 0.0, FULL_SCALE_V, f"channel {ch} voltage limit", "V")
        self.ask(f"vmax{ch}={_fmt(x)}", self._ok)
        self.max_voltage_v[ch] = x
