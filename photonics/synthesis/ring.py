"""A ring filter with a given centre and bandwidth: a loop of TBUs beside a bus.

Layout (:func:`ring_layout`): the shortest closed walk of the mesh (a hexagonal cell on a
hex mesh: 6 TBUs) through a coupler TBU ``X``; the loop uses one entry and one exit of
``X`` in one state (bar or cross), the bus the other two in the same state, walked out to
the nearest mesh ports on either side (:mod:`photonics.synthesis.walks`). With ``X`` a
little off its loop state, a fraction ``kappa`` of the bus light enters the loop each pass:
an all-pass ring, whose through port dips at every resonance, one free spectral range
``1 / (loop group delay)`` apart.

Synthesis (:func:`synthesize_ring`), on the chip model:

1. ``kappa`` from a scan: the notch's full width at half depth grows with the coupling, and
   its depth peaks at critical coupling (``kappa`` = the loop's round-trip loss); the scan
   keeps the width closest to the one asked among those at least MIN_EXTINCTION_DB deep;
2. the centre: the same phase added to both heaters of one loop TBU shifts the loop's
   round-trip phase and nothing else, so the nearest resonance moves onto the centre
   (``delta = 2 pi tau (f_res - f_c)``, applied twice to absorb the heaters' wavelength
   scaling);
3. gradient refinement (:func:`photonics.synthesis.refine.refine`, exact gradient) of every
   heater on the loop and on ``X`` against the notch at the centre, half depth at
   ``centre +- bandwidth / 2`` and the level half a free spectral range away.

The centre depends on the loop's common phases, which only a phase-calibrated map knows
(:mod:`calibration.common_phase`): the result is a heater state, not a configuration
(:data:`COMMON_PHASE`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photonics.circuit import solve
from photonics.circuit_gradient import Objective
from photonics.configuration import Configuration
from photonics.errors import StateError
from photonics.physics import C_UM_PER_PS, TBUParams
from photonics.state import MeshState
from photonics.synthesis.refine import Refined, refine
from photonics.synthesis.walks import BAR, Hop, exit_port, other_side, peers, walk
from photonics.topology import Mesh

MIN_EXTINCTION_DB = 10.0  # a notch shallower than this is no filter: the kappa scan prefers depth
KAPPAS = np.linspace(0.01, 0.9, 90)  # couplings scanned for the width (step 0.01)
SWEEP_POINTS = 801  # points per free spectral range when measuring a notch (~1/800 FSR each)
EXTINCTION_WEIGHT = 0.1  # weight of the centre's depth against the two half-depth errors: the width asked
# comes first (measured on hex:3x3: weight 1 gave 24 dB but a width 15 % wide of 0.02 nm)
COMMON_PHASE = ("the filter's centre is set by the common phase of the loop's TBUs; a configuration "
                "holds only each TBU's split, so `lumion program` cannot set this state: set the heater "
                "phases (state) through a phase-calibrated map (`lumion calibrate --common-phase`; "
                "calibration.phase_drive.currents_for_state)")


@dataclass(frozen=True)
class RingLayout:
    """A loop through coupler ``coupler`` (entered at ``entry``, state ``arc`` on the loop)
    and the bus from mesh port ``input_port`` through the coupler to ``output_port``.
    """

    coupler: int
    entry: int
    arc: int
    loop: tuple[Hop, ...]  # the loop's other TBUs, in the light's order
    bus: tuple[Hop, ...]  # the bus's TBUs besides the coupler
    input_port: int
    output_port: int

    @property
    def loop_tbus(self) -> np.ndarray:
        """The coupler, then the loop's other TBUs."""
        return np.array([self.coupler, *(h.tbu for h in self.loop)], dtype=np.int64)


