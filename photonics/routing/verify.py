"""Check a plan with the circuit solve: transmission and attenuation-to-crosstalk ratio per route.

Every route is checked at **its own lane's wavelengths**: each channel the transmitter
sends, across the channel's slot (:func:`photonics.budget.check_wavelengths_nm`: centre
+- half the channel width, every ``CHANNEL_STEP_NM``), not at the chip's 1550 nm centre.
One solve covers every lane of the plan (the union of their points); each route's figures
use only its own source's points. This module is the one place a route is checked:
routing, the fabric's ``evaluate`` (placement, failover, TBU repair, phases, collectives,
the control plane) and the schedules' bidirectional check all come here; a route's link budget
too (:func:`budget_routes`: ``lumion route``'s plans, the fabric's links and the configurations
``lumion program`` is handed).

Definitions (powers relative to 1 W launched into the route's source port, worst case
over the wavelengths the route is checked at):

* ``transmission_db`` of route k = 10 log10 |S[dst_k, src_k]|^2 (negative: a loss).
* ``worst_leak_db`` = 10 log10 max_p |S[p, src_k]|^2 over the *victim* ports p: the
  destinations of the other routes of the plan; for a plan of one route, every mesh port
  other than its own source and destination (any of them may carry a receiver later).
  A victim is counted whatever its receiver detects (a broadband InGaAs receiver, the
  default, sees every C-band wavelength): the conservative case.
* ``acr_db`` (attenuation-to-crosstalk ratio) = min over the route's wavelengths of
  transmission - worst leak: how far the routed signal stands above the worst copy of it
  that reaches another receiver.
* ``leak_in_db`` = 10 log10 max_j |S[dst_k, src_j]|^2 over the other routes' sources,
  each at its own lane's wavelengths: the worst foreign signal arriving at this route's
  receiver (-inf for a single route).

A TBU that is "dead" cannot be heated, so it is solved with zero heater phase (its arms
keep their passive offsets); a stuck TBU is solved in its stuck state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from photonics.budget import LinkBudget, Transceiver, check_band, check_wavelengths_nm, link_budget
from photonics.circuit import solve
from photonics.configuration import Configuration, Route
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.state import MeshState
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

Lanes = Transceiver | Sequence[Transceiver] | None
"""The TX lane of every route (one per route), one lane for all, or None (the default lane)."""


@dataclass(frozen=True)
class RouteCheck:
    """Circuit-solve figures of one route (dB, worst case over its wavelengths, nm).

    ``acr_wavelength_nm`` is where the ACR is worst (NaN when there is no victim);
    ``wavelengths_nm`` are the points the route was checked at.
    """

    transmission_db: float
    worst_leak_db: float
    worst_leak_port: int
    acr_db: float
    leak_in_db: float
    acr_wavelength_nm: float = float("nan")
    wavelengths_nm: tuple[float, ...] = ()


def plan_state(
    configuration: Configuration, params: TBUParams, failed: Mapping[int, str] | None = None
) -> MeshState:
    """Heater phases realising ``configuration`` on a chip with ``params``; dead TBUs get none."""
    state = configuration.heater_state(params.offset_top, params.offset_bot)
    dead = [t for t, how in (failed or {}).items() if how == "dead"]
    if dead:
        top, bot = state.phi_top.copy(), state.phi_bot.copy()
        top[dead] = 0.0
        bot[dead] = 0.0
        state = MeshState(top, bot)
    return state


def route_wavelengths_nm(n_routes: int, lanes: Lanes = None,
                         wavelengths_nm: Sequence[float] | np.ndarray | None = None
                         ) -> list[tuple[float, ...]]:
    """The wavelengths (nm, ascending) each of ``n_routes`` routes is checked at.

    A route's lane's points (:func:`~photonics.budget.check_wavelengths_nm`) plus every
    extra ``wavelengths_nm``; with neither, the default lane's (``dwdm-10g-zr``, channel
    34 at 1550.12 nm); with only ``wavelengths_nm``, exactly those (a sweep).

    Example:
        >>> ch59 = Transceiver(name="ch59", wavelengths_nm=(1530.33,), channel_width_nm=0.0)
        >>> route_wavelengths_nm(2, ch59, [1550.0])
        [(1530.33, 1550.0), (1530.33, 1550.0)]
    """
    extra = {round(float(w), 6) for w in np.atleast_1d(np.asarray(
        [] if wavelengths_nm is None else wavelengths_nm, dtype=float))}
    if any(not w > 0 for w in extra):
        raise ValueError(f"wavelengths must be positive (nm), got {sorted(extra)}")
    if lanes is None:
        lanes = None if extra else Transceiver()
    if lanes is None:
        per_route: list[set[float]] = [set() for _ in range(n_routes)]
    elif isinstance(lanes, Transceiver):
        per_route = [set(check_wavelengths_nm(lanes))] * n_routes
    else:
        if len(lanes) != n_routes:
            raise ValueError(f"give one lane per route: {len(lanes)} lanes for {n_routes} routes")
        per_route = [set(check_wavelengths_nm(lane)) for lane in lanes]
    return [tuple(sorted(points | extra)) for points in per_route]


def lane_power(
    mesh: Mesh,
    configuration: Configuration,
    sources: Sequence[int],
    wavelengths_nm: Sequence[Sequence[float]],
    params: TBUParams,
    failed: Mapping[int, str] | None = None,
) -> list[np.ndarray]:
    """|S[p, source]|^2 at each source's own wavelengths: one (W_k, n_ports) array per source.

    One circuit solve of ``configuration`` over the union of all sources' wavelengths
    (nm); row ``w`` of array k is the power at ``wavelengths_nm[k][w]`` for 1 W into
    mesh port ``sources[k]`` (floored at 1e-300 so dB stay finite).
    """
    if len(sources) != len(wavelengths_nm):
        raise ValueError("give the wavelengths of every source")
    union = sorted({float(w) for ws in wavelengths_nm for w in ws})
    row = {w: i for i, w in enumerate(union)}
    inputs = sorted({int(s) for s in sources})
    col = {s: k for k, s in enumerate(inputs)}
    state = plan_state(configuration, params, failed)
    S = solve(mesh, state, np.asarray(union, float), params, inputs=inputs)[0]  # (W, P, K)
    power = np.maximum(np.abs(S) ** 2, 1e-300)
    return [power[[row[float(w)] for w in ws], :, col[int(s)]]
            for s, ws in zip(sources, wavelengths_nm, strict=True)]


def check_routes(
    mesh: Mesh,
    configuration: Configuration,
    routes: Sequence[Route],
    params: TBUParams | None = None,
    *,
    wavelengths_nm: Sequence[float] | np.ndarray | None = None,
    failed: Mapping[int, str] | None = None,
    lanes: Lanes = None,
) -> list[RouteCheck]:
    """Solve the mesh in ``configuration`` and measure every route (see module docstring).

    Each route is checked at :func:`route_wavelengths_nm`: its TX lane's channels
    (``lanes``: one per route, or one for all) plus any extra ``wavelengths_nm`` (nm);
    the default lane's when neither is given, exactly ``wavelengths_nm`` when only they are.
    They are keywords so that no caller passes the chip's centre by position, as before.

    Example:
        >>> from photonics.routing import route
        >>> from photonics.topology import smartlight
        >>> m = smartlight()
        >>> plan = route(m, 5, 28)
        >>> c = check_routes(m, plan.configuration, [plan.routes[0].route])[0]
        >>> round(c.transmission_db, 2), round(c.acr_db, 1), len(c.wavelengths_nm)
        (-5.51, 31.3, 33)
        >>> at_centre = check_routes(m, plan.configuration, [plan.routes[0].route], wavelengths_nm=[1550.0])
        >>> round(at_centre[0].acr_db, 1)  # the chip's centre only: 1.2 dB too optimistic
        32.5
    """
    if not routes:
        return []
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    srcs = [r.src for r in routes]
    dsts = [r.dst for r in routes]
    waves = route_wavelengths_nm(len(routes), lanes, wavelengths_nm)
    powers = lane_power(mesh, configuration, srcs, waves, params, failed)
    out = []
    for k, (s, d) in enumerate(zip(srcs, dsts, strict=True)):
        victims = [p for p in dsts if p != d] if len(routes) > 1 else \
            [p for p in range(mesh.n_ports) if p not in (s, d)]
        out.append(_figures(powers, k, d, victims, waves[k]))
    return out


def _figures(powers: Sequence[np.ndarray], k: int, dst: int, victims: Sequence[int],
             waves: tuple[float, ...]) -> RouteCheck:
    """Route k's figures from every source's powers (see the module docstring)."""
    power = powers[k]  # (W_k, P)
    signal = power[:, dst]
    if victims:
        leak = power[:, victims]  # (W_k, V)
        ratio = 10 * np.log10(signal / leak.max(axis=1))
        acr, at = float(ratio.min()), waves[int(np.argmin(ratio))]
        worst_leak = float(10 * np.log10(leak.max()))
        worst_port = int(victims[int(np.argmax(leak.max(axis=0)))])
    else:
        acr, at, worst_leak, worst_port = float("inf"), float("nan"), float("-inf"), -1
    others = [float(p[:, dst].max()) for j, p in enumerate(powers) if j != k]
    leak_in = float(10 * np.log10(max(others))) if others else float("-inf")
    return RouteCheck(transmission_db=float(10 * np.log10(signal.min())), worst_leak_db=worst_leak,
                      worst_leak_port=worst_port, acr_db=acr, leak_in_db=leak_in,
                      acr_wavelength_nm=at, wavelengths_nm=waves)


def budget_routes(
    mesh: Mesh,
    configuration: Configuration,
    routes: Sequence[Route],
    params: TBUParams | None = None,
    *,
    tx: Transceiver | Sequence[Transceiver],
    rx: Transceiver | Sequence[Transceiver] | None = None,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    wavelengths_nm: Sequence[float] | np.ndarray | None = None,
    failed: Mapping[int, str] | None = None,
) -> list[tuple[RouteCheck, LinkBudget]]:
    """Every route's :func:`check_routes` figures at its TX lane's wavelengths and its link budget
    (:func:`photonics.budget.link_budget`, the circuit solve's worst transmission as the mesh loss).

    ``tx``/``rx``: each route's transmitter and receiver lane (one per route, or one for all;
    the receiver is the transmitter's lane when omitted). A lane the chip cannot carry, or a
    receiver that cannot detect its transmitter, raises :class:`~photonics.errors.BudgetError`
    before anything is solved. The one budget check of a route: :func:`photonics.routing.route_many`'s
    plans, the fabric's links and ``lumion program``'s configurations all come here.

    Example:
        >>> from photonics.routing import route
        >>> from photonics.topology import smartlight
        >>> m = smartlight()
        >>> plan = route(m, 5, 28)
        >>> (c, b), = budget_routes(m, plan.configuration, [plan.routes[0].route], tx=Transceiver())
        >>> round(b.margin_db, 2), b.ok, len(c.wavelengths_nm)
        (6.49, True, 33)
    """
    n = len(routes)
    txs = [tx] * n if isinstance(tx, Transceiver) else list(tx)
    rxs = txs if rx is None else [rx] * n if isinstance(rx, Transceiver) else list(rx)
    if len(txs) != n or len(rxs) != n:
        raise ValueError(f"give one lane per route: {len(txs)} TX and {len(rxs)} RX lanes for {n} routes")
    for t, r in zip(txs, rxs, strict=True):  # a lane the chip cannot carry is refused before any solve
        check_band(t, r, defaults)
    checks = check_routes(mesh, configuration, routes, params, wavelengths_nm=wavelengths_nm,
                          failed=failed, lanes=txs)
    return [(c, link_budget(-c.transmission_db, t, r, defaults, required_margin_db))
            for c, t, r in zip(checks, txs, rxs, strict=True)]


def budget_refusal(mesh: Mesh, route: Route, budget: LinkBudget, context: str = "") -> str:
    """The one line refusing a route whose link does not close: ``port:3->port:17 refused: <why>``
    (``context``, e.g. the lane it was held to, goes in parentheses before the reason).
    """
    where = f" ({context})" if context else ""
    return f"{mesh.port_names[route.src]}->{mesh.port_names[route.dst]} refused{where}: {budget.reason}"
