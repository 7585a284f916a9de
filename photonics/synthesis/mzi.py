"""A Mach-Zehnder filter with a given centre and bandwidth: two arms of unequal length
between two tunable couplers.

Layout (:func:`mzi_layout`): a splitter TBU ``X1`` fed from a mesh port; light leaves it by
both ports of its other end, and two walks of the mesh (the arms; :mod:`.walks`) carry the
two halves to the two ports of one end of a combiner TBU ``X2``, whose other end is walked
out to two mesh ports (the pass and the drop output). The arms differ by ``k`` TBUs; every
walk is TBU-disjoint from the others, none crosses a failed TBU, and the layout with the
fewest TBUs is taken.

What a layout allows: the two outputs interfere as ``cos^2(pi dtau f + phi)``, ``dtau`` the
arms' group-delay difference (``k`` x 11.25 ps nominal), so the free spectral range is
``lambda^2 / (c dtau)`` and the passband's full width at half depth is exactly half of it,
whatever the couplers (they set the depth, not the width). The bandwidth is therefore one of
a discrete set, one per even ``k`` (the vertices of a hex mesh split into two classes with
every TBU joining one of each, so two walks between the same two vertices differ by an even
number of TBUs): at 1550 nm 0.178 nm (k = 2), 0.089 (4), 0.059 (6), 0.045 (8), ... A width
asked within :data:`BANDWIDTH_TOL` of one the mesh holds is laid out; any other is refused,
naming the ones it holds (a ring filter tunes its width continuously: :mod:`.ring`).

Synthesis (:func:`synthesize_mzi`), on the chip model: ``X1`` and ``X2`` start at 50:50, every
walked TBU in its bar or cross state; the same phase on both heaters of one long-arm TBU
moves the nearest passband peak onto the centre (``delta = 2 pi dtau (f_res - f_c)``, twice,
to absorb the heaters' wavelength scaling); then every heater of the layout is refined (exact
gradient) for the deepest pass output half a free spectral range away from a peak on the
centre (:func:`mzi_objective`), which rebalances the couplers against the long arm's extra
loss.

The centre depends on the arms' common phases, which only a phase-calibrated map knows
(:mod:`calibration.common_phase`): the result is a heater state, not a configuration
(:data:`ARMS_PHASE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from photonics.circuit import solve
from photonics.circuit_gradient import Objective
from photonics.configuration import Configuration
from photonics.errors import StateError
from photonics.physics import C_UM_PER_PS, TBUParams
from photonics.state import MeshState
from photonics.synthesis.refine import Refined, refine
from photonics.synthesis.ring import SWEEP_POINTS
from photonics.synthesis.walks import BAR, CROSS, Hop, exit_port, peers, walk
from photonics.topology import Mesh

MAX_ARM_DIFFERENCE = 12  # TBUs: a 0.030 nm band at 1550 nm; the long arm then has 13+ TBUs, 6.5 dB
# against the short arm's 0.5, which the splitter must bleed off to balance the arms
# Layouts kept per mesh wiring, arm difference and failed set: a filter's synthesis lays out
# every difference the mesh holds (:func:`reachable`) before the one it takes, and again for
# each filter asked of the same mesh (~0.05-0.2 s of CPU each on hex:2x2; issue 29)
LAYOUT_CACHE_SIZE = 64
SHORT_ARM_MAX = 3  # TBUs in the short arm searched (a hex mesh closes its two arms with 1-2)
BANDWIDTH_TOL = 0.05  # relative: the reachable widths for differences up to 12 TBUs are >= 14 % apart
# (12 vs 14), so a width within 5 % names one difference; the chip's delay spread (about 1 %) fits too
LOSS_WEIGHT = 1e-4  # weight of the light lost at the peak against the depth and centring terms
REFINE_STEPS = 200  # L-BFGS iterations: the objective is two power ratios of a dozen heaters
NOMINAL_CENTRE_NM = 1550.0  # where the reachable widths are quoted


ARMS_PHASE = ("the filter's centre is set by the common phases of the arms' TBUs; a configuration holds "
              "only each TBU's split, so `lumion program` cannot set this state: set the heater phases "
              "(state) through a phase-calibrated map (`lumion calibrate --common-phase`; "
              "calibration.phase_drive.currents_for_state)")


@dataclass(frozen=True)
class MziLayout:
    """Splitter ``splitter`` entered at global port ``entry``, combiner ``combiner``; the
    arms (short, long) walked from the splitter's exits to the combiner's entries, the feed
    walked out from ``entry`` to ``input_port``, the exits from the combiner to
    ``output_ports`` (their walks ``outs``).
    """

    splitter: int
    entry: int
    combiner: int
    arms: tuple[tuple[Hop, ...], tuple[Hop, ...]]
    feed: tuple[Hop, ...]
    outs: tuple[tuple[Hop, ...], tuple[Hop, ...]]
    input_port: int
    output_ports: tuple[int, int]

    @property
    def tbus(self) -> np.ndarray:
        """The splitter, the combiner, then every walk's TBUs."""
        walks = (*self.arms, self.feed, *self.outs)
        return np.array([self.splitter, self.combiner, *(h.tbu for w in walks for h in w)], dtype=np.int64)

    @property
    def difference(self) -> int:
        """TBUs the long arm has over the short one."""
        return len(self.arms[1]) - len(self.arms[0])


