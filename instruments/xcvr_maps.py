"""Where SFF-8636 and CMIS keep each management field, named after the specs' field names.

One place for the byte addresses, bit masks and codes that both the reader
(:mod:`instruments.transceiver`) and the simulated modules (:mod:`instruments.sim.transceivers`)
use. Sources, field by field, are in ``docs/protocol-transceivers.md``: SFF-8636 rev 2.10a,
OIF-CMIS 5.x, cross-checked against SONiC ``sonic_xcvr`` memory maps and ethtool's
``qsfp.h`` / ``cmis.h``. The conformance tests check the simulator against a table written
independently of this file.

Addresses are as the host sees them on the wire: 0-127 lower memory, 128-255 the upper
page selected by byte 127. Units on the wire (both specs): temperature int16 1/256 degC;
Vcc uint16 100 uV; optical power uint16 0.1 uW; TX bias uint16 2 uA (times the CMIS
multiplier). Multi-byte values are big-endian.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType


@dataclass(frozen=True)
class Field:
    """A field: ``page`` None = lower memory, else the upper page; ``offset`` 0-255; ``size`` bytes."""

    page: int | None
    offset: int
    size: int = 1


MODULE_ADDRESS = 0x50  # 7-bit I2C address (A0h 8-bit) of both specs' management interface
PAGE_SELECT = 127  # both specs: byte 127 maps a page into 128-255
UPPER_START = 128  # first upper-memory address
PAGE_SIZE = 128  # bytes per page

# wire units (both specs)
TEMPERATURE_LSB_C = 1 / 256
VCC_LSB_V = 100e-6
POWER_LSB_MW = 1e-4  # 0.1 uW
BIAS_LSB_MA = 2e-3  # 2 uA


class Sff8636:
    """SFF-8636 rev 2.10a (QSFP+/QSFP28) memory map (Tables 6-2 .. 6-26)."""

    NAME = "SFF-8636"
    LANES = 4
    PAGES = frozenset({0x00, 0x03})  # what our module implements (page 01h/02h not advertised)
    # lower page (Table 6-2 .. 6-9)
    IDENTIFIER = Field(None, 0)
    REVISION_COMPLIANCE = Field(None, 1)  # 08h = rev 2.8-2.10 (Table 6-3)
    STATUS = Field(None, 2)
    FLAT_MEM = 0x04  # STATUS bit 2: 1 = upper page 00h only (no page 03h)
    DATA_NOT_READY = 0x01  # STATUS bit 0: 1 = monitors not valid yet
    LOS = Field(None, 3)  # bits 3-0 RX LOS lane 4..1, bits 7-4 TX LOS (latched)
    TX_FAULT = Field(None, 4)  # bits 3-0 (latched)
    TEMPERATURE = Field(None, 22, 2)
    SUPPLY_VOLTAGE = Field(None, 26, 2)
    RX_POWER = Field(None, 34, 8)
    TX_BIAS = Field(None, 42, 8)
    TX_POWER = Field(None, 50, 8)
    TX_DISABLE = Field(None, 86)  # bits 3-0, read/write
    WRITABLE_LOWER = frozenset({86, 87, 88, 93, PAGE_SELECT})  # controls a host may write
    # upper page 00h (Table 6-14 .. 6-25)
    IDENTIFIER_COPY = Field(0, 128)
    EXT_IDENTIFIER = Field(0, 129)
    CONNECTOR = Field(0, 130)
    SPEC_COMPLIANCE = Field(0, 131, 8)
    ENCODING = Field(0, 139)
    NOMINAL_BIT_RATE = Field(0, 140)  # 100 MBd; FFh = see EXTENDED_BAUD_RATE
    EXT_RATE_SELECT = Field(0, 141)
    LENGTH_SMF_KM = Field(0, 142)
    DEVICE_TECHNOLOGY = Field(0, 147)
    VENDOR_NAME = Field(0, 148, 16)
    VENDOR_OUI = Field(0, 165, 3)
    VENDOR_PN = Field(0, 168, 16)
    VENDOR_REV = Field(0, 184, 2)
    WAVELENGTH = Field(0, 186, 2)  # 0.05 nm
    WAVELENGTH_TOLERANCE = Field(0, 188, 2)  # 0.005 nm
    MAX_CASE_TEMP = Field(0, 190)
    CC_BASE = Field(0, 191)  # low byte of the sum of 128-190
    EXT_SPEC_COMPLIANCE = Field(0, 192)
    OPTIONS = Field(0, 193, 3)
    OPTIONS_TX_DISABLE = (195, 0x10)  # byte 195 bit 4: TX_DISABLE implemented
    OPTIONS_TX_FAULT = (195, 0x08)  # byte 195 bit 3: TX_FAULT reporting implemented
    VENDOR_SN = Field(0, 196, 16)
    DATE_CODE = Field(0, 212, 8)  # ASCII YYMMDDLL
    DIAG_MONITORING_TYPE = Field(0, 220)
    DIAG_TEMPERATURE = 0x20  # bit 5: temperature monitoring implemented (rev >= 2.8)
    DIAG_VCC = 0x10  # bit 4: supply voltage monitoring implemented (rev >= 2.8)
    DIAG_RX_POWER_AVERAGE = 0x08  # bit 3: RX power is average power (0 = OMA)
    DIAG_TX_POWER = 0x04  # bit 2: TX power measurement supported
    ENHANCED_OPTIONS = Field(0, 221)
    EXTENDED_BAUD_RATE = Field(0, 222)  # 250 MBd
    CC_EXT = Field(0, 223)  # low byte of the sum of 192-222
    REVISION_WITH_MONITOR_BITS = 0x08  # bits 5/4 of byte 220 exist from rev 2.8 on
    # page 03h thresholds (Table 6-26): high alarm, low alarm, high warning, low warning
    THRESHOLDS = MappingProxyType({
        "temperature_c": Field(3, 128, 8), "vcc_v": Field(3, 144, 8), "rx_power_mw": Field(3, 176, 8),
        "tx_bias_ma": Field(3, 184, 8), "tx_power_mw": Field(3, 192, 8)})


class Cmis:
    """OIF-CMIS 5.x (QSFP-DD/OSFP) memory map (Tables 8-4 .. 8-90), bank 0 only."""

    NAME = "CMIS"
    LANES = 8
    PAGES = frozenset({0x00, 0x01, 0x02, 0x10, 0x11})
    # lower memory (section 8.2)
    IDENTIFIER = Field(None, 0)
    REVISION = Field(None, 1)  # major.minor in the two nibbles (50h = 5.0)
    MEMORY_MODEL = Field(None, 2)
    FLAT_MEMORY = 0x80  # byte 2 bit 7: 1 = flat (lower + page 00h only)
    MODULE_STATE = Field(None, 3)  # bits 3-1 ModuleState, bit 0 InterruptDeasserted
    MODULE_STATE_SHIFT, MODULE_STATE_MASK = 1, 0x0E
    INTERRUPT_DEASSERTED = 0x01
    MODULE_FLAGS = Field(None, 8, 4)  # latched module flags (temperature/Vcc in byte 9)
    TEMPERATURE = Field(None, 14, 2)
    SUPPLY_VOLTAGE = Field(None, 16, 2)
    MODULE_GLOBAL_CONTROLS = Field(None, 26)
    LOW_PWR_REQUEST_SW = 0x10  # byte 26 bit 4
    MEDIA_TYPE = Field(None, 85)  # 02h = SMF
    # 8 x (HostInterfaceID, MediaInterfaceID, host/media lane counts, host lane assignment options)
    APPLICATIONS = Field(None, 86, 32)
    APPLICATION_END = 0xFF  # HostInterfaceID FFh ends the list
    BANK_SELECT = Field(None, 126)
    WRITABLE_LOWER = frozenset({26, 126, PAGE_SELECT})
    # page 00h (section 8.3)
    IDENTIFIER_COPY = Field(0, 128)
    VENDOR_NAME = Field(0, 129, 16)
    VENDOR_OUI = Field(0, 145, 3)
    VENDOR_PN = Field(0, 148, 16)
    VENDOR_REV = Field(0, 164, 2)
    VENDOR_SN = Field(0, 166, 16)
    DATE_CODE = Field(0, 182, 8)
    CLEI = Field(0, 190, 10)
    POWER_CLASS = Field(0, 200)  # bits 7-5 = class - 1
    MAX_POWER = Field(0, 201)  # 0.25 W
    CABLE_LENGTH = Field(0, 202)
    CONNECTOR = Field(0, 203)
    MEDIA_INTERFACE_TECH = Field(0, 212)
    PAGE00_CHECKSUM = Field(0, 222)  # low byte of the sum of 128-221
    # page 01h (section 8.4)
    HW_REVISION = Field(1, 130, 2)
    LENGTH_SMF = Field(1, 132)
    NOMINAL_WAVELENGTH = Field(1, 138, 2)  # 0.05 nm
    WAVELENGTH_TOLERANCE = Field(1, 140, 2)  # 0.005 nm
    PAGES_SUPPORTED = Field(1, 142)  # bits 1-0 banks (00 = bank 0 only)
    DIAG_TYPE = Field(1, 151)
    RX_POWER_AVERAGE = 0x10  # byte 151 bit 4: RX power is average (0 = OMA)
    CONTROLS_SUPPORTED = Field(1, 155)
    TX_DISABLE_SUPPORTED = 0x02  # byte 155 bit 1
    TX_FLAGS_SUPPORTED = Field(1, 157)
    TX_FAULT_SUPPORTED = 0x01  # byte 157 bit 0
    RX_FLAGS_SUPPORTED = Field(1, 158)
    RX_LOS_SUPPORTED = 0x02  # byte 158 bit 1
    MODULE_MONITORS_SUPPORTED = Field(1, 159)
    TEMP_MON_SUPPORTED, VCC_MON_SUPPORTED = 0x01, 0x02  # byte 159 bits 0, 1
    LANE_MONITORS_SUPPORTED = Field(1, 160)
    TX_BIAS_MON_SUPPORTED, TX_POWER_MON_SUPPORTED, RX_POWER_MON_SUPPORTED = 0x01, 0x02, 0x04
    BIAS_SCALE_SHIFT, BIAS_SCALE_MASK = 3, 0x18  # byte 160 bits 4-3: x1, x2, x4, reserved
    BIAS_MULTIPLIERS = MappingProxyType({0: 1, 1: 2, 2: 4})
    MEDIA_LANE_ASSIGNMENT = Field(1, 176, 15)  # one byte per application
    PAGE01_CHECKSUM = Field(1, 255)  # low byte of the sum of 130-254
    PAGE01_CHECKSUM_START = 130
    # page 02h thresholds (section 8.5): high alarm, low alarm, high warning, low warning
    THRESHOLDS = MappingProxyType({
        "temperature_c": Field(2, 128, 8), "vcc_v": Field(2, 136, 8), "tx_power_mw": Field(2, 176, 8),
        "tx_bias_ma": Field(2, 184, 8), "rx_power_mw": Field(2, 192, 8)})
    PAGE02_CHECKSUM = Field(2, 255)  # low byte of the sum of 128-254
    # page 10h lane controls (section 8.8)
    DATA_PATH_DEINIT = Field(0x10, 128)  # bit per lane: 1 = deinitialise the data path
    TX_DISABLE = Field(0x10, 130)  # bit per lane
    # page 11h lane status (section 8.9)
    DATA_PATH_STATE = Field(0x11, 128, 4)  # 4 bits per lane, lane 1 in the low nibble of 128
    TX_FAULT = Field(0x11, 135)
    TX_LOS = Field(0x11, 136)
    RX_LOS = Field(0x11, 147)  # latched
    TX_POWER = Field(0x11, 154, 16)
    TX_BIAS = Field(0x11, 170, 16)
    RX_POWER = Field(0x11, 186, 16)
    ACTIVE_APSEL = Field(0x11, 206, 8)  # bits 7-4 = ApSel code of the lane's active application
    APSEL_SHIFT = 4


class ModuleState(IntEnum):
    """CMIS ModuleState codes (lower byte 3 bits 3-1)."""

    MODULE_LOW_PWR = 1
    MODULE_PWR_UP = 2
    MODULE_READY = 3
    MODULE_PWR_DN = 4
    MODULE_FAULT = 5


class DataPathState(IntEnum):
    """CMIS DPState codes (page 11h bytes 128-131, one nibble per lane)."""

    DP_DEACTIVATED = 1
    DP_INIT = 2
    DP_DEINIT = 3
    DP_ACTIVATED = 4
    DP_TX_TURN_ON = 5
    DP_TX_TURN_OFF = 6
    DP_INITIALIZED = 7


STATE_NAMES = {ModuleState.MODULE_LOW_PWR: "ModuleLowPwr", ModuleState.MODULE_PWR_UP: "ModulePwrUp",
               ModuleState.MODULE_READY: "ModuleReady", ModuleState.MODULE_PWR_DN: "ModulePwrDn",
               ModuleState.MODULE_FAULT: "ModuleFault"}
DP_STATE_NAMES = {DataPathState.DP_DEACTIVATED: "DPDeactivated", DataPathState.DP_INIT: "DPInit",
                  DataPathState.DP_DEINIT: "DPDeinit", DataPathState.DP_ACTIVATED: "DPActivated",
                  DataPathState.DP_TX_TURN_ON: "DPTxTurnOn", DataPathState.DP_TX_TURN_OFF: "DPTxTurnOff",
                  DataPathState.DP_INITIALIZED: "DPInitialized"}

THRESHOLD_ORDER = ("high_alarm", "low_alarm", "high_warning", "low_warning")  # on-the-wire order, both specs
SPECS: dict[int, tuple[str, type[Sff8636] | type[Cmis]]] = {
    0x0D: ("QSFP+", Sff8636), 0x11: ("QSFP28", Sff8636), 0x18: ("QSFP-DD", Cmis),
    0x19: ("OSFP", Cmis), 0x1E: ("QSFP+ CMIS", Cmis)}  # SFF-8024 Table 4-1 identifiers


def checksum(data: bytes | bytearray) -> int:
    """Low 8 bits of the byte sum (SFF-8636 CC_BASE/CC_EXT, CMIS page checksums)."""
    return sum(data) & 0xFF
