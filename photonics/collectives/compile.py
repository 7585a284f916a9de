"""Compiling a collective into a sequence of mesh configurations, with its completion time.

1. **Rounds.** Each step's transfers ``{(src, dst): bytes}`` are split into rounds that a
   configuration can hold: no accelerator uses more TX (or RX) lanes than it has
   (first-fit colouring of the step's pairs), and the round's circuits route together on
   the mesh (``photonics.fabric.route_links``; a round that does not route is halved,
   recursively). Every distinct set of circuits is one candidate configuration, routed
   once and checked by the circuit solve and the link budget (``evaluate``).
2. **Keep or reconfigure (a small DP).** Before each round the mesh holds some
   configuration. The round either runs on it -- directly when its circuits are there,
   or forwarded over its circuits through other ranks (:mod:`~photonics.collectives.cost`)
   -- or the mesh switches to the round's own configuration first, paying the modelled
   switch (write + settle + re-lock; nothing to detect or compute: the schedule is made
   ahead). The DP keeps, for every configuration the mesh could hold after a round, the
   earliest time it gets there, so the chosen sequence is the fastest over these
   choices (the configurations a step could use are only its own and earlier ones).
3. **Steady state.** A training loop repeats the collective, so the configuration before
   the first round is the one the last round left: the DP runs once from an all-parked
   chip (``first_run_ms``, whose first switch is ``setup_ms``) and again from that final
   configuration (``completion_ms``).
4. **Fixed topology.** The same steps on a fixed ring (or torus) of the same circuits'
   rate, forwarded hop by hop, never reconfigured (``fixed_ms``).

A rank that lags (``Collective.lag_ms``) cannot start a transfer before its lag; the mesh
may reconfigure while it waits.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from photonics.collectives.circuits import Chunks, Circuit, CircuitSet, RoundSpec, step_chunks
from photonics.collectives.cost import (
    FIXED_TOPOLOGIES,
    CostModel,
    Pair,
    fixed_edges,
    shortest_paths,
    step_time_ms,
)
from photonics.collectives.multicast import merged_steps, tree_rounds
from photonics.collectives.steps import Collective, CollectiveError
from photonics.configuration import Configuration
from photonics.errors import RoutingError
from photonics.fabric import (
    Fabric,
    FabricError,
    TimingModel,
    evaluate,
    heater_values,
    link_ports,
    recovery_timing,
    route_links,
)
from photonics.physics import TBUParams
from photonics.routing import build_graph, route_loss_db
from photonics.routing.exact import RoutingTimeoutError
from photonics.tolerances import REQUIRED_MARGIN_DB

PARKED = -1  # the "configuration" of a chip with every TBU parked (before the first switch)
WRITE_RESOLUTION = 1e-4  # rad: a heater whose phase moves less is not written (photonics.fabric)
# The integer program gets this long (s) for a round the fast router cannot place, before
# the round is halved instead: long enough for the 8-accelerator fabric, short enough that
# a round that cannot route costs seconds, not minutes.
EXACT_LIMIT_S = 5.0
# Circuit sets routed, checked and budgeted on a fabric, kept across compilations on it: every
# compilation places the ring fallback, collectives share rounds, and one collective compiled
# at several buffer sizes routes the same sets (the rounds do not depend on the size). Per
# fabric (frozen; dropped with it): (ranks, pairs, margin) -> _Routed, or the error's type and
# message. Only with nominal parameters, and never an integer program that ran out of time.
_ROUTED: weakref.WeakKeyDictionary[Fabric, dict[tuple, _Routed | tuple[type[Exception], str]]] = \
    weakref.WeakKeyDictionary()
# Two ways of reaching a configuration whose end times differ by less than this (ms, float
# noise) count as equal, and the first found (keeping circuits, before switching) wins.
TIE_MS = 1e-9


@dataclass(frozen=True)
class Round:
    """One round as scheduled: its transfers, the configuration it ran on, and when.

    ``mode``: ``direct`` (its circuits were loaded), ``forward`` (it ran over another
    configuration's circuits, ``paths`` says through whom), ``multicast`` (it ran on a
    configuration of multicast trees) or ``reconfigure`` (the mesh switched to ``config``
    first, taking ``switch_ms``).
    """

    step: int
    label: str
    transfers: dict[Pair, float]
    config: int
    mode: str
    switch_ms: float
    start_ms: float
    end_ms: float
    paths: dict[Pair, list[int]]
    multicast: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        hops = max((len(p) - 1 for p in self.paths.values()), default=0)
        # JSON: a round that reconfigured runs direct on its new circuits; switch_ms > 0 says it switched
        mode = "direct" if self.mode == "reconfigure" else self.mode
        if mode == "direct" and self.multicast:
            mode = "multicast"
        return {"step": self.step + 1, "label": self.label, "config": self.config, "mode": mode,
                "transfers": len(self.transfers), "max_hops": hops, "switch_ms": self.switch_ms,
                "start_ms": self.start_ms, "end_ms": self.end_ms}


@dataclass(frozen=True, eq=False)
class CompiledCollective:
    """A collective compiled onto a fabric: configurations, rounds and times (ms)."""

    collective: Collective
    fabric: Fabric
    ranks: tuple[str, ...]
    size_bytes: float
    cost: CostModel
    configs: tuple[CircuitSet, ...]
    rounds: tuple[Round, ...]
    completion_ms: float
    first_run_ms: float
    setup_ms: float
    fixed_ms: dict[str, float | None] = field(default_factory=dict)

    @property
    def switches(self) -> int:
        """Reconfigurations per (steady-state) run."""
        return sum(1 for r in self.rounds if r.mode == "reconfigure")

    @property
    def switch_ms(self) -> float:
        """Time spent reconfiguring per run (ms)."""
        return sum(r.switch_ms for r in self.rounds)

    @property
    def multicast_rounds(self) -> int:
        """Rounds per (steady-state) run that ran on multicast trees."""
        return sum(1 for r in self.rounds if r.multicast)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the body of ``lumion collective --json``)."""
        names = self.ranks
        return {"collective": self.collective.to_dict(), "fabric": self.fabric.name,
                "mesh": self.fabric.mesh_spec, "ranks": list(names), "size_bytes": self.size_bytes,
                "cost": {"alpha_ms": self.cost.alpha_ms, "gbps": self.cost.gbps,
                         "relock_ms": self.cost.relock_ms},
                "completion_ms": self.completion_ms, "first_run_ms": self.first_run_ms,
                "setup_ms": self.setup_ms, "switches": self.switches, "switch_ms": self.switch_ms,
                "multicast_rounds": self.multicast_rounds,
                "n_configurations": len(self.configs), "n_rounds": len(self.rounds),
                "fixed_ms": {k: v for k, v in self.fixed_ms.items() if v is not None},
                "configurations": [c.to_dict(names) for c in self.configs],
                "rounds": [r.to_dict() for r in self.rounds]}


