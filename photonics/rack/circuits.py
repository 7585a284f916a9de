"""Circuits across a rack: routes over one or two meshes (through a fibre), and who holds what.

A :class:`Circuit` carries one logical link ``a -> b`` of one job on one lane: a route
from a's TX port to b's RX port on their mesh, or -- when they sit on different meshes --
a route from a's TX port to a fibre's end, the fibre, and a route from its other end to
b's RX port. Its budget is priced over the whole path: the meshes' TBU and link losses
plus :func:`~photonics.rack.model.crossing_loss_db` for the fibre, checked with
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
from photonics.fabric import route_links
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
        segments: ``(mesh name, route)`` in light order (one, or two through a fibre).
        fibre: the fibre crossed, or None.
        loss_db: mesh losses plus the fibre crossing's loss (what the link budget prices).
        margin_db: received power above the receiver's sensitivity.
    """

    job: str
    round: int
    layer: int
    link: tuple[str, str]
    segments: tuple[tuple[str, Route], ...]
    fibre: str | None
    loss_db: float
    margin_db: float


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

    # -- queries ------------------------------------------------------------------------
    def fibre_owner(self) -> dict[str, str]:
        """``{fibre: job}`` for every fibre some job's circuit crosses."""
        return {c.fibre: j for j, cs in self.circuits.items() for c in cs if c.fibre is not None}

    def _segments(self, jobs: Sequence[str], mesh: str) -> list[Route]:
        return [r for j in jobs for c in self.circuits.get(j, []) for m, r in c.segments if m == mesh]

    def release(self, job: str) -> None:
        """Free every circuit of ``job``."""
        self.circuits.pop(job, None)
        self.multi_round.discard(job)

    def remove(self, job: str, drop: Sequence[Circuit]) -> None:
        """Free the circuits ``drop`` of ``job`` (identity)."""
        ids = {id(c) for c in drop}
        self.circuits[job] = [c for c in self.circuits.get(job, []) if id(c) not in ids]

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
        for k, (req, f) in enumerate(zip(requests, fibres, strict=True)):
            a, b = self.rack.accelerator(req.link[0]), self.rack.accelerator(req.link[1])
            if req.layer >= min(a.n_lanes, b.n_lanes):
                raise PlacementError(f"{req.link[0]}->{req.link[1]}: no lane {req.layer}")
            tx, rx = a.tx[req.layer], b.rx[req.layer]
            if f is None:
                per_mesh.setdefault(a.mesh, []).append((k, 0, tx, rx))
            else:
                out_port, _, in_port = f.ends(a.mesh)
                per_mesh.setdefault(a.mesh, []).append((k, 0, tx, out_port))
                per_mesh.setdefault(b.mesh, []).append((k, 1, in_port, rx))
        segs: dict[tuple[int, int], tuple[str, Route]] = {}
        for mesh, items in per_mesh.items():
            routes = self._route_on(job, mesh, [(s, d) for _, _, s, d in items], own, multi_round)
            for (k, seg, _, _), r in zip(items, routes, strict=True):
                segs[(k, seg)] = (mesh, r)
        laid = [self._circuit(job, req, f, [segs[(k, s)] for s in (0, 1) if (k, s) in segs])
                for k, (req, f) in enumerate(zip(requests, fibres, strict=True))]
        self.circuits.setdefault(job, []).extend(laid)
        if multi_round:
            self.multi_round.add(job)
        return laid

    def _assign_fibres(self, job: str, requests: Sequence[Request],
                       own: Sequence[Circuit]) -> list[Fibre | None]:
        """A free fibre for each cross-mesh request (None for same-mesh ones), in file order."""
        taken = {f for f, j in self.fibre_owner().items() if j != job}
        taken |= {c.fibre for c in own if c.fibre is not None}
        out: list[Fibre | None] = []
        for req in requests:
            a, b = self.rack.accelerator(req.link[0]), self.rack.accelerator(req.link[1])
            if a.mesh == b.mesh:
                out.append(None)
                continue
            free = [f for f in self.rack.fibres_between(a.mesh, b.mesh) if f.name not in taken]
            if not free:
                raise PlacementError(f"no free fibre between {a.mesh} and {b.mesh} for "
                                     f"{req.link[0]}->{req.link[1]}")
            taken.add(free[0].name)
            out.append(free[0])
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
        try:
            return route_links(self.rack.mesh(mesh), pairs, held=held,
                               failed=dict.fromkeys(blocked, "dead"), exact_fallback=False)
        except RoutingError as exc:
            raise PlacementError(f"mesh {mesh}: {exc}") from None

    def _circuit(self, job: str, req: Request, fibre: Fibre | None,
                 segments: list[tuple[str, Route]]) -> Circuit:
        loss = sum(route_loss_db(_nominal_graph(self.rack.mesh_specs[m]), r) for m, r in segments)
        if fibre is not None:
            loss += crossing_loss_db(fibre)
        lane = self.rack.transceiver
        budget = link_budget(loss, lane, lane, required_margin_db=self.rack.required_margin_db)
        if not budget.ok:
            raise PlacementError(f"{req.link[0]}->{req.link[1]} refused: {budget.reason}")
        name = fibre.name if fibre is not None else None
        return Circuit(job, req.round, req.layer, req.link, tuple(segments), name, float(loss),
                       float(budget.margin_db))
