"""The alpha-beta cost of a step over a set of circuits, and the fixed topologies it is compared with.

A step's transfers ``{(src, dst): bytes}`` run over a directed graph of circuits (the mesh
configuration loaded, or a fixed ring/torus). A transfer whose pair is not a circuit is
forwarded along the shortest path of circuits (store-and-forward through the ranks in
between). The step takes::

    alpha * (most hops of any transfer) + (bytes on the busiest circuit) / bandwidth

i.e. one latency per hop (the software and NIC cost of a message, NCCL's alpha) and the
bottleneck circuit's serialisation (beta = 1 / bandwidth); transfers sharing a circuit
share its bandwidth. A pair with no path makes the step impossible (``inf``).
Defaults and their sources: :class:`CostModel` and docs/collectives.md.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from photonics.collectives.steps import CollectiveError

Pair = tuple[int, int]
FIXED_TOPOLOGIES = ("ring", "torus")


@dataclass(frozen=True)
class CostModel:
    """Alpha-beta constants of one circuit (every number configurable).

    Attributes:
        alpha_ms: latency per message hop, ms. 0.010 ms: NCCL's own tuning model charges a
            Ring/Simple base latency of 8.4 us plus a per-hop network latency of a few us
            (NVIDIA/nccl ``src/graph/tuning.cc``, ``baseLat`` and ``hwLat``).
        gbps: payload rate of one circuit, Gb/s. 10: the fabric's default lane is the
            C-band 10GBASE-ZR DWDM SFP+ (``dwdm-10g-zr``, photonics.budget); set 400 or 800
            for the rates of current accelerator optics.
        relock_ms: receiver re-lock after its light is switched, paid once per
            reconfiguration that gives any receiver a new transmitter. None: the receiving
            lanes' own ``relock_ms`` (5 ms, reported for 800G modules); 0 models
            burst-mode optics that lock in nanoseconds (as circuit-switched research
            fabrics assume).
    """

    alpha_ms: float = 0.010
    gbps: float = 10.0
    relock_ms: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha_ms) and self.alpha_ms >= 0):
            raise CollectiveError(f"alpha_ms must be a number >= 0, not {self.alpha_ms!r}")
        if not (math.isfinite(self.gbps) and self.gbps > 0):
            raise CollectiveError(f"gbps must be a number > 0, not {self.gbps!r}")
        if self.relock_ms is not None and not (math.isfinite(self.relock_ms) and self.relock_ms >= 0):
            raise CollectiveError(f"relock_ms must be a number >= 0, not {self.relock_ms!r}")

    def transfer_ms(self, n_bytes: float) -> float:
        """Serialisation time (ms) of ``n_bytes`` on one circuit."""
        return n_bytes * 8 / (self.gbps * 1e9) * 1e3


def shortest_paths(edges: Iterable[Pair], n: int) -> dict[int, dict[int, list[int]]]:
    """BFS paths (as rank lists) from every rank over directed ``edges``; ties by lowest rank."""
    adj: dict[int, list[int]] = {r: [] for r in range(n)}
    for a, b in sorted(set(edges)):
        adj[a].append(b)
    out: dict[int, dict[int, list[int]]] = {}
    for s in range(n):
        prev = {s: s}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if v not in prev:
                    prev[v] = u
                    queue.append(v)
        paths = {}
        for t in prev:
            path = [t]
            while path[-1] != s:
                path.append(prev[path[-1]])
            paths[t] = path[::-1]
        out[s] = paths
    return out


def step_time_ms(transfers: Mapping[Pair, float], paths: Mapping[int, Mapping[int, list[int]]],
                 cost: CostModel, lanes: Mapping[Pair, int] | None = None,
                 ) -> tuple[float, dict[Pair, list[int]]]:
    """(time in ms, the path each transfer takes) of one step over the circuits ``paths`` come from.

    ``lanes`` gives the parallel circuits of a link (``{(u, v): k}``; 1 where absent): the
    bytes on a link are shared over its ``k`` lanes, so the bottleneck is the link with the
    most bytes per lane. ``inf`` (and no paths) when a transfer has no path.
    """
    load: dict[Pair, float] = {}
    used: dict[Pair, list[int]] = {}
    hops = 0
    for (a, b), n_bytes in transfers.items():
        path = paths.get(a, {}).get(b)
        if path is None:
            return math.inf, {}
        used[(a, b)] = path
        hops = max(hops, len(path) - 1)
        for u, v in itertools.pairwise(path):
            load[(u, v)] = load.get((u, v), 0.0) + n_bytes
    if not transfers:
        return 0.0, {}
    per_lane = max(v / (lanes.get(e, 1) if lanes else 1) for e, v in load.items())
    return cost.alpha_ms * hops + cost.transfer_ms(per_lane), used


def _torus_shape(n: int) -> tuple[int, int]:
    """The most nearly square rows x cols = n with both >= 2 (CollectiveError for primes)."""
    best = None
    for r in range(2, math.isqrt(n) + 1):
        if n % r == 0:
            best = (r, n // r)
    if best is None:
        raise CollectiveError(f"a 2-D torus of {n} ranks needs n = rows x cols with both >= 2; "
                              f"{n} has no such factors (compare with the ring)")
    return best


def fixed_edges(topology: str, n: int) -> list[Pair]:
    """Directed links of a fixed topology over ranks 0..n-1.

    ``ring``: rank i -> i + 1, one lane per rank (the same transceivers the fabric has,
    cabled once). ``torus``: a rows x cols torus, each rank linked both ways to its four
    neighbours: four lanes per rank, four times the transceivers.
    """
    if topology == "ring":
        return [(i, (i + 1) % n) for i in range(n)]
    if topology == "torus":
        rows, cols = _torus_shape(n)
        edges = set()
        for r in range(rows):
            for c in range(cols):
                i = r * cols + c
                for j in (r * cols + (c + 1) % cols, ((r + 1) % rows) * cols + c):
                    if j != i:
                        edges |= {(i, j), (j, i)}
        return sorted(edges)
    raise CollectiveError(f"fixed topology must be one of {', '.join(FIXED_TOPOLOGIES)}, not {topology!r}")


def fixed_lanes(topology: str) -> int:
    """Transceiver lanes per rank the fixed topology needs (TX and RX each)."""
    return {"ring": 1, "torus": 4}[topology]