# ---------------------------------------------------------------------------------------
# Rounds and their configurations
# ---------------------------------------------------------------------------------------
def _lane_rounds(pairs: Sequence[Pair], tx: Mapping[int, int], rx: Mapping[int, int]) -> list[list[Pair]]:
    """First-fit split of ``pairs`` into groups where no rank exceeds its TX / RX lanes."""
    groups: list[tuple[list[Pair], dict[int, int], dict[int, int]]] = []
    for a, b in pairs:
        for members, used_tx, used_rx in groups:
            if used_tx.get(a, 0) < tx[a] and used_rx.get(b, 0) < rx[b]:
                members.append((a, b))
                used_tx[a] = used_tx.get(a, 0) + 1
                used_rx[b] = used_rx.get(b, 0) + 1
                break
        else:
            groups.append(([(a, b)], {a: 1}, {b: 1}))
    return [g[0] for g in groups]


class _Router:
    """Routes and checks candidate configurations once each (keyed by their circuit set)."""

    def __init__(self, fabric: Fabric, names: Sequence[str], params: TBUParams | None,
                 required_margin_db: float) -> None:
        self.fabric, self.names, self.params = fabric, list(names), params
        self.margin = required_margin_db
        self.graph = build_graph(fabric.mesh, params)
        self.sets: list[CircuitSet] = []
        self.by_key: dict[frozenset[Pair], int] = {}

    def place(self, pairs: list[Pair]) -> list[int]:
        """Config ids that together carry ``pairs`` (one, or more when it must be halved)."""
        key = frozenset(pairs)
        if key not in self.by_key:
            try:
                self.by_key[key] = self._route(list(pairs))
            except RoutingError as exc:
                if len(pairs) == 1:
                    a, b = pairs[0]
                    raise CollectiveError(f"circuit {self.names[a]}->{self.names[b]} cannot be routed on "
                                          f"{self.fabric.name} even alone: {exc}") from None
                return self.place(pairs[0::2]) + self.place(pairs[1::2])
        return [self.by_key[key]]

    def filled(self, cid: int, tx: Mapping[int, int], rx: Mapping[int, int]) -> int | None:
        """The configuration ``cid`` plus ring circuits i -> i+1 on the lanes it leaves free.

        Kept circuits let later rounds forward instead of reconfiguring; None when the
        filled set does not route (or adds nothing).
        """
        base = self.sets[cid].links
        used_tx = {a: sum(1 for x, _ in base if x == a) for a in tx}
        used_rx = {b: sum(1 for _, y in base if y == b) for b in rx}
        n = len(self.names)
        extra = [(i, (i + 1) % n) for i in range(n) if (i, (i + 1) % n) not in base
                 and used_tx[i] < tx[i] and used_rx[(i + 1) % n] < rx[(i + 1) % n]]
        if not extra:
            return None
        key = frozenset(base) | frozenset(extra)
        if key not in self.by_key:
            try:
                self.by_key[key] = self._route([*base, *extra])
            except (RoutingError, CollectiveError):
                return None
        return self.by_key[key]

    def _route(self, pairs: list[Pair]) -> int:
        """Route, circuit-check and budget one set of circuits; its new config id."""
        done = self._routed(pairs)
        cs = CircuitSet(len(self.sets), tuple(pairs), done.ports, done.configuration, done.heater,
                        done.worst_loss_db, done.worst_margin_db)
        self.sets.append(cs)
        return cs.index

    def _routed(self, pairs: list[Pair]) -> _Routed:
        """:meth:`_check` of ``pairs``, from what this fabric kept when it was asked before."""
        if self.params is not None:
            return self._check(pairs)
        kept = _ROUTED.setdefault(self.fabric, {})
        key = (tuple(self.names), tuple(pairs), self.margin)
        done = kept.get(key)
        if done is None:
            try:
                done = self._check(pairs)
            except RoutingTimeoutError:
                raise
            except (RoutingError, CollectiveError) as exc:
                done = (type(exc), str(exc))
            kept[key] = done
        if isinstance(done, tuple):
            raise done[0](done[1])
        return done

    def _check(self, pairs: list[Pair]) -> _Routed:
        """Route ``pairs``, circuit-check and budget them (CollectiveError when one cannot close)."""
        links = [(self.names[a], self.names[b]) for a, b in pairs]
        ports = link_ports(self.fabric, links)
        routes = route_links(self.fabric.mesh, ports, params=self.params, time_limit_s=EXACT_LIMIT_S)
        conf = Configuration.from_routes(self.fabric.mesh, routes)
        res = evaluate(self.fabric, links, routes, conf, params=self.params, required_margin_db=self.margin,
                       loss_db=[route_loss_db(self.graph, r) for r in routes])
        bad = [r for r in res if not r.budget_ok]
        if bad:
            raise CollectiveError(f"circuit {bad[0].link[0]}->{bad[0].link[1]} on {self.fabric.name} "
                                  f"cannot close its budget: {bad[0].reason}")
        heater, _ = heater_values(conf, None)
        return _Routed(tuple(ports), conf, heater, max(r.loss_db for r in res), min(r.margin_db for r in res))


