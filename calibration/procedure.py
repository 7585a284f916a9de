"""The calibration procedure: bootstrap every TBU's fringe through the Bench protocol only.

Before calibration every TBU sits at a random split (its passive phases are unknown), so
light only goes where we can predict it through TBUs already calibrated. The procedure:

0. **Electrical check** (:func:`electrical_stage`, :mod:`calibration.electrical`). Every
   heater channel's voltage and current read-back at zero and at a small probe current: a
   heater that draws nothing (open) or shows no voltage (shorted) is named as such, its TBU
   recorded failed with that kind (never driven, never on a light path, avoided by routing)
   before light could blame its missing fringe on a dead or stuck TBU. A bench that reads
   no heater voltage and current back is named in a warning as not checked.
1. **Bootstrap.** Repeatedly pick the uncalibrated TBU that can be probed best: light from
   a mesh port reaches one of its inputs through calibrated TBUs (set to bar/cross with
   their fitted phases), and one or both of its outputs reach mesh ports the same way.
   The first TBUs are those owning mesh ports at both ends. Every other calibrated TBU is
   parked in cross, which in a hexagonal mesh sends stray light straight out to the edge
   instead of round loops. Sweep the top heater (bottom at 0 mA), then the bottom heater,
   and fit both sweeps jointly (:func:`calibration.fit.fit_tbu`).
   A fit that fails through a TBU whose own fit was made through uncalibrated TBUs blames
   that TBU first, as it blames an uncalibrated one (a dead TBU's leak seen through an
   unknown split can pass for a fringe); such a fit is only doubted, not ruled out: it is
   crossed again when no other path is left (a dead TBU's two healthy neighbours may be
   reachable only through each other).
2. **Refine.** Once every TBU is known, the whole chip can be parked, so each TBU is swept
   again (in bootstrap order) in a clean surrounding (no uncalibrated TBU scattering light
   back into the measured outputs); this fit replaces the bootstrap fit. Its light avoids
   the TBU's dependents (fits made through it) where it can: a bootstrap fit made through
   unknown splits can be a whole pi off, a TBU fitted through it inherits the pi and hands
   it back when refined the other way round. A refinement that fails through a TBU not
   refined yet is tried again through a path avoiding it.
2b. **Recheck.** Every fit records the TBUs its light crossed. A TBU is measured again when
   one of those changed materially after it was measured (a re-fit moved its split by more
   than ``recheck_tol_rad``), or once when its own fit is poor, through paths avoiding the
   suspects; passes repeat until nothing is due. A wrong upstream TBU can recombine both
   outputs of the TBU under test, which shifts its fringe without distorting it, so a clean
   residual alone does not prove a fit right.
2c. **Diagnose** (:func:`diagnose`). A fit that fails (:mod:`calibration.health`: dark,
   flat, out of range) is not believed: in the bootstrap the uncalibrated TBUs on its path
   are avoided and the TBU is tried again later; one that fails through calibrated TBUs is
   a suspect, measured again after the rechecks through up to two disjoint calibrated
   paths (avoiding its dependents where it can), and recorded as failed ("dead", "bar",
   "cross") when it fails again. A suspect that fails only through paths crossing its
   dependents, or that no path reaches yet, is judged after 2d. Failed TBUs are never on a light path
   again and go to the map (and from there to routing).
2d. **Refine again.** A TBU no calibrated path reached during the refinement (a suspect
   blocked every one) kept its bootstrap fit, made through unknown TBUs (one such fit was
   a full pi off, seed 424242). Once the suspects are diagnosed, those TBUs are refined
   and rechecked like the rest (a failed refinement is diagnosed), and the suspects left
   are diagnosed again, until a round changes nothing; then every suspect still left is
   judged through whatever paths exist. One that no calibrated
   path reaches even then (its neighbours on one side are broken) is recorded "dead": its
   fit can be neither refined nor confirmed, and no route can cross it.
3. **Crosstalk.** Each TBU (the victim) is held at quadrature through its fitted curve,
   where a shift of its differential phase changes its outputs to first order, while every
   heater of its neighbouring TBUs is driven in turn by whole turns of its fitted effect,
   at two levels (so its own TBU keeps its split, and no mirror solution fits); a weighted
   least-squares fit of all the victim's readings gives the differential crosstalk
   ``K[top, j] - K[bot, j]`` with uncertainties
   (:func:`measure_crosstalk`, :func:`calibration.fit.fit_crosstalk`). The partner-arm
   fraction ``f`` (the fitted curves are ``(1 - f) s(I)``) is not separable from a heater's
   efficiency and stays the design value; so do entries of victims that cannot be probed
   or do not fit in the operation budget (a decaying law). See docs/calibration.md.
4. **Confirm** (:func:`confirm_stage`, :mod:`calibration.confirm`). Every TBU's phase in
   the finished map is checked by light its fit never saw (another path where one exists,
   always other drive levels; on the fit's own path, every other TBU reaches its state
   through its other heater, so a wrong crosstalk correction cannot cancel between the fit
   and the check). A TBU light disagrees with is re-fitted through a new path
   avoiding every doubtful TBU and checked again; one that still disagrees is named
   "unverified" in the map with the measured disagreement (routing avoids it). So is, once,
   a TBU whose one confirmation path crosses fewer TBUs in cross than its fit's path and
   sees it more than :data:`LEAKY_FIT_RAD` off (:func:`leakier_fit`).

Every reading waits ``Options.settle_s`` after its current change (heaters settle). A
checkpoint (JSON, written atomically; :mod:`calibration.checkpoint`) lets an interrupted run
resume without redoing finished TBUs: it holds the run's last state whenever the run returns
or raises, and after ``kill -9`` misses at most the last ``CHECKPOINT_EVERY_S`` of measuring.
Set-and-read operations are counted by the bench.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from calibration.assemble import build_map
from calibration.bench import Bench, settle
from calibration.budget import BudgetedBench, operation_budget
from calibration.checkpoint import (
    CHECKPOINT_SCHEMA,
    CHECKPOINT_VERSION,
    CheckpointWriter,
    load_checkpoint,
    load_checkpoint_crosstalk,
    load_checkpoint_failed,
    save_checkpoint,
)
from calibration.confirm import (
    CONFIRM_TOL_RAD,
    LEVELS,
    MIN_CONFIRM_CONTRAST,
    Confirmation,
    combine_paths,
    confirm_tbu,
    cross_hops,
    unverified_reason,
    unverified_warning,
)
from calibration.crosstalk import aggressor_current, crosstalk_map, crosstalk_readings, measure_crosstalk
from calibration.drift import (
    DESIGN_DRIFT_RAD_PER_K,
    MAX_MOVE_AFTER_CONFIRM_RAD,
    REFERENCE_INTERVAL_OPS,
    REFERENCE_LEVELS,
    DriftLog,
    Reference,
    bench_time_s,
    compensate,
    drift_summary,
    read_reference,
    reference_for,
)
from calibration.electrical import HEATER_FAULT_KINDS, PROBE_MA, check_heaters
from calibration.fit import NoiseModel, Sweep, TBUFit, fit_tbu, sweep_currents
from calibration.health import (
    DEAD_MARGIN_DB,
    MIN_CONTRAST,
    contrast,
    diagnosis,
    expected_peak_dbm,
    failure,
    peak_dbm,
    record_warnings,
)
from calibration.heater_map import UnreachableError, invert_cubic
from calibration.map import CalibrationError, CalibrationMap, CalibrationRefusedError
from calibration.model import heater_positions, neighbour_heaters
from calibration.options import NOMINAL_GAMMA_PER_MA, NOMINAL_R0_KOHM, Options
from calibration.paths import Probe, ProbePlanner, plan_probe, probe_rank
from calibration.records import CrosstalkRecord, TBURecord, base_currents, tbu_currents, victim_currents
from calibration.resume import RESUME_MOVED_RAD, resumed_move
from photonics.physics import PhysicsDefaults

# Disjoint light paths a suspect TBU is tried through before it is called dead: one blocked
# or mis-set path TBU cannot condemn it.
DIAGNOSE_PROBES = 2
# Re-fit-and-confirm rounds for a TBU light disagrees with before it is named unverified: one
# round through a new path clears a fit spoiled by its path (or a meter glitch); a second
# clears one whose new path crossed another doubtful TBU that the first round put right.
CONFIRM_ROUNDS = 2
# Light paths a TBU is confirmed through when the first disagrees with the map, before it is
# re-fitted: a path's own coherent leak can shift a fringe by ~0.06 rad (calibration.confirm);
# the median of three is what one such path cannot move. Fewer when the mesh has fewer.
CONFIRM_PATHS = 3
# When light disagrees with more than this share of a finished map, the chip is not the one
# that was measured (it drifted during the run, or its crosstalk is not what the map
# assumes): re-fitting TBU by TBU would chase it, so the run is refused, saying by how much.
REFUSE_DOUBTFUL_SHARE = 0.25
# A TBU corrected for drift is confirmed again; its second reading should sit within this of the
# map (rad): half the confirmation tolerance, room for the chip's drift between the two
# readings (~0.01 rad at 3 K/min) and the meter. Further off, the first reading was biased by
# its light path (seen: 0.075 rad on SmartLight seed 9200, whose true drift was 0.011 rad), so
# the correction is not believed and the TBU is re-fitted.
CORRECTION_HELD_RAD = CONFIRM_TOL_RAD / 2
# A TBU confirmed through a path crossing fewer TBUs in cross than its fit's path, but off by more
# than this (rad: the fits' own error on the realistic chip, docs/calibration.md), is re-fitted
# once: of two paths the one with fewer cross-state TBUs is believed (calibration.confirm), and
# here it says the fit's path leaked (seen: SmartLight seed 9301, tbu:2.2.2 re-checked through
# three cross-state TBUs, 0.032 rad off, confirmed within the 0.05 rad tolerance).
LEAKY_FIT_RAD = 0.02

__all__ = [
    "CHECKPOINT_SCHEMA",
    "CHECKPOINT_VERSION",
    "CrosstalkRecord",
    "Options",
    "Progress",
    "Result",
    "Run",
    "TBURecord",
    "aggressor_current",
    "base_currents",
    "bootstrap",
    "build_map",
    "calibrate",
    "crosstalk_map",
    "crosstalk_readings",
    "crosstalk_stage",
    "diagnose",
    "electrical_stage",
    "load_checkpoint",
    "load_checkpoint_crosstalk",
    "measure_crosstalk",
    "measure_sweeps",
    "nominal_sweep_max_ma",
    "recheck",
    "refine",
    "save_checkpoint",
    "tbu_currents",
    "victim_currents",
]


@dataclass
class Progress:
    """Minimal stderr progress: a line every ``every`` TBUs and at the end of each stage."""

    stream: TextIO | None = field(default_factory=lambda: sys.stderr)
    every: int = 10

    def note(self, message: str) -> None:
        """Print a one-off line (e.g. that a run resumes from a checkpoint)."""
        if self.stream is not None:
            print(f"calibrate: {message}", file=self.stream, flush=True)

    def update(self, stage: str, done: int, total: int, ops: int, t0: float) -> None:
        """Print a progress line when due."""
        if self.stream is None or not (done % self.every == 0 or done == total):
            return
        bar = "#" * int(20 * done / max(total, 1))
        print(f"calibrate {stage:<9} [{bar:<20}] {done:>3}/{total} TBUs  {ops:>6} ops  "
              f"{time.monotonic() - t0:6.1f} s", file=self.stream, flush=True)


@dataclass
class Result:
    """What :func:`calibrate` returns: the map and the run's figures."""

    cmap: CalibrationMap
    records: dict[int, TBURecord]
    operations: int
    duration_s: float
    sweeps: dict[int, tuple[Probe, list[Sweep], TBUFit]] = field(default_factory=dict, repr=False)
    crosstalk: dict[int, CrosstalkRecord] = field(default_factory=dict, repr=False)
    confirmations: dict[int, Confirmation] = field(default_factory=dict, repr=False)


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------
def nominal_sweep_max_ma(phase_rad: float, defaults: PhysicsDefaults | None = None) -> float:
    """Current (mA) at which the nominal heater reaches ``phase_rad``."""
    d = defaults or PhysicsDefaults()
    eta = np.pi / d.heater_power_pi_mw
    rho2 = eta * NOMINAL_R0_KOHM
    return float(invert_cubic(np.array(phase_rad), rho2, rho2 * NOMINAL_GAMMA_PER_MA))


