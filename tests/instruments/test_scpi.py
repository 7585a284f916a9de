"""SCPI drivers: exact messages (scripted) and the loopback simulators."""


import numpy as np
import pytest

from instruments.errors import (
    BenchConfigError,
    DeviceError,
    LimitError,
    TransientError,
    UnknownCommandError,
)
from instruments.laser import TunableLaser
from instruments.power_meter import PowerMeter
from instruments.sim.chip import Chip
from instruments.sim.reply_oracle import oracle_opener
from instruments.sim.scpi_devices import ScpiServer, SimLaser, SimPowerMeter
from instruments.testing import ScriptedResource, expected_protocol
from instruments.transport import VisaTransport, open_visa_resource
from photonics.topology import hexagonal

IDN = "Keysight Technologies,8164B,MY00000001,V5.25(72637)"
SHORT_TIMEOUT_S = 0.3  # the simulators answer in well under this; a missing reply costs one timeout
# The drivers on the simulated servers read through the reply oracle (instruments/sim/reply_oracle.py,
# as tests/instruments/test_scpi_faults.py): a reply on its way gets LONG_S, however busy the
# machine, and one the server will never send is declared lost after SHORT_S instead of
# SHORT_TIMEOUT_S (the injected timeouts and drops waited 0.3 s each, issue 29).
LONG_S = 5.0
SHORT_S = 0.01
W23 = "SENS2:CHAN3:POW:UNIT"
READ23 = [f"{W23}?", f"{W23}?", "READ2:CHAN3:POW?", "FETC2:CHAN3:POW?"]


def framed(*exchanges, first_tag=1):
    """Logical exchanges (units, replies, esr) -> the tagged messages the driver sends.

    Each message is ``*ESE <tag>;<units>;*ESR?;*ESE?``, each reply ``<replies>;<esr>;<tag>``.
    """
    out = []
    for k, (units, replies, *esr) in enumerate(exchanges):
        tag = first_tag + k
        body = [u if u.startswith("*") else ":" + u for u in units]
        msg = ";".join([f"*ESE {tag}", *body, "*ESR?", "*ESE?"])
        out.append((msg, ";".join([*replies, str(esr[0] if esr else 0), str(tag)])))
    return out


def setting(command, readback=(), replies=()):
    """A confirmed setting: the command, *OPC?, its read-back queries."""
    return [command, "*OPC?", *readback], ["1", *replies]


def twice(query, reply):
    return [query, query], [reply, reply]


ERR_NONE = (["SYST:ERR?"], ['+0,"No error"'])


# -- exact messages --------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda d: d.identity(), [twice("*IDN?", IDN)], IDN),
    (lambda d: d.connect(), [(["*CLS", "*OPC?"], ["1"]), twice("*IDN?", IDN)], IDN),
    (lambda d: d.reset(), [setting("*RST")], None),
    (lambda d: setattr(d, "wavelength_nm", np.float64(1550.5)),
     [setting("SOUR0:WAV 1550.5000NM", ["SOUR0:WAV?"], ["+1.55050000E-006"])], None),
    (lambda d: d.wavelength_nm, [twice("SOUR0:WAV?", "+1.55050000E-006")], pytest.approx(1550.5)),
    (lambda d: setattr(d, "power_dbm", np.int64(3)),
     [setting("SOUR0:POW 3.000DBM", ["SOUR0:POW:UNIT?", "SOUR0:POW?"], ["+0", "+3.00000000E+000"])], None),
    (lambda d: d.power_dbm, [(["SOUR0:POW:UNIT?", "SOUR0:POW:UNIT?", "SOUR0:POW?", "SOUR0:POW?"],
                              ["+0", "+0", "+3.00000000E+000", "+3.00000000E+000"])], 3.0),
    # left in W by another program (PyMeasure's output_power_mW does that): converted, not misread
    (lambda d: d.power_dbm, [(["SOUR0:POW:UNIT?", "SOUR0:POW:UNIT?", "SOUR0:POW?", "SOUR0:POW?"],
                              ["+1", "+1", "+1.99526231E-003", "+1.99526231E-003"])], pytest.approx(3.0)),
    (lambda d: setattr(d, "output_enabled", True), [setting("SOUR0:POW:STAT 1", ["SOUR0:POW:STAT?"], ["1"])],
     None),
    (lambda d: d.output_enabled, [twice("SOUR0:POW:STAT?", "+0")], False),
    (lambda d: d.select_output(np.int32(7)), [setting("ROUT1:CHAN1 A,7", ["ROUT1:CHAN1?"], ["A,7"])], None),
    (lambda d: d.selected_output(), [twice("ROUT1:CHAN1?", "A,7")], 7),
    (lambda d: d.errors(), [(["SYST:ERR?"], ['-113,"Undefined header"']), (["SYST:ERR?"], ['0,"No error"'])],
     [(-113, "Undefined header")]),
])
def test_laser_exact_messages(call, script, result):
    with expected_protocol(TunableLaser, framed(*script)) as laser:
        assert call(laser) == result


