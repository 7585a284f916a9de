"""Transceiver management: our reader against the simulated optical truth, page handling,
advertisement, module/data-path states, TX disable, exact bridge messages."""

import json

import numpy as np
import pytest

from instruments.errors import InstrumentError, LimitError
from instruments.sim.chip import Chip
from instruments.sim.heater_device import PtyLink
from instruments.sim.transceivers import (
    OFF_MESH_LOSS_DB,
    BridgeDeviceSim,
    SimI2CBus,
    SimTransceiver,
    TransceiverBench,
)
from instruments.sim.truth_map import TruthMap
from instruments.testing import expected_protocol
from instruments.transceiver import (
    ModuleNotReadyError,
    NotAdvertisedError,
    PageSelectError,
    ReadbackError,
    SerialI2CBridge,
    TransceiverModule,
)
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


class RecordingBus(SimI2CBus):
    """A simulated bus that logs every transaction, and can drop writes to one offset."""

    def __init__(self, module, drop_writes_to=None):
        super().__init__(module)
        self.log, self.drop = [], drop_writes_to

    def read(self, address, offset, length):
        self.log.append(("r", offset, length))
        return super().read(address, offset, length)

    def write(self, address, offset, data):
        self.log.append(("w", offset, bytes(data)))
        if offset != self.drop:
            super().write(address, offset, data)


def test_sff8636_decodes_the_simulated_truth(optics):
    _, a, _ = optics
    m = TransceiverModule(SimI2CBus(a), name="a")
    assert (m.identifier, m.form_factor, m.map.NAME) == (0x11, "QSFP28", "SFF-8636")
    assert m.temperature_c() == pytest.approx(38.5)
    assert m.vcc_v() == pytest.approx(3.29)
    np.testing.assert_allclose(m.tx_power_dbm(), 1.0, atol=0.01)
    np.testing.assert_allclose(m.tx_bias_ma(), 7.5)
    assert m.identity() == {"vendor": "LUMION SIM", "oui": "00:00:00", "part_number": "SIM-SFF8636",
                            "revision": "A1", "serial_number": "SIMA", "date_code": "250101", "lot": ""}
    assert m.advertised.rx_power_type == "average"


def test_thresholds_decode_in_user_units(optics):
    _, a, b = optics
    for module in (a, b):
        th = TransceiverModule(SimI2CBus(module)).thresholds()
        assert th["temperature_c"].high_alarm == pytest.approx(75.0)
        assert th["vcc_v"].low_alarm == pytest.approx(2.97)
        assert th["tx_bias_ma"].high_warning == pytest.approx(13.0)
        assert th["rx_power_dbm"].low_alarm == pytest.approx(-19.0, abs=0.01)
        assert th["tx_power_dbm"].high_alarm == pytest.approx(3.98, abs=0.01)


def test_rx_power_follows_the_routed_light(optics):
    chip, a, b = optics
    ma, mb = TransceiverModule(SimI2CBus(a)), TransceiverModule(SimI2CBus(b))
    plan = route_many(chip.mesh, [(0, 24), (21, 5)], params=chip.truth.params, check_budget=False)
    chip.set_currents(TruthMap(chip).currents_for(plan.configuration, 24.0))
    rb, ra = mb.rx_power_dbm(), ma.rx_power_dbm()
    model = {(r.route.src, r.route.dst): r.transmission_db for r in plan.routes}
    # launch +1 dBm, facets and access waveguides at both ends, then the mesh's own transmission
    assert rb[0] == pytest.approx(1.0 - OFF_MESH_LOSS_DB + model[(0, 24)], abs=0.1)
    assert ra[1] == pytest.approx(1.0 - OFF_MESH_LOSS_DB + model[(21, 5)], abs=0.1)
    assert not mb.rx_los()[0]
    ma.set_tx_disable(0, True)
    assert mb.rx_power_dbm()[0] < rb[0] - 20
    assert mb.rx_los()[0]
    ma.set_tx_disable(0, False)
    assert mb.rx_los_latched()[0]  # the loss is remembered until read once...
    assert not mb.rx_los_latched()[0]  # ...then the flag shows the present state
    assert not mb.rx_los()[0]