def measure_sweeps(bench: Bench, probe: Probe, base: np.ndarray, currents_ma: np.ndarray,
                   wavelength_nm: float, settle_s: float = 0.0) -> list[Sweep]:
    """Sweep the top then the bottom heater of ``probe.tbu``; one set-and-read per point,
    each read ``settle_s`` after its set.
    """
    bench.select_input(probe.src, wavelength_nm)
    sweeps = []
    for arm in (0, 1):
        powers = np.empty((len(currents_ma), len(probe.outputs)))
        for k, i in enumerate(currents_ma):
            c = base.copy()
            c[2 * probe.tbu + arm] = i
            bench.set_currents(c)
            settle(bench, settle_s)
            powers[k] = 10 ** (np.asarray(bench.read_powers_dbm(list(probe.outputs))) / 10)
        sweeps.append(Sweep(arm, np.asarray(currents_ma, float), powers))
    return sweeps


# ---------------------------------------------------------------------------------------
# One run: what every stage shares
# ---------------------------------------------------------------------------------------
@dataclass
class Run:
    """The state one calibration run carries from stage to stage.

    ``records`` (per TBU) and ``xrecords`` (per crosstalk victim) grow as TBUs are
    measured; each is offered to the checkpoint (``writer``, :class:`CheckpointWriter`).
    ``failed`` holds TBUs found broken ("dead", "bar", "cross"), ``suspects`` TBUs whose fit
    failed once and wait for a diagnosis, ``warnings`` one line per doubtful fit,
    ``confirmations`` the last light check of each TBU and ``unverified`` (TBU ->
    disagreement, rad) those light did not confirm.
    ``ops_before``/``dur_before`` come from a resumed checkpoint.
    """

    bench: Bench
    options: Options
    progress: Progress
    checkpoint: Path | None = None
    keep_sweeps: bool = False
    on_tbu: Callable[[str, int], None] | None = None
    records: dict[int, TBURecord] = field(default_factory=dict)
    xrecords: dict[int, CrosstalkRecord] = field(default_factory=dict)
    ops_before: int = 0
    dur_before: float = 0.0
    failed: dict[int, str] = field(default_factory=dict)
    sweeps: dict[int, tuple[Probe, list[Sweep], TBUFit]] = field(default_factory=dict)
    noise: NoiseModel = field(default_factory=NoiseModel)
    rechecked: int = 0
    suspects: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    last_sweeps: list[Sweep] = field(default_factory=list)
    confirmations: dict[int, Confirmation] = field(default_factory=dict)
    unverified: dict[int, float] = field(default_factory=dict)
    refitted: int = 0
    heater_faults: dict[int, str] = field(default_factory=dict)
    # Drift during the run (calibration.drift): None when not followed (recalibrate, or
    # Options.drift_references = 0); TBUs' fit and confirmation times on the bench clock (s).
    drift: DriftLog | None = None
    drift_candidates: list[Reference] = field(default_factory=list)
    drift_at_ops: int = 0
    fitted_s: dict[int, float] = field(default_factory=dict)
    fit_cross: dict[int, int] = field(default_factory=dict)  # per TBU: its fit path's cross-state TBUs
    confirmed_s: dict[int, float] = field(default_factory=dict)
    drift_quality: dict[str, Any] = field(default_factory=dict)
    # The bench's operation count when the run began (None: now); a resumed run's light check
    # of its checkpoint (calibration.resume) comes before the Run and counts as its own.
    ops_start: int | None = None
    resume_check_ops: int = 0
    budget: int | None = field(default=None, init=False)  # operations (operation_budget)
    writer: CheckpointWriter | None = field(default=None, init=False)  # None: no checkpoint

    def __post_init__(self) -> None:
        self.mesh = self.bench.mesh
        if self.checkpoint:
            self.writer = CheckpointWriter(self.checkpoint, self.bench.chip_id, self.mesh)
        self.peer = self.mesh.peer().tolist()  # a list: plan_probe's searches index it port by port
        self.neighbours = neighbour_heaters(heater_positions(self.mesh.tbu_xy),
                                            self.options.crosstalk_cutoff_tbu)
        self.t0 = time.monotonic()
        self.ops0 = self.bench.operations if self.ops_start is None else self.ops_start
        budget = self.budget = operation_budget(self.options, self.mesh)
        limit = None if budget is None else budget - self.ops_before + self.ops0
        self.doing = "in the electrical check"  # what is measured now (words, for the budget's refusal)
        self.bench = BudgetedBench(self.bench, limit, budget, lambda: self.doing)
        self.seq = max((r.seq for r in self.records.values()), default=0)
        # Operations kept back for the confirmation stage (one set of levels per TBU): the
        # budget may trim crosstalk, never the check that names what light disagrees with.
        self.reserved = LEVELS * self.mesh.n_tbus

    def ops(self) -> int:
        """Set-and-read operations of the whole run (resumed ones included)."""
        return self.ops_before + self.bench.operations - self.ops0

    def elapsed(self) -> float:
        """Seconds of the whole run (resumed ones included)."""
        return self.dur_before + time.monotonic() - self.t0

    def fits_budget(self, cost: int) -> bool:
        """True when ``cost`` more operations stay within the run's budget."""
        return self.budget is None or self.ops() + cost + self.reserved <= self.budget

    def working(self) -> set[int]:
        """TBUs light may be routed through: the calibrated ones (never a broken or suspect TBU)."""
        return set(self.records)

    def save(self) -> None:
        """Offer the run's state to the checkpoint (when there is one): written when due."""
        if self.writer:
            self.writer.offer(self.records, self.ops(), self.elapsed(), self.xrecords, self.failed)

    def flush(self) -> None:
        """Write the last state offered to the checkpoint, if it is not on disk yet."""
        if self.writer:
            self.writer.flush()

    def notify(self, stage: str, tbu: int) -> None:
        """Call the ``on_tbu`` hook before a TBU is measured."""
        self.doing = (f"while measuring {self.mesh.tbu_names[tbu]} ({stage} stage, "
                      f"{len(self.records)} TBUs fitted)")
        if self.on_tbu:
            self.on_tbu(stage, tbu)

    def expected_dbm(self, probe: Probe) -> float | None:
        """Peak power (dBm) ``probe``'s path should deliver, when every TBU on it is calibrated
        (None in the bootstrap, where unknown TBUs on the path can take any share of the light).
        """
        if any(h.tbu not in self.records for h in probe.hops):
            return None
        return expected_peak_dbm(len(probe.hops), float(getattr(self.bench, "laser_power_dbm", 0.0)))

    def fail(self, tbu: int, how: str, why: str) -> None:
        """Record ``tbu`` as broken (it is never used in a light path again) and say why."""
        self.failed[tbu] = how
        self.records.pop(tbu, None)
        self.suspects.pop(tbu, None)
        self.warnings.append(f"{self.mesh.tbu_names[tbu]}: failed ({how}): {why}")
        self.save()

    def measure_tbu(self, probe: Probe, stage: str, n_points: int, prior: TBURecord | None,
                    keep_better: bool = False) -> tuple[str | None, TBUFit]:
        """Sweep and fit one TBU; returns (failure, fit): "dark", "flat" or None.

        A failed fit leaves ``records`` untouched. With ``keep_better`` a worse-fitting
        result keeps ``prior``.
        """
        self.watch_drift()
        self.notify(stage, probe.tbu)
        opts = self.options
        currents = sweep_currents(nominal_sweep_max_ma(opts.sweep_phase_rad), n_points)
        base = base_currents(self.mesh.n_heaters, self.records, probe)
        sweeps = measure_sweeps(self.bench, probe, base, currents, opts.wavelength_nm, opts.settle_s)
        pri = None if prior is None else (prior.delta, np.array(prior.g2), np.array(prior.g3))
        fit = fit_tbu(sweeps, np.array(probe.signs), self.noise, loss=opts.loss, prior=pri,
                      trial_nfev=opts.fit_trial_evaluations)
        if self.keep_sweeps:
            self.sweeps[probe.tbu] = (probe, sweeps, fit)
        self.last_sweeps = sweeps
        verdict = failure(fit, sweeps, self.bench.max_current_ma, self.expected_dbm(probe))
        if verdict is not None:
            return verdict, fit
        hot = {str(j): float(base[j]) for j in self.neighbours[probe.tbu] if base[j] > 0}
        self.seq += 1
        rec = TBURecord.from_fit(fit, probe, stage, hot, self.seq)
        rec.through_unknown = any(h.tbu not in self.records for h in probe.hops)
        if prior is not None and not rec.differs_from(prior, opts.recheck_tol_rad):
            rec.changed = prior.changed
        if keep_better and prior is not None and rec.rms_residual >= prior.rms_residual:
            rec = replace(prior, stage=stage)
        self.records[probe.tbu] = rec
        self.fitted_s[probe.tbu] = bench_time_s(self.bench)
        self.fit_cross[probe.tbu] = cross_hops(probe)
        self.offer_reference(probe, rec)
        self.save()
        return None, fit

    # -- drift during the run (calibration.drift) -------------------------------------------
    def offer_reference(self, probe: Probe, rec: TBURecord) -> None:
        """Keep a freshly fitted TBU as a drift reference when light reaches it, and leaves it for
        the meter, without crossing any other TBU (its fit's own probe may cross some).
        """
        if (self.drift is None or self.drift.references
                or len(self.drift_candidates) >= self.options.drift_references):
            return
        direct = probe if not probe.length else plan_probe(self.mesh, probe.tbu, set(), self.peer)
        if direct is None or direct.length:
            return
        ref = reference_for(rec, direct, self.records, self.mesh.n_heaters, self.bench.max_current_ma)
        if ref is not None:
            self.drift_candidates.append(ref)

    def watch_drift(self, now: bool = False) -> None:
        """Read the drift references when a round is due (``now``: at once).

        The references start together, with a common first round, once enough candidates are
        fitted (or at the first call with ``now`` after the bootstrap); rounds follow every
        :data:`~calibration.drift.REFERENCE_INTERVAL_OPS` operations.
        """
        log = self.drift
        if log is None:
            return
        if not log.references:
            if not self.drift_candidates or (
                    len(self.drift_candidates) < self.options.drift_references and not now):
                return
            log.references = list(self.drift_candidates)
        elif not now and self.bench.operations - self.drift_at_ops < REFERENCE_INTERVAL_OPS:
            return
        ops0 = self.bench.operations
        self.doing = "while reading the drift references"
        patterns = log.patterns or [None] * len(log.references)
        readings = [read_reference(self.bench, r, self.options.wavelength_nm, self.options.settle_s, p)
                    for r, p in zip(log.references, patterns, strict=True)]
        log.ops += self.bench.operations - ops0
        self.drift_at_ops = self.bench.operations
        if not log.times_s:  # a reference light shows no fringe through cannot follow anything
            keep = [k for k, r in enumerate(readings) if r.contrast >= MIN_CONFIRM_CONTRAST]
            log.references = [log.references[k] for k in keep]
            readings = [readings[k] for k in keep]
            log.patterns = [r.residual for r in readings]
            if not keep:
                self.drift = None
                return
        log.record(bench_time_s(self.bench), [r.offset_rad for r in readings])
        if log.drifted():  # the map will be confirmed twice (before and after compensation)
            self.reserved = 2 * LEVELS * self.mesh.n_tbus


