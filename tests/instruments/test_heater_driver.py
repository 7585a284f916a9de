"""Exact wire messages of the heater driver, in the vendor's protocol (no sockets, no pty).

The bytes are those the vendor's own library (``qontrol`` 1.1.20) sends and the replies
those its recorded device sessions show (``+1.2500 mA``, ``E02:05``, ``Q8iv-0001: 0``).
"""

import numpy as np
import pytest

from instruments.errors import (
    BadChannelError,
    GarbledReplyError,
    InstrumentError,
    InstrumentTimeoutError,
    LimitError,
    ModuleResetError,
    OverCurrentError,
    OverVoltageError,
    UnknownCommandError,
)
from instruments.heater_driver import HeaterDriver
from instruments.testing import ScriptedPort, expected_protocol
from instruments.transport import SerialTransport

ID = b"Q8iv-00A1\n"


def setting(command, readback):
    """A setting is framed by the read-back of its channel, sent in the same write."""
    return command + b"\n" + readback + b"\n"


CHAIN = [(b"ID?\n", b"Q8iv-00A1\n"), (b"NUP=0\n", b"OK\n"),
         (b"NUPALL?\nNCHAN?\n", b"Q8iv-00A1: 0\nQ8b-00A2: 1\n16\n"),
         (b"IALL?\nIALL?\nID?\n", b"".join(b"+0.0000 mA\n" for _ in range(32)) + ID)]


def test_open_enumerates_a_mixed_daisy_chain():
    with expected_protocol(HeaterDriver, CHAIN) as drv:
        assert drv.device_id == "Q8iv-00A1"
        assert [m.device_id for m in drv.chain] == ["Q8iv-00A1", "Q8b-00A2"]
        assert drv.n_channels == 16
        np.testing.assert_allclose(drv.max_current_ma, [24.0] * 8 + [83.333333] * 8)
        np.testing.assert_allclose(drv.known_currents_ma, 0.0)


def test_chain_and_channel_count_must_agree():
    script = [*CHAIN[:2], (b"NUPALL?\nNCHAN?\n", b"Q8iv-00A1: 0\n24\n")]
    with pytest.raises(InstrumentError, match="reseat"), expected_protocol(HeaterDriver, script):
        pass


@pytest.mark.parametrize(("call", "sent", "reply", "result"), [
    (lambda d: d.set_current(5, 1.25), setting(b"I5=1.2500", b"I5?"), b"OK\n+1.2500 mA\n", None),
    (lambda d: d.set_current(np.int64(3), np.float32(0.5)), setting(b"I3=0.5000", b"I3?"),
     b"OK\n+0.5001 mA\n", None),  # a measured read-back within tolerance confirms
    (lambda d: d.set_voltage(2, 3.3), setting(b"V2=3.3000", b"V2?"), b"OK\n+3.3000 V\n", None),
    (lambda d: d.current(7), b"I7?\nI7?\nID?\n", b"+2.5000 mA\n+2.5000 mA\n" + ID, 2.5),  # asked twice
    (lambda d: d.voltage(7), b"V7?\nV7?\nID?\n", b"+0.6250 V\n+0.6250 V\n" + ID, 0.625),
    (lambda d: d.identity(), b"ID?\n", ID, "Q8iv-00A1"),
    (lambda d: d.channel_count(), b"NCHAN?\n", b"16\n", 16),
    (lambda d: d.set_max_current(1, 20), setting(b"IMAX1=20.0000", b"IMAX1?"), b"OK\n+20.0000 mA\n", None),
    (lambda d: d.set_max_voltage(1, 10), setting(b"VMAX1=10.0000", b"VMAX1?"), b"OK\n+10.0000 V\n", None),
    (lambda d: d.set_block(2, [1.0, 2.0, 0.25]), setting(b"IVEC2=1.0000,2.0000,0.2500", b"I4?"),
     b"OK\n+0.2500 mA\n", None),
    (lambda d: d.set_block(6, np.array([1.5])), setting(b"I6=1.5000", b"I6?"), b"OK\n+1.5000 mA\n", None),
    (lambda d: d.set_current(5, 1.25), setting(b"I5=1.2500", b"I5?"), b"\x06OK\n+1.2500 mA\n", None),
])
def test_every_ascii_command_exact_bytes(call, sent, reply, result):
    with expected_protocol(HeaterDriver, [(sent, reply)], n_channels=16) as drv:
        assert call(drv) == result


