"""Check a calibration map on the bench: program routes through it, measure what arrives.

Only the Bench protocol is used, so the same check runs on a real chip. Figures per route
(dB, relative to the laser power):

* ``transmission_db``: power at the route's destination port.
* ``worst_leak_db``: the largest power at any other mesh port (the source excluded).
* ``acr_db``: ``transmission_db - worst_leak_db`` (attenuation-to-crosstalk ratio, the
  same definition as ``photonics.routing.verify`` for a single route).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.bench import Bench, settle
from calibration.heater_map import HeaterMap
from calibration.paths import CROSS_EXIT
from photonics.configuration import Configuration, Hop, Route
from photonics.tolerances import ROUTE_TOL_DB  # noqa: F401  (re-exported: the checks on a bench judge by it)
from photonics.topology import Mesh

SETTLE_S = 0.012  # as calibration.options.Options.settle_s: let the heaters settle before reading
# ROUTE_TOL_DB (photonics.tolerances, why 3 dB: there) is re-exported here for the checks
# that measure routes on a bench.


@dataclass(frozen=True)
class RouteReading:
    """Bench figures of one programmed route (dB)."""

    src: int
    dst: int
    transmission_db: float
    worst_leak_db: float
    acr_db: float


def zigzag_route(mesh: Mesh, src: int, bend_at: int | None = None) -> Route:
    """The route light from ``src`` takes with every TBU in cross; optionally one TBU
    (the ``bend_at``-th hop) in bar, which turns it onto another zigzag line.

    A hand-built route that needs no routing engine (hexagonal all-cross lines have no loops).
    """
    peer = mesh.peer()
    g = int(mesh.port_tbu_ports[src])
    hops: list[Hop] = []
    seen: set[int] = set()
    while True:
        tbu, entry = divmod(g, 4)
        if tbu in seen:
            raise ValueError(f"route from port {src} loops at {mesh.tbu_names[tbu]}")
        seen.add(tbu)
        bar = bend_at is not None and len(hops) == bend_at
        exit_ = {0: 2, 2: 0, 1: 3, 3: 1}[entry] if bar else CROSS_EXIT[entry]
        hops.append(Hop(tbu, entry, exit_))
        p = int(peer[4 * tbu + exit_])
        if p < 0:
            return Route(src, -1 - p, tuple(hops))
        g = p


def measure_route(bench: Bench, heater_map: HeaterMap, route: Route, *, compensate: bool = True,
                  wavelength_nm: float = 1550.0, laser_dbm: float = 0.0,
                  settle_s: float = SETTLE_S) -> RouteReading:
    """Program ``route`` (other TBUs parked) through ``heater_map`` and read every port."""
    conf = Configuration.from_routes(bench.mesh, [route])
    try:
        currents = heater_map.currents_for(conf, bench.max_current_ma, compensate=compensate)  # type: ignore[call-arg]
    except TypeError:  # a map without the compensate switch
        currents = heater_map.currents_for(conf, bench.max_current_ma)
    bench.set_currents(currents)
    settle(bench, settle_s)
    bench.select_input(route.src, wavelength_nm)
    ports = [p for p in range(bench.mesh.n_ports) if p != route.src]
    p_dbm = np.asarray(bench.read_powers_dbm(ports)) - laser_dbm
    trans = float(p_dbm[ports.index(route.dst)])
    leak = float(max(v for p, v in zip(ports, p_dbm, strict=True) if p != route.dst))
    return RouteReading(route.src, route.dst, trans, leak, trans - leak)


def sample_routes(mesh: Mesh, n: int, rng: np.random.Generator,
                  avoid: set[int] | frozenset[int] = frozenset()) -> list[Route]:
    """``n`` hand-built routes: zigzags from random ports, each bent once at a random hop.

    Routes crossing a TBU in ``avoid`` (failed TBUs) are skipped, so fewer than ``n`` may come back.
    """
    routes = []
    for src in rng.choice(mesh.n_ports, size=mesh.n_ports, replace=False):
        if len(routes) == n:
            break
        straight = zigzag_route(mesh, int(src))
        bend = int(rng.integers(0, len(straight.hops)))
        route = zigzag_route(mesh, int(src), bend)
        if not avoid & {h.tbu for h in route.hops}:
            routes.append(route)
    return routes
