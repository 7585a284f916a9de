"""Serve a simulated serial device on a pseudo-terminal from a thread.

Drivers open the pty with pyserial exactly as they open a USB adapter. The path is a
stable symlink: when a fault drops the link, a fresh pty takes its place (like a USB
adapter re-enumerating) and ``reconnect()`` finds it.
"""

from __future__ import annotations

import contextlib
import os
import select
import tempfile
import termios
import threading
import time
import tty
from pathlib import Path
from typing import Protocol

DROP = object()  # reply sentinel: the link goes down

# How often the serving thread looks at its stop flag when nothing arrives (s); close() also
# wakes it at once through a pipe.
POLL_S = 0.05
# An 8N1 frame: start bit, 8 data bits, stop bit.
BITS_PER_BYTE = 10
# The simulated module's turnaround on the link's clock (not slept): its firmware plus a
# tuned FTDI latency timer, the shortest the vendor's recorded sessions show (2-28 ms).
MODULE_TURNAROUND_S = 0.002
# termios speed codes -> bit/s: the rate the driver really set on the line
_SPEEDS = {getattr(termios, f"B{rate}"): rate for rate in (
    50, 75, 110, 134, 150, 200, 300, 600, 1200, 1800, 2400, 4800, 9600, 19200, 38400, 57600, 115200,
    230400, 460800, 500000, 576000, 921600, 1000000, 1152000, 1500000, 2000000, 2500000, 3000000,
    3500000, 4000000) if hasattr(termios, f"B{rate}")}


class LineDevice(Protocol):
    """Anything that answers one command line: ``handle(line) -> reply | None | DROP``."""

    def handle(self, line: str) -> object:
        """Process one line."""
        ...


class ByteDevice(Protocol):
    """A device that takes raw bytes (binary frames as well as lines): ``feed(data) -> [reply | DROP]``."""

    def feed(self, data: bytes) -> list[object]:
        """Process received bytes; return the replies they caused, in order."""
        ...


class PtyLink:
    """Serve a line device (the heater driver, an I2C bridge) on a pseudo-terminal from a thread.

    ``path`` is a symlink to the current ``/dev/pts/N``; open it with pyserial.
    Close with :meth:`close` (joins the thread within ``timeout_s``).
    """

    def __init__(self, device: LineDevice | ByteDevice, directory: str | None = None,
                 name: str = "heater_driver") -> None:
        self.device = device
        self._dir = tempfile.mkdtemp(prefix="lumion-pty-", dir=directory)
        self.path = str(Path(self._dir) / name)
        self._stop = threading.Event()
        # written by close() so the serving thread's select returns at once instead of at its
        # next poll (POLL_S per link: a bench with a pty per transceiver took 0.5 s to close)
        self._wake_r, self._wake_w = os.pipe()
        self._master, self._slave = self._new_pty()
        self.drops = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        # bytes the device has been fed and answered (replies written): a test's oracle
        # (instruments/sim/pty_oracle.py) compares it with what its client wrote
        self.bytes_handled = 0
        # the link's own clock: how long a real line would have been busy with what it carried
        # (each byte at the rate the driver set on the pty, each answer after the module's
        # turnaround); a measure independent of the driver's own accounting
        self.line_time_s = 0.0
        self.answers = 0
        self.module_turnaround_s = MODULE_TURNAROUND_S
        # seconds before each answer: a module's firmware plus a USB-serial adapter's latency
        # timer take 2-28 ms in the vendor's recorded sessions; 0 (answer at once) by default
        self.turnaround_s = 0.0
        if hasattr(device, "listeners"):
            device.listeners.append(self._send)
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
                ready, _, _ = select.select([self._master, self._wake_r], [], [], POLL_S)
                if self._wake_r in ready:
                    break  # close() was called
                if not ready:
                    continue
                chunk = os.read(self._master, 65536)
            except OSError:
                continue  # no slave open right now (between close and reopen)
            self.bytes_received += len(chunk)
            self._carry(len(chunk))
            if hasattr(self.device, "feed"):
                replies = self.device.feed(chunk)
                if replies and self.turnaround_s:
                    time.sleep(self.turnaround_s)
                self._answer(replies)
                self.bytes_handled += len(chunk)
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not self._answer([self.device.handle(line.decode("ascii", "replace"))]):
                    buf = b""
                    break
            self.bytes_handled += len(chunk)

    def line_rate(self) -> int:
        """The rate (bit/s) the driver set on the line (pyserial sets it on the pty)."""
        with contextlib.suppress(OSError, termios.error):
            return _SPEEDS.get(termios.tcgetattr(self._slave)[5], 0)
        return 0

    def _carry(self, n_bytes: int) -> None:
        """Advance the link's clock by ``n_bytes`` 8N1 frames at the line's rate."""
        rate = self.line_rate()
        if rate:
            self.line_time_s += n_bytes * BITS_PER_BYTE / rate

    def _answer(self, replies: list[object]) -> bool:
        """Write the replies; False when one of them drops the link."""
        if any(r is not None for r in replies):
            self.answers += 1
            self.line_time_s += self.module_turnaround_s
        for reply in replies:
            if reply is DROP:
                self._drop()
                return False
            if reply is not None:
                self._send(reply if isinstance(reply, bytes) else (str(reply) + "\n").encode("latin-1"))
        return True

    def _send(self, data: bytes) -> None:
        self.bytes_sent += len(data)  # counted here, where the bytes leave: independent of the driver
        self._carry(len(data))
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
        """Stop serving and remove the pty (a second call does nothing)."""
        if self._stop.is_set():
            return  # its descriptors are closed, and their numbers may be another file's now
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(timeout_s)
        for fd in (self._master, self._slave, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        for p in (self.path, self.path + ".new"):
            with contextlib.suppress(OSError):
                os.unlink(p)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)