@dataclass(frozen=True, eq=False)
class _Routed:
    """A routed and budgeted set of circuits, before it is numbered (see :class:`CircuitSet`)."""

    ports: tuple[tuple[int, int], ...]
    configuration: Configuration
    heater: np.ndarray
    worst_loss_db: float
    worst_margin_db: float


def _rounds(coll: Collective, fabric: Fabric, names: Sequence[str], router: _Router,
            size_bytes: float) -> list[RoundSpec]:
    """(step index, label, transfers, candidate configs) for every round, in order.

    A round's candidates are its own circuits, the same plus ring circuits on the free
    lanes when they route (see :meth:`_Router.filled`), and the ring over all ranks (so
    the fabric can always fall back to what a fixed ring does).
    """
    chunk = coll.chunk_bytes(size_bytes)
    tx = {r: len(fabric.accelerator(n).tx) for r, n in enumerate(names)}
    rx = {r: len(fabric.accelerator(n).rx) for r, n in enumerate(names)}
    n = coll.n_ranks
    ring = tuple(router.place([(i, (i + 1) % n) for i in range(n)]))  # always a fallback to forward over
    out = []
    for k, step in enumerate(coll.steps):
        for group in _lane_rounds(step.pairs, tx, rx):
            for cid in router.place(group):
                pairs = router.sets[cid].links
                fill = router.filled(cid, tx, rx)
                cands = tuple(dict.fromkeys((cid, *(() if fill is None else (fill,)), *ring)))
                out.append((k, step.label, {p: step.chunks_on(*p) * chunk for p in pairs}, cands,
                            step_chunks(step, pairs)))
    return out