def test_a_block_across_modules_is_one_vector_per_module():
    script = [(setting(b"IVEC6=1.0000,2.0000", b"I7?"), b"OK\n+2.0000 mA\n"),
              (setting(b"IVEC8=3.0000,4.0000", b"I9?"), b"OK\n+4.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=16) as drv:
        drv.set_block(6, [1, 2, 3, 4])
        np.testing.assert_allclose(drv.known_currents_ma[6:10], [1, 2, 3, 4])


@pytest.mark.parametrize(("call", "sent", "reply"), [
    # header 0x81: RW=0 with its parity bit; I = 0x01; channel 5; 12 mA = half of 24 mA full
    # scale; then the read-back 0x88 (RW=1) of the same channel frames the exchange
    (lambda d: d.set_current(5, 12.0), "81010000058000" "88010000050000", b"OK\n+12.0002 mA\n"),
    (lambda d: d.set_max_current(0, 24.0), "8103000000ffff" "88030000000000", b"OK\n+24.0000 mA\n"),
    # RW=1 read: the same ASCII reply as I5? (recorded: 88 01 00 00 00 00 00 -> +0.0202 mA)
    (lambda d: d.current(5), "88010000050000" * 2 + b"ID?\n".hex(), b"+0.0202 mA\n" * 2 + ID),
    # DEXT vector of two words from channel 8
    (lambda d: d.set_block(8, [0.0, 24.0]), "820100000800020000ffff" "88010000090000", b"OK\n+24.0000 mA\n"),
])
def test_binary_frames_exact_bytes(call, sent, reply):
    with expected_protocol(HeaterDriver, [(bytes.fromhex(sent), reply)], n_channels=16, binary=True) as drv:
        call(drv)


def test_binary_all_channel_read_and_quantised_settings():
    replies = b"".join(f"+{k:.4f} mA\n".encode() for k in range(8)) * 2
    with expected_protocol(HeaterDriver, [(bytes.fromhex("a9010000000000" * 2) + b"ID?\n", replies + ID),
                                          (bytes.fromhex("81010000010001" "88010000010000"),
                                           b"OK\n+0.0004 mA\n")],
                           n_channels=8, binary=True) as drv:
        np.testing.assert_allclose(drv.currents(), np.arange(8))
        drv.set_current(1, 0.0002)  # rounds to the nearest of 65535 steps of 24 mA
        assert drv.known_currents_ma[1] == pytest.approx(24 / 65535)


@pytest.mark.parametrize(("reply", "exc", "match"), [
    (b"E02:05\n", OverCurrentError, "over-current"), (b"E01:05\n", OverVoltageError, "compliance"),
    (b"E12:05\n", BadChannelError, "daisy chain"), (b"E10:00\n", UnknownCommandError, "firmware"),
    (b"E11:05\n", LimitError, "refused"),
])
def test_vendor_error_codes_map_to_our_exceptions(reply, exc, match):
    script = [(setting(b"I5=1.0000", b"I5?"), reply + b"+0.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=0) as drv, \
            pytest.raises(exc, match=match):
        drv.set_current(5, 1.0)
    assert drv.known_currents_ma[5] == 0.0  # a refused setting is not believed


@pytest.mark.parametrize("refusal", [b"E10:00\n", b"E11:01\n"])
def test_a_refused_valid_command_is_resent_once_in_case_it_was_corrupted(refusal):
    script = [(setting(b"I1=1.0000", b"I1?"), refusal + b"+0.0000 mA\n"), (b"ID?\n", ID),
              (setting(b"I1=1.0000", b"I1?"), b"OK\n+1.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=1) as drv:
        drv.set_current(1, 1.0)


def test_verify_all_reads_back_every_channel_of_a_vector():
    script = [(b"IVEC0=1.0000,2.0000\nI0?\nI1?\n", b"OK\n+1.0000 mA\n+2.7000 mA\n"), (b"ID?\n", ID),
              (b"IVEC0=1.0000,2.0000\nI0?\nI1?\n", b"OK\n+1.0000 mA\n+2.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8, verify="all") as drv:
        drv.set_block(0, [1.0, 2.0])  # the first write left channel 1 wrong: caught and resent


def test_module_reports_are_not_replies():
    script = [(setting(b"I1=1.0000", b"I1?"), b"OK\nE30:00\n+1.0000 mA\n"),
              (b"I2?\nI2?\nID?\n", b"+2.0000 mA\nE30:00\n+2.0000 mA\n" + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=8) as drv:
        drv.set_current(1, 1.0)
        assert drv.current(2) == 2.0


def test_serial_errors_are_resent_after_resync():
    script = [(setting(b"I1=1.0000", b"I1?"), b"E15:00\n+0.0000 mA\n"), (b"ID?\n", ID),
              (setting(b"I1=1.0000", b"I1?"), b"OK\n+1.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=2) as drv:
        drv.set_current(1, 1.0)


def test_garbage_is_resent_after_resync():
    script = [(setting(b"I1=1.0000", b"I1?"), b"\x8f#~\n"), (b"ID?\n", ID),
              (setting(b"I1=1.0000", b"I1?"), b"OK\n+1.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=2) as drv:
        drv.set_current(1, 1.0)


def test_a_late_reply_is_never_taken_for_the_next_one():
    # the first query times out; its reply arrives during the resync and is discarded there
    script = [(b"I1?\nI1?\nID?\n", b""), (b"ID?\n", b"+1.0000 mA\nQ8iv-00A1\n"),
              (b"I1?\nI1?\nID?\n", b"+1.0000 mA\n" * 2 + ID), (b"I2?\nI2?\nID?\n", b"+2.0000 mA\n" * 2 + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=1) as drv:
        assert drv.current(1) == 1.0
        assert drv.current(2) == 2.0


def test_stale_input_is_drained_before_a_command(caplog):
    port = ScriptedPort([(b"I2?\nI2?\nID?\n", b"+2.0000 mA\n" * 2 + ID)])
    port.pending = b"OK\n"  # a reply that came after its command had given up
    drv = HeaterDriver(SerialTransport("scripted", opener=lambda *_: port), n_channels=8)
    assert drv.current(2) == 2.0
    assert "discarded stale input 'OK'" in caplog.text


def test_an_unsolicited_power_up_means_the_state_is_unknown():
    port = ScriptedPort([])
    port.pending = b"E90:00\n"
    drv = HeaterDriver(SerialTransport("scripted", opener=lambda *_: port), n_channels=8)
    drv.known_currents_ma[:] = 1.0
    with pytest.raises(ModuleResetError, match="powered up"):
        drv.set_current(1, 1.0)
    np.testing.assert_allclose(drv.known_currents_ma, 0.0)


def test_a_late_ok_is_not_taken_for_a_refused_setting():
    # the OK of an earlier setting arrives after this one was sent: the refusal still counts
    script = [(setting(b"I3=3.0000", b"I3?"), b"OK\nE02:03\n+0.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8) as drv, pytest.raises(OverCurrentError):
        drv.set_current(3, 3.0)
    assert drv.known_currents_ma[3] == 0.0


def test_a_setting_the_module_does_not_hold_is_resent():
    script = [(setting(b"I3=3.0000", b"I3?"), b"OK\n+0.0000 mA\n"), (b"ID?\n", ID),
              (setting(b"I3=3.0000", b"I3?"), b"OK\n+3.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8) as drv:
        drv.set_current(3, 3.0)


def test_a_stale_query_reply_is_not_taken_for_this_query():
    script = [(b"I2?\nI2?\nID?\n", b"+9.0000 mA\n+2.0000 mA\n+2.0000 mA\n" + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=8) as drv:
        assert drv.current(2) == 2.0


def test_power_up_in_place_of_a_reply_is_not_a_reply():
    script = [(setting(b"I1=1.0000", b"I1?"), b"E90:00\n")]
    with expected_protocol(HeaterDriver, script, n_channels=8) as drv, \
            pytest.raises(ModuleResetError):
        drv.set_current(1, 1.0)


def test_a_reading_changed_on_the_line_is_asked_again():
    script = [(b"I1?\nI1?\nID?\n", b"+1.0000 mA\n+7.0000 mA\n" + ID), (b"ID?\n", ID),
              (b"I1?\nI1?\nID?\n", b"+1.0000 mA\n" * 2 + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=1) as drv:
        assert drv.current(1) == 1.0


def test_a_reply_of_the_wrong_unit_is_garbled():
    script = [(b"I1?\nI1?\nID?\n", b"+1.0000 V\n" * 2 + ID), (b"ID?\n", ID),
              (b"I1?\nI1?\nID?\n", b"+1.0000 mA\n" * 2 + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=8, retries=1) as drv:
        assert drv.current(1) == 1.0


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
    script = [(setting(b"IMAX0=5.0000", b"IMAX0?"), b"OK\n+5.0000 mA\n")]
    with expected_protocol(HeaterDriver, script, n_channels=2) as drv:
        drv.set_max_current(0, 5.0)
        with pytest.raises(LimitError, match=r"0\.\.5"):
            drv.set_current(0, 6.0)


def test_timeouts_exhaust_retries():
    script = [(b"I1?\nI1?\nID?\n", b""), (b"ID?\n", b""), (b"ID?\n", b""), (b"ID?\n", b"")]
    with expected_protocol(HeaterDriver, script, n_channels=2, retries=1) as drv, \
            pytest.raises(InstrumentTimeoutError):
        drv.current(1)


def test_non_ascii_reply_is_garbled():
    with expected_protocol(HeaterDriver, [(b"ID?\n", b"\xff\xfe\n")], n_channels=2, retries=0) as drv, \
            pytest.raises(GarbledReplyError):
        drv.identity()


def test_transport_counts_bytes_and_reconnect_resyncs():
    ports = [ScriptedPort([(b"ID?\n", b"Q8iv-00A1\n")]),
             ScriptedPort([(b"ID?\n", b"Q8iv-00A1\n"), (b"ID?\n", b"Q8iv-00A1\n")])]
    tr = SerialTransport("scripted", opener=lambda *_: ports.pop(0))
    drv = HeaterDriver(tr, n_channels=1)
    assert drv.identity() == "Q8iv-00A1"
    drv.reconnect()
    assert drv.identity() == "Q8iv-00A1"
    assert (tr.bytes_written, tr.bytes_read) == (12, 30)


def test_every_message_is_logged_at_debug(caplog):
    caplog.set_level("DEBUG", logger="instruments")
    script = [(b"I0?\nI0?\nID?\n", b"+1.0000 mA\n" * 2 + ID)]
    with expected_protocol(HeaterDriver, script, n_channels=1) as drv:
        drv.current(0)
    assert "b'I0?\\nI0?\\nID?\\n'" in caplog.text
    assert "'+1.0000 mA'" in caplog.text
