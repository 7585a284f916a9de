"""Transceiver management over I2C: SFF-8636 (QSFP28) and CMIS (QSFP-DD/OSFP) pages.

A :class:`TransceiverModule` reads the module's identifier byte to pick its memory map
and decodes digital diagnostics (DOM): temperature, Vcc, per-lane TX/RX power, TX bias,
RX LOS, TX disable. It talks through any :class:`I2CBus` -- :class:`SMBusI2C` (Linux
``/dev/i2c-N`` via smbus2), :class:`SerialI2CBridge` (an ASCII USB-I2C bridge), or the
simulated EEPROMs of :mod:`instruments.sim.transceivers`.

Units on the wire (both specs): temperature int16 1/256 degC; Vcc uint16 100 uV; power
uint16 0.1 uW; bias uint16 2 uA. All multi-byte values are big-endian.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from instruments.base import Instrument, check_range
from instruments.errors import DeviceError, GarbledReplyError, InstrumentError
from instruments.transport import Transport

MODULE_ADDRESS = 0x50  # A0h, 7-bit
PAGE_SELECT = 127


@runtime_checkable
class I2CBus(Protocol):
    """Byte access to a device on an I2C bus (7-bit addresses, 8-bit offsets)."""

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Read ``length`` bytes starting at ``offset``."""
        ...

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write ``data`` starting at ``offset``."""
        ...

    def close(self) -> None:
        """Release the bus."""
        ...


class SMBusI2C:
    """Linux I2C adapter through smbus2 (combined write-offset/read transactions)."""

    def __init__(self, bus: int | str) -> None:
        from smbus2 import SMBus

        try:
            self._bus = SMBus(bus)
        except OSError as exc:
            raise InstrumentError(f"cannot open I2C bus {bus!r}: {exc}; load i2c-dev and check "
                                  "permissions on /dev/i2c-*") from exc

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Write the offset, then read ``length`` bytes (repeated start)."""
        from smbus2 import i2c_msg

        w, r = i2c_msg.write(address, [offset]), i2c_msg.read(address, length)
        self._bus.i2c_rdwr(w, r)
        return bytes(r)

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write ``offset`` followed by ``data`` in one transaction."""
        from smbus2 import i2c_msg

        self._bus.i2c_rdwr(i2c_msg.write(address, [offset, *data]))

    def close(self) -> None:
        """Close the adapter."""
        self._bus.close()


class SerialI2CBridge(Instrument):
    """ASCII USB-I2C bridge: ``r<addr>,<off>,<n>`` -> hex bytes; ``w<addr>,<off>,<hex>`` -> ``OK``.

    Addresses and offsets are two hex digits; errors come back as ``E<code>``.
    """

    def __init__(self, transport: Transport, *, retries: int = 2, name: str = "i2c_bridge") -> None:
        super().__init__(transport, name=name, retries=retries)

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Read bytes through the bridge."""

        def parse(cmd: str, reply: str) -> bytes:
            if reply.startswith("E"):
                raise DeviceError(f"{self.name}: {cmd!r} failed ({reply}); is the module seated?")
            try:
                data = bytes.fromhex(reply)
            except ValueError as exc:
                raise GarbledReplyError(f"{self.name}: {cmd!r} gave {reply!r}") from exc
            if len(data) != length:
                raise GarbledReplyError(f"{self.name}: {cmd!r} gave {len(data)} bytes, wanted {length}")
            return data

        return self.ask(f"r{address:02x},{offset:02x},{length:02x}", parse)

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write bytes through the bridge."""

        def ok(cmd: str, reply: str) -> None:
            if reply != "OK":
                raise DeviceError(f"{self.name}: {cmd!r} failed ({reply}); is the module seated?")

        self.ask(f"w{address:02x},{offset:02x},{data.hex()}", ok)


@dataclass(frozen=True)
class MemoryMap:
    """Where a management spec keeps each field: (page, offset); page None = lower page."""

    name: str
    lanes: int
    temperature: tuple[int | None, int]
    vcc: tuple[int | None, int]
    tx_power: tuple[int | None, int]
    tx_bias: tuple[int | None, int]
    rx_power: tuple[int | None, int]
    rx_los: tuple[int | None, int]
    tx_disable: tuple[int | None, int]
    vendor_name: tuple[int | None, int]
    part_number: tuple[int | None, int]


SFF8636 = MemoryMap("SFF-8636", 4, temperature=(None, 22), vcc=(None, 26), rx_power=(None, 34),
                    tx_bias=(None, 42), tx_power=(None, 50), rx_los=(None, 3), tx_disable=(None, 86),
                    vendor_name=(0, 148), part_number=(0, 168))
CMIS = MemoryMap("CMIS", 8, temperature=(None, 14), vcc=(None, 16), tx_power=(0x11, 154),
                 tx_bias=(0x11, 170), rx_power=(0x11, 186), rx_los=(0x11, 147), tx_disable=(0x10, 130),
                 vendor_name=(0, 129), part_number=(0, 148))
IDENTIFIERS = {0x0D: ("QSFP+", SFF8636), 0x11: ("QSFP28", SFF8636), 0x18: ("QSFP-DD", CMIS),
               0x19: ("OSFP", CMIS), 0x1E: ("QSFP+ CMIS", CMIS)}


def _mw_to_dbm(mw: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.maximum(mw, 1e-7))


class TransceiverModule:
    """One pluggable module's management interface.

    Args:
        bus: the I2C bus the module sits on.
        address: 7-bit address (0x50).
        name: for messages.
    """

    def __init__(self, bus: I2CBus, *, address: int = MODULE_ADDRESS, name: str = "transceiver") -> None:
        self.bus = bus
        self.address = address
        self.name = name
        self.lock = threading.RLock()
        self.identifier = self._read(None, 0, 1)[0]
        if self.identifier not in IDENTIFIERS:
            raise InstrumentError(f"{name}: identifier byte 0x{self.identifier:02x} is neither SFF-8636 "
                                  "nor CMIS; check the module type and the I2C address")
        self.form_factor, self.map = IDENTIFIERS[self.identifier]
        self._page: int | None = None

    def _read(self, page: int | None, offset: int, length: int) -> bytes:
        with self.lock:
            if page is not None:
                self._select(page)
            return self.bus.read(self.address, offset, length)

    def _write(self, page: int | None, offset: int, data: bytes) -> None:
        with self.lock:
            if page is not None:
                self._select(page)
            self.bus.write(self.address, offset, data)

    def _select(self, page: int) -> None:
        if getattr(self, "_page", None) != page:
            self.bus.write(self.address, PAGE_SELECT, bytes([page]))
            self._page = page

    def _words(self, where: tuple[int | None, int], n: int, signed: bool = False) -> np.ndarray:
        raw = self._read(where[0], where[1], 2 * n)
        return np.frombuffer(raw, dtype=">i2" if signed else ">u2").astype(float)

    def temperature_c(self) -> float:
        """Module temperature (degC)."""
        return float(self._words(self.map.temperature, 1, signed=True)[0] / 256)

    def vcc_v(self) -> float:
        """Supply voltage (V)."""
        return float(self._words(self.map.vcc, 1)[0] * 1e-4)

    def tx_power_dbm(self) -> np.ndarray:
        """Per-lane transmit power (dBm)."""
        return _mw_to_dbm(self._words(self.map.tx_power, self.map.lanes) * 1e-4)

    def rx_power_dbm(self) -> np.ndarray:
        """Per-lane received power (dBm)."""
        return _mw_to_dbm(self._words(self.map.rx_power, self.map.lanes) * 1e-4)

    def tx_bias_ma(self) -> np.ndarray:
        """Per-lane laser bias (mA)."""
        return self._words(self.map.tx_bias, self.map.lanes) * 2e-3

    def _bits(self, where: tuple[int | None, int]) -> np.ndarray:
        b = self._read(where[0], where[1], 1)[0]
        return np.array([(b >> k) & 1 for k in range(self.map.lanes)], dtype=bool)

    def rx_los(self) -> np.ndarray:
        """Per-lane RX loss-of-signal flag (latched in the module; reading clears on real parts)."""
        return self._bits(self.map.rx_los)

    def tx_disabled(self) -> np.ndarray:
        """Per-lane TX disable state."""
        return self._bits(self.map.tx_disable)

    def set_tx_disable(self, lane: int, disabled: bool) -> None:
        """Disable (True) or enable one lane's transmitter (lanes 0-based)."""
        k = int(check_range(lane, 0, self.map.lanes - 1, f"{self.name} lane", ""))
        with self.lock:
            page, off = self.map.tx_disable
            b = self._read(page, off, 1)[0]
            b = (b | (1 << k)) if disabled else (b & ~(1 << k))
            self._write(page, off, bytes([b]))

    def _text(self, where: tuple[int | None, int]) -> str:
        return self._read(where[0], where[1], 16).decode("ascii", "replace").strip()

    def dom(self) -> dict[str, Any]:
        """Digital diagnostics in one dict (units in the keys)."""
        return {
            "name": self.name, "spec": self.map.name, "form_factor": self.form_factor,
            "vendor": self._text(self.map.vendor_name), "part": self._text(self.map.part_number),
            "temperature_c": self.temperature_c(), "vcc_v": self.vcc_v(),
            "tx_power_dbm": self.tx_power_dbm().tolist(), "rx_power_dbm": self.rx_power_dbm().tolist(),
            "tx_bias_ma": self.tx_bias_ma().tolist(), "rx_los": self.rx_los().tolist(),
            "tx_disabled": self.tx_disabled().tolist(),
        }

    def close(self) -> None:
        """Close the bus."""
        self.bus.close()
