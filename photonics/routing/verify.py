"""Check a plan with the circuit solve: transmission and attenuation-to-crosstalk ratio per route.

Definitions (powers relative to 1 W launched into the route's source port, worst case
over the wavelengths checked):

* ``transmission_db`` of route k = 10 log10 |S[dst_k, src_k]|^2 (negative: a loss).
* ``worst_leak_db`` = 10 log10 max_p |S[p, src_k]|^2 over the *victim* ports p: the
  destinations of the other routes of the plan; for a plan of one route, every mesh port
  other than its own source and destination (any of them may carry a receiver later).
* ``acr_db`` (attenuation-to-crosstalk ratio) = transmission_db - worst_leak_db: how far
  the routed signal stands above the worst copy of it that reaches another receiver.
* ``leak_in_db`` = 10 log10 max_j |S[dst_k, src_j]|^2 over the other routes' sources:
  the worst foreign signal arriving at this route's receiver (-inf for a single route).

A TBU that is "dead" cannot be heated, so it is solved with zero heater phase (its arms
keep their passive offsets); a stuck TBU is solved in its stuck state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from photonics.circuit import solve
from photonics.configuration import Configuration, Route
from photonics.physics import TBUParams, nominal_params
from photonics.state import MeshState
from photonics.topology import Mesh


@dataclass(frozen=True)
class RouteCheck:
    """Circuit-solve figures of one route (dB, worst case over the wavelengths)."""

    transmission_db: float
    worst_leak_db: float
    worst_leak_port: int
    acr_db: float
    leak_in_db: float


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


def check_routes(
    mesh: Mesh,
    configuration: Configuration,
    routes: Sequence[Route],
    params: TBUParams | None = None,
    wavelengths_nm: Sequence[float] | np.ndarray = (1550.0,),
    failed: Mapping[int, str] | None = None,
) -> list[RouteCheck]:
    """Solve the mesh in ``configuration`` and measure every route (see module docstring).

    Example:
        >>> from photonics.routing import route
        >>> from photonics.topology import smartlight
        >>> m = smartlight()
        >>> plan = route(m, 5, 28)
        >>> c = check_routes(m, plan.configuration, [plan.routes[0].route])[0]
        >>> round(c.transmission_db, 2), round(c.acr_db, 1)
        (-5.51, 32.5)
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    srcs = [r.src for r in routes]
    dsts = [r.dst for r in routes]
    state = plan_state(configuration, params, failed)
    S = solve(mesh, state, np.asarray(wavelengths_nm, float), params, inputs=srcs)[0]  # (W, P, K)
    power = np.maximum(np.abs(S) ** 2, 1e-300)
    out = []
    for k, (s, d) in enumerate(zip(srcs, dsts, strict=True)):
        victims = [p for p in dsts if p != d] if len(routes) > 1 else \
            [p for p in range(mesh.n_ports) if p not in (s, d)]
        signal = power[:, d, k]
        if victims:
            leak = power[:, victims, k]  # (W, V)
            worst = int(np.argmax(leak.max(axis=0)))
            acr = float(np.min(10 * np.log10(signal / leak.max(axis=1))))
            worst_leak = float(10 * np.log10(leak.max()))
            worst_port = victims[worst]
        else:
            acr, worst_leak, worst_port = float("inf"), float("-inf"), -1
        others = [j for j in range(len(routes)) if j != k]
        leak_in = float(10 * np.log10(power[:, d, others].max())) if others else float("-inf")
        out.append(RouteCheck(
            transmission_db=float(10 * np.log10(signal.min())),
            worst_leak_db=worst_leak, worst_leak_port=worst_port, acr_db=acr, leak_in_db=leak_in,
        ))
    return out
