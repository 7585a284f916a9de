"""Collectives as step lists: who sends which chunk to whom, step by step (docs/collectives.md).

A :class:`Collective` is a list of :class:`Step`; a step is a set of :class:`Send` that
run at the same time. Every collective cuts its data into numbered chunks:

* ``allreduce``: each rank's buffer of ``size`` bytes is cut into ``n_chunks`` equal
  chunks; a ``reduce`` send adds the sender's partial sum of chunk ``c`` into the
  receiver's, a ``copy`` send overwrites the receiver's chunk with the sender's.
* ``alltoall`` (MoE dispatch and combine): each rank's buffer of ``size`` bytes holds one
  block per destination rank, ``size / n_ranks`` bytes each. Block ``s * N + d`` is rank
  s's data for rank d (dispatch); with ``combine`` the expert outputs travel back: block
  ``N*N + s * N + d`` is made at rank d from the dispatch block ``s * N + d`` once that has
  arrived, and must reach rank s.
* ``broadcast``: rank 0 (the root) holds a buffer of ``size`` bytes in ``n_chunks``
  chunks; every rank must end holding every chunk (``copy`` sends only).
* ``allgather``: the buffer of ``size`` bytes every rank ends with is ``n_chunks`` chunks,
  a multiple of ``n_ranks``; chunk ``c`` starts at rank ``c * n_ranks // n_chunks`` (each
  rank's own slice) and every rank must end holding every chunk (``copy`` sends only).

Sends carry whole chunks (a send of several chunks between one pair in one step is
several :class:`Send`). A rank may appear in several sends of one step: the compiler
serialises what its lanes cannot carry at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from photonics.errors import LumionError

KINDS = ("allreduce", "alltoall", "broadcast", "allgather")
OPS = ("reduce", "copy")


class CollectiveError(LumionError, ValueError):
    """A collective, a step file or a request to compile one is malformed or cannot be met."""


@dataclass(frozen=True, order=True)
class Send:
    """One chunk moving from rank ``src`` to rank ``dst`` (``op``: reduce or copy)."""

    src: int
    dst: int
    chunk: int
    op: str = "copy"


@dataclass(frozen=True)
class Step:
    """Sends that run at the same time; ``label`` names the algorithm's phase."""

    sends: tuple[Send, ...]
    label: str = ""

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Distinct directed (src, dst) rank pairs of the step, in first-use order."""
        return tuple(dict.fromkeys((s.src, s.dst) for s in self.sends))

    def chunks_on(self, src: int, dst: int) -> int:
        """Number of chunks the step moves from ``src`` to ``dst``."""
        return sum(1 for s in self.sends if (s.src, s.dst) == (src, dst))


@dataclass(frozen=True)
class Collective:
    """A collective algorithm as steps over ranks ``0 .. n_ranks - 1``.

    Attributes:
        name: algorithm label (``ring``, ``tree``, ``halving-doubling``, ...).
        kind: ``allreduce``, ``alltoall``, ``broadcast`` (from rank 0) or ``allgather``.
        n_ranks: number of ranks.
        n_chunks: chunks per buffer (allreduce) or blocks in all (alltoall: N*N, or
            2*N*N with ``combine``).
        steps: the steps, in order.
        combine: alltoall only: the blocks travel back (MoE combine) after dispatch.
        lag_ms: ``{rank: ms}`` ranks that join late (a straggler); a step that involves
            such a rank cannot start before its lag.
    """

    name: str
    kind: str
    n_ranks: int
    n_chunks: int
    steps: tuple[Step, ...]
    combine: bool = False
    lag_ms: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CollectiveError(f"collective kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.n_ranks < 2:
            raise CollectiveError(f"a collective needs at least 2 ranks, not {self.n_ranks}")
        if self.n_chunks < 1:
            raise CollectiveError(f"a collective needs at least 1 chunk, not {self.n_chunks}")
        if self.kind == "allgather" and self.n_chunks % self.n_ranks:
            raise CollectiveError(f"an allgather's chunks must be a multiple of its {self.n_ranks} ranks "
                                  f"(each rank starts with an equal slice), not {self.n_chunks}")
        for k, step in enumerate(self.steps):
            for s in step.sends:
                check_send(s, self.n_ranks, self.n_chunks, f"step {k + 1}")

    def chunk_bytes(self, size_bytes: float) -> float:
        """Bytes of one chunk when each rank's buffer is ``size_bytes``."""
        if self.kind == "alltoall":
            return size_bytes / self.n_ranks
        return size_bytes / self.n_chunks

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (not the steps)."""
        return {"name": self.name, "kind": self.kind, "n_ranks": self.n_ranks, "n_chunks": self.n_chunks,
                "n_steps": len(self.steps), "combine": self.combine,
                "lag_ms": {str(k): v for k, v in self.lag_ms.items()}}


def check_send(send: Send, n_ranks: int, n_chunks: int, where: str) -> None:
    """CollectiveError naming ``where`` when a send is out of range or malformed."""
    if not (0 <= send.src < n_ranks and 0 <= send.dst < n_ranks):
        raise CollectiveError(f"{where}: send {send.src} -> {send.dst} names a rank outside 0..{n_ranks - 1}")
    if send.src == send.dst:
        raise CollectiveError(f"{where}: rank {send.src} sends to itself; a send joins two different ranks")
    if not 0 <= send.chunk < n_chunks:
        raise CollectiveError(f"{where}: chunk {send.chunk} is outside 0..{n_chunks - 1}")
    if send.op not in OPS:
        raise CollectiveError(f"{where}: op must be one of {', '.join(OPS)}, not {send.op!r}")