# ---------------------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------------------
def electrical_stage(run: Run) -> None:
    """Stage 0: name every open or shorted heater from the driver's read-back; fail its TBU.

    A heater-fault failure a resumed checkpoint carries is checked again like the rest (a
    repaired heater's TBU is calibrated).
    """
    for t in [t for t, how in run.failed.items() if how in HEATER_FAULT_KINDS]:
        run.failed.pop(t)
    faults = check_heaters(run.bench)
    if faults is None:
        run.warnings.append("heaters not checked electrically: the bench reads no heater voltage and "
                            "current back, so an open or shorted heater shows only as a TBU without a fringe")
        return
    names = run.mesh.tbu_names
    for f in faults:
        run.heater_faults[f.channel] = f.kind
        t = f.channel // 2
        arm = "top" if f.channel % 2 == 0 else "bottom"
        if t in run.failed:
            run.warnings.append(f"{names[t]} {arm} heater (channel {f.channel}): {f.kind} too: "
                                f"{f.evidence(PROBE_MA)}")
            continue
        run.fail(t, f.kind, f"its {arm} heater (channel {f.channel}) is {f.kind.replace('-heater', '')}: "
                 f"{f.evidence(PROBE_MA)}; {f.advice()}; the TBU is never driven and routing avoids it")