# ---------------------------------------------------------------------------------------
# Switch times and the DP
# ---------------------------------------------------------------------------------------
class _Switches:
    """Modelled switch time (ms) between two configurations: write + settle + re-lock."""

    def __init__(self, fabric: Fabric, sets: Sequence[CircuitSet], timing: TimingModel,
                 cost: CostModel) -> None:
        self.fabric, self.sets, self.timing, self.cost = fabric, sets, timing, cost
        parked = Configuration.parked(fabric.mesh)
        self.parked_heater = heater_values(parked, None)[0]
        self.cache: dict[tuple[int, int], float] = {}

    def __call__(self, a: int, b: int) -> float:
        if a == b:
            return 0.0
        if (a, b) not in self.cache:
            before = self.parked_heater if a == PARKED else self.sets[a].heater
            old_ports = set() if a == PARKED else set(self.sets[a].ports)
            after = self.sets[b]
            delta = np.abs(after.heater - before)
            write = np.flatnonzero(delta > WRITE_RESOLUTION)
            program = {int(ch): float(after.heater[ch]) for ch in write}
            moved = [p for p in after.ports if p not in old_ports]
            if self.cost.relock_ms is not None:
                relock = self.cost.relock_ms
            else:
                relock = max((self.fabric.lane(d).relock_ms for _, d in moved), default=0.0)
            t = recovery_timing(self.timing, 0.0, program, relock, len(moved), detect=False,
                                max_phase_step_rad=float(delta[write].max()) if write.size else 0.0)
            self.cache[(a, b)] = t["write"] + t["settle"] + (t["relock"] if moved else 0.0)
        return self.cache[(a, b)]


def _lag_start(coll: Collective, transfers: Mapping[Pair, float]) -> float:
    ranks = {r for p in transfers for r in p}
    return max((coll.lag_ms.get(r, 0.0) for r in ranks), default=0.0)


State = dict[int, tuple[float, list[Round]]]


def _offer(states: State, cid: int, rnd: Round, hist: list[Round]) -> None:
    """Keep ``rnd`` as the way to reach config ``cid`` if it ends earliest."""
    if cid not in states or rnd.end_ms < states[cid][0] - TIE_MS:
        states[cid] = (rnd.end_ms, [*hist, rnd])


