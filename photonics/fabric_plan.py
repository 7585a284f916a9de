"""Placing a job on the fabric, hitless accelerator failover, and failed-TBU repair.

A :class:`JobPlan` is a running job: one verified route per logical link, the mesh
configuration, and the heater values now applied. :func:`failover` splices a spare in
for a failed accelerator; :func:`fail_tbu` routes around a TBU that died during a job.
Both re-route **only** the affected links, with every other route's TBUs reserved
(forbidden to the router), so those routes keep their TBUs, states and heater values
bit-identical; the returned programming plan holds only the heater channels whose value
changes. :func:`recovery_timing` models how long the recovery takes (docs/fabric.md).

All routing goes through :func:`route_links` (the one adapter over ``photonics.routing``)
and all checking through :func:`evaluate` (the circuit solve plus per-port link budgets).

Heater values: with a heater map (anything with ``currents_for(configuration,
max_current_ma)``, e.g. ``calibration.heater_map.IdealMap`` or a fitted map) they are
currents in mA; without one they are the offset-free heater phases in rad, interleaved
by channel (``2i`` top arm of TBU i, ``2i+1`` bottom), which is what the ideal map inverts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from photonics.budget import link_budget
from photonics.configuration import PARK_STATE, Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric import Fabric, FabricError, Job, check_job, link_ports
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing import (
    CostModel,
    RoutingGraph,
    build_graph,
    check_routes,
    negotiate,
    parse_failed,
    route_loss_db,
    solve_exact,
)
from photonics.topology import Mesh

MAX_CURRENT_MA = 24.0  # Qontrol Q8iv-class full scale (DESIGN.md)
WRITE_RESOLUTION = 1e-4  # mA (or rad): the 4 decimals the ASCII write carries


class CurrentMap(Protocol):
    """What a heater map offers (``calibration.heater_map.HeaterMap``), seen from photonics."""

    def currents_for(self, configuration: Configuration, max_current_ma: float) -> np.ndarray:
        """Currents (n_heaters,) in mA realising ``configuration``."""
        ...


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkResult:
    """One logical link as routed and checked (dB; transmission negative, loss positive)."""

    link: tuple[str, str]
    route: Route
    loss_db: float
    transmission_db: float
    acr_db: float
    margin_db: float
    budget_ok: bool
    reason: str | None = None

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form."""
        return {"link": f"{self.link[0]}->{self.link[1]}", "src": mesh.port_names[self.route.src],
                "dst": mesh.port_names[self.route.dst], "n_tbus": len(self.route.hops),
                "loss_db": self.loss_db, "transmission_db": self.transmission_db,
                "acr_db": self.acr_db, "margin_db": self.margin_db, "budget_ok": self.budget_ok}


