"""The split timeout of the SCPI fault tests: long while a reply can come, short once none will.

instruments/sim/reply_oracle.py decides, before each read, whether the simulated server still
owes the connection a line. A wrong "nothing coming" would turn a slow reply into a fault on a
busy machine (the outcome would depend on load); a wrong "a line may come" only costs time.
"""

import pytest

from instruments.errors import InstrumentError, InstrumentTimeoutError
from instruments.sim.reply_oracle import oracle_opener
from instruments.sim.scpi_devices import ScpiServer, SimLaser
from instruments.transport import VisaTransport

LONG_S = 5.0
SHORT_S = 0.01


@pytest.fixture
def link():
    device = SimLaser(switch_outputs=4)
    server = ScpiServer(device)
    opener = oracle_opener(server, long_s=LONG_S, short_s=SHORT_S)
    transport = VisaTransport(server.resource, timeout_s=LONG_S, opener=opener)
    yield device, transport
    transport.close()
    server.close()


def test_a_reply_on_its_way_is_waited_for_and_a_read_one_is_not(link):
    _device, transport = link
    resource = transport._res
    transport.write("*IDN?")
    assert not resource.nothing_coming()  # the server answers: the read gets the long deadline
    assert transport.read().startswith("Keysight")
    assert resource.nothing_coming()  # everything written was read


@pytest.mark.parametrize("fault", ["delay", "drop_before", "drop_after"])
def test_a_reply_the_server_will_not_send_is_known_lost(link, fault):
    device, transport = link
    device.inject(fault)
    transport.write("*IDN?")
    assert transport._res.nothing_coming()  # held back or dropped with the link: short timeout
    with pytest.raises(InstrumentTimeoutError if fault == "delay" else InstrumentError):
        transport.read()


def test_a_second_copy_of_a_reply_is_still_coming(link):
    device, transport = link
    device.inject("duplicate")
    transport.write("*IDN?")
    first = transport.read()
    assert not transport._res.nothing_coming()  # the duplicate is on the wire or in pyvisa's buffer
    assert transport.read() == first
    assert transport._res.nothing_coming()


def test_a_held_reply_arrives_before_the_next_one(link):
    device, transport = link
    device.inject("delay")
    transport.write("*IDN?")
    with pytest.raises(InstrumentTimeoutError):
        transport.read()
    transport.write("*OPC?")
    assert transport.read().startswith("Keysight")  # the late reply first: the driver discards it
    assert transport.read() in ("1", "+1")