def test_laser_slots_come_from_the_constructor():
    script = framed(twice("SOUR2:WAV?", "+1.31E-006"), setting("ROUT4:CHAN2 A,3", ["ROUT4:CHAN2?"], ["A,3"]))
    with expected_protocol(TunableLaser, script, source=2, switch_slot=4, switch_channel=2) as laser:
        assert laser.wavelength_nm == pytest.approx(1310)
        laser.select_output(3)


@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda h: setattr(h, "wavelength_nm", 1310),
     [setting("SENS2:CHAN3:POW:WAV 1310.0000NM", ["SENS2:CHAN3:POW:WAV?"], ["+1.31000000E-006"])], None),
    (lambda h: h.wavelength_nm, [twice("SENS2:CHAN3:POW:WAV?", "+1.31000000E-006")], pytest.approx(1310)),
    (lambda h: setattr(h, "averaging_time_s", 0.1),
     [setting("SENS2:CHAN3:POW:ATIM 0.1000S", ["SENS2:CHAN3:POW:ATIM?"], ["+1.00000000E-001"])], None),
    (lambda h: h.averaging_time_s, [twice("SENS2:CHAN3:POW:ATIM?", "+1.00000000E-001")], 0.1),
    # the range moves in 10 dB steps: -23 is sent as -20 and confirmed as such
    (lambda h: setattr(h, "range_dbm", -23),
     [setting("SENS2:CHAN3:POW:RANG -20DBM", ["SENS2:CHAN3:POW:RANG?"], ["-2.00000000E+001"])], None),
    (lambda h: h.range_dbm, [twice("SENS2:CHAN3:POW:RANG?", "-2.00000000E+001")], -20.0),
    (lambda h: setattr(h, "auto_range", False),
     [setting("SENS2:CHAN3:POW:RANG:AUTO 0", ["SENS2:CHAN3:POW:RANG:AUTO?"], ["0"])], None),
    (lambda h: h.auto_range, [twice("SENS2:CHAN3:POW:RANG:AUTO?", "1")], True),
    (lambda h: h.unit_watts, [twice(f"{W23}?", "+1")], True),
    (lambda h: h.read_power_dbm(), [(READ23, ["+0", "+0", "-1.23400000E+001", "-1.23400000E+001"])], -12.34),
    # a head left in W: the reading is converted and the head switched to dBm for the next ones
    (lambda h: h.read_power_dbm(), [(READ23, ["+1", "+1", "+1.00000000E-006", "+1.00000000E-006"]),
                                    setting(f"{W23} 0", [f"{W23}?"], ["+0"])], pytest.approx(-30.0)),
    # a W reading below zero (noise after zeroing) has no dBm value: read again in dBm
    (lambda h: h.read_power_dbm(), [(READ23, ["+1", "+1", "-2.00000000E-012", "-2.00000000E-012"]),
                                    setting(f"{W23} 0", [f"{W23}?"], ["+0"]),
                                    (READ23, ["+0", "+0", "-8.50000000E+001", "-8.50000000E+001"])], -85.0),
    (lambda h: h.read_power_w(), [(READ23, ["+0", "+0", "+0.00000000E+000", "+0.00000000E+000"])],
     pytest.approx(1e-3)),
    (lambda h: h.read_power_w(), [(READ23, ["+1", "+1", "+2.50000000E-006", "+2.50000000E-006"])], 2.5e-6),
])
def test_meter_exact_messages(call, script, result):
    with expected_protocol(PowerMeter, framed(*script)) as meter:
        assert call(meter.channel(2, 3)) == result


