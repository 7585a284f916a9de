"""The routing API: :func:`route` and :func:`route_many` return a verified :class:`Plan`.

Pipeline: parse the request (ports by index or name) -> build the routing graph (costs
from the chip's per-TBU parameters, failed and reserved TBUs) -> route ("fast":
negotiated rip-up-and-reroute; "exact": integer program; "auto": fast, then exact) ->
build the :class:`~photonics.configuration.Configuration` (unused TBUs parked, stuck TBUs
in their stuck state) -> circuit-solve it at the transmitter lane's wavelengths (every
channel, across its slot: :mod:`photonics.routing.verify`) -> link budget per route.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from photonics.budget import TRANSCEIVER_PROFILES, LinkBudget, Transceiver, check_band
from photonics.configuration import Configuration, Route
from photonics.errors import MeshSpecError, RoutingError, StateError
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing.exact import solve_exact
from photonics.routing.graph import CostModel, RoutingGraph, build_graph
from photonics.routing.many import negotiate
from photonics.routing.single import conflicts, route_cost, route_loss_db
from photonics.routing.verify import RouteCheck, budget_refusal, budget_routes
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

DEFAULT_TRANSCEIVER = "dwdm-10g-zr"
METHODS = ("fast", "exact", "auto")


@dataclass(frozen=True)
class RouteResult:
    """One planned route and its figures (dB; transmission is negative, loss positive).

    Attributes:
        route: the hops.
        loss_db: planned loss, sum of TBU insertion and link losses from the chip's params.
        cost_db: routing cost (loss plus penalties) the router minimised.
        check: circuit-solve figures (transmission, worst leak, ACR), worst over the
            lane's wavelengths.
        budget: link budget using the circuit-solve transmission as the mesh loss.
    """

    route: Route
    loss_db: float
    cost_db: float
    check: RouteCheck
    budget: LinkBudget

    @property
    def transmission_db(self) -> float:
        """Power transmission src -> dst from the circuit solve (dB, <= 0)."""
        return self.check.transmission_db

    @property
    def acr_db(self) -> float:
        """Attenuation-to-crosstalk ratio (dB); see :mod:`photonics.routing.verify`."""
        return self.check.acr_db

    @property
    def margin_db(self) -> float:
        """Received power above the receiver's sensitivity (dB)."""
        return self.budget.margin_db

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form (names, dB)."""
        return {
            "src": mesh.port_names[self.route.src],
            "dst": mesh.port_names[self.route.dst],
            "tbus": [{"tbu": mesh.tbu_names[h.tbu], "state": h.state} for h in self.route.hops],
            "loss_db": self.loss_db,
            "transmission_db": self.transmission_db,
            "acr_db": self.acr_db,
            "acr_wavelength_nm": _finite_or_none(self.check.acr_wavelength_nm),
            "n_wavelengths": len(self.check.wavelengths_nm),
            "worst_leak_db": self.check.worst_leak_db,
            "leak_in_db": self.check.leak_in_db,
            "margin_db": self.margin_db,
            "budget_ok": self.budget.ok,
        }


@dataclass(frozen=True, eq=False)
class Plan:
    """A verified, conflict-free set of routes and the configuration realising them.

    Attributes:
        routes: one :class:`RouteResult` per requested pair, in request order.
        configuration: per-TBU state (unused TBUs parked, stuck TBUs in their state).
        method: "fast" or "exact", whichever produced the routes.
        optimal: True when the routes are proved optimal for the objective.
        objective: "total" or "worst".
        failed: ``{TBU index: "dead"|"bar"|"cross"}`` the plan respects.
        passes: negotiation passes used by the fast router (0 for exact).
    """

    routes: tuple[RouteResult, ...]
    configuration: Configuration
    method: str
    optimal: bool
    objective: str
    failed: dict[int, str] = field(default_factory=dict)
    passes: int = 0

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form, as printed by ``lumion route --json``."""
        return {
            "method": self.method,
            "optimal": self.optimal,
            "objective": self.objective,
            "failed": {mesh.tbu_names[t]: how for t, how in sorted(self.failed.items())},
            "routes": [r.to_dict(mesh) for r in self.routes],
            "configuration": self.configuration.to_dict(mesh),
        }


