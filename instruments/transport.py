"""Transports: one line-oriented message channel per instrument, injectable into drivers.

A transport sends one ASCII message and reads one reply line; it maps the library's
exceptions (pyserial, pyvisa) to ours so drivers can retry transient faults, and counts
the bytes it moves so the mesh controller can report time on the wire.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from instruments.bench_lock import device_holder
from instruments.errors import (
    ConnectionLostError,
    GarbledReplyError,
    InstrumentError,
    InstrumentTimeoutError,
)

log = logging.getLogger(__name__)


@runtime_checkable
class Transport(Protocol):
    """What a driver needs from its link."""

    bytes_written: int
    bytes_read: int

    def write(self, message: str) -> None:
        """Send one message (the transport adds the terminator)."""
        ...

    def read(self) -> str:
        """One reply line without its terminator."""
        ...

    def clear(self) -> None:
        """Discard anything waiting to be read (after a timeout or garbage)."""
        ...

    def reopen(self) -> None:
        """Close and open the link again."""
        ...

    def close(self) -> None:
        """Release the link."""
        ...


def open_serial_port(url: str, baudrate: int, timeout_s: float) -> Any:
    """Open a pyserial port from a device path or URL (``lumionsim://``, ``loop://``, ...)."""
    import serial

    import instruments.sim.urlhandler as handlers  # registers lumionsim://

    if handlers.__name__ not in serial.protocol_handler_packages:
        serial.protocol_handler_packages.append(handlers.__name__)
    try:
        # a device is opened exclusively (flock): one bench, one writer (instruments.bench_lock)
        exclusive = True if "://" not in url else None
        return serial.serial_for_url(url, baudrate=baudrate, bytesize=8, parity="N", stopbits=1,
                                     timeout=timeout_s, write_timeout=timeout_s, exclusive=exclusive)
    except (serial.SerialException, OSError, ValueError) as exc:
        holder = device_holder(url) if exclusive and "exclusively lock" in str(exc) else None
        if holder:  # another program has it open exclusively: say which
            raise ConnectionLostError(
                f"cannot open serial port {url!r}: it is held by {holder}; one bench has one "
                "writer: wait for that program to end (or stop it), then run this again") from exc
        raise ConnectionLostError(
            f"cannot open serial port {url!r}: {exc}; check the cable, the device path and that "
            "no other program holds the port"
        ) from exc


class SerialTransport:
    """ASCII lines over pyserial, 8N1, ``\\n`` terminated.

    Args:
        url: device path (``/dev/ttyUSB0``, a pty) or pyserial URL (``lumionsim://heater``).
        baudrate: bits per second (115200 for the Qontrol-class driver).
        timeout_s: read and write timeout (s).
        opener: ``(url, baudrate, timeout_s) -> serial-like``; tests inject a scripted port.
    """

    def __init__(self, url: str, *, baudrate: int = 115200, timeout_s: float = 1.0,
                 opener: Callable[[str, int, float], Any] | None = None) -> None:
        self.url = url
        self.baudrate = baudrate
        self.timeout_s = timeout_s
        self._opener = opener or open_serial_port
        self.bytes_written = 0
        self.bytes_read = 0
        self._port = self._opener(url, baudrate, timeout_s)
        # bytes taken from the port and not yet handed out as a line: a read takes what is
        # waiting at once, which may be more than one line (the rest is the next line's)
        self._rx = bytearray()

    def write(self, message: str) -> None:
        """Send ``message + "\\n"``."""
        data = (message + "\n").encode("ascii")
        try:
            self._port.write(data)
        except Exception as exc:
            raise _serial_error(exc, self.url) from exc
        self.bytes_written += len(data)

    def write_bytes(self, data: bytes) -> None:
        """Send raw bytes as they are (binary protocols)."""
        try:
            self._port.write(data)
        except Exception as exc:
            raise _serial_error(exc, self.url) from exc
        self.bytes_written += len(data)

    def waiting_lines(self) -> list[str]:
        """Take every line already waiting in the input buffer, without waiting for more.

        Stale input (a reply that came after its timeout, an unsolicited report) must be
        seen before the next command, or it would be taken for that command's reply.
        A trailing partial line is returned as it is.
        """
        self._rx += self._waiting_bytes()
        raw, self._rx = bytes(self._rx), bytearray()
        self.bytes_read += len(raw)
        text = raw.decode("latin-1")
        return [line.strip() for line in text.split("\n") if line.strip()]

    def _waiting_bytes(self) -> bytes:
        """Every byte already in the port's input buffer, in one read call, without waiting."""
        raw = b""
        try:
            while n := int(getattr(self._port, "in_waiting", 0)):
                raw += self._port.read(n)
        except Exception as exc:
            raise _serial_error(exc, self.url) from exc
        return raw

    def _line(self) -> bytes:
        """The next line with its ``\\n``, or what came without one before the timeout.

        pyserial's ``read_until`` asks the port for one byte at a time (a ``select`` and a
        ``read`` system call per byte: ~3,500 for a 72-channel ``IALL?`` asked twice). Here
        what is already waiting comes in one call, and only what has not arrived is waited
        for: the reply's first byte (``read(1)``, within the timeout) and, when the line is
        still cut short after taking what followed it, the rest of that line (``read_until``,
        within the timeout again: a reply that starts late and then stops waits at most
        twice the timeout). Bytes past the line stay here for the next read, or for
        :meth:`waiting_lines` as stale input: what the module sent is seen in the same
        order as before, only in fewer calls.
        """
        if b"\n" not in self._rx:
            self._rx += self._waiting_bytes() or self._take(self._port.read, 1)
        if self._rx and b"\n" not in self._rx:
            self._rx += self._waiting_bytes()
        if self._rx and b"\n" not in self._rx:
            self._rx += self._take(self._port.read_until, b"\n")
        end = self._rx.find(b"\n")
        n = len(self._rx) if end < 0 else end + 1
        raw = bytes(self._rx[:n])
        del self._rx[:n]
        return raw

    def _take(self, reader: Callable[[Any], bytes], arg: Any) -> bytes:
        """``reader(arg)`` on the port, its exceptions as ours."""
        try:
            return reader(arg)
        except Exception as exc:
            raise _serial_error(exc, self.url) from exc

    def read(self) -> str:
        """One reply line (:meth:`_line`): no terminator by the timeout is a timeout."""
        raw = self._line()
        self.bytes_read += len(raw)
        if not raw.endswith(b"\n"):
            raise InstrumentTimeoutError(
                f"{self.url}: no reply within {self.timeout_s} s (got {raw!r}); check power, cable "
                "and baud rate"
            )
        try:
            return raw.decode("ascii").strip()
        except UnicodeDecodeError as exc:
            raise GarbledReplyError(f"{self.url}: non-ASCII reply {raw!r}; check the baud rate") from exc

    def clear(self) -> None:
        """Drop pending input (what this transport holds too)."""
        self._rx = bytearray()
        try:
            self._port.reset_input_buffer()
        except Exception as exc:
            raise _serial_error(exc, self.url) from exc

    def reopen(self) -> None:
        """Close and reopen the same URL."""
        self.close()
        self._rx = bytearray()  # input of the old link is not this one's
        self._port = self._opener(self.url, self.baudrate, self.timeout_s)

    def close(self) -> None:
        """Close the port (idempotent)."""
        try:
            self._port.close()
        except Exception as exc:  # closing a dead port must not mask the real error
            log.debug("closing %s: %r", self.url, exc)


def _serial_error(exc: Exception, url: str) -> InstrumentError:
    if isinstance(exc, InstrumentError):
        return exc
    import serial

    if isinstance(exc, serial.SerialTimeoutException):
        return InstrumentTimeoutError(f"{url}: write timed out; is the device still powered?")
    return ConnectionLostError(f"{url}: serial link lost ({exc}); reconnect() once the device is back")


_MANAGERS: dict[str, Any] = {}


def open_visa_resource(address: str, timeout_s: float) -> Any:
    """Open a VISA resource with pyvisa-py (``@py``), or pyvisa-sim for ``FILE.yaml@sim``."""
    import pyvisa

    backend, _, spec = address.rpartition("|")
    backend = backend or "@py"
    if backend not in _MANAGERS:
        _MANAGERS[backend] = pyvisa.ResourceManager(backend)
    rm = _MANAGERS[backend]
    try:
        res = rm.open_resource(spec, read_termination="\n", write_termination="\n",
                               timeout=int(timeout_s * 1000))
        if spec.upper().startswith("TCPIP"):
            # write-then-query otherwise waits on Nagle + delayed ACK (40 ms per setting)
            with contextlib.suppress(Exception):  # not every backend exposes its socket
                sock = res.visalib.sessions[res.session].interface
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (pyvisa.errors.VisaIOError, OSError, ValueError) as exc:
        raise ConnectionLostError(
            f"cannot open VISA resource {spec!r}: {exc}; check the address and that the instrument "
            "is on the network"
        ) from exc
    return res


class VisaTransport:
    """SCPI lines over a pyvisa resource (``\\n`` terminations).

    Args:
        address: VISA resource string, optionally prefixed by a backend and ``|``:
            ``TCPIP::127.0.0.1::5025::SOCKET`` (pyvisa-py) or
            ``/path/laser.yaml@sim|TCPIP::localhost::1001::SOCKET`` (pyvisa-sim).
        timeout_s: per-message timeout (s).
        opener: ``(address, timeout_s) -> resource``; tests inject a scripted resource.
    """

    def __init__(self, address: str, *, timeout_s: float = 2.0,
                 opener: Callable[[str, float], Any] | None = None) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._opener = opener or open_visa_resource
        self.bytes_written = 0
        self.bytes_read = 0
        self._res = self._opener(address, timeout_s)

    def write(self, message: str) -> None:
        """Send one SCPI message."""
        try:
            self._res.write(message)
        except Exception as exc:
            raise _visa_error(exc, self.address) from exc
        self.bytes_written += len(message) + 1

    def read(self) -> str:
        """One reply line."""
        try:
            reply = self._res.read()
        except Exception as exc:
            raise _visa_error(exc, self.address) from exc
        self.bytes_read += len(reply) + 1
        return reply.strip()

    def clear(self) -> None:
        """Drop pending input by reopening the session: a late reply to a timed-out query must
        not be taken for the next one's (pyvisa-py's own ``clear()`` can spin on a dead socket).
        """
        self.reopen()

    def reopen(self) -> None:
        """Close and open the resource again."""
        self.close()
        self._res = self._opener(self.address, self.timeout_s)

    def close(self) -> None:
        """Close the resource (idempotent)."""
        try:
            self._res.close()
        except Exception as exc:
            log.debug("closing %s: %r", self.address, exc)


def _visa_error(exc: Exception, address: str) -> InstrumentError:
    if isinstance(exc, InstrumentError):
        return exc
    if isinstance(exc, UnicodeDecodeError):
        return GarbledReplyError(f"{address}: non-ASCII reply; check the instrument's settings")
    import pyvisa

    if isinstance(exc, pyvisa.errors.VisaIOError) and exc.error_code == pyvisa.constants.VI_ERROR_TMO:
        return InstrumentTimeoutError(f"{address}: no reply within the timeout; is it powered and idle?")
    return ConnectionLostError(f"{address}: link lost ({exc}); reconnect() once the instrument is back")
