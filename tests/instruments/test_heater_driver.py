"""Exact wire messages of the heater driver (no sockets, no pty)."""

import numpy as np
import pytest

from instruments.errors import (
    BadChannelError,
    GarbledReplyError,
    InstrumentTimeoutError,
    LimitError,
    OverCurrentError,
    OverVoltageError,
    UnknownCommandError,
)
from instruments.heater_driver import HeaterDriver
from instruments.testing import ScriptedPort, expected_protocol
from instruments.transport import SerialTransport


def test_nchan_asked_when_not_given():
    with expected_protocol(HeaterDriver, [(b"nchan?\n", b"16\n")]) as drv:
        assert drv.n_channels == 16


@pytest.mark.parametrize(("call", "sent", "reply", "result"), [
    (lambda d: d.set_current(5, 1.25), b"i5=1.2500\n", b"OK\n", None),
    (lambda d: d.set_current(np.int64(3), np.float32(0.5)), b"i3=0.5000\n", b"OK\n", None),
    (lambda d: d.set_voltage(2, 3.3), b"v2=3.3000\n", b"OK\n", None),
    (lambda d: d.current(7), b"i7?\n", b"2.5000\n", 2.5),
    (lambda d: d.voltage(7), b"v7?\n", b"0.6250\n", 0.625),
    (lambda d: d.identity(), b"id?\n", b"Q8iv SN12\n", "Q8iv SN12"),
    (lambda d: d.channel_count(), b"nchan?\n", b"8\n", 8),
    (lambda d: d.set_max_current(1, 20), b"imax1=20.0000\n", b"OK\n", None),
    (lambda d: d.set_max_voltage(1, 10), b"vmax1=10.0000\n", b"OK\n", None),
    (lambda d: d.set_block(2, [1.0, 2.0, 0.25]), b"i2:4=1.0000,2.0000,0.2500\n", b"OK\n", None),
    (lambda d: d.set_block(6, np.array([1.5])), b"i6=1.5000\n", b"OK\n", None),
])
def test_every_command_exact_bytes(call, sent, reply, result):
    with expected_protocol(HeaterDriver, [(sent, reply)], n_channels=8) as drv:
        assert call(drv) == result


def test_iall_and_vipall_parse():
    script = [(b"iall?\n", b"0.0000,1.0000,2.0000,3.0000\n"),
              (b"vipall?\n", b"0.0000:0.0000:0.0000,0.2500:1.0000:0.2500,1:2:2,3:3:9\n")]
    with expected_protocol(HeaterDriver, script, n_channels=4) as drv:
        np.testing.assert_allclose(drv.currents(), [0, 1, 2, 3])
        _v, i, p = drv.vip()
        np.testing.assert_allclose(p, [0, 0.25, 2, 9])
        np.testing.assert_allclose(i, [0, 1, 2, 3])


@pytest.mark.parametrize(("reply", "exc"), [
    (b"E04:5\n", OverCurrentError), (b"E05:5\n", OverVoltageError), (b"E02:5\n", BadChannelError),
    (b"E01:5\n", UnknownCommandError), (b"E03:5\n", LimitError),
])
def test_error_codes_map_to_our_exceptions(reply, exc):
    with expected_protocol(HeaterDriver, [(b"i5=1.0000\n", reply)], n_channels=8) as drv, \
            pytest.raises(exc, match="channel 5"):
        drv.set_current(5, 1.0)


@pytest.mark.parametrize("value", [-0.1, 24.01, float("nan"), "x"])
def test_over_limit_sends_nothing(value):
    with expected_protocol(HeaterDriver, [], n_channels=8) as drv, pytest.raises(LimitError):
        drv.set_current(1, value)


def test_bad_channel_and_block_over_limit_send_nothing():
    with expected_protocol(HeaterDriver, [], n_channels=8) as drv:
        with pytest.raises(LimitError, match="channel 8"):
            drv.set_current(8, 1.0)
        with pytest.raises(LimitError):
            drv.set_block(6, [1.0, 1.0, 1.0])
        with pytest.raises(LimitError):
            drv.set_block(0, [1.0, 30.0])


def test_imax_lowers_the_driver_side_limit():
    with expected_protocol(HeaterDriver, [(b"imax0=5.0000\n", b"OK\n")], n_channels=2) as drv:
        drv.set_max_current(0, 5.0)
        with pytest.raises(LimitError, match=r"0\.\.5"):
            drv.set_current(0, 6.0)


def test_garbage_and_comm_errors_are_retried():
    script = [(b"i1=1.0000\n", b"\x8f#~\n"), (b"i1=1.0000\n", b"E10:1\n"), (b"i1=1.0000\n", b"OK\n")]
    with expected_protocol(HeaterDriver, script, n_channels=2, retries=2) as drv:
        drv.set_current(1, 1.0)


def test_timeouts_exhaust_retries():
    script = [(b"i1?\n", b""), (b"i1?\n", b"")]
    with expected_protocol(HeaterDriver, script, n_channels=2, retries=1) as drv, \
            pytest.raises(InstrumentTimeoutError, match="no reply"):
        drv.current(1)


def test_non_ascii_reply_is_garbled():
    with expected_protocol(HeaterDriver, [(b"id?\n", b"\xff\xfe\n")], n_channels=2, retries=0) as drv, \
            pytest.raises(GarbledReplyError):
        drv.identity()


def test_transport_counts_bytes_and_reconnects():
    ports = [ScriptedPort([(b"id?\n", b"A\n")]), ScriptedPort([(b"id?\n", b"B\n")])]
    tr = SerialTransport("scripted", opener=lambda *_: ports.pop(0))
    drv = HeaterDriver(tr, n_channels=1)
    assert drv.identity() == "A"
    drv.reconnect()
    assert drv.identity() == "B"
    assert (tr.bytes_written, tr.bytes_read) == (8, 4)


def test_every_message_is_logged_at_debug(caplog):
    caplog.set_level("DEBUG", logger="instruments")
    with expected_protocol(HeaterDriver, [(b"i0?\n", b"1.0000\n")], n_channels=1) as drv:
        drv.current(0)
    assert "'i0?'" in caplog.text
    assert "'1.0000'" in caplog.text
