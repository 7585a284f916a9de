"""Exact-message test helpers (PyMeasure's ``expected_protocol`` style), no sockets.

A scripted port asserts each byte string a driver writes and hands back the scripted
reply; at the end every scripted exchange must have happened::

    with expected_protocol(HeaterDriver, [(b"I5=1.2500\\nI5?\\n", b"OK\\n+1.2500 mA\\n")],
                           n_channels=8) as drv:
        drv.set_current(5, 1.25)

For SCPI drivers (pyvisa resources) the messages are strings without terminators.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from instruments.transport import SerialTransport, VisaTransport

Exchange = tuple[Any, Any]


class ScriptedPort:
    """A pyserial-like port that checks every write against a script."""

    def __init__(self, script: Sequence[Exchange]) -> None:
        self.script = list(script)
        self.pending = b""
        self.closed = False

    def write(self, data: bytes) -> int:
        """Assert ``data`` is the next scripted message and queue its reply."""
        assert self.script, f"unexpected write {data!r}: the script is finished"
        expected, reply = self.script.pop(0)
        assert data == expected, f"wrote {data!r}, expected {expected!r}"
        self.pending += reply or b""
        return len(data)

    def read_until(self, expected: bytes = b"\n") -> bytes:
        """Hand back the queued reply up to and including ``expected``."""
        k = self.pending.find(expected)
        n = len(self.pending) if k < 0 else k + len(expected)
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    @property
    def in_waiting(self) -> int:
        """Bytes queued for reading."""
        return len(self.pending)

    def read(self, size: int = 1) -> bytes:
        """Hand back up to ``size`` queued bytes."""
        out, self.pending = self.pending[:size], self.pending[size:]
        return out

    def reset_input_buffer(self) -> None:
        """Drop queued replies."""
        self.pending = b""

    def close(self) -> None:
        """Mark closed."""
        self.closed = True


class ScriptedResource:
    """A pyvisa-resource-like object that checks every write against a script."""

    def __init__(self, script: Sequence[Exchange]) -> None:
        self.script = list(script)
        self.replies: list[str] = []
        self.read_termination = self.write_termination = "\n"

    def write(self, message: str) -> int:
        """Assert ``message`` is the next scripted one and queue its reply (if any)."""
        assert self.script, f"unexpected write {message!r}: the script is finished"
        expected, reply = self.script.pop(0)
        assert message == expected, f"wrote {message!r}, expected {expected!r}"
        if reply is not None:
            self.replies.append(reply)
        return len(message)

    def read(self) -> str:
        """The next queued reply."""
        assert self.replies, "read with no reply scripted"
        return self.replies.pop(0)

    def clear(self) -> None:
        """Drop queued replies."""
        self.replies.clear()

    def close(self) -> None:
        """Nothing to release."""


@contextlib.contextmanager
def expected_protocol(driver_cls: type, script: Sequence[Exchange], **kwargs: Any) -> Iterator[Any]:
    """Build ``driver_cls`` on a scripted transport; assert the whole script was used.

    Byte-string scripts use a serial transport, text scripts a VISA transport.
    """
    if script and isinstance(script[0][0], bytes):
        port = ScriptedPort(script)
        transport: Any = SerialTransport("scripted", opener=lambda *_: port)
    else:
        port = ScriptedResource(script)  # type: ignore[assignment]
        transport = VisaTransport("scripted", opener=lambda *_: port)
    driver = driver_cls(transport, **kwargs)
    yield driver
    assert not port.script, f"these exchanges never happened: {port.script}"
