"""The static bytes of a simulated module: identity, advertisement, thresholds, checksums.

:func:`sff8636_image` and :func:`cmis_image` fill a :class:`ModuleImage` the way a real
module's EEPROM is programmed at the factory; :mod:`instruments.sim.transceivers` then
keeps the live bytes (monitors, flags, states) up to date. Every value a host decoder
checks before it reports a monitor is set here (see ``docs/protocol-transceivers.md``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from instruments.xcvr_maps import (
    BIAS_LSB_MA,
    PAGE_SIZE,
    POWER_LSB_MW,
    TEMPERATURE_LSB_C,
    UPPER_START,
    VCC_LSB_V,
    Cmis,
    Field,
    Sff8636,
    checksum,
)

VENDOR = "LUMION SIM"
VENDOR_REV = "A1"
DATE_CODE = "250101  "  # YYMMDD + 2-character lot code, ASCII (both specs)
WAVELENGTH_NM = 1310.0  # PSM4 / DR lanes
WAVELENGTH_TOLERANCE_NM = 6.5
WAVELENGTH_LSB_NM, TOLERANCE_LSB_NM = 0.05, 0.005  # both specs
MAX_CASE_TEMP_C = 70  # commercial temperature range
CONNECTOR_MPO_1X12 = 0x0C  # SFF-8024 Table 4-3: parallel fibres, one per lane, as our mesh ports are wired
# Alarm/warning thresholds: a commercial 100G PSM4-class optic; ordered
# high alarm > high warning > low warning > low alarm, as both specs require of a module.
THRESHOLDS = {  # quantity: (high_alarm, low_alarm, high_warning, low_warning), wire order
    "temperature_c": (75.0, -5.0, 70.0, 0.0),  # 0-70 degC case range with 5 degC alarm margins
    "vcc_v": (3.63, 2.97, 3.465, 3.135),  # 3.3 V +-10 % alarm, +-5 % warning
    "tx_power_mw": (2.5, 0.16, 2.0, 0.25),  # +4 / -8 dBm alarm, +3 / -6 dBm warning around 1 dBm launch
    "tx_bias_ma": (15.0, 2.0, 13.0, 3.0),  # around the 7.5 mA operating bias
    "rx_power_mw": (2.0, 0.0126, 1.6, 0.02),  # +3 / -19 dBm alarm, +2 / -17 dBm warning (LOS at -20 dBm)
}
THRESHOLD_LSB = {"temperature_c": TEMPERATURE_LSB_C, "vcc_v": VCC_LSB_V, "tx_power_mw": POWER_LSB_MW,
                 "tx_bias_ma": BIAS_LSB_MA, "rx_power_mw": POWER_LSB_MW}
# SFF-8636 identity (upper page 00h)
SFF_EXT_IDENTIFIER = 0xCC  # power class 4 (3.5 W), CDR in TX and RX
SFF_COMPLIANCE_EXTENDED = 0x80  # byte 131 bit 7: see byte 192
SFF_EXT_COMPLIANCE_PSM4 = 0x07  # SFF-8024 Table 4-4: 100G PSM4 Parallel SMF
SFF_ENCODING_64B66B = 0x05
SFF_BIT_RATE_SEE_EXTENDED = 0xFF  # > 25.4 GBd: byte 222 holds the rate
SFF_EXTENDED_BAUD_RATE = 103  # 25.78125 GBd in 250 MBd units
SFF_LENGTH_SMF_KM = 2
SFF_DEVICE_TECH_1310_DFB = 0x40  # byte 147 bits 7-4 = 0100b
SFF_REVISION_2_10 = 0x08
SFF_ENHANCED_OPTIONS = 0x00  # none of byte 221's features (init-complete flag, SW reset, ...) exist
# CMIS identity and advertisement
CMIS_REVISION_5_0 = 0x50
CMIS_MEDIA_TYPE_SMF = 0x02
CMIS_POWER_CLASS_5 = 0x80  # bits 7-5 = 4: power class 5 (10 W)
CMIS_MAX_POWER_QW = 40  # 10 W in 0.25 W
CMIS_TECH_1310_DFB = 0x04
CMIS_HW_REVISION = (1, 0)
CMIS_LENGTH_SMF = 0x45  # bits 7-6 = 01 (x1 km), bits 5-0 = 5: 5 km
APP_CAUI4_PSM4, APP_400G_DR4 = 1, 2  # ApSel codes of our application list
APPLICATIONS = (  # (HostInterfaceID, MediaInterfaceID, host/media lane counts, host lane options)
    (0x0B, 0x0F, 0x44, 0x11),  # CAUI-4 C2M / 100G PSM4: 4+4 lanes, may start on lane 1 or 5
    (0x11, 0x1C, 0x84, 0x01),  # 400GAUI-8 C2M / 400GBASE-DR4: 8 host + 4 media lanes from lane 1
)
MEDIA_LANE_OPTIONS = (0x11, 0x01)  # page 01h byte 176 + ApSel - 1


@dataclass
class ModuleImage:
    """Lower memory and the implemented upper pages of one module."""

    lower: bytearray = field(default_factory=lambda: bytearray(PAGE_SIZE))
    pages: dict[int, bytearray] = field(default_factory=dict)

    def area(self, page: int | None) -> bytearray:
        """The 128 bytes of lower memory (None) or of an upper page."""
        return self.lower if page is None else self.pages[page]

    def put(self, f: Field, data: bytes | Iterable[int]) -> None:
        """Write ``data`` (at most ``f.size`` bytes) at ``f``."""
        raw = bytes(data)[:f.size]
        start = f.offset - (0 if f.page is None else UPPER_START)
        self.area(f.page)[start:start + len(raw)] = raw

    def get(self, f: Field) -> bytes:
        """The bytes of ``f``."""
        start = f.offset - (0 if f.page is None else UPPER_START)
        return bytes(self.area(f.page)[start:start + f.size])

    def set_bits(self, f: Field, mask: int, on: bool) -> None:
        """Set or clear ``mask`` in the byte at ``f``."""
        b = self.get(f)[0]
        self.put(f, [(b | mask) if on else (b & ~mask & 0xFF)])

    def fill_checksum(self, f: Field, start: int) -> None:
        """Store at ``f`` the checksum of bytes ``start`` .. ``f.offset - 1`` of the same page."""
        self.put(f, [checksum(self.get(Field(f.page, start, f.offset - start)))])


def ascii_field(text: str, size: int) -> bytes:
    """Space-padded ASCII, as both specs store vendor strings."""
    return text.ljust(size)[:size].encode("ascii")


def words(values: Iterable[float], lsb: float, signed: bool = False) -> bytes:
    """Big-endian 16-bit words of ``values / lsb`` (rounded, clipped to the type)."""
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    raw = np.clip(np.round(np.asarray(list(values), dtype=float) / lsb), lo, hi)
    return raw.astype(">i2" if signed else ">u2").tobytes()


def threshold_bytes(quantity: str, bias_multiplier: int = 1) -> bytes:
    """The 8 threshold bytes of one quantity in wire order (bias scaled by the CMIS multiplier)."""
    lsb = THRESHOLD_LSB[quantity] * (bias_multiplier if quantity == "tx_bias_ma" else 1)
    return words(THRESHOLDS[quantity], lsb, signed=quantity == "temperature_c")


def _sff_identity(img: ModuleImage, serial: str) -> None:
    s = Sff8636
    img.put(s.IDENTIFIER_COPY, [0x11])
    img.put(s.EXT_IDENTIFIER, [SFF_EXT_IDENTIFIER])
    img.put(s.CONNECTOR, [CONNECTOR_MPO_1X12])
    img.put(s.SPEC_COMPLIANCE, [SFF_COMPLIANCE_EXTENDED])
    img.put(s.ENCODING, [SFF_ENCODING_64B66B])
    img.put(s.NOMINAL_BIT_RATE, [SFF_BIT_RATE_SEE_EXTENDED])
    img.put(s.LENGTH_SMF_KM, [SFF_LENGTH_SMF_KM])
    img.put(s.DEVICE_TECHNOLOGY, [SFF_DEVICE_TECH_1310_DFB])
    img.put(s.VENDOR_NAME, ascii_field(VENDOR, 16))
    img.put(s.VENDOR_PN, ascii_field("SIM-SFF8636", 16))
    img.put(s.VENDOR_REV, ascii_field(VENDOR_REV, 2))
    img.put(s.WAVELENGTH, words([WAVELENGTH_NM], WAVELENGTH_LSB_NM))
    img.put(s.WAVELENGTH_TOLERANCE, words([WAVELENGTH_TOLERANCE_NM], TOLERANCE_LSB_NM))
    img.put(s.MAX_CASE_TEMP, [MAX_CASE_TEMP_C])
    img.put(s.EXT_SPEC_COMPLIANCE, [SFF_EXT_COMPLIANCE_PSM4])
    img.put(s.VENDOR_SN, ascii_field(serial, 16))
    img.put(s.DATE_CODE, DATE_CODE.encode("ascii"))
    img.put(s.EXTENDED_BAUD_RATE, [SFF_EXTENDED_BAUD_RATE])


def _sff_advertisement(img: ModuleImage, unsupported: frozenset[str]) -> None:
    s = Sff8636
    diag = s.DIAG_RX_POWER_AVERAGE
    bits = (("temperature", s.DIAG_TEMPERATURE), ("vcc", s.DIAG_VCC), ("tx_power", s.DIAG_TX_POWER))
    for name, bit in bits:
        diag |= 0 if name in unsupported else bit
    img.put(s.DIAG_MONITORING_TYPE, [diag])
    img.put(s.ENHANCED_OPTIONS, [SFF_ENHANCED_OPTIONS])
    options = bytearray(3)
    options[s.OPTIONS_TX_FAULT[0] - s.OPTIONS.offset] |= s.OPTIONS_TX_FAULT[1]
    if "tx_disable" not in unsupported:
        options[s.OPTIONS_TX_DISABLE[0] - s.OPTIONS.offset] |= s.OPTIONS_TX_DISABLE[1]
    img.put(s.OPTIONS, options)


def sff8636_image(serial: str, unsupported: frozenset[str] = frozenset()) -> ModuleImage:
    """A QSFP28 PSM4 module (paged memory: upper pages 00h and 03h).

    ``unsupported``: monitors/controls whose advertisement bit is cleared (temperature,
    vcc, tx_power, tx_disable -- the only ones SFF-8636 has a bit for).
    """
    no_bit = unsupported - {"temperature", "vcc", "tx_power", "tx_disable"}
    if no_bit:
        raise ValueError(f"SFF-8636 has no advertisement bit for {sorted(no_bit)}")
    s = Sff8636
    img = ModuleImage(pages={p: bytearray(PAGE_SIZE) for p in s.PAGES})
    img.put(s.IDENTIFIER, [0x11])
    img.put(s.REVISION_COMPLIANCE, [SFF_REVISION_2_10])
    img.put(s.STATUS, [0x00])  # paged memory (page 03h present), data ready
    _sff_identity(img, serial)
    _sff_advertisement(img, unsupported)
    for quantity, where in s.THRESHOLDS.items():
        img.put(where, threshold_bytes(quantity))
    img.fill_checksum(s.CC_BASE, UPPER_START)
    img.fill_checksum(s.CC_EXT, s.EXT_SPEC_COMPLIANCE.offset)
    return img


def _cmis_identity(img: ModuleImage, serial: str) -> None:
    c = Cmis
    img.put(c.IDENTIFIER_COPY, [0x18])
    img.put(c.VENDOR_NAME, ascii_field(VENDOR, 16))
    img.put(c.VENDOR_PN, ascii_field("SIM-CMIS", 16))
    img.put(c.VENDOR_REV, ascii_field(VENDOR_REV, 2))
    img.put(c.VENDOR_SN, ascii_field(serial, 16))
    img.put(c.DATE_CODE, DATE_CODE.encode("ascii"))
    img.put(c.CLEI, ascii_field("", 10))
    img.put(c.POWER_CLASS, [CMIS_POWER_CLASS_5])
    img.put(c.MAX_POWER, [CMIS_MAX_POWER_QW])
    img.put(c.CONNECTOR, [CONNECTOR_MPO_1X12])
    img.put(c.MEDIA_INTERFACE_TECH, [CMIS_TECH_1310_DFB])
    img.put(c.HW_REVISION, CMIS_HW_REVISION)
    img.put(c.LENGTH_SMF, [CMIS_LENGTH_SMF])
    img.put(c.NOMINAL_WAVELENGTH, words([WAVELENGTH_NM], WAVELENGTH_LSB_NM))
    img.put(c.WAVELENGTH_TOLERANCE, words([WAVELENGTH_TOLERANCE_NM], TOLERANCE_LSB_NM))


def _cmis_applications(img: ModuleImage) -> None:
    c = Cmis
    table = bytearray([c.APPLICATION_END] + [0] * (c.APPLICATIONS.size - 1))
    for k, app in enumerate(APPLICATIONS):
        table[4 * k:4 * k + 4] = bytes(app)
    table[4 * len(APPLICATIONS)] = c.APPLICATION_END
    img.put(c.APPLICATIONS, table)
    img.put(c.MEDIA_LANE_ASSIGNMENT, bytes(MEDIA_LANE_OPTIONS))
    img.put(c.MEDIA_TYPE, [CMIS_MEDIA_TYPE_SMF])


def _cmis_advertisement(img: ModuleImage, unsupported: frozenset[str], bias_multiplier: int) -> None:
    c = Cmis

    def bits(pairs: Iterable[tuple[str, int]]) -> int:
        return sum(bit for name, bit in pairs if name not in unsupported)

    img.put(c.DIAG_TYPE, [c.RX_POWER_AVERAGE])
    img.put(c.CONTROLS_SUPPORTED, [bits([("tx_disable", c.TX_DISABLE_SUPPORTED)])])
    img.put(c.TX_FLAGS_SUPPORTED, [c.TX_FAULT_SUPPORTED])
    img.put(c.RX_FLAGS_SUPPORTED, [bits([("rx_los", c.RX_LOS_SUPPORTED)])])
    img.put(c.MODULE_MONITORS_SUPPORTED,
            [bits([("temperature", c.TEMP_MON_SUPPORTED), ("vcc", c.VCC_MON_SUPPORTED)])])
    scale = {v: k for k, v in c.BIAS_MULTIPLIERS.items()}[bias_multiplier] << c.BIAS_SCALE_SHIFT
    img.put(c.LANE_MONITORS_SUPPORTED, [scale | bits([
        ("tx_bias", c.TX_BIAS_MON_SUPPORTED), ("tx_power", c.TX_POWER_MON_SUPPORTED),
        ("rx_power", c.RX_POWER_MON_SUPPORTED)])])


def cmis_image(serial: str, unsupported: frozenset[str] = frozenset(),
               bias_multiplier: int = 1) -> ModuleImage:
    """A CMIS 5.0 QSFP-DD module (paged: pages 00h, 01h, 02h, 10h, 11h of bank 0).

    ``unsupported``: monitors/controls whose advertisement bit is cleared (temperature,
    vcc, tx_power, rx_power, tx_bias, rx_los, tx_disable). ``bias_multiplier``: 1, 2 or 4
    (page 01h byte 160 bits 4-3); the TX bias monitor and thresholds count 2 uA times it.
    """
    if bias_multiplier not in Cmis.BIAS_MULTIPLIERS.values():
        raise ValueError(f"CMIS TX bias multiplier must be 1, 2 or 4, not {bias_multiplier}")
    c = Cmis
    img = ModuleImage(pages={p: bytearray(PAGE_SIZE) for p in c.PAGES})
    img.put(c.IDENTIFIER, [0x18])
    img.put(c.REVISION, [CMIS_REVISION_5_0])
    img.put(c.MEMORY_MODEL, [0x00])  # paged
    _cmis_identity(img, serial)
    _cmis_applications(img)
    _cmis_advertisement(img, unsupported, bias_multiplier)
    for quantity, where in c.THRESHOLDS.items():
        img.put(where, threshold_bytes(quantity, bias_multiplier))
    img.fill_checksum(c.PAGE00_CHECKSUM, UPPER_START)
    img.fill_checksum(c.PAGE01_CHECKSUM, c.PAGE01_CHECKSUM_START)
    img.fill_checksum(c.PAGE02_CHECKSUM, UPPER_START)
    return img