def test_a_refusal_is_resent_once_then_raises_with_the_instruments_text():
    units, _ = setting("SOUR0:POW 3.000DBM", ["SOUR0:POW:UNIT?", "SOUR0:POW?"])
    refused = (units, ["1", "+0", "+0.00000000E+000"], 16)
    errors = [(["SYST:ERR?"], ['-222,"Data out of range"']), (["SYST:ERR?"], ['-221,"Settings conflict"']),
              ERR_NONE]
    with expected_protocol(TunableLaser, framed(refused, *errors, refused, *errors)) as laser, \
            pytest.raises(DeviceError, match=r"-222.*-221") as err:
        laser.power_dbm = 3
    assert err.value.code == -222
    assert not isinstance(err.value, UnknownCommandError)


def test_a_refusal_that_does_not_repeat_was_the_line():
    sent = setting("ROUT1:CHAN1 A,2", ["ROUT1:CHAN1?"], ["A,2"])
    script = framed((sent[0], ["1", "A,1"], 32), (["SYST:ERR?"], ['-113,"Undefined header"']), ERR_NONE, sent,
                    sent)  # a refusal may mean a mangled command: every owned setting is re-applied
    with expected_protocol(TunableLaser, script) as laser:
        laser.select_output(2)
    assert laser.owned == {"ROUT1:CHAN1?": 2}


def test_a_setting_the_instrument_does_not_confirm_is_resent():
    sent = setting("ROUT1:CHAN1 A,2", ["ROUT1:CHAN1?"], ["A,2"])
    script = framed((sent[0], ["1", "A,1"]), ERR_NONE, sent,
                    sent)  # after a fault every owned setting is re-applied and read back
    with expected_protocol(TunableLaser, script) as laser:
        laser.select_output(2)


def test_a_stale_reply_is_discarded_not_taken_for_ours():
    script = framed(twice("ROUT1:CHAN1?", "A,4"))
    msg, reply = script[0]
    script = [(msg, "A,9;A,9;0;77\n" + reply)]  # a late reply to an older frame arrives first
    transport = VisaTransport("scripted", opener=lambda *_: _LineResource(script))
    laser = TunableLaser(transport)
    assert laser.selected_output() == 4
    assert laser.faults == 0


class _LineResource(ScriptedResource):
    """A scripted resource whose replies may hold several lines (stale ones first)."""

    def write(self, message):
        n = super().write(message)
        if self.replies:
            self.replies[-1:] = self.replies[-1].split("\n")
        return n


def test_connect_refuses_another_model():
    script = framed((["*CLS", "*OPC?"], ["1"]), twice("*IDN?", "Keysight Technologies,N7744C,MY2,V1.0"))
    with expected_protocol(TunableLaser, script, expected_idn="8164B") as laser, \
            pytest.raises(BenchConfigError, match="8164B"):
        laser.connect()


def test_garbled_replies_are_retried():
    sent = setting("SOUR0:WAV 1550.0000NM", ["SOUR0:WAV?"], ["+1.55000000E-006"])
    script = framed((sent[0], ["1", "x#"]), ERR_NONE, sent, sent, twice("*IDN?", "8164B"), ERR_NONE,
                    twice("*IDN?", IDN), sent)
    with expected_protocol(TunableLaser, script) as laser:
        laser.wavelength_nm = 1550
        assert laser.identity() == IDN  # a reply without IEEE 488.2's four fields is garbled


@pytest.mark.parametrize("setting", [("wavelength_nm", 1400), ("power_dbm", 20), ("wavelength_nm", np.nan),
                                     ("power_dbm", "3 dBm")])