def bootstrap(run: Run) -> None:
    """Stage 1: grow the calibrated set one TBU at a time, best probe first.

    A fit that fails (no light, or no fringe) is not believed: when its light crossed
    uncalibrated TBUs, those are avoided for that TBU and it is tried again later; when
    its path was all calibrated TBUs, the TBU becomes a *suspect* for :func:`diagnose`.
    TBUs no light path reaches are suspects too.
    """
    mesh = run.mesh
    avoid: dict[int, set[int]] = {}  # per TBU: TBUs its probes must not cross (they went dark)
    doubt: dict[int, set[int]] = {}  # per TBU: fits through unknown TBUs it went dark through
    planner = ProbePlanner(mesh, run.peer)  # the same probes as plan_probe, most from memory
    while True:
        todo = [t for t in range(mesh.n_tbus)
                if t not in run.records and t not in run.failed and t not in run.suspects]
        if not todo:
            return
        allowed = set(run.records)
        banned_all = set(run.failed) | set(run.suspects)
        probes = [p for t in todo
                  if (p := planner.plan(t, allowed, passable=True,
                                        banned=banned_all | avoid.get(t, set()) | doubt.get(t, set())))
                  is not None]
        if not probes:  # a last resort before "unreachable": paths crossing doubted fits
            probes = [p for t in todo if doubt.get(t)
                      and (p := planner.plan(t, allowed, passable=True,
                                             banned=banned_all | avoid.get(t, set()))) is not None]
        if not probes:
            if not run.records:
                raise CalibrationError(
                    f"no light path reaches any TBU (e.g. {mesh.tbu_names[todo[0]]}); the mesh needs "
                    "TBUs with mesh ports at both ends to start from"
                )
            run.suspects.update(dict.fromkeys(todo, "unreachable"))
            return
        best = min(probes, key=lambda p: probe_rank(p, allowed))
        verdict, _ = run.measure_tbu(best, "bootstrap", run.options.points, None)
        if verdict is not None:
            # An uncalibrated TBU on the path can block the light (dark) or mix both of the
            # TBU's outputs into one reading (flat): blame the path first. So can one whose
            # own fit was made through uncalibrated TBUs: a dead TBU's leak seen through an
            # unknown split can pass for a fringe (trust campaign dead_interior 9203: the
            # dead tbu:0.0.1 fitted so, then its healthy neighbours went dark through it
            # and were named dead in its place).
            # Those last are doubted, not ruled out: when nothing else is left to bootstrap and
            # doubting them leaves a TBU no path, it is tried through them (hex:3x4 seed 9704's
            # tbu:1.3.3, reachable only through tbu:1.2.2 beside the dead tbu:1.2.1, was left
            # with no path, and both healthy TBUs were named dead); doubted fits it went dark
            # through a second time are avoided like unknown TBUs.
            hops = {h.tbu for h in best.hops}
            unknown = {k for k in hops if k not in allowed}
            fitted_blind = {k for k in hops - unknown if run.records[k].through_unknown}
            was_doubted = fitted_blind & doubt.get(best.tbu, set())
            if unknown or fitted_blind:
                avoid.setdefault(best.tbu, set()).update(unknown | was_doubted)
                doubt.setdefault(best.tbu, set()).update(fitted_blind - was_doubted)
            else:
                run.suspects[best.tbu] = verdict
        run.progress.update("bootstrap", len(run.records), mesh.n_tbus, run.ops(), run.t0)


def diagnose(run: Run, final: bool = True) -> None:
    """Stage 2c: measure each suspect again through calibrated TBUs only; name what is broken.

    Runs after the refinement and rechecks, so the light paths are as good as they get. Up
    to :data:`DIAGNOSE_PROBES` probes with disjoint paths are tried, each avoiding the
    suspect's dependents where it can (:func:`diagnose_probe`): a clean fringe through any of
    them clears the suspect (the fit is kept); light without a fringe means stuck, in the
    state whose output carries the light; no light through every path, "dead". A suspect no calibrated
    path reaches cannot be calibrated and is recorded as "dead" (never routed through).

    Passes repeat while one clears a suspect (a cleared TBU opens paths to the others). A
    suspect every path of which crosses one of its dependents (:func:`dependents`: fits made
    through the suspect, at its unknown split or its failed fit), or that no path reaches yet,
    is only judged when ``final``: such a fit can be a whole pi off and send the light the
    wrong way (SmartLight seed 9733: healthy tbu:1.3.1 was named stuck in cross through
    tbu:1.4.3, bootstrapped through tbu:1.3.1 and pi off); :func:`refine_again` refines
    those fits first.
    """
    while diagnose_pass(run, final=False):
        pass
    if final:
        diagnose_pass(run, final=True)


def diagnose_pass(run: Run, final: bool) -> bool:
    """One pass of :func:`diagnose` over the suspects; True when one was cleared."""
    cleared = False
    for t in sorted(run.suspects):
        verdicts, sure = diagnose_probes(run, t)
        if t not in run.suspects:
            cleared = True
            continue
        if not (final or (verdicts and sure)):
            continue  # judged once the bootstrap fits on its paths are refined, or a path opens
        states = [(diagnosis(fit, sweeps, expected), fit) for fit, sweeps, expected in verdicts]
        stuck = [(how, fit) for how, fit in states if how != "dead"]
        if stuck:
            how, fit = stuck[0]
            run.fail(t, how, f"its heaters do not move the light (fringe contrast {contrast(fit):.2f} "
                     f"< {MIN_CONTRAST})")
        elif verdicts:
            run.fail(t, "dead", f"no light leaves it through {len(verdicts)} calibrated path(s) "
                     f"(peak {max(peak_dbm(s) for _, s, _ in verdicts):.1f} dBm, more than "
                     f"{DEAD_MARGIN_DB:.0f} dB below what the path should carry, or no fringe)")
        else:
            run.fail(t, "dead", "no light path of calibrated TBUs reaches it")
    return cleared


def diagnose_probes(run: Run, t: int) -> tuple[list[tuple[TBUFit, list[Sweep], float | None]], bool]:
    """Measure suspect ``t`` through up to :data:`DIAGNOSE_PROBES` disjoint paths; pops it from
    the suspects when one shows a clean fringe. Returns the failed fits (with their sweeps and
    expected peak) and whether every path kept clear of its dependents.
    """
    points = max(run.options.refine_points, run.options.points)
    banned = set(run.failed)
    verdicts: list[tuple[TBUFit, list[Sweep], float | None]] = []
    sure = True
    for _ in range(DIAGNOSE_PROBES):
        probe = diagnose_probe(run, t, banned)
        if probe is None:
            break
        verdict, fit = run.measure_tbu(probe, "diagnose", points, None)
        if verdict is None:
            run.suspects.pop(t)
            break
        verdicts.append((fit, run.last_sweeps, run.expected_dbm(probe)))
        sure = sure and dependents(run.records, t).isdisjoint(h.tbu for h in probe.hops)
        banned |= {h.tbu for h in probe.hops}
    return verdicts, sure


