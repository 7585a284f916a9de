"""Simulated daisy chain of Qontrol modules (Q8iv, Q8b, Q8a) driving a :class:`Chip`'s heaters.

:class:`HeaterDeviceSim` is the firmware, written from the vendor's library (PyPI
``qontrol`` 1.1.20) and its recorded device sessions, not from our driver: it takes raw
bytes (:meth:`HeaterDeviceSim.feed`), ASCII lines and binary frames mixed, and answers
as a module does (``OK``, ``+1.2500 mA``, one line per channel for ``IALL?``,
``E<code>:<ch>`` errors, ``E90`` after a power cycle). The vendor's own ``QXOutput`` works
against it unchanged, in ASCII and in binary mode (tests/instruments/test_qontrol_vendor.py).

Two links serve it: :class:`~instruments.sim.pty_link.PtyLink` (a real pseudo-terminal)
and ``lumionsim://<name>`` (an in-process pyserial URL handler) for devices in
:data:`REGISTRY`.

Read-back is what real modules report, not the setting: every channel's current and
voltage carry a fixed zero offset and each reading a fresh scatter (:class:`Readback`,
sized from the vendor's recorded sessions; on by default, seeded from the chip's seed so a
simulation is repeatable). ``Readback.EXACT`` gives the setting itself, for tests of the
wire format only.

Faults (:meth:`HeaterDeviceSim.inject`): ``drop`` the link, reply ``garbage``, ``timeout``
(swallow the command), answer an ``error`` code, reply ``late`` (held back until the next
command arrives), ``duplicate`` the reply; :meth:`HeaterDeviceSim.power_cycle` restarts
every module (outputs to zero, an unsolicited ``E90``). A heater the chip has broken
(``Chip.fail_heater``, :mod:`instruments.sim.heater_load`) loads its channel as it would a
real module: an open one refuses any current past ~30 uA at the voltage compliance (``E01``),
a shorted one reads back its current at ~1 mV and passes the current limit in voltage mode
at millivolts (``E02``).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from instruments.sim.chip import Chip
from instruments.sim.faults import KINDS, take_due
from instruments.sim.heater_load import current_at_voltage, drive
from instruments.sim.link_clock import SimulatedClock, WallClock
from instruments.sim.pty_link import DROP, ByteDevice, LineDevice, PtyLink

__all__ = ["DROP", "EXACT", "RECORDED", "REGISTRY", "ByteDevice", "HeaterDeviceSim", "LineDevice", "PtyLink",
           "Readback", "register", "unregister"]

CHANNELS_PER_MODULE = 8
# type -> (full-scale current mA, full-scale voltage V), from the vendor library's table
FULL_SCALES = {"Q8iv": (24.0, 12.0), "Q8a": (100.0, 12.0), "Q8b": (83.333333, 12.0), "Q8bi": (100.0, 12.0)}
FULL_SCALE_MA, FULL_SCALE_V = FULL_SCALES["Q8iv"]
WORD = 0xFFFF  # binary data words are fractions of full scale
FIRST_SERIAL = 0x00A1  # serial numbers of the simulated modules count up from here
REGISTRY: dict[str, HeaterDeviceSim] = {}
GARBAGE = b"\x8f#~?\xff\n"  # a reply mangled on the line (wrong baud rate, noise)

# error codes the firmware answers (the vendor's table)
E_OVER_VOLTAGE, E_OVER_CURRENT, E_OVERFLOW, E_SERIAL = 1, 2, 14, 15
# The firmware drops an incomplete command when no byte of it came for this long (s): a
# cable pulled mid-command must not swallow what comes after it.
FRAME_TIMEOUT_S = 0.05
# The longest ASCII line the simulated module buffers (bytes); longer ones are an overflow
# (E14). The vendor's recordings show E14 for an over-long line but not the real limit; 256
# holds any vector of 8 values the vendor library writes.
MAX_LINE_BYTES = 256
E_UNKNOWN, E_PARAMETER, E_CHANNEL, E_POWERED_UP = 10, 11, 12, 90
CODES = {0x00: "V", 0x01: "I", 0x02: "VMAX", 0x03: "IMAX", 0x20: "VFULL", 0x21: "IFULL", 0x22: "NCHAN",
         0x24: "ID"}
UNITS = {"I": "mA", "IMAX": "mA", "V": "V", "VMAX": "V"}

_QUERY = re.compile(r"^(IMAX|VMAX|I|V)(\d+|ALL)\?$")
_SET = re.compile(r"^(IMAX|VMAX|I|V)(\d+)=(.*)$")
_VECTOR = re.compile(r"^(I|V)VEC(\d+)=(.*)$")
_NUP = re.compile(r"^NUP=(\d+)$")


@dataclass(frozen=True)
class Readback:
    """How a module's readings differ from its settings (mA, V).

    The defaults are the vendor's recorded sessions (``takeqontrol/api``, MIT licence,
    ``progs/*.json``, Q8iv, firmware v2.4.1; transcribed in
    tests/instruments/recorded/qontrol_sessions.json): at zero output the channels read
    -11.2..+1.9 uA (``IALL?`` -> ``-0.0039 mA ... -0.0102 mA ...``: mean -3 uA, sd 3.5 uA
    over 32 channels) and +0.0..+0.9 mV; two consecutive readings of one channel differ by
    0..1.4 uA (``I0?`` -> ``+0.0204`` then ``+0.0202 mA``, ``I5?`` -> ``+0.0179`` then
    ``+0.0187``; 0.45 uA RMS, so 0.3 uA per reading) and 0..1.9 mV (0.6 mV RMS). The offset
    is the measurement's, not the output's: a channel at zero reads ``-0.0102 mA`` at
    ``+0.0000 V``, so the heater gets the setting. Limits (``IMAX?``) read back exactly.
    """

    current_offset_mean_ma: float = -0.003
    current_offset_sd_ma: float = 0.0035
    current_scatter_ma: float = 0.0003
    voltage_offset_mean_v: float = 0.0004
    voltage_offset_sd_v: float = 0.0003
    voltage_scatter_v: float = 0.0004


RECORDED = Readback()
EXACT = Readback(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
# Drawn offsets are kept within this (mA / V): the recorded extremes (-11.2 uA, +0.9 mV)
# with a third more, so a seeded draw never makes a module worse than a real one.
OFFSET_CLIP = {"mA": 0.015, "V": 0.0012}
READBACK_SEED_SALT = 0x0FF5E7  # readings draw from their own stream: faults and chip noise stay put


class _Partial(bytes):
    """The part of a command that reached the module before the link dropped."""


class CommandError(Exception):
    """A command the firmware refuses: ``E<code>:<channel>``."""

    def __init__(self, code: int, channel: int = 0) -> None:
        super().__init__(f"E{code:02d}:{channel:02d}")
        self.reply = f"E{code:02d}:{channel:02d}"


@dataclass
class Fault:
    """A pending fault: ``kind`` fires after ``after`` more commands, ``count`` times."""

    kind: str
    after: int = 0
    count: int = 1
    code: int = E_OVER_CURRENT
    channel: int | None = None
    line: str = "E30:00"


# Byte-level faults, the same names on every simulated link (serial here, TCP for SCPI):
FAULT_KINDS = (*KINDS, "timeout", "garbage")
ALIASES = {"drop": "drop_before", "late": "delay", "error": "reject"}
UNSOLICITED_LINE = "E30:00"  # "too many errors, some have been suppressed": a report nobody asked for


class HeaterDeviceSim:
    """Firmware of a daisy chain of 8-channel modules driving the chip's heaters.

    Args:
        chip: the chip whose heaters channels ``0..n_heaters-1`` drive.
        modules: module types in chain order; by default enough Q8iv for every heater.
            Channels past the chip's heaters exist but drive nothing.
        readback: offsets and scatter of the readings (default: the recorded ones).
        seed: of the offsets and scatter; default the chip's seed.
        clock: the firmware's clock (its frame timeout): the wall clock by default; a
            :class:`~instruments.sim.link_clock.SimulatedClock` for a device reached only
            over ``lumionsim://``, whose reads move it (:mod:`instruments.sim.link_clock`).
    """

    def __init__(self, chip: Chip, *, modules: Sequence[str] | None = None,
                 readback: Readback = RECORDED, seed: int | None = None,
                 clock: WallClock | SimulatedClock | None = None) -> None:
        chip.follow_wall_clock()  # served over a wire: its clients wait by sleeping
        self.chip = chip
        self.clock = clock or WallClock()
        n_h = chip.mesh.n_heaters
        types = list(modules) if modules else ["Q8iv"] * max(1, math.ceil(n_h / CHANNELS_PER_MODULE))
        unknown = [t for t in types if t not in FULL_SCALES]
        if unknown:
            raise ValueError(f"unknown module types {unknown}; use {sorted(FULL_SCALES)}")
        self.types = types
        self.ids = [f"{t}-{FIRST_SERIAL + k:04X}" for k, t in enumerate(types)]
        self.n_modules = len(types)
        self.n_channels = self.n_modules * CHANNELS_PER_MODULE
        if self.n_channels < n_h:
            raise ValueError(f"{self.n_channels} channels cannot drive {n_h} heaters; add modules")
        self.i_full = np.repeat([FULL_SCALES[t][0] for t in types], CHANNELS_PER_MODULE)
        self.v_full = np.repeat([FULL_SCALES[t][1] for t in types], CHANNELS_PER_MODULE)
        self.imax = self.i_full.copy()
        self.vmax = self.v_full.copy()
        self.spare = np.zeros(self.n_channels - n_h)  # unconnected channels' currents
        self.faults: list[Fault] = []
        self.commands = 0
        self.bytes_received = 0  # every byte that reached the module: a count independent of the driver's
        self._noise = np.random.default_rng(0x0E7A)  # which byte a corruption hits: reproducible
        self.readback = readback
        self._scatter = np.random.default_rng([READBACK_SEED_SALT, int(chip.seed if seed is None else seed)])
        self.current_offsets_ma = self._offsets(readback.current_offset_mean_ma,
                                                readback.current_offset_sd_ma, OFFSET_CLIP["mA"])
        self.voltage_offsets_v = self._offsets(readback.voltage_offset_mean_v,
                                               readback.voltage_offset_sd_v, OFFSET_CLIP["V"])
        self.lock = threading.Lock()
        self._rx = b""
        self._last_byte = 0.0
        self._held: list[object] = []  # replies a "late" fault holds back
        self._unsolicited: list[object] = []
        # links push unasked output (E90) at once through these; without one it waits for input
        self.listeners: list[Callable[[bytes], None]] = []

    def _offsets(self, mean: float, sd: float, clip: float) -> np.ndarray:
        """Per-channel zero offsets (fixed for the module's life), seeded."""
        return np.clip(mean + sd * self._scatter.standard_normal(self.n_channels), -clip, clip)

    # -- faults --------------------------------------------------------------------------
    def inject(self, kind: str, *, after: int = 0, count: int = 1, code: int = E_OVER_CURRENT,
               channel: int | None = None, line: str = UNSOLICITED_LINE) -> None:
        """Schedule a fault on the ``after``-th next command (0 = the next one), ``count`` times.

        kinds (byte level, as a cable, an adapter or the module can misbehave):

        * ``drop_before``: the link drops before the command arrives (not executed);
        * ``drop_within``: the first half of the command arrives and stays in the module's
          input buffer, then the link drops (the next bytes are appended to it);
        * ``drop_after``: executed, then the link drops before the reply;
        * ``delay``: executed, the reply held back until the next command arrives;
        * ``duplicate``: the reply is sent twice;
        * ``unsolicited``: ``line`` is sent before the reply;
        * ``corrupt``: one byte of the reply changes; ``corrupt_command``: one byte of the
          command changes before the module parses it;
        * ``reset``: every module restarts (outputs to zero, ``E90``), then the command runs;
        * ``reject``: the next *setting* is refused, ``E<code>:<channel>``, not executed;
        * ``timeout`` (swallowed, no reply), ``garbage`` (the whole reply is noise).

        Old names still work: ``drop``, ``late``, ``error``.
        """
        kind = ALIASES.get(kind, kind)
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {FAULT_KINDS}")
        with self.lock:
            self.faults.append(Fault(kind, after, count, code, channel, line))

    def clear_faults(self) -> None:
        """Forget pending faults."""
        with self.lock:
            self.faults.clear()

    def power_cycle(self) -> None:
        """Restart every module: outputs and limits back to power-on values, ``E90`` sent unasked."""
        with self.lock:
            report = self._restart()
            if not self.listeners:
                self._unsolicited.append(report)
        for push in list(self.listeners):
            push((report + "\n").encode("ascii"))

    def _restart(self) -> str:
        self._apply(np.zeros(self.n_channels))
        self.imax, self.vmax = self.i_full.copy(), self.v_full.copy()
        return f"E{E_POWERED_UP:02d}:00"

    def _fault(self, setting: bool) -> Fault | None:
        # only a setting can be refused: a reject fault waits for one
        return take_due(self.faults, skip=lambda f: f.kind == "reject" and not setting)

    # -- bytes in, replies out ---------------------------------------------------------
    def feed(self, data: bytes) -> list[object]:
        """Take received bytes; return the replies (text lines, bytes or :data:`DROP`) in order."""
        with self.lock:
            now = self.clock.now()
            out: list[object] = self._unsolicited
            self._unsolicited = []
            if self._rx and now - self._last_byte > FRAME_TIMEOUT_S:
                self._rx = b""  # an incomplete command went stale: the firmware drops it
                out.append(f"E{E_SERIAL:02d}:00")
            self._last_byte = now
            self.bytes_received += len(data)
            self._rx += data
            while True:
                command = self._next_command()
                if command is None:
                    return out
                out += self._held
                self._held = []
                replies = self._with_faults(command)
                partial = [r for r in replies if isinstance(r, _Partial)]
                out += [r for r in replies if not isinstance(r, _Partial)]
                if DROP in replies:
                    # the link is gone: the rest of this write never arrived; a cut command's
                    # first half stays in the module's input buffer
                    self._rx = bytes(partial[0]) if partial else b""
                    return out

    def _next_command(self) -> bytes | None:
        """Cut the next whole command off the input: a binary frame or an ASCII line (with its end)."""
        if not self._rx:
            return None
        if self._rx[0] & 0x80:
            n = 7
            if self._rx[0] & 0x02 and len(self._rx) >= 7:
                words = int.from_bytes(self._rx[5:7], "big")
                if words > self.n_channels:  # no vector is longer than the chain: a broken frame
                    bad, self._rx = self._rx[:1], self._rx[1:]
                    return bad
                n = 7 + 2 * words
            if len(self._rx) < n:
                return None
        elif b"\n" in self._rx:
            n = self._rx.index(b"\n") + 1
        elif len(self._rx) > MAX_LINE_BYTES:
            n = len(self._rx)  # the line buffer overflowed: what is there is one bad command
        else:
            return None
        raw, self._rx = self._rx[:n], self._rx[n:]
        return raw

    def _run(self, raw: bytes) -> list[object]:
        if len(raw) > MAX_LINE_BYTES and not raw[0] & 0x80:
            return [f"E{E_OVERFLOW:02d}:00"]
        if raw[0] & 0x80:
            if len(raw) < 7:
                return [f"E{E_SERIAL:02d}:00"]
            return list(self._binary(raw))
        return list(self._ascii(raw.decode("ascii", "replace").strip().upper()))

    def _with_faults(self, raw: bytes) -> list[object]:
        self.commands += 1
        fault = self._fault(_is_setting(raw))
        if fault is None:
            return self._run(raw)
        kind = fault.kind
        if kind == "drop_before":
            return [DROP]
        if kind == "drop_within":
            return [_Partial(raw[: max(1, len(raw) // 2)]), DROP]
        if kind == "timeout":
            return []
        if kind == "reject":
            ch = fault.channel if fault.channel is not None else 0
            return [f"E{fault.code:02d}:{ch:02d}"]
        if kind == "corrupt_command":
            raw = self._flip(raw)
        pushed: list[object] = [self._restart()] if kind == "reset" else []
        return pushed + self._after(kind, fault, self._run(raw))

    def _after(self, kind: str, fault: Fault, replies: list[object]) -> list[object]:
        """What the link does with the replies of an executed command."""
        if kind == "drop_after":
            return [DROP]
        if kind == "garbage":
            return [GARBAGE]
        if kind == "delay":
            self._held = replies
            return []
        if kind == "unsolicited":
            return [fault.line, *replies]
        if kind == "corrupt" and replies:
            return [self._flip((str(replies[0]) + "\n").encode("latin-1")), *replies[1:]]
        return replies * 2 if kind == "duplicate" else replies

    def _flip(self, data: bytes) -> bytes:
        """Change one byte (never into or out of a line end, so the framing stays as sent)."""
        body = [k for k, b in enumerate(data) if b != 0x0A]
        if not body:
            return data
        k = int(self._noise.choice(body))
        value = data[k] ^ int(self._noise.integers(1, 256))
        if value == 0x0A:
            value ^= 0x01
        return data[:k] + bytes([value]) + data[k + 1:]

    # -- ASCII ----------------------------------------------------------------------------
    def _ascii(self, cmd: str) -> list[str]:
        try:
            return self._ascii_command(cmd)
        except CommandError as exc:
            return [exc.reply]

    def _ascii_command(self, cmd: str) -> list[str]:
        simple = {"ID?": lambda: [self.ids[0]], "NCHAN?": lambda: [str(self.n_channels)],
                  "NUPALL?": lambda: [f"{d}: {k}" for k, d in enumerate(self.ids)],
                  "NUP?": lambda: [f"{self.ids[0]}: 0"],
                  "VFULL?": lambda: [f"+{self.v_full[0]:.4f} V"],
                  "IFULL?": lambda: [f"+{self.i_full[0]:.4f} mA"], "FIRMWARE?": lambda: ["v2.4.1"]}
        if cmd in simple:
            return simple[cmd]()
        if _NUP.match(cmd):
            return ["OK"]
        if m := _QUERY.match(cmd):
            what, ch = m.groups()
            chans = range(self.n_channels) if ch == "ALL" else [self._check_channel(int(ch))]
            return [self._reading(what, c) for c in chans]
        if m := _VECTOR.match(cmd):
            first = self._check_channel(int(m.group(2)))
            return self._set_run(m.group(1), first, [_number(x, first) for x in m.group(3).split(",")])
        if m := _SET.match(cmd):
            ch = self._check_channel(int(m.group(2)))
            return self._set_run(m.group(1), ch, [_number(m.group(3), ch)])
        raise CommandError(E_UNKNOWN)

    # -- binary ---------------------------------------------------------------------------
    def _binary(self, frame: bytes) -> list[str]:
        header, code = frame[0], frame[1]
        if bin(header).count("1") % 2:  # the parity bit makes a good header even
            return [f"E{E_SERIAL:02d}:00"]
        read, all_ch, by_id, extended = header & 0x08, header & 0x20, header & 0x10, header & 0x02
        if code not in CODES or by_id:
            return [f"E{E_UNKNOWN if code not in CODES else E_PARAMETER:02d}:00"]
        name, ch = CODES[code], int.from_bytes(frame[3:5], "big")
        try:
            if read:
                if name not in UNITS:
                    return self._ascii_command(f"{name}?")
                chans = range(self.n_channels) if all_ch else [self._check_channel(ch)]
                return [self._reading(name, c) for c in chans]
            start = 7 if extended else 5
            words = [int.from_bytes(frame[k:k + 2], "big") for k in range(start, len(frame), 2)]
            self._check_channel(ch)
            if name not in UNITS or (not extended and len(words) != 1):
                raise CommandError(E_PARAMETER, ch)
            full = self.i_full if name in ("I", "IMAX") else self.v_full
            values = [w / WORD * full[min(ch + k, self.n_channels - 1)] for k, w in enumerate(words)]
            return self._set_per_module(name, ch, values)
        except CommandError as exc:
            return [exc.reply]

    def _set_per_module(self, name: str, first: int, values: list[float]) -> list[str]:
        """A binary vector may span modules: each module answers for its own part."""
        out: list[str] = []
        ch = first
        while ch < first + len(values):
            end = min(first + len(values), (ch // CHANNELS_PER_MODULE + 1) * CHANNELS_PER_MODULE)
            out += self._set_run(name, ch, values[ch - first:end - first], whole_chain=True)
            ch = end
        return out

    # -- firmware -------------------------------------------------------------------------
    def _check_channel(self, ch: int) -> int:
        if not 0 <= ch < self.n_channels:
            raise CommandError(E_CHANNEL, ch)
        return ch

    def _reading(self, what: str, ch: int) -> str:
        value = {"I": self.currents, "V": self.voltages, "IMAX": lambda: self.imax,
                 "VMAX": lambda: self.vmax}[what]()[ch]
        rb = self.readback
        if what == "I":
            value += self.current_offsets_ma[ch] + rb.current_scatter_ma * self._scatter.standard_normal()
        elif what == "V":
            value += self.voltage_offsets_v[ch] + rb.voltage_scatter_v * self._scatter.standard_normal()
        return f"{value:+.4f} {UNITS[what]}"

    def _set_run(self, what: str, first: int, values: list[float], whole_chain: bool = False) -> list[str]:
        """Set consecutive channels; all or nothing, one ``OK`` or the first error."""
        last = first + len(values) - 1
        if last >= self.n_channels:
            raise CommandError(E_CHANNEL, last)
        if not whole_chain and last // CHANNELS_PER_MODULE != first // CHANNELS_PER_MODULE:
            raise CommandError(E_PARAMETER, first)  # an ASCII vector addresses one module
        chans = np.arange(first, last + 1)
        x = np.array(values)
        if what in ("IMAX", "VMAX"):
            full = (self.i_full if what == "IMAX" else self.v_full)[chans]
            if (x < 0).any() or (x > full).any():
                raise CommandError(E_PARAMETER, first)
            (self.imax if what == "IMAX" else self.vmax)[chans] = x
            return ["OK"]
        if what == "V":
            x = np.array([self._current_for_voltage(int(c), v) for c, v in zip(chans, x, strict=True)])
        self._set_currents(chans, x)
        return ["OK"]

    def _set_currents(self, chans: np.ndarray, values: np.ndarray) -> None:
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            raise CommandError(E_PARAMETER, int(chans[np.argmax(bad)]))
        over = values > self.imax[chans]
        if over.any():
            raise CommandError(E_OVER_CURRENT, int(chans[np.argmax(over)]))
        new = self.currents()
        new[chans] = values
        vhigh = self.voltages(new)[chans] > self.vmax[chans]
        if vhigh.any():
            raise CommandError(E_OVER_VOLTAGE, int(chans[np.argmax(vhigh)]))
        self._apply(new)

    def _current_for_voltage(self, ch: int, volts: float) -> float:
        if not 0 <= volts <= self.vmax[ch]:
            raise CommandError(E_OVER_VOLTAGE, ch)
        if ch >= self.chip.mesh.n_heaters:
            if volts:
                raise CommandError(E_OVER_VOLTAGE, ch)  # open channel: no current can flow
            return 0.0
        t = self.chip.truth
        # a shorted heater draws volts / 1 Ohm: past the current limit at millivolts (E02)
        return current_at_voltage(volts, self.chip.heater_faults.get(ch), t.r0_kohm[ch], t.gamma_per_ma[ch])

    def currents(self) -> np.ndarray:
        """Every channel's current (mA)."""
        return np.concatenate([self.chip.currents_ma, self.spare])

    def voltages(self, currents: np.ndarray | None = None) -> np.ndarray:
        """Every channel's voltage (V) at ``currents`` (default: now); spare channels read 0.

        An open heater needs ``I x`` the module's sense path (0.4 MOhm), so any current past
        ~30 uA is over the compliance and refused (``E01``); a shorted one ``I x 1 Ohm``.
        """
        c = self.currents() if currents is None else currents
        n_h = self.chip.mesh.n_heaters
        t = self.chip.truth
        v = np.zeros(self.n_channels)
        _, v[:n_h] = drive(c[:n_h], self.chip.heater_faults, t.r0_kohm, t.gamma_per_ma, np.inf)
        return v

    def _apply(self, currents: np.ndarray) -> None:
        n_h = self.chip.mesh.n_heaters
        self.chip.set_currents(currents[:n_h])
        self.spare = currents[n_h:].copy()


def _is_setting(raw: bytes) -> bool:
    """A command that changes something (ASCII ``=``, binary RW = 0)."""
    return not raw[0] & 0x08 if raw[0] & 0x80 else b"=" in raw


def _number(text: str, ch: int) -> float:
    try:
        x = float(text)
    except ValueError:
        raise CommandError(E_PARAMETER, ch) from None
    if not math.isfinite(x):
        raise CommandError(E_PARAMETER, ch)
    return x


def register(name: str, device: HeaterDeviceSim) -> str:
    """Make ``device`` reachable as ``lumionsim://<name>``; returns the URL."""
    REGISTRY[name] = device
    return f"lumionsim://{name}"


def unregister(name: str) -> None:
    """Remove a ``lumionsim://`` device."""
    REGISTRY.pop(name, None)
