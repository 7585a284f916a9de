"""Circuits across a rack: routes over one mesh or several (through fibres), and who holds what.

A :class:`Circuit` carries one logical link ``a -> b`` of one job on one lane: a route
from a's TX port to b's RX port on their mesh, or -- when they sit on different meshes --
a route from a's TX port to a fibre's end, the fibre, (through any transit mesh, a route
from one fibre's end to the next fibre's) and a route from the last fibre's end to b's RX
port. The mesh path has the fewest crossings over free fibres (breadth first, fibres in
file order). Its budget is priced over the whole path: the meshes' TBU and link losses
plus :func:`~photonics.rack.model.crossing_loss_db` per fibre, checked with
:func:`photonics.budget.link_budget` (two facets and one access routing already in it).

:class:`Occupancy` records the circuits of every job and routes new ones around them with
the fabric's router (:func:`photonics.fabric.route_links`, fast router only):

* a **single-round** job (ring, line) may share a TBU with another single-round job on
  its other path in the state it already has (the fabric's held-route rule), never a TBU
  port ("arm");
* a **multi-round** job (all-to-all by matchings) re-programs its TBUs between rounds, so
  no other job may touch any TBU it uses (its footprint), and it touches none of theirs.

Losses are the router's planned losses (TBU insertion plus link losses at nominal
parameters); the circuit solve of a whole configuration is left to the fabric's
:func:`photonics.fabric.evaluate` (docs/rack.md says why the simulator does not call it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from photonics.budget import link_budget
from photonics.configuration import Route
from photonics.errors import RoutingError
from photonics.fabric import held_graph, route_links
from photonics.rack.model import Fibre, Rack, RackError, crossing_loss_db
from photonics.routing import RoutingGraph, build_graph, route_loss_db
from photonics.topology import mesh_from_spec


class PlacementError(RackError):
    """Circuits cannot be laid now (no route, no free fibre, or a budget that does not close)."""


@dataclass(frozen=True)
class Request:
    """One circuit to lay: link ``a -> b`` of round ``round`` on lane ``layer``."""

    round: int
    layer: int
    link: tuple[str, str]


@dataclass(frozen=True)
class Circuit:
    """A laid circuit (dB).

    Attributes:
        job: the job holding it.
        round, layer, link: as requested.
        segments: ``(mesh name, route)`` in light order (one per mesh crossed).
        fibres: the fibres crossed, in light order (empty on one mesh).
        loss_db: mesh losses plus the fibre crossings' losses (what the link budget prices).
        margin_db: received power above the receiver's sensitivity.
    """

    job: str
    round: int
    layer: int
    link: tuple[str, str]
    segments: tuple[tuple[str, Route], ...]
    fibres: tuple[str, ...]
    loss_db: float
    margin_db: float


# Routing problems one simulation keeps: a placement that failed is tried again at every
# departure, a splice tries the same spares around the same held circuits, and a job laid,
# released and laid again poses the same problem (a 12-job fabric trace with failures: 359
# routings, 211 distinct problems on 86 distinct held graphs). Each is a pure function of
# its inputs, so the answer kept is the answer recomputed. Bounded so a long campaign's
# occupancy does not grow without end (the oldest problem is dropped first).
MAX_KEPT_ROUTINGS = 4096


@lru_cache(maxsize=16)
def _nominal_graph(spec: str) -> RoutingGraph:
    """The plain routing graph of a mesh spec (for planned losses); cached, graphs are immutable."""
    return build_graph(mesh_from_spec(spec))


@dataclass
class Occupancy:
    """The circuits every job holds on the rack (mutable simulation state).

    Attributes:
        rack: the rack.
        circuits: ``{job: [Circuit, ...]}``.
        multi_round: jobs whose TBUs are theirs alone (all-to-all by matchings).
    """

    rack: Rack
    circuits: dict[str, list[Circuit]] = field(default_factory=dict)
    multi_round: set[str] = field(default_factory=set)
    changes: dict[str, int] = field(default_factory=dict)  # bumped whenever a job's circuits change
    # (mesh, pairs, held, blocked) -> routes or the router's refusal; (mesh, held, blocked) -> graph
    _routed: dict[tuple, tuple[Route, ...] | str] = field(default_factory=dict, repr=False, compare=False)
    _graphs: dict[tuple, RoutingGraph] = field(default_factory=dict, repr=False, compare=False)

    def _touch(self, job: str) -> None:
        self.changes[job] = self.changes.get(job, 0) + 1

    # -- queries ------------------------------------------------------------------------
    def fibre_owner(self) -> dict[str, str]:
        """``{fibre: job}`` for every fibre some job's circuit crosses."""
        return {f: j for j, cs in self.circuits.items() for c in cs for f in c.fibres}

    def _segments(self, jobs: Sequence[str], mesh: str) -> list[Route]:
        return [r for j in jobs for c in self.circuits.get(j, []) for m, r in c.segments if m == mesh]

    def release(self, job: str) -> None:
        """Free every circuit of ``job``."""
        self.circuits.pop(job, None)
        self.multi_round.discard(job)
        self._touch(job)

    def remove(self, job: str, drop: Sequence[Circuit]) -> None:
        """Free the circuits ``drop`` of ``job`` (identity)."""
        ids = {id(c) for c in drop}
        self.circuits[job] = [c for c in self.circuits.get(job, []) if id(c) not in ids]
        self._touch(job)

    def restore(self, job: str, circuits: Sequence[Circuit]) -> None:
        """Put back the circuits ``job`` held before a change that did not work out."""
        self.circuits[job] = list(circuits)
        self._touch(job)

    # -- laying circuits ------------------------------------------------------------------
    def lay(self, job: str, requests: Sequence[Request], multi_round: bool) -> list[Circuit]:
        """Route ``requests`` (one round) around everything already held; record and return them.

        The job's own circuits of the same round are held as well. Raises
        :class:`PlacementError` (nothing recorded) when a circuit cannot be laid.
        """
        if not requests:
            return []
        rounds = {r.round for r in requests}
        if len(rounds) != 1:
            raise ValueError("lay() takes the requests of one round at a time")
        rnd = rounds.pop()
        own = [c for c in self.circuits.get(job, []) if c.round == rnd]
        fibres = self._assign_fibres(job, requests, own)
        per_mesh: dict[str, list[tuple[int, int, int, int]]] = {}  # mesh -> (request, segment, src, dst)
        for k, (req, path) in enumerate(zip(requests, fibres, strict=True)):
            a, b = self.rack.accelerator(req.link[0]), self.rack.accelerator(req.link[1])
            if req.layer >= min(a.n_lanes, b.n_lanes):
                raise PlacementError(f"{req.link[0]}->{req.link[1]}: no lane {req.layer}")
            mesh, src = a.mesh, a.tx[req.layer]
            for seg, f in enumerate(path):
                out_port, nxt, in_port = f.ends(mesh)
                per_mesh.setdefault(mesh, []).append((k, seg, src, out_port))
                mesh, src = nxt, in_port
            per_mesh.setdefault(mesh, []).append((k, len(path), src, b.rx[req.layer]))
        segs: dict[tuple[int, int], tuple[str, Route]] = {}
        for mesh, items in per_mesh.items():
            routes = self._route_on(job, mesh, [(s, d) for _, _, s, d in items], own, multi_round)
            for (k, seg, _, _), r in zip(items, routes, strict=True):
                segs[(k, seg)] = (mesh, r)
        laid = [self._circuit(job, req, path, [segs[(k, s)] for s in range(len(path) + 1)])
                for k, (req, path) in enumerate(zip(requests, fibres, strict=True))]
        self.circuits.setdefault(job, []).extend(laid)
        if multi_round:
            self.multi_round.add(job)
        self._touch(job)
        return laid

    def _assign_fibres(self, job: str, requests: Sequence[Request],
                       own: Sequence[Circuit]) -> list[list[Fibre]]:
        """Free fibres for each request, in light order (empty when both ends share a mesh)."""
        taken = {f for f, j in self.fibre_owner().items() if j != job}
        taken |= {f for c in own for f in c.fibres}
        out: list[list[Fibre]] = []
        for req in requests:
            a, b = self.rack.accelerator(req.link[0]), self.rack.accelerator(req.link[1])
            path = mesh_path(self.rack, a.mesh, b.mesh, taken)
            if path is None:
                raise PlacementError(f"no free fibre path from {a.mesh} to {b.mesh} for "
                                     f"{req.link[0]}->{req.link[1]}")
            taken |= {f.name for f in path}
            out.append(path)
        return out

    def _route_on(self, job: str, mesh: str, pairs: list[tuple[int, int]], own: Sequence[Circuit],
                  multi_round: bool) -> list[Route]:
        others = [j for j in self.circuits if j != job]
        held = [r for c in own for m, r in c.segments if m == mesh]
        if multi_round:  # nobody else's TBU may be re-programmed by our rounds
            blocked = {t for r in self._segments(others, mesh) for t in r.tbus}
        else:
            held += self._segments([j for j in others if j not in self.multi_round], mesh)
            blocked = {t for r in self._segments([j for j in others if j in self.multi_round], mesh)
                       for t in r.tbus}
        blocked_key = tuple(sorted(blocked))
        key = (mesh, tuple(pairs), tuple(held), blocked_key)
        routed = self._routed.get(key)
        if routed is None:
            routed = self._route(mesh, pairs, held, blocked_key)
            _keep(self._routed, key, routed)
        if isinstance(routed, str):
            raise PlacementError(f"mesh {mesh}: {routed}")
        return list(routed)

    def _route(self, mesh: str, pairs: list[tuple[int, int]], held: list[Route],
               blocked: tuple[int, ...]) -> tuple[Route, ...] | str:
        """The fast router's routes for ``pairs`` around ``held`` with ``blocked`` TBUs dead,
        or its refusal (the message).
        """
        topo = self.rack.mesh(mesh)
        failed = dict.fromkeys(blocked, "dead")
        try:
            gkey = (mesh, tuple(held), blocked)
            graph = self._graphs.get(gkey)
            if graph is None:
                graph = held_graph(topo, held, failed)
                _keep(self._graphs, gkey, graph)
            routes = route_links(topo, pairs, held=held, failed=failed, exact_fallback=False, graph=graph)
            return tuple(routes)
        except RoutingError as exc:
            return str(exc)

    def _circuit(self, job: str, req: Request, path: Sequence[Fibre],
                 segments: list[tuple[str, Route]]) -> Circuit:
        loss = sum(route_loss_db(_nominal_graph(self.rack.mesh_specs[m]), r) for m, r in segments)
        loss += sum(crossing_loss_db(f) for f in path)
        lane = self.rack.transceiver
        budget = link_budget(loss, lane, lane, required_margin_db=self.rack.required_margin_db)
        if not budget.ok:
            raise PlacementError(f"{req.link[0]}->{req.link[1]} refused: {budget.reason}")
        return Circuit(job, req.round, req.layer, req.link, tuple(segments), tuple(f.name for f in path),
                       float(loss), float(budget.margin_db))


