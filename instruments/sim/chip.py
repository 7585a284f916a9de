"""The simulated chip: a mesh with hidden fabrication truth, driven by heater currents.

Everything a real chip hides is drawn here from one seed: per-TBU coupler errors, losses,
passive arm phases, per-heater resistance and efficiency, and a thermal crosstalk matrix.
Only the simulated instruments read it; calibration must recover it through them, and
tests compare what calibration found against :attr:`Chip.truth`.

Two chip models (``model=``):

* ``"realistic"`` (the default) departs from what calibration assumes, the way real chips
  do (docs/calibration.md, "The simulated chip"): a thermo-optic coefficient rising with
  temperature (phase not a cubic in current), a first-order thermal settling with a slow
  substrate tail (a reading taken too soon sees part of the old phase), crosstalk with its
  own law and a tail beyond any cut-off the procedure assumes, and a chip temperature that
  drifts over time and moves every TBU's passive differential phase.
* ``"ideal"``: exactly the calibration model (cubic heaters, instant settling, no drift,
  crosstalk only within 1.05 TBU lengths), the chip of earlier releases.

Heater phases are set at the reference wavelength; the circuit solve scales them by
``lambda0 / lambda`` (``photonics.physics``), so the chip's phases depend on wavelength.

Solving (:meth:`Chip.output_field`): per wavelength the chip keeps a
:class:`~photonics.circuit_solver.CircuitSolver` holding the last state it solved there.
A reading re-runs only the merges above the TBUs whose phases moved since (a heater step
moves its own TBU and, through thermal crosstalk, 10-37 neighbours on the realistic
smartlight chip; settling moves the TBUs still settling; a temperature step moves every
TBU); the same state read at another port costs no solve, and a changed chip (a new dead
TBU) is solved whole. Every path gives the bytes of :func:`photonics.circuit.solve` of the
state (one TBU swept alone on a crosstalk-free chip: within 1e-12).

Time: the chip has a clock (``now_s``). By default it is *simulated*: it stands still until
:meth:`Chip.advance` moves it, and the in-process bench (``instruments.sim.direct.DirectBench``)
moves it with its own operations (each reading takes the meter's averaging time, ``wait``
lets the heaters settle, an hour of drift takes no real hour). Settling, drift and the meter
noise then depend on what the bench did, never on how fast the machine did it, so a seed
gives the same bytes on any machine under any load. A chip served over a wire (the
simulators on their server threads: heater driver, SCPI meter, transceivers, ``lumion bench
serve``) is put on the wall clock by the simulator that serves it
(:meth:`Chip.follow_wall_clock`): its clients wait by sleeping, as on a real bench. Advances
still add on top, so time never runs slower than the wall clock and two benches sharing one
chip (the pytest plugin's fixtures) both see it settle.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from calibration.model import HeaterModel, crosstalk_matrix, heater_positions, heater_voltage_v, self_phase
from instruments.sim.heater_load import check_fault, drive, heating_currents
from photonics.circuit import solve
from photonics.circuit_solver import CircuitSolver
from photonics.errors import StateError
from photonics.kernel_loader import array_pointer, step_kernels
from photonics.physics import PhysicsDefaults, TBUParams, fabricated_params, split_phases
from photonics.state import MeshState
from photonics.topology import Mesh

FAILURE_MODES = ("dead", "bar", "cross")
CHIP_MODELS = ("realistic", "ideal")
DEAD_LOSS_DB = 60.0
CROSSTALK_DECAY_TBU = 0.1  # decay length of inter-TBU thermal crosstalk (TBU lengths)
# Once this many slow time constants have passed the heaters count as settled (e^-12 ~ 6e-6).
SETTLED_TIME_CONSTANTS = 12.0
# The temperature is rounded to this (K) in the optics cache key: 1 mK moves a TBU by
# ~3e-5 rad at the default drift coefficient, far below anything a reading resolves.
TEMPERATURE_RESOLUTION_K = 1e-3
# Seed offset of the realistic chip's extra draws: they come from their own generator, so
# a seed's ideal truth (and every earlier test) is unchanged.
REALISM_SEED_OFFSET = 7_919
# Wavelengths whose last solve the chip remembers (least recently read dropped first): a
# bench reads at one laser wavelength at a time; a few more cover a wavelength sweep's
# neighbours without keeping every wavelength a long campaign ever visited.
MAX_SOLVERS = 8


@dataclass(frozen=True)
class Realism:
    """How the realistic chip departs from the calibration model (defaults: docs/calibration.md).

    Attributes:
        kappa_per_mw: rise of the thermo-optic efficiency per mW of heat (dn/dT of silicon
            grows with temperature); the heater phase is ``eta P (1 + kappa P)``.
        kappa_spread: relative per-heater spread of ``kappa_per_mw``.
        settle_fast_s: time constant of the heater's own thermal response (docs/physics.md: 10 us).
        settle_slow_s: time constant of the slow substrate tail.
        slow_fraction: share of a phase step that follows the slow tail.
        neighbour_decay_tbu: decay length (TBU lengths) of the inter-TBU crosstalk law.
        tail_fraction: crosstalk fraction at ``tail_from_tbu`` of the long tail, falling as 1/d^2.
        tail_from_tbu, tail_to_tbu: the tail spans these distances (TBU lengths): it starts
            where the procedure's cut-off (1.05) ends and reaches heaters 2.5 TBUs away.
        drift_rad_per_k: RMS of the per-TBU passive differential phase shift per kelvin.
        wander_k: amplitude of the temperature controller's residual wander (K).
        wander_period_s: its period.
    """

    kappa_per_mw: float = 0.015
    kappa_spread: float = 0.1
    settle_fast_s: float = 10e-6
    settle_slow_s: float = 2e-3
    slow_fraction: float = 0.03
    neighbour_decay_tbu: float = 0.12
    tail_fraction: float = 0.001
    tail_from_tbu: float = 1.05
    tail_to_tbu: float = 2.5
    drift_rad_per_k: float = 0.03
    wander_k: float = 0.02
    wander_period_s: float = 600.0


@dataclass(frozen=True, eq=False)
class ChipTruth:
    """Hidden parameters of a simulated chip.

    ``drift_rad_per_k`` (n_tbus,): passive differential phase shift per kelvin of chip
    temperature (zeros on the ideal chip). ``realism`` is None on the ideal chip.
    """

    params: TBUParams
    heaters: HeaterModel
    r0_kohm: np.ndarray
    gamma_per_ma: np.ndarray
    model: str = "ideal"
    realism: Realism | None = None
    drift_rad_per_k: np.ndarray | None = None

    @property
    def ideal(self) -> bool:
        """True for the chip that matches the calibration model exactly."""
        return self.model == "ideal"


def tail_crosstalk(positions: np.ndarray, eta: np.ndarray, realism: Realism,
                   rng: np.random.Generator) -> sp.csr_matrix:
    """Long-range crosstalk K (rad/mW): ``tail_fraction (d_from / d)^2`` between heaters of
    different TBUs from ``tail_from_tbu`` to ``tail_to_tbu`` apart, +-10 % per pair.
    """
    from scipy.spatial import cKDTree

    pairs = cKDTree(positions).query_pairs(realism.tail_to_tbu, output_type="ndarray")
    n = len(positions)
    if len(pairs) == 0:
        return sp.csr_matrix((n, n))
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    d = np.linalg.norm(positions[pairs[:, 0]] - positions[pairs[:, 1]], axis=1)
    keep = (d > realism.tail_from_tbu) & (pairs[:, 0] // 2 != pairs[:, 1] // 2)
    pairs, d = pairs[keep], d[keep]
    frac = realism.tail_fraction * (realism.tail_from_tbu / d) ** 2
    frac *= np.maximum(1 + 0.1 * rng.standard_normal(len(d)), 0.0)
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    j = np.concatenate([pairs[:, 1], pairs[:, 0]])
    return sp.csr_matrix((np.concatenate([frac, frac]) * eta[j], (i, j)), shape=(n, n))


def draw_truth(
    mesh: Mesh,
    seed: int,
    defaults: PhysicsDefaults | None = None,
    crosstalk_fraction: float = 0.01,
    model: str = "realistic",
    realism: Realism | None = None,
) -> ChipTruth:
    """Seeded hidden truth: fabrication errors, heater coefficients, crosstalk.

    Heaters: R0 = 250 Ohm +- 5 %, efficiency pi / P_pi (P_pi = 1.3 mW) +- 5 %,
    resistance tempco gamma = 0.02 /mA +- 10 %; so pi needs about 2.3 mA.
    Crosstalk: ``crosstalk_fraction`` (+-20 % per chip) on the partner arm and on the
    nearest heater of a neighbouring TBU, decaying exponentially (see the comment below).
    ``model="realistic"`` adds :class:`Realism` (drawn from a second generator, so the
    draws above are the same for both models).
    """
    if model not in CHIP_MODELS:
        raise StateError(f"chip model must be one of {CHIP_MODELS}, not {model!r}")
    d = defaults or PhysicsDefaults()
    rng = np.random.default_rng(seed)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng, d)
    n_h = mesh.n_heaters
    r0 = 0.25 * (1 + 0.05 * rng.standard_normal(n_h))
    eta = np.pi / d.heater_power_pi_mw * (1 + 0.05 * rng.standard_normal(n_h))
    gamma = 0.02 * (1 + 0.1 * rng.standard_normal(n_h))
    alpha = np.empty(n_h)
    alpha[0::2], alpha[1::2] = params.offset_top, params.offset_bot
    xfrac = crosstalk_fraction * (1 + 0.2 * rng.standard_normal())
    # Crosstalk law (docs/calibration.md, "Thermal crosstalk"): the other arm of the same TBU
    # gets xfrac of a heater's phase; the nearest heater of a *neighbouring* TBU gets
    # crosstalk_fraction +- 20 % (chip-wide) and farther ones decay as exp(-(d - d0) / 0.1 TBU
    # lengths) up to 1.05 TBU lengths; every heater pair varies +- 10 % around the law.
    # These draws come after all others, so the rest of the truth is unchanged per seed.
    nfrac = crosstalk_fraction * (1 + 0.2 * rng.standard_normal())
    pos = heater_positions(mesh.tbu_xy)
    if model == "ideal":
        K = crosstalk_matrix(pos, eta, nearest_fraction=max(nfrac, 0.0), partner_fraction=max(xfrac, 0.0),
                             decay_length=CROSSTALK_DECAY_TBU, spread=0.1, rng=rng)
        heaters = HeaterModel(alpha=alpha, rho2=eta * r0, rho3=eta * r0 * gamma, eta=eta, crosstalk=K)
        return ChipTruth(params=params, heaters=heaters, r0_kohm=r0, gamma_per_ma=gamma)
    real = realism or Realism()
    extra = np.random.default_rng(seed + REALISM_SEED_OFFSET)
    K = crosstalk_matrix(pos, eta, nearest_fraction=max(nfrac, 0.0), partner_fraction=max(xfrac, 0.0),
                         decay_length=real.neighbour_decay_tbu, spread=0.1, rng=rng)
    K = (K + tail_crosstalk(pos, eta, real, extra)).tocsr()
    kappa = real.kappa_per_mw * (1 + real.kappa_spread * extra.standard_normal(n_h))
    heaters = HeaterModel(alpha=alpha, rho2=eta * r0, rho3=eta * r0 * gamma, eta=eta, crosstalk=K,
                          kappa_per_mw=kappa)
    drift = real.drift_rad_per_k * extra.standard_normal(mesh.n_tbus)
    return ChipTruth(params=params, heaters=heaters, r0_kohm=r0, gamma_per_ma=gamma, model="realistic",
                     realism=real, drift_rad_per_k=drift)


def changed_tbus(a: MeshState, b: MeshState) -> int:
    """Number of TBUs whose heater phases differ (exactly) between two single states."""
    return int(np.count_nonzero((a.phi_top != b.phi_top) | (a.phi_bot != b.phi_bot)))


def with_dead(params: TBUParams, dead: list[int]) -> TBUParams:
    """``params`` with the ``dead`` TBUs made opaque (``DEAD_LOSS_DB``); ``params`` itself if none."""
    if not dead:
        return params
    loss = params.loss_db.copy()
    loss[dead] = DEAD_LOSS_DB
    return replace(params, loss_db=loss)


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce  # without ndarray.min's Python wrapper


def simulated_clock() -> float:
    """The simulated chip's base clock (s): it stands still, so the chip's time is only what
    :meth:`Chip.advance` adds (the default: a seeded run repeats exactly under any load).
    """
    return 0.0


def settle_decay(elapsed_s: float, realism: Realism | None) -> tuple[float, float]:
    """How much of the fast and of the slow thermal response is still to come ``elapsed_s``
    after a step: ``(exp(-t / settle_fast_s), exp(-t / settle_slow_s))``, both 0 once
    :data:`SETTLED_TIME_CONSTANTS` slow time constants have passed (or with no realism).
    """
    if realism is None or elapsed_s >= SETTLED_TIME_CONSTANTS * realism.settle_slow_s:
        return 0.0, 0.0
    t = max(elapsed_s, 0.0)
    return math.exp(-t / realism.settle_fast_s), math.exp(-t / realism.settle_slow_s)


class Chip:
    """A simulated mesh chip whose optics follow its heater currents.

    Thread-safe: the simulated instruments (possibly on server threads) share one chip.

    Keyword args beyond the truth's: ``clock``, the base clock the chip lives in (s): by
    default :func:`simulated_clock`, which stands still, so only what :meth:`advance` adds
    moves time and an in-process run repeats exactly; ``time.monotonic`` for a chip served
    over a wire (see :meth:`follow_wall_clock`);
    ``incremental=False`` solves every reading from scratch (the chip of earlier releases,
    for benchmarks and identity checks against it).

    Example:
        >>> from photonics.topology import hexagonal
        >>> chip = Chip(hexagonal(1, 1), seed=1)
        >>> chip.set_currents(np.zeros(chip.mesh.n_heaters))
        >>> chip.output_power_mw(0, 1550.0).shape
        (12,)
    """

    def __init__(
        self,
        mesh: Mesh,
        seed: int = 0,
        *,
        defaults: PhysicsDefaults | None = None,
        crosstalk_fraction: float = 0.01,
        failed: dict[int, str] | None = None,
        heater_faults: dict[int, str] | None = None,
        model: str = "realistic",
        realism: Realism | None = None,
        clock: Callable[[], float] = simulated_clock,
        incremental: bool = True,
    ) -> None:
        self.mesh = mesh
        self.seed = seed
        self.chip_id = f"sim-{mesh.kind}-{mesh.rows}x{mesh.cols}-seed{seed}"
        self.truth = draw_truth(mesh, seed, defaults, crosstalk_fraction, model, realism)
        # The chip's own physics keeps a private handle: tests replace ``truth`` by a tripwire
        # to prove the calibration never reads it, while the optics still need it.
        self._truth = self.truth
        self._drawn_offset_top = self._truth.params.offset_top  # before any shift_phase
        self.model = model
        self.currents_ma = np.zeros(mesh.n_heaters)
        self.failed: dict[int, str] = {}
        # heater channel -> "open-heater" | "shorted-heater" (instruments.sim.heater_load)
        self.heater_faults: dict[int, str] = {}
        self._lock = threading.RLock()
        self._cache: dict[tuple, np.ndarray] = {}
        # Per wavelength (nm, exact): the solver holding the last state solved there.
        self._solvers: OrderedDict[float, CircuitSolver] = OrderedDict()
        self._params: TBUParams | None = None  # optical_params(), rebuilt when faults change
        # How each solve went: "full" (the general solve: incremental=False, or a mesh without
        # a merge plan), "built" (a solver made, or re-solved whole for a changed chip),
        # "incremental" (the merges above the moved TBUs re-run), "reused" (the state again).
        self.solves: Counter[str] = Counter()
        self.incremental = incremental
        # The base clock the chip lives in (s). The default stands still, leaving only what
        # advance() adds, so a run on the in-process bench repeats exactly under any load.
        self._clock = clock
        self._t0 = clock()
        self._advanced_s = 0.0
        self._set_at_s = -math.inf
        n = mesh.n_heaters
        # The heater arm phases (rad) settle to ``_to``; at the last current change the fast
        # and the slow thermal responses still had ``_fast_left`` and ``_slow_left`` to go.
        # Each decays on its own time constant, so a step taken while an earlier one is
        # still settling adds to what is left (linear superposition): it does not restart
        # the earlier step's slow tail as a fast one.
        self._to = np.zeros(n)
        self._fast_left = np.zeros(n)
        self._slow_left = np.zeros(n)
        self._settle: tuple | None = None  # (heater model, its settle step, its arrays): _settler
        self.temperature_k: Callable[[float], float] = self._wander
        for tbu, how in (failed or {}).items():
            self.fail_tbu(tbu, how)
        for channel, how in (heater_faults or {}).items():
            self.fail_heater(channel, how)

    # -- time -------------------------------------------------------------------------
    @property
    def simulated_time(self) -> bool:
        """True while the chip's time moves only with :meth:`advance` (no wall clock under it)."""
        return self._clock is simulated_clock

    def follow_wall_clock(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Let the chip's time also run with ``clock`` (s) from now on, without a jump.

        Called by every simulator that serves the chip over a wire: its clients wait by
        sleeping, so the heaters must settle and the chip drift in real time. Idempotent.
        """
        # Ready to be driven when served, as the meter is (scpi_devices.SimPowerMeter): on a
        # checkout whose step kernels are not compiled yet (a fresh clone, a kernel change) the
        # first current setting would compile them inside a client's time-out.
        step_kernels()
        with self._lock:
            if self._clock is clock:
                return
            now = self.now_s()
            self._clock = clock
            self._t0 = clock()
            self._advanced_s = now

    def advance(self, seconds: float) -> None:
        """Move the chip's clock on by ``seconds`` (on top of its base clock)."""
        if seconds < 0 or not math.isfinite(seconds):
            raise StateError(f"time only moves forward: {seconds} s")
        with self._lock:
            self._advanced_s += float(seconds)

    def now_s(self) -> float:
        """The chip's clock (s): base-clock time since the chip was made (or put on that clock)
        plus every :meth:`advance`.
        """
        return self._clock() - self._t0 + self._advanced_s

    def _wander(self, t_s: float) -> float:
        """Default chip temperature offset (K): the controller's small residual wander."""
        r = self._truth.realism
        if r is None or not r.wander_k:
            return 0.0
        return r.wander_k * math.sin(2 * math.pi * t_s / r.wander_period_s)

    def set_temperature_profile(self, profile: Callable[[float], float]) -> None:
        """Chip temperature offset (K) from the calibration temperature, as a function of time (s)."""
        with self._lock:
            self.temperature_k = profile
            self._cache.clear()

    # -- electrical -------------------------------------------------------------------
    def set_currents(self, currents_ma: np.ndarray) -> None:
        """Set every heater current (mA); the phases follow with the chip's thermal response."""
        c = np.asarray(currents_ma, dtype=float)
        # finite and non-negative in two reductions (a NaN makes the minimum NaN, which fails
        # ">= 0"; +inf fails "< inf"): this runs at every current setting
        if c.shape != (self.mesh.n_heaters,) or not (_MIN(c) >= 0 and _MAX(c) < math.inf):
            raise StateError(f"need {self.mesh.n_heaters} finite, non-negative currents (mA)")
        with self._lock:
            now = self.now_s()
            fast, slow = settle_decay(now - self._set_at_s, self._truth.realism)
            h = self._truth.heaters
            r = self._truth.realism
            slow_share = 0.0 if r is None else r.slow_fraction
            # heater phases with crosstalk and the settling bookkeeping in one compiled call,
            # the numpy arithmetic of HeaterModel.phases and of the superposed responses
            # (docs/calibration.md) in the same order: the same bytes
            s = self_phase(heating_currents(c, self.heater_faults), h.rho2, h.rho3)
            self._settler(h)(s, fast, slow, slow_share)
            self._set_at_s = now
            self.currents_ma = c.copy()
            self._cache.clear()

    def _settler(self, heaters: HeaterModel) -> Callable[[np.ndarray, float, float, float], None]:
        """``run(s, fast, slow, slow_share)``: :func:`photonics.step_kernels.settle_step` on this
        chip's heaters and settling arrays (which it updates in place), its crosstalk in CSR form
        with int64 indices and, where the C entry point is loaded, every kept array's pointer
        made once (per heater model).
        """
        held = self._settle
        if held is None or held[0] is not heaters:
            K = heaters.crosstalk.tocsr()
            kappa = heaters.kappa_per_mw
            arrays = (np.ascontiguousarray(heaters.eta, dtype=float),
                      np.ascontiguousarray(heaters.eta if kappa is None else kappa, dtype=float),
                      K.indptr.astype(np.int64), K.indices.astype(np.int64),
                      np.ascontiguousarray(K.data, dtype=float))
            eta, kap, indptr, indices, data = arrays
            fn = step_kernels()["settle_step"]
            c_fn = getattr(fn, "c", None)
            to, fl, sl = self._to, self._fast_left, self._slow_left
            if c_fn is not None:
                fixed = (array_pointer(eta), array_pointer(kap), int(kappa is not None),
                         array_pointer(indptr), array_pointer(indices), array_pointer(data), len(data),
                         array_pointer(to), array_pointer(fl), array_pointer(sl), len(to))

                def run(s: np.ndarray, fast: float, slow: float, share: float) -> None:
                    c_fn(array_pointer(s), *fixed, fast, slow, share)
            else:
                def run(s: np.ndarray, fast: float, slow: float, share: float) -> None:
                    fn(s, eta, kap, kappa is not None, indptr, indices, data, to, fl, sl, fast, slow, share)
            held = self._settle = (heaters, run, arrays)
        return held[1]

    def set_current(self, channel: int, current_ma: float) -> None:
        """Set one heater current (mA)."""
        with self._lock:
            c = self.currents_ma.copy()
            c[channel] = current_ma
            self.set_currents(c)

    def voltages_v(self) -> np.ndarray:
        """Voltage across every heater (V), as if every heater worked (see :meth:`electrical`)."""
        return heater_voltage_v(self.currents_ma, self._truth.r0_kohm, self._truth.gamma_per_ma)

    def electrical(self, compliance_v: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(current flowing, mA; voltage, V) of every heater channel as its source drives the
        current asked into its load, open and shorted heaters included
        (:func:`instruments.sim.heater_load.drive`).
        """
        with self._lock:
            return drive(self.currents_ma, self.heater_faults, self._truth.r0_kohm, self._truth.gamma_per_ma,
                         compliance_v)

    def electrical_power_mw(self) -> np.ndarray:
        """Electrical power of every heater (mW)."""
        return self.voltages_v() * self.currents_ma

    # -- faults -----------------------------------------------------------------------
    def fail_tbu(self, tbu: int, how: str) -> None:
        """Break a TBU: "dead" (blocks light), or stuck in "bar" / "cross" (heaters ignored)."""
        if how not in FAILURE_MODES:
            raise StateError(f"failure mode must be one of {FAILURE_MODES}, not {how!r}")
        with self._lock:
            self.failed[self.mesh.tbu_index(tbu)] = how
            self._cache.clear()
            self._params = None

    def fail_heater(self, channel: int, how: str) -> None:
        """Break one heater: "open-heater" (no current flows) or "shorted-heater" (the current
        bypasses it); either way it no longer heats its arm. Takes effect at the next setting.
        """
        try:
            check_fault(how)
        except ValueError as exc:
            raise StateError(str(exc)) from None
        if not 0 <= int(channel) < self.mesh.n_heaters:
            raise StateError(f"heater channel {channel} is not in 0..{self.mesh.n_heaters - 1}")
        with self._lock:
            self.heater_faults[int(channel)] = how
            self.set_currents(self.currents_ma)

    def shift_phase(self, tbu: int | str, rad: float) -> None:
        """Move a TBU's passive differential phase by ``rad`` (a hidden fault: the chip changed
        after its calibration, e.g. trapped charge or stress; a map made before still says the
        old phase). ``rad = pi`` swaps its bar and cross: only light can tell.
        """
        with self._lock:
            t = self.mesh.tbu_index(tbu)
            p = self._truth.params
            top = p.offset_top.copy()
            top[t] += float(rad)
            shifted = replace(self._truth, params=replace(p, offset_top=top))
            if self.truth is self._truth:
                self.truth = shifted
            self._truth = shifted
            self._cache.clear()
            self._params = None

    def undo_phase_shifts(self) -> None:
        """Take back every :meth:`shift_phase`: each TBU's passive phase as drawn from the seed,
        bit for bit (a simulator shared by several test cases starts each from the same chip).
        """
        with self._lock:
            p = self._truth.params
            if p.offset_top is self._drawn_offset_top:
                return
            drawn = replace(self._truth, params=replace(p, offset_top=self._drawn_offset_top))
            if self.truth is self._truth:
                self.truth = drawn
            self._truth = drawn
            self._cache.clear()
            self._params = None

    def repair_all(self) -> None:
        """Undo every injected TBU and heater failure."""
        with self._lock:
            self.heater_faults.clear()
            self.set_currents(self.currents_ma)
            self.failed.clear()
            self._cache.clear()
            self._params = None

    # -- optics -----------------------------------------------------------------------
    def _arm_phases(self, now: float, decay: tuple[float, float] | None = None) -> np.ndarray:
        """Heater-made arm phases (rad) at time ``now``, on their way to ``_to`` (``decay``: the
        :func:`settle_decay` at ``now`` when the caller has it).
        """
        fast, slow = settle_decay(now - self._set_at_s, self._truth.realism) if decay is None else decay
        if not (fast or slow):
            return self._to
        return self._to - fast * self._fast_left - slow * self._slow_left

    def _temperature_now(self, now: float | None = None) -> float:
        """Chip temperature offset (K) at ``now`` (default: now), rounded for the optics cache."""
        if self._truth.drift_rad_per_k is None:
            return 0.0
        t = float(self.temperature_k(self.now_s() if now is None else now))
        return round(t / TEMPERATURE_RESOLUTION_K) * TEMPERATURE_RESOLUTION_K

    def heater_state(self) -> MeshState:
        """Heater-induced arm phases (rad, crosstalk and drift included, passive phase excluded)."""
        with self._lock:
            now = self.now_s()
            return self._state_at(now, self._temperature_now(now))

    def _state_at(self, now: float, temperature_k: float) -> MeshState:
        """:meth:`heater_state` at ``now`` with the chip at ``temperature_k`` (rounded, K)."""
        return MeshState(*self._phases_at(now, temperature_k))

    def _phases_at(self, now: float, temperature_k: float,
                   decay: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The (top, bottom) arm phases of :meth:`_state_at`, contiguous arrays (rad)."""
        with self._lock:
            phases = self._arm_phases(now, decay)
            top, bot = phases[0::2].copy(), phases[1::2].copy()
            if self._truth.drift_rad_per_k is not None:
                top += self._truth.drift_rad_per_k * temperature_k
            params = self._truth.params
            for tbu, how in self.failed.items():
                if how in ("bar", "cross"):
                    t, b = split_phases(1.0 if how == "cross" else 0.0,
                                        params.offset_top[tbu], params.offset_bot[tbu])
                    top[tbu], bot[tbu] = float(t), float(b)
            return top, bot

    def optical_params(self) -> TBUParams:
        """TBU parameters with dead TBUs made opaque.

        The same object until the faults change: the incremental solvers take a new object
        for a changed chip and re-solve it whole.
        """
        with self._lock:
            if self._params is None:
                dead = [t for t, how in self.failed.items() if how == "dead"]
                self._params = with_dead(self._truth.params, dead)
            return self._params

    def _solve(self, input_port: int, wavelength_nm: float, top: np.ndarray, bot: np.ndarray) -> np.ndarray:
        """Field at every port for unit field into ``input_port`` with arm phases ``top``/``bot``
        (the chip's now), at ``wavelength_nm``: the kept solver re-runs only what changed since
        its last state.
        """
        params = self.optical_params()
        if not self.incremental:  # the reference: the general solve, every time
            self.solves["full"] += 1
            state = MeshState(top, bot)
            return solve(self.mesh, state, [wavelength_nm], params, inputs=[input_port])[0, 0, :, 0]
        held = self._solvers.pop(wavelength_nm, None)
        if held is not None and held.params is params:
            how = "reused" if held.update_phases(top, bot) == 0 else "incremental"
        else:
            state = MeshState(top, bot)
            try:
                held, how = CircuitSolver(self.mesh, state, [wavelength_nm], params), "built"
            except StateError:  # a mesh without a merge plan: the general solve covers it
                self.solves["full"] += 1
                return solve(self.mesh, state, [wavelength_nm], params, inputs=[input_port])[0, 0, :, 0]
        self.solves[how] += 1
        self._solvers[wavelength_nm] = held
        while len(self._solvers) > MAX_SOLVERS:
            self._solvers.popitem(last=False)
        return held.column(input_port)

    def output_field(self, input_port: int, wavelength_nm: float) -> np.ndarray:
        """Complex field at every mesh port (n_ports,) for unit field into ``input_port``."""
        with self._lock:
            now = self.now_s()  # one instant for the whole reading
            decay = settle_decay(now - self._set_at_s, self._truth.realism)  # (once: every reading)
            settling = any(decay)  # the heaters are still moving
            temperature = self._temperature_now(now)
            key = (int(input_port), round(float(wavelength_nm), 9), temperature)
            if settling or key not in self._cache:
                field = self._solve(int(input_port), float(wavelength_nm),
                                    *self._phases_at(now, temperature, decay))
                if settling:
                    return field
                self._cache[key] = field
            return self._cache[key]

    def output_power_mw(self, input_port: int, wavelength_nm: float, input_mw: float = 1.0) -> np.ndarray:
        """Optical power (mW) at every mesh port for ``input_mw`` entering ``input_port``."""
        return input_mw * np.abs(self.output_field(input_port, wavelength_nm)) ** 2
