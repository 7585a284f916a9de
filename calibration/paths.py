"""Light paths for calibration: which mesh port feeds a TBU, and where its outputs can be read.

Plain functions over a :class:`~photonics.topology.Mesh` and its ``peer()`` array. Global TBU
port ``g = 4 * tbu + local`` with local 0 = a0, 1 = a1, 2 = b0, 3 = b1. Light entering a
TBU at one end leaves at the other: bar keeps the side (a0 <-> b0), cross swaps it.

A path passes through TBUs in ``allowed`` (already calibrated, so they can be set to bar or
cross) and, when nothing better exists, through uncalibrated ones (fixed unknown splits);
never through a TBU twice; paths of one measurement share no TBU.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from photonics.configuration import Hop
from photonics.topology import Mesh

BAR_EXIT = {0: 2, 2: 0, 1: 3, 3: 1}
CROSS_EXIT = {0: 3, 3: 0, 1: 2, 2: 1}


def far_end(local: int) -> tuple[int, int]:
    """The two local ports at the other end of the TBU from ``local``."""
    return (2, 3) if local in (0, 1) else (0, 1)


def hop_for(tbu: int, entry: int, exit_: int) -> Hop:
    """A :class:`Hop` (its ``state`` follows from the port pair)."""
    return Hop(tbu, entry, exit_)


UNKNOWN_COST = 10.0  # a TBU at an unknown split: passable (it is a fixed linear element) but dear


def feed_path(peer: np.ndarray | list[int], target: int, allowed: set[int], banned: set[int],
              passable: bool = False, touched: set[int] | None = None) -> tuple[int, list[Hop]] | None:
    """Cheapest way to bring light from a mesh port into global TBU port ``target``.

    TBUs in ``allowed`` cost 1; with ``passable`` other TBUs (not ``banned``) may be
    crossed at :data:`UNKNOWN_COST`: an uncalibrated TBU is a fixed, unknown splitter,
    which scales a fringe seen through it but does not distort it.

    Returns ``(mesh_port, hops)`` with hops in light order (excluding the target TBU), or
    None when no path exists. ``touched`` (when given) collects every TBU the search asked
    about (see :func:`_search`).
    """
    return _search(peer, target, allowed, banned, passable, forward=False, touched=touched)


def drain_path(peer: np.ndarray | list[int], source: int, allowed: set[int], banned: set[int],
               passable: bool = False, touched: set[int] | None = None) -> tuple[int, list[Hop]] | None:
    """Cheapest way for light leaving global TBU port ``source`` to reach a mesh port.

    Returns ``(mesh_port, hops)`` with hops in light order, or None. ``touched``: as for
    :func:`feed_path`.
    """
    return _search(peer, source, allowed, banned, passable, forward=True, touched=touched)


# Every Hop a search has answered with (frozen: shared). Bounded without eviction: a hop is the
# same value on any mesh, so the dict holds at most 8 per TBU index of the largest mesh searched
# (4 entry ports x bar or cross exit), ~200 bytes each (1.6 kB a TBU: 0.1 MB for SmartLight),
# however many meshes, chips or maps a long-running process calibrates (session 42: 12 rounds
# of hex:2x2 and hex:3x3 calibrations held 236-240).
_HOPS: dict[tuple[int, int, int], Hop] = {}


def _hop(tbu: int, entry: int, exit_: int) -> Hop:
    """``Hop(tbu, entry, exit_)``, one object per distinct hop: a calibration's searches answer
    with ~100,000 hops of a few hundred distinct ones, and a frozen dataclass's ``__init__``
    costs several times a dict lookup.
    """
    key = (tbu, entry, exit_)
    hop = _HOPS.get(key)
    if hop is None:
        hop = _HOPS.setdefault(key, Hop(tbu, entry, exit_))
    return hop


def _search(peer: np.ndarray | list[int], start: int, allowed: set[int], banned: set[int], passable: bool,
            forward: bool, touched: set[int] | None = None) -> tuple[int, list[Hop]] | None:
    """Dijkstra over TBUs (each used once) from a TBU port out to a mesh port.

    A path is kept as a chain of (TBU, entry, exit, previous link) entries in ``trail`` and
    made into :class:`Hop` objects only for the answer: the heap holds (cost, push order,
    port, chain end), and ties in cost go to the earlier push.

    ``touched`` (when given) receives the start's TBU and every TBU whose membership of
    ``allowed`` the search looked up: a TBU it never looked up cannot change the answer
    whatever ``allowed`` says about it (:class:`ProbePlanner` relies on this).
    """
    heap: list[tuple[float, int, int, int]] = [(0.0, 0, start, -1)]
    trail: list[tuple[int, int, int, int]] = []
    seen = {start // 4}
    if touched is not None:
        touched.add(start // 4)
    counter = 0
    while heap:
        cost, _, g, node = heapq.heappop(heap)
        p = int(peer[g])
        if p < 0:
            hops = []
            while node >= 0:
                tbu, entry, exit_, node = trail[node]
                hops.append(_hop(tbu, entry, exit_))
            # the chain runs from the last hop pushed back to the first
            return -1 - p, hops[::-1] if forward else hops
        tbu, local = divmod(p, 4)
        if tbu in seen:
            continue
        if tbu in banned:
            continue
        if touched is not None:
            touched.add(tbu)
        if tbu in allowed:
            step = 1.0
        elif passable:
            step = UNKNOWN_COST
        else:
            continue
        seen.add(tbu)
        for other in (2, 3) if local < 2 else (0, 1):  # far_end(local)
            counter += 1
            # Forward: light enters at ``local``, leaves at ``other``; backward: the reverse.
            trail.append((tbu, local, other, node) if forward else (tbu, other, local, node))
            heapq.heappush(heap, (cost + step, counter, 4 * tbu + other, len(trail) - 1))
    return None


@dataclass(frozen=True)
class Probe:
    """How to see one TBU's fringe: light into ``src``, read ``outputs``.

    Attributes:
        tbu: the TBU under test.
        src: mesh port the laser feeds.
        entry: local port where light enters the TBU under test.
        outputs: mesh ports read, one per observed output of the TBU.
        signs: +1 where the output is on the TBU's cross path, -1 on its bar path.
        hops: every other TBU on the light paths, with the state it must be set to.
    """

    tbu: int
    src: int
    entry: int
    outputs: tuple[int, ...]
    signs: tuple[float, ...]
    hops: tuple[Hop, ...]

    @property
    def length(self) -> int:
        """Number of other TBUs the light crosses."""
        return len(self.hops)


def plan_probe(mesh: Mesh, tbu: int, allowed: set[int], peer: np.ndarray | list[int] | None = None,
               passable: bool = False, banned: set[int] | frozenset[int] = frozenset(),
               touched: set[int] | None = None) -> Probe | None:
    """The best probe of ``tbu``: fewest uncalibrated TBUs, most outputs observed, shortest.

    Paths go through ``allowed`` TBUs, and with ``passable`` also through others (see
    :func:`feed_path`), never through ``banned`` ones (failed, or suspected of blocking
    light). Returns None when no input or no output can be reached. ``touched`` (when
    given) collects every TBU whose membership of ``allowed`` the answer depends on.
    """
    # A list: the searches index it one port at a time, where a numpy array's scalar
    # indexing costs several times a list's (a calibration plans ~3,000 probes).
    peer = peer if isinstance(peer, list) else (mesh.peer() if peer is None else peer).tolist()
    banned = set(banned)
    allowed = set(allowed) - banned
    best: Probe | None = None
    for entry in range(4):
        fed = feed_path(peer, 4 * tbu + entry, allowed, banned, passable, touched)
        if fed is None:
            continue
        src, in_hops = fed
        used = {h.tbu for h in in_hops}
        outs, signs, hops = [], [], list(in_hops)
        for out in far_end(entry):
            drained = drain_path(peer, 4 * tbu + out, allowed, used | {tbu} | banned, passable, touched)
            if drained is None:
                continue
            port, out_hops = drained
            if port == src or port in outs:
                continue
            used |= {h.tbu for h in out_hops}
            outs.append(port)
            signs.append(1.0 if (entry, out) in CROSS_EXIT.items() else -1.0)
            hops += out_hops
        if not outs:
            continue
        probe = Probe(tbu, src, entry, tuple(outs), tuple(signs), tuple(hops))
        if best is None or probe_rank(probe, allowed) < probe_rank(best, allowed):
            best = probe
    return best


def probe_rank(probe: Probe, allowed: set[int]) -> tuple[int, int, int, int]:
    """Sort key of probes, best first: fewest unknown TBUs, most outputs, shortest, lowest index."""
    unknown = sum(h.tbu not in allowed for h in probe.hops)
    return unknown, -len(probe.outputs), probe.length, probe.tbu


class ProbePlanner:
    """:func:`plan_probe` with a memory: the bootstrap re-plans every remaining TBU after
    each fit (~2,300 plans on smartlight, 8 % of a calibration's CPU), and one newly
    calibrated TBU changes few of them.

    A plan is kept with the ``allowed`` set it was made for and the TBUs its searches looked
    up (``touched``). Asked again with the same ``banned`` set and an ``allowed`` set that
    differs from the kept one only in TBUs it never looked up, every search runs exactly as
    before (the same pops, the same ties), so the kept probe *is* the answer: same probes,
    same map. Anything else is planned afresh.
    """

    def __init__(self, mesh: Mesh, peer: np.ndarray | list[int] | None = None) -> None:
        self.mesh = mesh
        # as a list, once (plan_probe would convert an array at every plan)
        self.peer = peer if isinstance(peer, list) else (mesh.peer() if peer is None else peer).tolist()
        self._kept: dict[tuple, tuple[frozenset[int], frozenset[int], Probe | None]] = {}
        self.planned = 0  # plans actually searched (the rest came from memory)

    def plan(self, tbu: int, allowed: set[int], passable: bool = False,
             banned: set[int] | frozenset[int] = frozenset()) -> Probe | None:
        """The same as ``plan_probe(mesh, tbu, allowed, peer, passable, banned)``."""
        key = (tbu, passable, frozenset(banned))
        kept = self._kept.get(key)
        if kept is not None:
            was, touched, probe = kept
            if touched.isdisjoint(was.symmetric_difference(allowed)):
                return probe
        touched_now: set[int] = set()
        probe = plan_probe(self.mesh, tbu, allowed, self.peer, passable, banned, touched_now)
        self._kept[key] = (frozenset(allowed), frozenset(touched_now), probe)
        self.planned += 1
        return probe
