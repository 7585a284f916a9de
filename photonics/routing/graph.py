"""The directed routing graph: an in-node and an out-node for every TBU port.

Following Chen et al. (JLT 2020, the 8-node-per-TBU representation), TBU port ``p``
(global index ``4*tbu + local``) has an in-node ``2p`` (light entering the TBU there) and
an out-node ``2p + 1`` (light leaving it). Arcs:

* **TBU arcs** ``in(4t+e) -> out(4t+x)`` for the four exits on the *other* end of the TBU
  (``e`` in {a0, a1} -> ``x`` in {b0, b1} and back). There is no arc back to the same end,
  so a route can never U-turn inside a TBU. The pair (e, x) fixes the state: bar or cross.
* **Link arcs** ``out(p) -> in(q)`` and ``out(q) -> in(p)`` for every waveguide link.

A mesh port's in-node has no incoming arc and its out-node no outgoing arc, so routes
start and end at mesh ports and never pass through one.

Costs are in dB: each TBU arc costs the TBU's insertion loss (bar and cross alike) plus
configurable penalties (heater power, reserved TBUs); each link arc the link's loss.
Failed TBUs: a "dead" TBU has no arcs, a TBU stuck in "bar" or "cross" keeps only the
arcs of that state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from photonics.configuration import BAR_PAIRS
from photonics.errors import MeshSpecError, RoutingError
from photonics.physics import PhysicsDefaults, TBUParams, heater_power_mw, nominal_params, split_phases
from photonics.topology import Mesh

FAILURES = ("dead", "bar", "cross")
BAR, CROSS = 0, 1


@dataclass(frozen=True)
class CostModel:
    """Penalties added to the physical loss of a TBU arc (all in dB).

    Attributes:
        heater_db_per_mw: cost per mW of heater power a state needs on this chip (the
            power follows from the arms' passive offsets; 0 = route on loss alone).
        reserved_db: extra cost of a reserved TBU (``inf`` forbids it).
        stuck_db: extra cost of using a TBU stuck in a state (it cannot be re-tuned).
    """

    heater_db_per_mw: float = 0.0
    reserved_db: float = 10.0
    stuck_db: float = 0.0


@dataclass(frozen=True, eq=False)
class RoutingGraph:
    """Arc arrays of the routing graph and a CSR matrix over them (built once per request set).

    Arc arrays have one entry per arc (TBU arcs first, ``8*t + 2*e + k``, then link arcs).
    ``tbu`` is -1, ``state``/``entry``/``exit`` are -1 on link arcs. ``loss_db`` is the
    physical loss, ``cost`` the loss plus penalties (``inf`` for disabled arcs, which are
    left out of the CSR matrix).

    ``routes`` caches the answers of :func:`photonics.routing.shortest_path` on these costs
    (``{src: {dst: Route or None}}``, plain dicts keyed by port index: read them directly
    for the cheapest lookup); ``search_state`` caches what the search derives from
    ``cost``. Both start empty in a copy made with :func:`dataclasses.replace`, so new
    costs never meet old answers.
    """

    mesh: Mesh
    tail: np.ndarray
    head: np.ndarray
    tbu: np.ndarray
    state: np.ndarray
    entry: np.ndarray
    exit: np.ndarray
    loss_db: np.ndarray
    cost: np.ndarray
    failed: dict[int, str]
    csr: sp.csr_matrix
    csr_arc: np.ndarray
    routes: dict[int, dict[int, Any]] = field(default_factory=dict, init=False, repr=False)
    search_state: Any = field(default=None, init=False, repr=False)

    @property
    def n_nodes(self) -> int:
        """Two nodes per TBU port."""
        return 8 * self.mesh.n_tbus

    @property
    def n_tbu_arcs(self) -> int:
        """Number of TBU arcs (8 per TBU, enabled or not)."""
        return 8 * self.mesh.n_tbus

    @property
    def enabled(self) -> np.ndarray:
        """Indices of the arcs routes may use."""
        return self.csr_arc

    def with_costs(self, cost: np.ndarray) -> sp.csr_matrix:
        """The CSR matrix with new costs for the enabled arcs (same sparsity, new data)."""
        m = self.csr.copy()
        m.data = np.asarray(cost, dtype=float)[self.csr_arc]
        return m

    def source(self, port: int) -> int:
        """Node where light from mesh port ``port`` enters the mesh."""
        return 2 * int(self.mesh.port_tbu_ports[port])

    def sink(self, port: int) -> int:
        """Node where light leaves the mesh at mesh port ``port``."""
        return 2 * int(self.mesh.port_tbu_ports[port]) + 1


def parse_failed(mesh: Mesh, failed: Mapping[int | str, str] | None) -> dict[int, str]:
    """``{TBU name or index: "dead"|"bar"|"cross"}`` -> ``{index: how}``, validated."""
    out: dict[int, str] = {}
    for key, how in (failed or {}).items():
        try:
            t = mesh.tbu_index(key)
        except MeshSpecError as exc:
            raise RoutingError(str(exc)) from None
        if how not in FAILURES:
            raise RoutingError(f"failed TBU {mesh.tbu_names[t]}: give dead, bar or cross, not {how!r}")
        out[t] = how
    return out


def build_graph(
    mesh: Mesh,
    params: TBUParams | None = None,
    failed: Mapping[int | str, str] | None = None,
    reserved: Iterable[int | str] = (),
    costs: CostModel | None = None,
    defaults: PhysicsDefaults | None = None,
) -> RoutingGraph:
    """Routing graph of ``mesh`` with loss costs from ``params`` (nominal when omitted).

    Example:
        >>> from photonics.topology import smartlight
        >>> g = build_graph(smartlight())
        >>> g.n_nodes, len(g.enabled)  # 8 TBU arcs per TBU + 2 arcs per link
        (568, 812)
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links, defaults)
    costs = costs or CostModel()
    fails = parse_failed(mesh, failed)
    n = mesh.n_tbus
    # TBU arcs: entry e -> the two ports at the other end.
    t = np.repeat(np.arange(n), 8)
    e = np.tile(np.repeat(np.arange(4), 2), n)
    x = np.where(e < 2, 2, 0) + np.tile([0, 1], 4 * n)
    state = np.array([BAR if (int(a), int(b)) in BAR_PAIRS else CROSS for a, b in zip(e[:8], x[:8],
                                                                                        strict=True)])
    state = np.tile(state, n)
    loss = params.loss_db[t].astype(float)
    extra = np.zeros(8 * n)
    if costs.heater_db_per_mw:
        top, bot = split_phases(np.where(state == CROSS, 1.0, 0.0), params.offset_top[t],
                                params.offset_bot[t])
        extra += costs.heater_db_per_mw * heater_power_mw(top + bot, defaults)
    for r in reserved:
        try:
            extra[8 * mesh.tbu_index(r):8 * mesh.tbu_index(r) + 8] += costs.reserved_db
        except MeshSpecError as exc:
            raise RoutingError(str(exc)) from None
    for tb, how in fails.items():
        sl = slice(8 * tb, 8 * tb + 8)
        if how == "dead":
            extra[sl] = np.inf
        else:
            keep = BAR if how == "bar" else CROSS
            extra[sl] = np.where(state[sl] == keep, extra[sl] + costs.stuck_db, np.inf)
    # Link arcs, both directions.
    p, q = mesh.links[:, 0], mesh.links[:, 1]
    lp = np.concatenate([p, q])
    lq = np.concatenate([q, p])
    link_loss = np.tile(params.link_loss_db.astype(float), 2)

    tail = np.concatenate([2 * (4 * t + e), 2 * lp + 1])
    head = np.concatenate([2 * (4 * t + x) + 1, 2 * lq])
    minus = -np.ones(len(lp), dtype=np.int64)
    loss_db = np.concatenate([loss, link_loss])
    cost = np.concatenate([loss + extra, link_loss])
    on = np.flatnonzero(np.isfinite(cost))
    order = on[np.lexsort((head[on], tail[on]))]
    nodes = 8 * n
    indptr = np.searchsorted(tail[order], np.arange(nodes + 1))
    csr = sp.csr_matrix((cost[order], head[order], indptr), shape=(nodes, nodes))
    return RoutingGraph(
        mesh=mesh, tail=tail, head=head,
        tbu=np.concatenate([t, minus]), state=np.concatenate([state, minus]),
        entry=np.concatenate([e, minus]), exit=np.concatenate([x, minus]),
        loss_db=loss_db, cost=cost, failed=fails, csr=csr, csr_arc=order,
    )


def arc_index(tbu: int, entry: int, exit_: int) -> int:
    """Index of the TBU arc ``entry -> exit_`` of ``tbu`` (local ports)."""
    return 8 * tbu + 2 * entry + (exit_ % 2)


def no_path_reason(graph: RoutingGraph, src: int, dst: int, hint: str) -> str:
    """Why no route joins ports ``src`` and ``dst``: the failed TBUs cut them apart, or, with
    no TBU failed, the mesh itself joins no light path between them (a square mesh's ports on
    one side, say). ``hint`` says where the failed TBUs came from (an option or a map).
    """
    names = graph.mesh.port_names
    if graph.failed:
        return (f"no path from {names[src]} to {names[dst]}: failed TBUs cut them apart ({hint}, "
                "or choose other ports)")
    return (f"no path from {names[src]} to {names[dst]}: this mesh has no light path between them "
            "even with every TBU working; choose other ports")