@dataclass(frozen=True, eq=False)
class JobPlan:
    """A job running on the fabric.

    Attributes:
        job: the logical topology now running.
        links: one :class:`LinkResult` per ``job.links`` entry, same order.
        configuration: the mesh configuration (routes' states; unused TBUs parked or left).
        heater: heater value per channel (mA with a heater map, rad without).
        heater_unit: "mA" or "rad".
        failed_tbus: ``{TBU index: "dead"|"bar"|"cross"}`` known so far.
        failed_accelerators: accelerators that failed during the job, in order.
    """

    job: Job
    links: tuple[LinkResult, ...]
    configuration: Configuration
    heater: np.ndarray
    heater_unit: str
    failed_tbus: dict[int, str] = field(default_factory=dict)
    failed_accelerators: tuple[str, ...] = ()

    @property
    def routes(self) -> tuple[Route, ...]:
        """Routes in link order."""
        return tuple(lk.route for lk in self.links)

    @property
    def worst_margin_db(self) -> float:
        """Smallest link margin (dB)."""
        return min(lk.margin_db for lk in self.links)

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready summary."""
        return {"job": self.job.to_dict(), "links": [lk.to_dict(mesh) for lk in self.links],
                "failed_tbus": {mesh.tbu_names[t]: h for t, h in sorted(self.failed_tbus.items())},
                "failed_accelerators": list(self.failed_accelerators)}


# ---------------------------------------------------------------------------------------
# The routing adapter and the check
# ---------------------------------------------------------------------------------------
def route_links(
    mesh: Mesh,
    pairs: Sequence[tuple[int, int]],
    *,
    held: Sequence[Route] = (),
    failed: Mapping[int, str] | None = None,
    params: TBUParams | None = None,
    exact_fallback: bool = True,
    time_limit_s: float = 20.0,
    held_penalty_db: float = 1.0,
    graph: RoutingGraph | None = None,
) -> list[Route]:
    """Conflict-free routes for ``pairs`` (mesh port indices) that leave ``held`` routes alone.

    A held route's TBUs are frozen in the state it needs (routed as if stuck there) and
    the TBU ports it occupies are removed from the graph, so a new route may only use the
    *other* path of a held TBU, in the state that TBU already has: no held TBU changes
    state, so no held heater changes. Sharing a TBU costs ``held_penalty_db`` extra (it
    puts two signals through one MZI). The negotiated router runs first; the integer
    program (minimising the worst route) when it gives up and ``exact_fallback`` is set.
    ``graph`` is a prebuilt :func:`held_graph` for the same held routes and failures
    (failover tries several spares around the same held routes).

    Raises:
        RoutingError: no set of routes exists (or none found within the time limit).
    """
    if not pairs:
        return []
    graph = graph or held_graph(mesh, held, failed, params, held_penalty_db)
    idx = [(int(s), int(d)) for s, d in pairs]
    routes, _ = negotiate(graph, idx)
    if routes is None:
        if not exact_fallback:
            raise RoutingError("the fast router found no conflict-free routes around the held ones")
        routes = solve_exact(graph, idx, "worst", time_limit_s).routes
    problems = _collisions(mesh, held, routes)
    if problems:  # the graph makes this impossible; a failure here is a bug, said loudly
        raise RoutingError("internal: new routes collide with held ones: " + "; ".join(problems))
    return routes


def _collisions(mesh: Mesh, held: Sequence[Route], new: Sequence[Route]) -> list[str]:
    """Ways ``new`` routes break the rules against ``held`` ones (TBU port reuse, state clash).

    ``negotiate`` already checks the new routes among themselves; this is the cheap
    cross-check (sets, not the full :func:`photonics.routing.conflicts` scan).
    """
    ports = {4 * h.tbu + p for r in held for h in r.hops for p in (h.entry, h.exit)}
    states = {h.tbu: h.state for r in held for h in r.hops}
    out = []
    for r in new:
        for h in r.hops:
            if {4 * h.tbu + h.entry, 4 * h.tbu + h.exit} & ports:
                out.append(f"{mesh.tbu_names[h.tbu]} port reused")
            if states.get(h.tbu, h.state) != h.state:
                out.append(f"{mesh.tbu_names[h.tbu]} asked for {h.state} against a held route")
    return out


def held_graph(mesh: Mesh, held: Sequence[Route], failed: Mapping[int, str] | None = None,
               params: TBUParams | None = None, penalty_db: float = 1.0) -> RoutingGraph:
    """The routing graph with held TBUs stuck in their state and held TBU ports removed."""
    frozen = dict(failed or {})
    held_tbus: set[int] = set()
    for r in held:
        for t, s in r.states().items():
            if frozen.get(t, s) not in (s,):
                raise RoutingError(f"internal: held route uses {mesh.tbu_names[t]} in a state it cannot take")
            frozen[t] = s
            held_tbus.add(t)
    graph = build_graph(mesh, params, frozen, reserved=sorted(held_tbus),
                        costs=CostModel(reserved_db=penalty_db))
    if not held:
        return graph
    busy = np.zeros(4 * mesh.n_tbus, dtype=bool)
    for r in held:
        for h in r.hops:
            busy[[4 * h.tbu + h.entry, 4 * h.tbu + h.exit]] = True
    k0 = graph.n_tbu_arcs
    cost = graph.cost.copy()
    tb = np.arange(k0)
    blocked = busy[4 * graph.tbu[tb] + graph.entry[tb]] | busy[4 * graph.tbu[tb] + graph.exit[tb]]
    cost[:k0][blocked] = np.inf
    # Rebuild the CSR over the arcs still enabled, exactly as build_graph orders them.
    on = np.flatnonzero(np.isfinite(cost))
    order = on[np.lexsort((graph.head[on], graph.tail[on]))]
    indptr = np.searchsorted(graph.tail[order], np.arange(graph.n_nodes + 1))
    csr = sp.csr_matrix((cost[order], graph.head[order], indptr), shape=(graph.n_nodes, graph.n_nodes))
    return replace(graph, cost=cost, csr=csr, csr_arc=order)


def routes_loss_db(mesh: Mesh, routes: Sequence[Route], params: TBUParams | None = None) -> list[float]:
    """Planned loss (dB) of each route: TBU insertion plus link losses."""
    graph = build_graph(mesh, params)
    return [route_loss_db(graph, r) for r in routes]


def evaluate(
    fabric: Fabric,
    links: Sequence[tuple[str, str]],
    routes: Sequence[Route],
    configuration: Configuration,
    *,
    params: TBUParams | None = None,
    failed: Mapping[int, str] | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
    loss_db: Sequence[float] | None = None,
) -> list[LinkResult]:
    """Circuit-solve ``configuration`` and budget every link with its ports' own lanes.

    Transmission and ACR come from ``photonics.routing.check_routes`` (victims: the other
    links' receivers); the budget uses the TX port's lane for power and polarization and
    the RX port's lane for sensitivity.
    """
    mesh = fabric.mesh
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    checks = check_routes(mesh, configuration, routes, params, (params.center_wavelength_nm,),
                          dict(failed or {}))
    losses = list(loss_db) if loss_db is not None else routes_loss_db(mesh, routes, params)
    out = []
    for link, r, c, loss in zip(links, routes, checks, losses, strict=True):
        b = link_budget(-c.transmission_db, fabric.lane(r.src), fabric.lane(r.dst), defaults,
                        required_margin_db)
        out.append(LinkResult(link, r, float(loss), c.transmission_db, c.acr_db, b.margin_db, b.ok,
                              b.reason))
    return out


def heater_values(configuration: Configuration, heater_map: CurrentMap | None,
                  max_current_ma: float = MAX_CURRENT_MA) -> tuple[np.ndarray, str]:
    """Heater value per channel: currents (mA) from the map, or offset-free phases (rad)."""
    if heater_map is not None:
        return np.asarray(heater_map.currents_for(configuration, max_current_ma), float), "mA"
    state = configuration.heater_state()
    out = np.empty(2 * len(configuration.cross_fraction))
    out[0::2], out[1::2] = state.phi_top, state.phi_bot
    return out, "rad"


def _stuck_states(conf: np.ndarray, failed: Mapping[int, str]) -> np.ndarray:
    conf = conf.copy()
    for t, how in failed.items():
        if how in ("bar", "cross"):
            conf[t] = 1.0 if how == "cross" else 0.0
    return conf


# ---------------------------------------------------------------------------------------
# Placing a job
# ---------------------------------------------------------------------------------------
def place_job(
    fabric: Fabric,
    job: Job,
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    failed_tbus: Mapping[int | str, str] | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
    max_current_ma: float = MAX_CURRENT_MA,
) -> JobPlan:
    """Route every logical link of ``job`` and check it; FabricError when a link cannot close.

    Unused TBUs are parked (``photonics.configuration.PARK_STATE``), stuck TBUs sit in
    their stuck state.
    """
    check_job(fabric, job)
    mesh = fabric.mesh
    failed = parse_failed(mesh, failed_tbus)
    pairs = link_ports(fabric, job.links)
    try:
        routes = route_links(mesh, pairs, failed=failed, params=params)
    except RoutingError as exc:
        raise FabricError(f"job {job.name!r} cannot be routed: {exc}") from None
    conf = Configuration(_stuck_states(Configuration.from_routes(mesh, routes).cross_fraction, failed),
                         tuple(routes))
    results = evaluate(fabric, job.links, routes, conf, params=params, failed=failed,
                       defaults=defaults, required_margin_db=required_margin_db)
    bad = [r for r in results if not r.budget_ok]
    if bad:
        raise FabricError(f"job {job.name!r}: link {bad[0].link[0]}->{bad[0].link[1]} refused: "
                          f"{bad[0].reason}")
    heater, unit = heater_values(conf, heater_map, max_current_ma)
    return JobPlan(job, tuple(results), conf, heater, unit, failed)


# ---------------------------------------------------------------------------------------
# Timing model
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimingModel:
    """The recovery-time model; every number configurable, sources in docs/fabric.md.

    Attributes:
        los_assert_ms: receiver LOS assert time after light is lost (SFF-8636: <= 100 us).
        poll_interval_ms: the management loop's poll of the modules' interrupt line and
            flags (worst case: a whole interval passes before the poll).
        i2c_khz: management bus clock; a byte costs 9 clocks (8 bits + ACK).
        flag_read_bytes: bytes of one flag read (device address, register, address, flag).
        baud: heater-driver serial rate; ``bits_per_byte`` 10 for 8N1.
        protocol: the Qontrol wire mode, ``"binary"`` (7-byte frames, a module's run of
            channels as one DEXT vector) or ``"ascii"`` (``I<ch>=<mA>`` / ``IVEC<first>=...``).
        channels_per_module: a vector command addresses one module of the daisy chain.
        turnaround_ms: the module's and the USB-serial adapter's reply latency, paid once per
            exchange (instruments.heater_driver.REPLY_TURNAROUND_S).
        Every exchange is the setting plus the read-back of its last channel, answered by
        ``OK`` and the value (``+1.2500 mA``): what the heater driver really sends.
        thermal_tau_ms: time constant of a heater's first-order step response, the phase
            approaching its final value as ``1 - exp(-t / tau)`` (DESIGN.md: 10 us; 2-150 us
            depending on heater and trenches, under-etched heaters at the slow end: Liu et
            al., "Thermo-optic phase shifters based on silicon-on-insulator platform",
            Front. Optoelectron. 15:9, 2022).
        settle_fraction: a heater has settled when its phase is within this fraction of pi
            of the final value (1 %: 0.031 rad, which leaks sin^2(0.0157) = -36 dB into the
            wrong output, below the TBU's 35 dB extinction). See :meth:`settle_ms`.
        relock_ms: transceiver CDR/DSP re-lock after its light is switched (None: the
            receiving lanes' own ``relock_ms``, 5 ms by default).
        verify_bytes_per_link: I2C bytes to read one receiving module's RX power and LOS
            and LOL flags after re-lock (address, register, address, 2 power + 2 flag bytes).
    """

    los_assert_ms: float = 0.1
    poll_interval_ms: float = 1.0
    i2c_khz: float = 400.0
    flag_read_bytes: int = 4
    baud: float = 115200.0
    bits_per_byte: int = 10
    protocol: str = "binary"
    channels_per_module: int = 8
    turnaround_ms: float = 2.0
    thermal_tau_ms: float = 0.010
    settle_fraction: float = 0.01
    relock_ms: float | None = None
    verify_bytes_per_link: int = 7

    def settle_ms(self, phase_step_rad: float = np.pi) -> float:
        """Time (ms) for a heater stepped by ``phase_step_rad`` to settle (first order).

        The phase error after a step ``dphi`` decays as ``dphi exp(-t / tau)``; it is
        within ``settle_fraction * pi`` after ``tau ln(dphi / (settle_fraction pi))``
        (0 for a step already that small). The largest step a heater ever takes is pi
        (heater phases stay in [0, pi], see ``photonics.physics.split_phases``): 4.6 tau.

        Example:
            >>> round(TimingModel().settle_ms(np.pi) * 1e3, 2)  # us, for a full pi step
            46.05
        """
        tol = self.settle_fraction * np.pi
        step = abs(float(phase_step_rad))
        return self.thermal_tau_ms * float(np.log(step / tol)) if step > tol else 0.0

    def i2c_ms(self, n_bytes: int) -> float:
        """Time (ms) to move ``n_bytes`` over the management bus."""
        return n_bytes * 9 / self.i2c_khz

    def exchanges(self, program: Mapping[int, float]) -> list[list[tuple[int, float]]]:
        """The program's commands: runs of consecutive channels, split at module boundaries."""
        runs: list[list[tuple[int, float]]] = []
        for ch, v in sorted(program.items()):
            last = runs[-1][-1][0] if runs else None
            if last is not None and ch == last + 1 and ch % self.channels_per_module:
                runs[-1].append((ch, v))
            else:
                runs.append([(ch, v)])
        return runs

    def _exchange_bytes(self, run: list[tuple[int, float]]) -> int:
        first, last = run[0][0], run[-1][0]
        if self.protocol == "binary":  # header, command, 3 address bytes, 2 data (+2 count) bytes
            sent = 7 if len(run) == 1 else 7 + 2 * len(run)
            sent += 7  # the read-back frame
        else:
            values = ",".join(f"{v:.4f}" for _, v in run)
            sent = len(f"I{first}={values}\n" if len(run) == 1 else f"IVEC{first}={values}\n")
            sent += len(f"I{last}?\n")
        return sent + len("OK\n") + len(f"{run[-1][1]:+.4f} mA\n")

    def write_bytes(self, program: Mapping[int, float]) -> int:
        """Bytes on the serial line, both ways, for a heater program ({channel: value})."""
        return sum(self._exchange_bytes(run) for run in self.exchanges(program))

    def write_ms(self, program: Mapping[int, float]) -> float:
        """Time (ms) to write ``program``: its bytes at ``baud`` plus a turnaround per exchange."""
        return (self.write_bytes(program) * self.bits_per_byte / self.baud * 1e3
                + len(self.exchanges(program)) * self.turnaround_ms)


def recovery_timing(
    timing: TimingModel, compute_ms: float, program: Mapping[int, float], relock_ms: float,
    n_links: int, detect: bool = True, max_phase_step_rad: float | None = None,
) -> dict[str, float]:
    """Breakdown (ms) of one recovery; stages run one after another, so ``total`` is the sum.

    ``detect`` False models a planned switch (a phase change): nothing to detect and
    nothing computed at switch time. ``settle`` is :meth:`TimingModel.settle_ms` of the
    program's largest heater phase step ``max_phase_step_rad`` (rad; None: the worst
    case, pi, e.g. for a program in mA whose phases the timing model does not know).
    """
    stages = {
        "detect": (timing.los_assert_ms + timing.poll_interval_ms + timing.i2c_ms(timing.flag_read_bytes)
                   if detect else 0.0),
        "compute": float(compute_ms),
        "write": timing.write_ms(program),
        "settle": (timing.settle_ms(np.pi if max_phase_step_rad is None else max_phase_step_rad)
                   if program else 0.0),
        "relock": float(relock_ms) if n_links else 0.0,
        "verify": timing.i2c_ms(timing.verify_bytes_per_link) * n_links,
    }
    stages["total"] = sum(stages.values())
    return stages


def _phase_step(delta: np.ndarray, write: np.ndarray, unit: str) -> float | None:
    """Largest heater phase step (rad) of a program in rad; None (worst case) for mA."""
    if unit != "rad" or not write.size:
        return None
    return float(delta[write].max())


# ---------------------------------------------------------------------------------------
# Splicing: the common core of failover and failed-TBU repair
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Recovery:
    """The result of a failover (or a failed-TBU repair).

    Attributes:
        failed: the failed accelerator (or TBU name for :func:`fail_tbu`).
        spare: the spare spliced in (None for a TBU repair).
        plan: the job as it runs after the recovery.
        rerouted: indices (into ``plan.links``) of the links that were re-routed.
        changed_tbus: TBUs whose state changed.
        program: ``{channel: new value}``, only channels whose value changes.
        held_unchanged: True when every route not re-routed kept its hops, its TBUs'
            states and its heater values exactly (computed, see :func:`held_unchanged`).
        held_drift: the largest change (mA or rad) the heater map asked for on a held
            channel (held channels are never written; non-zero only for maps that
            compensate thermal crosstalk).
        timing_ms: breakdown from :func:`recovery_timing`.
        candidates: per spare tried: name, worst new loss, TBUs changed, or why it failed.
    """

    failed: str
    spare: str | None
    plan: JobPlan
    rerouted: tuple[int, ...]
    changed_tbus: tuple[int, ...]
    program: dict[int, float]
    held_unchanged: bool
    held_drift: float
    timing_ms: dict[str, float]
    candidates: tuple[dict[str, Any], ...]

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form (keys documented in docs/fabric.md)."""
        unit = self.plan.heater_unit
        return {
            "failed": self.failed,
            "spare": self.spare,
            "job": self.plan.job.to_dict(),
            "rerouted_links": [f"{self.plan.links[i].link[0]}->{self.plan.links[i].link[1]}"
                               for i in self.rerouted],
            "changed_tbus": [mesh.tbu_names[t] for t in self.changed_tbus],
            "changed_heaters": [{"channel": ch, "heater": f"heater:{ch}", unit: v}
                                for ch, v in sorted(self.program.items())],
            "heater_unit": unit,
            "unaffected_routes_unchanged": self.held_unchanged,
            "held_heater_drift": self.held_drift,
            "links": [lk.to_dict(mesh) for lk in self.plan.links],
            "timing_ms": self.timing_ms,
            "candidates": list(self.candidates),
        }


def held_unchanged(before: JobPlan, after_routes: Sequence[Route], after_conf: Configuration,
                   after_heater: np.ndarray, held: Sequence[int]) -> bool:
    """True when each held link's route, its TBUs' states and their heater values are identical.

    Compares bit for bit: the hops, ``cross_fraction`` at the held TBUs, and the heater
    values of both arms of every held TBU (``np.array_equal``, no tolerance).
    """
    if any(before.links[i].route != after_routes[i] for i in held):
        return False
    tbus = np.array(sorted({t for i in held for t in before.links[i].route.tbus}), dtype=int)
    if tbus.size == 0:
        return True
    channels = np.concatenate([2 * tbus, 2 * tbus + 1])
    return bool(np.array_equal(before.configuration.cross_fraction[tbus], after_conf.cross_fraction[tbus])
                and np.array_equal(before.heater[channels], after_heater[channels]))


@dataclass(frozen=True)
class _Candidate:
    name: str | None
    job: Job
    routes: list[Route]
    losses: list[float]
    conf: Configuration
    changed: np.ndarray


def _candidate(fabric: Fabric, before: JobPlan, job: Job, affected: list[int], failed: dict[int, str],
               params: TBUParams | None, park_freed: bool, name: str | None,
               graph: RoutingGraph | None = None) -> _Candidate:
    mesh = fabric.mesh
    pairs = link_ports(fabric, job.links)
    held = [i for i in range(len(job.links)) if i not in affected]
    old = before.routes
    for i in held:  # substituting one accelerator must not move anyone else's lanes
        if (old[i].src, old[i].dst) != pairs[i]:
            raise FabricError(f"internal: link {job.links[i]} changed ports during a splice")
    held_routes = [old[i] for i in held]
    graph = graph or held_graph(mesh, held_routes, failed, params)
    new = route_links(mesh, [pairs[i] for i in affected], held=held_routes, failed=failed,
                      params=params, graph=graph)
    routes = list(old)
    for i, r in zip(affected, new, strict=True):
        routes[i] = r
    split = before.configuration.cross_fraction.copy()
    if park_freed:
        live = {t for r in routes for t in r.tbus}
        freed = [t for i in affected for t in old[i].tbus if t not in live]
        split[freed] = 1.0 if PARK_STATE == "cross" else 0.0
    for r in new:
        for t, s in r.states().items():
            split[t] = 1.0 if s == "cross" else 0.0
    split = _stuck_states(split, failed)
    conf = Configuration(split, tuple(routes))
    graph_losses = [route_loss_db(graph, r) for r in new]
    losses = [before.links[i].loss_db for i in range(len(routes))]
    for i, loss in zip(affected, graph_losses, strict=True):
        losses[i] = loss
    return _Candidate(name, job, routes, losses, conf, conf.changed_tbus(before.configuration))


def _finish(fabric: Fabric, before: JobPlan, cand: _Candidate, affected: list[int], failed: dict[int, str],
            label: str, heater_map: CurrentMap | None, params: TBUParams | None,
            defaults: PhysicsDefaults | None, required_margin_db: float, max_current_ma: float,
            timing: TimingModel, t0: float, candidates: list[dict[str, Any]],
            failed_accelerators: tuple[str, ...]) -> Recovery:
    mesh = fabric.mesh
    results = evaluate(fabric, cand.job.links, cand.routes, cand.conf, params=params, failed=failed,
                       defaults=defaults, required_margin_db=required_margin_db, loss_db=cand.losses)
    bad = [results[i] for i in affected if not results[i].budget_ok]
    if bad:
        raise FabricError(f"{bad[0].link[0]}->{bad[0].link[1]} refused: {bad[0].reason}")
    wanted, unit = heater_values(cand.conf, heater_map, max_current_ma)
    held_idx = [i for i in range(len(cand.routes)) if i not in affected]
    held_tbus = {t for i in held_idx for t in cand.routes[i].tbus}
    held_ch = np.array(sorted(c for t in held_tbus for c in (2 * t, 2 * t + 1)), dtype=int)
    # Held channels are never written: a crosstalk-compensating map may ask for a tiny
    # change there, which we report as drift instead of touching a live link.
    writable = np.ones(mesh.n_heaters, dtype=bool)
    writable[held_ch] = False
    delta = np.abs(wanted - before.heater)
    write = np.flatnonzero(writable & (delta > WRITE_RESOLUTION))
    applied = before.heater.copy()
    applied[write] = wanted[write]
    drift = float(delta[held_ch].max()) if held_ch.size else 0.0
    program = {int(ch): float(wanted[ch]) for ch in write}
    plan = JobPlan(cand.job, tuple(results), cand.conf, applied, unit, dict(failed), failed_accelerators)
    same = held_unchanged(before, cand.routes, cand.conf, applied, held_idx)
    compute_ms = (time.perf_counter() - t0) * 1e3
    relock = max((fabric.lane(cand.routes[i].dst).relock_ms for i in affected), default=0.0)
    if timing.relock_ms is not None:
        relock = timing.relock_ms
    return Recovery(label, cand.name, plan, tuple(affected), tuple(int(t) for t in cand.changed), program,
                    same, drift, recovery_timing(timing, compute_ms, program, relock, len(affected),
                                                 max_phase_step_rad=_phase_step(delta, write, unit)),
                    tuple(candidates))


# ---------------------------------------------------------------------------------------
# Failover
# ---------------------------------------------------------------------------------------
def failover(
    fabric: Fabric,
    job: Job,
    failed: str,
    current_plan: JobPlan,
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
    max_current_ma: float = MAX_CURRENT_MA,
    park_freed: bool = False,
) -> Recovery:
    """Replace accelerator ``failed`` of the running ``job`` by the best spare, hitlessly.

    The spare minimising the worst new link loss wins (ties: fewest TBUs changed). Only
    the links that touched ``failed`` are re-routed; the others' TBUs are reserved, so
    they stay bit-identical. ``park_freed`` parks the TBUs the old links no longer use
    (more heater writes); by default they are left as they are: they carry no light from
    a live transmitter, and the circuit check of the whole new configuration (ACR against
    every live receiver) is what decides that this is safe.

    Raises:
        FabricError: ``failed`` is not in the job, no spare is left (the message names the
            spares and what they already replace), or no spare can be spliced in (the
            message gives each spare's reason).
    """
    t0 = time.perf_counter()
    timing = timing or TimingModel()
    if job is not current_plan.job and job != current_plan.job:
        raise FabricError("the job does not match the plan it is said to run on")
    if failed not in job.accelerators:
        raise FabricError(f"{failed} is not in job {job.name!r} ({', '.join(job.accelerators)}); "
                          "nothing to fail over")
    dead = (*current_plan.failed_accelerators, failed)
    spares = [s for s in fabric.spares if s not in job.accelerators and s not in dead]
    if not spares:
        used = [s for s in fabric.spares if s in job.accelerators]
        gone = [s for s in fabric.spares if s in dead]
        detail = "; ".join(x for x in (
            f"in use: {', '.join(used)}" if used else "", f"failed: {', '.join(gone)}" if gone else "",
        ) if x) or "the fabric declares none"
        raise FabricError(f"no spare accelerator left to replace {failed} ({detail}); "
                          "cable another spare to the mesh, or shrink the job")
    affected = [i for i, (a, b) in enumerate(job.links) if failed in (a, b)]
    failed_tbus = dict(current_plan.failed_tbus)
    cands: list[_Candidate] = []
    table: list[dict[str, Any]] = []
    # Every spare is routed around the same held links: build their graph once.
    held_routes = [r for i, r in enumerate(current_plan.routes) if i not in affected]
    graph = held_graph(fabric.mesh, held_routes, failed_tbus, params)
    for s in spares:
        new_job = job.substitute(failed, s)
        try:
            check_job(fabric, new_job)
            c = _candidate(fabric, current_plan, new_job, affected, failed_tbus, params, park_freed, s,
                           graph)
        except (RoutingError, FabricError) as exc:
            table.append({"spare": s, "ok": False, "reason": str(exc)})
            continue
        worst = max((c.losses[i] for i in affected), default=0.0)
        table.append({"spare": s, "ok": True, "worst_new_loss_db": worst, "changed_tbus": len(c.changed)})
        cands.append(c)
    # Losses are sums of per-TBU numbers; round so float noise cannot beat the tie-break.
    order = sorted(range(len(cands)), key=lambda k: (round(table_loss(table, cands[k].name), 9),
                                                      len(cands[k].changed), k))
    reasons = [f"{row['spare']}: {row['reason']}" for row in table if not row["ok"]]
    for k in order:
        try:
            return _finish(fabric, current_plan, cands[k], affected, failed_tbus, failed, heater_map, params,
                           defaults, required_margin_db, max_current_ma, timing, t0, table, dead)
        except FabricError as exc:
            reasons.append(f"{cands[k].name}: {exc}")
    raise FabricError(f"no spare can be spliced in for {failed}: " + "; ".join(reasons))


def table_loss(table: Sequence[Mapping[str, Any]], name: str | None) -> float:
    """Worst new loss (dB) recorded for candidate ``name``."""
    for row in table:
        if row["spare"] == name:
            return float(row["worst_new_loss_db"])
    return float("inf")


def fail_tbu(
    fabric: Fabric,
    current_plan: JobPlan,
    tbu: int | str,
    how: str = "dead",
    *,
    heater_map: CurrentMap | None = None,
    params: TBUParams | None = None,
    timing: TimingModel | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = 3.0,
    max_current_ma: float = MAX_CURRENT_MA,
) -> Recovery:
    """Re-route only the links through a TBU that died (or got stuck) during the job.

    A link is affected when its route uses the TBU and the TBU can no longer give it its
    state: always for "dead", for a stuck TBU only when the route needs the other state.
    With no link affected the plan is returned unchanged (empty program).
    """
    t0 = time.perf_counter()
    timing = timing or TimingModel()
    mesh = fabric.mesh
    failed = dict(current_plan.failed_tbus)
    try:
        failed.update(parse_failed(mesh, {tbu: how}))
    except RoutingError as exc:
        raise FabricError(str(exc)) from None
    t = mesh.tbu_index(tbu) if not isinstance(tbu, str) or not tbu.isdigit() else int(tbu)
    affected = [i for i, lk in enumerate(current_plan.links)
                if t in lk.route.tbus and (how == "dead" or lk.route.states()[t] != how)]
    job = current_plan.job
    try:
        cand = _candidate(fabric, current_plan, job, affected, failed, params, False, None)
    except RoutingError as exc:
        raise FabricError(f"cannot route around {mesh.tbu_names[t]} ({how}): {exc}") from None
    return _finish(fabric, current_plan, cand, affected, failed, mesh.tbu_names[t], heater_map, params,
                   defaults, required_margin_db, max_current_ma, timing, t0, [],
                   current_plan.failed_accelerators)
