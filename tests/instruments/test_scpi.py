"""SCPI drivers: exact messages (scripted and pyvisa-sim YAML) and the loopback simulators."""

from pathlib import Path

import numpy as np
import pytest

import instruments.sim
from instruments.errors import (
    BenchConfigError,
    DeviceError,
    GarbledReplyError,
    InstrumentTimeoutError,
    LimitError,
    TransientError,
    UnknownCommandError,
)
from instruments.scpi import PowerMeter, TunableLaser
from instruments.sim.chip import Chip
from instruments.sim.scpi_devices import ScpiServer, SimLaser, SimPowerMeter
from instruments.testing import expected_protocol
from instruments.transport import VisaTransport, open_visa_resource
from photonics.topology import hexagonal

OK = ("SYST:ERR?", '+0,"No error"')
IDN = "Keysight Technologies,8164B,MY00000001,V5.25(72637)"
YAML = Path(instruments.sim.__file__).parent / "scpi_sim.yaml"
READ23 = "SENS2:CHAN3:POW:UNIT?;:READ2:CHAN3:POW?"
SHORT_TIMEOUT_S = 0.3  # the simulators answer in well under this; a missing reply costs one timeout


# -- exact messages --------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda d: d.identity(), [("*IDN?", IDN)], IDN),
    (lambda d: d.connect(), [("*CLS", None), ("*IDN?", IDN)], IDN),
    (lambda d: d.reset(), [("*RST;*OPC?", "1"), OK], None),
    (lambda d: setattr(d, "wavelength_nm", np.float64(1550.5)), [("SOUR0:WAV 1550.5000NM;*OPC?", "1"), OK],
     None),
    (lambda d: d.wavelength_nm, [("SOUR0:WAV?", "+1.55050000E-006")], pytest.approx(1550.5)),
    (lambda d: setattr(d, "power_dbm", np.int64(3)), [("SOUR0:POW 3.000DBM;*OPC?", "+1"), OK], None),
    (lambda d: d.power_dbm, [("SOUR0:POW:UNIT?;:SOUR0:POW?", "+0;+3.00000000E+000")], 3.0),
    # left in W by another program (PyMeasure's output_power_mW does that): converted, not misread
    (lambda d: d.power_dbm, [("SOUR0:POW:UNIT?;:SOUR0:POW?", "+1;+1.99526231E-003")], pytest.approx(3.0)),
    (lambda d: setattr(d, "output_enabled", True), [("SOUR0:POW:STAT 1;*OPC?", "1"), OK], None),
    (lambda d: d.output_enabled, [("SOUR0:POW:STAT?", "+0")], False),
    (lambda d: d.select_output(np.int32(7)), [("ROUT1:CHAN1 A,7;*OPC?", "1"), OK], None),
    (lambda d: d.selected_output(), [("ROUT1:CHAN1?", "A,7")], 7),
    (lambda d: d.errors(), [("SYST:ERR?", '-113,"Undefined header"'), ("SYST:ERR?", '0,"No error"')],
     [(-113, "Undefined header")]),
])
def test_laser_exact_messages(call, script, result):
    with expected_protocol(TunableLaser, script) as laser:
        assert call(laser) == result


def test_laser_slots_come_from_the_constructor():
    script = [("SOUR2:WAV?", "+1.31E-006"), ("ROUT4:CHAN2 A,3;*OPC?", "1"), OK]
    with expected_protocol(TunableLaser, script, source=2, switch_slot=4, switch_channel=2) as laser:
        assert laser.wavelength_nm == pytest.approx(1310)
        laser.select_output(3)


@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda h: setattr(h, "wavelength_nm", 1310), [("SENS2:CHAN3:POW:WAV 1310.0000NM;*OPC?", "1"), OK], None),
    (lambda h: h.wavelength_nm, [("SENS2:CHAN3:POW:WAV?", "+1.31000000E-006")], pytest.approx(1310)),
    (lambda h: setattr(h, "averaging_time_s", 0.1), [("SENS2:CHAN3:POW:ATIM 0.1000S;*OPC?", "1"), OK], None),
    (lambda h: h.averaging_time_s, [("SENS2:CHAN3:POW:ATIM?", "+1.00000000E-001")], 0.1),
    (lambda h: setattr(h, "range_dbm", -20), [("SENS2:CHAN3:POW:RANG -20DBM;*OPC?", "1"), OK], None),
    (lambda h: h.range_dbm, [("SENS2:CHAN3:POW:RANG?", "-2.00000000E+001")], -20.0),
    (lambda h: setattr(h, "auto_range", False), [("SENS2:CHAN3:POW:RANG:AUTO 0;*OPC?", "1"), OK], None),
    (lambda h: h.auto_range, [("SENS2:CHAN3:POW:RANG:AUTO?", "1")], True),
    (lambda h: h.unit_watts, [("SENS2:CHAN3:POW:UNIT?", "+1")], True),
    (lambda h: h.read_power_dbm(), [(READ23, "+0;-1.23400000E+001")], -12.34),
    # a head left in W: the reading is converted and the head switched to dBm for the next ones
    (lambda h: h.read_power_dbm(), [(READ23, "+1;+1.00000000E-006"), ("SENS2:CHAN3:POW:UNIT 0;*OPC?", "1"),
                                    OK], pytest.approx(-30.0)),
    # a W reading below zero (noise after zeroing) has no dBm value: read again in dBm
    (lambda h: h.read_power_dbm(), [(READ23, "+1;-2.00000000E-012"), ("SENS2:CHAN3:POW:UNIT 0;*OPC?", "1"),
                                    OK, (READ23, "+0;-8.50000000E+001")], -85.0),
    (lambda h: h.read_power_w(), [(READ23, "+0;+0.00000000E+000")], pytest.approx(1e-3)),
    (lambda h: h.read_power_w(), [(READ23, "+1;+2.50000000E-006")], 2.5e-6),
])
def test_meter_exact_messages(call, script, result):
    with expected_protocol(PowerMeter, script) as meter:
        assert call(meter.channel(2, 3)) == result