def test_another_host_leaving_a_page_selected_does_not_fool_us(optics):
    _, a, b = optics
    mb = TransceiverModule(SimI2CBus(b))
    before = mb.tx_power_dbm()
    other = SimI2CBus(b)
    other.write(0x50, 127, b"\x02")  # another host (or a module reset) maps page 02h
    np.testing.assert_allclose(mb.tx_power_dbm(), before)
    assert mb.identity()["serial_number"] == "SIMB"
    ma = TransceiverModule(SimI2CBus(a))
    SimI2CBus(a).write(0x50, 127, b"\x03")  # page 03h holds thresholds at the offsets of page 00h's strings
    assert ma.identity()["vendor"] == "LUMION SIM"


def test_every_paged_access_selects_and_verifies_the_page(optics):
    _, _, b = optics
    bus = RecordingBus(b)
    m = TransceiverModule(bus)
    bus.log.clear()
    m.tx_power_dbm()
    # module state (lower), DP states (page 11h), then the monitors (page 11h) -- each selected again
    assert bus.log == [("r", 3, 1), ("w", 127, b"\x11"), ("r", 127, 1), ("r", 128, 4),
                       ("w", 127, b"\x11"), ("r", 127, 1), ("r", 154, 16)]


def test_a_page_the_module_does_not_implement_is_an_error():
    t = SimTransceiver("nopage3", "sff8636", [], [])
    del t.pages[3]  # claims paged memory (Flat_mem = 0) but has no page 03h
    m = TransceiverModule(SimI2CBus(t))
    with pytest.raises(PageSelectError, match="03h"):
        m.thresholds()


def test_cmis_bias_multiplier_scales_monitor_and_thresholds():
    t = SimTransceiver("x4", "cmis", [0], [1], bias_multiplier=4)
    bus = SimI2CBus(t)
    m = TransceiverModule(bus)
    assert m.advertised.bias_multiplier == 4
    bus.write(0x50, 127, b"\x11")
    raw = int.from_bytes(bus.read(0x50, 170, 2), "big")
    assert raw == round(7.5 / (0.002 * 4))  # the module counts 8 uA steps
    assert m.tx_bias_ma()[0] == pytest.approx(7.5, abs=0.008)  # within one 8 uA step
    assert m.thresholds()["tx_bias_ma"].high_alarm == pytest.approx(15.0, abs=0.008)


def test_tx_disable_round_trip(optics):
    _, _, b = optics
    m = TransceiverModule(SimI2CBus(b), name="b")
    m.set_tx_disable(2, True)
    assert b.pages[0x10][130 - 128] == 0b100
    assert m.tx_disabled().tolist()[:4] == [False, False, True, False]
    assert m.tx_power_dbm()[2] < -30
    m.set_tx_disable(2, False)
    assert m.tx_power_dbm()[2] == pytest.approx(1.0, abs=0.01)
    with pytest.raises(LimitError):
        m.set_tx_disable(8, True)


def test_tx_disable_that_does_not_stick_is_reported():
    t = SimTransceiver("deaf", "sff8636", [0], [1])
    m = TransceiverModule(RecordingBus(t, drop_writes_to=86))
    with pytest.raises(ReadbackError, match="read back 0x00"):
        m.set_tx_disable(1, True)


@pytest.mark.parametrize(("kind", "missing"), [("sff8636", "tx_power"), ("sff8636", "temperature"),
                                               ("cmis", "rx_power"), ("cmis", "vcc"), ("cmis", "tx_bias")])
def test_a_monitor_not_advertised_reads_none(kind, missing):
    t = SimTransceiver("quiet", kind, [0], [1], unsupported=[missing])
    m = TransceiverModule(SimI2CBus(t))
    read = {"tx_power": m.tx_power_dbm, "temperature": m.temperature_c, "rx_power": m.rx_power_dbm,
            "vcc": m.vcc_v, "tx_bias": m.tx_bias_ma}
    assert read[missing]() is None
    threshold_key = {"temperature": "temperature_c", "vcc": "vcc_v", "tx_bias": "tx_bias_ma"}.get(
        missing, f"{missing}_dbm")
    assert m.thresholds()[threshold_key] is None
    others = [f for name, f in read.items() if name != missing]
    assert all(f() is not None for f in others)


def test_tx_disable_not_advertised_is_refused():
    t = SimTransceiver("nodis", "cmis", [0], [1], unsupported=["tx_disable"])
    m = TransceiverModule(SimI2CBus(t))
    assert m.tx_disabled() is None
    with pytest.raises(NotAdvertisedError):
        m.set_tx_disable(0, True)


