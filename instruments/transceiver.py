"""Transceiver management over I2C: SFF-8636 (QSFP28) and CMIS (QSFP-DD/OSFP) pages.

A :class:`TransceiverModule` reads the identifier byte to pick the memory map
(:mod:`instruments.xcvr_maps`) and then, like a standard host decoder (SONiC
``sonic_xcvr``, ethtool ``-m``), reports a value only when the module advertises it:

* a monitor or control the module does not advertise reads as ``None`` (never as a
  number the module never promised); writing an unadvertised control raises
  :class:`NotAdvertisedError`;
* every upper-page access first writes PageSelect (byte 127) and reads it back -- a module
  reset or another host may have left another page selected, and a module clears
  PageSelect when asked for a page it does not implement (:class:`PageSelectError`);
* lane monitors are live only when the module is ready (CMIS ModuleReady, SFF-8636
  Data_Not_Ready clear; otherwise :class:`ModuleNotReadyError`) and, per CMIS lane, when
  the data path is DPActivated; other lanes read as NaN;
* the CMIS TX bias multiplier (page 01h byte 160 bits 4-3) scales bias and its thresholds;
* TX disable is read-modify-written and verified by reading it back.

It talks through any :class:`I2CBus` (:mod:`instruments.xcvr_bus`). Sources for every
field: ``docs/protocol-transceivers.md``.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from instruments.base import check_range
from instruments.errors import InstrumentError
from instruments.xcvr_bus import I2CBus, SerialI2CBridge, SMBusI2C
from instruments.xcvr_maps import (
    BIAS_LSB_MA,
    DP_STATE_NAMES,
    MODULE_ADDRESS,
    PAGE_SELECT,
    POWER_LSB_MW,
    SPECS,
    STATE_NAMES,
    TEMPERATURE_LSB_C,
    THRESHOLD_ORDER,
    VCC_LSB_V,
    Cmis,
    DataPathState,
    Field,
    ModuleState,
    Sff8636,
)

__all__ = ["CMIS", "IDENTIFIERS", "MODULE_ADDRESS", "PAGE_SELECT", "SFF8636", "Advertisement", "I2CBus",
           "ModuleNotReadyError", "NotAdvertisedError", "PageSelectError", "ReadbackError", "SMBusI2C",
           "SerialI2CBridge", "Threshold", "TransceiverError", "TransceiverModule"]

SFF8636, CMIS = Sff8636, Cmis  # the memory maps (stable public names)
IDENTIFIERS = SPECS
POWER_FLOOR_MW = 1e-7  # dBm readings are floored at -70 dBm (a 0 reading means < 0.05 uW)
MODULE_READY_NAME = "ModuleReady"
SFF_DATA_NOT_READY_NAME = "DataNotReady"
THRESHOLD_LSB = {"temperature_c": TEMPERATURE_LSB_C, "vcc_v": VCC_LSB_V, "tx_bias_ma": BIAS_LSB_MA,
                 "tx_power_mw": POWER_LSB_MW, "rx_power_mw": POWER_LSB_MW}  # wire unit of each threshold


class TransceiverError(InstrumentError):
    """The module refused or cannot give what was asked."""


class ModuleNotReadyError(TransceiverError):
    """Lane monitors asked of a module that is not ready (they would not be live values)."""


class PageSelectError(TransceiverError):
    """The module did not map the page we selected (it does not implement it)."""


class NotAdvertisedError(TransceiverError):
    """A control the module does not advertise was asked for."""


class ReadbackError(TransceiverError):
    """A control byte read back differently from what was written."""


@dataclass(frozen=True)
class Advertisement:
    """What the module says it implements (the bits a host decoder checks)."""

    paged: bool
    temperature: bool
    vcc: bool
    tx_power: bool
    rx_power: bool
    tx_bias: bool
    rx_los: bool
    tx_disable: bool
    thresholds: bool
    bias_multiplier: int | None
    rx_power_type: str  # "average" or "OMA"


@dataclass(frozen=True)
class Threshold:
    """Alarm and warning thresholds of one quantity, in its unit."""

    high_alarm: float
    low_alarm: float
    high_warning: float
    low_warning: float


NOTHING = Advertisement(False, False, False, False, False, False, False, False, False, None, "OMA")


def _mw_to_dbm(mw: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.maximum(mw, POWER_FLOOR_MW))


def _dp_name(code: int) -> str:
    try:
        return DP_STATE_NAMES[DataPathState(code)]
    except ValueError:
        return f"reserved({code})"


def _bit(byte: int, mask: int) -> bool:
    return bool(byte & mask)


class TransceiverModule:
    """One pluggable module's management interface.

    Args:
        bus: the I2C bus the module sits on.
        address: 7-bit address (0x50).
        name: for messages.
        monitor_period_s: how often the module samples its monitors (s), from its datasheet;
            None when not declared (:mod:`instruments.light_meter` then assumes the slowest).
    """

    def __init__(self, bus: I2CBus, *, address: int = MODULE_ADDRESS, name: str = "transceiver",
                 monitor_period_s: float | None = None) -> None:
        self.bus = bus
        self.address = address
        self.name = name
        self.monitor_period_s = monitor_period_s
        self.lock = threading.RLock()
        self.identifier = self._read(Field(None, 0))[0]
        if self.identifier not in SPECS:
            raise InstrumentError(f"{name}: identifier byte 0x{self.identifier:02x} is neither SFF-8636 "
                                  "nor CMIS; check the module type and the I2C address")
        self.form_factor, self.map = SPECS[self.identifier]
        self.advertised = self.read_advertisement()

    # -- raw access ----------------------------------------------------------------------
    def _select(self, page: int) -> None:
        """Write PageSelect and verify it (another host or a reset may have moved it)."""
        self.bus.write(self.address, PAGE_SELECT, bytes([page]))
        now = self.bus.read(self.address, PAGE_SELECT, 1)[0]
        if now != page:
            raise PageSelectError(f"{self.name}: selected page {page:02X}h but PageSelect reads {now:02X}h; "
                                  "the module does not implement that page")

    def _read(self, f: Field) -> bytes:
        with self.lock:
            if f.page is not None:
                self._select(f.page)
            return self.bus.read(self.address, f.offset, f.size)

    def _write(self, f: Field, data: bytes) -> None:
        with self.lock:
            if f.page is not None:
                self._select(f.page)
            self.bus.write(self.address, f.offset, data)

    def _words(self, f: Field, signed: bool = False) -> np.ndarray:
        return np.frombuffer(self._read(f), dtype=">i2" if signed else ">u2").astype(float)

    def _byte(self, f: Field) -> int:
        return self._read(f)[0]

    # -- advertisement -------------------------------------------------------------------
    def read_advertisement(self) -> Advertisement:
        """Read the advertisement bits again (they are static; a new module may have been plugged)."""
        return self._sff_advertisement() if self.map is Sff8636 else self._cmis_advertisement()

    def _sff_advertisement(self) -> Advertisement:
        s = Sff8636
        status, revision = self._byte(s.STATUS), self._byte(s.REVISION_COMPLIANCE)
        upper = self._read(Field(0, s.OPTIONS.offset, s.ENHANCED_OPTIONS.offset - s.OPTIONS.offset))
        options, diag = upper[2], upper[s.DIAG_MONITORING_TYPE.offset - s.OPTIONS.offset]
        has_bits = revision >= s.REVISION_WITH_MONITOR_BITS  # before rev 2.8: assumed, as SONiC does
        paged = not _bit(status, s.FLAT_MEM)
        return Advertisement(
            paged=paged, temperature=not has_bits or _bit(diag, s.DIAG_TEMPERATURE),
            vcc=not has_bits or _bit(diag, s.DIAG_VCC), tx_power=_bit(diag, s.DIAG_TX_POWER),
            rx_power=True, tx_bias=True, rx_los=True,  # SFF-8636 has no bit for these
            tx_disable=_bit(options, s.OPTIONS_TX_DISABLE[1]), thresholds=paged, bias_multiplier=1,
            rx_power_type="average" if _bit(diag, s.DIAG_RX_POWER_AVERAGE) else "OMA")

    def _cmis_advertisement(self) -> Advertisement:
        c = Cmis
        if _bit(self._byte(c.MEMORY_MODEL), c.FLAT_MEMORY):
            return NOTHING  # flat memory: no page 01h, so nothing is advertised
        first = c.DIAG_TYPE.offset
        adv = self._read(Field(1, first, c.LANE_MONITORS_SUPPORTED.offset - first + 1))

        def at(f: Field) -> int:
            return adv[f.offset - first]

        lane, module = at(c.LANE_MONITORS_SUPPORTED), at(c.MODULE_MONITORS_SUPPORTED)
        return Advertisement(
            paged=True, temperature=_bit(module, c.TEMP_MON_SUPPORTED), vcc=_bit(module, c.VCC_MON_SUPPORTED),
            tx_power=_bit(lane, c.TX_POWER_MON_SUPPORTED), rx_power=_bit(lane, c.RX_POWER_MON_SUPPORTED),
            tx_bias=_bit(lane, c.TX_BIAS_MON_SUPPORTED),
            rx_los=_bit(at(c.RX_FLAGS_SUPPORTED), c.RX_LOS_SUPPORTED),
            tx_disable=_bit(at(c.CONTROLS_SUPPORTED), c.TX_DISABLE_SUPPORTED), thresholds=True,
            bias_multiplier=c.BIAS_MULTIPLIERS.get((lane & c.BIAS_SCALE_MASK) >> c.BIAS_SCALE_SHIFT),
            rx_power_type="average" if _bit(at(c.DIAG_TYPE), c.RX_POWER_AVERAGE) else "OMA")

    # -- identity ------------------------------------------------------------------------
    def _text(self, f: Field) -> str:
        return self._read(f).decode("ascii", "replace").strip()

    def identity(self) -> dict[str, str]:
        """Vendor name, OUI, part number, revision, serial number, date code (YYMMDD) and lot."""
        m = self.map
        date = self._text(m.DATE_CODE).ljust(8)
        return {"vendor": self._text(m.VENDOR_NAME), "oui": self._read(m.VENDOR_OUI).hex(":"),
                "part_number": self._text(m.VENDOR_PN), "revision": self._text(m.VENDOR_REV),
                "serial_number": self._text(m.VENDOR_SN), "date_code": date[:6], "lot": date[6:].strip()}

    def applications(self) -> list[dict[str, int]]:
        """CMIS application advertisement (lower bytes 86-117), up to the FFh terminator; [] for SFF-8636."""
        if self.map is not Cmis:
            return []
        raw, apps = self._read(Cmis.APPLICATIONS), []
        for k in range(0, len(raw), 4):
            host, media, counts, options = raw[k:k + 4]
            if host == Cmis.APPLICATION_END:
                break
            apps.append({"apsel": k // 4 + 1, "host_interface_id": host, "media_interface_id": media,
                         "host_lanes": counts >> 4, "media_lanes": counts & 0x0F,
                         "host_lane_options": options})
        return apps

    # -- states --------------------------------------------------------------------------
    def module_state(self) -> str:
        """CMIS ModuleState name; for SFF-8636 "ModuleReady" or "DataNotReady" (status byte 2 bit 0)."""
        if self.map is Sff8636:
            not_ready = _bit(self._byte(Sff8636.STATUS), Sff8636.DATA_NOT_READY)
            return SFF_DATA_NOT_READY_NAME if not_ready else MODULE_READY_NAME
        code = (self._byte(Cmis.MODULE_STATE) & Cmis.MODULE_STATE_MASK) >> Cmis.MODULE_STATE_SHIFT
        try:
            return STATE_NAMES[ModuleState(code)]
        except ValueError:
            return f"reserved({code})"

    def data_path_states(self) -> list[str] | None:
        """CMIS DPState name per lane (page 11h bytes 128-131); None for SFF-8636 (no data paths)."""
        if self.map is not Cmis:
            return None
        raw = self._read(Cmis.DATA_PATH_STATE)
        return [_dp_name(nibble) for b in raw for nibble in (b & 0x0F, b >> 4)]

    def _require_ready(self) -> None:
        state = self.module_state()
        if state != MODULE_READY_NAME:
            raise ModuleNotReadyError(f"{self.name}: module state is {state}, so lane monitors are not live; "
                                      "take the module out of low power (CMIS byte 26 bit 4) and wait for "
                                      "ModuleReady before reading them")

    def live_lanes(self) -> np.ndarray:
        """Lanes whose monitors are live: all (SFF-8636), or those whose data path is DPActivated (CMIS)."""
        states = self.data_path_states()
        if states is None:
            return np.ones(self.map.LANES, dtype=bool)
        return np.array([s == DP_STATE_NAMES[DataPathState.DP_ACTIVATED] for s in states])

    # -- monitors ------------------------------------------------------------------------
    def temperature_c(self) -> float | None:
        """Module temperature (degC); None when the module does not advertise the monitor."""
        if not self.advertised.temperature:
            return None
        if self.map is Sff8636:
            self._require_ready()
        return float(self._words(self.map.TEMPERATURE, signed=True)[0] * TEMPERATURE_LSB_C)

    def vcc_v(self) -> float | None:
        """Supply voltage (V); None when not advertised."""
        if not self.advertised.vcc:
            return None
        if self.map is Sff8636:
            self._require_ready()
        return float(self._words(self.map.SUPPLY_VOLTAGE)[0] * VCC_LSB_V)

    def _lanes(self, f: Field, lsb: float) -> np.ndarray:
        self._require_ready()
        live = self.live_lanes()
        values = self._words(f) * lsb
        values[~live] = np.nan
        return values

    def tx_power_dbm(self) -> np.ndarray | None:
        """Per-lane transmit power (dBm, floor -70); NaN for lanes not live; None when not advertised."""
        return _mw_to_dbm(self._lanes(self.map.TX_POWER, POWER_LSB_MW)) if self.advertised.tx_power else None

    def rx_power_dbm(self) -> np.ndarray | None:
        """Per-lane received power (dBm, floor -70; see ``advertised.rx_power_type``); NaN/None as above."""
        return _mw_to_dbm(self._lanes(self.map.RX_POWER, POWER_LSB_MW)) if self.advertised.rx_power else None

    def tx_bias_ma(self) -> np.ndarray | None:
        """Per-lane laser bias (mA, 2 uA x the CMIS multiplier); NaN for lanes not live; None when not
        advertised (or the multiplier code is reserved).
        """
        mult = self.advertised.bias_multiplier
        if not self.advertised.tx_bias or mult is None:
            return None
        return self._lanes(self.map.TX_BIAS, BIAS_LSB_MA * mult)

    def _lane_bits(self, f: Field) -> np.ndarray:
        b = self._byte(f)
        return np.array([(b >> k) & 1 for k in range(self.map.LANES)], dtype=bool)

    def _rx_los_field(self) -> Field:
        return Sff8636.LOS if self.map is Sff8636 else Cmis.RX_LOS

    def rx_los_latched(self) -> np.ndarray | None:
        """Per-lane RX LOS latched since the last read (reading clears it); None when not advertised."""
        return self._lane_bits(self._rx_los_field()) if self.advertised.rx_los else None

    def rx_los(self) -> np.ndarray | None:
        """Per-lane RX LOS now: the latched flags are read twice, the second read is the present state."""
        if not self.advertised.rx_los:
            return None
        with self.lock:
            self._lane_bits(self._rx_los_field())
            return self._lane_bits(self._rx_los_field())

    # -- TX disable ----------------------------------------------------------------------
    def tx_disabled(self) -> np.ndarray | None:
        """Per-lane TX disable state; None when the module does not advertise TX disable."""
        return self._lane_bits(self.map.TX_DISABLE) if self.advertised.tx_disable else None

    def set_tx_disable(self, lane: int, disabled: bool) -> None:
        """Disable (True) or enable one lane's transmitter (lanes 0-based), verified by readback."""
        k = int(check_range(lane, 0, self.map.LANES - 1, f"{self.name} lane", ""))
        if not self.advertised.tx_disable:
            raise NotAdvertisedError(f"{self.name}: the module does not advertise TX disable; "
                                     "use the host's TxDisable pin or another module")
        f = self.map.TX_DISABLE
        with self.lock:
            old = self._byte(f)
            new = (old | (1 << k)) if disabled else (old & ~(1 << k) & 0xFF)
            self._write(f, bytes([new]))
            back = self._byte(f)
        if back != new:
            raise ReadbackError(f"{self.name}: wrote TX disable 0x{new:02x}, read back 0x{back:02x}; "
                                "the lane's transmitter state is unknown -- read tx_disabled() before acting")

    # -- thresholds ----------------------------------------------------------------------
    def _threshold(self, quantity: str, f: Field) -> Threshold:
        scale = (self.advertised.bias_multiplier or 0) if quantity == "tx_bias_ma" else 1
        lsb = THRESHOLD_LSB[quantity] * scale
        values = self._words(f, signed=quantity == "temperature_c") * lsb
        if quantity.endswith("_mw"):
            values = _mw_to_dbm(values)
        return Threshold(**{k: float(v) for k, v in zip(THRESHOLD_ORDER, values, strict=True)})

    def thresholds(self) -> dict[str, Threshold | None] | None:
        """Alarm/warning thresholds: temperature_c, vcc_v, tx_power_dbm, tx_bias_ma, rx_power_dbm.

        None when the module has no threshold page (flat memory); a quantity whose monitor
        is not advertised maps to None.
        """
        if not self.advertised.thresholds:
            return None
        out: dict[str, Threshold | None] = {}
        for quantity, f in self.map.THRESHOLDS.items():
            monitor = quantity.rsplit("_", 1)[0]  # temperature_c -> temperature, rx_power_mw -> rx_power
            advertised = getattr(self.advertised, monitor) and (
                monitor != "tx_bias" or self.advertised.bias_multiplier is not None)
            out[quantity.replace("_mw", "_dbm")] = self._threshold(quantity, f) if advertised else None
        return out

    # -- summary -------------------------------------------------------------------------
    def _live_or_none(self, read: Any) -> list[float | None] | None:
        try:
            values = read()
        except ModuleNotReadyError:
            return None
        return None if values is None else [None if np.isnan(v) else float(v) for v in values]

    def dom(self) -> dict[str, Any]:
        """Identity, states and diagnostics as a JSON-able dict (units in the keys; None = not available)."""
        ident = self.identity()
        los = self.rx_los()
        return {
            "name": self.name, "spec": self.map.NAME, "form_factor": self.form_factor,
            "vendor": ident["vendor"], "part": ident["part_number"], "serial": ident["serial_number"],
            "module_state": self.module_state(), "data_path_state": self.data_path_states(),
            "temperature_c": self._scalar(self.temperature_c), "vcc_v": self._scalar(self.vcc_v),
            "tx_power_dbm": self._live_or_none(self.tx_power_dbm),
            "rx_power_dbm": self._live_or_none(self.rx_power_dbm),
            "tx_bias_ma": self._live_or_none(self.tx_bias_ma),
            "rx_los": None if los is None else los.tolist(),
            "tx_disabled": self._bools(self.tx_disabled()),
            "advertised": asdict(self.advertised),
        }

    @staticmethod
    def _scalar(read: Any) -> float | None:
        try:
            return read()
        except ModuleNotReadyError:
            return None

    @staticmethod
    def _bools(values: np.ndarray | None) -> list[bool] | None:
        return None if values is None else values.tolist()

    def close(self) -> None:
        """Close the bus."""
        self.bus.close()

