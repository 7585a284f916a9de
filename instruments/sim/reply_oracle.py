"""Timeouts that wait only while a reply can still come, for tests on simulated SCPI instruments.

A driver's timeout does two jobs. It is the deadline of a reply on its way, which must be
generous, or a busy machine turns a slow reply into a fault; and it is the wait before a
reply that will never come (a dropped link, a held or swallowed reply) is declared lost,
which is dead time: the fault tests spent most of their time in it. On a real instrument
the driver cannot tell the two apart. On a simulated one the server can: it knows what it
has read from a connection and what it has written back
(:meth:`instruments.sim.scpi_devices.ScpiServer.connection_counts`).

:func:`oracle_opener` gives :class:`instruments.transport.VisaTransport` a pyvisa resource
that, before each read, waits (up to ``long_s``) until the server has handled every
message sent on the connection, then reads with ``long_s`` when a line is on its way or
still unread, and with ``short_s`` when the server has sent everything it will send. The
driver still meets a real pyvisa timeout on a real socket (or the closed link), only
sooner; whether a reply counts as lost no longer depends on how busy the machine is,
because a reply that comes always gets the long deadline.

Example::

    transport = VisaTransport(server.resource, timeout_s=LONG_S,
                              opener=oracle_opener(server, long_s=LONG_S, short_s=SHORT_S))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instruments.transport import open_visa_resource


def client_port(resource: Any) -> int:
    """The local TCP port of a pyvisa-py ``SOCKET`` resource (the server sees it as the client's)."""
    session = resource.visalib.sessions[resource.session]
    return int(session.interface.getsockname()[1])


class OracleResource:
    """A pyvisa resource whose reads wait ``short_s`` when the server has nothing more to send.

    Args:
        resource: the pyvisa-py resource (``TCPIP::host::port::SOCKET``) to wrap.
        server: the :class:`~instruments.sim.scpi_devices.ScpiServer` it is connected to.
        long_s: the timeout of a read when a line may still come, and the longest wait for
            the server to handle a message (s).
        short_s: the timeout of a read when nothing more will come (s).
    """

    def __init__(self, resource: Any, server: Any, long_s: float, short_s: float) -> None:
        self._res = resource
        self._server = server
        self._port = client_port(resource)
        server.forget_connection(self._port)  # nothing sent yet: counts of an earlier owner of the port go
        self.long_s, self.short_s = long_s, short_s
        self.sent = 0  # messages written on this connection
        self.received = 0  # lines read from it

    def write(self, message: str) -> Any:
        """Send one message (pyvisa's ``write``)."""
        out = self._res.write(message)
        self.sent += 1
        return out

    def nothing_coming(self) -> bool:
        """True when every line the server wrote was read and it will write no more: it has
        handled every message sent, or ended the connection.
        """
        handled, lines, ended = self._server.await_handled(self._port, self.sent, self.long_s)
        return (handled >= self.sent or ended) and lines <= self.received

    def read(self) -> str:
        """One line (pyvisa's ``read``), with the timeout :meth:`nothing_coming` decides."""
        self._res.timeout = 1000 * (self.short_s if self.nothing_coming() else self.long_s)
        try:
            line = self._res.read()
        except UnicodeDecodeError:
            self.received += 1  # the line came and was taken off the link; its bytes do not decode
            raise
        finally:
            self._res.timeout = 1000 * self.long_s
        self.received += 1
        return line

    def close(self) -> None:
        """Close the wrapped resource."""
        self._res.close()


def oracle_opener(server: Any, *, long_s: float, short_s: float) -> Callable[[str, float], OracleResource]:
    """An ``opener`` for :class:`~instruments.transport.VisaTransport` (see module doc)."""

    def opener(address: str, _timeout_s: float) -> OracleResource:
        return OracleResource(open_visa_resource(address, long_s), server, long_s, short_s)

    return opener
