"""Walks of light through the mesh, TBU by TBU, for layouts that routes cannot express.

A route goes from one mesh port to another; a ring closes on itself and a coupler's four
arms start and end at one TBU. Both are searched here on the mesh's own links: light that
enters TBU ``t`` at local port ``p`` leaves at the other end, on the same side in the bar
state (``p -> 2 + p``, ``2 + p -> p``) or the other side in the cross state; the port it
leaves by is linked to the next TBU's entry, or is a mesh port. Every search is a
breadth-first search in TBU hops, so a walk is as short (and as lossy) as the mesh allows.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from photonics.errors import StateError
from photonics.topology import Mesh

BAR, CROSS = 0, 1


@dataclass(frozen=True)
class Hop:
    """One TBU a walk crosses: entered at global port ``entry``, set to ``arc`` (BAR/CROSS)."""

    tbu: int
    entry: int
    arc: int


def exit_port(entry: int, arc: int) -> int:
    """The global port light entering at ``entry`` leaves by, in the state ``arc``."""
    t, p = divmod(entry, 4)
    side = p % 2 if arc == BAR else 1 - p % 2
    return 4 * t + (2 + side if p < 2 else side)


def other_side(port: int) -> int:
    """The TBU's other port at the same end (0 <-> 1, 2 <-> 3)."""
    return port ^ 1


def peers(mesh: Mesh) -> np.ndarray:
    """Global port -> the port it is linked to (-1 for a mesh port)."""
    peer = np.full(4 * mesh.n_tbus, -1, dtype=np.int64)
    peer[mesh.links[:, 0]], peer[mesh.links[:, 1]] = mesh.links[:, 1], mesh.links[:, 0]
    return peer


def walk(mesh: Mesh, peer: np.ndarray, start_exit: int, blocked: set[int],
         target_entry: int | None = None) -> tuple[list[Hop], int] | None:
    """The shortest walk from light leaving global port ``start_exit`` to a mesh port (the
    mesh port's index is returned), or to entering ``target_entry`` when given; TBUs in
    ``blocked`` are never crossed and no TBU is crossed twice. None when there is none.
    """
    port_of: dict[int, int] | None = None  # built when a walk first leaves the mesh
    # A list: the search indexes it one port at a time, where numpy's scalar indexing costs
    # several times a list's (the common-phase design walks ~6,000 times per mesh).
    linked = peer.tolist() if isinstance(peer, np.ndarray) else peer
    # Each queue entry carries its walk as the end of a chain in ``trail`` (TBU, entry, arc,
    # previous link), made into Hops only for the answer, and its walk's TBUs as a tuple:
    # "crossed already?" is then one C-level membership test.
    trail: list[tuple[int, int, int, int]] = []
    queue: deque[tuple[int, int, tuple[int, ...]]] = deque([(start_exit, -1, ())])
    seen: set[int] = set()
    while queue:
        out, node, crossed = queue.popleft()
        nxt = int(linked[out])
        if nxt < 0:
            if target_entry is None:
                if port_of is None:
                    port_of = {int(g): i for i, g in enumerate(mesh.port_tbu_ports)}
                if out in port_of:
                    return _chain_hops(trail, node), port_of[out]
            continue
        if nxt == target_entry:
            return _chain_hops(trail, node), -1
        t = nxt // 4
        if nxt in seen or t in blocked or t in crossed:
            continue
        seen.add(nxt)
        crossed = (*crossed, t)
        for arc, flip in _EXIT_FLIPS:
            trail.append((t, nxt, arc, node))
            queue.append((nxt ^ flip, len(trail) - 1, crossed))  # exit_port(nxt, arc)
    return None


# exit_port(entry, arc) is ``entry ^ flip``: bar keeps the side and changes the end (local
# p <-> p ^ 2), cross changes both (p <-> 3 - p = p ^ 3); the TBU's bits are untouched.
_EXIT_FLIPS = ((BAR, 2), (CROSS, 3))


def _chain_hops(trail: list[tuple[int, int, int, int]], node: int) -> list[Hop]:
    """The walk ending at ``trail[node]`` (none for -1), first hop first."""
    hops = []
    while node >= 0:
        t, entry, arc, node = trail[node]
        hops.append(Hop(t, entry, arc))
    return hops[::-1]


def arcs_fraction(n_tbus: int, hops: list[Hop]) -> np.ndarray:
    """Cross fractions (0 elsewhere) setting every hop's TBU to its arc."""
    r = np.zeros(n_tbus)
    for h in hops:
        r[h.tbu] = float(h.arc)
    return r


@dataclass(frozen=True)
class CouplerLayout:
    """A 2x2 coupler at TBU ``tbu``: mesh ports ``inputs`` reach its entries ``tbu``-port 0
    and 1 (by the walks ``arms[0]``, ``arms[1]``), its exits 2 and 3 reach ``outputs``
    (``arms[2]``, ``arms[3]``); in the bar state input k leaves by output k.
    """

    tbu: int
    inputs: tuple[int, int]
    outputs: tuple[int, int]
    arms: tuple[tuple[Hop, ...], ...]

    @property
    def tbus(self) -> np.ndarray:
        """The coupler, then every arm's TBUs."""
        return np.array([self.tbu, *(h.tbu for arm in self.arms for h in arm)], dtype=np.int64)


def coupler_layout(mesh: Mesh, failed: dict[int, str] | None = None) -> CouplerLayout:
    """The TBU whose four ports reach four distinct mesh ports by disjoint walks: output walks
    of equal length first, then the fewest TBUs on the walks, then the lowest index; failed
    TBUs are never used.
    """
    peer, bad = peers(mesh), set(failed or {})
    best = None
    for x in range(mesh.n_tbus):
        if x in bad:
            continue
        used, arms, ends = bad | {x}, [], []
        for port in range(4):  # walked outward from the coupler: reciprocity makes an input's
            w = walk(mesh, peer, 4 * x + port, used)  # walk the same TBUs in the same states
            if w is None:
                break
            arms.append(tuple(w[0]))
            ends.append(w[1])
            used = used | {h.tbu for h in w[0]}
        if len(arms) < 4 or len(set(ends)) < 4:
            continue
        key = (abs(len(arms[2]) - len(arms[3])), sum(len(a) for a in arms), x)  # output arms of
        # unequal loss would skew the shares of the two inputs apart: no kappa meets both
        if best is None or key < best[0]:
            best = (key, CouplerLayout(x, (ends[0], ends[1]), (ends[2], ends[3]), tuple(arms)))
    if best is None:
        raise StateError(f"no TBU of this {mesh.kind} mesh reaches four mesh ports by separate walks"
                         + (" around its failed TBUs" if bad else ""))
    return best[1]