def test_a_setting_drains_the_error_queue_and_raises_with_its_text():
    script = [("SOUR0:POW 3.000DBM;*OPC?", "1"), ("SYST:ERR?", '-222,"Data out of range"'),
              ("SYST:ERR?", '-221,"Settings conflict"'), ("SYST:ERR?", '0,"No error"')]
    with expected_protocol(TunableLaser, script) as laser, \
            pytest.raises(DeviceError, match=r"-222.*-221") as err:
        laser.power_dbm = 3
    assert err.value.code == -222
    assert not isinstance(err.value, UnknownCommandError)


def test_a_command_error_is_an_unknown_command():
    script = [("ROUT1:CHAN1 A,2;*OPC?", "1"), ("SYST:ERR?", '-113,"Undefined header"'), OK]
    with expected_protocol(TunableLaser, script) as laser, \
            pytest.raises(UnknownCommandError, match="firmware"):
        laser.select_output(2)


def test_connect_refuses_another_model():
    script = [("*CLS", None), ("*IDN?", "Keysight Technologies,N7744C,MY2,V1.0")]
    with expected_protocol(TunableLaser, script, expected_idn="8164B") as laser, \
            pytest.raises(BenchConfigError, match="8164B"):
        laser.connect()


def test_garbled_replies_are_retried():
    script = [("SOUR0:WAV 1550.0000NM;*OPC?", "x#"), ("SOUR0:WAV 1550.0000NM;*OPC?", "1"), OK,
              ("*IDN?", "8164B"), ("*IDN?", IDN)]
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


# -- pyvisa-sim YAML ---------------------------------------------------------------------------
def _sim(address):
    return VisaTransport(f"{YAML}@sim|{address}", timeout_s=0.5)


def test_laser_against_pyvisa_sim_yaml():
    laser = TunableLaser(_sim("TCPIP0::localhost::5025::SOCKET"), retries=0, expected_idn="8164B")
    assert laser.connect().startswith("Keysight")
    laser.reset()
    laser.wavelength_nm = 1551.25
    laser.power_dbm = 3
    laser.output_enabled = True
    laser.select_output(7)
    assert (laser.wavelength_nm, laser.power_dbm) == (pytest.approx(1550.0), 3.0)
    assert (laser.output_enabled, laser.selected_output()) == (True, 7)
    laser.close()


def test_meter_against_pyvisa_sim_yaml():
    meter = PowerMeter(_sim("TCPIP0::localhost::5026::SOCKET"), retries=0)
    head = meter.channel(2, 3)
    head.wavelength_nm = 1310
    head.averaging_time_s = 0.1
    head.range_dbm = -20
    head.auto_range = False
    head.unit_watts = False
    assert head.read_power_dbm() == pytest.approx(-12.34)
    assert (head.range_dbm, head.auto_range, head.unit_watts) == (-20, False, False)
    meter.close()


def test_pyvisa_sim_rejects_a_wrong_message():
    laser = TunableLaser(_sim("TCPIP0::localhost::5025::SOCKET"), retries=0)
    with pytest.raises(GarbledReplyError):  # the YAML answers ERROR to a message it does not list
        laser.setting("SOUR0:WAVE 1550.0000NM")
    laser.close()


# -- simulators over loopback TCP (pyvisa-py) ------------------------------------------------
@pytest.fixture
def scpi_bench():
    chip = Chip(hexagonal(1, 2), seed=5)
    laser_dev = SimLaser(switch_outputs=8)
    heads = {(1, k + 1): k for k in range(4)}
    meter_dev = SimPowerMeter(chip, laser_dev, heads, {k + 1: k for k in range(4)}, seed=1)
    servers = [ScpiServer(laser_dev), ScpiServer(meter_dev)]
    laser = TunableLaser.open(servers[0].resource, timeout_s=SHORT_TIMEOUT_S, switch_outputs=8,
                              expected_idn="8164B")
    meter = PowerMeter.open(servers[1].resource, timeout_s=SHORT_TIMEOUT_S, expected_idn="N7744C")
    yield chip, laser_dev, meter_dev, laser, meter, servers
    laser.close()
    meter.close()
    for s in servers:
        s.close()


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
    laser = TunableLaser.open(servers[0].resource, timeout_s=SHORT_TIMEOUT_S)
    laser.power_dbm = 1.0  # would raise -222 if the old error were blamed on it
    laser.close()


def test_open_refuses_the_wrong_instrument(scpi_bench):
    servers = scpi_bench[-1]
    with pytest.raises(BenchConfigError, match=r"N7744C.*8164B|8164B.*N7744C"):
        PowerMeter.open(servers[0].resource, timeout_s=SHORT_TIMEOUT_S, expected_idn="N7744C")


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
    assert dev.messages < 10  # raised at once: no retries of a query the instrument refused


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
    assert laser.wavelength_nm == pytest.approx(1549.0 if fault != "garbage" else 1548.0)


def test_sim_query_faults_are_retried(scpi_bench):
    _, dev, _, laser, _, _ = scpi_bench
    dev.inject("garbage")
    assert laser.selected_output() >= 1
    dev.inject("timeout")
    assert laser.identity().startswith("Keysight")
    dev.inject("drop")
    assert laser.identity().startswith("Keysight")
    laser.retries = 0
    dev.inject("timeout", count=2)
    with pytest.raises(InstrumentTimeoutError):
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
