"""What the collective compilers share: configurations of circuits and the rounds that use them.

A :class:`CircuitSet` is one mesh configuration of a compiled schedule (point-to-point
circuits, or multicast trees); a :data:`RoundSpec` is one round a step may run as, with the
configurations it may run on. :mod:`.compile` (point to point, and the DP) and
:mod:`.multicast` (trees) both build them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from photonics.collectives.cost import Pair
from photonics.collectives.steps import Step
from photonics.configuration import Configuration

Circuit = tuple[int, tuple[int, ...]]  # a multicast tree: (source rank, destination ranks)
Chunks = dict[Pair, frozenset[int]]  # the chunks each transfer of a round carries
# (step index, label, transfers {pair: bytes}, candidate configuration ids, chunks per pair)
RoundSpec = tuple[int, str, dict[Pair, float], tuple[int, ...], Chunks]


@dataclass(frozen=True, eq=False)
class CircuitSet:
    """One configuration of the compiled schedule: its circuits (rank pairs) and figures."""

    index: int
    links: tuple[Pair, ...]
    ports: tuple[tuple[int, int], ...]
    configuration: Configuration
    heater: np.ndarray
    worst_loss_db: float
    worst_margin_db: float
    trees: tuple[Circuit, ...] = ()

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready form (``trees`` only for a configuration of multicast trees)."""
        out = {"index": self.index, "links": [f"{names[a]}->{names[b]}" for a, b in self.links],
               "worst_loss_db": self.worst_loss_db, "worst_margin_db": self.worst_margin_db}
        if self.trees:
            out["trees"] = [f"{names[s]}->{'+'.join(names[d] for d in ds)}" for s, ds in self.trees]
        return out



def step_chunks(step: Step, pairs: Sequence[Pair]) -> Chunks:
    """The chunks the step moves over each of ``pairs``."""
    out: dict[Pair, set[int]] = {p: set() for p in pairs}
    for snd in step.sends:
        if (snd.src, snd.dst) in out:
            out[(snd.src, snd.dst)].add(snd.chunk)
    return {p: frozenset(c) for p, c in out.items()}
