"""Closed interferometers laid out on the mesh, for the common-phase calibration.

A TBU's common (global) phase multiplies every field through it, so a power meter sees it
only where light that crossed the TBU meets light that did not. The smallest such
experiment is a Mach-Zehnder made of the mesh itself (:class:`Interferometer`): a
*splitter* TBU at 50:50, two *arms* of TBUs set to bar or cross that meet at the two
entries of a *combiner* TBU at 50:50, a walk from a mesh port into the splitter and walks
from the combiner's two exits to two mesh ports. The TBU under test (``swept``) is on arm
A; sweeping its common mode moves the fringe, and the fringe's position is

    sum of common phases on arm A - sum on arm B   (+ what the map and the model know)

(the splitter's and combiner's own common phases are on both paths and cancel). On a
square mesh the arms go round a cell (two TBUs each), on a hexagonal one round a hexagon
(three each). Light is walked on the mesh's own links (:mod:`photonics.synthesis.walks`):
bar keeps the side, cross changes it. Failed TBUs are never used.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from calibration.integer_phases import Lattice
from photonics.configuration import Configuration
from photonics.synthesis.walks import BAR, CROSS, Hop, exit_port, peers, walk
from photonics.topology import Mesh

# Longest walk (TBU hops) searched from the splitter to the swept TBU and from the swept TBU
# to the combiner: a cell's MZI needs 0-1 on a square mesh and 0-2 on a hexagonal one; one
# more lets a TBU on the mesh's edge borrow a neighbouring cell.
MAX_ARM_HOPS = 3
INDEPENDENT_TOL = 1e-6  # an arm-sign vector this close to the span of those taken adds nothing
HALF = 0.5  # splitter and combiner cross fraction: equal arms give the deepest fringe


@dataclass(frozen=True)
class Interferometer:
    """A Mach-Zehnder of mesh TBUs with ``swept`` on arm A (see the module docstring).

    Attributes:
        swept: TBU whose common mode is swept.
        splitter, combiner: the 50:50 TBUs.
        src: mesh port the laser feeds.
        dets: mesh ports at the combiner's two exits.
        arm_a, arm_b: TBUs (with their bar/cross state) of the two arms; ``swept`` is in
            ``arm_a``.
        feeds: TBUs of the walks from ``src`` to the splitter and from the combiner to ``dets``.
    """

    swept: int
    splitter: int
    combiner: int
    src: int
    dets: tuple[int, int]
    arm_a: tuple[Hop, ...]
    arm_b: tuple[Hop, ...]
    feeds: tuple[Hop, ...]

    def tbus(self) -> set[int]:
        """Every TBU the interferometer sets (the rest are parked)."""
        return {self.splitter, self.combiner} | {h.tbu for h in (*self.arm_a, *self.arm_b, *self.feeds)}

    def fractions(self, mesh: Mesh) -> np.ndarray:
        """Cross fraction of every TBU: walks at bar or cross, splitter and combiner at 50:50,
        the rest parked.
        """
        r = Configuration.parked(mesh).cross_fraction.copy()
        for h in (*self.arm_a, *self.arm_b, *self.feeds):
            r[h.tbu] = float(h.arc)
        r[self.splitter] = r[self.combiner] = HALF
        return r

    def signs(self, n_tbus: int) -> np.ndarray:
        """How each TBU's common phase moves the fringe (rad per rad): +1 on arm A, -1 on B."""
        s = np.zeros(n_tbus)
        s[[h.tbu for h in self.arm_a]] = 1.0
        s[[h.tbu for h in self.arm_b]] = -1.0
        return s


def reach(peer: np.ndarray, start_exit: int, blocked: set[int], max_hops: int) -> dict[int, tuple[Hop, ...]]:
    """Every TBU entry light leaving global port ``start_exit`` reaches within ``max_hops``
    TBUs set to bar or cross, with the shortest walk there (the entered TBU not included).
    """
    found: dict[int, tuple[Hop, ...]] = {}
    queue: deque[tuple[int, tuple[Hop, ...]]] = deque([(start_exit, ())])
    while queue:
        out, hops = queue.popleft()
        nxt = int(peer[out])
        if nxt < 0 or nxt in found:
            continue
        found[nxt] = hops
        t = nxt // 4
        if len(hops) >= max_hops or t in blocked or any(h.tbu == t for h in hops):
            continue
        for arc in (BAR, CROSS):
            queue.append((exit_port(nxt, arc), (*hops, Hop(t, nxt, arc))))
    return found


