"""The serial transport reads what is waiting in one call, not a byte per call (issue 29);
a simulated device's pty link closes without waiting for its thread's next poll.

pyserial's ``read_until`` takes one byte per ``read`` (a ``select`` and a ``read`` system
call each): a 72-channel ``IALL?`` asked twice is ~1,700 bytes, so ~1,700 calls of each, the
0.8 s of heater read-back a ``lumion program`` paid. These tests count the port's ``read``
calls on a real pseudo-terminal; the bytes on the wire and the lines handed out are the same.
"""

import os
import time
import tty

import numpy as np
import pytest
import serial

from instruments.errors import InstrumentTimeoutError
from instruments.heater_driver import HeaterDriver
from instruments.sim import pty_link
from instruments.sim.chip import Chip
from instruments.sim.heater_device import HeaterDeviceSim, PtyLink
from instruments.transport import SerialTransport
from photonics.topology import smartlight

# A short timeout (s): only the timeout test waits it out, on a line that never ends.
TIMEOUT_S = 0.05
# How long a test waits for bytes written on the pty's far end to reach this end (s): the
# kernel moves them in its own time; past this it is a hang, not a busy machine.
ARRIVAL_S = 10.0
# read_until reads one byte per call; reading what waits takes at most the first byte of a line
# (read(1)) and then the rest in one call: far fewer calls than bytes, on any machine load.
BYTES_PER_READ_MIN = 4


class CountingSerial(serial.Serial):
    """A pyserial port that counts its ``read`` calls (``read_until`` makes its own)."""

    reads = 0

    def read(self, size: int = 1) -> bytes:
        type(self).reads += 1
        return super().read(size)


def send(master: int, transport: SerialTransport, data: bytes) -> None:
    """Write ``data`` on the pty's far end and wait until it is in the port's input buffer."""
    os.write(master, data)
    arrived(transport, len(data))


def arrived(transport: SerialTransport, n_bytes: int) -> None:
    """Wait until ``n_bytes`` written on the far end are in the port's input buffer."""
    deadline = time.monotonic() + ARRIVAL_S
    while transport._port.in_waiting < n_bytes and time.monotonic() < deadline:
        time.sleep(0.001)


def counting_opener(url: str, baudrate: int, timeout_s: float) -> CountingSerial:
    return CountingSerial(url, baudrate=baudrate, timeout=timeout_s, write_timeout=timeout_s)


@pytest.fixture
def pty():
    """(master fd, slave path): the far end of a raw pseudo-terminal."""
    master, slave = os.openpty()
    tty.setraw(slave)
    yield master, os.ttyname(slave)
    os.close(master)
    os.close(slave)


@pytest.fixture
def counted(monkeypatch):
    monkeypatch.setattr(CountingSerial, "reads", 0)
    return CountingSerial


def test_lines_already_waiting_come_in_one_read_and_in_order(pty, counted):
    master, path = pty
    lines = [f"+{k:.4f} mA" for k in range(50)]
    transport = SerialTransport(path, timeout_s=TIMEOUT_S, opener=counting_opener)  # opening flushes
    data = ("\n".join(lines) + "\n").encode("ascii")
    send(master, transport, data)
    try:
        got = [transport.read() for _ in lines]
        assert got == lines
        assert counted.reads == 1  # read_until took one call per byte: 600
        assert transport.bytes_read == sum(len(x) + 1 for x in lines)
    finally:
        transport.close()


def test_what_follows_a_line_is_stale_input_for_the_next_command(pty, counted):
    master, path = pty
    transport = SerialTransport(path, timeout_s=TIMEOUT_S, opener=counting_opener)
    sent = b"OK\n+1.0000 mA\nE90:0\n+2.0"  # a reply, then a report and a cut line
    send(master, transport, sent)
    try:
        assert transport.read() == "OK"
        assert transport.read() == "+1.0000 mA"
        assert transport.waiting_lines() == ["E90:0", "+2.0"]  # held here, seen before the next write
        assert transport.waiting_lines() == []
    finally:
        transport.close()


def test_clear_drops_what_the_transport_holds(pty, counted):
    master, path = pty
    transport = SerialTransport(path, timeout_s=TIMEOUT_S, opener=counting_opener)
    send(master, transport, b"OK\nlate\n")
    try:
        assert transport.read() == "OK"
        transport.clear()
        send(master, transport, b"fresh\n")
        assert transport.read() == "fresh"
    finally:
        transport.close()


def test_a_line_that_never_ends_times_out_with_what_came(pty, counted):
    master, path = pty
    transport = SerialTransport(path, timeout_s=TIMEOUT_S, opener=counting_opener)
    try:
        send(master, transport, b"+1.25")
        with pytest.raises(InstrumentTimeoutError, match=r"b'\+1\.25'"):
            transport.read()
        send(master, transport, b"+2.5000 mA\n")
        assert transport.read() == "+2.5000 mA"
    finally:
        transport.close()


def test_reading_every_channel_takes_a_few_reads_per_line_not_one_per_byte(counted):
    chip = Chip(smartlight(), seed=5)
    link = PtyLink(HeaterDeviceSim(chip))
    try:
        driver = HeaterDriver(SerialTransport(link.path, timeout_s=1.0, opener=counting_opener))
        try:
            counted.reads = 0
            before = driver.transport.bytes_read
            currents = driver.measured_currents()
            lines = 2 * driver.n_channels + 1  # IALL? twice, then ID?
            assert currents.shape == (driver.n_channels,)
            assert np.all(np.abs(currents) <= 0.025)  # at zero, within a module's offset
            n_bytes = driver.transport.bytes_read - before
            assert n_bytes > 10 * lines
            assert counted.reads * BYTES_PER_READ_MIN <= n_bytes  # read_until: one read per byte
        finally:
            driver.close()
    finally:
        link.close()


# Far longer than any test waits: a serving thread that only polled for its stop flag would
# still be in its select when close() gives up joining it.
LONG_POLL_S = 60.0
JOIN_S = 10.0


def test_closing_a_pty_link_wakes_its_thread_instead_of_waiting_for_a_poll(monkeypatch, small_chip):
    monkeypatch.setattr(pty_link, "POLL_S", LONG_POLL_S)
    link = PtyLink(HeaterDeviceSim(small_chip))
    thread, alive_after_join = link._thread, []
    join = thread.join

    def spy(timeout=None):
        join(timeout)
        alive_after_join.append(thread.is_alive())

    thread.join = spy
    link.close(timeout_s=JOIN_S)
    assert alive_after_join == [False]  # ended by the wake-up, not left behind by the join's timeout
    assert not os.path.exists(link.path)
    link.close()  # a second close does nothing (its descriptors' numbers may be reused)