def test_laser_limits_send_nothing(setting):
    with expected_protocol(TunableLaser, []) as laser, pytest.raises(LimitError):
        setattr(laser, *setting)


def test_switch_and_meter_limits_send_nothing():
    with expected_protocol(TunableLaser, [], switch_outputs=8) as laser, pytest.raises(LimitError):
        laser.select_output(9)
    with expected_protocol(PowerMeter, []) as meter, pytest.raises(LimitError):
        meter.channel(1, 1).averaging_time_s = 20


# -- simulators over loopback TCP (pyvisa-py) ------------------------------------------------
@pytest.fixture
def scpi_bench():
    chip = Chip(hexagonal(1, 2), seed=5)
    laser_dev = SimLaser(switch_outputs=8)
    heads = {(1, k + 1): k for k in range(4)}
    meter_dev = SimPowerMeter(chip, laser_dev, heads, {k + 1: k for k in range(4)}, seed=1)
    servers = [ScpiServer(laser_dev), ScpiServer(meter_dev)]
    laser = _open(TunableLaser, servers[0], switch_outputs=8, expected_idn="8164B")
    meter = _open(PowerMeter, servers[1], expected_idn="N7744C")
    yield chip, laser_dev, meter_dev, laser, meter, servers
    laser.close()
    meter.close()
    for s in servers:
        s.close()


def _open(driver, server, **kwargs):
    """``driver`` on ``server`` through the reply oracle, connected (``*CLS``, ``*IDN?`` checked)."""
    opener = oracle_opener(server, long_s=LONG_S, short_s=SHORT_S)
    inst = driver(VisaTransport(server.resource, timeout_s=LONG_S, opener=opener), **kwargs)
    try:
        inst.connect()
    except BaseException:
        inst.close()
        raise
    return inst


def _other_client(server):
    """Another program on the same instrument (plain pyvisa-py)."""
    return open_visa_resource(server.resource, 1.0)


def test_sim_laser_settings_round_trip(scpi_bench):
    _, dev, _, laser, _, _ = scpi_bench
    laser.reset()
    assert laser.output_enabled is False  # *RST switches the laser off
    laser.wavelength_nm = 1549.5
    laser.power_dbm = np.float32(2.5)
    laser.output_enabled = True
    laser.select_output(3)
    assert (laser.wavelength_nm, laser.power_dbm, laser.output_enabled, laser.selected_output()) == \
        (pytest.approx(1549.5), 2.5, True, 3)
    assert (dev.switch_output, dev.wavelength_nm, dev.output_on) == (3, pytest.approx(1549.5), True)


def test_sim_meter_reads_the_chip(scpi_bench):
    chip, _, _, laser, meter, _ = scpi_bench
    laser.select_output(2)  # mesh port 1
    laser.power_dbm = 0
    truth = 10 * np.log10(chip.output_power_mw(1, 1550.0))
    for port in range(4):
        got = meter.channel(1, port + 1).read_power_dbm()
        want = 10 * np.log10(10 ** (truth[port] / 10) + 1e-7)
        assert got == pytest.approx(want, abs=0.1 if truth[port] > -50 else 10)
    laser.output_enabled = False
    assert meter.channel(1, 1).read_power_dbm() < -60


def test_readings_stay_in_dbm_whoever_changes_the_unit(scpi_bench):
    _, _, meter_dev, laser, meter, servers = scpi_bench
    head = meter.channel(1, 1)
    laser.select_output(1)
    first = head.read_power_dbm()
    for unit in ("1", "W", "1"):  # another program switches the head (and the laser) to W
        other = _other_client(servers[1])
        other.write(f"sense1:channel1:power:unit {unit}")
        assert other.query("SENS1:CHAN1:POW:UNIT?") == "+1"
        other.close()
        assert head.read_power_dbm() == pytest.approx(first, abs=0.1)
    assert meter_dev.settings[(1, 1)]["unit"] == 0  # and the head is back in dBm
    other = _other_client(servers[0])
    other.write("SOUR0:POW:UNIT W")
    other.close()
    laser.power_dbm = 3
    assert laser.power_dbm == pytest.approx(3.0)


