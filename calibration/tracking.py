"""Calibration in service: re-calibrate drifted TBUs, and track live routes with small dithers.

A chip calibrated on the bench drifts in the rack: as it warms, every TBU's passive
differential phase moves (simulated chip: ~0.03 rad/K RMS), so a route set to bar/cross
leaks light out at each TBU it crosses. Two remedies, both through the Bench protocol only:

* :func:`recalibrate` sweeps a chosen set of TBUs again (full fringe fits, with the old map
  as the starting point) and returns a map in which only those TBUs changed. Sweeping a
  TBU disturbs any route through it, so this is for TBUs taken out of service.
* :class:`DriftTracker` keeps live routes at their best while they carry traffic, using
  only what a live rack has: the received power of each route (a transceiver's RX power
  or a power reading at the route's destination). For each TBU of a route it programs the
  TBU's target ``+-d`` (a dither of ``d`` rad around the tracked offset), reads the route's
  power at both, and moves the offset to the quadratic maximum between them. A dither costs
  ``(d/2)^2`` of the route's power (d = 0.1 rad: 0.25 %, 0.011 dB); a dither reading below
  the route's floor (``min_power_dbm``: receiver sensitivity plus margin) is undone at once
  and that TBU's dither halved.

Only TBUs of live routes are tracked: parked TBUs carry no traffic. The tracked offsets are
added to the map's passive phases (:meth:`DriftTracker.tracked_map`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from calibration.bench import Bench, settle
from calibration.map import CalibrationError, CalibrationMap
from calibration.options import Options
from calibration.paths import plan_probe
from calibration.procedure import Progress, Run
from calibration.records import TBURecord
from photonics.configuration import Configuration, Route

# Dither amplitude (rad): the route loses (d/2)^2 = 0.25 % (0.011 dB) during a reading, while
# the power difference between +-d resolves an offset of ~0.03 rad against 0.2 % meter noise.
DITHER_RAD = 0.1
# Fraction of the estimated correction applied per round: below 1 so one noisy reading pair
# cannot throw a TBU off (an exponential average over ~2 rounds).
TRACKING_GAIN = 0.7
# Largest correction per round (rad). Warming by 3 K over 20 min moves the fastest TBU
# (0.09 rad/K, 3 sigma) by < 0.015 rad a minute, so 0.05 rad a round keeps up, and a bad
# reading pair can mis-set a TBU by at most this much (a -32 dB leak).
MAX_STEP_RAD = 0.05
# An estimate beyond this (rad) is a meter glitch, not drift: that round leaves the TBU alone.
OUTLIER_RAD = 0.5
# A route whose power is below this fraction of its best is too far off for a quadratic
# estimate; the tracker then steps by MAX_STEP_RAD in the better direction.
QUADRATIC_RANGE = 0.5


# ---------------------------------------------------------------------------------------
# Re-calibration of chosen TBUs
# ---------------------------------------------------------------------------------------
def records_from_map(cmap: CalibrationMap) -> dict[int, TBURecord]:
    """Per-TBU records equivalent to a map, to set light paths (``base_currents``) from it.

    The differential curves are ``g = (1 - f) s`` with ``f`` the map's partner fraction.
    Failed TBUs get no record (they are never set).
    """
    n = cmap.n_heaters
    partner = np.arange(n) ^ 1
    f = np.asarray(cmap.crosstalk.tocsr()[partner, np.arange(n)]).ravel() / cmap.eta
    g2, g3 = cmap.rho2 * (1 - f), cmap.rho3 * (1 - f)
    return {t: TBURecord(delta=float(cmap.delta[t]), g2=[float(g2[2 * t]), float(g2[2 * t + 1])],
                         g3=[float(g3[2 * t]), float(g3[2 * t + 1])], sigma_delta=0.0,
                         sigma_phase_2pi=[0.0, 0.0], rms_residual=0.0, rms_residual_rel=0.0,
                         stage="map", src=-1, outputs=[])
            for t in range(cmap.n_tbus) if t not in cmap.failed}


def apply_records(cmap: CalibrationMap, records: dict[int, TBURecord], tbus: Sequence[int]) -> CalibrationMap:
    """``cmap`` with the TBUs ``tbus`` taken from fresh ``records``; every other entry unchanged.

    As :func:`calibration.assemble.build_map` does: self-phase ``s = g / (1 - f)``, and the
    neighbours' heat during the sweeps (``base_ma``) removed from ``delta`` with the map's K.
    """
    n = cmap.n_heaters
    K = cmap.crosstalk.tocsr()
    partner = np.arange(n) ^ 1
    f = np.asarray(K[partner, np.arange(n)]).ravel() / cmap.eta
    delta, rho2, rho3 = cmap.delta.copy(), cmap.rho2.copy(), cmap.rho3.copy()
    diff = (K[0::2] - K[1::2]).tocsr()
    for t in tbus:
        rec = records[t]
        for arm in (0, 1):
            h = 2 * t + arm
            rho2[h], rho3[h] = rec.g2[arm] / (1 - f[h]), rec.g3[arm] / (1 - f[h])
        heat = np.zeros(n)
        for key, i in rec.base_ma.items():
            j = int(key)
            if j // 2 != t:
                heat[j] = float(rho2[j] * i**2 + rho3[j] * i**3) / cmap.eta[j]
        delta[t] = np.mod(rec.delta - float(diff[t].dot(heat)[0]), 2 * np.pi)
    return replace(cmap, delta=delta, rho2=rho2, rho3=rho3)


def recalibrate(bench: Bench, cmap: CalibrationMap, tbus: Sequence[int | str],
                options: Options | None = None) -> tuple[CalibrationMap, int]:
    """Sweep and fit ``tbus`` again; returns (the updated map, set-and-read operations used).

    Every other TBU keeps its map entry exactly; light paths go through TBUs set from the
    map. A TBU whose fit fails (no light, no fringe) raises :class:`CalibrationError` naming
    it, and nothing is changed.
    """
    options = options or Options()
    mesh = bench.mesh
    cmap.check_for(chip_id=bench.chip_id, mesh=mesh)
    chosen = [mesh.tbu_index(t) for t in tbus]
    broken = [mesh.tbu_names[t] for t in chosen if t in cmap.failed]
    if broken:
        raise CalibrationError(f"{', '.join(broken)} failed in calibration and cannot be re-calibrated")
    run = Run(bench, options, Progress(stream=None), records=records_from_map(cmap), failed=dict(cmap.failed))
    fresh: dict[int, TBURecord] = {}
    for t in chosen:
        probe = plan_probe(mesh, t, run.working() - {t}, run.peer, banned=set(run.failed))
        if probe is None:
            raise CalibrationError(f"no light path of calibrated TBUs reaches {mesh.tbu_names[t]}")
        verdict, _ = run.measure_tbu(probe, "recalibrate", options.refine_points, run.records[t])
        if verdict is not None:
            raise CalibrationError(f"{mesh.tbu_names[t]}: re-calibration failed ({verdict}); "
                                   "check it with a full `lumion calibrate`")
        fresh[t] = run.records[t]
    return apply_records(cmap, fresh, chosen), run.ops()


# ---------------------------------------------------------------------------------------
# Tracking live routes
# ---------------------------------------------------------------------------------------
def route_power_mw(bench: Bench, route: Route, wavelength_nm: float = 1550.0) -> float:
    """The route's received power (mW): light into its source, one reading at its destination."""
    bench.select_input(route.src, wavelength_nm)
    return float(10 ** (np.asarray(bench.read_powers_dbm([route.dst]))[0] / 10))


