"""Collective algorithms as step lists (docs/collectives.md gives each with its step count).

Every function returns a :class:`~photonics.collectives.steps.Collective` whose data
movement :func:`~photonics.collectives.simulate.simulate` checks.
"""

from __future__ import annotations

from photonics.collectives.steps import Collective, CollectiveError, Send, Step

# Tree all-reduce pipelines its buffer in this many chunks: enough to overlap the levels
# of a small tree, few enough that the per-step latency stays small against the bytes.
TREE_CHUNKS = 4
# The straggler-aware all-reduce cuts each fast rank's share in this many pieces, so its
# post-arrival pipeline (chunks + ranks steps) wastes 1 / STRAGGLER_PIPELINE of a buffer time.
STRAGGLER_PIPELINE = 8
PATTERNS = ("ring", "tree", "halving-doubling", "all-to-all", "straggler", "tree-multicast",
            "broadcast-chain", "broadcast-tree", "broadcast-flat", "allgather-ring", "allgather-flat")
# Pipelined broadcasts cut the root's buffer in this many chunks (as the tree all-reduce does).
BROADCAST_CHUNKS = TREE_CHUNKS


def _check_n(n: int, minimum: int = 2) -> None:
    if n < minimum:
        raise CollectiveError(f"this collective needs at least {minimum} ranks, not {n}")


def ring_allreduce(n: int) -> Collective:
    """Ring all-reduce: reduce-scatter then all-gather, 2(n - 1) steps of one chunk (of n).

    Step k of the reduce-scatter: rank i adds its chunk (i - k) mod n into rank i + 1;
    after it rank i holds the full chunk (i + 1) mod n, which the all-gather passes on.
    """
    _check_n(n)
    steps = [Step(tuple(Send(i, (i + 1) % n, (i - k) % n, "reduce") for i in range(n)),
                  f"reduce-scatter {k + 1}/{n - 1}") for k in range(n - 1)]
    steps += [Step(tuple(Send(i, (i + 1) % n, (i + 1 - k) % n, "copy") for i in range(n)),
                   f"all-gather {k + 1}/{n - 1}") for k in range(n - 1)]
    return Collective("ring", "allreduce", n, n, tuple(steps))


def _tree_heights(n: int) -> list[int]:
    """Height of each node of the heap-ordered binary tree over 0..n-1 (leaves 0)."""
    h = [0] * n
    for v in range(n - 1, 0, -1):
        p = (v - 1) // 2
        h[p] = max(h[p], h[v] + 1)
    return h


