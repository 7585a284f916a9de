"""Data movement, step by step: what every rank's buffer holds after each step.

The simulator is the correctness check of every schedule (algorithms, step files):

* allreduce: each rank's chunk ``c`` is the set of ranks whose contributions it sums.
  A ``reduce`` send adds the sender's set to the receiver's (the two must be disjoint:
  adding a contribution twice is a wrong sum); a ``copy`` overwrites. Sends of one step
  read the buffers as they were before the step (they run at the same time). Done when
  every rank holds every chunk summed over all ranks.
* alltoall: a rank holds a set of blocks; a send needs the sender to hold the block. A
  block arriving at its destination counts as a delivery (exactly one per block);
  forwarding through other ranks is allowed. With ``combine`` a rank makes the combine
  block ``N*N + s*N + d`` when the dispatch block ``s*N + d`` reaches it (``d`` itself).
* broadcast and allgather: a rank holds a set of chunks (the root all of them; in an
  allgather each rank its own slice); a send needs the sender to hold the chunk and must
  be a ``copy``. Done when every rank holds every chunk.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from photonics.collectives.steps import Collective, CollectiveError


@dataclass(frozen=True)
class Outcome:
    """Final state of a simulated collective.

    Attributes:
        holdings: allreduce: ``holdings[r][c]`` the ranks summed into rank r's chunk c;
            alltoall: ``holdings[r]`` the blocks rank r holds (one tuple per rank).
        deliveries: alltoall: times each block reached its destination (block -> count).
        complete: True when the collective's goal is met (see module docstring).
        missing: a one-line description of the first unmet goal ("" when complete).
    """

    holdings: tuple[tuple[frozenset[int], ...], ...] | tuple[frozenset[int], ...]
    deliveries: dict[int, int]
    complete: bool
    missing: str


def simulate(coll: Collective, *, strict: bool = True) -> Outcome:
    """Move the data through every step; CollectiveError on an impossible send.

    With ``strict`` an incomplete result raises too (the message names the first rank
    and chunk short of its goal).
    """
    run = {"allreduce": _allreduce, "alltoall": _alltoall}.get(coll.kind, _gather)
    out = run(coll)
    if strict and not out.complete:
        raise CollectiveError(f"{coll.name}: the schedule does not complete the {coll.kind}: {out.missing}")
    return out


def _allreduce(coll: Collective) -> Outcome:
    n, everyone = coll.n_ranks, frozenset(range(coll.n_ranks))
    buf = [[frozenset({r}) for _ in range(coll.n_chunks)] for r in range(n)]
    for k, step in enumerate(coll.steps):
        before = [list(b) for b in buf]
        for s in step.sends:
            have = before[s.src][s.chunk]
            if s.op == "copy":
                buf[s.dst][s.chunk] = have
                continue
            mine = buf[s.dst][s.chunk]
            twice = mine & have
            if twice:
                raise CollectiveError(f"{coll.name} step {k + 1}: rank {s.dst} would add rank "
                                      f"{min(twice)}'s contribution to chunk {s.chunk} twice")
            buf[s.dst][s.chunk] = mine | have
    missing = ""
    for r in range(n):
        for c in range(coll.n_chunks):
            if buf[r][c] != everyone and not missing:
                lack = sorted(everyone - buf[r][c])
                missing = (f"rank {r} chunk {c} lacks rank(s) {lack}" if lack else
                           f"rank {r} chunk {c} is wrong")
    return Outcome(tuple(tuple(b) for b in buf), {}, not missing, missing)


def alltoall_goal(n: int, combine: bool) -> dict[int, int]:
    """Block -> the rank it must reach (dispatch blocks, and combine blocks with ``combine``)."""
    goal = {s * n + d: d for s in range(n) for d in range(n) if s != d}
    if combine:
        goal |= {n * n + s * n + d: s for s in range(n) for d in range(n) if s != d}
    return goal


def _alltoall(coll: Collective) -> Outcome:
    n = coll.n_ranks
    goal = alltoall_goal(n, coll.combine)
    held = [{s * n + d for d in range(n)} for s in range(n)]
    if coll.combine:
        for r in range(n):
            held[r].add(n * n + r * n + r)
    delivered: Counter[int] = Counter()
    for k, step in enumerate(coll.steps):
        before = [set(h) for h in held]
        for s in step.sends:
            if s.chunk not in before[s.src]:
                raise CollectiveError(f"{coll.name} step {k + 1}: rank {s.src} sends block {s.chunk}, "
                                      "which it does not hold")
            held[s.dst].add(s.chunk)
            if goal.get(s.chunk) == s.dst:
                delivered[s.chunk] += 1
                if coll.combine and s.chunk < n * n:  # the expert output for the sender
                    src = s.chunk // n
                    held[s.dst].add(n * n + src * n + s.dst)
    missing = ""
    for block, dst in sorted(goal.items()):
        if delivered[block] != 1:
            what = "never delivered" if not delivered[block] else f"delivered {delivered[block]} times"
            missing = f"block {block} for rank {dst} {what}"
            break
    return Outcome(tuple(frozenset(h) for h in held), dict(delivered), not missing, missing)



def _gather(coll: Collective) -> Outcome:
    """Broadcast (from rank 0) and allgather: copies of chunks, every rank to hold all."""
    n, c = coll.n_ranks, coll.n_chunks
    if coll.kind == "broadcast":
        held = [set(range(c)) if r == 0 else set() for r in range(n)]
    else:
        held = [{k for k in range(c) if k * n // c == r} for r in range(n)]
    for k, step in enumerate(coll.steps):
        before = [set(h) for h in held]
        for s in step.sends:
            if s.op != "copy":
                raise CollectiveError(f"{coll.name} step {k + 1}: a {coll.kind} only copies chunks; "
                                      f"rank {s.src} sends chunk {s.chunk} as {s.op!r}")
            if s.chunk not in before[s.src]:
                raise CollectiveError(f"{coll.name} step {k + 1}: rank {s.src} sends chunk {s.chunk}, "
                                      "which it does not hold")
            held[s.dst].add(s.chunk)
    missing = ""
    for r in range(n):
        lack = sorted(set(range(c)) - held[r])
        if lack:
            missing = f"rank {r} lacks chunk(s) {lack[:8]}"
            break
    return Outcome(tuple(frozenset(h) for h in held), {}, not missing, missing)
