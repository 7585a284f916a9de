"""All-to-all by matchings, and per-phase reconfiguration (Opus-style) of a job.

**Matchings.** For N ports (N even) the complete graph K_N splits into N - 1 perfect
matchings (a 1-factorization); that is also the lower bound on the number of mesh
configurations that together connect every pair, because a port carries one circuit
per configuration. :func:`schedule` builds the circle-method factorization, routes
every matching with ``photonics.routing`` (conflict-free, circuit-checked), tries other
labelings of the ports when a matching does not route, then gives the failing matchings to
the exact router. When the circle method still misses the bound it searches the
1-factorizations themselves (:mod:`photonics.fabric.factorize`, bounded by a question
budget), and only when that fails too splits a matching that does not route into two
(reported as overhead above the bound).
Odd N: a dummy port makes N + 1, so N configurations, each with one port idle.

**A pair is one bidirectional circuit, one route.** The mesh is passive, linear and
reciprocal (S = S^T, no magneto-optics), so the optical path A -> B carries B -> A light
with the same loss; a pair of ports with bidirectional transceivers (BiDi optics on two
wavelengths, or a circulator) needs one route. :func:`schedule` checks both directions
with the circuit solve (transmission each way; crosstalk from each end into every other
port of the matching). A fabric whose accelerators have separate TX and RX lanes needs
two routes per pair (a.tx -> b.rx and b.tx -> a.rx): :func:`accelerator_matchings`.

**Phases.** :func:`plan_phases` routes every phase of a :class:`~photonics.fabric.PhasedJob`,
an all-to-all phase expanding into its matchings, and reports the heater deltas and the
modelled switch time between consecutive configurations.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from photonics.budget import Transceiver, check_band, link_budget
from photonics.configuration import Configuration
from photonics.errors import MeshSpecError, RoutingError
from photonics.fabric.factorize import Matching, Pair, SearchStats, pair, search_factorization
from photonics.fabric.model import DEFAULT_TRANSCEIVER, Fabric, FabricError, _profile
from photonics.physics import PhysicsDefaults, TBUParams, nominal_params
from photonics.routing import build_graph, conflicts, parse_failed, route_many, shortest_path
from photonics.routing.verify import lane_power, route_wavelengths_nm
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh

# Questions the factorization search may ask (a quick one is one fast-router call, ~25 ms;
# a thorough one adds the exact program when that gives up, ~0.1-1 s). 16 ports on
# smartlight needed 56, 254 and 581 for seeds 0-2 (docs/routing.md); 600 keeps a hopeless
# search to about five minutes of CPU, then the split fallback answers.
SEARCH_CHECKS = 600
# Time limit of each integer program inside the search (s). Most matchings are routed or
# proved unroutable in 0.1-1 s of CPU; the search asks about many, and a program still
# running after 2 s is cheaper counted as unroutable than finished (16 ports on
# smartlight, seed 0, an earlier version of the search: 161 s of CPU unfinished with a
# 30 s limit, done in 44 s with 2 s). HiGHS counts wall-clock time, so on a heavily loaded machine a program
# can hit the limit where it would not on a quiet one, and the same seed can then take
# another path.
SEARCH_EXACT_LIMIT_S = 2.0


def circle_factorization(n: int) -> list[list[tuple[int, int]]]:
    """The circle-method 1-factorization of K_n (n even): n - 1 perfect matchings of 0..n-1.

    Vertex n - 1 sits at the centre; in round r it meets r, and the others pair up
    symmetrically around r: (r + i, r - i) mod (n - 1).

    Example:
        >>> circle_factorization(4)
        [[(0, 3), (1, 2)], [(1, 3), (2, 0)], [(2, 3), (0, 1)]]
    """
    if n < 2 or n % 2:
        raise FabricError(f"a 1-factorization needs an even number of vertices, not {n}")
    m = n - 1
    return [[(r, n - 1)] + [((r + i) % m, (r - i) % m) for i in range(1, n // 2)] for r in range(m)]


def well_connected_ports(mesh: Mesh) -> list[int]:
    """Ports whose TBU's far end meets two internal links (not another mesh port).

    A port whose TBU ends at a two-TBU boundary vertex can only be reached along a chain
    of boundary TBUs, and two such ports near one corner compete for the same link: on a
    9 x 9 hexagonal mesh two such routes are provably unroutable together. Choosing ports
    from this list avoids that.
    """
    peer = mesh.peer()
    out = []
    for p in range(mesh.n_ports):
        g = int(mesh.port_tbu_ports[p])
        t, far = g // 4, ((2, 3) if g % 4 < 2 else (0, 1))
        if all(peer[4 * t + k] >= 0 for k in far):
            out.append(p)
    return out


def spread_ports(mesh: Mesh, n: int) -> list[int]:
    """``n`` well-connected ports spread evenly around the mesh edge (for examples and benches)."""
    good = well_connected_ports(mesh)
    if n > len(good):
        raise FabricError(f"{mesh.kind} mesh has {len(good)} well-connected ports, fewer than {n}")
    return [good[i] for i in np.round(np.linspace(0, len(good), n, endpoint=False)).astype(int)]


@dataclass(frozen=True, eq=False)
class MatchingConfig:
    """One configuration of a schedule: a matching, its routes and its figures (dB).

    ``worst_acr_db`` is the bidirectional attenuation-to-crosstalk ratio: for every port,
    signal to its partner over the strongest leak into any other port of the matching.
    ``reciprocity_error_db`` is the largest |T(A->B) - T(B->A)| (a sanity check, ~0).
    """

    pairs: tuple[tuple[int, int], ...]
    configuration: Configuration
    losses_db: tuple[float, ...]
    transmissions_db: tuple[float, ...]
    worst_loss_db: float
    worst_transmission_db: float
    worst_acr_db: float
    worst_margin_db: float
    reciprocity_error_db: float
    split: bool = False

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form."""
        return {"pairs": [[mesh.port_names[a], mesh.port_names[b]] for a, b in self.pairs],
                "worst_loss_db": self.worst_loss_db, "worst_transmission_db": self.worst_transmission_db,
                "worst_acr_db": self.worst_acr_db, "worst_margin_db": self.worst_margin_db,
                "reciprocity_error_db": self.reciprocity_error_db, "split": self.split}


