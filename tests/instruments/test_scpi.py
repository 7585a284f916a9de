"""SCPI drivers: exact messages (scripted and pyvisa-sim YAML) and the loopback simulators."""

from pathlib import Path

import numpy as np
import pytest

import instruments.sim
from instruments.errors import DeviceError, GarbledReplyError, InstrumentTimeoutError, LimitError
from instruments.scpi import PowerMeter, TunableLaser
from instruments.sim.chip import Chip
from instruments.sim.scpi_devices import ScpiServer, SimLaser, SimPowerMeter
from instruments.testing import expected_protocol
from instruments.transport import VisaTransport
from photonics.topology import hexagonal

OK = ("SYST:ERR?", '+0,"No error"')
YAML = Path(instruments.sim.__file__).parent / "scpi_sim.yaml"


@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda d: d.identity(), [("*IDN?", "K,8164B,1,1")], "K,8164B,1,1"),
    (lambda d: d.reset(), [("*RST", None), ("*CLS", None)], None),
    (lambda d: setattr(d, "wavelength_nm", np.float64(1550.5)), [("SOUR0:WAV 1550.5000NM", None), OK], None),
    (lambda d: d.wavelength_nm, [("SOUR0:WAV?", "1.55050000E-006")], pytest.approx(1550.5)),
    (lambda d: setattr(d, "power_dbm", 3), [("SOUR0:POW 3.000DBM", None), OK], None),
    (lambda d: d.power_dbm, [("SOUR0:POW?", "+3.00000000E+000")], 3.0),
    (lambda d: setattr(d, "output_enabled", True), [("SOUR0:POW:STAT 1", None), OK], None),
    (lambda d: d.output_enabled, [("SOUR0:POW:STAT?", "0")], False),
    (lambda d: d.select_output(np.int32(7)), [("ROUT1:CHAN1 A,7", None), OK], None),
    (lambda d: d.selected_output(), [("ROUT1:CHAN1?", "A,7")], 7),
])
def test_laser_exact_messages(call, script, result):
    with expected_protocol(TunableLaser, script) as laser:
        assert call(laser) == result


@pytest.mark.parametrize(("call", "script", "result"), [
    (lambda h: setattr(h, "wavelength_nm", 1310), [("SENS2:CHAN3:POW:WAV 1310.0000NM", None), OK], None),
    (lambda h: h.wavelength_nm, [("SENS2:CHAN3:POW:WAV?", "1.31000000E-006")], pytest.approx(1310)),
    (lambda h: setattr(h, "averaging_time_s", 0.1), [("SENS2:CHAN3:POW:ATIM 0.1000S", None), OK], None),
    (lambda h: h.averaging_time_s, [("SENS2:CHAN3:POW:ATIM?", "+1.0E-001")], 0.1),
    (lambda h: setattr(h, "range_dbm", -20), [("SENS2:CHAN3:POW:RANG -20DBM", None), OK], None),
    (lambda h: h.range_dbm, [("SENS2:CHAN3:POW:RANG?", "-2.0E+001")], -20.0),
    (lambda h: setattr(h, "auto_range", False), [("SENS2:CHAN3:POW:RANG:AUTO 0", None), OK], None),
    (lambda h: h.auto_range, [("SENS2:CHAN3:POW:RANG:AUTO?", "1")], True),
    (lambda h: h.power, [("READ2:CHAN3:POW?", "-1.234E+001")], -12.34),
    (lambda h: h.read_power_dbm(), [("SENS2:CHAN3:POW:UNIT 0", None), OK,
                                    ("READ2:CHAN3:POW?", "-1.234E+001")], -12.34),
])
def test_meter_exact_messages(call, script, result):
    with expected_protocol(PowerMeter, script) as meter:
        assert call(meter.channel(2, 3)) == result


def test_error_queue_is_drained_and_raised():
    script = [("SOUR0:POW 3.000DBM", None), ("SYST:ERR?", '-222,"Data out of range"'),
              ("SYST:ERR?", '-221,"Settings conflict"'), OK]
    with expected_protocol(TunableLaser, script) as laser, pytest.raises(DeviceError, match=r"-222.*-221"):
        laser.power_dbm = 3


@pytest.mark.parametrize("setting", [("wavelength_nm", 1400), ("power_dbm", 20), ("wavelength_nm", np.nan)])
def test_laser_limits_send_nothing(setting):
    with expected_protocol(TunableLaser, []) as laser, pytest.raises(LimitError):
        setattr(laser, *setting)


def test_switch_and_meter_limits_send_nothing():
    with expected_protocol(TunableLaser, [], switch_outputs=8) as laser, pytest.raises(LimitError):
        laser.select_output(9)
    with expected_protocol(PowerMeter, []) as meter, pytest.raises(LimitError):
        meter.channel(1, 1).averaging_time_s = 20


def test_garbled_number_is_retried():
    with expected_protocol(TunableLaser, [("SOUR0:POW?", "x#"), ("SOUR0:POW?", "+1.0")]) as laser:
        assert laser.power_dbm == 1.0