@dataclass
class DriftTracker:
    """Keeps live routes at their best with small dithers (see the module docstring).

    Attributes:
        bench: the bench (only ``set_currents``, ``select_input``, ``read_powers_dbm``).
        cmap: the calibration map the routes were programmed with.
        routes: the live routes (conflict-free; every other TBU parked).
        min_power_dbm: per route, the floor a dither reading may not go below (receiver
            sensitivity plus link margin, relative to the laser as the readings are).
        dither_rad: dither amplitude per TBU.
        settle_s: wait after each programming before reading.
        offsets: tracked correction (rad) added to each TBU's passive phase.
    """

    bench: Bench
    cmap: CalibrationMap
    routes: list[Route]
    min_power_dbm: list[float] | None = None
    dither_rad: float = DITHER_RAD
    settle_s: float = Options.settle_s
    offsets: np.ndarray = field(init=False)
    dithers: np.ndarray = field(init=False)
    readings: int = 0
    vetoed: int = 0
    ignored: int = 0
    lowest_dbm: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.offsets = np.zeros(self.cmap.n_tbus)
        self.dithers = np.full(self.cmap.n_tbus, self.dither_rad)
        self.configuration = Configuration.from_routes(self.bench.mesh, self.routes)
        if self.min_power_dbm is None:
            self.min_power_dbm = [-np.inf] * len(self.routes)
        self.lowest_dbm = [np.inf] * len(self.routes)

    def tracked_map(self) -> CalibrationMap:
        """The map with the tracked offsets added to the passive phases."""
        return replace(self.cmap, delta=np.mod(self.cmap.delta + self.offsets, 2 * np.pi))

    def program(self) -> None:
        """Set every heater for the live routes through the tracked map, and let them settle."""
        currents = self.tracked_map().currents_for(self.configuration, self.bench.max_current_ma)
        self.bench.set_currents(currents)
        settle(self.bench, self.settle_s)

    def _read(self, k: int) -> float:
        """Route ``k``'s received power (mW); keeps the lowest seen (dBm) per route."""
        self.readings += 1
        p = route_power_mw(self.bench, self.routes[k])
        self.lowest_dbm[k] = min(self.lowest_dbm[k], 10 * float(np.log10(max(p, 1e-30))))
        return p

    def _dither(self, k: int, t: int) -> None:
        """One dither of TBU ``t`` on route ``k``: read at offset +-d, move to the maximum."""
        o, d = self.offsets[t], self.dithers[t]
        floor = 10 ** (self.min_power_dbm[k] / 10)
        powers = []
        for sign in (1.0, -1.0):
            self.offsets[t] = o + sign * d
            self.program()
            p = self._read(k)
            if p < floor:  # the dither would take the link below its margin: undo, dither less
                self.offsets[t] = o
                self.program()
                self.dithers[t] = d / 2
                self.vetoed += 1
                return
            powers.append(p)
        p_plus, p_minus = powers
        mean = (p_plus + p_minus) / 2
        # P(o +- d) = A (1 - (e -+ d)^2 / 4) with e = (true offset) - o: P+ - P- = A e d.
        if min(p_plus, p_minus) < QUADRATIC_RANGE * max(p_plus, p_minus):
            step = MAX_STEP_RAD * np.sign(p_plus - p_minus)
        else:
            estimate = (p_plus - p_minus) / max(mean * d, 1e-30)
            if abs(estimate) > OUTLIER_RAD:
                self.ignored += 1
                estimate = 0.0
            step = np.clip(TRACKING_GAIN * estimate, -MAX_STEP_RAD, MAX_STEP_RAD)
        self.offsets[t] = o + float(step)
        self.dithers[t] = min(self.dither_rad, 2 * d)  # recover a halved dither slowly

    def step(self) -> None:
        """One tracking round: every TBU of every live route dithered once, then programmed."""
        for k, route in enumerate(self.routes):
            for t in route.tbus:
                if t not in self.cmap.failed:
                    self._dither(k, t)
        self.program()

