"""Optical telemetry: a thread that polls the transceivers and acts on a dark accelerator.

:func:`start` runs an :class:`~instruments.link_monitor.LinkMonitor` over the control
plane's bench (``cp.bench.transceivers``, the drivers a host uses) every ``period_s``,
watching the links of the jobs ``cp.status()`` reports. When the monitor declares an
accelerator dark (every link it transmits on lost its light, debounced), the policy says
what happens:

* ``"auto"``: log ``accelerator-dark`` and report the failure,
  ``cp.report_failure(None, accelerator=..., source="telemetry", detected_s=onset)``: the
  recovery's ``detect`` stage is measured, from the start of the last read that still saw
  the light (the latest the failure can have begun, as wall-clock epoch seconds) to the
  report, instead of the timing model's constant;
* ``"alert"``: only log ``accelerator-dark`` (a person or a scheduler decides).

Other events: ``link-dark`` (one link lost its light while its transmitter's other links
are lit: a route or fibre fault, not a dead accelerator), ``link-never-lit`` (a placed
link still dark after the arming grace), ``telemetry-error`` (a poll or a report failed;
the loop goes on). See docs/controlplane.md, "Failure detection".
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from instruments.link_monitor import (
    DEFAULT_DARK_DBM,
    DEFAULT_PERIOD_S,
    DarkDeclaration,
    LinkMonitor,
    Poll,
    WatchedLink,
    links_from_plan,
)
from photonics.errors import LumionError

log = logging.getLogger(__name__)

POLICIES = ("auto", "alert")
MIN_PERIOD_S = 0.001  # below 1 ms the loop only burns the CPU: one module read takes ~0.3 ms
ERROR_BACKOFF_S = 1.0  # after a failed poll, wait this long: a dead bus would otherwise flood the log


class TelemetryError(LumionError, ValueError):
    """Telemetry cannot start as asked (bad policy or period, a bench without transceivers)."""


def _epoch(monotonic_s: float) -> float:
    """Wall-clock epoch seconds of a ``time.monotonic()`` instant (the service's stages are epoch s)."""
    return time.time() - (time.monotonic() - monotonic_s)


def _port(name: Any) -> int:
    """Mesh port index from ``port:N`` or N."""
    text = str(name)
    return int(text.split(":", 1)[1]) if text.startswith("port:") else int(text)


def status_links(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every placed link in a ``cp.status()`` dict (top-level ``links``, else each job's)."""
    if status.get("links"):
        return [dict(lk) for lk in status["links"]]
    out = []
    for job in status.get("jobs", []) or []:
        out.extend(dict(lk) for lk in job.get("links", []) or [])
    return out


def bench_rx_ports(bench: Any) -> dict[str, list[int | None]]:
    """RX mesh port per lane of each module of ``bench``.

    From ``bench.transceiver_ports`` (``{name: {"rx_ports": [...]}}``) when the bench
    records it, else from the simulated bench's wiring (``bench.sim.transceiver_specs``).
    """
    wiring = getattr(bench, "transceiver_ports", None)
    if not wiring and getattr(bench, "sim", None) is not None:
        wiring = {s["name"]: s for s in bench.sim.transceiver_specs}
    if not wiring:
        raise TelemetryError("the bench does not say which mesh port each transceiver lane receives; "
                             "give tx_ports/rx_ports in its [[transceivers]] tables")
    opened = getattr(bench, "transceivers", {}) or {}
    return {name: [None if p is None else _port(p) for p in spec.get("rx_ports", [])]
            for name, spec in wiring.items() if name in opened}


class Telemetry:
    """The polling thread (use :func:`start`). ``snapshot()`` gives the last poll for the dashboard."""

    def __init__(self, cp: Any, period_s: float, policy: str, monitor: LinkMonitor | None = None,
                 dark_dbm: Mapping[int, float] | None = None) -> None:
        if policy not in POLICIES:
            raise TelemetryError(f"telemetry policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        if not period_s >= MIN_PERIOD_S:
            raise TelemetryError(f"telemetry period must be at least {MIN_PERIOD_S} s, not {period_s}")
        self.cp, self.period_s, self.policy = cp, float(period_s), policy
        if monitor is None:
            bench = cp.bench
            modules = getattr(bench, "transceivers", None) or {}
            if not modules:
                raise TelemetryError("the bench has no transceivers to watch; add [[transceivers]] to its "
                                     "config, or turn telemetry off (lumion serve --telemetry-period-s 0)")
            monitor = LinkMonitor(modules, bench_rx_ports(bench))
        self.monitor = monitor
        self.dark_dbm = dict(dark_dbm or {})
        self.detections: list[dict[str, Any]] = []
        self.polls = 0
        self.inconclusive = 0  # polls whose reads overlapped a reconfiguration (no evidence)
        self._last: Poll | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._takes_onset = "detected_s" in inspect.signature(cp.report_failure).parameters
        self._record_live = getattr(cp, "record_live", None)
        self._thread = threading.Thread(target=self._run, name="lumion-telemetry", daemon=True)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> Telemetry:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling and wait for the thread (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        """True while the thread polls."""
        return self._thread.is_alive()

    # -- the loop ------------------------------------------------------------------------
    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as exc:  # the loop must outlive any one bad poll; say what happened
                log.exception("telemetry poll failed")
                self._log("telemetry-error", error=f"{type(exc).__name__}: {exc}")
                next_t = time.monotonic() + ERROR_BACKOFF_S
            next_t = max(next_t + self.period_s, time.monotonic())
            self._stop.wait(max(0.0, next_t - time.monotonic()))
        self.monitor.close()

    def step(self) -> Poll:
        """One poll: watch the service's links, read every lane, act on what went dark.

        The service's view is read before and after the lanes: if it was reconfiguring
        the chip (an open intent) or its links changed meanwhile, the readings are no
        evidence (a link the service is moving is dark for a moment, not failed).
        """
        before = self._view()
        self.monitor.watch(before[0])
        poll = self.monitor.poll(confirm=lambda: not before[1] and self._view() == before)
        with self._lock:
            self._last, self.polls = poll, self.polls + 1
            self.inconclusive += not poll.conclusive
        if poll.conclusive:
            self._publish(poll)
        declared = {d.accelerator for d in poll.declared}
        for name in poll.dark_links:
            if name.partition("->")[0] not in declared:
                self._log("link-dark", link=name, rx_dbm=poll.links[name]["rx_dbm"])
        for name in poll.never_lit:
            self._log("link-never-lit", link=name)
        for d in poll.declared:
            self._act(d)
        return poll

    def _view(self) -> tuple[tuple[WatchedLink, ...], bool]:
        """The links the service has placed, and whether it is reconfiguring the chip (an open intent)."""
        status = self.cp.status()
        busy = any(chip.get("open_intents") for chip in status.get("chips", []) or [])
        links = links_from_plan(status_links(status), _port, lambda p: self.dark_dbm.get(p, DEFAULT_DARK_DBM))
        return tuple(links), busy

    def _publish(self, poll: Poll) -> None:
        """Give the service each watched receiver's reading (its status shows live margins)."""
        if self._record_live is None:
            return
        for link in self.monitor.watched:
            live = poll.links.get(link.name)
            if live is not None and live["dark"] is not None:
                self._record_live(link.receiver, rx_power_dbm=live["rx_dbm"], los=live["los"])

    def _act(self, d: DarkDeclaration) -> None:
        fields = d.to_dict()
        for key in ("declared_s", "last_light_s", "first_dark_s"):  # monotonic -> epoch, as the log's times
            fields[key] = None if fields[key] is None else _epoch(fields[key])
        fields.update(policy=self.policy, source="telemetry")
        self._log("accelerator-dark", **fields)
        record: dict[str, Any] = {**fields, "recovery": None, "error": None}
        if self.policy == "auto":
            try:
                extra = {"detected_s": _epoch(d.declared_s - d.detect_ms / 1e3)} if self._takes_onset else {}
                record["recovery"] = self.cp.report_failure(None, accelerator=d.accelerator,
                                                            source="telemetry", **extra)
            except LumionError as exc:  # e.g. no spare left: the service logged its refusal
                record["error"] = str(exc)
                self._log("telemetry-error", accelerator=d.accelerator, error=str(exc))
        with self._lock:
            self.detections.append(record)

    def _log(self, kind: str, **fields: Any) -> None:
        try:
            self.cp.log_event(kind, **fields)
        except Exception:  # logging must never stop detection
            log.exception("cannot log telemetry event %s", kind)

    # -- views ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The last poll: per watched link its RX power, LOS, dark and armed state."""
        with self._lock:
            poll = self._last
            return {"schema": "lumion.telemetry", "version": 1, "policy": self.policy,
                    "period_s": self.period_s, "polls": self.polls, "inconclusive_polls": self.inconclusive,
                    "poll_ms": None if poll is None else poll.duration_ms,
                    "links": {} if poll is None else poll.links,
                    "detections": [{k: v for k, v in d.items() if k != "recovery"} for d in self.detections]}


def start(cp: Any, period_s: float = DEFAULT_PERIOD_S, policy: str = "auto",
          dark_dbm: Mapping[int, float] | None = None) -> Telemetry:
    """Start polling ``cp.bench``'s transceivers every ``period_s`` seconds under ``policy``.

    Returns the running :class:`Telemetry`; ``handle.stop()`` ends it. ``dark_dbm``:
    per receiving mesh port, the RX power (dBm) below which its link is dark (the lane's
    sensitivity; default -23 dBm).
    """
    return Telemetry(cp, period_s, policy, dark_dbm=dark_dbm).start()


def rx_ports_from_specs(specs: Sequence[Mapping[str, Any]]) -> dict[str, list[int | None]]:
    """``{name: rx ports}`` from ``[[transceivers]]`` tables (port names or numbers)."""
    return {s["name"]: [None if p is None else _port(p) for p in s.get("rx_ports", [])] for s in specs}
