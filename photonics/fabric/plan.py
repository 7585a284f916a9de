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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from photonics.configuration import Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric.jobs import Job, check_job, link_ports
from photonics.fabric.model import Fabric, FabricError
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing import (
    CostModel,
    RoutingGraph,
    budget_routes,
    build_graph,
    negotiate,
    parse_failed,
    route_loss_db,
    solve_exact,
)
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

MAX_CURRENT_MA = 24.0  # Qontrol Q8iv-class full scale (docs/instruments.md)
WRITE_RESOLUTION = 1e-4  # mA (or rad): the 4 decimals the ASCII write carries


class CurrentMap(Protocol):
    """What a heater map offers (``calibration.heater_map.HeaterMap``), seen from photonics."""

    def currents_for(self, configuration: Configuration, max_current_ma: float) -> np.ndarray:
        """Currents (n_heaters,) in mA realising ``configuration``."""
        ...


def map_failed_tbus(heater_map: object) -> dict[int | str, str]:
    """What ``heater_map`` records as failed, as ``failed=`` takes it (TBU name -> state).

    The one mechanism ``lumion route --map`` uses: a calibration map's ``failed_tbus()``
    (dead, stuck bar/cross, and unverified TBUs as "dead", whatever kinds it records). A map
    that records none (the ideal law, no map) gives ``{}``.
    """
    recorded = getattr(heater_map, "failed_tbus", None)
    return dict(recorded()) if callable(recorded) else {}


def failures_with_map(mesh: Mesh, heater_map: object,
                      failed_tbus: Mapping[int | str, str] | None) -> dict[int, str]:
    """TBU index -> state: what the map records as failed, then ``failed_tbus`` (which wins)."""
    return {**parse_failed(mesh, map_failed_tbus(heater_map)), **parse_failed(mesh, failed_tbus)}


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
        recoveries: the recoveries applied to the job so far, oldest first, each as
            :func:`~photonics.fabric.plan_io.recovery_to_dict` gives it (a plan file keeps
            its history; a later refusal never loses the earlier ones).
    """

    job: Job
    links: tuple[LinkResult, ...]
    configuration: Configuration
    heater: np.ndarray
    heater_unit: str
    failed_tbus: dict[int, str] = field(default_factory=dict)
    failed_accelerators: tuple[str, ...] = ()
    recoveries: tuple[dict[str, Any], ...] = ()

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
    required_margin_db: float = REQUIRED_MARGIN_DB,
    loss_db: Sequence[float] | None = None,
) -> list[LinkResult]:
    """Circuit-solve ``configuration`` and budget every link with its ports' own lanes.

    Transmission, ACR and budget come from ``photonics.routing.budget_routes``, the one budget
    check of a route (its ``check_routes``: victims the other
    links' receivers), each link at its TX port's lane's own wavelengths (every channel,
    across its slot: ``photonics.budget.check_wavelengths_nm``), worst case; the budget
    uses the TX port's lane for power and polarization and the RX port's lane for
    sensitivity.
    """
    mesh = fabric.mesh
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    # a lane the chip cannot carry is refused before anything is solved
    budgets = budget_routes(mesh, configuration, routes, params, tx=[fabric.lane(r.src) for r in routes],
                            rx=[fabric.lane(r.dst) for r in routes], defaults=defaults,
                            required_margin_db=required_margin_db, failed=dict(failed or {}))
    losses = list(loss_db) if loss_db is not None else routes_loss_db(mesh, routes, params)
    out = []
    for link, r, (c, b), loss in zip(links, routes, budgets, losses, strict=True):
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


def stuck_states(conf: np.ndarray, failed: Mapping[int, str]) -> np.ndarray:
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
    required_margin_db: float = REQUIRED_MARGIN_DB,
    max_current_ma: float = MAX_CURRENT_MA,
) -> JobPlan:
    """Route every logical link of ``job`` and check it; FabricError when a link cannot close.

    Unused TBUs are parked (``photonics.configuration.PARK_STATE``), stuck TBUs sit in
    their stuck state. The TBUs ``heater_map`` records as failed are avoided as
    ``failed_tbus`` are (:func:`failures_with_map`).
    """
    check_job(fabric, job)
    mesh = fabric.mesh
    failed = failures_with_map(mesh, heater_map, failed_tbus)  # never route through a failed TBU
    pairs = link_ports(fabric, job.links)
    try:
        routes = route_links(mesh, pairs, failed=failed, params=params)
    except RoutingError as exc:
        raise FabricError(f"job {job.name!r} cannot be routed: {exc}") from None
    conf = Configuration(stuck_states(Configuration.from_routes(mesh, routes).cross_fraction, failed),
                         tuple(routes), mesh=mesh)
    results = evaluate(fabric, job.links, routes, conf, params=params, failed=failed,
                       defaults=defaults, required_margin_db=required_margin_db)
    bad = [r for r in results if not r.budget_ok]
    if bad:
        raise FabricError(f"job {job.name!r}: link {bad[0].link[0]}->{bad[0].link[1]} refused: "
                          f"{bad[0].reason}")
    heater, unit = heater_values(conf, heater_map, max_current_ma)
    return JobPlan(job, tuple(results), conf, heater, unit, failed)


