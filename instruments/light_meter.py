"""Measure a plan's links by light with whatever meter a bench has.

Two meters, tried in this order for each link (``src`` -> ``dst`` mesh ports):

* **transceivers**: the accelerator's own module transmits into ``src`` and another module's
  RX lane sits at ``dst`` (the bench's ``transceiver_ports`` wiring). The receiving lane's
  DOM RX power is compared with the launch (the transmitting lane's DOM TX power; the
  fabric's declared lane power when the DOM cannot say or says the laser is dark) less the
  facets and access waveguides (:data:`OFF_MESH_LOSS_DB`, as the link budget counts them)
  plus the route's planned mesh transmission. In-band, no extra light, every module read
  once per pass (modules on different buses concurrently). A receiver's DOM sums every
  transmitter's light: an idle spare's laser swapped into it by a faulty TBU reads like the
  planned link (seen: -17.6 dBm on a route whose own light arrived at -41.7 dBm). So a new
  link (``identify``) is read again with its own transmitter's lane TX-disabled for one
  read: its own light is the difference (on minus dark, in mW), and that is what is judged.
  A module samples its monitors every few ms to ~100 ms, not at each read: the dark read
  waits one sample period after the disable (else it reads the lit sample):
  :data:`DOM_REFRESH_WAIT_S`, or the longest period the bench's modules declare, and
  after the lane is enabled again no reading is taken, and :meth:`LightMeter.measure` does
  not return, before that long has passed (the next read must see the light back).
* **power meter**: the bench laser switched into ``src`` and the meter head at ``dst`` read;
  planned = the laser's power plus the route's planned transmission (the simulated meter,
  like a head at the chip's facet, reads the mesh output). One link at a time.

A link neither reaches is *not measured*, with the reason; nothing is guessed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from instruments.dark_source import dark_readings, laser_off
from instruments.errors import InstrumentError
from photonics.errors import LumionError
from photonics.fabric.verify import LinkLight
from photonics.physics import PhysicsDefaults

TRANSCEIVERS, POWER_METER = "transceivers", "power meter"
# Two facets and the access waveguides between a module's fibre and a mesh port, both ends
# together (dB): what photonics.budget.link_budget counts and the simulated modules apply.
OFF_MESH_LOSS_DB = 2 * PhysicsDefaults.fiber_to_chip_loss_db + PhysicsDefaults.access_routing_loss_db
# A transmitting lane whose DOM TX power reads this far (dB) below the fabric's declared launch
# is taken as dark (a dead laser reads the -70 dBm floor; live lasers scatter +-2 dB around
# nominal): the plan's declared launch is then the reference, so the dark link is judged off.
DARK_LAUNCH_DB = 6.0
VERIFY_NM = 1550.0  # the power meter's wavelength: the band centre, inside every default lane
FLOOR_DBM = -70.0  # the DOM's floor (SFF-8636/CMIS 0.1 uW LSB): no light of its own reads this
# After a lane's TX disable changes, a read waits this long (s) so that the module has taken
# a monitor sample since: SFF-8636/CMIS leave the sampling rate to the vendor, module
# datasheets give a few ms to ~100 ms, and samples come at least once per period, so one
# period of the slowest is enough (the simulated module's monitor_period_s models it). A
# module whose bench config declares its period (``[[transceivers]] monitor_period_s``, from
# its datasheet) is waited for that long instead: the meter waits the longest of its modules'.
DOM_REFRESH_WAIT_S = 0.1
# Sources that must all read no light before the power meter's readings are put down to a dark
# laser (instruments.dark_source): one dead TBU darkens only the links crossing it, one source
# alone could be lost at its port's TBU, so at least two distinct sources, all dark.
DARK_SOURCES_MIN = 2


class _LeftDisabledError(InstrumentError):
    """A transmitter lane disabled for a dark read could not be enabled again."""


@dataclass(frozen=True)
class Probe:
    """One link to measure: mesh ports, the plan's mesh transmission (dB, negative) and the
    declared launch power of its transmitting lane (dBm).
    """

    src: int
    dst: int
    transmission_db: float
    launch_dbm: float


@dataclass(frozen=True)
class Reading:
    """What one probe read: the meter, planned and measured power (dBm) at that meter, or why not
    (``reason`` of a measured link: why its reading is not the mesh's, its transmitter dark).

    ``dark_dbm``: for a link whose source was confirmed, the receiver's reading with its own
    transmitter disabled (what other transmitters send it); ``measured_dbm`` is then its own light.
    """

    meter: str | None
    planned_dbm: float | None
    measured_dbm: float | None
    reason: str = ""
    dark_dbm: float | None = None
    # not measured because the bench laser sent nothing (LightMeter._unless_dark): light not seen
    unlit: bool = False


def refresh_wait_s(modules: Iterable[Any]) -> float:
    """How long (s) a read waits after a lane change: the longest monitor sample period of
    ``modules``, each its declared ``monitor_period_s`` or, undeclared, :data:`DOM_REFRESH_WAIT_S`.
    """
    periods = [getattr(m, "monitor_period_s", None) for m in modules]
    return max((float(p) if p else DOM_REFRESH_WAIT_S for p in periods), default=DOM_REFRESH_WAIT_S)


def _own(on: Reading, dark_dbm: float) -> Reading:
    """``on`` with its measurement the transmitter's own light: ``on`` less ``dark_dbm`` in mW
    (the :data:`FLOOR_DBM` when nothing is left), and ``dark_dbm`` kept.
    """
    own_mw = 10 ** (float(on.measured_dbm) / 10) - 10 ** (dark_dbm / 10) if math.isfinite(dark_dbm) else 0.0
    own = 10 * math.log10(own_mw) if own_mw > 10 ** (FLOOR_DBM / 10) else FLOOR_DBM
    return replace(on, measured_dbm=own, dark_dbm=dark_dbm)


def _port(name: Any, mesh: Any) -> int:
    return int(mesh.port_index(name))


class LightMeter:
    """The meters of one opened bench (an :class:`~instruments.controller.InstrumentBench` or
    any bench with the same attributes; missing ones mean that meter does not exist).
    """

    def __init__(self, bench: Any) -> None:
        self.bench = bench
        self.mesh = bench.mesh
        self.modules: Mapping[str, Any] = getattr(bench, "transceivers", None) or {}
        wiring = getattr(bench, "transceiver_ports", None) or {}
        self.tx_lane: dict[int, tuple[str, int]] = {}
        self.rx_lane: dict[int, tuple[str, int]] = {}
        for name, spec in wiring.items():
            if name not in self.modules:
                continue
            for key, table in (("tx_ports", self.tx_lane), ("rx_ports", self.rx_lane)):
                for lane, port in enumerate(spec.get(key, []) or []):
                    if port is not None:
                        table[_port(port, self.mesh)] = (name, lane)
        self._laser_dbm: float | None = None
        self._pool: ThreadPoolExecutor | None = None
        # the bench's clock and sleep when it has its own (a simulated clock), else the wall's
        self._clock: Callable[[], float] = getattr(bench, "clock", None) or time.monotonic
        self._sleep: Callable[[float], None] = getattr(bench, "sleep", None) or time.sleep
        self._fresh_at = -math.inf  # clock time from which every monitor sample is fresh
        self.refresh_s = refresh_wait_s(self.modules.values())

    def _changed_lane(self) -> None:
        """A TX disable changed: reads are stale until the modules sampled again."""
        self._fresh_at = self._clock() + self.refresh_s

    def _await_fresh(self) -> None:
        """Wait (bounded by one refresh) until the last lane change has been sampled."""
        left = self._fresh_at - self._clock()
        if left > 0:
            self._sleep(min(left, self.refresh_s))

    # -- which meter reaches a link -------------------------------------------------------
    def meter_for(self, probe: Probe) -> tuple[str | None, str]:
        """(meter name, '') for the first meter that reaches ``probe``, else (None, why not)."""
        if probe.src in self.tx_lane and probe.dst in self.rx_lane:
            return TRANSCEIVERS, ""
        if self._meter_reaches(probe.src, probe.dst):
            return POWER_METER, ""
        names = self.mesh.port_names
        return None, (f"no transceiver lane transmits into {names[probe.src]} and receives at "
                      f"{names[probe.dst]}, and no laser switch output and power meter head reach them")

    def _meter_reaches(self, src: int, dst: int) -> bool:
        """Whether the bench laser reaches ``src`` and a power meter head sits at ``dst``.

        A bench with a wiring table (``switch_outputs``, ``meter_channels``: an
        InstrumentBench) answers from it; the in-process simulated bench (``laser_power_dbm``,
        no table) has the laser switch and a head at every port.
        """
        b = self.bench
        if hasattr(b, "switch_outputs") or hasattr(b, "meter_channels"):
            return (getattr(b, "laser", None) is not None and src in getattr(b, "switch_outputs", {})
                    and getattr(b, "meter", None) is not None and dst in getattr(b, "meter_channels", {}))
        return hasattr(b, "laser_power_dbm") and hasattr(b, "read_powers_dbm")

    @property
    def exists(self) -> bool:
        """Whether the bench has any meter at all."""
        b = self.bench
        if hasattr(b, "switch_outputs") or hasattr(b, "meter_channels"):
            wired = bool(getattr(b, "switch_outputs", {})) and bool(getattr(b, "meter_channels", {})) \
                and getattr(b, "laser", None) is not None and getattr(b, "meter", None) is not None
        else:
            wired = hasattr(b, "laser_power_dbm") and hasattr(b, "read_powers_dbm")
        return bool(self.rx_lane) or wired

    # -- measuring ------------------------------------------------------------------------
    def measure(self, probes: Sequence[Probe], identify: Sequence[int] = ()) -> list[Reading]:
        """Read every probe once (transceivers in one pass, then the meter link by link).

        ``identify``: indices of probes (new links) whose transceiver reading must be their
        own transmitter's light (:meth:`_own_lights`).
        """
        meters = [self.meter_for(p) for p in probes]
        self._await_fresh()
        dom = self._read_modules({m for p, (kind, _) in zip(probes, meters, strict=True)
                                  if kind == TRANSCEIVERS
                                  for m in (self.tx_lane[p.src][0], self.rx_lane[p.dst][0])})
        out = []
        receivers = sorted({p.dst for p, (kind, _) in zip(probes, meters, strict=True)
                            if kind == POWER_METER})
        leaks: dict[int, dict[int, float]] = {}  # source port -> its light at the other receivers (dBm)
        for p, (kind, why) in zip(probes, meters, strict=True):
            if kind == TRANSCEIVERS:
                out.append(self._by_transceivers(p, dom))
            elif kind == POWER_METER:
                reading, leak = self._by_power_meter(p, [q for q in receivers if q != p.dst])
                leaks.setdefault(p.src, {}).update(leak)
                out.append(reading)
            else:
                out.append(Reading(None, None, None, why))
        _others_into(probes, out, leaks)
        self._unless_dark(probes, out, leaks)
        self._own_lights(probes, out, [k for k in identify if out[k].meter == TRANSCEIVERS])
        self._await_fresh()  # a lane enabled again is lit in the modules' monitors for the next read
        return out

    def _unless_dark(self, probes: Sequence[Probe], out: list[Reading],
                     leaks: Mapping[int, Mapping[int, float]]) -> None:
        """The power meter's readings become *not measured*, naming the dark source, when the
        laser sent nothing (instruments.dark_source): it says its output is off, or no head read
        light from any source lit. A dark source is not the mesh's doing: links judged off by
        it would blame (and route around) healthy TBUs.
        """
        lit = [k for k, r in enumerate(out) if r.meter == POWER_METER]
        if not lit:
            return
        why = laser_off(self.bench)
        if not why:
            brightest: dict[int, float] = {}
            for k in lit:
                src = probes[k].src
                own = [float(out[k].measured_dbm), *leaks.get(src, {}).values()]
                brightest[src] = max([*own, brightest.get(src, -math.inf)])
            # one source lit cannot tell a dark laser from a TBU absorbing its light: judged as read
            if len(brightest) >= DARK_SOURCES_MIN:
                why = dark_readings(list(brightest.values()), self._laser_power_dbm(), ())
        if why:
            for k in lit:
                out[k] = replace(out[k], meter=None, measured_dbm=None, dark_dbm=None, reason=why, unlit=True)

    def _read_module(self, name: str) -> tuple[Any, Any, str]:
        """(TX dBm per lane, RX dBm per lane, error) of one module."""
        try:
            m = self.modules[name]
            return m.tx_power_dbm(), m.rx_power_dbm(), ""
        except (InstrumentError, OSError, LumionError) as exc:
            return None, None, f"{name}: {exc}"

    def _read_modules(self, names: set[str]) -> dict[str, tuple[Any, Any, str]]:
        """Every named module read once; modules on different buses concurrently."""
        if not names:
            return {}
        ordered = sorted(names)
        if len(ordered) == 1:
            return {ordered[0]: self._read_module(ordered[0])}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(16, len(self.modules)),
                                            thread_name_prefix="lumion-light")
        return dict(zip(ordered, self._pool.map(self._read_module, ordered), strict=True))

    def _by_transceivers(self, p: Probe, dom: Mapping[str, tuple[Any, Any, str]]) -> Reading:
        tx_name, tx_lane = self.tx_lane[p.src]
        rx_name, rx_lane = self.rx_lane[p.dst]
        tx, _, tx_err = dom[tx_name]
        _, rx, rx_err = dom[rx_name]
        launch, dark = p.launch_dbm, ""
        if tx is not None and not tx_err and math.isfinite(tx[tx_lane]) and \
                tx[tx_lane] >= p.launch_dbm - DARK_LAUNCH_DB:
            launch = float(tx[tx_lane])
        elif tx is not None and not tx_err and math.isfinite(tx[tx_lane]):  # its DOM: dark laser
            dark = (f"its transmitter {tx_name} lane {tx_lane} reads {float(tx[tx_lane]):.1f} dBm TX, more "
                    f"than {DARK_LAUNCH_DB:g} dB under its declared {p.launch_dbm:.1f} dBm: the source is "
                    "dark, not the mesh")
        planned = launch - OFF_MESH_LOSS_DB + p.transmission_db
        if rx_err or rx is None or not math.isfinite(rx[rx_lane]):
            why = rx_err or f"{rx_name} lane {rx_lane} reports no RX power (not advertised or lane not live)"
            return Reading(None, planned, None, why)
        return Reading(TRANSCEIVERS, planned, float(rx[rx_lane]), dark)

    def _own_lights(self, probes: Sequence[Probe], out: list[Reading], confirm: Sequence[int]) -> None:
        """Replace each reading ``out[k]`` of ``confirm`` by its transmitter's own light: the
        receiver read again with the transmitting lane disabled (``dark``), then enabled again
        whatever happens.

        The lane of one link is enabled again in the same moment the next link's is disabled,
        so one monitor refresh (:attr:`refresh_s`) serves both: the next dark read
        sees the previous link's light back and its own gone. ``k`` links wait ``k + 1``
        refreshes (the last one in :meth:`measure`), not ``2k``. Two links from one lane
        take it in turn (enabled, then disabled again).
        """
        held: tuple[int, Any, str, int] | None = None  # (k, module, name, lane) left disabled
        try:
            for k in confirm:
                p = probes[k]
                tx_name, tx_lane = self.tx_lane[p.src]
                rx_name, rx_lane = self.rx_lane[p.dst]
                tx, rx = self.modules[tx_name], self.modules[rx_name]
                if held is not None and held[2:] == (tx_name, tx_lane):  # the same lane: lit again first
                    self._release(held, out)
                    held = None
                try:
                    why = self._cannot_darken(tx, tx_name, tx_lane)
                    if why:
                        out[k] = replace(out[k], meter=None, measured_dbm=None, reason=why)
                        continue
                    tx.set_tx_disable(tx_lane, True)
                    if held is not None:
                        self._release(held, out)
                    held = (k, tx, tx_name, tx_lane)
                    self._changed_lane()
                    self._await_fresh()  # else the read returns the sample taken while lit
                    dark = float(rx.rx_power_dbm()[rx_lane])
                except (InstrumentError, OSError, LumionError, TypeError) as exc:
                    out[k] = replace(out[k], meter=None, measured_dbm=None,
                                     reason=f"confirming {tx_name}'s light: {exc}")
                    continue
                out[k] = _own(out[k], dark)
        finally:
            if held is not None:
                self._release(held, out)

    @staticmethod
    def _cannot_darken(tx: Any, name: str, lane: int) -> str:
        """Why the lane's own light cannot be read by disabling it ('' when it can)."""
        state = tx.tx_disabled()
        if state is None:
            return (f"{name} does not advertise TX disable: its light cannot be told from other "
                    "transmitters' at the receiver")
        if state[lane]:
            return f"{name} lane {lane} is disabled by the host: it sends no light"
        return ""

    def _release(self, held: tuple[int, Any, str, int], out: list[Reading]) -> None:
        """Enable again the lane disabled for reading ``out[k]`` dark; when that fails, the
        reading becomes not measured, naming the lane left disabled.
        """
        k, tx, name, lane = held
        try:
            self._enable_again(tx, name, lane)
        except _LeftDisabledError as exc:
            out[k] = replace(out[k], meter=None, measured_dbm=None, reason=str(exc))
        self._changed_lane()

    @staticmethod
    def _enable_again(tx: Any, name: str, lane: int) -> None:
        """Enable the lane disabled for the dark read; _LeftDisabledError (naming it) when that fails."""
        try:
            tx.set_tx_disable(lane, False)
        except (InstrumentError, OSError, LumionError) as exc:
            raise _LeftDisabledError(f"{name} lane {lane} could not be enabled again after its dark read "
                                     f"({exc}): its transmitter may be off; enable it (TX disable) and "
                                     "report again") from exc

    def _laser_power_dbm(self) -> float:
        if self._laser_dbm is None:
            b = self.bench
            direct = getattr(b, "laser_power_dbm", None)
            self._laser_dbm = float(direct if direct is not None else b.laser.power_dbm)
        return self._laser_dbm

    def _by_power_meter(self, p: Probe, victims: Sequence[int]) -> tuple[Reading, dict[int, float]]:
        """The link's reading, and in the same laser setting its light at the other links'
        receivers ``victims`` (mesh port -> dBm): what it leaks into them.
        """
        try:
            planned = self._laser_power_dbm() + p.transmission_db
            self.bench.select_input(p.src, VERIFY_NM)
            dbm = [float(x) for x in self.bench.read_powers_dbm([p.dst, *victims])]
        except (InstrumentError, OSError, LumionError) as exc:
            return Reading(None, None, None, f"the power meter could not read it: {exc}"), {}
        return Reading(POWER_METER, planned, dbm[0]), dict(zip(victims, dbm[1:], strict=True))

    def close(self) -> None:
        """Stop the reader threads (the instruments are the bench's)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _others_into(probes: Sequence[Probe], out: list[Reading],
                 leaks: Mapping[int, Mapping[int, float]]) -> None:
    """Set each power-meter reading's ``dark_dbm`` to the light the other links' sources put
    into its receiver (``leaks``: source port -> receiver port -> dBm, summed in mW), as the
    transceivers' dark read measures it; each source lit by the same bench laser, as the
    link's own reading is. The link's own source (a multicast tree's other branches) is the
    same transmitter, not another: its light there is not counted.
    """
    for k, r in enumerate(out):
        if r.meter != POWER_METER:
            continue
        dst, src = probes[k].dst, probes[k].src
        mw = [10 ** (at[dst] / 10) for s, at in leaks.items() if s != src and dst in at]
        if mw:
            out[k] = replace(r, dark_dbm=10 * math.log10(max(sum(mw), 1e-30)))


def probes_for(plan: Any, fabric: Any) -> list[Probe]:
    """One :class:`Probe` per link of ``plan`` (a :class:`~photonics.fabric.JobPlan`), in order."""
    return [Probe(lk.route.src, lk.route.dst, lk.transmission_db, fabric.lane(lk.route.src).tx_power_dbm)
            for lk in plan.links]


class PlanLight:
    """A bench's meters as a recovery uses them (the control plane and ``lumion failover --bench``):
    the running links read once before it writes (the held links' reference), every link of
    the new plan after the settle, judged by :mod:`photonics.fabric.verify`.
    """

    def __init__(self, bench: Any, fabric: Any) -> None:
        self.fabric = fabric
        self.meter = LightMeter(bench)

    def read(self, plan: Any) -> list[Reading]:
        """One reading per link of ``plan`` (a JobPlan), in link order."""
        return self.meter.measure(probes_for(plan, self.fabric))

    def before(self, plan: Any) -> dict[int, tuple[str, float]]:
        """The running links' readings before a recovery: link index -> (meter, dBm)."""
        return {i: (r.meter, r.measured_dbm) for i, r in enumerate(self.read(plan))
                if r.meter is not None and r.measured_dbm is not None}

    def checks(self, before_plan: Any, rec: Any, before: Mapping[int, tuple[str, float]]) -> list[LinkLight]:
        """Every link of ``rec.plan`` measured now, each held link with its reading before."""
        links = rec.plan.links
        old = before_plan.links
        held = [i not in rec.rerouted and i < len(old) and old[i].route == lk.route
                for i, lk in enumerate(links)]
        new = [i for i, h in enumerate(held) if not h]
        # a new link's reading must be its own transmitter's light (LightMeter._own_lights)
        readings = self.meter.measure(probes_for(rec.plan, self.fabric), new)
        out = []
        for i, (lk, r) in enumerate(zip(links, readings, strict=True)):
            ref = before.get(i) if held[i] else None
            out.append(LinkLight(i, f"{lk.link[0]}->{lk.link[1]}", not held[i], r.meter, r.planned_dbm,
                                 r.measured_dbm, ref[1] if ref and ref[0] == r.meter else None, r.reason,
                                 others_dbm=r.dark_dbm, unlit=r.unlit))
        return out

    def close(self) -> None:
        """Stop the meter's reader threads."""
        self.meter.close()
