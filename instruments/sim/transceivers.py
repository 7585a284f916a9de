"""Simulated pluggable transceivers: EEPROM byte maps whose RX power follows the chip.

Each :class:`SimTransceiver` is a paged SFF-8636 (QSFP28) or CMIS 5.0 (QSFP-DD) memory
whose static bytes come from :mod:`instruments.sim.xcvr_images` and whose live bytes are
kept here, per the specs (sources in ``docs/protocol-transceivers.md``):

* byte 127 selects the upper page; selecting a page the module does not implement
  clears PageSelect to 00h (CMIS 5.2 8.22, PageSelect: "the module may clear the PageSelect to
  prevent mapping an unsupported page"; we apply the same rule to SFF-8636), and a
  non-zero CMIS BankSelect is cleared the same way (we implement bank 0 only);
* host writes reach only the bytes the specs make writable (TX disable, page/bank select,
  CMIS LowPwrRequestSW and page 10h); writes elsewhere are ignored, as a module does;
* LOS and TX-fault flags are latched: set while the condition holds, cleared by the
  host's read of the flag byte;
* CMIS: LowPwrRequestSW (byte 26 bit 4) puts the module in ModuleLowPwr with every data
  path DPDeactivated; DataPathDeinit (page 10h byte 128) deactivates single lanes.
  Transitions are immediate (the transient states ModulePwrUp/DPInit are skipped).

Optics: TX lanes launch light into mesh ports, RX lanes sit at mesh ports; before every
read the monitors are refreshed: RX power of a lane is the sum, over every transmitting
lane of every transceiver on the bench, of its power times the chip's port-to-port power
transmission (circuit solve at ``wavelength_nm``). A lane transmits when its TX is not
disabled and (CMIS) its data path is DPActivated. LOS asserts below ``los_dbm``.

Monitor refresh: a real module samples its monitors periodically, not at each host read
(SFF-8636 and CMIS leave the rate to the vendor; module datasheets give "every few ms" to
~100 ms, e.g. the 100 ms worst case this package assumes in
:data:`instruments.light_meter.DOM_REFRESH_WAIT_S`). ``monitor_period_s`` > 0 models that:
the monitors are recomputed only when a read falls in a new sample period of the chip's
clock (samples at multiples of the period: deterministic for a given clock), so a read right
after a TX disable still returns the lit value. 0 (the default) refreshes on every read.

Faults: :meth:`SimTransceiver.kill_tx` makes a lane's laser stop emitting, as when the
accelerator behind the module dies (the host is gone, nobody sets TX disable or reads the
TX-fault flag, so neither changes); :meth:`SimTransceiver.revive_tx` undoes it. The
module's management interface keeps answering (it is read by the bench's I2C, not by the
dead host), so the dead lane's own TX power and bias monitors read 0.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from instruments.sim.chip import Chip
from instruments.sim.xcvr_images import APP_CAUI4_PSM4, ModuleImage, cmis_image, sff8636_image, words
from instruments.xcvr_maps import (
    BIAS_LSB_MA,
    PAGE_SELECT,
    POWER_LSB_MW,
    TEMPERATURE_LSB_C,
    UPPER_START,
    VCC_LSB_V,
    Cmis,
    DataPathState,
    Field,
    ModuleState,
    Sff8636,
)
from photonics.physics import PhysicsDefaults

OPERATING_BIAS_MA = 7.5  # laser bias of a transmitting lane
CMIS_LANES_PER_APP = 4  # our default application (CAUI-4 / PSM4) uses 4 lanes from lane 1 or 5


class SimTransceiver:
    """One module's management memory.

    Args:
        kind: "sff8636" (QSFP28, 4 lanes) or "cmis" (QSFP-DD, 8 lanes).
        tx_ports: mesh port index per TX lane (None for an unconnected lane).
        rx_ports: mesh port index per RX lane (None for an unconnected lane).
        tx_power_dbm: launch power per lane (dBm).
        temperature_c: module temperature monitor (degC).
        vcc_v: module supply monitor (V).
        los_dbm: RX LOS threshold (dBm).
        bias_multiplier: CMIS TX bias scale (1, 2, 4).
        unsupported: monitors/controls the module does not advertise (their bytes stay 0).
    """

    def __init__(self, name: str, kind: str, tx_ports: Sequence[int | None], rx_ports: Sequence[int | None],
                 *, tx_power_dbm: float = 1.0, temperature_c: float = 38.5, vcc_v: float = 3.29,
                 los_dbm: float = -20.0, bias_multiplier: int = 1, unsupported: Iterable[str] = (),
                 monitor_period_s: float = 0.0) -> None:
        if kind not in ("sff8636", "cmis"):
            raise ValueError(f"transceiver kind must be sff8636 or cmis, not {kind!r}")
        self.name, self.kind = name, kind
        self.spec: type[Sff8636] | type[Cmis] = Sff8636 if kind == "sff8636" else Cmis
        n = self.spec.LANES
        self.tx_ports = (list(tx_ports) + [None] * n)[:n]
        self.rx_ports = (list(rx_ports) + [None] * n)[:n]
        self.tx_power_mw = np.full(n, 10 ** (tx_power_dbm / 10))
        self.los_dbm = los_dbm
        self.unsupported = frozenset(unsupported)
        self.bias_multiplier = bias_multiplier if kind == "cmis" else 1
        serial = f"SIM{name.upper()}"[:16]
        self.image: ModuleImage = (sff8636_image(serial, self.unsupported) if kind == "sff8636"
                                   else cmis_image(serial, self.unsupported, bias_multiplier))
        self.lock = threading.RLock()
        self.bench: TransceiverBench | None = None
        self.dead_tx: set[int] = set()  # lanes whose laser stopped (kill_tx), 0-based
        self.monitor_period_s = float(monitor_period_s)
        self._sample: int | None = None  # the sample period (of the chip's clock) last taken
        self._module_monitors(temperature_c, vcc_v)
        if kind == "cmis":
            self._configure_lanes()
        self.update_states()

    # -- convenient views ----------------------------------------------------------------
    @property
    def lower(self) -> bytearray:
        """Lower memory (bytes 0-127)."""
        return self.image.lower

    @property
    def pages(self) -> dict[int, bytearray]:
        """Implemented upper pages (offset 0 = byte 128)."""
        return self.image.pages

    def _supports(self, what: str) -> bool:
        return what not in self.unsupported

    def _module_monitors(self, temperature_c: float, vcc_v: float) -> None:
        s = self.spec
        temp = temperature_c if self._supports("temperature") else 0.0
        self.image.put(s.TEMPERATURE, words([temp], TEMPERATURE_LSB_C, signed=True))
        self.image.put(s.SUPPLY_VOLTAGE, words([vcc_v if self._supports("vcc") else 0.0], VCC_LSB_V))

    def _configure_lanes(self) -> None:
        """Run our CAUI-4 application on lanes 1-4, and on 5-8 too when any of those is wired."""
        apsel = bytearray(Cmis.LANES)
        for first in range(0, Cmis.LANES, CMIS_LANES_PER_APP):
            lanes = range(first, first + CMIS_LANES_PER_APP)
            wired = any(self.tx_ports[k] is not None or self.rx_ports[k] is not None for k in lanes)
            if first == 0 or wired:
                for k in lanes:
                    apsel[k] = APP_CAUI4_PSM4 << Cmis.APSEL_SHIFT
        self.image.put(Cmis.ACTIVE_APSEL, apsel)

    # -- states (CMIS) -------------------------------------------------------------------
    def module_state(self) -> ModuleState:
        """CMIS ModuleState the module is in (SFF-8636 modules are always ready)."""
        if self.kind != "cmis":
            return ModuleState.MODULE_READY
        low_power = self.image.get(Cmis.MODULE_GLOBAL_CONTROLS)[0] & Cmis.LOW_PWR_REQUEST_SW
        return ModuleState.MODULE_LOW_PWR if low_power else ModuleState.MODULE_READY

    def lane_activated(self) -> np.ndarray:
        """Per lane: data path DPActivated (always True on SFF-8636, which has no data-path states)."""
        n = self.spec.LANES
        if self.kind != "cmis":
            return np.ones(n, dtype=bool)
        ready = self.module_state() == ModuleState.MODULE_READY
        apsel = self.image.get(Cmis.ACTIVE_APSEL)
        deinit = self.image.get(Cmis.DATA_PATH_DEINIT)[0]
        return np.array([ready and apsel[k] >> Cmis.APSEL_SHIFT != 0 and not (deinit >> k) & 1
                         for k in range(n)])

    def update_states(self) -> None:
        """Write ModuleState and the per-lane DPState from the host's controls."""
        if self.kind != "cmis":
            return
        state = self.module_state()
        self.image.put(Cmis.MODULE_STATE, [(state << Cmis.MODULE_STATE_SHIFT) | Cmis.INTERRUPT_DEASSERTED])
        codes = [DataPathState.DP_ACTIVATED if on else DataPathState.DP_DEACTIVATED
                 for on in self.lane_activated()]
        packed = bytes(codes[k] | codes[k + 1] << 4 for k in range(0, len(codes), 2))  # lane 1 = low nibble
        self.image.put(Cmis.DATA_PATH_STATE, packed)

    def tx_enabled(self) -> np.ndarray:
        """Lanes whose transmitter emits light."""
        disabled = self.image.get(self.spec.TX_DISABLE)[0] if self._supports("tx_disable") else 0
        on = np.array([not (disabled >> k) & 1 and k not in self.dead_tx for k in range(self.spec.LANES)])
        return on & self.lane_activated()

    # -- faults --------------------------------------------------------------------------
    def _check_lane(self, lane: int) -> int:
        k = int(lane)
        if not 0 <= k < self.spec.LANES:
            raise ValueError(f"{self.name}: lane {lane} is not a lane of a {self.spec.LANES}-lane module "
                             f"(0..{self.spec.LANES - 1})")
        return k

    def kill_tx(self, lane: int) -> None:
        """Stop the laser of ``lane`` (0-based) emitting, as a dead accelerator's does."""
        with self.lock:
            self.dead_tx.add(self._check_lane(lane))

    def revive_tx(self, lane: int) -> None:
        """Let ``lane``'s laser emit again (undo :meth:`kill_tx`)."""
        with self.lock:
            self.dead_tx.discard(self._check_lane(lane))

    # -- I2C -----------------------------------------------------------------------------
    def _locate(self, address: int, page: int) -> tuple[bytearray, int]:
        return (self.image.lower, address) if address < UPPER_START else (self.image.pages[page],
                                                                          address - UPPER_START)

    def _latched(self, page: int) -> set[int]:
        """Addresses of latched (clear-on-read) flag bytes visible with ``page`` selected."""
        s = self.spec
        if s is Sff8636:
            return {Sff8636.LOS.offset, Sff8636.TX_FAULT.offset}
        return {Cmis.RX_LOS.offset, Cmis.TX_FAULT.offset} if page == Cmis.RX_LOS.page else set()

    def read(self, offset: int, length: int) -> bytes:
        """I2C read: lower memory below 128, the selected page above; latched flags clear."""
        if self.bench is not None:
            if self._sample_due():
                self.bench.refresh(self)  # this module's monitors; the others refresh when read
        else:
            self.set_monitors(np.zeros(self.spec.LANES))  # alone on the bench: no light arrives
        with self.lock:
            page = self.image.lower[PAGE_SELECT]
            addresses = [x & 0xFF for x in range(offset, offset + length)]
            out = bytes(area[i] for area, i in (self._locate(a, page) for a in addresses))
            for a in set(addresses) & self._latched(page):
                area, i = self._locate(a, page)
                area[i] = 0
            return out

    def _sample_due(self) -> bool:
        """Whether this read falls in a new monitor sample period (always with no period)."""
        if self.monitor_period_s <= 0 or self.bench is None:
            return True
        sample = int(self.bench.chip.now_s() // self.monitor_period_s)
        with self.lock:
            due, self._sample = sample != self._sample, sample
        return due

    def _writable(self, address: int, page: int) -> bool:
        if address < UPPER_START:
            tx_disable = self.spec.TX_DISABLE
            if tx_disable.page is None and address == tx_disable.offset:
                return self._supports("tx_disable")
            return address in self.spec.WRITABLE_LOWER
        if self.spec is Cmis and page == Cmis.TX_DISABLE.page:
            return address != Cmis.TX_DISABLE.offset or self._supports("tx_disable")
        return False

    def _store(self, address: int, value: int, page: int) -> int:
        """Store one written byte; returns the page selected afterwards."""
        if not self._writable(address, page):
            return page
        if address == PAGE_SELECT:
            value = value if value in self.image.pages else 0
            page = value
        elif self.spec is Cmis and address == Cmis.BANK_SELECT.offset:
            value = 0
        area, i = self._locate(address, page)
        area[i] = value
        return page

    def write(self, offset: int, data: bytes) -> None:
        """I2C write (page select, TX disable, controls); read-only bytes ignore writes."""
        with self.lock:
            page = self.image.lower[PAGE_SELECT]
            for k, b in enumerate(data):
                page = self._store((offset + k) & 0xFF, b, page)
            self.update_states()

    # -- monitors ------------------------------------------------------------------------
    def _lane_words(self, f: Field, values: np.ndarray, lsb: float, what: str) -> None:
        self.image.put(f, words(values if self._supports(what) else np.zeros_like(values), lsb))

    def set_monitors(self, rx_mw: np.ndarray) -> None:
        """Write TX/RX power, bias and (latched) LOS from the optical state."""
        s = self.spec
        with self.lock:
            on, live = self.tx_enabled(), self.lane_activated()
            bias_lsb = BIAS_LSB_MA * self.bias_multiplier
            self._lane_words(s.TX_POWER, np.where(on, self.tx_power_mw, 0.0), POWER_LSB_MW, "tx_power")
            self._lane_words(s.TX_BIAS, np.where(on, OPERATING_BIAS_MA, 0.0), bias_lsb, "tx_bias")
            self._lane_words(s.RX_POWER, np.where(live, rx_mw, 0.0), POWER_LSB_MW, "rx_power")
            self.latch_los(rx_mw)

    def latch_los(self, rx_mw: np.ndarray) -> None:
        """Set the (latched) RX LOS flag of every lane whose received power is below ``los_dbm``."""
        s = self.spec
        los = 10 * np.log10(np.maximum(rx_mw, 1e-12)) < self.los_dbm
        if self._supports("rx_los") and los.any():
            flags = sum(1 << k for k in range(s.LANES) if los[k])
            rx_los = s.LOS if s is Sff8636 else Cmis.RX_LOS
            with self.lock:
                self.image.put(rx_los, [self.image.get(rx_los)[0] | flags])


# Between a module's fibre and a mesh port the light crosses a fibre-to-chip facet and the
# chip's access waveguides, and the same on the way out; the chip's circuit solve covers
# the mesh only. The link budget (photonics.budget.link_budget) counts two facets and the
# access routing: without them here the simulated RX power read 11 dB above every planned
# link (live margins ~12 dB over the planned ones, 1 dB of it the +1 dBm launch).
OFF_MESH_LOSS_DB = 2 * PhysicsDefaults.fiber_to_chip_loss_db + PhysicsDefaults.access_routing_loss_db


class TransceiverBench:
    """Every simulated transceiver on one chip; RX power follows routed light.

    ``off_mesh_loss_db``: facets and access waveguides between the modules and the mesh
    ports (dB, both ends together), on top of the chip's port-to-port transmission.
    """

    def __init__(self, chip: Chip, transceivers: Sequence[SimTransceiver], wavelength_nm: float = 1550.0,
                 off_mesh_loss_db: float = OFF_MESH_LOSS_DB) -> None:
        chip.follow_wall_clock()  # read over a wire (I2C bridges, module pages) in real time
        self.chip = chip
        self.off_mesh = 10 ** (-off_mesh_loss_db / 10)
        self.transceivers = {t.name: t for t in transceivers}
        self.wavelength_nm = wavelength_nm
        for t in transceivers:
            t.bench = self
        self._lock = threading.Lock()

    def refresh(self, only: SimTransceiver | None = None) -> None:
        """Recompute every module's monitors from the chip's current state.

        With ``only``, the other modules get just their latched LOS flags (a loss of light
        between two reads of a module stays latched, as in hardware) and ``only`` all its
        monitors: a read of one module then costs one module's update.
        """
        with self._lock:
            n_ports = self.chip.mesh.n_ports
            arriving = np.zeros(n_ports)
            for t in self.transceivers.values():
                on = t.tx_enabled()
                for lane, port in enumerate(t.tx_ports):
                    if port is not None and on[lane]:
                        launched = t.tx_power_mw[lane] * self.off_mesh
                        arriving += self.chip.output_power_mw(port, self.wavelength_nm, launched)
            for t in self.transceivers.values():
                rx = np.array([arriving[p] if p is not None else 0.0 for p in t.rx_ports])
                if only is None or t is only:
                    t.set_monitors(rx)
                else:
                    t.latch_los(rx)


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