def _walks_from(peer: np.ndarray, start_exit: int, blocked: set[int],
                depth: int) -> list[tuple[tuple[Hop, ...], int]]:
    """Every walk of at most ``depth`` TBUs (none twice, none in ``blocked``) from light
    leaving global port ``start_exit``, with the global port it then enters.
    """
    found, stack = [], [(start_exit, ())]
    while stack:
        out, hops = stack.pop()
        nxt = int(peer[out])
        if nxt < 0:
            continue
        found.append((hops, nxt))
        t = nxt // 4
        if len(hops) < depth and t not in blocked and all(h.tbu != t for h in hops):
            for arc in (BAR, CROSS):
                stack.append((exit_port(nxt, arc), (*hops, Hop(t, nxt, arc))))
    return found


def predecessors(peer: np.ndarray) -> dict[int, list[int]]:
    """Global port entered -> the ports entered one TBU before it (in either state)."""
    preds: dict[int, list[int]] = {}
    for e in range(len(peer)):
        for arc in (BAR, CROSS):
            nxt = int(peer[exit_port(e, arc)])
            if nxt >= 0:
                preds.setdefault(nxt, []).append(e)
    return preds


def hops_to(preds: dict[int, list[int]], n_ports: int, target_entry: int) -> np.ndarray:
    """For every global port entered: the fewest TBUs crossed (it included) before light can
    enter ``target_entry`` (``n_ports`` when it cannot); blind to which TBUs are free, so a
    lower bound for the arm search.
    """
    dist = np.full(n_ports, n_ports, dtype=np.int64)
    dist[target_entry] = 0
    frontier, d = [target_entry], 0
    while frontier:
        d += 1
        step = []
        for q in frontier:
            for e in preds.get(q, ()):
                if dist[e] > d:
                    dist[e] = d
                    step.append(e)
        frontier = step
    return dist


def _walk_of_length(peer: np.ndarray, start_exit: int, target_entry: int, blocked: set[int], length: int,
                    dist: np.ndarray) -> tuple[Hop, ...] | None:
    """A walk of exactly ``length`` TBUs from light leaving ``start_exit`` to entering
    ``target_entry`` (no TBU twice, none in ``blocked``), or None; ``dist`` from :func:`hops_to`.
    """
    stack: list[tuple[int, tuple[Hop, ...]]] = [(start_exit, ())]
    while stack:
        out, hops = stack.pop()
        nxt = int(peer[out])
        if nxt < 0:
            continue
        if nxt == target_entry:
            if len(hops) == length:
                return hops
            continue
        t = nxt // 4
        if len(hops) + dist[nxt] > length or t in blocked or any(h.tbu == t for h in hops):
            continue
        for arc in (BAR, CROSS):
            stack.append((exit_port(nxt, arc), (*hops, Hop(t, nxt, arc))))
    return None


def _tbus(*walks: tuple[Hop, ...]) -> set[int]:
    return {h.tbu for w in walks for h in w}


