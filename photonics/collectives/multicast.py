"""Multicast rounds for the collective compiler: one transmitter, several receivers at once.

Sends of one step that carry the **same chunk from the same rank** to several ranks form
one multicast circuit ``(src, (dst, ...))``: a tree of tunable splitters on the mesh
(:mod:`photonics.fabric.multicast`) that takes one TX lane of the source and one RX lane
of each destination, and whose every branch is budgeted with the power the split leaves
it. :func:`~photonics.collectives.compile_collective` with ``multicast=True`` offers these
trees to its DP as another way to run a step, beside the point-to-point rounds, and keeps
them only where they are faster (docs/collectives.md, "Multicast"):

1. **Merging.** Consecutive steps over the same multicast circuits are merged
   (:func:`merged_steps`): a tree needs no pipeline, the chunks go down it back to back.
2. **Rounds.** A step's circuits are split first-fit so no rank uses more lanes than it
   has; a round whose trees do not route together is halved; a tree whose worst branch
   cannot close its budget (the split loss is too large) is cut into two trees of half
   the destinations, sent one after the other, down to point-to-point circuits.
3. **Time** on a tree configuration: one ``alpha`` plus the busiest tree's distinct
   chunks at the circuit rate (a tree carries a chunk once, to all its destinations);
   trees forward nothing through other ranks
   (:func:`~photonics.collectives.compile.tree_step_time_ms`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from photonics.collectives.circuits import Circuit, CircuitSet, RoundSpec, step_chunks
from photonics.collectives.steps import Collective, CollectiveError, Step
from photonics.errors import RoutingError
from photonics.fabric import Fabric, heater_values
from photonics.fabric.multicast import plan_multicast


def step_circuits(step: Step, chunk_bytes: float) -> dict[Circuit, float]:
    """The step's multicast circuits and the bytes each carries.

    Sends of one chunk from one rank form one tree (its destinations); the chunks a rank
    sends to the same destination set share that tree, one after the other.

    Example:
        >>> from photonics.collectives.steps import Send
        >>> step_circuits(Step((Send(0, 1, 0), Send(0, 2, 0), Send(0, 1, 1), Send(0, 2, 1))), 10.0)
        {(0, (1, 2)): 20.0}
    """
    dests: dict[tuple[int, int], list[int]] = {}
    for s in step.sends:
        dests.setdefault((s.src, s.chunk), []).append(s.dst)
    out: dict[Circuit, float] = {}
    for (src, _), ds in dests.items():
        key = (src, tuple(sorted(set(ds))))
        out[key] = out.get(key, 0.0) + chunk_bytes
    return out


def merged_steps(coll: Collective) -> Collective:
    """``coll`` with runs of consecutive steps over the same circuits merged into one step.

    A multicast tree needs no pipeline: the chunks a pipelined schedule spreads over steps
    to keep every lane busy can go down one tree back to back. A step joins the previous
    one only when its circuits (:func:`step_circuits`) are the same, include a tree of two
    or more destinations, and the merged
    schedule still moves only chunks the senders hold (:func:`~.simulate.simulate`).

    Example:
        >>> from photonics.collectives import flat_broadcast
        >>> len(flat_broadcast(4).steps), len(merged_steps(flat_broadcast(4)).steps)
        (4, 1)
    """
    from dataclasses import replace

    from photonics.collectives.simulate import simulate

    merged: list[Step] = []
    for step in coll.steps:
        circuits = set(step_circuits(step, 1.0))
        fan_out = any(len(ds) > 1 for _, ds in circuits)
        if merged and fan_out and circuits == set(step_circuits(merged[-1], 1.0)):
            joined = Step(merged[-1].sends + step.sends, merged[-1].label)
            try:
                simulate(replace(coll, steps=(*merged[:-1], joined)), strict=False)
            except CollectiveError:
                merged.append(step)  # a sender would send a chunk it gets only in that step
            else:
                merged[-1] = joined
            continue
        merged.append(step)
    return replace(coll, steps=tuple(merged))


def _lane_rounds(circuits: Sequence[Circuit], tx: Mapping[int, int],
                 rx: Mapping[int, int]) -> list[list[Circuit]]:
    """First-fit split so that no rank uses more TX / RX lanes than it has."""
    groups: list[tuple[list[Circuit], dict[int, int], dict[int, int]]] = []
    for c in circuits:
        src, dsts = c
        for members, used_tx, used_rx in groups:
            if used_tx.get(src, 0) < tx[src] and all(used_rx.get(d, 0) < rx[d] for d in dsts):
                members.append(c)
                used_tx[src] = used_tx.get(src, 0) + 1
                for d in dsts:
                    used_rx[d] = used_rx.get(d, 0) + 1
                break
        else:
            groups.append(([c], {src: 1}, dict.fromkeys(dsts, 1)))
    return [g[0] for g in groups]


class _TreeRouter:
    """Routes, solves and budgets each distinct set of trees once; their configurations join
    the point-to-point router's list (``router.sets``), so both share one index space.
    """

    def __init__(self, router: Any) -> None:
        self.router = router
        self.fabric, self.names, self.params, self.margin = router.fabric, router.names, router.params, \
            router.margin
        self.graph = router.graph
        self.by_key: dict[frozenset[Circuit], int | list[list[Circuit]]] = {}

    def place(self, circuits: list[Circuit]) -> list[int]:
        """Config ids that carry ``circuits`` in turn: one, or more when split (module docstring)."""
        key = frozenset(circuits)
        if key not in self.by_key:
            self.by_key[key] = self._try(circuits)
        got = self.by_key[key]
        if isinstance(got, int):
            return [got]
        return [cid for part in got for cid in self.place(part)]

    def _try(self, circuits: list[Circuit]) -> int | list[list[Circuit]]:
        """A config id, or the parts to place instead."""
        groups = [(self.names[s], [self.names[d] for d in ds]) for s, ds in circuits]
        try:
            plan = plan_multicast(self.fabric, groups, params=self.params, required_margin_db=self.margin,
                                  graph=self.graph)
        except RoutingError as exc:
            if len(circuits) > 1:
                return [circuits[0::2], circuits[1::2]]
            return _split_tree(circuits, 0, self.names, str(exc))
        for k, branches in enumerate(plan.branches):
            bad = next((b for b in branches if not b.budget_ok), None)
            if bad is not None:
                return _split_tree(circuits, k, self.names, bad.reason or "budget short")
        return self._record(circuits, plan)

    def _record(self, circuits: list[Circuit], plan: Any) -> int:
        links, ports = [], []
        for (s, ds), tree in zip(circuits, plan.trees, strict=True):
            links += [(s, d) for d in ds]
            ports += [(tree.src, dst) for dst in tree.dsts]
        heater, _ = heater_values(plan.configuration, None)
        loss = max(-t for c in plan.checks for t in c.transmission_db)
        sets = self.router.sets
        cs = CircuitSet(len(sets), tuple(links), tuple(ports), plan.configuration, heater, loss,
                        plan.worst_margin_db, tuple(circuits))
        sets.append(cs)
        return cs.index


def _split_tree(circuits: list[Circuit], k: int, names: Sequence[str], why: str) -> list[list[Circuit]]:
    """Cut circuit ``k``'s destinations in two halves sent in turn (CollectiveError if it is one)."""
    src, dsts = circuits[k]
    if len(dsts) == 1:
        raise CollectiveError(f"circuit {names[src]}->{names[dsts[0]]} cannot be carried even alone: {why}")
    rest = circuits[:k] + circuits[k + 1:]
    half = (len(dsts) + 1) // 2
    return [[*rest, (src, dsts[:half])], [(src, dsts[half:])]]