def test_low_power_module_refuses_lane_values():
    t = SimTransceiver("lp", "cmis", [0], [1])
    bus = SimI2CBus(t)
    m = TransceiverModule(bus)
    bus.write(0x50, 26, b"\x10")  # LowPwrRequestSW
    assert m.module_state() == "ModuleLowPwr"
    assert set(m.data_path_states()) == {"DPDeactivated"}
    with pytest.raises(ModuleNotReadyError, match="ModuleLowPwr"):
        m.tx_power_dbm()
    d = m.dom()
    assert d["tx_power_dbm"] is None
    assert d["module_state"] == "ModuleLowPwr"
    assert m.temperature_c() == pytest.approx(38.5)  # module monitors stay valid in low power
    bus.write(0x50, 26, b"\x00")
    assert m.module_state() == "ModuleReady"
    assert m.tx_power_dbm()[0] == pytest.approx(1.0, abs=0.01)


def test_lane_without_activated_data_path_is_not_reported_live(optics):
    chip, a, b = optics
    ma, mb = TransceiverModule(SimI2CBus(a)), TransceiverModule(SimI2CBus(b))
    plan = route_many(chip.mesh, [(21, 5)], params=chip.truth.params, check_budget=False)
    chip.set_currents(TruthMap(chip).currents_for(plan.configuration, 24.0))
    lit = ma.rx_power_dbm()[1]
    bus = SimI2CBus(b)
    bus.write(0x50, 127, b"\x10")
    bus.write(0x50, 128, b"\x02")  # DataPathDeinit for lane 2 (0-based 1)
    try:
        assert mb.data_path_states()[:2] == ["DPActivated", "DPDeactivated"]
        assert np.isnan(mb.tx_power_dbm()[1])
        assert not np.isnan(mb.tx_power_dbm()[0])
        assert ma.rx_power_dbm()[1] < lit - 20  # a deactivated data path emits no light
        assert mb.dom()["tx_bias_ma"][1] is None
    finally:
        bus.write(0x50, 127, b"\x10")
        bus.write(0x50, 128, b"\x00")


def test_cmis_application_list(optics):
    _, a, b = optics
    apps = TransceiverModule(SimI2CBus(b)).applications()
    assert [(x["apsel"], x["host_interface_id"], x["host_lanes"], x["media_lanes"]) for x in apps] == [
        (1, 0x0B, 4, 4), (2, 0x11, 8, 4)]
    assert TransceiverModule(SimI2CBus(a)).applications() == []


def test_dom_is_json(optics):
    _, _, b = optics
    d = TransceiverModule(SimI2CBus(b)).dom()
    again = json.loads(json.dumps(d, allow_nan=False))
    assert again["tx_power_dbm"][4:] == [None] * 4  # lanes 5-8 carry no application
    assert again["advertised"]["bias_multiplier"] == 1


def test_unknown_identifier_is_refused():
    t = SimTransceiver("x", "sff8636", [], [])
    t.lower[0] = 0x42
    with pytest.raises(InstrumentError, match="identifier"):
        TransceiverModule(SimI2CBus(t))


def test_bridge_exact_messages():
    script = [(b"r50,00,01\n", b"11\n"), (b"r50,16,02\n", b"2680\n"), (b"w50,56,01\n", b"OK\n"),
              (b"w50,7f,11\n", b"OK\n"), (b"r50,7f,01\n", b"11\n")]
    with expected_protocol(SerialI2CBridge, script) as bridge:
        assert bridge.read(0x50, 0, 1) == b"\x11"
        assert bridge.read(0x50, 22, 2) == b"\x26\x80"
        bridge.write(0x50, 86, b"\x01")
        bridge.write(0x50, 127, b"\x11")
        assert bridge.read(0x50, 127, 1) == b"\x11"


def test_bridge_over_pty(optics):
    _, a, _ = optics
    link = PtyLink(BridgeDeviceSim(SimI2CBus(a)), name="i2c")
    try:
        bridge = SerialI2CBridge(SerialTransport(link.path, timeout_s=0.5))
        m = TransceiverModule(bridge, name="a")
        assert m.temperature_c() == pytest.approx(38.5)
        assert m.thresholds()["vcc_v"].high_alarm == pytest.approx(3.63)
        with pytest.raises(InstrumentError, match="seated"):
            bridge.read(0x51, 0, 1)
        m.close()
    finally:
        link.close()