def tree_step_time_ms(transfers: Mapping[Pair, float], chunks: Chunks, trees: Sequence[Circuit],
                      cost: CostModel) -> tuple[float, dict[Pair, list[int]]]:
    """(time in ms, paths) of a round on a configuration of multicast trees.

    A transfer ``a -> b`` runs on the tree whose source is ``a`` and which reaches ``b``
    (``inf`` when none does: trees forward nothing through other ranks). A tree carries
    each distinct chunk once, whichever of its destinations want it, so its load is its
    distinct chunks' bytes; the round takes one ``alpha`` plus its busiest tree's load.
    """
    if not transfers:
        return 0.0, {}
    load: dict[int, dict[int, float]] = {}
    for (a, b), n_bytes in transfers.items():
        k = next((i for i, (src, dsts) in enumerate(trees) if src == a and b in dsts), None)
        if k is None:
            return math.inf, {}
        per_chunk = n_bytes / max(len(chunks.get((a, b), ())), 1)
        for c in chunks.get((a, b), frozenset({-1})):
            load.setdefault(k, {})[c] = per_chunk
    busiest = max(sum(v.values()) for v in load.values())
    return cost.alpha_ms + cost.transfer_ms(busiest), {p: list(p) for p in transfers}


def _dp(coll: Collective, rounds: list[RoundSpec], start: int,
        n: int, sets: Sequence[CircuitSet], switch: _Switches, cost: CostModel,
        tree_rounds: Mapping[int, list[RoundSpec]] | None = None) -> list[Round]:
    """The fastest keep/forward/reconfigure choice per step (see module docstring).

    A step runs either whole over the configuration loaded (directly or forwarded; its
    transfers share the circuits), or as its rounds in turn, each kept or switched to,
    or (``tree_rounds``, with multicast) as its multicast rounds in turn.
    """
    paths_of: dict[int, Any] = {}

    def paths(cid: int) -> Any:
        if cid not in paths_of:
            paths_of[cid] = shortest_paths(sets[cid].links, n) if cid != PARKED else {}
        return paths_of[cid]

    def timed(cid: int, transfers: dict[Pair, float], chunks: Chunks) -> tuple[float, dict[Pair, list[int]]]:
        if cid != PARKED and sets[cid].trees:
            return tree_step_time_ms(transfers, chunks, sets[cid].trees, cost)
        return step_time_ms(transfers, paths(cid), cost)

    def advance(states: State, k: int, label: str, transfers: dict[Pair, float],
                cands: Sequence[int], chunks: Chunks) -> State:
        lag = _lag_start(coll, transfers)
        new: State = {}
        for cid, (t, hist) in states.items():
            dt, used = timed(cid, transfers, chunks)
            tree = cid != PARKED and bool(sets[cid].trees)
            if math.isfinite(dt):
                s = max(t, lag)
                mode = "direct" if all(len(p) == 2 for p in used.values()) else "forward"
                _offer(new, cid, Round(k, label, transfers, cid, mode, 0.0, s, s + dt, used, tree), hist)
            for cand in cands:
                if cand != cid:
                    sw = switch(cid, cand)
                    dt, used = timed(cand, transfers, chunks)
                    s = max(t + sw, lag)
                    rnd = Round(k, label, transfers, cand, "reconfigure", sw, s, s + dt, used,
                                bool(sets[cand].trees))
                    _offer(new, cand, rnd, hist)
        return new

    def in_turn(states: State, specs: list[RoundSpec], new: State) -> None:
        sub = states
        for _, label, transfers, cands, chunks in specs:
            sub = advance(sub, specs[0][0], label, transfers, cands, chunks)
        for cid, (_, hist) in sub.items():
            _offer(new, cid, hist[-1], hist[:-1])

    states: State = {start: (0.0, [])}
    by_step: dict[int, list[RoundSpec]] = {}
    for spec in rounds:
        by_step.setdefault(spec[0], []).append(spec)
    for k, specs in by_step.items():
        whole: dict[Pair, float] = {}
        whole_chunks: dict[Pair, frozenset[int]] = {}
        for _, _, transfers, _, chunks in specs:
            for p, b in transfers.items():
                whole[p] = whole.get(p, 0.0) + b
                whole_chunks[p] = whole_chunks.get(p, frozenset()) | chunks.get(p, frozenset())
        new = advance(states, k, specs[0][1], whole, (), whole_chunks) if len(specs) > 1 else {}
        in_turn(states, specs, new)
        if tree_rounds and k in tree_rounds:
            in_turn(states, tree_rounds[k], new)
        states = new
    return min(states.values(), key=lambda v: v[0])[1]


