"""Collectives as circuit schedules (docs/collectives.md), one module per concern.

- :mod:`~photonics.collectives.steps`: sends, steps and collectives (the data model);
- :mod:`~photonics.collectives.algorithms`: ring, tree, halving-doubling, all-to-all, straggler-aware;
- :mod:`~photonics.collectives.stepfile`: TACCL-style step files (JSON or TOML);
- :mod:`~photonics.collectives.simulate`: data movement, the correctness check;
- :mod:`~photonics.collectives.cost`: alpha-beta step cost, fixed ring and torus;
- :mod:`~photonics.collectives.placement`: fabrics of N accelerators and spares;
- :mod:`~photonics.collectives.compile`: rounds, configurations, keep-or-reconfigure DP;
- :mod:`~photonics.collectives.multicast`: the same with multicast trees (one TX, many RX).
"""

from photonics.collectives.algorithms import (
    PATTERNS,
    all_to_all,
    by_pattern,
    chain_broadcast,
    flat_allgather,
    flat_broadcast,
    halving_doubling_allreduce,
    ring_allgather,
    ring_allreduce,
    straggler_allreduce,
    tree_allreduce,
    tree_broadcast,
    tree_multicast_allreduce,
)
from photonics.collectives.compile import (
    CircuitSet,
    CompiledCollective,
    Round,
    compile_collective,
    fixed_time_ms,
)
from photonics.collectives.cost import CostModel, fixed_edges, shortest_paths, step_time_ms
from photonics.collectives.multicast import merged_steps, step_circuits
from photonics.collectives.placement import rank_names, slot_fabric
from photonics.collectives.simulate import Outcome, alltoall_goal, simulate
from photonics.collectives.stepfile import STEP_SCHEMA, STEP_VERSION, load_steps, parse_steps
from photonics.collectives.steps import Collective, CollectiveError, Send, Step

__all__ = [
    "PATTERNS",
    "STEP_SCHEMA",
    "STEP_VERSION",
    "CircuitSet",
    "Collective",
    "CollectiveError",
    "CompiledCollective",
    "CostModel",
    "Outcome",
    "Round",
    "Send",
    "Step",
    "all_to_all",
    "alltoall_goal",
    "by_pattern",
    "chain_broadcast",
    "compile_collective",
    "fixed_edges",
    "fixed_time_ms",
    "flat_allgather",
    "flat_broadcast",
    "halving_doubling_allreduce",
    "load_steps",
    "merged_steps",
    "parse_steps",
    "rank_names",
    "ring_allgather",
    "ring_allreduce",
    "shortest_paths",
    "simulate",
    "slot_fabric",
    "step_circuits",
    "step_time_ms",
    "straggler_allreduce",
    "tree_allreduce",
    "tree_broadcast",
    "tree_multicast_allreduce",
]