def tree_allreduce(n: int, chunks: int = TREE_CHUNKS) -> Collective:
    """Binary-tree all-reduce (heap order, rank 0 the root), pipelined over ``chunks``.

    Reduce: node v sends chunk c to its parent at step c + height(v) (its children sent
    theirs earlier). Broadcast: a node at depth d gets chunk c at step R + c + d - 1,
    R the number of reduce steps. A parent receives from two children in one step: the
    compiler serialises the two on a one-lane fabric.
    """
    _check_n(n)
    if chunks < 1:
        raise CollectiveError(f"tree all-reduce needs at least 1 chunk, not {chunks}")
    h = _tree_heights(n)
    depth = [0] * n
    for v in range(1, n):
        depth[v] = depth[(v - 1) // 2] + 1
    n_reduce = chunks + h[0] - 1
    steps = []
    for t in range(n_reduce):
        sends = tuple(Send(v, (v - 1) // 2, t - h[v], "reduce") for v in range(1, n)
                      if 0 <= t - h[v] < chunks)
        steps.append(Step(sends, f"reduce {t + 1}/{n_reduce}"))
    n_bcast = chunks + max(depth) - 1
    for t in range(n_bcast):
        sends = tuple(Send((v - 1) // 2, v, t - depth[v] + 1, "copy") for v in range(1, n)
                      if 0 <= t - depth[v] + 1 < chunks)
        steps.append(Step(sends, f"broadcast {t + 1}/{n_bcast}"))
    return Collective("tree", "allreduce", n, chunks, tuple(steps))


def halving_doubling_allreduce(n: int) -> Collective:
    """Recursive halving (reduce-scatter) then doubling (all-gather): 2 log2(n) steps.

    At distance d (n/2, n/4, ..., 1) rank i and i XOR d share a range of chunks; each
    keeps one half and adds the other into its partner. The all-gather retraces the
    distances (1, 2, ..., n/2) sending what each rank holds. n must be a power of two.
    """
    _check_n(n)
    if n & (n - 1):
        raise CollectiveError(f"halving-doubling needs a power-of-two number of ranks, not {n}; "
                              "use ring or tree")
    span = dict.fromkeys(range(n), (0, n))
    dists = []
    d = n // 2
    while d:
        dists.append(d)
        d //= 2
    steps = []
    for k, d in enumerate(dists):
        sends, new = [], {}
        for i in range(n):
            lo, hi = span[i]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not i & d else ((mid, hi), (lo, mid))
            sends += [Send(i, i ^ d, c, "reduce") for c in range(*give)]
            new[i] = keep
        span = new
        steps.append(Step(tuple(sends), f"halving {k + 1}/{len(dists)} (distance {d})"))
    for k, d in enumerate(reversed(dists)):
        sends, new = [], {}
        for i in range(n):
            lo, hi = span[i]
            sends += [Send(i, i ^ d, c, "copy") for c in range(lo, hi)]
            plo, phi = span[i ^ d]
            new[i] = (min(lo, plo), max(hi, phi))
        span = new
        steps.append(Step(tuple(sends), f"doubling {k + 1}/{len(dists)} (distance {d})"))
    return Collective("halving-doubling", "allreduce", n, n, tuple(steps))


def all_to_all(n: int, combine: bool = True) -> Collective:
    """MoE all-to-all by rotations: dispatch in n - 1 steps, then (``combine``) n - 1 back.

    Dispatch step k: rank i sends its block for rank (i + k) mod n. Combine step k: rank
    d returns the expert output of the block it got from rank (d - k) mod n. Each step
    is a permutation: one circuit per rank, every rank sending and receiving once.
    """
    _check_n(n)
    steps = [Step(tuple(Send(i, (i + k) % n, i * n + (i + k) % n, "copy") for i in range(n)),
                  f"dispatch {k}/{n - 1}") for k in range(1, n)]
    if combine:
        steps += [Step(tuple(Send(d, (d - k) % n, n * n + ((d - k) % n) * n + d, "copy") for d in range(n)),
                       f"combine {k}/{n - 1}") for k in range(1, n)]
    return Collective("all-to-all", "alltoall", n, (2 if combine else 1) * n * n, tuple(steps), combine)


def straggler_allreduce(n: int, slow: int | None = None, lag_ms: float = 0.0,
                        pipeline: int = STRAGGLER_PIPELINE) -> Collective:
    """All-reduce with one late rank, in the spirit of StragglAR (Devraj et al., 2025).

    While rank ``slow`` lags, the other n - 1 ranks run a ring all-reduce among
    themselves (buffer in (n - 1) x ``pipeline`` chunks, each ring step moving
    ``pipeline`` of them). When the straggler arrives, one ring S -> f0 -> f1 -> ... ->
    S finishes the job: S streams its chunks into f0, which adds them to the fast ranks'
    sum (making them final), and every final chunk travels on around the ring by copy.
    The post-arrival part moves about one buffer per lane (C + n - 1 steps of one chunk)
    where a plain ring all-reduce started at the straggler's arrival moves 2 (n - 1) / n.
    """
    _check_n(n, 3)
    slow = n - 1 if slow is None else slow
    if not 0 <= slow < n:
        raise CollectiveError(f"the straggler must be a rank 0..{n - 1}, not {slow}")
    if pipeline < 1:
        raise CollectiveError(f"pipeline must be at least 1, not {pipeline}")
    fast = [r for r in range(n) if r != slow]
    F, C = len(fast), len(fast) * pipeline

    def group(g: int) -> range:
        return range(g * pipeline, (g + 1) * pipeline)

    steps = []
    for k in range(F - 1):
        sends = tuple(Send(fast[i], fast[(i + 1) % F], c, "reduce")
                      for i in range(F) for c in group((i - k) % F))
        steps.append(Step(sends, f"fast reduce-scatter {k + 1}/{F - 1}"))
    for k in range(F - 1):
        sends = tuple(Send(fast[i], fast[(i + 1) % F], c, "copy")
                      for i in range(F) for c in group((i + 1 - k) % F))
        steps.append(Step(sends, f"fast all-gather {k + 1}/{F - 1}"))
    ring = [slow, *fast]  # slow -> f0 -> ... -> f(F-1) -> slow
    for t in range(C + F):
        sends = []
        if t < C:
            sends.append(Send(slow, fast[0], t, "reduce"))
        for j in range(1, F + 1):
            c = t - j
            if 0 <= c < C:
                sends.append(Send(ring[j], ring[(j + 1) % n], c, "copy"))
        steps.append(Step(tuple(sends), f"straggler ring {t + 1}/{C + F}"))
    lag = {slow: float(lag_ms)} if lag_ms else {}
    return Collective("straggler", "allreduce", n, C, tuple(steps), lag_ms=lag)


def _depths(n: int) -> list[int]:
    """Depth of each node of the heap-ordered binary tree over 0..n-1 (root 0)."""
    depth = [0] * n
    for v in range(1, n):
        depth[v] = depth[(v - 1) // 2] + 1
    return depth


def chain_broadcast(n: int, chunks: int = BROADCAST_CHUNKS) -> Collective:
    """Pipelined chain broadcast from rank 0: chunk c leaves rank j for j + 1 at step c + j.

    ``chunks + n - 2`` steps, each rank sending and receiving at most one chunk per step:
    one TX and one RX lane suffice (what NCCL's ring broadcast does).
    """
    _check_n(n)
    steps = []
    for t in range(chunks + n - 2):
        sends = tuple(Send(j, j + 1, t - j, "copy") for j in range(n - 1) if 0 <= t - j < chunks)
        steps.append(Step(sends, f"chain {t + 1}/{chunks + n - 2}"))
    return Collective("broadcast-chain", "broadcast", n, chunks, tuple(steps))


def tree_broadcast(n: int, chunks: int = BROADCAST_CHUNKS) -> Collective:
    """Pipelined binary-tree broadcast from rank 0 (heap order): a node at depth d gets chunk c
    at step c + d - 1. A parent feeds two children per step: two TX lanes, or two rounds.
    """
    _check_n(n)
    depth = _depths(n)
    total = chunks + max(depth) - 1
    steps = []
    for t in range(total):
        sends = tuple(Send((v - 1) // 2, v, t - depth[v] + 1, "copy") for v in range(1, n)
                      if 0 <= t - depth[v] + 1 < chunks)
        steps.append(Step(sends, f"tree {t + 1}/{total}"))
    return Collective("broadcast-tree", "broadcast", n, chunks, tuple(steps))


def flat_broadcast(n: int, chunks: int = BROADCAST_CHUNKS) -> Collective:
    """Rank 0 sends each chunk to every other rank in one step: ``chunks`` steps.

    The schedule an optical multicast runs (one transmitter, a tree of splitters); on
    point-to-point circuits the root's single TX lane serialises it into n - 1 rounds.
    """
    _check_n(n)
    steps = [Step(tuple(Send(0, d, c, "copy") for d in range(1, n)), f"flat {c + 1}/{chunks}")
             for c in range(chunks)]
    return Collective("broadcast-flat", "broadcast", n, chunks, tuple(steps))


def ring_allgather(n: int) -> Collective:
    """Ring all-gather: n - 1 steps; at step k rank i passes chunk (i - k) mod n to i + 1."""
    _check_n(n)
    steps = [Step(tuple(Send(i, (i + 1) % n, (i - k) % n, "copy") for i in range(n)),
                  f"all-gather {k + 1}/{n - 1}") for k in range(n - 1)]
    return Collective("allgather-ring", "allgather", n, n, tuple(steps))


def flat_allgather(n: int) -> Collective:
    """Every rank sends its slice to all the others at once: one step (n multicast trees).

    Each rank receives n - 1 slices in that step: with one RX lane per rank the compiler
    serialises it into n - 1 rounds or more (docs/collectives.md says when it pays).
    """
    _check_n(n)
    sends = tuple(Send(r, d, r, "copy") for r in range(n) for d in range(n) if d != r)
    return Collective("allgather-flat", "allgather", n, n, (Step(sends, "flat all-gather"),))


def tree_multicast_allreduce(n: int, chunks: int = TREE_CHUNKS) -> Collective:
    """The tree all-reduce's reduce half, then rank 0 multicasts each final chunk to all.

    Reduce as :func:`tree_allreduce` (``chunks + height - 1`` steps); the broadcast half is
    ``chunks`` flat steps instead of ``chunks + depth - 1`` tree steps.
    """
    reduce = [s for s in tree_allreduce(n, chunks).steps if s.label.startswith("reduce")]
    bcast = [Step(tuple(Send(0, d, c, "copy") for d in range(1, n)), f"multicast {c + 1}/{chunks}")
             for c in range(chunks)]
    return Collective("tree-multicast", "allreduce", n, chunks, (*reduce, *bcast))


def by_pattern(pattern: str, n: int) -> Collective:
    """The collective a pattern name gives (``ring``, ``tree``, ``halving-doubling``, ...)."""
    makers = {"ring": ring_allreduce, "tree": tree_allreduce, "halving-doubling": halving_doubling_allreduce,
              "all-to-all": all_to_all, "straggler": straggler_allreduce,
              "tree-multicast": tree_multicast_allreduce, "broadcast-chain": chain_broadcast,
              "broadcast-tree": tree_broadcast, "broadcast-flat": flat_broadcast,
              "allgather-ring": ring_allgather, "allgather-flat": flat_allgather}
    if pattern not in makers:
        raise CollectiveError(f"unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)} "
                              "or a step file")
    return makers[pattern](n)
