"""Optical failure detection: poll the transceivers' RX monitors and name the dark transmitter.

An accelerator that dies stops transmitting, so the receiver at the far end of each of
its links loses light: its RX LOS flag asserts and its RX power falls below the
receiver's sensitivity. The dead accelerator's own module may not even answer (its host
is gone), so detection listens at the receiving end. :class:`LinkMonitor` reads, through
the same :class:`~instruments.transceiver.TransceiverModule` drivers and I2C path a host
uses, every module's RX LOS (present state) and RX power per lane, and maps each RX lane
to the logical link of the placed job that ends there (:class:`WatchedLink`). A link is
**dark** when its receiving lane shows LOS or RX power below the lane's ``dark_dbm``.

Rules (docs/controlplane.md, "Failure detection"):

* **armed**: a link can be declared dark only after it has been seen lit once. A link
  just placed or re-routed is dark until its heaters are written and its receiver locks;
  that is not a failure. A link that never lights is reported by :meth:`LinkMonitor.poll`
  in ``never_lit`` once it has been watched for :data:`ARM_GRACE_S`.
* **debounce**: a link is confirmed dark after :data:`DEBOUNCE_POLLS` consecutive dark
  polls; one lit poll resets its count.
* **declaration**: an accelerator is declared dark when every watched link it transmits
  on is confirmed dark (one link dark while the accelerator's others are lit is a route
  or fibre fault, reported in ``dark_links``, not a dead accelerator). It is declared once,
  until one of its links lights again or the watch list is replaced.
* **reconfigurations**: readings taken while the chip was being reconfigured are no
  evidence (:meth:`LinkMonitor.poll`'s ``confirm``); a link placed again or re-routed
  is watched as a new link (:attr:`WatchedLink.key`).
* **timing**: each declaration carries two measured bounds on the detect time: from the
  start of the last read that saw light to the declaration (``detect_ms``, an upper
  bound: the light was still there at that read), and from the end of the first read
  that saw the dark (``detect_min_ms``, a lower bound). Times are ``time.monotonic()``
  seconds (the ``clock`` argument).

A module that cannot be read (I2C error, module not ready) yields no verdict for its
lanes: its links keep their counts, and the error is in the poll's readings.

Modules on different buses are read concurrently (one thread per bus: each cage has its
own I2C bus or bridge, as in a rack where every host reads its own modules); modules that
share a bus object are read one after another.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from instruments.errors import InstrumentError
from instruments.transceiver import TransceiverModule

DEBOUNCE_POLLS = 3  # consecutive dark polls before a link is dark: a receiver re-locking after a
#                     switch (5 ms, docs/fabric.md) or one garbled I2C read spans at most two polls,
#                     and a false declaration evicts a live accelerator from its job
DEFAULT_PERIOD_S = 0.05  # 50 ms between polls: the simulated bench reads 10 modules over its pty
#                          bridges in 15-30 ms, so this leaves the CPU to the service; 3 polls then
#                          detect in ~0.1-0.2 s, well under the ~1 s LUMION recovery
DEFAULT_DARK_DBM = -23.0  # the default C-band lane's receiver sensitivity (photonics.budget,
#                           dwdm-10g-zr): below it the link carries no data even without LOS
ARM_GRACE_S = 1.0  # a new link that is still dark after this long never came up: 20x the
#                    slowest recovery we model (write + settle + relock < 50 ms, docs/fabric.md)


class LinkMonitorError(InstrumentError):
    """The monitor was asked to watch something it cannot see."""


@dataclass(frozen=True)
class WatchedLink:
    """One logical link to watch: ``transmitter``'s TX on ``tx_port`` reaches ``receiver`` at ``rx_port``.

    ``dark_dbm``: RX power (dBm) below which the link is dark (the receiving lane's
    sensitivity). ``key`` tells apart two placements of the same link (its job and its
    route): a link placed again or re-routed is a new link that must first be seen lit.
    """

    transmitter: str
    receiver: str
    tx_port: int
    rx_port: int
    dark_dbm: float = DEFAULT_DARK_DBM
    key: str = ""

    @property
    def name(self) -> str:
        """``a->b``, the name the fabric gives the logical link."""
        return f"{self.transmitter}->{self.receiver}"


@dataclass(frozen=True)
class LaneReading:
    """One RX lane as read in one poll (``rx_dbm`` floored at -70 dBm; None when not known).

    ``t_s`` is the start of the module's read, ``t_end_s`` its end (monotonic s).
    """

    module: str
    lane: int
    port: int
    rx_dbm: float | None
    los: bool | None
    t_s: float
    t_end_s: float
    error: str | None = None

    def dark(self, dark_dbm: float) -> bool | None:
        """True when LOS is asserted or RX power is below ``dark_dbm``; None when unreadable."""
        if self.error is not None or (self.los is None and self.rx_dbm is None):
            return None
        return bool(self.los) or (self.rx_dbm is not None and self.rx_dbm < dark_dbm)


@dataclass(frozen=True)
class DarkDeclaration:
    """An accelerator declared dark: every link it transmits on lost its light.

    Attributes:
        accelerator: the transmitter that went dark.
        links: its links (``a->b``); ``rx_ports``: where their receivers sit.
        declared_s: monotonic time of the declaration (s).
        last_light_s: start of the last read that still saw light on any of the links
            (None if the monitor never saw them lit, which arming prevents).
        first_dark_s: end of the first read that saw the dark.
        detect_ms: declared_s - last_light_s (ms), an upper bound on the detect time.
        detect_min_ms: declared_s - first_dark_s (ms), a lower bound.
        polls: dark polls counted on the link confirmed last.
    """

    accelerator: str
    links: tuple[str, ...]
    rx_ports: tuple[int, ...]
    declared_s: float
    last_light_s: float | None
    first_dark_s: float
    detect_ms: float
    detect_min_ms: float
    polls: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"accelerator": self.accelerator, "links": list(self.links), "rx_ports": list(self.rx_ports),
                "declared_s": self.declared_s, "last_light_s": self.last_light_s,
                "first_dark_s": self.first_dark_s, "detect_ms": self.detect_ms,
                "detect_min_ms": self.detect_min_ms, "polls": self.polls}


@dataclass(frozen=True)
class Poll:
    """One poll: every lane read, the links' states, and what became dark.

    ``links`` maps a watched link name to ``{"rx_dbm", "los", "dark", "armed", "dark_polls"}``.
    """

    t_s: float
    duration_ms: float
    readings: tuple[LaneReading, ...]
    links: dict[str, dict[str, Any]]
    declared: tuple[DarkDeclaration, ...]
    dark_links: tuple[str, ...]  # links confirmed dark in this poll (each reported once per dark spell)
    never_lit: tuple[str, ...]
    conclusive: bool = True  # False: the chip was reconfigured during the reads (see LinkMonitor.poll)


@dataclass
class _LinkState:
    link: WatchedLink
    watched_s: float
    armed: bool = False
    dark_polls: int = 0
    last_light_s: float | None = None
    first_dark_s: float | None = None
    reading: LaneReading | None = None
    dark: bool | None = None


@dataclass
class _Lane:
    module: str
    lane: int


def read_lanes(module: TransceiverModule, name: str, rx_ports: Sequence[int | None],
               clock: Callable[[], float] = time.monotonic) -> list[LaneReading]:
    """Read one module's RX LOS (present state) and RX power, one reading per wired RX lane."""
    t0 = clock()
    try:
        los = module.rx_los()
        rx = module.rx_power_dbm()
        error = None
    except (InstrumentError, OSError) as exc:  # bridge error, I2C NACK, not ready: no verdict, say why
        los, rx, error = None, None, str(exc)
    t1 = clock()
    out = []
    for lane, port in enumerate(rx_ports):
        if port is None:
            continue
        power = None if rx is None or math.isnan(rx[lane]) else float(rx[lane])
        out.append(LaneReading(name, lane, int(port), power, None if los is None else bool(los[lane]),
                               t0, t1, error))
    return out


