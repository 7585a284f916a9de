"""Transceiver management: SFF-8636 / CMIS decoding, exact bridge messages, RX follows routing."""

import numpy as np
import pytest

from instruments.errors import InstrumentError, LimitError
from instruments.sim.chip import Chip
from instruments.sim.heater_device import PtyLink
from instruments.sim.transceivers import BridgeDeviceSim, SimI2CBus, SimTransceiver, TransceiverBench
from instruments.sim.truth_map import TruthMap
from instruments.testing import expected_protocol
from instruments.transceiver import SerialI2CBridge, TransceiverModule
from instruments.transport import SerialTransport
from photonics.routing import route_many
from photonics.topology import smartlight


@pytest.fixture(scope="module")
def optics():
    chip = Chip(smartlight(), seed=2, crosstalk_fraction=0.0)
    a = SimTransceiver("a", "sff8636", [0, 1, 2, 3], [4, 5, 6, 7])
    b = SimTransceiver("b", "cmis", [20, 21, 22, 23], [24, 25, 26, 27])
    TransceiverBench(chip, [a, b])
    return chip, a, b


def test_sff8636_bytes_decode(optics):
    _, a, _ = optics
    m = TransceiverModule(SimI2CBus(a), name="a")
    assert (m.identifier, m.form_factor, m.map.name) == (0x11, "QSFP28", "SFF-8636")
    raw = a.read(22, 2)
    assert int.from_bytes(raw, "big", signed=True) / 256 == pytest.approx(m.temperature_c())
    assert m.temperature_c() == pytest.approx(38.5)
    assert m.vcc_v() == pytest.approx(3.29)
    np.testing.assert_allclose(m.tx_power_dbm(), 1.0, atol=0.01)
    np.testing.assert_allclose(m.tx_bias_ma(), 7.5)
    assert m.dom()["vendor"] == "LUMION SIM"


def test_cmis_uses_upper_pages(optics):
    _, _, b = optics
    m = TransceiverModule(SimI2CBus(b), name="b")
    assert (m.identifier, m.map.lanes) == (0x18, 8)
    m.rx_power_dbm()
    assert b.lower[127] == 0x11  # monitors live on page 11h
    m.set_tx_disable(2, True)
    assert b.pages[0x10][130 - 128] == 0b100
    assert m.tx_disabled().tolist()[:4] == [False, False, True, False]
    assert m.tx_power_dbm()[2] < -30
    m.set_tx_disable(2, False)
    with pytest.raises(LimitError):
        m.set_tx_disable(8, True)


def test_rx_power_follows_the_routed_light(optics):
    chip, a, b = optics
    ma, mb = TransceiverModule(SimI2CBus(a)), TransceiverModule(SimI2CBus(b))
    plan = route_many(chip.mesh, [(0, 24), (21, 5)], params=chip.truth.params,
                      check_budget=False)
    chip.set_currents(TruthMap(chip).currents_for(plan.configuration, 24.0))
    rb, ra = mb.rx_power_dbm(), ma.rx_power_dbm()
    model = {(r.route.src, r.route.dst): r.transmission_db for r in plan.routes}
    assert rb[0] == pytest.approx(1.0 + model[(0, 24)], abs=0.1)
    assert ra[1] == pytest.approx(1.0 + model[(21, 5)], abs=0.1)
    assert not mb.rx_los()[0]
    ma.set_tx_disable(0, True)
    assert mb.rx_power_dbm()[0] < rb[0] - 20
    assert mb.rx_los()[0]
    ma.set_tx_disable(0, False)


def test_unknown_identifier_is_refused():
    t = SimTransceiver("x", "sff8636", [], [])
    t.lower[0] = 0x42
    with pytest.raises(InstrumentError, match="identifier"):
        TransceiverModule(SimI2CBus(t))


def test_bridge_exact_messages():
    script = [(b"r50,00,01\n", b"11\n"), (b"r50,16,02\n", b"2680\n"), (b"w50,56,01\n", b"OK\n")]
    with expected_protocol(SerialI2CBridge, script) as bridge:
        assert bridge.read(0x50, 0, 1) == b"\x11"
        assert bridge.read(0x50, 22, 2) == b"\x26\x80"
        bridge.write(0x50, 86, b"\x01")


def test_bridge_over_pty(optics):
    _, a, _ = optics
    link = PtyLink(BridgeDeviceSim(SimI2CBus(a)), name="i2c")
    try:
        bridge = SerialI2CBridge(SerialTransport(link.path, timeout_s=0.5))
        m = TransceiverModule(bridge, name="a")
        assert m.temperature_c() == pytest.approx(38.5)
        with pytest.raises(InstrumentError, match="seated"):
            bridge.read(0x51, 0, 1)
        m.close()
    finally:
        link.close()