# -- pyvisa-sim YAML -------------------------------------------------------------------------
def _sim(address):
    return VisaTransport(f"{YAML}@sim|{address}", timeout_s=0.5)


def test_laser_against_pyvisa_sim_yaml():
    laser = TunableLaser(_sim("TCPIP0::localhost::5025::SOCKET"), retries=0)
    assert laser.identity().startswith("Keysight")
    laser.reset()
    laser.wavelength_nm = 1551.25
    laser.power_dbm = 3
    laser.output_enabled = True
    laser.select_output(7)
    assert laser.wavelength_nm == pytest.approx(1550.0)
    assert laser.selected_output() == 7
    laser.close()


def test_meter_against_pyvisa_sim_yaml():
    meter = PowerMeter(_sim("TCPIP0::localhost::5026::SOCKET"), retries=0)
    head = meter.channel(2, 3)
    head.wavelength_nm = 1310
    head.averaging_time_s = 0.1
    head.range_dbm = -20
    head.auto_range = False
    assert head.read_power_dbm() == pytest.approx(-12.34)
    assert head.range_dbm == -20
    meter.close()


def test_pyvisa_sim_rejects_a_wrong_message():
    laser = TunableLaser(_sim("TCPIP0::localhost::5025::SOCKET"), retries=0)
    laser.write("SOUR0:WAVE 1550.0000NM")  # not the driver's syntax: the YAML answers ERROR
    with pytest.raises(GarbledReplyError):
        laser.check_errors()
    laser.close()


# -- simulators over loopback TCP (pyvisa-py) ----------------------------------------------
@pytest.fixture
def scpi_bench():
    chip = Chip(hexagonal(1, 2), seed=5)
    laser_dev = SimLaser(switch_outputs=8)
    heads = {(1, k + 1): k for k in range(4)}
    meter_dev = SimPowerMeter(chip, laser_dev, heads, {k + 1: k for k in range(4)}, seed=1)
    servers = [ScpiServer(laser_dev), ScpiServer(meter_dev)]
    laser = TunableLaser.open(servers[0].resource, timeout_s=0.5, switch_outputs=8)
    meter = PowerMeter.open(servers[1].resource, timeout_s=0.5)
    yield chip, laser_dev, meter_dev, laser, meter
    laser.close()
    meter.close()
    for s in servers:
        s.close()


def test_sim_laser_settings_round_trip(scpi_bench):
    _, dev, _, laser, _ = scpi_bench
    laser.reset()
    laser.wavelength_nm = 1549.5
    laser.power_dbm = 2.5
    laser.output_enabled = False
    laser.select_output(3)
    assert (laser.wavelength_nm, laser.power_dbm, laser.output_enabled, laser.selected_output()) == \
        (pytest.approx(1549.5), 2.5, False, 3)
    assert dev.switch_output == 3
    assert laser.identity().startswith("Keysight")


def test_sim_meter_reads_the_chip(scpi_bench):
    chip, _, _, laser, meter = scpi_bench
    laser.select_output(2)  # mesh port 1
    laser.power_dbm = 0
    truth = 10 * np.log10(chip.output_power_mw(1, 1550.0))
    for port in range(4):
        got = meter.channel(1, port + 1).read_power_dbm()
        want = 10 * np.log10(10 ** (truth[port] / 10) + 1e-7)
        assert got == pytest.approx(want, abs=0.1 if truth[port] > -50 else 10)
    laser.output_enabled = False
    assert meter.channel(1, 1).read_power_dbm() < -60


def test_sim_meter_settings_and_errors(scpi_bench):
    _, _, _, _, meter = scpi_bench
    head = meter.channel(1, 2)
    head.averaging_time_s = 0.5
    head.range_dbm = -30
    head.auto_range = False
    assert (head.averaging_time_s, head.range_dbm, head.auto_range) == (0.5, -30, False)
    meter.write("SENS9:CHAN1:POW:ATIM 0.1S")  # no head in slot 9
    with pytest.raises(DeviceError, match="-222"):
        meter.check_errors()
    meter.write("BOGUS")
    assert meter.errors() == [(-113, "Undefined header")]


def test_sim_faults_are_retried(scpi_bench):
    _, dev, _, laser, _ = scpi_bench
    dev.inject("garbage")
    assert laser.selected_output() >= 1
    dev.inject("timeout")
    assert laser.identity().startswith("Keysight")
    dev.inject("drop")
    assert laser.identity().startswith("Keysight")
    laser.retries = 0
    dev.inject("timeout")
    with pytest.raises(InstrumentTimeoutError):
        laser.identity()


def test_laser_drift_moves_the_meter_not_the_readback(scpi_bench):
    _, dev, _, laser, meter = scpi_bench
    laser.select_output(1)
    before = meter.channel(1, 1).read_power_dbm()
    dev.drift(power_db=-3.0)
    after = meter.channel(1, 1).read_power_dbm()
    assert after - before == pytest.approx(-3.0, abs=0.1)
    assert laser.power_dbm == 0.0
