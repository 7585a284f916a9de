"""Simulated Qontrol-style heater driver backed by a :class:`Chip`, and its serial links.

:class:`HeaterDeviceSim` is the firmware: one command line in, one reply line out (see
:mod:`instruments.heater_driver` for the protocol). Two links serve it:

* :class:`PtyLink` -- a pseudo-terminal served by a thread; drivers open a real serial
  device path. The path is a stable symlink: when a fault drops the link, a fresh pty
  takes its place (like a USB adapter re-enumerating) and ``reconnect()`` finds it.
* ``lumionsim://<name>`` -- an in-process pyserial URL handler
  (:mod:`instruments.sim.urlhandler.protocol_lumionsim`) for devices in :data:`REGISTRY`.

Faults (:meth:`HeaterDeviceSim.inject`): ``drop`` the link mid-write, reply ``garbage``,
``timeout`` (swallow commands), answer an ``error`` code.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import select
import tempfile
import threading
import tty
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from instruments.sim.chip import Chip

CHANNELS_PER_MODULE = 8
FULL_SCALE_MA = 24.0
FULL_SCALE_V = 12.0
DROP = object()  # reply sentinel: the link goes down
REGISTRY: dict[str, HeaterDeviceSim] = {}

_SET = re.compile(r"^(i|v|imax|vmax)(\d+)=([-+0-9.eE]+)$")
_BLOCK = re.compile(r"^i(\d+):(\d+)=([-+0-9.eE,]+)$")
_GET = re.compile(r"^(i|v|imax|vmax)(\d+)\?$")


@dataclass
class Fault:
    """A pending fault: ``kind`` fires after ``after`` more commands, ``count`` times."""

    kind: str
    after: int = 0
    count: int = 1
    code: int = 4
    channel: int | None = None


class HeaterDeviceSim:
    """Firmware of a daisy chain of 8-channel modules driving the chip's heaters.

    Channels past the chip's heaters exist (the chain is a whole number of modules) but
    drive nothing.
    """

    def __init__(self, chip: Chip, *, serial_number: str = "0001") -> None:
        self.chip = chip
        n_h = chip.mesh.n_heaters
        self.n_modules = max(1, math.ceil(n_h / CHANNELS_PER_MODULE))
        self.n_channels = self.n_modules * CHANNELS_PER_MODULE
        self.serial_number = serial_number
        self.imax = np.full(self.n_channels, FULL_SCALE_MA)
        self.vmax = np.full(self.n_channels, FULL_SCALE_V)
        self.spare = np.zeros(self.n_channels - n_h)  # unconnected channels' currents
        self.faults: list[Fault] = []
        self.commands = 0
        self.lock = threading.Lock()

    # -- faults --------------------------------------------------------------------------
    def inject(self, kind: str, *, after: int = 0, count: int = 1, code: int = 4,
               channel: int | None = None) -> None:
        """Schedule a fault on the ``after``-th next command (0 = the next one).

        kinds: ``drop`` (command lost, link goes down), ``garbage`` (reply is noise,
        command applied), ``timeout`` (command swallowed, no reply), ``error`` (reply
        ``E<code>:<ch>``, command not applied). ``count`` repeats it on following commands.
        """
        if kind not in ("drop", "garbage", "timeout", "error"):
            raise ValueError(f"unknown fault {kind!r}")
        with self.lock:
            self.faults.append(Fault(kind, after, count, code, channel))

    def clear_faults(self) -> None:
        """Forget pending faults."""
        with self.lock:
            self.faults.clear()

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

    # -- firmware -------------------------------------------------------------------------
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

    def handle(self, line: str) -> object:
        """Process one command line; return the reply text, None (no reply) or :data:`DROP`."""
        with self.lock:
            self.commands += 1
            fault = self._fault()
            if fault is not None:
                if fault.kind == "drop":
                    return DROP
                if fault.kind == "timeout":
                    return None
                if fault.kind == "error":
                    return f"E{fault.code:02d}:{fault.channel if fault.channel is not None else 0}"
            reply = self._execute(line.strip())
            return "\x8f#~?\xff" if fault is not None and fault.kind == "garbage" else reply

    def _execute(self, cmd: str) -> str:
        if cmd == "id?":
            return f"Q8iv-sim SN{self.serial_number} modules={self.n_modules} chip={self.chip.chip_id}"
        if cmd == "nchan?":
            return str(self.n_channels)
        if cmd == "iall?":
            return ",".join(f"{x:.4f}" for x in self.currents())
        if cmd == "vipall?":
            c, v = self.currents(), self.voltages()
            return ",".join(f"{vv:.4f}:{cc:.4f}:{vv * cc:.4f}" for vv, cc in zip(v, c, strict=True))
        if m := _GET.match(cmd):
            ch = int(m.group(2))
            if ch >= self.n_channels:
                return f"E02:{ch}"
            value = {"i": self.currents(), "v": self.voltages(), "imax": self.imax,
                     "vmax": self.vmax}[m.group(1)][ch]
            return f"{value:.4f}"
        if m := _BLOCK.match(cmd):
            a, b = int(m.group(1)), int(m.group(2))
            try:
                values = [float(x) for x in m.group(3).split(",")]
            except ValueError:
                return f"E03:{a}"
            if b < a or len(values) != b - a + 1:
                return f"E03:{a}"
            return self._set_currents(a, np.array(values))
        if m := _SET.match(cmd):
            what, ch = m.group(1), int(m.group(2))
            try:
                x = float(m.group(3))
            except ValueError:
                return f"E03:{ch}"
            if ch >= self.n_channels:
                return f"E02:{ch}"
            if what == "i":
                return self._set_currents(ch, np.array([x]))
            if what == "v":
                return self._set_voltage(ch, x)
            limit = FULL_SCALE_MA if what == "imax" else FULL_SCALE_V
            if not 0 <= x <= limit:
                return f"E03:{ch}"
            (self.imax if what == "imax" else self.vmax)[ch] = x
            return "OK"
        return "E01:0"

    def _set_currents(self, first: int, values: np.ndarray) -> str:
        last = first + len(values) - 1
        if last >= self.n_channels:
            return f"E02:{last}"
        chans = np.arange(first, last + 1)
        if not np.isfinite(values).all() or (values < 0).any():
            return f"E03:{first + int(np.argmax(~np.isfinite(values) | (values < 0)))}"
        over = values > self.imax[chans]
        if over.any():
            return f"E04:{chans[np.argmax(over)]}"
        new = self.currents()
        new[chans] = values
        vhigh = self.voltages(new)[chans] > self.vmax[chans]
        if vhigh.any():
            return f"E05:{chans[np.argmax(vhigh)]}"
        self._apply(new)
        return "OK"

    def _set_voltage(self, ch: int, volts: float) -> str:
        if not 0 <= volts <= self.vmax[ch]:
            return f"E05:{ch}"
        n_h = self.chip.mesh.n_heaters
        if ch >= n_h:
            return "OK" if volts == 0 else f"E05:{ch}"  # open channel: no current can flow
        r0, g = self.chip.truth.r0_kohm[ch], self.chip.truth.gamma_per_ma[ch]
        i = (-r0 + math.sqrt(r0 * r0 + 4 * r0 * g * volts)) / (2 * r0 * g)  # V = r0 (1 + g I) I
        if i > self.imax[ch]:
            return f"E04:{ch}"
        new = self.currents()
        new[ch] = i
        self._apply(new)
        return "OK"

    def _apply(self, currents: np.ndarray) -> None:
        n_h = self.chip.mesh.n_heaters
        self.chip.set_currents(currents[:n_h])
        self.spare = currents[n_h:].copy()


class LineDevice(Protocol):
    """Anything that answers one command line: ``handle(line) -> reply | None | DROP``."""

    def handle(self, line: str) -> object:
        """Process one line."""
        ...


class PtyLink:
    """Serve a line device (the heater driver, an I2C bridge) on a pseudo-terminal from a thread.

    ``path`` is a symlink to the current ``/dev/pts/N``; open it with pyserial.
    Close with :meth:`close` (joins the thread within ``timeout_s``).
    """

    def __init__(self, device: LineDevice, directory: str | None = None, name: str = "heater_driver") -> None:
        self.device = device
        self._dir = tempfile.mkdtemp(prefix="lumion-pty-", dir=directory)
        self.path = str(Path(self._dir) / name)
        self._stop = threading.Event()
        self._master, self._slave = self._new_pty()
        self.drops = 0
        self._thread = threading.Thread(target=self._serve, name="lumion-pty", daemon=True)
        self._thread.start()

    def _new_pty(self) -> tuple[int, int]:
        master, slave = os.openpty()
        tty.setraw(slave)
        tmp = self.path + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(os.ttyname(slave), tmp)
        os.replace(tmp, self.path)
        return master, slave

    def _serve(self) -> None:
        buf = b""
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(self._master, 65536)
            except OSError:
                continue  # no slave open right now (between close and reopen)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                reply = self.device.handle(line.decode("ascii", "replace"))
                if reply is DROP:
                    buf = b""
                    self._drop()
                    break
                if reply is not None:
                    self._send((str(reply) + "\n").encode("latin-1"))

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._master, view)
            except BlockingIOError:
                select.select([], [self._master], [], 0.05)
                continue
            view = view[n:]

    def _drop(self) -> None:
        """Unplug: the old pty dies (the driver's fd sees EIO), a new one replaces it."""
        old = (self._master, self._slave)
        self._master, self._slave = self._new_pty()
        self.drops += 1
        for fd in old:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop serving and remove the pty."""
        self._stop.set()
        self._thread.join(timeout_s)
        for fd in (self._master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        for p in (self.path, self.path + ".new"):
            with contextlib.suppress(OSError):
                os.unlink(p)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)


def register(name: str, device: HeaterDeviceSim) -> str:
    """Make ``device`` reachable as ``lumionsim://<name>``; returns the URL."""
    REGISTRY[name] = device
    return f"lumionsim://{name}"


def unregister(name: str) -> None:
    """Remove a ``lumionsim://`` device."""
    REGISTRY.pop(name, None)
