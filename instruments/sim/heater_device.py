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

Faults (:meth:`HeaterDeviceSim.inject`): ``drop`` the link, reply ``garbage``, ``timeout``
(swallow the command), answer an ``error`` code, reply ``late`` (held back until the next
command arrives), ``duplicate`` the reply; :meth:`HeaterDeviceSim.power_cycle` restarts
every module (outputs to zero, an unsolicited ``E90``).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from instruments.sim.chip import Chip
from instruments.sim.pty_link import DROP, ByteDevice, LineDevice, PtyLink

__all__ = ["DROP", "REGISTRY", "ByteDevice", "HeaterDeviceSim", "LineDevice", "PtyLink", "register",
           "unregister"]

CHANNELS_PER_MODULE = 8
# type -> (full-scale current mA, full-scale voltage V), from the vendor library's table
FULL_SCALES = {"Q8iv": (24.0, 12.0), "Q8a": (100.0, 12.0), "Q8b": (83.333333, 12.0), "Q8bi": (100.0, 12.0)}
FULL_SCALE_MA, FULL_SCALE_V = FULL_SCALES["Q8iv"]
WORD = 0xFFFF  # binary data words are fractions of full scale
FIRST_SERIAL = 0x00A1  # serial numbers of the simulated modules count up from here
REGISTRY: dict[str, HeaterDeviceSim] = {}
GARBAGE = b"\x8f#~?\xff\n"  # a reply mangled on the line (wrong baud rate, noise)

# error codes the firmware answers (the vendor's table)
E_OVER_VOLTAGE, E_OVER_CURRENT, E_SERIAL = 1, 2, 15
E_UNKNOWN, E_PARAMETER, E_CHANNEL, E_POWERED_UP = 10, 11, 12, 90
CODES = {0x00: "V", 0x01: "I", 0x02: "VMAX", 0x03: "IMAX", 0x20: "VFULL", 0x21: "IFULL", 0x22: "NCHAN",
         0x24: "ID"}
UNITS = {"I": "mA", "IMAX": "mA", "V": "V", "VMAX": "V"}

_QUERY = re.compile(r"^(IMAX|VMAX|I|V)(\d+|ALL)\?$")
_SET = re.compile(r"^(IMAX|VMAX|I|V)(\d+)=(.*)$")
_VECTOR = re.compile(r"^(I|V)VEC(\d+)=(.*)$")
_NUP = re.compile(r"^NUP=(\d+)$")


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


FAULT_KINDS = ("drop", "garbage", "timeout", "error", "late", "duplicate")


