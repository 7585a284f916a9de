"""The fixed electrical-style baseline: a static torus over the same workers, contiguous slices.

Two topologies (``baseline`` in the rack file, ``--baseline`` on the command line):

* ``ring`` (default): a bidirectional ring (1-D torus) in the rack's worker order. Each
  worker's lane 0 goes to its clockwise neighbour and lane 1 to its anticlockwise one: a
  two-lane accelerator has exactly the degree of a 1-D torus, so the baseline has the same
  optics per accelerator as the fabric.
* ``torus:RxC``: a 2-D torus, workers row by row (``R * C`` must equal the number of
  workers). Each worker has four wired links, one per neighbour: twice the fabric's two
  lanes -- the comparison Morphlux makes (a TPU-like torus), not an equal-hardware one.

The wiring never changes, so:

* a slice must be a **contiguous sub-block**: an arc of the ring, or an ``h x w`` rectangle
  of the torus (wrapping around; first fit: the squarest shape first, then row-major
  anchors); a job whose size has no such shape never runs;
* traffic between slice members that are not wired neighbours is relayed through other
  members: only neighbour pairs get a point-to-point lane (what :meth:`bandwidth` counts);
  members are ordered along the block (boustrophedon) so a ring uses wired links;
* spares cannot be spliced in (there is no switch): :meth:`splice` always says no, and a
  failed member stalls its job until it is repaired.
"""

from __future__ import annotations

from collections.abc import Sequence

from photonics.rack.model import Rack, baseline_shape  # baseline_shape: also the rack file's check
from photonics.rack.patterns import logical_rounds
from photonics.rack.steptime import StepModel, fixed_comm_ms
from photonics.rack.traces import TraceJob

__all__ = ["BASELINES", "BaselineAllocator", "baseline_shape"]

BASELINES = ("ring", "torus:RxC")


class BaselineAllocator:
    """Contiguous sub-block slices of a static torus (a ring by default); no circuits, no spares."""

    name = "baseline"

    def __init__(self, rack: Rack, topology: str = "ring") -> None:
        self.rack = rack
        self.topology = topology
        self.workers = list(rack.workers)
        self.rows, self.cols = baseline_shape(topology, len(self.workers))
        self._pos = {a: divmod(i, self.cols) for i, a in enumerate(self.workers)}
        self.members: dict[str, list[str]] = {}
        self.patterns: dict[str, str] = {}

    def shapes(self, n: int) -> list[tuple[int, int]]:
        """Block shapes ``(h, w)`` of ``n`` positions that fit the torus, squarest first."""
        out = [(h, n // h) for h in range(1, self.rows + 1) if n % h == 0 and n // h <= self.cols]
        return sorted(out, key=lambda s: (abs(s[0] - s[1]), s))

    def block(self, r0: int, c0: int, h: int, w: int) -> list[str]:
        """Workers of the ``h x w`` block anchored at ``(r0, c0)``, boustrophedon order (wrapping)."""
        out = []
        for i in range(h):
            cols = range(w) if i % 2 == 0 else range(w - 1, -1, -1)
            out += [self.workers[((r0 + i) % self.rows) * self.cols + (c0 + j) % self.cols] for j in cols]
        return out

    def may_fit(self, job: TraceJob) -> bool:
        """False when ``job`` can never run here: no block of its size fits the torus."""
        return bool(self.shapes(job.size))

    def place(self, job: TraceJob, free: Sequence[str]) -> list[str] | None:
        """The first free block of ``job.size`` workers (squarest shape, row-major anchor), or None."""
        ok = set(free)
        for h, w in self.shapes(job.size):
            rows = [0] if h == self.rows else range(self.rows)
            cols = [0] if w == self.cols else range(self.cols)
            for r0 in rows:
                for c0 in cols:
                    members = self.block(r0, c0, h, w)
                    if all(a in ok for a in members):
                        self.members[job.name], self.patterns[job.name] = members, job.pattern
                        return members
        return None

    def release(self, name: str) -> None:
        """Forget job ``name``."""
        self.members.pop(name, None)
        self.patterns.pop(name, None)

    def splice(self, name: str, failed: str, free: Sequence[str]) -> str | None:
        """A static topology cannot splice anything in: always None."""
        del name, failed, free
        return None

    def regrow(self) -> None:
        """Nothing to regrow: static links never change."""

    def neighbours(self, a: str, b: str) -> bool:
        """True when workers ``a`` and ``b`` are wired to each other."""
        (ra, ca), (rb, cb) = self._pos[a], self._pos[b]
        dr, dc = (rb - ra) % self.rows, (cb - ca) % self.cols
        return (dr == 0 and dc in (1, self.cols - 1)) or (dc == 0 and dr in (1, self.rows - 1))

    def bandwidth(self, name: str) -> float:
        """Lanes per accelerator carrying the job's logical links point to point, mean over rounds.

        A logical link ``a -> b`` has one direct lane when a and b are wired neighbours, none
        otherwise (it is relayed).
        """
        members = self.members[name]
        rounds = logical_rounds(self.patterns[name], members)
        direct = [sum(self.neighbours(a, b) for a, b in links) for links in rounds]
        return sum(direct) / len(members) / len(rounds)

    def changes(self, name: str) -> int:
        """Static links never change: always 0 (the step-time cache key)."""
        del name
        return 0

    def comm_ms(self, name: str, model: StepModel) -> float:
        """Time (ms) of the job's collective per step over the wired links inside its block.

        Each wired neighbour pair is one lane each way; traffic between members that are not
        neighbours is relayed through other members (never through another tenant's slice).
        """
        members = self.members[name]
        links = {(i, j): 1 for i, a in enumerate(members) for j, b in enumerate(members)
                 if i != j and self.neighbours(a, b)}
        return fixed_comm_ms(self.patterns[name], len(members), links, model)