def diagnose_probe(run: Run, t: int, banned: set[int]) -> Probe | None:
    """A light path to suspect ``t`` avoiding the TBUs whose fit crossed it (:func:`dependents`),
    else through any calibrated ones.
    """
    mesh, peer, pool = run.mesh, run.peer, run.working() - {t}
    return (plan_probe(mesh, t, pool - dependents(run.records, t), peer, banned=banned)
            or plan_probe(mesh, t, pool, peer, banned=banned))


def refine(run: Run) -> None:
    """Stage 2: every bootstrapped TBU again, in a fully parked chip, in bootstrap order.

    A TBU's shortest path mostly crosses TBUs bootstrapped before it, which are then
    already refined (index order left 2-3x more for the rechecks). A refinement that fails
    through calibrated TBUs all refined drops the bootstrap fit: the TBU becomes a suspect
    for :func:`diagnose`. One that fails through a TBU still holding its bootstrap fit (made
    through unknown TBUs: a dead TBU's -60 dB leak can pass for a fringe there) blames that
    TBU first, like the bootstrap: the TBU is refined again later through a path avoiding it
    (:func:`refine_one`), and becomes a suspect only when no such path is left.

    A TBU is refined through a path avoiding the TBUs whose fit crossed it (:func:`dependents`)
    where the mesh allows. A bootstrap fit made through unknown splits can be a whole pi off
    (light entering the TBU's other input swaps bar and cross), and a TBU fitted through it
    inherits the pi; refined back through that TBU, it passes the pi back, and the two agree
    with each other along every path crossing both, so neither the refinement nor the
    rechecks see it (SmartLight seed 9733: tbu:0.3.1 and tbu:0.4.2, both pi off, left 9 TBUs
    unverified, and two healthy TBUs diagnosed through them were named stuck in cross).
    """
    if run.options.refine_points <= 0:
        return
    records = run.records
    first = sorted((t for t in records if records[t].stage == "bootstrap"), key=lambda t: records[t].seq)
    todo = first
    avoid: dict[int, set[int]] = {}  # per TBU: unrefined TBUs a failed refinement of it crossed
    total, done = len(todo), 0
    while todo:
        retry = []
        for t in todo:
            if refine_one(run, t, avoid.setdefault(t, set())) == "retry":
                retry.append(t)
            else:
                done += 1
                run.progress.update("refine", done, total, run.ops(), run.t0)
        todo = retry  # each retry avoids one more TBU than the last: the loop ends
    widen(run, first)


def widen(run: Run, tbus: list[int]) -> None:
    """Refine again each of ``tbus`` whose refinement saw one output where a path of refined
    TBUs now sees both: keeping clear of its dependents (:func:`dependents`) can leave a TBU
    one output early in the refinement, and a fringe seen at both outputs has twice the readings
    (SmartLight seed 9703: tbu:0.0.4 refined at one output, 0.0196 rad RMS on its worst
    heater; through a neighbour at both, 0.0137 rad).
    """
    records = run.records
    for t in tbus:
        rec = records.get(t)
        if rec is None or rec.stage != "refine" or len(rec.outputs) > 1:
            continue
        pool = {k for k, r in records.items() if r.stage != "bootstrap"} - {t}
        probe = plan_probe(run.mesh, t, pool, run.peer, banned=set(run.failed))
        if probe is None or len(probe.outputs) <= len(rec.outputs):
            continue
        if not run.fits_budget(2 * run.options.refine_points):  # a better fit, not a needed one
            return
        run.measure_tbu(probe, "refine", run.options.refine_points, rec)
        run.rechecked += 1  # a TBU measured again: counted with the rechecks


def refine_one(run: Run, t: int, avoid: set[int]) -> str:
    """Refine TBU ``t`` through a path of calibrated TBUs avoiding ``avoid`` (grown here).

    The path avoids the TBUs whose fit crossed ``t`` (:func:`dependents`) where the mesh
    allows: they were set by ``t``'s bootstrap fit and cannot vouch for it.

    Returns "refined", "kept" (no path at all: the bootstrap fit stays, for
    :func:`refine_again`), "suspect" (failed through refined TBUs, or no path avoiding the
    blamed ones is left) or "retry" (failed through unrefined TBUs, now in ``avoid``).
    """
    records = run.records
    pool, banned = run.working() - {t} - avoid, set(run.failed) | avoid
    probe = (plan_probe(run.mesh, t, pool - dependents(records, t), run.peer, banned=banned)
             or plan_probe(run.mesh, t, pool, run.peer, banned=banned))
    if probe is None:
        if not avoid:  # no calibrated path left (a suspect blocks it): keep the bootstrap fit
            return "kept"
        records.pop(t)  # every path left crosses a TBU it failed through
        run.suspects[t] = "dark"
        return "suspect"
    verdict, _ = run.measure_tbu(probe, "refine", run.options.refine_points, records[t])
    if verdict is None:
        return "refined"
    unrefined = {h.tbu for h in probe.hops if h.tbu in records and records[h.tbu].stage == "bootstrap"} - {t}
    if unrefined:
        avoid |= unrefined
        return "retry"
    # Through refined TBUs only, a failed fit condemns the bootstrap fit (made with unknown
    # TBUs around: a dead TBU's -60 dB leak can still show a fringe there).
    records.pop(t)
    run.suspects[t] = verdict
    return "suspect"


def dependents(records: dict[int, TBURecord], t: int) -> set[int]:
    """TBUs whose fit's light crossed ``t``, directly or through the fit of another such TBU:
    set by ``t``'s fit, they cannot vouch for it.
    """
    out: set[int] = set()
    frontier = {t}
    while frontier:
        frontier = {k for k, r in records.items()
                    if k != t and k not in out and not frontier.isdisjoint(r.hops)}
        out |= frontier
    return out


def refine_again(run: Run) -> None:
    """Stage 2d: refine the TBUs that kept a bootstrap-only fit, recheck what they touched and
    diagnose the suspects again, until a round changes nothing; then judge every suspect left.

    The refinement skips a TBU no calibrated path reaches (a suspect blocked every path);
    :func:`diagnose` has since cleared or named the suspects whose paths it could trust, so
    a path may exist now, and a refined fit may be what a deferred suspect needed.
    """
    while True:
        left = (sum(r.stage == "bootstrap" for r in run.records.values()), len(run.suspects))
        if not left[0]:
            break
        refine(run)
        recheck(run)
        diagnose(run, final=False)  # a refinement that failed now made a suspect
        if (sum(r.stage == "bootstrap" for r in run.records.values()), len(run.suspects)) == left:
            break
    diagnose(run)
    unreachable_fits(run)


def unreachable_fits(run: Run) -> None:
    """Fail the TBUs still holding a bootstrap-only fit after :func:`refine_again`: no light
    path of calibrated TBUs reaches them (their neighbours on one side are broken), so their
    fit, made through unknown (broken) TBUs, can be neither refined nor confirmed, and no route
    can cross them. Recorded "dead" (never driven, routed around) with a warning saying why;
    keeping such a fit left a heater that cannot reach pi in the map (trust campaign
    dead_adjacent 9201: the map could program no configuration).
    """
    if run.options.refine_points <= 0:  # no refinement asked for: every fit is a bootstrap fit
        return
    for t in sorted(t for t, r in run.records.items() if r.stage == "bootstrap"):
        run.fail(t, "dead", "no light path of calibrated TBUs reaches it (its neighbours on one side are "
                 "broken): its bootstrap fit, made through them, can be neither refined nor confirmed")


def upstream_changed(records: dict[int, TBURecord], t: int) -> bool:
    """True when a TBU on ``t``'s light path changed materially after ``t`` was measured."""
    return any(records[h].changed > records[t].seq for h in records[t].hops if h in records)


def due_for_recheck(records: dict[int, TBURecord], options: Options) -> tuple[list[int], set[int]]:
    """TBUs to measure again, worst fit first, and every suspect TBU (to route probes around).

    Due: a TBU whose light crossed a TBU that changed after it was measured, or (once,
    after its refinement) a TBU whose own fit is poor.
    """
    poor = {t for t, r in records.items() if r.rms_residual > options.poor_fit_residual}
    # a fit made while diagnosing a suspect is as clean as a refinement: a poor one is due too
    due = [t for t in sorted(records)
           if upstream_changed(records, t) or (t in poor and records[t].stage in ("refine", "diagnose"))]
    # Worst fit first: under budget pressure the rechecks that matter most are done.
    due.sort(key=lambda t: -records[t].rms_residual)
    return due, poor | set(due)