@dataclass(frozen=True, eq=False)
class Schedule:
    """Configurations whose union connects every pair of ``ports`` exactly once."""

    ports: tuple[int, ...]
    configs: tuple[MatchingConfig, ...]
    lower_bound: int
    labelings_tried: int
    seconds: float
    method: str = "circle"  # "circle" | "search" | "split" (see schedule)
    search_checks: int = 0  # matchings the factorization search routed (0: not run)

    @property
    def overhead(self) -> int:
        """Configurations above the lower bound (0 when the bound is reached)."""
        return len(self.configs) - self.lower_bound

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form (``lumion schedule --json``)."""
        return {"ports": [mesh.port_names[p] for p in self.ports], "n_ports": len(self.ports),
                "count": len(self.configs), "lower_bound": self.lower_bound, "overhead": self.overhead,
                "labelings_tried": self.labelings_tried, "method": self.method,
                "search_checks": self.search_checks, "compute_s": self.seconds,
                "worst_loss_db": max(c.worst_loss_db for c in self.configs),
                "worst_acr_db": min(c.worst_acr_db for c in self.configs),
                "configurations": [c.to_dict(mesh) for c in self.configs]}


def _bidirectional_check(mesh: Mesh, conf: Configuration, pairs: Sequence[tuple[int, int]],
                         params: TBUParams, lanes: Mapping[int, Transceiver]
                         ) -> tuple[list[float], float, float]:
    """(transmission per pair in dB (worse direction), worst bidirectional ACR, reciprocity error).

    Each end transmits at its own lane's wavelengths (``lanes[port]``, every channel across
    its slot, :func:`photonics.routing.verify.lane_power`); every figure is the worst over
    them. The reciprocity error compares both directions where their wavelengths coincide.
    """
    ends = [p for ab in pairs for p in ab]
    waves = route_wavelengths_nm(len(ends), [lanes[p] for p in ends])
    powers = dict(zip(ends, lane_power(mesh, conf, ends, waves, params), strict=True))
    at = dict(zip(ends, waves, strict=True))
    partner = dict(pairs) | {b: a for a, b in pairs}
    trans, acr, recip = [], np.inf, 0.0
    for a, b in pairs:
        ab, ba = powers[a][:, b], powers[b][:, a]
        trans.append(float(10 * np.log10(min(ab.min(), ba.min()))))
        common = sorted(set(at[a]) & set(at[b]))
        if common:
            ia = [at[a].index(w) for w in common]
            ib = [at[b].index(w) for w in common]
            recip = max(recip, float(np.abs(10 * np.log10(ab[ia] / ba[ib])).max()))
    for p in ends:
        victims = [q for q in ends if q not in (p, partner[p])]
        if victims:
            ratio = powers[p][:, partner[p]] / powers[p][:, victims].max(axis=1)
            acr = min(acr, float(10 * np.log10(ratio.min())))
    return trans, acr, recip


def _route_matching(mesh: Mesh, pairs: Sequence[tuple[int, int]], params: TBUParams, method: str,
                    lanes: Mapping[int, Transceiver], defaults: PhysicsDefaults | None, margin: float,
                    require_budget: bool, failed: Mapping[int, str], time_limit_s: float) -> MatchingConfig:
    tx = lanes[pairs[0][0]]
    plan = route_many(mesh, list(pairs), method=method, params=params, transceiver=tx,
                      required_margin_db=margin, check_budget=require_budget, failed=failed,
                      defaults=defaults, time_limit_s=time_limit_s)
    conf = plan.configuration
    trans, acr, recip = _bidirectional_check(mesh, conf, pairs, params, lanes)
    margins = [min(link_budget(-t, lanes[a], lanes[b], defaults, margin).margin_db,
                   link_budget(-t, lanes[b], lanes[a], defaults, margin).margin_db)
               for t, (a, b) in zip(trans, pairs, strict=True)]
    if require_budget and min(margins) < margin:  # the other direction, or another lane, falls short
        worst = int(np.argmin(margins))
        raise RoutingError(f"{mesh.port_names[pairs[worst][0]]}<->{mesh.port_names[pairs[worst][1]]}: "
                           f"margin {margins[worst]:.2f} dB is below the required {margin:.2f} dB")
    losses = tuple(r.loss_db for r in plan.routes)
    return MatchingConfig(tuple(pairs), conf, losses, tuple(trans), max(losses), min(trans), acr,
                          min(margins), recip)


def schedule(
    mesh_or_fabric: Mesh | Fabric,
    ports: Sequence[int | str],
    *,
    params: TBUParams | None = None,
    transceiver: Transceiver | str = DEFAULT_TRANSCEIVER,
    defaults: PhysicsDefaults | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    require_budget: bool = True,
    failed: Mapping[int | str, str] | None = None,
    labelings: int = 12,
    seed: int = 0,
    exact: bool = True,
    time_limit_s: float = 30.0,
    search_checks: int = SEARCH_CHECKS,
    progress: Callable[[str], None] | None = None,
) -> Schedule:
    """Conflict-free perfect matchings whose union covers every pair of ``ports`` once.

    Tries the circle method on the ports in the given order, then on up to ``labelings``
    - 1 seeded random relabelings, with the fast router; the first labeling whose every
    matching routes wins (N - 1 configurations, the bound). Otherwise the labeling with
    the fewest failures is kept and its failing matchings get the exact router (when
    ``exact``). If some still fail, a seeded search over the 1-factorizations
    (:func:`~photonics.fabric.factorize.search_factorization`, at most ``search_checks``
    matchings routed) looks for N - 1 matchings that all route (``method`` "search");
    when it does not find them the failing matchings are split in two, recursively
    (``method`` "split", overhead above the bound).

    Args:
        mesh_or_fabric: a mesh, or a fabric (its mesh, and the lane declared on each
            port: its wavelengths for the check, its power and sensitivity for the budget).
        ports: mesh ports, by index, ``"n"`` or ``"port:n"``; each a bidirectional port.
        params: the chip's per-TBU physics (nominal when omitted).
        transceiver: lane profile of every port no fabric lane is declared on.
        defaults: physics defaults for the budget (facet and access losses).
        required_margin_db: margin every link must keep (dB).
        require_budget: refuse configurations whose links cannot close the budget with
            ``transceiver`` lanes; without it margins are still reported (may be negative).
        failed: ``{TBU: "dead"|"bar"|"cross"}`` to route around.
        labelings: how many port labelings to try (the first is the given order).
        seed: seed of the random relabelings and of the search.
        exact: give failing matchings to the integer program before searching or
            splitting (the search also uses it, with a short time limit).
        time_limit_s: limit per integer program outside the search (s).
        search_checks: question budget of the search; 0 skips it.
        progress: called with one line per step of the search (e.g. print to stderr).

    Raises:
        FabricError: fewer than two ports, a port listed twice or unknown, or a pair that
            cannot be routed even alone.
    """
    t0 = time.perf_counter()
    mesh = mesh_or_fabric.mesh if isinstance(mesh_or_fabric, Fabric) else mesh_or_fabric
    try:
        idx = [mesh.port_index(p) for p in ports]
    except MeshSpecError as exc:
        raise FabricError(str(exc)) from None
    if len(idx) < 2:
        raise FabricError("a schedule needs at least two ports")
    if len(set(idx)) != len(idx):
        raise FabricError("a port is listed twice")
    tx = _profile(transceiver) if isinstance(transceiver, str) else transceiver
    bound = mesh_or_fabric.lanes if isinstance(mesh_or_fabric, Fabric) else {}
    lanes = {p: bound.get(p, tx) for p in idx}
    for p in idx:  # refused before any solve: the chip cannot carry the lane
        check_band(lanes[p], None, defaults)
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    fails = parse_failed(mesh, failed)
    n = len(idx) + len(idx) % 2
    verts = [*idx, _DUMMY][:n]

    def route(pairs: list[tuple[int, int]], method: str, limit_s: float = time_limit_s) -> MatchingConfig:
        return _route_matching(mesh, pairs, params, method, lanes, defaults, required_margin_db,
                               require_budget, fails, limit_s)

    tried, results = _best_labeling(verts, route, labelings, np.random.default_rng(seed))
    pending = [k for k, item in enumerate(results) if not isinstance(item, MatchingConfig)]
    for k in pending if exact else []:
        with contextlib.suppress(RoutingError):  # still failing: searched for, or split
            results[k] = route(results[k], "auto")  # type: ignore[arg-type]

    def done(configs: list[MatchingConfig], method: str, checks: int = 0) -> Schedule:
        return Schedule(tuple(idx), tuple(configs), n - 1, tried, time.perf_counter() - t0, method, checks)

    if all(isinstance(item, MatchingConfig) for item in results):
        return done(results, "circle")  # type: ignore[arg-type]
    checks = 0
    if search_checks > 0:
        found, stats = _search(mesh, params, fails, verts, route, exact, seed, search_checks, progress)
        if found is not None:
            return done(found, "search", stats.checks)
        checks = stats.checks
    configs: list[MatchingConfig] = []
    for item in results:
        configs += [item] if isinstance(item, MatchingConfig) else _split(item, route, exact)
    return done(configs, "split", checks)


_DUMMY = -1  # the idle partner of one port per round when the port count is odd


def _real_pairs(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs of a round without the dummy port's (odd port counts)."""
    return [(a, b) for a, b in pairs if _DUMMY not in (a, b)]


