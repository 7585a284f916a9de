"""The photonic-fabric allocator: any free accelerators, circuits routed around other tenants.

Placement (:meth:`FabricAllocator.place`): candidate sets of free *workers* (spares are kept
for failures) are tried in order -- first windows of neighbouring slots on one mesh
(best fit: the mesh with the fewest free workers that still holds the job), then windows
that span meshes (fewest meshes first) -- at most :data:`MAX_CANDIDATES` sets. For a set,
lane 0 of every logical link of every round is laid (all or nothing); then each further
lane ("layer": a parallel copy of the pattern) is added while it routes and closes its
budget, so a slice gets as much bandwidth as the mesh can give it. Those extra lanes are
lent, not owned: when a new slice (or a splice) does not fit, every running slice sheds
its extra lanes (:meth:`FabricAllocator.shed`, hitless: lane 0 is untouched) and the
placement is tried again; :meth:`FabricAllocator.regrow` hands lanes back when that did not
help, and when the queue is empty.

Failures (:meth:`FabricAllocator.splice`): the failed accelerator is replaced by a free
spare (same mesh first), else a free worker; only the circuits that touched it are
re-routed, every other circuit is held (hitless for the rest of the job and for every
other tenant). At most :data:`MAX_CANDIDATES` replacements are tried; one that cannot carry
all the job's layers is tried with lane 0 only (the job loses its extra layers) before the
next. If none fits, the other slices shed their extra lanes and the candidates are tried
once more; then the job stalls until the repair (the simulator's business).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from photonics.rack.circuits import Circuit, Occupancy, PlacementError, Request
from photonics.rack.model import Rack
from photonics.rack.patterns import Rounds, logical_rounds
from photonics.rack.steptime import StepModel, fixed_comm_ms, rounds_comm_ms, switch_time_ms
from photonics.rack.traces import TraceJob

# Accelerator sets tried per placement or splice: each costs a routing pass (a few ms on a
# SmartLight); past a handful the later windows rarely succeed where the first failed.
MAX_CANDIDATES = 6
# One-mesh windows tried per mesh before windows that span meshes: a full mesh whose first
# windows fail is usually congested, and a spanning slice may still fit through the fibres.
WINDOWS_PER_MESH = 3
# A matching round is split in two when it does not route (as the fabric's schedule does);
# a round of one pair (two links) is not split further.
MIN_SPLIT_LINKS = 2


class FabricAllocator:
    """Places jobs on a rack of programmable meshes; keeps the circuits in an :class:`Occupancy`."""

    name = "fabric"

    def __init__(self, rack: Rack, max_lanes: int | None = None, step_model: StepModel | None = None) -> None:
        self.rack = rack
        # With a step model an all-to-all may also be laid as a static ring (see _lay_cheapest)
        self.step_model = step_model
        # Lanes a slice may use (1 = the pattern once, no parallel copies); all by default.
        self.max_lanes = rack.n_lanes if max_lanes is None else max(1, min(max_lanes, rack.n_lanes))
        self.occupancy = Occupancy(rack)
        self.members: dict[str, list[str]] = {}
        self.patterns: dict[str, str] = {}
        self.layers: dict[str, int] = {}
        self._order = {n: i for i, n in enumerate(rack.names)}

    # -- placement ------------------------------------------------------------------------
    def may_fit(self, job: TraceJob) -> bool:
        """False when ``job`` can never run here: more accelerators than the rack's workers."""
        return job.size <= len(self.rack.workers)

    def place(self, job: TraceJob, free: Sequence[str]) -> list[str] | None:
        """Lay ``job`` on some of the ``free`` accelerators; its members, or None when it does not fit."""
        workers = [a for a in free if not self.rack.accelerator(a).spare]
        if len(workers) < job.size:
            return None
        members = self._first_fit(job, workers)
        if members is None and self.shed():  # extra lanes of running slices give way to a new slice
            members = self._first_fit(job, workers)
            if members is None:  # shedding did not help: give the lanes back
                self.regrow()
        return members

    def _first_fit(self, job: TraceJob, workers: Sequence[str]) -> list[str] | None:
        for members in self.candidates(workers, job.size):
            if self._lay_cheapest(job, members):
                return list(members)
        return None

    def layouts(self, job: TraceJob) -> tuple[str, ...]:
        """The circuit patterns ``job`` may be laid as, in the order tried.

        An all-to-all of three or more is laid as its matching rounds (the mesh re-programs
        between rounds) and, with a step model, also as a static ring (extra lanes: parallel
        copies) whose circuits carry the rotations forwarded hop by hop (nothing to
        reconfigure; shared like any ring): the choice
        :func:`photonics.collectives.compile_collective` makes between switching and
        forwarding. (A ring both ways -- the odd lanes reversed, as the baseline's ring is
        wired -- does not route even on an empty SmartLight for 3, 4, 6 or 8 members: tried
        and dropped.)
        """
        if job.pattern == "all-to-all" and job.size > 2 and self.step_model is not None:
            return ("all-to-all", "ring")
        return (job.pattern,)

    def _lay_cheapest(self, job: TraceJob, members: Sequence[str]) -> bool:
        """Lay ``job`` on ``members`` in the layout whose step is shortest; False when none fits."""
        options = self.layouts(job)
        best: tuple[float, str] | None = None
        for k, layout in enumerate(options):
            if not self._lay_job(job.name, job.pattern, members, layout):
                continue
            if len(options) == 1:
                return True
            assert self.step_model is not None
            cost = self.comm_ms(job.name, self.step_model)
            if best is not None and best[0] <= cost:
                self.release(job.name)
                continue
            best = (cost, layout)
            if k < len(options) - 1:
                self.release(job.name)
        if best is None:
            return False
        if job.name not in self.members:  # the cheapest was not the last laid: lay it again
            return self._lay_job(job.name, job.pattern, members, best[1])
        return True

    def shed(self) -> bool:
        """Drop every running slice's extra lanes (lane >= 1), keeping lane 0 as it is; any dropped?

        Lane-0 circuits are untouched, so this is hitless for every job's pattern; only the
        parallel copies go. :meth:`regrow` gives them back when nobody is waiting.
        """
        dropped = False
        for name, cs in self.occupancy.circuits.items():
            extra = [c for c in cs if c.layer > 0]
            if extra:
                self.occupancy.remove(name, extra)
                self.layers[name] = 1
                dropped = True
        return dropped

    def regrow(self) -> None:
        """Give running slices back the extra lanes that fit now, in placement order."""
        for name in list(self.members):
            if self.layers[name] < self.max_lanes:
                multi = name in self.occupancy.multi_round
                self.layers[name] += self._add_layers(name, self._rounds(name), multi, self.layers[name])

    def _rounds(self, name: str) -> Rounds:
        """The job's rounds as laid (lane 0), in round order."""
        by_round: dict[int, list[tuple[str, str]]] = {}
        for c in self.occupancy.circuits.get(name, []):
            if c.layer == 0:
                by_round.setdefault(c.round, []).append(c.link)
        return tuple(tuple(by_round[r]) for r in sorted(by_round))

    def candidates(self, workers: Sequence[str], n: int) -> list[list[str]]:
        """Accelerator sets to try, best first (see the module docstring), at most MAX_CANDIDATES."""
        ordered = sorted(workers, key=self._order.__getitem__)
        by_mesh: dict[str, list[str]] = {}
        for w in ordered:
            by_mesh.setdefault(self.rack.accelerator(w).mesh, []).append(w)
        out: list[list[str]] = []
        for m in sorted((m for m in by_mesh if len(by_mesh[m]) >= n), key=lambda m: len(by_mesh[m])):
            wins = sorted(_windows(by_mesh[m], n), key=self._spread)
            out += wins[:WINDOWS_PER_MESH]
        spanning = [w for w in _windows(ordered, n) if len({self.rack.accelerator(a).mesh for a in w}) > 1]
        spanning.sort(key=lambda w: len({self.rack.accelerator(a).mesh for a in w}))
        out += spanning
        seen: set[frozenset[str]] = set()
        unique = []
        for w in out:
            if frozenset(w) not in seen:
                seen.add(frozenset(w))
                unique.append(w)
        return unique[:MAX_CANDIDATES]

    def _spread(self, window: Sequence[str]) -> int:
        """Accelerators of other tenants (or failed) lying between a window's neighbours, in rack order.

        A compact window keeps its links short and out of other slices' paths.
        """
        pos = [self._order[a] for a in window]
        return sum((b - a) % len(self._order) - 1 for a, b in pairwise(pos))

    def _lay_job(self, name: str, pattern: str, members: Sequence[str], layout: str | None = None) -> bool:
        """Lay job ``name`` (collective ``pattern``) on ``members`` with the circuits of ``layout``."""
        rounds = logical_rounds(layout or pattern, members)
        multi = len(rounds) > 1
        laid: list[tuple[tuple[str, str], ...]] = []
        todo = list(rounds)
        try:
            while todo:
                links = todo.pop(0)
                try:
                    self.occupancy.lay(name, [Request(len(laid), 0, lk) for lk in links], multi)
                except PlacementError:
                    if not multi or len(links) <= MIN_SPLIT_LINKS:
                        raise
                    todo[:0] = _halves(links)  # a matching that does not route: two rounds
                    continue
                laid.append(links)
        except PlacementError:
            self.occupancy.release(name)
            return False
        rounds = tuple(laid)
        self.members[name], self.patterns[name] = list(members), pattern
        self.layers[name] = 1 + self._add_layers(name, rounds, multi, 1)
        return True

    def _add_layers(self, name: str, rounds: Rounds, multi: bool, first: int) -> int:
        """Add lanes ``first``, ``first + 1``, ... while they fit; how many were added."""
        added = 0
        for layer in range(first, self.max_lanes):
            laid: list[Circuit] = []
            try:
                for r, links in enumerate(rounds):
                    laid += self.occupancy.lay(name, [Request(r, layer, lk) for lk in links], multi)
            except PlacementError:
                self.occupancy.remove(name, laid)
                break
            added += 1
        return added

    def release(self, name: str) -> None:
        """Free the circuits of job ``name``."""
        self.occupancy.release(name)
        for table in (self.members, self.patterns, self.layers):
            table.pop(name, None)

    # -- failures ---------------------------------------------------------------------------
    def splice(self, name: str, failed: str, free: Sequence[str]) -> str | None:
        """Replace ``failed`` in job ``name`` by a free accelerator; the replacement, or None."""
        cands = self._replacements(failed, free)
        for attempt in range(2):  # the second time after the other slices shed their extra lanes
            for c in cands:
                for keep_layers in (True, False):
                    if self._resplice(name, failed, c, keep_layers):
                        self.members[name] = [c if m == failed else m for m in self.members[name]]
                        return c
            if attempt == 0 and not self.shed():
                break
        self.regrow()  # shedding did not help (or there was nothing to shed)
        return None

    def _replacements(self, failed: str, free: Sequence[str]) -> list[str]:
        home = self.rack.accelerator(failed).mesh
        cands = sorted(free, key=lambda a: (not self.rack.accelerator(a).spare,
                                            self.rack.accelerator(a).mesh != home, self._order[a]))
        return cands[:MAX_CANDIDATES]

    def _resplice(self, name: str, failed: str, new: str, keep_layers: bool) -> bool:
        occ = self.occupancy
        before = list(occ.circuits.get(name, []))
        multi = name in occ.multi_round
        affected = [c for c in before if failed in c.link]
        drop = affected if keep_layers else [c for c in before if c in affected or c.layer > 0]
        occ.remove(name, drop)
        todo = [c for c in drop if c.layer == 0 or keep_layers]
        try:
            for r in sorted({c.round for c in todo}):
                occ.lay(name, [Request(c.round, c.layer, _sub(c.link, failed, new)) for c in todo
                               if c.round == r], multi)
        except PlacementError:
            occ.restore(name, before)
            return False
        if not keep_layers:
            self.layers[name] = 1
        return True

    # -- reporting --------------------------------------------------------------------------
    def bandwidth(self, name: str) -> float:
        """Lanes per accelerator carrying the job's logical links point to point, mean over rounds."""
        circuits = self.occupancy.circuits.get(name, [])
        n = len(self.members[name])
        rounds = len({c.round for c in circuits})
        return len(circuits) / n / rounds if circuits else 0.0

    def changes(self, name: str) -> int:
        """A counter that moves whenever job ``name``'s circuits change (a step-time cache key)."""
        return self.occupancy.changes.get(name, 0)

    def comm_ms(self, name: str, model: StepModel) -> float:
        """Time (ms) of the job's collective per step on the circuits it holds now.

        A ring or line runs over its circuits (a link's lanes share its bytes); an
        all-to-all laid as matching rounds runs round by round and pays each switch
        between rounds (:func:`~photonics.rack.steptime.switch_time_ms`).
        """
        members = self.members[name]
        rank = {a: i for i, a in enumerate(members)}
        links: dict[int, dict[tuple[int, int], int]] = {}
        states: dict[int, dict[str, dict[int, str]]] = {}
        for c in self.occupancy.circuits.get(name, []):
            pair = (rank[c.link[0]], rank[c.link[1]])
            mine = links.setdefault(c.round, {})
            mine[pair] = mine.get(pair, 0) + 1
            for mesh, route in c.segments:
                states.setdefault(c.round, {}).setdefault(mesh, {}).update(route.states())
        order = sorted(links)
        pattern = self.patterns[name]
        if pattern != "all-to-all" or len(order) < 2:
            return fixed_comm_ms(pattern, len(members), links.get(0, {}), model)
        relock = self.rack.transceiver.relock_ms
        switch = []
        for r, nxt in zip(order, [*order[1:], order[0]], strict=True):
            relink = bool(set(links[nxt]) - set(links[r]))
            switch.append(switch_time_ms(states[r], states[nxt], relink, model.timing, relock))
        return rounds_comm_ms(len(members), [links[r] for r in order], switch, model)

    def circuits(self, name: str) -> list[Circuit]:
        """The circuits job ``name`` holds now."""
        return list(self.occupancy.circuits.get(name, []))


def _sub(link: tuple[str, str], old: str, new: str) -> tuple[str, str]:
    return (new if link[0] == old else link[0], new if link[1] == old else link[1])


def _halves(links: tuple[tuple[str, str], ...]) -> list[tuple[tuple[str, str], ...]]:
    """A round's links in two halves, keeping each pair's two directions together."""
    pairs = list(dict.fromkeys(tuple(sorted(lk)) for lk in links))
    first = set(pairs[: len(pairs) // 2])
    return [tuple(lk for lk in links if tuple(sorted(lk)) in first),
            tuple(lk for lk in links if tuple(sorted(lk)) not in first)]


def _windows(seq: Sequence[str], n: int) -> list[list[str]]:
    """Every run of ``n`` consecutive items of ``seq``, circularly (one window when n == len)."""
    if n > len(seq):
        return []
    if n == len(seq):
        return [list(seq)]
    return [[seq[(s + i) % len(seq)] for i in range(n)] for s in range(len(seq))]