def recheck(run: Run) -> None:
    """Stage 2b: re-measure suspect fits through paths avoiding the suspects, until none is due.

    A fit is only as good as the TBUs its light crossed (a wrong upstream TBU can shift a
    fringe without distorting it), so a clean residual alone does not prove a fit right.
    """
    opts = run.options
    if opts.refine_points <= 0:
        return
    for _ in range(opts.recheck_passes):
        due, suspects = due_for_recheck(run.records, opts)
        if not due:
            return
        allowed = run.working()
        for n, t in enumerate(due, 1):
            if not run.fits_budget(2 * opts.refine_points):
                return
            probe = (plan_probe(run.mesh, t, allowed - suspects, run.peer, banned=set(run.failed))
                     or plan_probe(run.mesh, t, allowed - {t}, run.peer, banned=set(run.failed)))
            if probe is None:
                continue
            run.measure_tbu(probe, "recheck", opts.refine_points, run.records[t],
                            keep_better=not upstream_changed(run.records, t))
            run.rechecked += 1
            run.progress.update("recheck", n, len(due), run.ops(), run.t0)


def fit_warnings(run: Run) -> None:
    """One warning line per doubtful final fit (poor residual, bounds, mismatched heaters)."""
    for t, rec in sorted(run.records.items()):
        for w in record_warnings(rec, run.options.poor_fit_residual):
            run.warnings.append(f"{run.mesh.tbu_names[t]}: {w}")


