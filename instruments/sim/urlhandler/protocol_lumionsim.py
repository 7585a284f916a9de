"""pyserial URL handler ``lumionsim://<name>``: an in-process link to a simulated heater driver.

Registered by :func:`instruments.transport.open_serial_port` (it appends
``instruments.sim.urlhandler`` to ``serial.protocol_handler_packages``). The name picks
a device from :data:`instruments.sim.heater_device.REGISTRY`. A ``drop`` fault raises
``SerialException`` on the next read and closes the port; reopening works.

The device answers in the writer's thread, so a write's replies are in the buffer when it
returns. On a device with a :class:`~instruments.sim.link_clock.SimulatedClock` a read
that does not find what it waits for therefore never sleeps: it moves the device's clock
on by its timeout and returns what there is, as a real read would after the timeout
(:mod:`instruments.sim.link_clock`); opening a port moves it on by :data:`REENUMERATION_S`,
the least time a USB-serial adapter that dropped off the bus takes to come back.
"""

from __future__ import annotations

import threading
import urllib.parse

from serial.serialutil import PortNotOpenError, SerialBase, SerialException, Timeout

from instruments.sim.heater_device import DROP, REGISTRY

# A port opened again after its link dropped is a USB-serial adapter back on the bus: the
# host waits at least 100 ms after it attaches before resetting it (USB 2.0, 7.1.7.3,
# TATTDB), so a command the drop cut in half has gone stale in the module (50 ms) by then.
REENUMERATION_S = 0.1


class Serial(SerialBase):
    """A serial port whose far end is a :class:`HeaterDeviceSim` in this process."""

    def open(self) -> None:
        """Connect to the named device."""
        if self.is_open:
            raise SerialException("port already open")
        name = urllib.parse.urlsplit(self.portstr).netloc
        if name not in REGISTRY:
            raise SerialException(f"no simulated heater driver named {name!r} (lumionsim://{name})")
        self._device = REGISTRY[name]
        if self._device.clock.simulated:
            self._device.clock.advance(REENUMERATION_S)
        self._rx = bytearray()
        self._cond = threading.Condition()
        self._dropped = False
        self._device.listeners.append(self._push)
        self.is_open = True

    def _push(self, data: bytes) -> None:
        """Unasked output of the device (a power-up report) arrives in the read buffer."""
        with self._cond:
            self._rx += data
            self._cond.notify_all()

    def close(self) -> None:
        """Disconnect."""
        if self.is_open and self._push in self._device.listeners:
            self._device.listeners.remove(self._push)
        self.is_open = False

    def _reconfigure_port(self) -> None:
        """Nothing to configure: any baud rate works in-process."""

    def from_url(self, url: str) -> str:
        """The URL itself is the port name."""
        return url

    @property
    def in_waiting(self) -> int:
        """Bytes waiting to be read."""
        return len(self._rx)

    def write(self, data: bytes) -> int:
        """Feed bytes to the device (ASCII lines or binary frames); its replies go to the read buffer."""
        if not self.is_open:
            raise PortNotOpenError()
        if self._dropped:
            raise SerialException("write failed: device disconnected")
        for reply in self._device.feed(bytes(data)):
            if reply is DROP:
                self._dropped = True
                break
            with self._cond:
                self._rx += reply if isinstance(reply, bytes) else (str(reply) + "\n").encode("latin-1")
                self._cond.notify_all()
        return len(data)

    def _check_readable(self) -> None:
        """Raise as pyserial does for a closed port, or for a device that dropped off the bus."""
        if not self.is_open:
            raise PortNotOpenError()
        if self._dropped:
            self.is_open = False
            raise SerialException("read failed: device disconnected (lumionsim drop)")

    def _wait_simulated(self, done: bool) -> bool:
        """On a simulated clock, a read that is not ``done`` waits its whole timeout at once.

        True when the clock was simulated (the caller then does not wait on the wall).
        """
        clock = self._device.clock
        if not clock.simulated or self._timeout is None:
            return False
        if not done:
            clock.advance(self._timeout)
        return True

    def read(self, size: int = 1) -> bytes:
        """Read up to ``size`` bytes within the timeout."""
        self._check_readable()
        timeout = Timeout(self._timeout)
        with self._cond:
            simulated = self._wait_simulated(len(self._rx) >= size)
            while not simulated and len(self._rx) < size and not timeout.expired():
                if self._timeout == 0:
                    break
                self._cond.wait(min(0.05, timeout.time_left()) if self._timeout is not None else 0.05)
            out = bytes(self._rx[:size])
            del self._rx[:size]
        return out

    def read_until(self, expected: bytes = b"\n", size: int | None = None) -> bytes:
        """Fast path: take a whole line (at most ``size`` bytes) from the buffer at once."""
        self._check_readable()
        timeout = Timeout(self._timeout)
        with self._cond:
            simulated = self._wait_simulated(expected in self._rx)
            while not simulated and expected not in self._rx and not timeout.expired():
                self._cond.wait(min(0.05, timeout.time_left()) if self._timeout is not None else 0.05)
            k = self._rx.find(expected)
            n = len(self._rx) if k < 0 else k + len(expected)
            if size is not None:
                n = min(n, size)
            out = bytes(self._rx[:n])
            del self._rx[:n]
        return out

    def reset_input_buffer(self) -> None:
        """Drop pending replies."""
        with self._cond:
            self._rx.clear()

    def reset_output_buffer(self) -> None:
        """Nothing is buffered on the way out."""