def _feed(mesh: Mesh, peer: np.ndarray, port: int, used: set[int]) -> tuple[list[Hop], int] | None:
    """The walk from global port ``port`` out to a mesh port avoiding ``used``."""
    return walk(mesh, peer, port, used)


def _close(mesh: Mesh, peer: np.ndarray, t: int, q: int, back: tuple[Hop, ...], r: int,
           fwd: tuple[Hop, ...], swept_hop: Hop, bad: set[int]) -> Interferometer | None:
    """The interferometer whose splitter leaves by ``q`` into arm A (``back``, the swept hop,
    ``fwd``) and whose combiner is entered at ``r``; None when arm B or a feed cannot be walked.
    """
    x, y = q // 4, r // 4
    arm_a = (*back, swept_hop, *fwd)
    used = bad | {x, y} | {h.tbu for h in arm_a}
    b = walk(mesh, peer, q ^ 1, used, target_entry=r ^ 1)
    if b is None:
        return None
    arm_b = tuple(b[0])
    used |= {h.tbu for h in arm_b}
    for arc in (BAR, CROSS):  # the splitter's entry at its other end, either state
        entry = next(p for p in (4 * x + k for k in range(4)) if exit_port(p, arc) == q)
        src = _feed(mesh, peer, entry, used)
        if src is None:
            continue
        used_in = used | {h.tbu for h in src[0]}
        d0 = _feed(mesh, peer, exit_port(r, BAR), used_in)
        if d0 is None:
            continue
        d1 = _feed(mesh, peer, exit_port(r, CROSS), used_in | {h.tbu for h in d0[0]})
        if d1 is None:
            continue
        return Interferometer(t, x, y, src[1], (d0[1], d1[1]), arm_a, arm_b,
                              (*src[0], *d0[0], *d1[0]))
    return None


def candidates(mesh: Mesh, t: int, failed: set[int] | None = None,
               max_hops: int = MAX_ARM_HOPS) -> list[Interferometer]:
    """For each way light can cross ``t`` (entry port, bar or cross), the interferometer with
    ``t`` on arm A using the fewest TBUs; none for a failed ``t``.
    """
    peer, bad = peers(mesh), set(failed or ())
    if t in bad:
        return []
    out = []
    for entry in range(4 * t, 4 * t + 4):
        for arc in (BAR, CROSS):
            found = _shortest(mesh, peer, t, entry, arc, bad, max_hops)
            if found is not None:
                out.append(found)
    return out


def _size(ifm: Interferometer) -> int:
    return len(ifm.arm_a) + len(ifm.arm_b) + len(ifm.feeds)


def _shortest(mesh: Mesh, peer: np.ndarray, t: int, entry: int, arc: int, bad: set[int],
              max_hops: int) -> Interferometer | None:
    """The smallest interferometer whose arm A crosses ``t`` from ``entry`` in state ``arc``."""
    swept_hop = Hop(t, entry, arc)
    best: Interferometer | None = None
    backs = reach(peer, entry, bad | {t}, max_hops)  # reversed: the splitter's exits into t
    for q, back in sorted(backs.items(), key=lambda kv: len(kv[1])):
        if q // 4 in bad or q // 4 == t:
            continue
        if best is not None and len(back) + 1 >= len(best.arm_a):
            break
        blocked = bad | {t, q // 4} | {h.tbu for h in back}
        fwds = reach(peer, exit_port(entry, arc), blocked, max_hops)
        for r, fwd in sorted(fwds.items(), key=lambda kv: len(kv[1])):
            if r // 4 in blocked:
                continue
            found = _close(mesh, peer, t, q, back, r, fwd, swept_hop, bad)
            if found is not None:
                if best is None or _size(found) < _size(best):
                    best = found
                break
    return best


# Designs kept (one per mesh wiring and failed set): a calibration run plans its common-phase
# stage twice (run_stage's budget check, then calibrate_common) and a test session designs a
# few meshes many times; one design costs 0.17 s of CPU on hex:2x2, 0.9 s on square:4x4,
# 2.1 s on hex:3x4, 4.3 s on SmartLight, 4.8 s on square:6x6 (process time, load ~11)
DESIGN_CACHE_SIZE = 32


def design(mesh: Mesh, failed: set[int] | None = None
           ) -> tuple[list[Interferometer], list[int], list[Interferometer]]:
    """Interferometers whose fringes tell every common phase light can tell, the TBUs that
    are on no interferometer's arm, and the candidates left over (smallest first: checks).

    A pure function of the mesh's wiring (its TBU count, links and mesh ports) and ``failed``:
    each design is computed once per wiring (:func:`_wiring`) and returned as fresh lists of
    the same (frozen) interferometers.
    """
    taken, missing, rest = _design_cached(_wiring(mesh), frozenset(failed or ()))
    return list(taken), list(missing), list(rest)


@dataclass(frozen=True)
class _Wiring:
    """What :func:`design` reads of a mesh, hashable by content: two meshes built alike
    (a test's ``hexagonal(3, 3)`` and a chip's) share one design.
    """

    mesh: Mesh
    key: tuple[int, bytes, tuple[int, ...], bytes]

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Wiring) and self.key == other.key