def _best_labeling(verts: list[int], route: Callable[..., MatchingConfig], labelings: int,
                   rng: np.random.Generator) -> tuple[int, list[MatchingConfig | list[tuple[int, int]]]]:
    """(labelings tried, the rounds of the best one: routed, or the pairs that failed).

    The circle method on the given order, then seeded random relabelings, fast router;
    stops at the first labeling whose every round routes.
    """
    rounds = circle_factorization(len(verts))
    best: tuple[int, list[MatchingConfig | list[tuple[int, int]]]] | None = None
    tried = 0
    for attempt in range(max(labelings, 1)):
        tried += 1
        order = list(range(len(verts))) if attempt == 0 else list(rng.permutation(len(verts)))
        results: list[MatchingConfig | list[tuple[int, int]]] = []
        failures = 0
        for rnd in rounds:
            pairs = _real_pairs([(verts[order[a]], verts[order[b]]) for a, b in rnd])
            try:
                results.append(route(pairs, "fast"))
            except RoutingError:
                failures += 1
                results.append(pairs)
                if best is not None and failures >= best[0]:
                    break
        if best is None or failures < best[0]:
            best = (failures, results)
        if failures == 0:
            break
    assert best is not None
    return tried, best[1]


def shortest_route_clashes(mesh: Mesh, params: TBUParams, failed: Mapping[int, str],
                           verts: Sequence[int]) -> dict[Pair, frozenset[Pair]]:
    """For each pair of ``verts``, the disjoint pairs whose shortest routes break a routing rule
    together (share a TBU port, or ask one TBU for both states).

    A cheap proxy for "hard to route in one matching", used to order the search's questions.
    """
    graph = build_graph(mesh, params, failed)
    real = [v for v in verts if v != _DUMMY]
    paths = {pair(a, b): shortest_path(graph, *pair(a, b)) for a, b in itertools.combinations(real, 2)}
    out: dict[Pair, set[Pair]] = {}
    for p, q in itertools.combinations(paths, 2):
        rp, rq = paths[p], paths[q]
        if set(p) & set(q) or rp is None or rq is None or not conflicts(mesh, [rp, rq]):
            continue
        out.setdefault(p, set()).add(q)
        out.setdefault(q, set()).add(p)
    return {p: frozenset(qs) for p, qs in out.items()}


