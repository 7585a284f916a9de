"""Spec-table conformance of the simulated modules' bytes.

Written from the specs, independently of ``instruments/xcvr_maps.py`` and of the reader:
every row is (page, offset, length, meaning, check) with the table it comes from. Pages
are selected by writing byte 127 on the simulated bus, as a host does. Sources:
SFF-8636 rev 2.10a (SFF), OIF-CMIS 5.x (CMIS), SFF-8024 (codes); the same offsets are used
by SONiC sonic_xcvr mem_maps/public/{sff8636,cmis}.py and ethtool qsfp.h/cmis.h.
"""

import numpy as np
import pytest

from instruments.sim.transceivers import SimI2CBus, SimTransceiver


def raw(bus, page, offset, length):
    """Host-style read: select ``page`` (None = lower memory), then read."""
    if page is not None:
        bus.write(0x50, 127, bytes([page]))
        assert bus.read(0x50, 127, 1)[0] == page, f"page {page:02X}h not mapped"
    return bus.read(0x50, offset, length)


def eq(value):
    return lambda b: b == bytes([value]) if isinstance(value, int) else b == value


def bits(mask, value):
    return lambda b: b[0] & mask == value


def ascii_text(b):
    return all(32 <= c < 127 for c in b) and b.strip()


SFF8636_TABLE = [
    (None, 0, 1, "Identifier = QSFP28 (SFF-8024 Table 4-1: 11h)", eq(0x11)),
    (None, 1, 1, "Revision compliance = rev 2.8-2.10 (SFF-8636 Table 6-3: 08h)", eq(0x08)),
    (None, 2, 1, "Status: Flat_mem (bit 2) 0 = paged, Data_Not_Ready (bit 0) 0", bits(0x05, 0)),
    (0, 128, 1, "Identifier copy, upper page 00h byte 128", eq(0x11)),
    (0, 130, 1, "Connector = MPO 1x12 (SFF-8024 Table 4-3: 0Ch)", eq(0x0C)),
    (0, 131, 1, "10/40G compliance bit 7 = Extended, see byte 192", bits(0x80, 0x80)),
    (0, 148, 16, "Vendor name, ASCII", ascii_text),
    (0, 168, 16, "Vendor PN, ASCII", ascii_text),
    (0, 196, 16, "Vendor SN, ASCII", ascii_text),
    (0, 212, 6, "Date code YYMMDD, ASCII digits", lambda b: b.isdigit()),
    (0, 192, 1, "Extended compliance = 100G PSM4 Parallel SMF (SFF-8024 Table 4-4: 07h)", eq(0x07)),
    (0, 195, 1, "Options byte 195 bit 4: TX_DISABLE implemented", bits(0x10, 0x10)),
    (0, 220, 1, "Diagnostic monitoring type: temperature (b5), Vcc (b4), RX average power (b3), "
                "TX power supported (b2)", bits(0x3C, 0x3C)),
]

CMIS_TABLE = [
    (None, 0, 1, "Identifier = QSFP-DD (SFF-8024 Table 4-1: 18h)", eq(0x18)),
    (None, 1, 1, "CMIS revision major nibble = 5 (CMIS lower byte 1)", bits(0xF0, 0x50)),
    (None, 2, 1, "MemoryModel bit 7 = 0: paged (CMIS lower byte 2)", bits(0x80, 0)),
    (None, 3, 1, "ModuleState bits 3-1 = 011b ModuleReady (CMIS 8.2.2 Table 8-6)", bits(0x0E, 0x06)),
    (None, 85, 1, "MediaType = SMF (CMIS byte 85; SFF-8024 media type 02h; ethtool CMIS_MT_SMF)",
     eq(0x02)),
    (None, 86, 1, "Application 1 HostInterfaceID = CAUI-4 C2M (SFF-8024 Table 4-5: 0Bh)", eq(0x0B)),
    (None, 87, 1, "Application 1 MediaInterfaceID = 100G PSM4 (SFF-8024 Table 4-7: 0Fh)", eq(0x0F)),
    (None, 88, 1, "Application 1 host lanes (b7-4) = 4, media lanes (b3-0) = 4", eq(0x44)),
    (None, 94, 1, "HostInterfaceID FFh terminates the application list after app 2", eq(0xFF)),
    (0, 129, 16, "VendorName, ASCII (CMIS page 00h)", ascii_text),
    (0, 148, 16, "VendorPN, ASCII", ascii_text),
    (0, 166, 16, "VendorSN, ASCII", ascii_text),
    (0, 182, 6, "DateCode YYMMDD, ASCII digits", lambda b: b.isdigit()),
    (1, 155, 1, "Supported controls: TX disable (bit 1) (CMIS page 01h; SONiC TX_DISABLE_SUPPORT_FIELD)",
     bits(0x02, 0x02)),
    (1, 158, 1, "Supported RX flags: RX LOS (bit 1) (CMIS page 01h; ethtool CMIS_DIAG_FL_RX_LOS)",
     bits(0x02, 0x02)),
    (1, 159, 1, "Supported module monitors: TempMonSupported (b0), VccMonSupported (b1) (CMIS 5.2 8.4.7)",
     bits(0x03, 0x03)),
    (1, 160, 1, "Supported lane monitors: TX bias (b0), TX power (b1), RX power (b2); "
                "TxBiasCurrentScalingFactor (b4-3) = x1 (CMIS 5.2 8.4.7)", bits(0x1F, 0x07)),
    (0x11, 128, 2, "DPState lanes 1-4 = 4h DPActivated, lane 1 in the low nibble (CMIS page 11h 128-131)",
     eq(b"\x44\x44")),
    (0x11, 130, 2, "DPState lanes 5-8 = 1h DPDeactivated (no application on unwired lanes)", eq(b"\x11\x11")),
    (0x11, 206, 1, "Active ApSel of lane 1 (bits 7-4) = 1 (CMIS page 11h byte 206)", bits(0xF0, 0x10)),
]