def ring_layout(mesh: Mesh, failed: dict[int, str] | None = None) -> RingLayout:
    """The shortest loop with a bus to two mesh ports, avoiding ``failed`` TBUs (then the
    shortest bus, then the lowest coupler index).
    """
    peer, bad = peers(mesh), set(failed or {})
    loops = []
    for x in range(mesh.n_tbus):
        if x in bad:
            continue
        for p in range(4):
            entry = 4 * x + p
            for arc in (BAR, 1 - BAR):
                w = walk(mesh, peer, exit_port(entry, arc), bad | {x}, target_entry=entry)
                if w is not None:
                    loops.append((len(w[0]), x, entry, arc, tuple(w[0])))
    best = None
    for n, x, entry, arc, loop in sorted(loops, key=lambda c: c[:3]):
        if best is not None and n > best[0][0]:
            break
        used = bad | {x} | {h.tbu for h in loop}
        back = walk(mesh, peer, other_side(entry), used)  # the bus in, walked from the coupler back
        if back is None:
            continue
        fwd = walk(mesh, peer, exit_port(other_side(entry), arc), used | {h.tbu for h in back[0]})
        if fwd is None:
            continue
        key = (n, len(back[0]) + len(fwd[0]), x)
        if best is None or key < best[0]:
            best = (key, RingLayout(x, entry, arc, loop, tuple(back[0]) + tuple(fwd[0]), back[1], fwd[1]))
    if best is None:
        raise StateError(f"no loop with a bus to two mesh ports on this {mesh.kind} mesh"
                         + (" around its failed TBUs" if bad else ""))
    return best[1]


def loop_delay_ps(params: TBUParams, lay: RingLayout) -> float:
    """The loop's round-trip group delay (ps): the free spectral range is its inverse (THz)."""
    return float(params.delay_ps[lay.loop_tbus].sum())


def fsr_nm(params: TBUParams, lay: RingLayout, centre_nm: float) -> float:
    """Free spectral range (nm) at ``centre_nm``."""
    return centre_nm ** 2 / (C_UM_PER_PS * 1e3) / loop_delay_ps(params, lay)


def start_state(mesh: Mesh, params: TBUParams, lay: RingLayout, kappa: np.ndarray) -> MeshState:
    """Heater states (one per ``kappa``): loop and bus TBUs on their walk, the coupler
    ``kappa`` off its loop state, every other TBU parked.
    """
    r = Configuration.parked(mesh).cross_fraction.copy()
    for h in (*lay.loop, *lay.bus):
        r[h.tbu] = float(h.arc)
    tops, bots = [], []
    for k in np.atleast_1d(kappa):
        r[lay.coupler] = k if lay.arc == BAR else 1 - k
        s = Configuration(r.copy(), (), {}, mesh=mesh).heater_state(params.offset_top, params.offset_bot)
        tops.append(s.phi_top)
        bots.append(s.phi_bot)
    return MeshState(np.array(tops), np.array(bots))


def through_power(mesh: Mesh, params: TBUParams, state: MeshState, lay: RingLayout,
                  wl: np.ndarray) -> np.ndarray:
    """Bus input to bus output power, (n_states, n_wl)."""
    y = solve(mesh, state, wl, params, inputs=[lay.input_port])
    return np.abs(y[:, :, lay.output_port, 0]) ** 2