def _search(mesh: Mesh, params: TBUParams, failed: Mapping[int, str], verts: list[int],
            route: Callable[..., MatchingConfig], exact: bool, seed: int, checks: int,
            progress: Callable[[str], None] | None) -> tuple[list[MatchingConfig] | None, SearchStats]:
    """The factorization search with routing as its test; the routed configurations if found."""
    routed: dict[Matching, MatchingConfig] = {}
    t0 = time.process_time()

    def accept(m: Matching, thorough: bool) -> bool:
        pairs = _real_pairs(m)
        methods = ("fast", "auto") if exact and thorough else ("fast",)
        for method in methods:
            try:
                routed[m] = route(pairs, method, SEARCH_EXACT_LIMIT_S)
                return True
            except RoutingError:
                pass
        return False

    def report(kept: int, needed: int, stats: SearchStats) -> None:
        if progress is not None:
            bar = "#" * int(20 * kept / max(needed, 1))
            progress(f"schedule search [{bar:<20}] {kept:>3}/{needed} matchings  {stats.checks:>4}/{checks} "
                     f"routed  {stats.backtracks} backtracks  {time.process_time() - t0:6.1f} s CPU")

    clash = shortest_route_clashes(mesh, params, failed, verts)
    found, stats = search_factorization(verts, accept, clash=clash, seed=seed, max_checks=checks,
                                        progress=report)
    return (None if found is None else [routed[m] for m in found]), stats


