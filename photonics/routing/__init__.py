"""Routing engine: conflict-free port-to-port routes through a TBU mesh, checked by the circuit solve.

Public API::

    from photonics.routing import route, route_many, RoutingError
    plan = route_many(mesh, [("port:3", "port:20"), (5, 22)], failed={"tbu:1.2.0": "dead"})
    plan.routes[0].transmission_db, plan.routes[0].acr_db, plan.configuration

See docs/routing.md for the graph, the costs, the park state and the ACR definition.
"""

from photonics.errors import RoutingError
from photonics.routing.exact import ExactResult, solve_exact
from photonics.routing.graph import CostModel, RoutingGraph, build_graph, parse_failed
from photonics.routing.many import negotiate
from photonics.routing.plan import (
    DEFAULT_TRANSCEIVER,
    Plan,
    RouteResult,
    configuration_for,
    parse_pairs,
    route,
    route_many,
)
from photonics.routing.single import (
    conflicts,
    route_loss_db,
    search_path,
    shortest_path,
    shortest_paths,
    shortest_trees,
)
from photonics.routing.verify import RouteCheck, budget_refusal, budget_routes, check_routes

__all__ = [
    "DEFAULT_TRANSCEIVER",
    "CostModel",
    "ExactResult",
    "Plan",
    "RouteCheck",
    "RouteResult",
    "RoutingError",
    "RoutingGraph",
    "budget_refusal",
    "budget_routes",
    "build_graph",
    "check_routes",
    "configuration_for",
    "conflicts",
    "negotiate",
    "parse_failed",
    "parse_pairs",
    "route",
    "route_loss_db",
    "route_many",
    "search_path",
    "shortest_path",
    "shortest_paths",
    "shortest_trees",
    "solve_exact",
]
