"""The mesh controller: configurations to heater currents, written safely over the driver.

:class:`MeshController` turns a :class:`~photonics.configuration.Configuration` into
currents through a :class:`~calibration.heater_map.HeaterMap` (``IdealMap`` until the chip
is calibrated), checks every limit before sending anything, writes only the channels
that change (runs of neighbouring channels go out as one vector command), and is
all-or-nothing: when a write fails midway it restores the channels it had touched and
raises :class:`WriteAbortedError`.

:class:`InstrumentBench` is the :class:`calibration.bench.Bench` protocol over the real
drivers, so calibration runs unchanged over the wire.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.bench import HeaterReadback
from calibration.electrical import HeaterFault, classify
from calibration.heater_map import HeaterMap, IdealMap
from calibration.model import heater_power_mw
from instruments.errors import (
    BenchConfigError,
    ChipStateUnknownError,
    InstrumentError,
    LimitError,
    ModuleResetError,
    OverVoltageError,
    WriteAbortedError,
)
from instruments.heater_driver import FULL_SCALE_MA, OFFSET_LIMIT, SCATTER_TOLERANCE, HeaterDriver
from photonics.configuration import Configuration
from photonics.errors import LumionError
from photonics.topology import Mesh

RESOLUTION_MA = 1e-4  # the driver's command resolution (4 decimals of mA)
# After trouble on the line, a channel read back within this of its target holds it (mA):
# the driver's read-back already removes each channel's offset and returns a confirmed
# setting exactly (HeaterDriver.currents); this covers a channel not yet confirmed by a
# setting since a reconnect, whose readings are its scatter (< 1.4 uA recorded) off.
MEND_TOLERANCE_MA = 0.005
MEND_PASSES = 3  # read back and rewrite at most this often before declaring the state unknown
# The load check (MeshController.load_faults) judges channels carrying at least this (mA):
# a working heater then shows >= 50 mV, a shorted one under 0.2 mV plus the module's voltage
# offset (<= 1.2 mV); the verdict's line (calibration.electrical.SHORT_RATIO) lies at 10 mV.
# No zero reading is taken, so the offsets stay in: below this they would crowd the line.
LOAD_CHECK_MIN_MA = 0.2


@dataclass(frozen=True)
class WriteReport:
    """What one programming step cost.

    Attributes:
        channels: heater channels whose current changed.
        commands: commands sent.
        bytes_written: bytes sent to the driver (commands with terminators).
        bytes_read: bytes of replies.
        wire_time_s: ``(bytes_written + bytes_read) * 10 / baud + commands * turnaround``:
            8N1 frames, and the protocol waits for each reply (a setting's reply includes its
            read-back), so both directions count, plus the module's and the USB-serial
            adapter's reply turnaround per exchange (``HeaterDriver.reply_turnaround_s``).
        elapsed_s: wall time of the exchange on this host.
    """

    channels: int
    commands: int
    bytes_written: int
    bytes_read: int
    wire_time_s: float
    elapsed_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def runs(channels: np.ndarray) -> list[tuple[int, int]]:
    """Split sorted channel numbers into (first, count) runs of consecutive channels.

    Example:
        >>> runs(np.array([1, 2, 3, 7, 9, 10]))
        [(1, 3), (7, 1), (9, 2)]
    """
    out: list[tuple[int, int]] = []
    for ch in (int(c) for c in channels):
        if out and out[-1][0] + out[-1][1] == ch:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((ch, 1))
    return out


class MeshController:
    """Program a mesh through a heater driver.

    Args:
        driver: the heater driver (enough channels for ``mesh.n_heaters``; channel
            ``2*tbu + (arm == bot)``).
        mesh: the chip's topology.
        heater_map: configuration -> currents; ``IdealMap`` when None.
        max_current_ma: per-channel limit (mA), at most the driver's full scale.
        max_total_power_mw: limit on the summed electrical heater power (mW), estimated
            with the nominal heater ``R(I) = r0 (1 + gamma I)``.
        r0_kohm: nominal heater resistance at zero current (kohm), for the power estimate.
        gamma_per_ma: nominal heater's resistance rise per mA (1/mA), for the power estimate.
        sync: read the driver's currents at start (``IALL?``) instead of assuming zeros.
    """

    def __init__(self, driver: HeaterDriver, mesh: Mesh, heater_map: HeaterMap | None = None, *,
                 max_current_ma: float = FULL_SCALE_MA, max_total_power_mw: float = 1000.0,
                 r0_kohm: float = 0.25, gamma_per_ma: float = 0.02, sync: bool = True) -> None:
        if driver.n_channels < mesh.n_heaters:
            raise BenchConfigError(
                f"the heater driver has {driver.n_channels} channels but the mesh needs "
                f"{mesh.n_heaters}; daisy-chain {-(-(mesh.n_heaters - driver.n_channels) // 8)} more "
                "8-channel module(s)"
            )
        if max_current_ma > FULL_SCALE_MA:
            raise BenchConfigError(f"max_current_ma {max_current_ma} is over the driver's full scale "
                                   f"{FULL_SCALE_MA} mA")
        self.driver = driver
        self.mesh = mesh
        self.heater_map: HeaterMap = heater_map or IdealMap(mesh.n_heaters)
        self.max_current_ma = float(max_current_ma)
        self.max_total_power_mw = float(max_total_power_mw)
        self.r0_kohm = r0_kohm
        self.gamma_per_ma = gamma_per_ma
        self._applied = driver.currents()[: mesh.n_heaters] if sync else np.zeros(mesh.n_heaters)
        # False after a failure that may have left the chip in a state we did not read back
        self.state_known = True
        self.last_report: WriteReport | None = None

    @property
    def currents(self) -> np.ndarray:
        """The currents now applied, as far as the controller knows (mA)."""
        return self._applied.copy()

    def resync(self) -> np.ndarray:
        """Read back every current from the driver (after a failed restore or a manual change)."""
        with self.driver.lock:
            try:
                self._applied = self.driver.currents()[: self.mesh.n_heaters]
            except ModuleResetError:
                self.state_known = False  # it restarted while we read: what we read is gone
                raise
            self.state_known = True
        return self.currents

    def currents_for(self, configuration: Configuration) -> np.ndarray:
        """Currents (mA) the heater map gives for ``configuration``.

        Raises MeshMismatchError (nothing sent) when it was made for another mesh.
        """
        configuration.check_mesh(self.mesh)
        return np.asarray(self.heater_map.currents_for(configuration, self.max_current_ma), float)

    def program(self, configuration: Configuration) -> WriteReport:
        """Realise ``configuration``: compute currents, check limits, write the changed channels."""
        return self.set_currents(self.currents_for(configuration))

    def check(self, currents_ma: np.ndarray) -> np.ndarray:
        """Validate currents against every limit; raise :class:`LimitError` (nothing sent)."""
        c = np.asarray(currents_ma, dtype=float)
        if c.shape != (self.mesh.n_heaters,):
            raise LimitError(f"need {self.mesh.n_heaters} currents (one per heater), got shape {c.shape}")
        bad = ~np.isfinite(c) | (c < 0) | (c > self.max_current_ma)
        if bad.any():
            ch = int(np.argmax(bad))
            raise LimitError(f"heater:{ch} asks {c[ch]:.4f} mA, outside 0..{self.max_current_ma} mA; "
                             "nothing was sent (check the heater map)")
        total = float(heater_power_mw(c, self.r0_kohm, self.gamma_per_ma).sum())
        if total > self.max_total_power_mw:
            raise LimitError(f"total heater power {total:.1f} mW is over the {self.max_total_power_mw} mW "
                             "limit; nothing was sent (park unused TBUs or raise the limit)")
        return c

    def set_currents(self, currents_ma: np.ndarray) -> WriteReport:
        """Write the channels whose current changed; all-or-nothing (see the module docs).

        The driver's lock is held from reading the controller's view to the last reply, so
        a second programmer (another thread) waits and then writes against the state the
        first one left: the chip always ends in exactly one of the requested configurations.
        When the state is unknown (a failed restore, a module that restarted) the currents are
        read back first (``IALL?``); if that fails too, nothing is written.
        """
        new = self.check(currents_ma)
        tr = self.driver.transport
        with self.driver.lock:
            t0 = time.perf_counter()
            if not self.state_known:
                self._reread_before_writing()
            changed = self._to_write(new)
            w0, r0, x0 = tr.bytes_written, tr.bytes_read, self.driver.exchanges
            troubles = self.driver.resyncs
            try:
                self._write(changed, new)
            except WriteAbortedError:
                if self.driver.resyncs != troubles:
                    self._verify_against(self._applied)
                raise
            self._applied = np.where(np.isin(np.arange(len(new)), changed), new, self._applied)
            if self.driver.resyncs != troubles:
                self._verify_against(new)
            nbytes_w, nbytes_r = tr.bytes_written - w0, tr.bytes_read - r0
            commands = self.driver.exchanges - x0
            elapsed = time.perf_counter() - t0
        report = WriteReport(
            channels=len(changed), commands=commands, bytes_written=nbytes_w, bytes_read=nbytes_r,
            wire_time_s=(nbytes_w + nbytes_r) * 10 / self.driver.baudrate
            + commands * self.driver.reply_turnaround_s,
            elapsed_s=elapsed,
        )
        self.last_report = report
        return report

    def load_faults(self) -> list[HeaterFault]:
        """Heaters whose voltage and current read-back (``VALL?``, ``IALL?``) shows them open or
        shorted now, among the channels carrying at least :data:`LOAD_CHECK_MIN_MA`: a short
        passes the current confirmation of every setting, only its voltage shows it.
        """
        n = self.mesh.n_heaters
        with self.driver.lock:
            volts = self.driver.voltages()[:n]
            amps = self.driver.measured_currents()[:n]
            asked = self._applied.copy()
        zero = HeaterReadback(np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool))
        probe = HeaterReadback(volts, amps, np.zeros(n, dtype=bool))
        driven = np.flatnonzero(asked >= LOAD_CHECK_MIN_MA)
        return classify(zero, probe, np.maximum(asked, LOAD_CHECK_MIN_MA), driven)

    def readback_tolerance_ma(self) -> np.ndarray:
        """(n_heaters,) how far a read-back may be from what a channel holds (mA).

        :data:`MEND_TOLERANCE_MA` on channels this driver confirmed; on the others the
        module offset it does not know yet, plus scatter.
        """
        confirmed = np.isfinite(self.driver.offsets["I"][: self.mesh.n_heaters])
        unknown = OFFSET_LIMIT["mA"] + SCATTER_TOLERANCE["mA"]
        return np.where(confirmed, MEND_TOLERANCE_MA, max(MEND_TOLERANCE_MA, unknown))

    def _to_write(self, new: np.ndarray) -> np.ndarray:
        """Channels to write: those that change, and those on which this driver confirmed nothing.

        A channel's reading is its setting plus the module's offset (up to 25 uA), which is
        learned only from a confirmed setting: until then a reading cannot tell whether a
        channel that is on already holds ``new``, so it is written (once per driver). A
        channel reading zero holds zero (HeaterDriver.currents).
        """
        unconfirmed = ~self.driver.confirmed_channels()[: self.mesh.n_heaters] & (self._applied != 0)
        return np.flatnonzero((np.abs(new - self._applied) >= RESOLUTION_MA / 2) | unconfirmed)

    def _verify_against(self, target: np.ndarray) -> None:
        """After an exchange went out of step, read every current back and mend what differs.

        A cut or corrupted command may have reached the module in a form nobody sent (another
        channel, another value); only a full read-back (``IALL?``) shows it.
        """
        target = np.array(target, dtype=float)
        for _ in range(MEND_PASSES):
            try:
                held = self.driver.currents()[: self.mesh.n_heaters]
            except LumionError as exc:
                self.state_known = False
                raise ChipStateUnknownError(
                    f"an exchange with the heater driver went out of step and reading the currents "
                    f"back failed ({exc}); the next write reads them back first") from exc
            ok = np.abs(held - target) <= self.readback_tolerance_ma()
            self._applied = np.where(ok, target, held)
            if ok.all():
                return
            self.driver.log.warning("heater channels %s do not hold what was written; rewriting",
                                    np.flatnonzero(~ok).tolist())
            self._write(np.flatnonzero(~ok), target)
            self._applied = np.where(ok, self._applied, target)
        self.state_known = False
        raise ChipStateUnknownError("heater channels keep differing from what was written after "
                                    f"{MEND_PASSES} rewrites; check the driver, then resync()")

    def _reread_before_writing(self) -> None:
        try:
            self.resync()
        except LumionError as exc:
            raise ChipStateUnknownError(
                f"the chip's currents are unknown after an earlier failure and reading them back "
                f"failed ({exc}); nothing was written. Fix the link, then call resync()") from exc

    def _write(self, changed: np.ndarray, new: np.ndarray) -> None:
        done: list[tuple[int, int]] = []
        try:
            for first, count in runs(changed):
                done.append((first, count))
                self.driver.set_block(first, new[first:first + count])
        except ModuleResetError as exc:
            self.state_known = False
            raise ChipStateUnknownError(
                f"a heater-driver module restarted during the write ({exc}); the chip is not in "
                "the previous or the new configuration. The next write reads the currents back "
                "first; call resync() to see them now") from exc
        except LumionError as exc:
            self._restore(done, exc)

    def _restore(self, done: list[tuple[int, int]], exc: Exception) -> None:
        """Put back the previous currents on every channel a failed write may have touched."""
        try:
            # the write's own retries may already have reconnected; restore anyway
            with contextlib.suppress(InstrumentError):
                self.driver.reconnect()
            for first, count in done:
                self.driver.set_block(first, self._applied[first:first + count])
        except LumionError as again:
            self.state_known = False
            raise ChipStateUnknownError(
                f"writing heater currents failed ({exc}) and restoring the previous currents failed "
                f"too ({again}); fix the link: the next write reads the currents back first, or "
                "call resync() to see them now"
            ) from exc
        raise WriteAbortedError(
            f"writing heater currents failed ({exc}); the previous currents were restored on all "
            f"{sum(c for _, c in done)} touched channels -- nothing changed"
        ) from exc


class InstrumentBench:
    """The :class:`calibration.bench.Bench` protocol over real (or simulated) instruments.

    Args:
        controller: writes heater currents.
        laser: a :class:`~instruments.laser.TunableLaser` with a fiber switch module.
        meter: a :class:`~instruments.power_meter.PowerMeter`.
        switch_outputs: mesh port index -> fiber switch output feeding it.
        meter_channels: mesh port index -> (slot, channel) of the meter head there.
        chip_id: id a calibration map is tied to.
        closers: extra objects to close with the bench (simulators).
    """

    def __init__(self, controller: MeshController, laser: Any, meter: Any,
                 switch_outputs: Mapping[int, int], meter_channels: Mapping[int, tuple[int, int]],
                 chip_id: str, *, transceivers: Mapping[str, Any] | None = None,
                 closers: Sequence[Any] = ()) -> None:
        self.controller = controller
        self.laser = laser
        self.meter = meter
        self.mesh = controller.mesh
        self.chip_id = chip_id
        self.max_current_ma = controller.max_current_ma
        self.operations = 0
        self.switch_outputs = dict(switch_outputs)
        self.meter_channels = dict(meter_channels)
        self.transceivers = dict(transceivers or {})
        self._closers = list(closers)
        self._wavelength_nm: float | None = None
        self._meter_wavelength: dict[tuple[int, int], float] = {}
        self.sim: Any = None  # the SimulatedBench when the address was "sim"

    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set all heater currents (mA); only changed channels are written."""
        self.controller.set_currents(currents_ma)

    def currents(self) -> np.ndarray:
        """The heater currents now applied (mA)."""
        return self.controller.currents

    def heater_readback(self, currents_ma: np.ndarray) -> HeaterReadback:
        """Set every heater current (mA), then read every channel's voltage and current back
        (``VALL?``, ``IALL?``: the module's measurements, offsets and scatter in).

        When the write is refused because a channel reached its voltage compliance (an open
        heater), the channels are set one by one and every one refused so is marked.
        """
        c = np.asarray(currents_ma, dtype=float)
        n = self.mesh.n_heaters
        refused = np.zeros(n, dtype=bool)
        try:
            self.controller.set_currents(c)
        except WriteAbortedError as exc:
            if not isinstance(exc.__cause__, OverVoltageError):
                raise
            refused = self._set_one_by_one(c)
        drv = self.controller.driver
        volts, amps = drv.voltages()[:n], drv.measured_currents()[:n]
        return HeaterReadback(volts=volts, milliamps=amps, refused=refused)

    def _set_one_by_one(self, currents_ma: np.ndarray) -> np.ndarray:
        """Set each channel on its own; the (n_heaters,) mask of those refused at compliance."""
        drv = self.controller.driver
        refused = np.zeros(len(currents_ma), dtype=bool)
        for ch, x in enumerate(currents_ma):
            try:
                drv.set_current(ch, float(x))
            except OverVoltageError:
                refused[ch] = True
        self.controller.resync()
        return refused

    def program(self, configuration: Configuration) -> WriteReport:
        """Program a configuration through the controller's heater map."""
        return self.controller.program(configuration)

    def select_input(self, port: int, wavelength_nm: float = 1550.0) -> None:
        """Switch the laser into mesh port ``port`` and tune it (and the meter) to ``wavelength_nm``."""
        p = self.mesh.port_index(port)
        if p not in self.switch_outputs:
            raise BenchConfigError(f"no fiber switch output feeds {self.mesh.port_names[p]}; add it to "
                                   "[laser.switch] in the bench config")
        self.laser.select_output(self.switch_outputs[p])
        wl = float(wavelength_nm)
        if wl != self._wavelength_nm:
            self.laser.wavelength_nm = wl
            self._wavelength_nm = wl

    def read_powers_dbm(self, ports: Sequence[int]) -> np.ndarray:
        """One meter reading (dBm) per mesh port."""
        self.operations += 1
        out = np.empty(len(ports))
        for k, port in enumerate(ports):
            p = self.mesh.port_index(port)
            if p not in self.meter_channels:
                raise BenchConfigError(f"no power meter head at {self.mesh.port_names[p]}; add it to "
                                       "[power_meter.channels] in the bench config")
            slot, chan = self.meter_channels[p]
            head = self.meter.channel(slot, chan)
            if self._wavelength_nm is not None and self._meter_wavelength.get((slot, chan)) != \
                    self._wavelength_nm:
                head.wavelength_nm = self._wavelength_nm
                self._meter_wavelength[(slot, chan)] = self._wavelength_nm
            out[k] = head.read_power_dbm()
        return out

    def close(self) -> None:
        """Close every instrument (and the simulators, if this bench started them)."""
        for inst in [self.controller.driver, self.laser, self.meter, *self.transceivers.values()]:
            with contextlib.suppress(Exception):  # best effort: keep closing the rest
                inst.close()
        for c in reversed(self._closers):
            c.close()

    def __enter__(self) -> InstrumentBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