def fixed_time_ms(coll: Collective, topology: str, size_bytes: float, cost: CostModel) -> float:
    """Completion time (ms) of ``coll`` on a fixed topology (no reconfiguration)."""
    paths = shortest_paths(fixed_edges(topology, coll.n_ranks), coll.n_ranks)
    chunk = coll.chunk_bytes(size_bytes)
    t = 0.0
    for step in coll.steps:
        transfers = {p: step.chunks_on(*p) * chunk for p in step.pairs}
        dt, _ = step_time_ms(transfers, paths, cost)
        t = max(t, _lag_start(coll, transfers)) + dt
    return t


def compile_collective(
    coll: Collective,
    fabric: Fabric,
    ranks: Sequence[str],
    *,
    size_bytes: float,
    cost: CostModel | None = None,
    timing: TimingModel | None = None,
    params: TBUParams | None = None,
    required_margin_db: float = REQUIRED_MARGIN_DB,
    fixed_cost: CostModel | None = None,
    multicast: bool = False,
) -> CompiledCollective:
    """Compile ``coll`` onto ``fabric`` with rank i on accelerator ``ranks[i]``.

    ``fixed_cost`` is the fixed topologies' own alpha-beta (e.g. an electrical switch's
    latency and rate); the mesh's ``cost`` when omitted. ``multicast``: a step that sends
    one chunk from one rank to several may also run on multicast trees
    (:mod:`photonics.collectives.multicast`); the DP uses them only where they are faster.

    Raises:
        CollectiveError: wrong number of ranks, an unknown accelerator, or a circuit that
            cannot be routed or cannot close its budget even alone.
    """
    cost = cost or CostModel()
    timing = timing or TimingModel()
    if len(ranks) != coll.n_ranks or len(set(ranks)) != len(ranks):
        raise CollectiveError(f"give {coll.n_ranks} different accelerators for the {coll.n_ranks} ranks, "
                              f"not {list(ranks)}")
    if not (math.isfinite(size_bytes) and size_bytes > 0):
        raise CollectiveError(f"the buffer size must be a number of bytes > 0, not {size_bytes!r}")
    try:
        for name in ranks:
            fabric.accelerator(name)
        router = _Router(fabric, ranks, params, required_margin_db)
        if multicast:
            coll = merged_steps(coll)
        rounds = _rounds(coll, fabric, ranks, router, size_bytes)
        trees = tree_rounds(coll, fabric, ranks, router, size_bytes) if multicast else {}
    except FabricError as exc:
        raise CollectiveError(str(exc)) from None
    switch = _Switches(fabric, router.sets, timing, cost)
    first = _dp(coll, rounds, PARKED, coll.n_ranks, router.sets, switch, cost, trees)
    steady = _dp(coll, rounds, first[-1].config, coll.n_ranks, router.sets, switch, cost, trees)
    fixed: dict[str, float | None] = {}
    for topo in FIXED_TOPOLOGIES:
        try:
            fixed[topo] = fixed_time_ms(coll, topo, size_bytes, fixed_cost or cost)
        except CollectiveError:
            fixed[topo] = None  # e.g. no 2-D torus of a prime number of ranks
    return CompiledCollective(coll, fabric, tuple(ranks), float(size_bytes), cost, tuple(router.sets),
                              tuple(steady), steady[-1].end_ms, first[-1].end_ms, first[0].switch_ms, fixed)