def test_connect_clears_errors_left_by_an_earlier_client(scpi_bench):
    _, dev, _, _, _, servers = scpi_bench
    dev.execute("SOUR0:WAV 2000NM")  # an earlier program's bad setting stays in the queue
    assert dev.errors
    laser = _open(TunableLaser, servers[0])
    laser.power_dbm = 1.0  # would raise -222 if the old error were blamed on it
    laser.close()


def test_open_refuses_the_wrong_instrument(scpi_bench):
    servers = scpi_bench[-1]
    with pytest.raises(BenchConfigError, match=r"N7744C.*8164B|8164B.*N7744C"):
        _open(PowerMeter, servers[0], expected_idn="N7744C")


def test_sim_refusals_raise_with_the_instruments_text(scpi_bench):
    _, dev, _, laser, meter, _ = scpi_bench
    dev.execute(":LOCK 1,1234")
    with pytest.raises(DeviceError, match=r"-221.*locked"):
        laser.output_enabled = True
    with pytest.raises(DeviceError, match="-114"):
        meter.channel(9, 1).averaging_time_s = 0.1  # no head in slot 9
    with pytest.raises(UnknownCommandError, match="-113"):
        laser.setting("SOUR0:WAVE 1550NM")  # neither the short nor the long form
    assert meter.errors() == []
    assert laser.errors() == []


def test_a_refused_query_raises_instead_of_timing_out_again(scpi_bench):
    _, dev, _, laser, _, _ = scpi_bench
    with pytest.raises(DeviceError, match=r"-200.*not supported"):
        laser.query("SOUR0:WAV:SWE:STAR?")
    with pytest.raises(UnknownCommandError, match="-113"):
        laser.query("SOUR0:WAVE?")
    # each refused query: one frame (cut short by the command error), the error queue drained,
    # the frame resent once; the same error twice is the instrument's verdict
    assert dev.messages <= 14


@pytest.mark.parametrize("fault", ["garbage", "timeout", "drop"])
def test_a_setting_survives_a_fault_or_raises(scpi_bench, fault):
    _, dev, _, laser, _, _ = scpi_bench
    dev.inject(fault)
    laser.wavelength_nm = 1549.0  # the fault hits the setting itself: resent, not lost
    assert dev.wavelength_nm == pytest.approx(1549.0)
    laser.retries = 0
    dev.inject(fault)
    with pytest.raises(TransientError):
        laser.wavelength_nm = 1548.0
    # all or nothing: a setting that raised is put back to the last confirmed value
    assert laser.wavelength_nm == pytest.approx(1549.0)
    assert dev.wavelength_nm == pytest.approx(1549.0)


def test_sim_query_faults_are_retried(scpi_bench):
    _, dev, _, laser, _, _ = scpi_bench
    dev.inject("garbage")
    assert laser.selected_output() >= 1
    dev.inject("timeout")
    assert laser.identity().startswith("Keysight")
    dev.inject("drop")
    assert laser.identity().startswith("Keysight")
    laser.retries = 0
    dev.inject("drop_before", count=2)
    with pytest.raises(TransientError):
        laser.identity()


def test_laser_drift_moves_the_meter_not_the_readback(scpi_bench):
    _, dev, _, laser, meter, _ = scpi_bench
    laser.select_output(1)
    before = meter.channel(1, 1).read_power_dbm()
    dev.drift(power_db=-3.0)
    after = meter.channel(1, 1).read_power_dbm()
    assert after - before == pytest.approx(-3.0, abs=0.1)
    assert laser.power_dbm == 0.0


@pytest.mark.parametrize(("idn", "match"), [("N7744C", "expects 'N7744C'"), (5, "non-empty string")])
def test_bench_config_idn_is_checked(idn, match):
    from instruments.config import open_bench

    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x2", "heater_driver": {"address": "sim"},
           "laser": {"address": "sim", "idn": idn}, "power_meter": {"address": "sim", "idn": "N7744C"},
           "sim": {"heater_link": "url"}}
    with pytest.raises(BenchConfigError, match=match):
        open_bench(cfg, timeout_s=SHORT_TIMEOUT_S)