def _wiring(mesh: Mesh) -> _Wiring:
    links = np.ascontiguousarray(mesh.links, dtype=np.int64)
    ports = np.ascontiguousarray(mesh.port_tbu_ports, dtype=np.int64)
    return _Wiring(mesh, (mesh.n_tbus, links.tobytes(), links.shape, ports.tobytes()))


@lru_cache(maxsize=DESIGN_CACHE_SIZE)
def _design_cached(wiring: _Wiring, failed: frozenset[int]
                   ) -> tuple[tuple[Interferometer, ...], tuple[int, ...], tuple[Interferometer, ...]]:
    taken, missing, rest = _design(wiring.mesh, set(failed))
    return tuple(taken), tuple(missing), tuple(rest)


def _design(mesh: Mesh, failed: set[int]
            ) -> tuple[list[Interferometer], list[int], list[Interferometer]]:
    """:func:`design`, computed.

    Every TBU's candidates (:func:`candidates`) are taken smallest first, each only when its
    arm signs are independent of those taken (so no reading is spent twice on one
    combination); then, smallest first, those that are not integer combinations of the ones
    taken (:func:`calibration.integer_phases.refines`: on a hexagonal mesh two arm sums can fix a
    phase only modulo pi, and a third says which half). What is left unseen is what no power
    reading shows (see docs/calibration.md, "Common phases").
    """
    pool = [c for t in range(mesh.n_tbus) for c in candidates(mesh, t, failed)]
    pool.sort(key=lambda c: (_size(c), c.swept))
    taken: list[Interferometer] = []
    rest: list[Interferometer] = []
    basis = np.zeros((0, mesh.n_tbus))
    for c in pool:
        s = c.signs(mesh.n_tbus)
        resid = s - basis.T @ (basis @ s) if len(basis) else s
        norm = float(np.linalg.norm(resid))
        if norm > INDEPENDENT_TOL:
            taken.append(c)
            basis = np.vstack([basis, resid / norm])
        else:
            rest.append(c)
    taken, rest = _refine_lattice(taken, rest, mesh.n_tbus)
    seen = np.zeros(mesh.n_tbus, bool)
    for c in taken:
        seen[[h.tbu for h in (*c.arm_a, *c.arm_b)]] = True
    missing = [t for t in range(mesh.n_tbus) if not seen[t] and not (failed and t in failed)]
    return taken, missing, rest


def _refine_lattice(taken: list[Interferometer], rest: list[Interferometer],
                    n_tbus: int) -> tuple[list[Interferometer], list[Interferometer]]:
    """``taken`` plus every candidate of ``rest`` (smallest first) that refines their integer
    lattice, and the candidates left.
    """
    rows = np.array([c.signs(n_tbus) for c in taken]).reshape(len(taken), n_tbus)
    left = list(rest)
    while True:
        lattice = Lattice.of(rows)  # once per row taken, not once per candidate tested
        k = next((i for i, c in enumerate(left) if lattice.refined_by(c.signs(n_tbus))), None)
        if k is None:
            return taken, left
        c = left.pop(k)
        taken = [*taken, c]
        rows = np.vstack([rows, c.signs(n_tbus)])