def _arm_pairs(peer: np.ndarray, preds: dict[int, list[int]], dists: dict[int, np.ndarray], x: int,
               exits: tuple[int, int], bad: set[int], k: int):
    """(short, long, combiner entry of the short arm) for disjoint arms from ``x``'s two
    ``exits`` to the two ports of one end of another TBU, ``k`` TBUs apart: every short arm
    of up to :data:`SHORT_ARM_MAX` TBUs from either exit, with the first long arm found
    (``preds`` from :func:`predecessors`; ``dists``: :func:`hops_to` per target, filled as needed).
    """
    blocked = bad | {x}
    for i in (0, 1):
        for short, end in _walks_from(peer, exits[i], blocked, SHORT_ARM_MAX):
            y = end // 4
            if y in blocked or any(h.tbu == y for h in short):
                continue
            if end ^ 1 not in dists:  # the other port at the same end of y
                dists[end ^ 1] = hops_to(preds, len(peer), end ^ 1)
            long_ = _walk_of_length(peer, exits[1 - i], end ^ 1, blocked | {y} | _tbus(short), len(short) + k,
                                    dists[end ^ 1])
            if long_ is not None:
                yield short, long_, end


def mzi_layout(mesh: Mesh, k: int, failed: dict[int, str] | None = None) -> MziLayout:
    """The layout with arms ``k`` TBUs apart and the fewest TBUs (then the lowest splitter
    index), avoiding ``failed`` TBUs; :class:`StateError` when the mesh holds none.

    A pure function of the mesh's wiring (kind, TBU count, links, mesh ports), ``k`` and the
    failed TBUs, so each layout (frozen) is computed once per process (:data:`LAYOUT_CACHE_SIZE`).
    """
    return _layout_cached(_Wiring.of(mesh), int(k), frozenset(failed or ()))


@dataclass(frozen=True, eq=False)
class _Wiring:
    """What :func:`mzi_layout` reads of a mesh, hashable by content: two meshes built alike
    (a test's ``hexagonal(2, 2)`` and a chip's) share their layouts.
    """

    mesh: Mesh
    key: tuple

    @classmethod
    def of(cls, mesh: Mesh) -> _Wiring:
        links = np.ascontiguousarray(mesh.links, dtype=np.int64)
        ports = np.ascontiguousarray(mesh.port_tbu_ports, dtype=np.int64)
        return cls(mesh, (mesh.kind, mesh.n_tbus, links.tobytes(), links.shape, ports.tobytes()))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Wiring) and self.key == other.key


@lru_cache(maxsize=LAYOUT_CACHE_SIZE)
def _layout_cached(wiring: _Wiring, k: int, failed: frozenset[int]) -> MziLayout:
    """:func:`mzi_layout`, computed."""
    mesh = wiring.mesh
    peer, bad = peers(mesh), set(failed)
    preds, dists = predecessors(peer), {}
    best: tuple[tuple[int, int], MziLayout] | None = None
    for x in range(mesh.n_tbus):
        if x in bad:
            continue
        for side in (0, 2):  # enter at end a (exits at b) or at end b
            exits = (4 * x + 2 - side, 4 * x + 3 - side)
            for short, long_, y_in in _arm_pairs(peer, preds, dists, x, exits, bad, k):
                lay = _close(mesh, peer, x, side, short, long_, y_in, bad)
                if lay is None:
                    continue
                key = (len(lay.tbus), x)
                if best is None or key < best[0]:
                    best = (key, lay)
    if best is None:
        raise StateError(f"no two walks {k} TBUs apart between two couplers with their ports walked out to "
                         f"the edge of this {mesh.kind} mesh" + (" around its failed TBUs" if bad else ""))
    return best[1]


def _close(mesh: Mesh, peer: np.ndarray, x: int, side: int, short: tuple[Hop, ...], long_: tuple[Hop, ...],
           y_in: int, bad: set[int]) -> MziLayout | None:
    """The layout with its feed and exits walked to mesh ports, or None when they do not reach."""
    y = y_in // 4
    used = bad | {x, y} | _tbus(short, long_)
    for port in (side, side + 1):  # the splitter's entry: either port of the entry end
        feed = walk(mesh, peer, 4 * x + port, used)
        if feed is None:
            continue
        used_f = used | _tbus(tuple(feed[0]))
        y_exits = (4 * y + 2, 4 * y + 3) if y_in % 4 < 2 else (4 * y, 4 * y + 1)
        o0 = walk(mesh, peer, y_exits[0], used_f)
        if o0 is None:
            continue
        o1 = walk(mesh, peer, y_exits[1], used_f | _tbus(tuple(o0[0])))
        if o1 is None or o1[1] == feed[1] or o0[1] == feed[1]:
            continue
        return MziLayout(x, 4 * x + port, y, (short, long_), tuple(feed[0]), (tuple(o0[0]), tuple(o1[0])),
                         feed[1], (o0[1], o1[1]))
    return None


