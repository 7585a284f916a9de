"""Simulated pluggable transceivers: EEPROM byte maps whose RX power follows the chip.

Each :class:`SimTransceiver` has a 128-byte lower page and 128-byte upper pages selected
by byte 127, laid out per SFF-8636 or CMIS (see :mod:`instruments.transceiver`). Its TX
lanes launch light into mesh ports, its RX lanes sit at mesh ports; before every read
the diagnostics are refreshed: RX power of a lane is the sum, over every enabled TX lane
of every transceiver on the bench, of its power times the chip's port-to-port power
transmission (circuit solve at ``wavelength_nm``). LOS asserts below ``los_dbm``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from instruments.sim.chip import Chip
from instruments.transceiver import CMIS, SFF8636, MemoryMap


class SimTransceiver:
    """One module's EEPROM.

    Args:
        kind: "sff8636" (QSFP28, 4 lanes) or "cmis" (QSFP-DD, 8 lanes).
        tx_ports, rx_ports: mesh port index per lane (None for an unconnected lane).
        tx_power_dbm: launch power per lane (dBm).
    """

    def __init__(self, name: str, kind: str, tx_ports: Sequence[int | None], rx_ports: Sequence[int | None],
                 *, tx_power_dbm: float = 1.0, temperature_c: float = 38.5, vcc_v: float = 3.29,
                 los_dbm: float = -20.0) -> None:
        if kind not in ("sff8636", "cmis"):
            raise ValueError(f"transceiver kind must be sff8636 or cmis, not {kind!r}")
        self.name, self.kind = name, kind
        self.map: MemoryMap = SFF8636 if kind == "sff8636" else CMIS
        n = self.map.lanes
        self.tx_ports = (list(tx_ports) + [None] * n)[:n]
        self.rx_ports = (list(rx_ports) + [None] * n)[:n]
        self.tx_power_mw = np.full(n, 10 ** (tx_power_dbm / 10))
        self.los_dbm = los_dbm
        self.lower = bytearray(128)
        self.pages: dict[int, bytearray] = {p: bytearray(128) for p in (0, 0x10, 0x11)}
        self.lock = threading.Lock()
        self.bench: TransceiverBench | None = None
        self.lower[0] = 0x11 if kind == "sff8636" else 0x18
        self.lower[1] = 0x08 if kind == "sff8636" else 0x50  # SFF-8636 rev 2.10 / CMIS 5.0
        self._put(self.map.temperature, np.array([temperature_c * 256]), signed=True)
        self._put(self.map.vcc, np.array([vcc_v * 1e4]))
        self._text(self.map.vendor_name, "LUMION SIM")
        self._text(self.map.part_number, f"SIM-{kind.upper()}")

    # -- raw bytes ----------------------------------------------------------------------
    def _area(self, page: int | None) -> bytearray:
        return self.lower if page is None else self.pages.setdefault(page, bytearray(128))

    def _slice(self, where: tuple[int | None, int]) -> tuple[bytearray, int]:
        page, off = where
        return (self.lower, off) if page is None else (self._area(page), off - 128)

    def _put(self, where: tuple[int | None, int], values: np.ndarray, signed: bool = False) -> None:
        area, off = self._slice(where)
        dtype = ">i2" if signed else ">u2"
        lo, hi = (-32768, 32767) if signed else (0, 65535)
        data = np.clip(np.round(values), lo, hi).astype(dtype).tobytes()
        area[off:off + len(data)] = data

    def _text(self, where: tuple[int | None, int], text: str) -> None:
        area, off = self._slice(where)
        area[off:off + 16] = text.ljust(16)[:16].encode("ascii")

    def _bits(self, where: tuple[int | None, int]) -> int:
        area, off = self._slice(where)
        return area[off]

    def tx_enabled(self) -> np.ndarray:
        """Lanes whose transmitter is on."""
        b = self._bits(self.map.tx_disable)
        return np.array([not (b >> k) & 1 for k in range(self.map.lanes)])

    def read(self, offset: int, length: int) -> bytes:
        """I2C read: lower page below 128, the selected upper page above."""
        if self.bench is not None:
            self.bench.refresh()
        with self.lock:
            page = self.lower[127]
            out = bytearray()
            for a in (x & 0xFF for x in range(offset, offset + length)):
                out.append(self.lower[a] if a < 128 else self._area(page)[a - 128])
            return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        """I2C write (page select, TX disable, ...)."""
        with self.lock:
            page = self.lower[127]
            for k, b in enumerate(data):
                a = (offset + k) & 0xFF
                if a < 128:
                    self.lower[a] = b
                    if a == 127:
                        page = b
                else:
                    self._area(page)[a - 128] = b

    def set_monitors(self, rx_mw: np.ndarray) -> None:
        """Write TX/RX power, bias and LOS from the optical state."""
        with self.lock:
            on = self.tx_enabled()
            self._put(self.map.tx_power, np.where(on, self.tx_power_mw, 0.0) * 1e4)
            self._put(self.map.tx_bias, np.where(on, 7.5, 0.0) / 2e-3)
            self._put(self.map.rx_power, rx_mw * 1e4)
            los = 10 * np.log10(np.maximum(rx_mw, 1e-12)) < self.los_dbm
            area, off = self._slice(self.map.rx_los)
            area[off] = sum(1 << k for k in range(self.map.lanes) if los[k])


class TransceiverBench:
    """Every simulated transceiver on one chip; RX power follows routed light."""

    def __init__(self, chip: Chip, transceivers: Sequence[SimTransceiver], wavelength_nm: float = 1550.0,
                 ) -> None:
        self.chip = chip
        self.transceivers = {t.name: t for t in transceivers}
        self.wavelength_nm = wavelength_nm
        for t in transceivers:
            t.bench = self
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Recompute every module's monitors from the chip's current state."""
        with self._lock:
            n_ports = self.chip.mesh.n_ports
            arriving = np.zeros(n_ports)
            for t in self.transceivers.values():
                for lane, port in enumerate(t.tx_ports):
                    if port is not None and t.tx_enabled()[lane]:
                        arriving += self.chip.output_power_mw(port, self.wavelength_nm, t.tx_power_mw[lane])
            for t in self.transceivers.values():
                rx = np.array([arriving[p] if p is not None else 0.0 for p in t.rx_ports])
                t.set_monitors(rx)


