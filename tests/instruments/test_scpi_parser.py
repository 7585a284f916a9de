"""The simulators' IEEE 488.2 / SCPI-99 parser, message by message (no sockets)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from instruments.sim.chip import Chip
from instruments.sim.scpi_devices import SimLaser, SimPowerMeter
from instruments.sim.scpi_parser import QUEUE_SIZE, ScpiError, compile_header, match_header
from photonics.topology import hexagonal

NO_ERROR = '+0,"No error"'


@pytest.fixture
def laser():
    return SimLaser(switch_outputs=8)


@pytest.fixture
def meter(laser):
    return SimPowerMeter(Chip(hexagonal(1, 2), seed=5), laser, {(1, 1): 0, (2, 3): 1}, {1: 0}, seed=1)


def drain(dev):
    out = []
    while (e := dev.execute("SYST:ERR?")) != NO_ERROR:
        out.append(e)
    return out


def codes(dev):
    return [int(e.split(",")[0]) for e in drain(dev)]


@pytest.mark.parametrize("message", [
    "SOUR0:WAV 1551NM", "sour0:wav 1551.000000nm", "source0:wavelength 1551nm", ":SOURce0:WAVelength 1551 NM",
    "SOUR:WAV 1551NM", "WAV 1551NM", "SOUR0:CHAN1:WAV:CW 1551NM", "sour0:wav:fixed 1.551E-6",
    "SOUR0:WAV 1.551UM", "SOUR0:WAV 1551000PM", "SOUR0:WAV 1.551e-6 m", "SOUR0:WAV\t1551NM",
])
def test_one_wavelength_setting_many_spellings(laser, message):
    assert laser.execute(message) is None  # a setting never replies
    assert laser.wavelength_nm == pytest.approx(1551.0)
    assert drain(laser) == []


def _spellings(header):
    """Every node in its short or long form, any letter case."""
    nodes = compile_header(header)
    return st.tuples(*[st.sampled_from([n.short, n.long]) for n in nodes]).flatmap(
        lambda forms: st.tuples(*[st.tuples(*[st.sampled_from([c.lower(), c.upper()]) for c in f])
                                  for f in forms])).map(lambda t: ":".join("".join(f) for f in t))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(_spellings("SENSe CHANnel POWer WAVelength"), st.sampled_from(["NM", "nm", "Nm"]))
def test_headers_are_case_insensitive_in_short_or_long_form(header, unit):
    m = SimPowerMeter(Chip(hexagonal(1, 2), seed=5), SimLaser(), {(2, 3): 1}, {1: 0})
    parts = header.split(":")
    cmd = ":".join([parts[0] + "2", parts[1] + "3", *parts[2:]])
    m.execute(f"{cmd} 1310{unit}")
    assert m.execute(f"{cmd}?") == "+1.31000000E-006"
    assert m.execute("SYST:ERR?") == NO_ERROR


def test_queries_answer_in_the_real_formats(laser, meter):
    assert laser.execute("*IDN?").count(",") == 3
    assert laser.execute("SOUR0:WAV?") == "+1.55000000E-006"  # metres, NR3
    assert laser.execute("SOUR0:POW:UNIT?") == "+0"
    laser.execute("SOUR0:POW:UNIT W")
    assert laser.execute("SOUR0:POW?") == "+1.00000000E-003"  # the power in the chosen unit
    assert laser.execute("ROUT1:CHAN1?") == "A,1"
    assert meter.execute("SENS2:CHAN3:POW:UNIT?") == "+1"  # heads power up in W
    assert meter.execute("SENS2:CHAN3:POW:RANG:AUTO?") == "1"
    assert meter.execute("SENS2:CHAN3:POW:ATIM 100MS;ATIM?") == "+1.00000000E-001"
    assert meter.execute("SENS2:CHAN3:POW:RANG -23DBM;RANG?") == "-2.00000000E+001"  # 10 dB steps


def test_power_settings_take_dbm_and_watt_suffixes(laser):
    for message, dbm in [("SOUR0:POW 3DBM", 3.0), ("SOUR0:POW 1.000000 mW", 0.0), ("SOUR0:POW 100UW", -10.0),
                         ("SOUR0:POW 0.01W", 10.0), ("SOUR0:POW 5", 5.0), ("SOUR0:POW MAX", 13.0)]:
        laser.execute(message)
        assert laser.power_dbm == pytest.approx(dbm), message
    laser.execute("SOUR0:POW:UNIT 1;:SOUR0:POW 0.002")  # no suffix: in the chosen unit (W)
    assert laser.power_dbm == pytest.approx(3.0103, abs=1e-3)
    assert drain(laser) == []


def test_compound_messages_follow_the_scpi_path_rules(laser):
    assert laser.execute("SOUR0:WAV 1560NM;POW 2DBM;POW?;:SOUR0:WAV?") == "+2.00000000E+000;+1.56000000E-006"
    # after POW:UNIT? the path is SOUR0:POW: (common commands leave it), so POW? is POW:POW?
    assert laser.execute("SOUR0:POW:UNIT?;*OPC?;POW?") == "+0;1"
    assert codes(laser) == [-113]
    assert laser.execute("*CLS;SOUR0:WAV?;*OPC?;;") == "+1.56000000E-006;1"


@pytest.mark.parametrize(("message", "code"), [
    ("BOGUS", -113), ("SOUR0:WAVE 1550NM", -113), ("SOUR0:WAV 1550DBM", -131), ("SOUR0:WAV abc", -104),
    ("SOUR0:WAV", -109), ("SOUR0:WAV 1550NM,2", -108), ("SOUR0:WAV 1400NM", -222), ("SOUR0:POW 20DBM", -222),
    ("SOUR0:POW:UNIT DB", -224), ("ROUT1:CHAN1 B,2", -224), ("ROUT1:CHAN1 A,9", -222), ("ROUT2:CHAN1?", -114),
    ("SOUR0:WAV:SWE:STAR 1550NM", -200), ("SOUR0:WAV:SWE?", -200), ("SOUR0:WAV# 1", -102), ("*FOO", -113),
    ("*IDN", -113), (":LOCK 1,9999", -224), ("SYST:ERR", -113),
])
def test_errors_have_the_standard_codes_and_only_queries_reply(laser, message, code):
    assert laser.execute(message) is None
    assert codes(laser) == [code]


def test_meter_errors(meter):
    assert meter.execute("READ9:CHAN1:POW?") is None
    assert meter.execute("FETC2:CHAN3:POW?") is None  # nothing measured yet
    meter.execute("SENS2:CHAN3:POW:ATIM 20S")
    meter.execute("SENS2:CHAN3:POW:WAV 1310DBM")
    assert codes(meter) == [-114, -230, -222, -131]


def test_a_command_error_drops_the_rest_of_the_message_an_execution_error_does_not(laser):
    assert laser.execute("BOGUS;SOUR0:WAV 1560NM;*OPC?") is None
    assert laser.wavelength_nm == 1550.0
    assert laser.execute("SOUR0:WAV 1400NM;SOUR0:POW 2DBM;*OPC?") == "1"
    assert laser.power_dbm == 2.0
    assert codes(laser) == [-113, -222]


def test_status_registers_and_common_commands(laser):
    assert laser.execute("*ESR?") == "0"
    laser.execute("BOGUS")
    laser.execute("SOUR0:WAV 1400NM")
    assert laser.execute("*STB?") == "4"  # error queue not empty; ESB masked off
    laser.execute("*ESE 48")
    assert laser.execute("*ESE?;*STB?") == "48;36"
    assert laser.execute("*ESR?") == "48"  # command + execution error; reading clears it
    assert laser.execute("*ESR?") == "0"
    laser.execute("*OPC")
    assert laser.execute("*ESR?") == "1"
    laser.execute("*WAI")
    laser.execute("SOUR0:WAV 1560NM;*RST")  # *RST: settings back, error queue kept
    assert (laser.wavelength_nm, laser.output_on) == (1550.0, False)
    assert laser.execute("SYST:ERR:COUN?") == "2"
    laser.execute("*CLS")
    assert laser.execute("SYSTem:ERRor:NEXT?") == NO_ERROR


def test_a_full_error_queue_ends_in_queue_overflow(laser):
    for _ in range(QUEUE_SIZE + 5):
        laser.execute("BOGUS")
    got = codes(laser)
    assert len(got) == QUEUE_SIZE
    assert got[-1] == -350
    assert set(got[:-1]) == {-113}


def test_error_texts_stay_one_quoted_string(laser):
    laser.execute('SOUR0:POW:UNIT "a;b"')
    entry = laser.execute("SYST:ERR?")
    assert entry.startswith('-224,"')
    assert entry.endswith('"')
    assert entry.count('"') == 2
    assert entry.count(";") == 1  # standard text ; detail (the detail's own ; replaced)
    assert entry.count(",") == 1  # code , text: clients that split at "," get two fields


def test_lock_switches_the_laser_off_and_keeps_it_off(laser):
    laser.execute("SOUR0:POW:STAT ON")
    laser.execute(":LOCK ON,1234")
    assert (laser.execute(":LOCK?"), laser.output_on) == ("1", False)
    laser.execute("SOUR0:POW:STAT 1")
    assert codes(laser) == [-221]
    laser.execute(':LOCK 0,"1234";:SOUR0:POW:STAT 1')
    assert (laser.execute(":LOCK?;:SOUR0:POW:STAT?")) == "0;1"


def test_init_fetch_and_read(meter, laser):
    laser.execute("SOUR0:POW:STAT 1")
    meter.execute("SENS1:CHAN1:POW:UNIT 0;:INIT1:CHAN1:IMM")
    first = meter.execute("FETC1:CHAN1:POW?")
    assert meter.execute("FETCh1:CHANnel1:SCALar:POWer:DC?") == first  # FETC repeats the stored reading
    assert float(meter.execute("READ1:POW?")) == pytest.approx(float(first), abs=0.2)  # CHAN defaults to 1
    meter.execute("INIT1:CHAN1:CONT 1")
    assert meter.execute("INIT1:CHAN1:CONT?") == "1"
    assert drain(meter) == []


def test_header_spec_matching():
    nodes = compile_header("[SOURce#src] [CHANnel#chan] POWer [LEVel] UNIT")
    assert match_header(nodes, [("POW", ""), ("UNIT", "")]) == {}
    assert match_header(nodes, [("SOURCE", "2"), ("POW", ""), ("LEV", ""), ("UNIT", "")]) == {"src": 2}
    assert match_header(nodes, [("POWE", ""), ("UNIT", "")]) is None
    assert match_header(nodes, [("POW", "1"), ("UNIT", "")]) is None  # POWer takes no suffix
    with pytest.raises(ValueError, match="spec"):
        compile_header("[SOURce")
    assert ScpiError(-222, 'x "y"').entry() == "-222,\"Data out of range;x 'y'\""