def notch(wl: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """Centre (nm, the deepest point refined by a parabola), full width at half depth (nm,
    edges interpolated), extinction (dB, highest over lowest) and the highest level (dB) of
    a sweep ``p`` over one free spectral range.
    """
    i = int(np.argmin(p))
    centre = float(wl[i])
    if 0 < i < len(p) - 1:
        a, b, c = p[i - 1], p[i], p[i + 1]
        den = a - 2 * b + c
        if den > 0:
            centre += float(0.5 * (a - c) / den * (wl[1] - wl[0]))
    top, low = float(p.max()), float(p.min())
    half = 0.5 * (top + low)
    lo = i
    while lo > 0 and p[lo] < half:
        lo -= 1
    hi = i
    while hi < len(p) - 1 and p[hi] < half:
        hi += 1
    left = np.interp(half, [p[lo + 1], p[lo]], [wl[lo + 1], wl[lo]]) if lo < i else wl[0]
    right = np.interp(half, [p[hi - 1], p[hi]], [wl[hi - 1], wl[hi]]) if hi > i else wl[-1]
    return {"centre_nm": centre, "fwhm_nm": float(right - left),
            "extinction_db": float(10 * np.log10(top / max(low, 1e-300))),
            "max_transmission_db": float(10 * np.log10(max(top, 1e-300)))}


def sweep(centre_nm: float, fsr: float) -> np.ndarray:
    """One free spectral range centred on ``centre_nm``."""
    return centre_nm + fsr * (np.arange(SWEEP_POINTS) / (SWEEP_POINTS - 1) - 0.5)


def _pick_kappa(mesh: Mesh, params: TBUParams, lay: RingLayout, bandwidth_nm: float,
                wl: np.ndarray) -> float:
    """The scanned coupling whose notch width is nearest ``bandwidth_nm`` among the deep ones."""
    p = through_power(mesh, params, start_state(mesh, params, lay, KAPPAS), lay, wl)
    found = [notch(wl, row) for row in p]
    deep = [i for i, f in enumerate(found) if f["extinction_db"] >= MIN_EXTINCTION_DB]
    pool = deep or [int(np.argmax([f["extinction_db"] for f in found]))]
    return float(KAPPAS[min(pool, key=lambda i: abs(np.log(found[i]["fwhm_nm"] / bandwidth_nm)))])


def _recentre(mesh: Mesh, params: TBUParams, lay: RingLayout, state: MeshState, centre_nm: float,
              fsr: float) -> MeshState:
    """``state`` with the loop's nearest resonance moved onto ``centre_nm``."""
    tau = loop_delay_ps(params, lay)
    t = lay.loop[0].tbu if lay.loop else lay.coupler
    for _ in range(2):
        wl = sweep(centre_nm, fsr)
        res = notch(wl, through_power(mesh, params, state, lay, wl)[0])["centre_nm"]
        f = C_UM_PER_PS * 1e3  # nm * THz
        delta = 2 * np.pi * tau * (f / res - f / centre_nm)
        top, bot = state.phi_top.copy(), state.phi_bot.copy()
        top[..., t] = np.mod(top[..., t] + delta, 2 * np.pi)
        bot[..., t] = np.mod(bot[..., t] + delta, 2 * np.pi)
        state = MeshState(top, bot)
    return state


def notch_objective(extinction_weight: float = EXTINCTION_WEIGHT) -> Objective:
    """Objective of the bus transmission at [centre, centre - bw/2, centre + bw/2, centre + FSR/2]:
    ``w p0 / p3 + sum_+- ((p+- - (p3 + p0) / 2) / p3)^2``: deep at the centre, half depth at
    the band edges, all relative to the level between resonances.
    """
    def objective(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.abs(y[..., 0, 0]) ** 2  # (S, 4)
        p0, p1, p2, p3 = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
        h = 0.5 * (p3 + p0)
        e1, e2 = (p1 - h) / p3, (p2 - h) / p3
        loss = extinction_weight * p0 / p3 + e1 ** 2 + e2 ** 2
        d = np.empty_like(p)
        d[:, 0] = extinction_weight / p3 - (e1 + e2) / p3
        d[:, 1] = 2 * e1 / p3
        d[:, 2] = 2 * e2 / p3
        d[:, 3] = (-extinction_weight * p0 / p3 ** 2 + 2 * e1 * (-(p1 - 0.5 * p0) / p3 ** 2)
                   + 2 * e2 * (-(p2 - 0.5 * p0) / p3 ** 2))
        g = np.zeros_like(y)
        g[..., 0, 0] = 2 * d * np.conj(y[..., 0, 0])
        return loss, g

    return objective


def synthesize_ring(mesh: Mesh, centre_nm: float, bandwidth_nm: float, params: TBUParams,
                    failed: dict[int, str] | None = None
                    ) -> tuple[RingLayout, MeshState, MeshState, Refined]:
    """Layout, start state (kappa scanned, recentred), refined state and the optimiser's end."""
    if not (np.isfinite(centre_nm) and centre_nm > 0 and np.isfinite(bandwidth_nm) and bandwidth_nm > 0):
        raise StateError("the filter needs a positive centre and bandwidth in nm (e.g. 1550.0:0.02)")
    lay = ring_layout(mesh, failed)
    fsr = fsr_nm(params, lay, centre_nm)
    if bandwidth_nm >= 0.5 * fsr:
        raise StateError(f"a bandwidth of {bandwidth_nm} nm does not fit this loop's free spectral range "
                         f"({fsr:.4f} nm): ask for less than half of it")
    wl = sweep(centre_nm, fsr)
    kappa = _pick_kappa(mesh, params, lay, bandwidth_nm, wl)
    start = _recentre(mesh, params, lay, start_state(mesh, params, lay, np.array([kappa])), centre_nm, fsr)
    start = MeshState(start.phi_top[0], start.phi_bot[0])
    points = np.array([centre_nm, centre_nm - bandwidth_nm / 2, centre_nm + bandwidth_nm / 2,
                       centre_nm + fsr / 2])
    refined = refine(mesh, params, start, lay.loop_tbus, notch_objective(), points,
                     np.array([lay.input_port]), np.array([lay.output_port]))
    return lay, start, refined.state, refined
