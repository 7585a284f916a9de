"""Real clients against the simulated SCPI instruments (docs/instruments.md: conformant simulators).

PyMeasure's own ``KeysightN7776C`` driver and plain pyvisa-py, unchanged, over
``TCPIP::127.0.0.1::<port>::SOCKET``.
"""

import warnings

import pytest

from instruments.sim.chip import Chip
from instruments.sim.scpi_devices import ScpiServer, SimLaser, SimPowerMeter
from photonics.topology import hexagonal

pytest.importorskip("pymeasure")
pyvisa = pytest.importorskip("pyvisa")

TIMEOUT_MS = 1000  # the simulators answer in well under this
NO_ERROR = '+0,"No error"'


@pytest.fixture
def devices():
    laser = SimLaser(switch_outputs=8)
    meter = SimPowerMeter(Chip(hexagonal(1, 2), seed=5), laser, {(1, k + 1): k for k in range(4)},
                          {k + 1: k for k in range(4)}, seed=1)
    servers = [ScpiServer(laser), ScpiServer(meter)]
    yield laser, meter, servers
    for s in servers:
        s.close()


@pytest.fixture
def n7776c(devices):
    from pymeasure.instruments.keysight import KeysightN7776C

    with warnings.catch_warnings():  # PyMeasure does not know whether the N7776C speaks SCPI
        warnings.simplefilter("ignore", FutureWarning)
        inst = KeysightN7776C(devices[2][0].resource, visa_library="@py", read_termination="\n",
                              write_termination="\n", timeout=TIMEOUT_MS)
    yield inst
    inst.adapter.close()


@pytest.fixture
def visa(devices):
    rm = pyvisa.ResourceManager("@py")
    opened = []

    def open_(k):
        res = rm.open_resource(devices[2][k].resource, read_termination="\n", write_termination="\n",
                               timeout=TIMEOUT_MS)
        opened.append(res)
        return res
    yield open_
    for res in opened:
        res.close()


def test_pymeasure_n7776c_sets_and_reads_the_laser(devices, n7776c):
    laser = devices[0]
    assert n7776c.id.split(",")[1] == "8164B"
    n7776c.wavelength = 1551  # 'sour0:wav 1551.000000nm'
    assert n7776c.wavelength == pytest.approx(1551.0)
    assert laser.wavelength_nm == pytest.approx(1551.0)
    n7776c.output_power_dBm = 3  # 'SOUR0:POW 3.000000 dBm'
    assert n7776c.output_power_dBm == pytest.approx(3.0)
    assert n7776c.output_power_mW == pytest.approx(10 ** 0.3)  # sets POW:UNIT to W, reads W
    n7776c.output_power_mW = 0.5  # 'SOUR0:POW 0.500000 mW'
    assert n7776c.output_power_mW == pytest.approx(0.5)
    assert laser.power_dbm == pytest.approx(-3.0103, abs=1e-4)  # after a query: the write was handled
    assert n7776c.output_power_dBm == pytest.approx(-3.0103, abs=1e-4)
    n7776c.output_enabled = True
    assert n7776c.output_enabled is True
    n7776c.output_enabled = False
    assert (n7776c.output_enabled, laser.output_on) == (False, False)
    assert n7776c.check_errors() == []


def test_pymeasure_n7776c_lock(devices, n7776c):
    n7776c.output_enabled = True
    n7776c.locked = True  # ':LOCK 1,1234'
    assert (n7776c.locked, n7776c.output_enabled) == (True, False)  # locking switches the laser off
    n7776c.output_enabled = True
    assert n7776c.output_enabled is False
    n7776c.locked = False
    n7776c.output_enabled = True
    assert (n7776c.locked, n7776c.output_enabled) == (False, True)
    errors = n7776c.check_errors()
    assert [int(float(code)) for code, _text in errors] == [-221]
    assert "locked" in errors[0][1]


def test_pymeasure_sweep_settings_get_a_clear_error_not_a_hang(n7776c):
    n7776c.sweep_wl_start = 1550
    n7776c.sweep_mode = "CONT"
    errors = n7776c.check_errors()
    assert [int(float(code)) for code, _ in errors] == [-200, -200]
    assert "not supported" in errors[0][1]
    assert n7776c.wavelength == pytest.approx(1550.0)  # the session still works


def test_plain_pyvisa_long_forms_and_lower_case_on_the_meter(devices, visa):
    laser, meter = devices[0], visa(1)
    laser.execute("ROUT1:CHAN1 A,1;:SOUR0:POW:STAT 1")
    assert meter.query("*idn?").split(",")[1] == "N7744C"
    meter.write(":sense1:channel1:power:wavelength 1310nm")
    assert float(meter.query("sens1:chan1:pow:wav?")) == pytest.approx(1.31e-6)
    meter.write("sense1:channel1:power:unit 0")
    assert meter.query("SENSe1:CHANnel1:POWer:UNIT?") == "+0"
    meter.write("SENS1:CHAN1:POW:ATIM 20 ms")
    assert float(meter.query("sens1:chan1:pow:atim?")) == pytest.approx(0.02)
    meter.write("sens1:chan1:pow:rang -20dbm;rang:auto off")  # the second unit continues SENS1:CHAN1:POW
    assert meter.query("sens1:chan1:pow:rang:auto?;:sens1:chan1:pow:rang?") == "0;-2.00000000E+001"
    dbm = float(meter.query("read1:chan1:pow?"))
    assert -70 < dbm < 0
    meter.write("sense1:channel1:power:unit 1")
    watts = float(meter.query("READ1:CHANnel1:SCALar:POWer:DC?"))
    assert watts == pytest.approx(1e-3 * 10 ** (dbm / 10), rel=0.05)
    meter.write("init1:chan1:imm")
    assert float(meter.query("fetc1:chan1:pow?")) == pytest.approx(watts, rel=0.05)
    assert meter.query("*opc?") == "1"
    assert meter.query("syst:err?") == NO_ERROR


def test_plain_pyvisa_error_queue(visa):
    laser = visa(0)
    laser.write("sour0:bogus 1")  # no reply to a bad setting: the next query is not desynchronised
    laser.write("source0:wavelength 1400nm")
    assert laser.query("*esr?") == "48"  # command error + execution error
    assert laser.query("syst:err?").startswith('-113,"Undefined header')
    assert laser.query("SYSTem:ERRor:NEXT?").startswith('-222,"Data out of range')
    assert laser.query("syst:err?") == NO_ERROR
    laser.write("source0:wavelength 1555nm;*cls")
    assert laser.query("source0:wavelength?") == "+1.55500000E-006"


def test_a_rejected_query_gets_no_reply_but_an_error(visa):
    laser = visa(0)
    laser.timeout = 200  # ms: a refused query is never answered (IEEE 488.2), only queued
    with pytest.raises(pyvisa.errors.VisaIOError):
        laser.query("sour0:wave?")
    laser.timeout = TIMEOUT_MS
    assert laser.query("syst:err?").startswith("-113")
    assert laser.query("*opc?") == "1"