class HeaterDeviceSim:
    """Firmware of a daisy chain of 8-channel modules driving the chip's heaters.

    Args:
        chip: the chip whose heaters channels ``0..n_heaters-1`` drive.
        modules: module types in chain order; by default enough Q8iv for every heater.
            Channels past the chip's heaters exist but drive nothing.
    """

    def __init__(self, chip: Chip, *, modules: Sequence[str] | None = None) -> None:
        self.chip = chip
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
        self.lock = threading.Lock()
        self._rx = b""
        self._held: list[object] = []  # replies a "late" fault holds back
        self._unsolicited: list[object] = []
        # links push unasked output (E90) at once through these; without one it waits for input
        self.listeners: list[Callable[[bytes], None]] = []

    # -- faults --------------------------------------------------------------------------
    def inject(self, kind: str, *, after: int = 0, count: int = 1, code: int = E_OVER_CURRENT,
               channel: int | None = None) -> None:
        """Schedule a fault on the ``after``-th next command (0 = the next one).

        kinds: ``drop`` (command lost, link goes down), ``garbage`` (reply is noise,
        command applied), ``timeout`` (command swallowed, no reply), ``error`` (reply
        ``E<code>:<ch>``, command not applied), ``late`` (command applied, its reply held
        back until the next command arrives), ``duplicate`` (the reply is sent twice).
        ``count`` repeats it on following commands.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {FAULT_KINDS}")
        with self.lock:
            self.faults.append(Fault(kind, after, count, code, channel))

    def clear_faults(self) -> None:
        """Forget pending faults."""
        with self.lock:
            self.faults.clear()

    def power_cycle(self) -> None:
        """Restart every module: outputs and limits back to power-on values, ``E90`` sent unasked."""
        with self.lock:
            self._apply(np.zeros(self.n_channels))
            self.imax, self.vmax = self.i_full.copy(), self.v_full.copy()
            report = f"E{E_POWERED_UP:02d}:00"
            if not self.listeners:
                self._unsolicited.append(report)
        for push in list(self.listeners):
            push((report + "\n").encode("ascii"))

    def _fault(self) -> Fault | None:
        for f in self.faults:
            if f.after > 0:
                f.after -= 1
                continue
            f.count -= 1
            if f.count <= 0:
                self.faults.remove(f)
            return f
        return None

    # -- bytes in, replies out ---------------------------------------------------------
    def feed(self, data: bytes) -> list[object]:
        """Take received bytes; return the replies (text lines, bytes or :data:`DROP`) in order."""
        with self.lock:
            self._rx += data
            out: list[object] = self._unsolicited
            self._unsolicited = []
            while True:
                command = self._next_command()
                if command is None:
                    return out
                out += self._held
                self._held = []
                replies = self._with_faults(command)
                out += replies
                if DROP in replies:
                    self._rx = b""
                    return out

    def handle(self, line: str) -> object:
        """One ASCII command line -> its reply (lines joined), None (no reply) or :data:`DROP`."""
        replies = self.feed(line.encode("latin-1") + b"\n")
        if DROP in replies:
            return DROP
        text = [r.decode("latin-1").rstrip("\n") if isinstance(r, bytes) else str(r) for r in replies]
        return "\n".join(text) if text else None

    def _next_command(self) -> Callable[[], list[str]] | None:
        """Cut the next whole command off the input: a binary frame or an ASCII line."""
        if not self._rx:
            return None
        if self._rx[0] & 0x80:
            n = 7
            if self._rx[0] & 0x02 and len(self._rx) >= 7:
                n = 7 + 2 * int.from_bytes(self._rx[5:7], "big")
            if len(self._rx) < n:
                return None
            frame, self._rx = self._rx[:n], self._rx[n:]
            return lambda: self._binary(frame)
        if b"\n" not in self._rx:
            return None
        raw, self._rx = self._rx.split(b"\n", 1)
        line = raw.decode("ascii", "replace").strip().upper()
        return lambda: self._ascii(line)

    def _with_faults(self, command: Callable[[], list[str]]) -> list[object]:
        self.commands += 1
        fault = self._fault()
        kind = fault.kind if fault else None
        if kind == "drop":
            return [DROP]
        if kind == "timeout":
            return []
        if kind == "error":
            ch = fault.channel if fault.channel is not None else 0  # type: ignore[union-attr]
            return [f"E{fault.code:02d}:{ch:02d}"]  # type: ignore[union-attr]
        replies: list[object] = list(command())
        if kind == "garbage":
            return [GARBAGE]
        if kind == "late":
            self._held = replies
            return []
        return replies * 2 if kind == "duplicate" else replies

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
        r0, g = self.chip.truth.r0_kohm[ch], self.chip.truth.gamma_per_ma[ch]
        return (-r0 + math.sqrt(r0 * r0 + 4 * r0 * g * volts)) / (2 * r0 * g)  # V = r0 (1 + g I) I

    def currents(self) -> np.ndarray:
        """Every channel's current (mA)."""
        return np.concatenate([self.chip.currents_ma, self.spare])

    def voltages(self, currents: np.ndarray | None = None) -> np.ndarray:
        """Every channel's voltage (V) at ``currents`` (default: now); spare channels read 0."""
        c = self.currents() if currents is None else currents
        n_h = self.chip.mesh.n_heaters
        t = self.chip.truth
        v = np.zeros(self.n_channels)
        v[:n_h] = t.r0_kohm * (1 + t.gamma_per_ma * c[:n_h]) * c[:n_h]
        return v

    def _apply(self, currents: np.ndarray) -> None:
        n_h = self.chip.mesh.n_heaters
        self.chip.set_currents(currents[:n_h])
        self.spare = currents[n_h:].copy()


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