@pytest.fixture(scope="module")
def modules():
    sff = SimTransceiver("conf-sff", "sff8636", [0, 1, 2, 3], [4, 5, 6, 7])
    cmis = SimTransceiver("conf-cmis", "cmis", [0, 1, 2, 3], [4, 5, 6, 7])
    return SimI2CBus(sff), SimI2CBus(cmis)


@pytest.mark.parametrize(("page", "offset", "length", "meaning", "check"), SFF8636_TABLE,
                         ids=[row[3][:40] for row in SFF8636_TABLE])
def test_sff8636_table(modules, page, offset, length, meaning, check):
    assert check(raw(modules[0], page, offset, length)), meaning


@pytest.mark.parametrize(("page", "offset", "length", "meaning", "check"), CMIS_TABLE,
                         ids=[row[3][:40] for row in CMIS_TABLE])
def test_cmis_table(modules, page, offset, length, meaning, check):
    assert check(raw(modules[1], page, offset, length)), meaning


@pytest.mark.parametrize(("spec", "page", "first", "checksum_at"), [
    ("sff", 0, 128, 191),  # SFF-8636 CC_BASE: low byte of the sum of bytes 128-190
    ("sff", 0, 192, 223),  # SFF-8636 CC_EXT: bytes 192-222
    ("cmis", 0, 128, 222),  # CMIS page 00h checksum: bytes 128-221
    ("cmis", 1, 130, 255),  # CMIS page 01h checksum: bytes 130-254
    ("cmis", 2, 128, 255),  # CMIS page 02h checksum: bytes 128-254
])
def test_checksums(modules, spec, page, first, checksum_at):
    bus = modules[0] if spec == "sff" else modules[1]
    data = raw(bus, page, first, checksum_at - first + 1)
    assert sum(data[:-1]) & 0xFF == data[-1]


# (page, offset, signed): high alarm, low alarm, high warning, low warning, 2 bytes each
SFF8636_THRESHOLDS = {"temperature": (3, 128, True), "vcc": (3, 144, False), "rx_power": (3, 176, False),
                      "tx_bias": (3, 184, False), "tx_power": (3, 192, False)}  # SFF-8636 page 03h
CMIS_THRESHOLDS = {"temperature": (2, 128, True), "vcc": (2, 136, False), "tx_power": (2, 176, False),
                   "tx_bias": (2, 184, False), "rx_power": (2, 192, False)}  # CMIS page 02h


@pytest.mark.parametrize(("spec", "quantity"), [("sff", q) for q in SFF8636_THRESHOLDS]
                         + [("cmis", q) for q in CMIS_THRESHOLDS])
def test_thresholds_are_ordered(modules, spec, quantity):
    bus, table = (modules[0], SFF8636_THRESHOLDS) if spec == "sff" else (modules[1], CMIS_THRESHOLDS)
    page, offset, signed = table[quantity]
    ha, la, hw, lw = np.frombuffer(raw(bus, page, offset, 8), dtype=">i2" if signed else ">u2")
    assert ha > hw > lw > la


def test_thresholds_bracket_the_operating_point(modules):
    # a module whose own readings sat outside its thresholds would raise alarms in every host
    bus = modules[1]
    temperature = np.frombuffer(raw(bus, None, 14, 2), ">i2")[0]
    _ha, _la, hw, lw = np.frombuffer(raw(bus, 2, 128, 8), ">i2")
    assert lw < temperature < hw


def test_unsupported_page_select_reads_back_zero(modules):
    # CMIS 5.2 8.22 Page Mapping Register Components, PageSelect: "the module may clear the
    # PageSelect to prevent mapping an unsupported page"; our SFF-8636 module does the same.
    for bus, page in ((modules[1], 0x03), (modules[0], 0x02)):
        bus.write(0x50, 127, bytes([page]))
        assert bus.read(0x50, 127, 1) == b"\x00"


def test_read_only_bytes_ignore_writes(modules):
    bus = modules[0]
    bus.write(0x50, 0, b"\x42")
    assert bus.read(0x50, 0, 1) == b"\x11"