class SimI2CBus:
    """An I2C bus with one simulated module at ``address`` (each cage on its own mux channel)."""

    def __init__(self, module: SimTransceiver, address: int = 0x50) -> None:
        self.module, self.address = module, address

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Read from the module (NACK -> OSError for any other address)."""
        if address != self.address:
            raise OSError(121, "Remote I/O error (no device at this address)")
        return self.module.read(offset, length)

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write to the module."""
        if address != self.address:
            raise OSError(121, "Remote I/O error (no device at this address)")
        self.module.write(offset, data)

    def close(self) -> None:
        """Nothing to release."""


class BridgeDeviceSim:
    """Firmware of an ASCII USB-I2C bridge (see :class:`instruments.transceiver.SerialI2CBridge`)."""

    def __init__(self, bus: SimI2CBus) -> None:
        self.bus = bus

    def handle(self, line: str) -> str:
        """``r<addr>,<off>,<n>`` -> hex; ``w<addr>,<off>,<hex>`` -> OK; ``E1`` NACK, ``E2`` syntax."""
        try:
            op, args = line.strip()[0], line.strip()[1:].split(",")
            addr, off = int(args[0], 16), int(args[1], 16)
            if op == "r":
                return self.bus.read(addr, off, int(args[2], 16)).hex()
            if op == "w":
                self.bus.write(addr, off, bytes.fromhex(args[2]))
                return "OK"
        except OSError:
            return "E1"
        except (IndexError, ValueError):
            return "E2"
        return "E2"
