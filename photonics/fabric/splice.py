"""The mechanics of a recovery: splice re-routed links around held ones, score, and fall back.

:func:`search` is the common core of :func:`~photonics.fabric.failover` and
:func:`~photonics.fabric.fail_tbu`. It is given the options a recovery may take (for a
failover, every assignment of spares to the failed accelerators; for a TBU repair, the job
as it is) and the links that must be re-routed, and returns the best candidate:

1. **Hitless splice**, every option: the affected links are routed around the held ones
   (held TBUs frozen in their state, their TBU ports removed from the graph) and the whole
   configuration is circuit-solved and budgeted. Best: every link closes, then the largest
   worst margin of the re-routed links, then the fewest TBUs changed.
2. **Fewest moves** (``policy="fewest-moves"``), only when no splice closes: release held
   links too, one more at a time (every subset of k held links, k = 1, 2, ...; past
   :data:`MAX_MOVE_TRIALS` the whole job is re-placed), and keep the first k at which some
   option closes; among those, the fewest links whose route really changed, then the worst
   margin, then the fewest TBUs changed. The result is not hitless: the moved links are
   named, with their old and new routes.

:func:`isolated` tells the accelerators a failed TBU cuts off (no path left from their TX
lanes to any other accelerator's receiver, or into their RX lanes from any transmitter):
re-routing cannot help there, only swapping them for spares.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from photonics.configuration import PARK_STATE, Configuration, Route
from photonics.errors import RoutingError
from photonics.fabric.jobs import Job, check_job, link_ports
from photonics.fabric.model import Fabric, FabricError
from photonics.fabric.plan import (
    WRITE_RESOLUTION,
    CurrentMap,
    JobPlan,
    LinkResult,
    evaluate,
    heater_values,
    held_graph,
    route_links,
    stuck_states,
)
from photonics.fabric.timing import configuration_phase_step
from photonics.physics import PhysicsDefaults, TBUParams
from photonics.routing import RoutingGraph, build_graph, route_loss_db
from photonics.tolerances import REQUIRED_MARGIN_DB

POLICIES = ("hitless", "fewest-moves")
# Subsets of held links tried before giving up on partial moves and re-placing the whole
# job: each trial is a route plus a circuit solve (~8 ms on the 3 x 6 chip), so this bounds
# the fallback near a second on a two-core machine; the default ring needs at most 2^6.
MAX_MOVE_TRIALS = 160
# Worst margins are compared to 0.01 dB: the circuit solve's crosstalk moves them in the
# fourth decimal, far below what a power meter resolves, and that must not beat the
# tie-break (fewest TBUs changed).
MARGIN_DIGITS = 2


@dataclass(frozen=True)
class Context:
    """What every candidate of one recovery shares (the running plan, failures, options)."""

    fabric: Fabric
    before: JobPlan
    failed: dict[int, str]
    params: TBUParams | None = None
    defaults: PhysicsDefaults | None = None
    required_margin_db: float = REQUIRED_MARGIN_DB
    park_freed: bool = False


@dataclass(frozen=True)
class Option:
    """One way to recover: the job after substitution and the spares it brings in."""

    label: str | None
    job: Job
    spares: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Candidate:
    """A routed and checked recovery.

    ``rerouted``: link indices whose route changed (the affected links and the moved ones);
    ``moved``: the held links that had to move, with their old routes.
    """

    option: Option
    routes: list[Route]
    conf: Configuration
    changed: np.ndarray
    results: list[LinkResult]
    rerouted: tuple[int, ...]
    moved: tuple[tuple[int, Route], ...]

    @property
    def closes(self) -> bool:
        """Every link of the job closes its budget."""
        return all(r.budget_ok for r in self.results)

    @property
    def worst_margin_db(self) -> float:
        """Smallest margin of the re-routed links (dB; +inf when nothing was re-routed)."""
        return min((self.results[i].margin_db for i in self.rerouted), default=float("inf"))

    @property
    def worst_loss_db(self) -> float:
        """Largest planned loss of the re-routed links (dB)."""
        return max((self.results[i].loss_db for i in self.rerouted), default=0.0)

    def failing(self) -> LinkResult | None:
        """The first link that does not close (None when all do)."""
        return next((r for r in self.results if not r.budget_ok), None)

    def row(self) -> dict[str, Any]:
        """A line of the candidates table (docs/fabric.md); margin None when nothing is re-routed."""
        bad = self.failing()
        return {"spare": self.option.label, "spares": dict(self.option.spares), "ok": bad is None,
                "worst_new_loss_db": self.worst_loss_db,
                "worst_new_margin_db": self.worst_margin_db if self.rerouted else None,  # JSON has no inf
                "all_links_close": bad is None, "n_changed_tbus": len(self.changed),
                "n_moved_links": len(self.moved),
                **({} if bad is None else {"reason": f"{bad.link[0]}->{bad.link[1]} refused: {bad.reason}"})}


def _splice(ctx: Context, option: Option, reroute: Sequence[int], affected: Sequence[int],
            graph: RoutingGraph | None, exact: bool) -> Candidate:
    """Route ``reroute`` links of ``option.job`` around the others and check the result.

    ``affected`` (a part of ``reroute``) are the links the failure forces to move; any other
    re-routed link whose route changed is reported as moved.
    """
    mesh, before = ctx.fabric.mesh, ctx.before
    job = option.job
    pairs = link_ports(ctx.fabric, job.links)
    old = before.routes
    held = [i for i in range(len(job.links)) if i not in reroute]
    for i in held:  # substituting accelerators must not move anyone else's lanes
        if (old[i].src, old[i].dst) != pairs[i]:
            raise FabricError(f"internal: link {job.links[i]} changed ports during a splice")
    held_routes = [old[i] for i in held]
    graph = graph or held_graph(mesh, held_routes, ctx.failed, ctx.params)
    new = route_links(mesh, [pairs[i] for i in reroute], held=held_routes, failed=ctx.failed,
                      params=ctx.params, graph=graph, exact_fallback=exact)
    routes = list(old)
    for i, r in zip(reroute, new, strict=True):
        routes[i] = r
    split = before.configuration.cross_fraction.copy()
    if ctx.park_freed:
        live = {t for r in routes for t in r.tbus}
        freed = [t for i in reroute for t in old[i].tbus if t not in live and t not in ctx.failed]
        split[freed] = 1.0 if PARK_STATE == "cross" else 0.0
    for r in new:
        for t, s in r.states().items():
            split[t] = 1.0 if s == "cross" else 0.0
    conf = Configuration(stuck_states(split, ctx.failed), tuple(routes), mesh=mesh)
    losses = [before.links[i].loss_db for i in range(len(routes))]
    for i, r in zip(reroute, new, strict=True):
        losses[i] = route_loss_db(graph, r)
    results = evaluate(ctx.fabric, job.links, routes, conf, params=ctx.params, failed=ctx.failed,
                       defaults=ctx.defaults, required_margin_db=ctx.required_margin_db, loss_db=losses)
    # a released link that found its old route again did not move
    changed_routes = tuple(i for i in reroute if routes[i] != old[i] or i in affected)
    moved = tuple((i, old[i]) for i in changed_routes if i not in affected)
    return Candidate(option, routes, conf, conf.changed_tbus(before.configuration), results,
                     changed_routes, moved)


def _key(c: Candidate) -> tuple[float, int]:
    return (-round(c.worst_margin_db, MARGIN_DIGITS), len(c.changed))


def search(ctx: Context, options: Sequence[Option], affected: Sequence[int], policy: str
           ) -> tuple[Candidate, list[dict[str, Any]], bool]:
    """The best recovery (see the module docstring): (candidate, candidates table, hitless).

    Raises:
        FabricError: nothing closes (the message gives each option's reason).
    """
    if policy not in POLICIES:
        raise FabricError(f"unknown recovery policy {policy!r}; choose {' or '.join(POLICIES)}")
    held_routes = [r for i, r in enumerate(ctx.before.routes) if i not in affected]
    graph = held_graph(ctx.fabric.mesh, held_routes, ctx.failed, ctx.params)
    table: list[dict[str, Any]] = []
    reasons: list[str] = []
    spliced: list[Candidate] = []
    free_graph: list[RoutingGraph] = []  # built only if some splice needs it
    valid: list[Option] = []
    for opt in options:
        try:
            check_job(ctx.fabric, opt.job)
            valid.append(opt)
            cand = _splice_either(ctx, opt, affected, graph, free_graph, held_routes)
        except (RoutingError, FabricError) as exc:
            table.append({"spare": opt.label, "spares": dict(opt.spares), "ok": False, "reason": str(exc)})
            reasons.append(f"{_who(opt)}{exc}")
            continue
        table.append(cand.row())
        spliced.append(cand)
        if not cand.closes:
            reasons.append(f"{_who(opt)}{table[-1]['reason']}")
    good = [c for c in spliced if c.closes]
    if good:
        return min(good, key=_key), table, True
    if policy == "hitless" or not valid:
        raise FabricError("; ".join(reasons) or "nothing to try")
    best = _fewest_moves(ctx, valid, affected)
    if best is None:
        raise FabricError("; ".join(reasons) + "; re-placing the job with every held link free "
                          "does not close either")
    table.append({**best.row(), "policy": "fewest-moves"})
    return best, table, False


def _splice_either(ctx: Context, opt: Option, affected: Sequence[int], graph: RoutingGraph,
                   free_graph: list[RoutingGraph], held_routes: Sequence[Route]) -> Candidate:
    """The hitless splice, first preferring TBUs no held route uses, then without that preference.

    Sharing a held TBU (its other path, in the state it already has) costs
    ``held_penalty_db`` in the first graph, so the router may prefer a longer route that
    then fails its budget; the second try (no penalty) is still hitless, and the circuit
    check of the whole configuration judges the crosstalk of the shared TBUs.
    """
    try:
        cand: Candidate | None = _splice(ctx, opt, affected, affected, graph, exact=True)
    except RoutingError:
        cand = None
    if cand is not None and cand.closes:
        return cand
    if not free_graph:
        free_graph.append(held_graph(ctx.fabric.mesh, held_routes, ctx.failed, ctx.params, 0.0))
    try:
        other = _splice(ctx, opt, affected, affected, free_graph[0], exact=True)
    except RoutingError:
        if cand is None:
            raise
        return cand
    return other if cand is None or other.closes or _key(other) < _key(cand) else cand


def _who(opt: Option) -> str:
    return f"{opt.label}: " if opt.label else ""


def _fewest_moves(ctx: Context, options: Sequence[Option], affected: Sequence[int]) -> Candidate | None:
    """Release held links, fewest first, until some option closes (None: not even all of them)."""
    n = len(ctx.before.links)
    held = [i for i in range(n) if i not in affected]
    trials = 0
    for k in range(1, len(held) + 1):
        subsets = list(itertools.combinations(held, k))
        if trials + len(subsets) * len(options) > MAX_MOVE_TRIALS and k < len(held):
            continue  # too many partial moves to try: go on to re-placing everything
        closing = []
        for subset in subsets:
            reroute = sorted([*affected, *subset])
            for opt in options:
                trials += 1
                try:
                    cand = _splice(ctx, opt, reroute, affected, None, exact=k == len(held))
                except (RoutingError, FabricError):
                    continue
                if cand.closes:
                    closing.append(cand)
        if closing:
            return min(closing, key=lambda c: (len(c.moved), *_key(c)))
    return None


def isolated(fabric: Fabric, failed: Mapping[int, str], pool: Sequence[str],
             params: TBUParams | None = None) -> list[str]:
    """Accelerators of ``pool`` that the failed TBUs cut off from every other one of ``pool``.

    An accelerator is cut off when light from its TX lanes can reach no RX lane of another
    live accelerator of the pool, or no TX lane of another can reach its RX lanes. Applied
    until nothing changes: a neighbour that could reach only cut-off accelerators is cut
    off too (a dead TBU may isolate a corner holding two accelerators' lanes). Held routes
    are ignored: this asks whether *any* route could exist, so re-routing cannot mend it.
    """
    graph = build_graph(fabric.mesh, params, dict(failed))
    back = graph.csr.T.tocsr()

    def reach(matrix: Any, nodes: list[int]) -> set[int]:
        out: set[int] = set()
        for n in nodes:
            out.update(breadth_first_order(matrix, n, directed=True, return_predecessors=False).tolist())
        return out

    accs = {a: fabric.accelerator(a) for a in pool}
    down = {a: reach(graph.csr, [graph.source(p) for p in acc.tx]) for a, acc in accs.items()}
    up = {a: reach(back, [graph.sink(p) for p in acc.rx]) for a, acc in accs.items()}
    cut: list[str] = []
    changed = True
    while changed:
        changed = False
        for a, acc in accs.items():
            if a in cut:
                continue
            live = [b for b in accs if b != a and b not in cut]
            tx_ok = not acc.tx or any(graph.sink(p) in down[a] for b in live for p in accs[b].rx)
            rx_ok = not acc.rx or any(graph.source(p) in up[a] for b in live for p in accs[b].tx)
            if not (tx_ok and rx_ok):
                cut.append(a)
                changed = True
    return cut


@dataclass(frozen=True)
class Program:
    """The heater writes of a candidate: only channels that change, never held or failed ones."""

    channels: dict[int, float]
    applied: np.ndarray
    unit: str
    drift: float
    phase_step_rad: float


def heater_program(ctx: Context, cand: Candidate, heater_map: CurrentMap | None,
                   max_current_ma: float) -> Program:
    """What to write for ``cand``: changed channels of TBUs not held by a route and not failed.

    Held channels are never written: a crosstalk-compensating map may ask for a tiny change
    there, reported as ``drift``. A failed TBU's channels are never written either: a dead
    or stuck TBU cannot be set, and driving its heaters only heats its neighbours.
    """
    mesh, before = ctx.fabric.mesh, ctx.before
    wanted, unit = heater_values(cand.conf, heater_map, max_current_ma)
    held_tbus = {t for i in range(len(cand.routes)) if i not in cand.rerouted for t in cand.routes[i].tbus}
    held_ch = np.array(sorted(c for t in held_tbus for c in (2 * t, 2 * t + 1)), dtype=int)
    failed_ch = np.array(sorted(c for t in ctx.failed for c in (2 * t, 2 * t + 1)), dtype=int)
    writable = np.ones(mesh.n_heaters, dtype=bool)
    writable[held_ch] = False
    writable[failed_ch] = False
    delta = np.abs(wanted - before.heater)
    write = np.flatnonzero(writable & (delta > WRITE_RESOLUTION))
    applied = before.heater.copy()
    applied[write] = wanted[write]
    drift = float(delta[held_ch].max()) if held_ch.size else 0.0
    step = configuration_phase_step(before.configuration, cand.conf, write.tolist())
    return Program({int(ch): float(wanted[ch]) for ch in write}, applied, unit, drift, step)
