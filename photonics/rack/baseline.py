"""The fixed electrical-style baseline: a static bidirectional ring (1-D torus) over the same workers.

Each worker's lane 0 is wired to its clockwise neighbour and lane 1 to its anticlockwise
neighbour, in the rack's worker order (a two-lane accelerator has exactly the degree of a
1-D torus). The wiring never changes, so:

* a slice must be a **contiguous arc** of free workers (first fit, clockwise from the first
  worker); the whole ring when the job asks for every worker;
* traffic between two slice members that are not ring neighbours is relayed through the
  members between them: only neighbour pairs get a point-to-point lane (what
  :meth:`BaselineAllocator.bandwidth` counts);
* spares cannot be spliced in (there is no switch): :meth:`BaselineAllocator.splice` always
  says no, and a failed member stalls its job until it is repaired.
"""

from __future__ import annotations

from collections.abc import Sequence

from photonics.rack.model import Rack
from photonics.rack.patterns import logical_rounds
from photonics.rack.traces import TraceJob


class BaselineAllocator:
    """Contiguous-arc slices of a static ring; no circuits to route, no spares."""

    name = "baseline"

    def __init__(self, rack: Rack) -> None:
        self.rack = rack
        self.ring = list(rack.workers)
        self._pos = {a: i for i, a in enumerate(self.ring)}
        self.members: dict[str, list[str]] = {}
        self.patterns: dict[str, str] = {}

    def place(self, job: TraceJob, free: Sequence[str]) -> list[str] | None:
        """The first clockwise arc of ``job.size`` free workers, or None."""
        n, size = len(self.ring), job.size
        ok = [a in set(free) for a in self.ring]
        if size > n:
            return None
        starts = [0] if size == n else range(n)
        for s in starts:
            if all(ok[(s + i) % n] for i in range(size)):
                members = [self.ring[(s + i) % n] for i in range(size)]
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
        """Nothing to regrow: a static ring's lanes never change."""

    def neighbours(self, a: str, b: str) -> bool:
        """True when workers ``a`` and ``b`` are wired to each other."""
        d = abs(self._pos[a] - self._pos[b])
        return d in (1, len(self.ring) - 1)

    def bandwidth(self, name: str) -> float:
        """Lanes per accelerator carrying the job's logical links point to point, mean over rounds.

        A logical link ``a -> b`` has one direct lane when a and b are ring neighbours, none
        otherwise (it is relayed).
        """
        members = self.members[name]
        rounds = logical_rounds(self.patterns[name], members)
        direct = [sum(self.neighbours(a, b) for a, b in links) for links in rounds]
        return sum(direct) / len(members) / len(rounds)