def parse_pairs(mesh: Mesh, pairs: Iterable[tuple[int | str, int | str]]) -> list[tuple[int, int]]:
    """Port pairs as indices; RoutingError for unknown ports, a port used twice or src == dst."""
    out: list[tuple[int, int]] = []
    seen: dict[int, str] = {}
    for k, pair in enumerate(pairs):
        try:
            src, dst = pair
            s, d = mesh.port_index(src), mesh.port_index(dst)
        except MeshSpecError as exc:
            raise RoutingError(str(exc)) from None
        except (TypeError, ValueError):
            raise RoutingError(f"connection {k} must be a (source, destination) pair, not {pair!r}") from None
        if s == d:
            raise RoutingError(f"{mesh.port_names[s]} cannot connect to itself")
        for p in (s, d):
            if p in seen:
                raise RoutingError(f"{mesh.port_names[p]} is used twice ({seen[p]} and "
                                   f"{mesh.port_names[s]}->{mesh.port_names[d]}); a mesh port "
                                   "carries one connection")
            seen[p] = f"{mesh.port_names[s]}->{mesh.port_names[d]}"
        out.append((s, d))
    if not out:
        raise RoutingError("no connections requested")
    return out


def route(mesh: Mesh, src: int | str, dst: int | str, **options: Any) -> Plan:
    """One route from ``src`` to ``dst`` (index, ``n`` or ``port:n``); see :func:`route_many`.

    Example:
        >>> from photonics.topology import smartlight
        >>> plan = route(smartlight(), "port:5", 28)
        >>> r = plan.routes[0]
        >>> len(r.route.hops), round(r.loss_db, 2), round(r.transmission_db, 2), r.acr_db > 30
        (11, 5.5, -5.51, True)
    """
    return route_many(mesh, [(src, dst)], **options)


def route_many(
    mesh: Mesh,
    pairs: Sequence[tuple[int | str, int | str]],
    *,
    method: str = "auto",
    optimal: bool = False,
    objective: str = "total",
    failed: Mapping[int | str, str] | None = None,
    reserved: Iterable[int | str] = (),
    params: TBUParams | None = None,
    costs: CostModel | None = None,
    defaults: PhysicsDefaults | None = None,
    transceiver: Transceiver | str = DEFAULT_TRANSCEIVER,
    receiver: Transceiver | str | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    check_budget: bool = True,
    wavelengths_nm: Sequence[float] | None = None,
    time_limit_s: float | None = 120.0,
) -> Plan:
    """Conflict-free routes for every (source, destination) pair, verified by the circuit solve.

    Args:
        mesh: topology.
        pairs: (source, destination) mesh ports, each by index, ``"n"`` or ``"port:n"``.
        method: "fast" (negotiated rip-up-and-reroute), "exact" (integer program) or
            "auto" (fast, then exact when the fast router gives up).
        optimal: prove the result optimal (uses the integer program for >1 route).
        objective: "total" (sum of route costs) or "worst" (the costliest route); the
            fast router always minimises each route's cost in turn.
        failed: ``{TBU: "dead"|"bar"|"cross"}``; dead TBUs are never used, stuck ones only
            in their stuck state.
        reserved: TBUs that cost ``costs.reserved_db`` extra (``inf`` forbids them).
        params: the chip's per-TBU physics (e.g. ``fabricated_params``); nominal when
            omitted. Used for the losses the router minimises and for the circuit check.
        costs: penalties (heater power, reserved, stuck); see :class:`CostModel`.
        defaults: physics defaults for the link budget (facet and access losses).
        transceiver: transmitter lane profile (name from ``TRANSCEIVER_PROFILES`` or a
            :class:`Transceiver`); the C-band ``dwdm-10g-zr`` lane by default (the chip
            is a C-band device: 850 nm and O-band lanes are refused, BudgetError).
        receiver: receiver lane profile (the transmitter's when omitted).
        required_margin_db: margin every link must keep above the receiver sensitivity.
        check_budget: refuse plans with a link that cannot close its budget.
        wavelengths_nm: extra wavelengths (nm) every route is also checked at; routes are
            always checked at the transmitter lane's own channels across their slots
            (:func:`photonics.budget.check_wavelengths_nm`), never at the chip's centre
            alone.
        time_limit_s: limit for the integer program (s); None for none.

    Raises:
        RoutingError: unknown port or TBU, a port used twice, no path, no conflict-free
            set of routes, or a link that cannot close its budget; the message says which.
    """
    if method not in METHODS:
        raise RoutingError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    idx = parse_pairs(mesh, pairs)
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    tx = _transceiver(transceiver)
    rx = tx if receiver is None else _transceiver(receiver)
    graph = build_graph(mesh, params, failed, reserved, costs, defaults)
    wl = () if wavelengths_nm is None else tuple(float(w) for w in np.atleast_1d(wavelengths_nm))
    check_band(tx, rx, defaults)  # no plan is checked at wavelengths the chip cannot carry
    _check_extra_band(wl, defaults)

    def finish(routes: list[Route], how: str, proved: bool, passes: int, obj: str) -> Plan:
        return _assemble(graph, routes, how, proved, passes, obj, params, wl, tx, rx,
                         required_margin_db, defaults)

    use_exact = method == "exact" or (optimal and len(idx) > 1 and method == "auto")
    if optimal and method == "fast" and len(idx) > 1:
        raise RoutingError("optimal=True needs the exact method (or auto) for more than one route")
    plan: Plan | None = None
    if not use_exact:
        routes, passes = negotiate(graph, idx)
        if routes is not None:
            plan = finish(routes, "fast", len(idx) == 1, passes, "total")
        elif method == "fast":
            raise RoutingError("the fast router found no conflict-free set of routes "
                               f"in {passes} passes; try the exact method (--exact)")
    if plan is None:
        incumbent = None
        if method == "auto" and use_exact:  # a fast solution bounds (and shrinks) the program
            fast, _ = negotiate(graph, idx)
            if fast is not None:
                costs_db = [route_cost(graph, r) for r in fast]
                incumbent = sum(costs_db) if objective == "total" else max(costs_db)
        res = solve_exact(graph, idx, objective, time_limit_s, incumbent)
        plan = finish(res.routes, "exact", res.optimal, 0, objective)
    refused = [r for r in plan.routes if not r.budget.ok]
    tried_worst = plan.method == "exact" and objective == "worst"
    if refused and check_budget and method != "fast" and not tried_worst:
        # The plan that minimises the worst loss is the best chance for every link to close.
        res = solve_exact(graph, idx, "worst", time_limit_s)
        plan = finish(res.routes, "exact", res.optimal, 0, "worst")
        refused = [r for r in plan.routes if not r.budget.ok]
    if refused and check_budget:
        raise RoutingError(budget_refusal(mesh, refused[0].route, refused[0].budget))
    return plan


