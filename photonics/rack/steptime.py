"""A job's training step on what its slice holds: compute plus its collective (docs/rack.md).

Every job of a trace is a loop of identical steps: ``compute_ms`` of computation, then its
pattern's collective over the circuits (or wired links) it holds, priced with the package's
own alpha-beta model (:func:`photonics.collectives.cost.step_time_ms`; alpha per hop, bytes
per lane on the busiest link) plus, on a fabric that re-programs between rounds, the
modelled switch (heater write + settle + receiver re-lock, as
:mod:`photonics.collectives.compile` prices it). No overlap of computation and
communication is modelled.

The collective of each pattern (``n`` members in the job's order, ``buffer`` bytes per rank):

* ``ring``: a ring all-reduce (:func:`~photonics.collectives.algorithms.ring_allreduce`,
  2(n - 1) steps of ``buffer / n`` on every link i -> i + 1);
* ``line``: a pipeline hand-off, one step of ``buffer`` bytes on every link i -> i + 1;
* ``all-to-all``: MoE dispatch and combine (:func:`~photonics.collectives.algorithms.all_to_all`,
  one ``buffer / n`` block per ordered pair each way).

**The reference.** A trace's ``duration_h`` is the job's run time on an *ideal* slice of its
size: every logical link its own direct circuit on every lane the accelerators have,
nothing relayed, nothing to reconfigure. A real slice steps at ``rate = ideal / actual``
(<= 1 in every case modelled here), so a job on it needs ``duration_h / rate`` hours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from photonics.collectives.algorithms import all_to_all, ring_allreduce
from photonics.collectives.cost import CostModel, Pair, shortest_paths, step_time_ms
from photonics.collectives.steps import Collective
from photonics.fabric import TimingModel, recovery_timing
from photonics.rack.model import RackError

# Defaults of the step (docs/rack.md, "Step time"): a data-parallel step of a ~128 M
# parameter model (256 MB of bf16 gradients per rank) with 0.5 s of computation, so that on
# the ideal two-lane slice of 8 at 10 Gb/s the all-reduce is ~26 % of the step: bandwidth
# matters, without being everything. Both are options (--buffer-mb, --compute-ms).
BUFFER_MB = 256.0
COMPUTE_MS = 500.0
SETTLE_STEP_RAD = math.pi  # a TBU switched bar <-> cross takes a full pi heater step (worst case)

Transfers = dict[Pair, float]


@dataclass(frozen=True)
class StepModel:
    """A job's step: computation, the bytes its collective moves, and the circuits' alpha-beta.

    Attributes:
        buffer_mb: bytes per rank the collective moves per step, MB (1e6 bytes).
        compute_ms: computation per step, ms (not overlapped with communication).
        cost: alpha-beta of one lane (default: alpha 10 us, 10 Gb/s, the rack's DWDM lane).
        timing: the heater-write and settle model of a reconfiguration (docs/fabric.md).
    """

    buffer_mb: float = BUFFER_MB
    compute_ms: float = COMPUTE_MS
    cost: CostModel = field(default_factory=CostModel)
    timing: TimingModel = field(default_factory=TimingModel)

    def __post_init__(self) -> None:
        for key in ("buffer_mb", "compute_ms"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                raise RackError(f"{key} must be a finite number >= 0, not {value!r}")
        if self.buffer_mb == 0 and self.compute_ms == 0:
            raise RackError("a step needs computation or communication: buffer_mb and compute_ms are both 0")

    @property
    def buffer_bytes(self) -> float:
        """Bytes per rank per step."""
        return self.buffer_mb * 1e6


@lru_cache(maxsize=64)
def _collective(pattern: str, n: int) -> Collective | None:
    """The collective of ``pattern`` over ``n`` ranks (None for a line: built by hand below)."""
    if pattern == "ring":
        return ring_allreduce(n)
    if pattern == "all-to-all":
        return all_to_all(n, combine=True)
    if pattern == "line":
        return None
    raise RackError(f"unknown pattern {pattern!r}")


def collective_steps(pattern: str, n: int, buffer_bytes: float) -> list[Transfers]:
    """The collective's steps as ``{(src rank, dst rank): bytes}``, in order.

    Example:
        >>> collective_steps("line", 3, 100.0)
        [{(0, 1): 100.0, (1, 2): 100.0}]
        >>> len(collective_steps("ring", 4, 100.0)), collective_steps("ring", 4, 100.0)[0][(0, 1)]
        (6, 25.0)
    """
    coll = _collective(pattern, n)
    if coll is None:
        return [{(i, i + 1): buffer_bytes for i in range(n - 1)}]
    chunk = coll.chunk_bytes(buffer_bytes)
    return [{p: step.chunks_on(*p) * chunk for p in step.pairs} for step in coll.steps]


def fixed_comm_ms(pattern: str, n: int, links: Mapping[Pair, int], model: StepModel) -> float:
    """Time (ms) of the collective over circuits that stay put: ``links`` ``{(u, v): lanes}``.

    A transfer between ranks without a link is relayed along the shortest path of links
    (store and forward); ``inf`` when some transfer has no path at all.
    """
    paths = shortest_paths(list(links), n)
    total = 0.0
    for transfers in collective_steps(pattern, n, model.buffer_bytes):
        dt, _ = step_time_ms(transfers, paths, model.cost, links)
        total += dt
    return total


def rounds_comm_ms(n: int, rounds: Sequence[Mapping[Pair, int]], switch_ms: Sequence[float],
                   model: StepModel) -> float:
    """Time (ms) of an all-to-all (dispatch + combine) run round by round over matchings.

    ``rounds[r]`` holds the circuits of round ``r`` (``{(u, v): lanes}``, pairs joined both
    ways); each round moves one ``buffer / n`` block on each of its links, once for the
    dispatch and once for the combine. ``switch_ms[r]`` is the reconfiguration from round
    ``r`` to round ``r + 1`` (cyclically); with more than one round the mesh switches at
    every round boundary of both phases, ``2 * sum(switch_ms)`` per step.
    """
    block = model.buffer_bytes / n
    total = 0.0
    for links in rounds:
        paths = shortest_paths(list(links), n)
        dt, _ = step_time_ms(dict.fromkeys(links, block), paths, model.cost, links)
        total += 2 * dt
    if len(rounds) > 1:
        total += 2 * sum(switch_ms)
    return total


def ideal_comm_ms(pattern: str, n: int, lanes: int, model: StepModel) -> float:
    """Time (ms) of the collective when every logical link has ``lanes`` direct lanes of its own.

    For an all-to-all every ordered pair is such a link (a crossbar), so no transfer is
    relayed and nothing is reconfigured: the reference a trace's durations are measured on.
    """
    steps = collective_steps(pattern, n, model.buffer_bytes)
    pairs = {p for transfers in steps for p in transfers}
    return fixed_comm_ms(pattern, n, dict.fromkeys(pairs, lanes), model)


def rate(comm_ms: float, pattern: str, n: int, lanes: int, model: StepModel) -> float:
    """Work done per hour held (1 on the ideal slice of ``lanes`` lanes), 0 when it cannot run."""
    actual = model.compute_ms + comm_ms
    if not math.isfinite(actual):
        return 0.0
    return (model.compute_ms + ideal_comm_ms(pattern, n, lanes, model)) / actual


def switch_time_ms(before: Mapping[str, Mapping[int, str]], after: Mapping[str, Mapping[int, str]],
                   relink: bool, timing: TimingModel, relock_ms: float) -> float:
    """Modelled reconfiguration (ms) between two rounds of circuits.

    ``before``/``after``: ``{mesh: {TBU: "bar"|"cross"}}`` the rounds need. On each mesh the
    TBUs of ``after`` whose state differs (or that ``before`` did not set) are written --
    both heaters of each, on that mesh's own driver, so the meshes switch in parallel --
    then settle a full pi step; receivers re-lock once when any gets a new transmitter
    (``relink``). Write and settle are ``photonics.fabric.recovery_timing``'s, as
    :mod:`photonics.collectives.compile` prices a switch.
    """
    worst = 0.0
    for mesh, states in after.items():
        old = before.get(mesh, {})
        changed = [t for t, s in states.items() if old.get(t) != s]
        # the values only size the ASCII protocol's text; the binary frames are fixed length
        program = {ch: 1.0 for t in changed for ch in (2 * t, 2 * t + 1)}
        stages = recovery_timing(timing, 0.0, program, 0.0, 0, detect=False,
                                 max_phase_step_rad=SETTLE_STEP_RAD)
        worst = max(worst, stages["write"] + stages["settle"])
    return worst + (relock_ms if relink else 0.0)