def delay_difference_ps(params: TBUParams, lay: MziLayout) -> float:
    """The long arm's group delay over the short arm's (ps)."""
    short, long_ = ([h.tbu for h in arm] for arm in lay.arms)
    return float(params.delay_ps[long_].sum() - params.delay_ps[short].sum())


def fsr_nm(params: TBUParams, lay: MziLayout, centre_nm: float) -> float:
    """Free spectral range (nm) at ``centre_nm``: twice the passband's width."""
    return centre_nm ** 2 / (C_UM_PER_PS * 1e3) / delay_difference_ps(params, lay)


def width_nm(k: int, delay_ps: float, centre_nm: float) -> float:
    """Full width at half depth (nm) of arms ``k`` TBUs of ``delay_ps`` apart: half the FSR."""
    return centre_nm ** 2 / (C_UM_PER_PS * 1e3) / (k * delay_ps) / 2


def reachable(mesh: Mesh, params: TBUParams, centre_nm: float,
              failed: dict[int, str] | None = None) -> dict[int, float]:
    """{arm difference (TBUs): bandwidth (nm)} for every even difference up to
    :data:`MAX_ARM_DIFFERENCE` this mesh lays out (at the mean TBU delay).
    """
    out = {}
    for k in range(2, MAX_ARM_DIFFERENCE + 1, 2):
        try:
            mzi_layout(mesh, k, failed)
        except StateError:
            continue
        out[k] = width_nm(k, float(np.mean(params.delay_ps)), centre_nm)
    return out


def difference_for(mesh: Mesh, params: TBUParams, centre_nm: float, bandwidth_nm: float,
                   failed: dict[int, str] | None = None) -> int:
    """The arm difference whose width is within :data:`BANDWIDTH_TOL` of ``bandwidth_nm``, or a
    one-line :class:`StateError` naming the widths this mesh holds.
    """
    delay = float(np.mean(params.delay_ps))
    k = 2 * max(1, round(width_nm(1, delay, centre_nm) / bandwidth_nm / 2))
    if k <= MAX_ARM_DIFFERENCE and abs(width_nm(k, delay, centre_nm) / bandwidth_nm - 1) <= BANDWIDTH_TOL:
        try:
            mzi_layout(mesh, k, failed)
            return k
        except StateError:
            pass
    held = reachable(mesh, params, centre_nm, failed)
    listed = ", ".join(f"{w:.4f} ({d} TBUs)" for d, w in held.items()) or "none"
    raise StateError(f"a Mach-Zehnder filter's bandwidth is half its free spectral range, set by the arms' "
                     f"length difference: at {centre_nm} nm this {mesh.kind} mesh holds {listed} nm (within "
                     f"{BANDWIDTH_TOL:.0%}), not {bandwidth_nm} nm; ask for one of them, or a ring filter "
                     "(--filter), whose width is continuous")


def start_state(mesh: Mesh, params: TBUParams, lay: MziLayout) -> MeshState:
    """Couplers at 50:50, every walked TBU on its walk, every other TBU parked."""
    r = Configuration.parked(mesh).cross_fraction.copy()
    for w in (*lay.arms, lay.feed, *lay.outs):
        for h in w:
            r[h.tbu] = float(h.arc)
    r[[lay.splitter, lay.combiner]] = 0.5
    return Configuration(r, (), {}, mesh=mesh).heater_state(params.offset_top, params.offset_bot)


def outputs_power(mesh: Mesh, params: TBUParams, state: MeshState, lay: MziLayout,
                  wl: np.ndarray) -> np.ndarray:
    """Power at the (pass, drop) outputs for light in the input, (n_wl, 2)."""
    y = solve(mesh, state, wl, params, inputs=[lay.input_port])[0]
    return np.abs(y[:, list(lay.output_ports), 0]) ** 2