def _keep(kept: dict, key: tuple, value: object) -> None:
    """Remember ``value`` under ``key``, dropping the oldest entry past :data:`MAX_KEPT_ROUTINGS`."""
    kept[key] = value
    if len(kept) > MAX_KEPT_ROUTINGS:
        del kept[next(iter(kept))]


def mesh_path(rack: Rack, start: str, goal: str, taken: set[str]) -> list[Fibre] | None:
    """Fibres (not in ``taken``) from mesh ``start`` to mesh ``goal`` with the fewest crossings.

    Breadth first over meshes, fibres in file order; ``[]`` when start is goal, None when no
    path of free fibres exists.
    """
    previous: dict[str, tuple[str, Fibre] | None] = {start: None}
    frontier = [start]
    while frontier and goal not in previous:
        nxt = []
        for m in frontier:
            for f in rack.fibres:
                if f.name in taken or m not in (f.a_mesh, f.b_mesh):
                    continue
                other = f.ends(m)[1]
                if other not in previous:
                    previous[other] = (m, f)
                    nxt.append(other)
        frontier = nxt
    if goal not in previous:
        return None
    path: list[Fibre] = []
    m = goal
    while previous[m] is not None:
        m, f = previous[m]  # type: ignore[misc]
        path.append(f)
    return path[::-1]