def tree_rounds(coll: Collective, fabric: Fabric, names: Sequence[str], router: Any,
                size_bytes: float) -> dict[int, list[RoundSpec]]:
    """Multicast rounds of every step that has a tree of two or more destinations.

    ``router`` is the compiler's point-to-point router: tree configurations join its list
    of configurations (one index space for the DP and the switch model).
    """
    tx = {r: len(fabric.accelerator(n).tx) for r, n in enumerate(names)}
    rx = {r: len(fabric.accelerator(n).rx) for r, n in enumerate(names)}
    trees = _TreeRouter(router)
    chunk = coll.chunk_bytes(size_bytes)
    out: dict[int, list[RoundSpec]] = {}
    for k, step in enumerate(coll.steps):
        circuits = step_circuits(step, chunk)
        if all(len(ds) < 2 for _, ds in circuits):
            continue
        ring = tuple(router.place([(i, (i + 1) % coll.n_ranks) for i in range(coll.n_ranks)]))
        specs = []
        for group in _lane_rounds(list(circuits), tx, rx):
            for cid in trees.place(group):
                pairs = [(s, d) for s, ds in router.sets[cid].trees for d in ds]
                transfers = {p: step.chunks_on(*p) * chunk for p in pairs}
                specs.append((k, step.label, transfers, (cid, *ring), step_chunks(step, pairs)))
        out[k] = specs
    return out