def _check_extra_band(wavelengths_nm: Sequence[float], defaults: PhysicsDefaults | None) -> None:
    """RoutingError for an extra check wavelength outside the chip's band (nm)."""
    lo, hi = (defaults or PhysicsDefaults()).band_nm
    out = [w for w in wavelengths_nm if not lo <= w <= hi]
    if out:
        raise RoutingError(f"check wavelength {out[0]:g} nm lies outside the chip's band {lo:g}-{hi:g} nm; "
                           "give wavelengths inside it")


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _transceiver(spec: Transceiver | str) -> Transceiver:
    if isinstance(spec, Transceiver):
        return spec
    if spec not in TRANSCEIVER_PROFILES:
        raise RoutingError(f"unknown transceiver {spec!r}; choose one of {', '.join(TRANSCEIVER_PROFILES)}")
    return TRANSCEIVER_PROFILES[spec]


def configuration_for(mesh: Mesh, routes: Sequence[Route], failed: Mapping[int, str]) -> Configuration:
    """Routes' states, unused TBUs parked, stuck TBUs in their stuck state."""
    try:
        conf = Configuration.from_routes(mesh, routes)
    except StateError as exc:
        raise RoutingError(f"internal: routes conflict ({exc})") from exc
    split = conf.cross_fraction.copy()
    for t, how in failed.items():
        if how in ("bar", "cross"):
            split[t] = 1.0 if how == "cross" else 0.0
    return Configuration(split, conf.routes, {"failed": dict(failed)}, mesh=mesh)


def _assemble(graph: RoutingGraph, routes: list[Route], method: str, optimal: bool, passes: int,
              objective: str, params: TBUParams, wl: tuple[float, ...], tx: Transceiver,
              rx: Transceiver, margin: float, defaults: PhysicsDefaults | None) -> Plan:
    mesh = graph.mesh
    problems = conflicts(mesh, routes)
    if problems:  # the routers guarantee this; a failure here is a bug, said loudly
        raise RoutingError("internal: planned routes break the rules: " + "; ".join(problems))
    conf = configuration_for(mesh, routes, graph.failed)
    budgets = budget_routes(mesh, conf, routes, params, tx=tx, rx=rx, defaults=defaults,
                            required_margin_db=margin, wavelengths_nm=wl, failed=graph.failed)
    results = tuple(
        RouteResult(route=r, loss_db=route_loss_db(graph, r), cost_db=route_cost(graph, r), check=c, budget=b)
        for r, (c, b) in zip(routes, budgets, strict=True)
    )
    return Plan(routes=results, configuration=conf, method=method, optimal=optimal,
                objective=objective, failed=dict(graph.failed), passes=passes)