@dataclass
class LinkMonitor:
    """Poll RX monitors of ``modules`` and declare dark transmitters of the watched links.

    Args:
        modules: ``{name: TransceiverModule}`` (the bench's opened modules).
        rx_ports: ``{name: [mesh port of RX lane 0, lane 1, ...]}`` (None: lane unwired).
        debounce_polls: consecutive dark polls before a link is confirmed dark.
        arm_grace_s: how long a watched link may stay dark before it is reported never lit (s).
        clock: monotonic seconds (injectable for tests).
        parallel: read modules on different buses concurrently (one thread per bus).
    """

    modules: Mapping[str, TransceiverModule]
    rx_ports: Mapping[str, Sequence[int | None]]
    debounce_polls: int = DEBOUNCE_POLLS
    arm_grace_s: float = ARM_GRACE_S
    clock: Callable[[], float] = time.monotonic
    parallel: bool = True
    _links: dict[str, _LinkState] = field(default_factory=dict, init=False)
    _declared: set[str] = field(default_factory=set, init=False)
    _reported_never_lit: set[str] = field(default_factory=set, init=False)
    _by_port: dict[int, _Lane] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.debounce_polls < 1:
            raise LinkMonitorError(f"debounce_polls must be at least 1, not {self.debounce_polls}")
        unknown = sorted(set(self.rx_ports) - set(self.modules))
        if unknown:
            raise LinkMonitorError(f"rx_ports names modules the bench has not opened: {', '.join(unknown)}")
        for name, ports in self.rx_ports.items():
            for lane, port in enumerate(ports):
                if port is not None:
                    self._by_port[int(port)] = _Lane(name, lane)

    def watch(self, links: Iterable[WatchedLink]) -> None:
        """Replace the watched links (the placed jobs' links). Links already watched keep their state."""
        now = self.clock()
        new: dict[str, _LinkState] = {}
        for link in links:
            if link.rx_port not in self._by_port:
                raise LinkMonitorError(f"no transceiver lane receives mesh port {link.rx_port} (link "
                                       f"{link.name}); add it to the module's rx_ports in the bench config")
            old = self._links.get(link.name)
            new[link.name] = old if old is not None and old.link == link else _LinkState(link, now)
        with self._lock:
            self._links = new
            self._declared &= {s.link.transmitter for s in new.values()}
            self._reported_never_lit &= set(new)

    @property
    def watched(self) -> tuple[WatchedLink, ...]:
        """The links being watched."""
        return tuple(s.link for s in self._links.values())

    def _read_group(self, names: Sequence[str]) -> list[LaneReading]:
        out: list[LaneReading] = []
        for name in names:
            out.extend(read_lanes(self.modules[name], name, self.rx_ports[name], self.clock))
        return out

    def read(self) -> list[LaneReading]:
        """One reading of every wired RX lane of every module (module order of ``rx_ports``)."""
        groups: dict[int, list[str]] = {}
        for name in self.rx_ports:
            groups.setdefault(id(getattr(self.modules[name], "bus", self.modules[name])), []).append(name)
        if not self.parallel or len(groups) < 2:
            return self._read_group(list(self.rx_ports))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="lumion-xcvr")
        by_module: dict[str, list[LaneReading]] = {}
        for readings in self._pool.map(self._read_group, groups.values()):
            for r in readings:
                by_module.setdefault(r.module, []).append(r)
        return [r for name in self.rx_ports for r in by_module.get(name, [])]

    def close(self) -> None:
        """Stop the reader threads (the modules are the bench's to close)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def poll(self, confirm: Callable[[], bool] | None = None) -> Poll:
        """Read every lane, update the links' debounce state, and declare dark transmitters.

        ``confirm``, called after the reads, says whether the chip held the watched links
        all along (no reconfiguration started or finished meanwhile). When it answers
        False the readings are kept in the poll but are no evidence: no link's state
        changes (``Poll.conclusive`` False).
        """
        t0 = self.clock()
        readings = self.read()
        conclusive = confirm is None or bool(confirm())
        by_port = {r.port: r for r in readings}
        with self._lock:
            if conclusive:
                for state in self._links.values():
                    self._update(state, by_port.get(state.link.rx_port))
            declared = self._declare() if conclusive else []
            now = self.clock()
            dark_links = tuple(n for n, s in self._links.items() if s.dark_polls == self.debounce_polls)
            never_lit = self._never_lit(now)
            links = {n: {"rx_dbm": None if s.reading is None else s.reading.rx_dbm,
                         "los": None if s.reading is None else s.reading.los,
                         "dark": s.dark, "armed": s.armed, "dark_polls": s.dark_polls}
                     for n, s in self._links.items()}
            if not conclusive:
                dark_links, never_lit = (), ()
        return Poll(t0, (now - t0) * 1e3, tuple(readings), links, tuple(declared), dark_links, never_lit,
                    conclusive)

    def _update(self, state: _LinkState, reading: LaneReading | None) -> None:
        state.reading = reading
        dark = None if reading is None else reading.dark(state.link.dark_dbm)
        state.dark = dark
        if dark is None:
            return  # unreadable: no verdict, the count stands
        if not dark:
            state.armed = True
            state.dark_polls = 0
            state.first_dark_s = None
            state.last_light_s = reading.t_s
            self._declared.discard(state.link.transmitter)
            return
        if state.armed:
            state.dark_polls += 1
            if state.first_dark_s is None:
                state.first_dark_s = reading.t_end_s

    def _declare(self) -> list[DarkDeclaration]:
        by_tx: dict[str, list[_LinkState]] = {}
        for s in self._links.values():
            by_tx.setdefault(s.link.transmitter, []).append(s)
        out = []
        for tx, states in by_tx.items():
            if tx in self._declared or not all(s.dark_polls >= self.debounce_polls for s in states):
                continue
            now = self.clock()
            lights = [s.last_light_s for s in states if s.last_light_s is not None]
            last_light = max(lights) if lights else None
            first_dark = min(s.first_dark_s for s in states if s.first_dark_s is not None)
            out.append(DarkDeclaration(
                tx, tuple(s.link.name for s in states), tuple(s.link.rx_port for s in states), now,
                last_light, first_dark, (now - (first_dark if last_light is None else last_light)) * 1e3,
                (now - first_dark) * 1e3, min(s.dark_polls for s in states)))
            self._declared.add(tx)
        return out

    def _never_lit(self, now: float) -> tuple[str, ...]:
        late = [n for n, s in self._links.items()
                if not s.armed and now - s.watched_s > self.arm_grace_s and n not in self._reported_never_lit]
        self._reported_never_lit.update(late)
        return tuple(late)


def links_from_plan(links: Iterable[Mapping[str, Any]], port_index: Callable[[Any], int],
                    dark_dbm: Callable[[int], float] | None = None) -> list[WatchedLink]:
    """Watched links from a plan's link dicts (``{"link": "a->b", "src": "port:1", "dst": "port:4"}``,
    as :meth:`photonics.fabric.LinkResult.to_dict` gives them; with ``job`` and ``route``
    when the service's status gives them, which make the link's ``key``).

    ``port_index`` turns a port name into its index (``Mesh.port_index``); ``dark_dbm``
    gives the receiving port's threshold (its lane's sensitivity; default
    :data:`DEFAULT_DARK_DBM`).
    """
    out = []
    for d in links:
        a, sep, b = str(d["link"]).partition("->")
        if not sep:
            raise LinkMonitorError(f"link {d['link']!r} is not of the form a->b")
        rx = port_index(d["dst"])
        hops = (d.get("route") or {}).get("tbus") or []
        key = f"{d.get('job')}:" + ",".join(f"{h.get('tbu')}/{h.get('entry')}{h.get('exit')}" for h in hops)
        out.append(WatchedLink(a, b, port_index(d["src"]), rx,
                               DEFAULT_DARK_DBM if dark_dbm is None else float(dark_dbm(rx)), key))
    return out
