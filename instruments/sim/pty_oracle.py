"""A pyserial port that knows when a simulated pty device has nothing more to say (tests only).

The serial twin of :mod:`instruments.sim.reply_oracle`. A client that reads "until the line
has been quiet for T" (the vendor's ``qontrol`` library does, for every command whose reply
length it cannot know) needs T long enough for a busy machine, or a slow reply is lost and
the test's outcome depends on load; and it waits T out after every such command, which is
dead time. On a real module the client cannot tell the two apart. On a
:class:`~instruments.sim.pty_link.PtyLink` it can: the link counts the bytes it has handled
(``bytes_handled``: fed to the device, its replies written) and the bytes it has sent
(``bytes_sent``).

:func:`oracle_serial` gives a :class:`serial.Serial` subclass whose ``in_waiting`` (what a
polling client asks before it reads) first waits, up to ``long_s``, until the link has
handled every byte written on this port and every byte it sent has reached this end of the
pty. So a reply that comes has always arrived before the client looks, whatever the load,
and the client's own quiet time can be short: it only waits out silence that is certain.
The bytes still travel over the real pseudo-terminal, and the client's code is unchanged.

Example (the vendor's client, test-side)::

    monkeypatch.setattr(qontrol.serial, "Serial", oracle_serial(link))
    q = qontrol.QXOutput(serial_port_name=link.path, response_timeout=0.05)

Our own driver reads lines (``read_until``, which settles first too) through
:func:`oracle_opener`, an opener for :class:`~instruments.transport.SerialTransport`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import serial

from instruments.sim.pty_link import PtyLink

POLL_S = 0.0005  # between looks at the link's counts while it handles the last bytes
# The longest wait for the link to handle what was written (s): a hang, not a busy machine.
LONG_S = 10.0


def oracle_serial(link: PtyLink, long_s: float = LONG_S) -> type[serial.Serial]:
    """A :class:`serial.Serial` class whose ports on ``link`` wait for its replies (module doc)."""

    class OracleSerial(serial.Serial):
        """A pyserial port on ``link`` whose ``in_waiting`` counts every reply already owed."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.wait_idle()
            self.written = 0  # bytes this port wrote since it opened
            self.taken = 0  # bytes of the link's output read or discarded here
            self._base_handled = link.bytes_handled
            self._base_sent = link.bytes_sent
            self._base_drops = link.drops
            super().__init__(*args, **kwargs)

        @staticmethod
        def wait_idle() -> None:
            """Wait (up to ``long_s``) until the link has handled all it received (an earlier
            client's last bytes), so this port's counts start from a quiet link.
            """
            deadline = time.monotonic() + long_s
            while link.bytes_handled < link.bytes_received and time.monotonic() < deadline:
                time.sleep(POLL_S)

        def settled(self) -> bool:
            """True when the link handled every byte written here and all it sent is here, or
            when it dropped this port's pty (nothing more comes on it: reads see the drop).
            """
            if link.drops != self._base_drops:
                return True
            handled = link.bytes_handled - self._base_handled
            sent = link.bytes_sent - self._base_sent
            return handled >= self.written and self.taken + super().in_waiting >= sent

        def wait_settled(self) -> None:
            """Wait (up to ``long_s``) until :meth:`settled`."""
            deadline = time.monotonic() + long_s
            while not self.settled() and time.monotonic() < deadline:
                time.sleep(POLL_S)

        @property
        def in_waiting(self) -> int:
            """Bytes readable now, once every reply owed has arrived (see module doc)."""
            self.wait_settled()
            return super().in_waiting

        def write(self, data: bytes) -> int | None:
            n = super().write(data)
            self.written += len(data) if n is None else n
            return n

        def read(self, size: int = 1) -> bytes:
            data = super().read(size)
            self.taken += len(data)
            return data

        def read_until(self, expected: bytes = b"\n", size: int | None = None) -> bytes:
            """A line (pyserial's ``read_until``), once every reply owed has arrived: a client
            that reads lines without polling ``in_waiting`` (our heater driver) only waits
            out its timeout when no line is coming.
            """
            self.wait_settled()
            return super().read_until(expected, size)

        def reset_input_buffer(self) -> None:
            self.wait_settled()  # what is owed arrives first, then goes with the rest
            self.taken += super().in_waiting
            super().reset_input_buffer()

    return OracleSerial


def oracle_opener(link: PtyLink, long_s: float = LONG_S) -> Callable[[str, int, float], serial.Serial]:
    """An ``opener`` for :class:`~instruments.transport.SerialTransport` whose ports are
    :func:`oracle_serial` ports on ``link`` (8N1, the transport's timeout as the quiet time).
    """
    port_class = oracle_serial(link, long_s)

    def opener(url: str, baudrate: int, timeout_s: float) -> serial.Serial:
        return port_class(url, baudrate=baudrate, bytesize=8, parity="N", stopbits=1, timeout=timeout_s,
                          write_timeout=long_s)

    return opener