def passband(wl: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """Centre (nm, the highest point refined by a parabola), full width at half depth (nm,
    edges interpolated), extinction (dB, highest over lowest) and the highest level (dB) of
    a sweep ``p`` over one free spectral range centred near the peak.
    """
    i = int(np.argmax(p))
    centre = float(wl[i])
    if 0 < i < len(p) - 1:
        a, b, c = p[i - 1], p[i], p[i + 1]
        den = a - 2 * b + c
        if den < 0:
            centre += float(0.5 * (a - c) / den * (wl[1] - wl[0]))
    top, low = float(p.max()), float(p.min())
    half = 0.5 * (top + low)
    lo, hi = i, i
    while lo > 0 and p[lo] > half:
        lo -= 1
    while hi < len(p) - 1 and p[hi] > half:
        hi += 1
    left = np.interp(half, [p[lo], p[lo + 1]], [wl[lo], wl[lo + 1]]) if lo < i else wl[0]
    right = np.interp(half, [p[hi], p[hi - 1]], [wl[hi], wl[hi - 1]]) if hi > i else wl[-1]
    return {"centre_nm": centre, "fwhm_nm": float(right - left),
            "extinction_db": float(10 * np.log10(top / max(low, 1e-300))),
            "max_transmission_db": float(10 * np.log10(max(top, 1e-300)))}


def sweep(centre_nm: float, fsr: float) -> np.ndarray:
    """One free spectral range centred on ``centre_nm``."""
    return centre_nm + fsr * (np.arange(SWEEP_POINTS) / (SWEEP_POINTS - 1) - 0.5)


def _recentre(mesh: Mesh, params: TBUParams, lay: MziLayout, state: MeshState, centre_nm: float,
              fsr: float) -> MeshState:
    """``state`` with the pass output's nearest peak moved onto ``centre_nm`` by a common phase
    on one long-arm TBU (the long arm always has one: it is at least 2 TBUs).
    """
    dtau = delay_difference_ps(params, lay)
    t = lay.arms[1][0].tbu
    f = C_UM_PER_PS * 1e3  # nm * THz
    for _ in range(2):
        wl = sweep(centre_nm, fsr)
        res = passband(wl, outputs_power(mesh, params, state, lay, wl)[:, 0])["centre_nm"]
        delta = 2 * np.pi * dtau * (f / res - f / centre_nm)
        top, bot = state.phi_top.copy(), state.phi_bot.copy()
        top[t] = np.mod(top[t] + delta, 2 * np.pi)
        bot[t] = np.mod(bot[t] + delta, 2 * np.pi)
        state = MeshState(top, bot)
    return state


def mzi_objective(loss_weight: float = LOSS_WEIGHT) -> Objective:
    """Objective of the pass output at [centre, centre - bw/2, centre + bw/2, centre + FSR/2]:
    ``p3 / p0 + ((p2 - p1) / p0)^2 + loss_weight (1 - p0)``: deep (the level half a free
    spectral range away over the peak), peaked on the centre (the two band edges level, the
    passband being symmetric) and, among the states that do both, the least lossy.
    """
    def objective(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.abs(y[..., 0, 0]) ** 2  # (S, 4)
        p0, p1, p2, p3 = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
        e = (p2 - p1) / p0
        loss = p3 / p0 + e ** 2 + loss_weight * (1 - p0)
        d = np.empty_like(p)
        d[:, 0] = -p3 / p0 ** 2 - 2 * e ** 2 / p0 - loss_weight
        d[:, 1], d[:, 2] = -2 * e / p0, 2 * e / p0
        d[:, 3] = 1 / p0
        g = np.zeros_like(y)
        g[..., 0, 0] = 2 * d * np.conj(y[..., 0, 0])
        return loss, g

    return objective


def synthesize_mzi(mesh: Mesh, centre_nm: float, bandwidth_nm: float, params: TBUParams,
                   failed: dict[int, str] | None = None
                   ) -> tuple[MziLayout, MeshState, MeshState, Refined]:
    """Layout, start state (couplers 50:50, recentred), refined state and the optimiser's end."""
    if not (np.isfinite(centre_nm) and centre_nm > 0 and np.isfinite(bandwidth_nm) and bandwidth_nm > 0):
        raise StateError("the filter needs a positive centre and bandwidth in nm (e.g. 1550.0:0.089)")
    k = difference_for(mesh, params, centre_nm, bandwidth_nm, failed)
    lay = mzi_layout(mesh, k, failed)
    fsr = fsr_nm(params, lay, centre_nm)
    start = _recentre(mesh, params, lay, start_state(mesh, params, lay), centre_nm, fsr)
    half = fsr / 4  # the passband's half width
    points = np.array([centre_nm, centre_nm - half, centre_nm + half, centre_nm + fsr / 2])
    refined = refine(mesh, params, start, lay.tbus, mzi_objective(), points, np.array([lay.input_port]),
                     np.array(lay.output_ports[:1]), max_steps=REFINE_STEPS)
    return lay, start, refined.state, refined