def crosstalk_stage(run: Run) -> None:
    """Stage 3: each TBU at quadrature while its neighbours' heaters are driven in turn.

    Broken TBUs are neither victims nor aggressors. Victims that would exceed the operation
    budget keep the fallback law.
    """
    opts = run.options
    if opts.crosstalk_repeats <= 0:
        return
    mesh = run.mesh
    todo = [t for t in sorted(run.records) if t not in run.xrecords and run.neighbours[t]]
    for n, t in enumerate(todo, 1):
        aggressors = [j for j in run.neighbours[t] if j // 2 in run.records]
        if not aggressors:
            continue
        if not run.fits_budget(crosstalk_readings(len(aggressors), opts)):
            return
        probe = plan_probe(mesh, t, run.working() - {t}, run.peer, banned=set(run.failed))
        if probe is None:
            continue
        run.watch_drift()
        run.notify("crosstalk", t)
        base = base_currents(mesh.n_heaters, run.records, probe)
        try:
            run.xrecords[t] = measure_crosstalk(run.bench, probe, base, run.records, aggressors, opts,
                                                run.noise)
        except UnreachableError as exc:  # an aggressor's fit cannot add the drive: keep the design law
            run.warnings.append(f"{mesh.tbu_names[t]}: crosstalk not measured, the design law is used (an "
                                f"aggressor heater's fit cannot be driven: {exc})")
            continue
        run.save()
        run.progress.update("crosstalk", n, len(todo), run.ops(), run.t0)


def confirm_probe(run: Run, t: int, doubtful: set[int], asked: set[int] = frozenset()
                  ) -> tuple[Probe | None, bool]:
    """The light path to confirm ``t`` through, and whether it is independent of its fit's.

    Preferred: a path avoiding every TBU the fit's light crossed (so its source or outputs
    differ); else the fit's own kind of path (the drive levels still differ from the sweep's).
    Doubtful TBUs (other than ``t``) and failed ones are never crossed, nor (for a second
    opinion) the TBUs ``asked`` paths crossed.
    """
    rec = run.records[t]
    banned = set(run.failed) | (doubtful - {t}) | set(asked)
    own = set(rec.hops)
    for avoid in (own, set()):
        probe = plan_probe(run.mesh, t, run.working() - {t} - avoid, run.peer, banned=banned | avoid)
        if probe is not None:
            return probe, (probe.src != rec.src or set(probe.outputs) != set(rec.outputs))
    return None, False


def confirm_path(run: Run, cmap: CalibrationMap, t: int, doubtful: set[int],
                 asked: set[int] = frozenset()) -> tuple[Confirmation, set[int] | None]:
    """Confirm TBU ``t`` of ``cmap`` through one light path (see :func:`confirm_probe`);
    also the TBUs that path crossed (None: no path left).
    """
    probe, independent = confirm_probe(run, t, doubtful, asked)
    if probe is None:
        return Confirmation(t, np.nan, np.nan, np.nan, 0.0, False, -1, ()), None
    run.watch_drift()
    run.notify("confirm", t)
    # On the fit's own path the fit's neighbour heat would come back as it was, and a wrong
    # crosstalk entry with it (its error cancels between the fit's delta and the check): the
    # TBU's crosstalk neighbours (on the path or parked) reach their states through their
    # other heaters. TBUs further away keep theirs: their heat does not reach it, and each
    # heater swapped sets its TBU a little less exactly (further up its fitted curve).
    swapped = frozenset() if independent else frozenset(j // 2 for j in run.neighbours[t])
    base = base_currents(run.mesh.n_heaters, run.records, probe, other_arm=swapped)
    confirmation = confirm_tbu(run.bench, cmap, probe, base, independent_path=independent,
                               wavelength_nm=run.options.wavelength_nm, settle_s=run.options.settle_s)
    run.confirmed_s[t] = bench_time_s(run.bench)
    return confirmation, {h.tbu for h in probe.hops}


def confirm_one(run: Run, cmap: CalibrationMap, t: int, doubtful: set[int]) -> Confirmation:
    """Confirm TBU ``t`` of ``cmap`` by light (see :mod:`calibration.confirm`): one path, and
    when light disagrees there, up to :data:`CONFIRM_PATHS` in all, judged on their median.
    """
    first, crossed = confirm_path(run, cmap, t, doubtful)
    if first.confirmed or not crossed:  # confirmed, no path, or one crossing nothing else
        return first
    paths, asked = [first], set(crossed)
    # Further paths only within the budget (the stage's reserve is one path a TBU): a TBU left
    # with fewer is judged on those, and named when light still disagrees.
    while len(paths) < CONFIRM_PATHS and run.fits_budget(LEVELS):
        more, crossed = confirm_path(run, cmap, t, doubtful, asked)
        if crossed is None:
            break
        paths.append(more)
        asked |= crossed
    return combine_paths(paths)


def refit_cost(options: Options) -> int:
    """Operations a confirmation re-fit may take: both heaters' sweeps, then light through up
    to :data:`CONFIRM_PATHS` paths at :data:`~calibration.confirm.LEVELS` levels.
    """
    return 2 * max(options.refine_points, options.points) + CONFIRM_PATHS * LEVELS


def refit_doubtful(run: Run, t: int, doubtful: set[int]) -> None:
    """Fit ``t`` again through a path avoiding the doubtful TBUs and, where it can, its old path."""
    old = run.records[t]
    banned = set(run.failed) | (doubtful - {t})
    for avoid in (set(old.hops), set()):
        probe = plan_probe(run.mesh, t, run.working() - {t} - avoid, run.peer, banned=banned | avoid)
        if probe is not None:
            verdict, _ = run.measure_tbu(probe, "confirm", max(run.options.refine_points, run.options.points),
                                         old)
            if verdict is None:
                run.refitted += 1
            return


def confirm_stage(run: Run) -> CalibrationMap:
    """Stage 4: confirm every TBU of the finished map by light; re-fit or name what disagrees.

    Returns the final map: TBUs still unconfirmed after :data:`CONFIRM_ROUNDS` re-fits are
    recorded "unverified" with their measured disagreement (NaN: no fringe seen at all).
    """
    run.reserved = 0
    cmap = assemble(run)
    run.confirmations = {t: confirm_one(run, cmap, t, set()) for t in sorted(run.records)}
    run.progress.update("confirm", len(run.records), len(run.records), run.ops(), run.t0)
    corrected: set[int] = set()
    if run.drift is not None:
        cmap, corrected = compensate_drift(run)
    if run.options.drift_references > 0 and run.drift_quality.get("reference_rounds", 0) < 2:
        run.warnings.append("drift not tracked: no reference TBU (one light reaches and leaves without "
                            "crossing another) was read twice with a fringe in this run, so a drift is "
                            "seen only when light disagrees with a quarter of the map")
    # A corrected TBU whose second reading does not sit where the correction put it was not
    # moved by drift alone (its first reading was biased by its path): it is re-fitted.
    doubtful = {t for t, c in run.confirmations.items()
                if not c.confirmed or (t in corrected and not abs(c.offset_rad) <= CORRECTION_HELD_RAD)}
    refuse_if_moved(run, doubtful)
    doubtful -= {t for t in sorted(doubtful) if law_confirms(run, t, doubtful)}
    doubtful |= {t for t, c in run.confirmations.items() if leakier_fit(run, t, c)}
    unaffordable: set[int] = set()  # doubtful TBUs the operation budget left no re-fit for
    for _ in range(CONFIRM_ROUNDS):
        if not doubtful:
            break
        refitted = set()
        for t in sorted(doubtful):
            if run.fits_budget(refit_cost(run.options)):
                refit_doubtful(run, t, doubtful)
                refitted.add(t)
        unaffordable |= doubtful - refitted
        cmap = assemble(run)
        for t in sorted(refitted):
            run.confirmations[t] = confirm_one(run, cmap, t, doubtful)
        doubtful = {t for t in doubtful if not run.confirmations[t].confirmed}
    run.unverified = {t: run.confirmations[t].disagreement_rad for t in sorted(doubtful)}
    for t in run.unverified:
        spent = (f"; not re-fitted: the budget of {run.budget} operations was spent"
                 if t in unaffordable else "")
        run.warnings.append(unverified_warning(run.mesh.tbu_names[t], run.confirmations[t], spent))
    return assemble(run)


def law_confirms(run: Run, t: int, doubtful: set[int]) -> bool:
    """True when light, which disagreed with ``t`` on its fit's own path (its neighbours set
    through their other heaters: :func:`confirm_path`), agrees once ``t``'s measured crosstalk
    gives way to the design law; the law is then kept, with a warning. Otherwise the
    measured crosstalk is put back, and ``t`` is re-fitted or named as before.

    On the fit's own path only the neighbours' heat differs from the fit's, so what light
    disagrees with there is first the crosstalk correction: an aggressor on the victim's
    light path, driven past its fitted range while its crosstalk was measured, leaves its
    split and leaks into the victim (square:4x4 seed 9810: tbu:1.3.2's entry from
    tbu:2.3.1's heater came out 8x the truth, the passive offset 0.11 rad off; with the law,
    0.013 rad). A re-fit through the same path would only repeat the fit.
    """
    c, measured = run.confirmations[t], run.xrecords.get(t)
    if measured is None or c.independent_path or c.confirmed or not run.fits_budget(CONFIRM_PATHS * LEVELS):
        return False
    run.xrecords.pop(t)
    again = confirm_one(run, assemble(run), t, doubtful)
    if not again.confirmed:
        run.xrecords[t] = measured
        return False
    run.confirmations[t] = again
    seen = "no fringe" if not np.isfinite(c.disagreement_rad) else f"{c.disagreement_rad:.3f} rad"
    run.warnings.append(f"{run.mesh.tbu_names[t]}: crosstalk not confirmed by light (its neighbours' heat "
                        f"set through their other heaters: {seen} off with the measured crosstalk, "
                        f"{again.disagreement_rad:.3f} rad with the design law); the design law is used")
    run.save()
    return True


def leakier_fit(run: Run, t: int, c: Confirmation) -> bool:
    """True when ``t``'s one confirmation path crosses fewer TBUs in cross than its fit's path and
    is off by more than :data:`LEAKY_FIT_RAD`: the fit's path leaked (:func:`combine_paths`).
    """
    fit = run.fit_cross.get(t)
    return (fit is not None and c.independent_path and not c.path_offsets_rad
            and bool(np.isfinite(c.offset_rad)) and c.cross_hops < fit and abs(c.offset_rad) > LEAKY_FIT_RAD)


def compensate_drift(run: Run) -> tuple[CalibrationMap, set[int]]:
    """Stage 4a: when the references saw the chip drift, correct every TBU for it and confirm
    the corrected map by light again (:mod:`calibration.drift`); returns the map to judge and
    the TBUs corrected.

    Raises :class:`CalibrationError` (one line: how fast, what to do) when the chip drifts too
    fast for the map to stay right until the run ends (:func:`refuse_if_drifting`).
    """
    log = run.drift
    assert log is not None
    # A round now (the temperature up to the compensation) when the budget still has room for it
    # (a reading each, no meter glitch): SmartLight seed 9733 (session 38) reached the
    # confirmation 440 operations short of its budget, its first pass took 432 (one TBU asked
    # through a second path), and this round then refused the whole run. Without it, the
    # rounds so far judge the drift.
    if run.fits_budget(len(log.references) * REFERENCE_LEVELS):
        run.watch_drift(now=True)
    if not log.drifted():
        run.drift_quality = drift_summary(log, None, 0, run.mesh.tbu_names)
        return assemble(run), set()
    times = [run.confirmed_s[t] for t in run.confirmations if t in run.confirmed_s]
    pass_s = max(times) - min(times) if times else 0.0
    aim = bench_time_s(run.bench) + pass_s  # the end of the second confirmation
    offsets = {t: c.offset_rad for t, c in run.confirmations.items()}
    corrections, sigma = compensate(offsets, run.fitted_s, run.confirmed_s, log, aim)
    run.drift_quality = drift_summary(log, sigma, len(corrections), run.mesh.tbu_names, pass_s)
    refuse_if_drifting(run)
    for t, rad in corrections.items():
        rec = run.records[t]
        run.records[t] = replace(rec, delta=float(np.mod(rec.delta + rad, 2 * np.pi)))
    cmap = assemble(run)
    if corrections:
        run.confirmations = {t: confirm_one(run, cmap, t, set()) for t in sorted(run.records)}
    return cmap, set(corrections)


def drift_seen(run: Run) -> str:
    """The drift the references saw, for a line of text ("" when none was followed)."""
    q = run.drift_quality
    if not q:
        return ""
    kelvin = "" if q["drift_k_per_min"] is None else f", ~{q['drift_k_per_min']:.1f} K/min"
    return f"{q['drift_rad_per_min']:.3f} rad/min at its reference TBUs{kelvin}"


def refuse_if_drifting(run: Run) -> None:
    """Raise :class:`CalibrationError` when the chip drifts too fast for its map to stay right
    until the run ends (:func:`calibration.drift.move_after_confirm`).
    """
    move = run.drift_quality.get("drift_move_after_confirm_rad", 0.0)
    if move <= MAX_MOVE_AFTER_CONFIRM_RAD:
        return
    raise CalibrationRefusedError(
        f"calibration of {run.bench.chip_id} refused: the chip drifted {drift_seen(run)} (kelvin-equivalent "
        f"at {DESIGN_DRIFT_RAD_PER_K} rad/K) during the run, so fast that its TBUs would move up to "
        f"{move:.2f} rad while the map is confirmed (more than {MAX_MOVE_AFTER_CONFIRM_RAD} rad); stabilise "
        "its temperature (let the mount settle, check the TEC) and calibrate again"
    )


def refuse_if_moved(run: Run, doubtful: set[int]) -> None:
    """Raise :class:`CalibrationError` (one line, how far light moved) when more than
    :data:`REFUSE_DOUBTFUL_SHARE` of the map's TBUs disagree with light.
    """
    if len(doubtful) <= REFUSE_DOUBTFUL_SHARE * max(len(run.confirmations), 1):
        return
    offsets = np.array([c.offset_rad for c in run.confirmations.values()])
    offsets = offsets[np.isfinite(offsets)]
    rms = float(np.sqrt(np.mean(offsets**2))) if offsets.size else float("nan")
    worst = float(np.max(np.abs(offsets))) if offsets.size else float("nan")
    seen = f"; drift seen: {drift_seen(run)}" if drift_seen(run) else ""
    raise CalibrationRefusedError(
        f"calibration of {run.bench.chip_id} refused: light disagrees with {len(doubtful)} of "
        f"{len(run.confirmations)} TBUs of the finished map (phases moved by {rms:.3f} rad RMS, up to "
        f"{worst:.3f} rad, since they were fitted{seen}"
        "): the chip drifted during the run or is not what the map describes; stabilise its temperature "
        "and calibrate again"
    )


def assemble(run: Run) -> CalibrationMap:
    """The map of the run so far (failed and unverified TBUs recorded as such)."""
    failed = {**run.failed, **dict.fromkeys(run.unverified, "unverified")}
    # why each is unverified, from the confirmation that left it so (calibration.map.UNVERIFIED_REASONS)
    reasons = {t: unverified_reason(run.confirmations[t]) for t in run.unverified if t in run.confirmations}
    return build_map(run.mesh, run.bench.chip_id, run.records, run.options, quality=run_quality(run),
                     crosstalk=run.xrecords, failed=failed, disagreement=run.unverified,
                     unverified_reason=reasons, heater_faults=run.heater_faults)


def run_quality(run: Run) -> dict[str, Any]:
    """The chip-wide figures of a finished run (the map's ``quality``)."""
    records, xrecords, opts = run.records, run.xrecords, run.options

    def rms(values: list[float]) -> float:
        return float(np.sqrt(np.mean(np.square(values)))) if values else 0.0

    return {
        "resumed_operations": run.ops_before,
        "resume_check_operations": run.resume_check_ops,
        "operations": run.ops(),
        "operation_budget": run.budget,
        "duration_s": run.elapsed(),
        "fit_rms_residual": rms([r.rms_residual for r in records.values()]),
        "fit_rms_residual_rel": rms([r.rms_residual_rel for r in records.values()]),
        "points_per_sweep": [opts.points, opts.refine_points],
        "rechecks": run.rechecked,
        "rechecked_tbus": sum(r.stage == "recheck" for r in records.values()),
        "poor_fits": sum(r.rms_residual > opts.poor_fit_residual for r in records.values()),
        "failed_tbus": {run.mesh.tbu_names[t]: how for t, how in sorted(run.failed.items())},
        "heater_faults": {str(h): how for h, how in sorted(run.heater_faults.items())},
        "unverified_tbus": {run.mesh.tbu_names[t]: rad for t, rad in run.unverified.items()},
        **confirm_quality(run),
        **({"drift": dict(run.drift_quality)} if run.drift_quality else {}),
        "warnings": list(run.warnings),
        "crosstalk_operations": sum(r.readings for r in xrecords.values()),
        "crosstalk_victims": len(xrecords),
        "crosstalk_rms_residual": rms([r.rms_residual for r in xrecords.values()]) if xrecords else None,
    }


def confirm_quality(run: Run) -> dict[str, Any]:
    """Figures of the confirmation stage for the map's quality (empty before it ran)."""
    c = run.confirmations
    if not c:
        return {}
    ok = [x.disagreement_rad for x in c.values() if x.confirmed]
    return {
        "confirmed_tbus": len(ok),
        "confirmed_on_independent_path": sum(x.independent_path for x in c.values() if x.confirmed),
        "confirm_max_disagreement_rad": float(max(ok)) if ok else None,
        "confirm_tolerance_rad": CONFIRM_TOL_RAD,
        "confirm_refits": run.refitted,
    }


# ---------------------------------------------------------------------------------------
# The procedure
# ---------------------------------------------------------------------------------------
def calibrate(
    bench: Bench,
    options: Options | None = None,
    *,
    checkpoint: str | Path | None = None,
    progress: Progress | None = None,
    keep_sweeps: bool = False,
    on_tbu: Callable[[str, int], None] | None = None,
) -> Result:
    """Calibrate every heater of the bench's chip; returns the map and run figures.

    Args:
        bench: anything implementing :class:`calibration.bench.Bench`.
        options: sweep sizes, crosstalk law, wavelength.
        checkpoint: JSON file of the run's progress (:class:`CheckpointWriter`: its last
            state when this returns or raises, at most ``CHECKPOINT_EVERY_S`` of measuring
            behind while it runs); an existing one for this chip is resumed (finished TBUs
            are not measured again).
        progress: where progress lines go (None: stderr every 10 TBUs).
        keep_sweeps: keep the raw sweeps and fits (for plots).
        on_tbu: called with (stage, tbu) before each TBU is measured (tests, logging).

    Raises:
        CalibrationError: some TBU cannot be reached by light through calibrated TBUs.
        CalibrationRefusedError: light says the chip moved under the map (drift too fast to
            compensate, or light disagreeing with too much of the finished map); the
            checkpoint is removed, so the next run starts afresh.
    """
    options = options or Options()
    progress = progress or Progress()
    ckpt = Path(checkpoint) if checkpoint else None
    records, ops_before, dur_before = (load_checkpoint(ckpt, bench.chip_id, bench.mesh) if ckpt
                                       else ({}, 0, 0.0))
    xrecords = load_checkpoint_crosstalk(ckpt) if ckpt else {}
    failed = load_checkpoint_failed(ckpt) if ckpt else {}
    ops_start = bench.operations
    if records:  # light judges the checkpoint first, so the user reads one verdict, not two
        moved = resumed_move(bench, records, options)
        if moved is not None and moved[0] > RESUME_MOVED_RAD:
            progress.note(f"not resuming {ckpt}: light shows its TBUs moved {moved[0]:.3f} rad (median of "
                          f"{moved[1]}) since they were fitted, more than {RESUME_MOVED_RAD} rad: the chip's "
                          "temperature or conditions changed; starting afresh")
            records, xrecords, failed, ops_before, dur_before = {}, {}, {}, 0, 0.0
        else:
            progress.note(f"resuming from {ckpt}: {len(records)} TBUs fitted, {len(xrecords)} crosstalk "
                          f"victims measured, {ops_before} operations done (delete it to start over)")
    run = Run(bench, options, progress, ckpt, keep_sweeps, on_tbu, records, xrecords, ops_before, dur_before,
              failed, ops_start=ops_start, resume_check_ops=bench.operations - ops_start)
    try:
        result = finish_run(run)
    except CalibrationRefusedError as exc:
        if ckpt is None or not ckpt.exists():
            raise
        # Its fits are what light refused (taken while the chip moved): resumed at another
        # temperature they would be believed again. The next run starts afresh.
        ckpt.unlink()
        raise type(exc)(f"{exc} (from scratch: this run's checkpoint {ckpt} was removed)") from exc
    return result


def finish_run(run: Run) -> Result:
    """:func:`run_stages`, then the checkpoint's last state written however the run ends.

    Ctrl-C, SIGTERM, a refusal or an error leave the state of the last TBU finished (what a
    checkpoint written after every TBU held). A checkpoint that cannot be written then does
    not hide why the run stopped: the file keeps an earlier state, whole.
    """
    try:
        result = run_stages(run)
    except BaseException:
        with contextlib.suppress(OSError):
            run.flush()
        raise
    run.flush()
    return result


def run_stages(run: Run) -> Result:
    """Every stage of :func:`calibrate` on ``run``, in order; the run's result."""
    options = run.options
    electrical_stage(run)
    if options.drift_references > 0:
        run.drift = DriftLog()
    bootstrap(run)
    run.watch_drift(now=not (run.drift and run.drift.references))  # start now if not started
    refine(run)
    recheck(run)
    diagnose(run, final=False)
    refine_again(run)
    fit_warnings(run)
    crosstalk_stage(run)
    cmap = confirm_stage(run)
    return Result(cmap=cmap, records=dict(run.records), operations=run.ops(), duration_s=run.elapsed(),
                  sweeps=run.sweeps, crosstalk=dict(run.xrecords), confirmations=dict(run.confirmations))