def _route_or_split(pairs: list[tuple[int, int]], route: Any, exact: bool) -> list[MatchingConfig]:
    """Route a matching (the exact router too when ``exact``), or split it in two and recurse."""
    with contextlib.suppress(RoutingError):
        return [route(pairs, "auto" if exact else "fast")]
    return _split(pairs, route, exact)


def _split(pairs: list[tuple[int, int]], route: Any, exact: bool) -> list[MatchingConfig]:
    """Split a matching that does not route into two halves, each routed or split again."""
    if len(pairs) == 1:
        try:
            return [route(pairs, "auto")]
        except RoutingError as exc:
            raise FabricError(f"pair {pairs[0]} cannot be routed even alone: {exc}") from None
    out = []
    for part in (pairs[0::2], pairs[1::2]):
        for c in _route_or_split(part, route, exact):
            out.append(MatchingConfig(**{**c.__dict__, "split": True}))
    return out


def accelerator_matchings(names: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Directed links of each round of an all-to-all over accelerators with separate lanes.

    Each pair {a, b} of a circle-method matching becomes two links, a -> b and b -> a
    (two routes: a TX lane and an RX lane are different mesh ports). Odd counts leave one
    accelerator idle per round.
    """
    names = list(names)
    n = len(names) + len(names) % 2
    verts: list[str | None] = [*names, None][:n]
    out = []
    for rnd in circle_factorization(n):
        links: list[tuple[str, str]] = []
        for a, b in rnd:
            va, vb = verts[a], verts[b]
            if va is not None and vb is not None:
                links += [(va, vb), (vb, va)]
        out.append(links)
    return out


