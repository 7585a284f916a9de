"""The calibration procedure: bootstrap every TBU's fringe through the Bench protocol only.

Before calibration every TBU sits at a random split (its passive phases are unknown), so
light only goes where we can predict it through TBUs already calibrated. The procedure:

1. **Bootstrap.** Repeatedly pick the uncalibrated TBU that can be probed best: light from
   a mesh port reaches one of its inputs through calibrated TBUs (set to bar/cross with
   their fitted phases), and one or both of its outputs reach mesh ports the same way.
   The first TBUs are those owning mesh ports at both ends. Every other calibrated TBU is
   parked in cross, which in a hexagonal mesh sends stray light straight out to the edge
   instead of round loops. Sweep the top heater (bottom at 0 mA), then the bottom heater,
   and fit both sweeps jointly (:func:`calibration.fit.fit_tbu`).
2. **Refine.** Once every TBU is known, the whole chip can be parked, so each TBU is swept
   again (in bootstrap order) in a clean surrounding (no uncalibrated TBU scattering light
   back into the measured outputs); this fit replaces the bootstrap fit.
2b. **Recheck.** Every fit records the TBUs its light crossed. A TBU is measured again when
   one of those changed materially after it was measured (a re-fit moved its split by more
   than ``recheck_tol_rad``), or once when its own fit is poor, through paths avoiding the
   suspects; passes repeat until nothing is due. A wrong upstream TBU can recombine both
   outputs of the TBU under test, which shifts its fringe without distorting it, so a clean
   residual alone does not prove a fit right.
3. **Crosstalk.** Each TBU (the victim) is held at quadrature through its fitted curve,
   where a shift of its differential phase changes its outputs to first order, while every
   heater of its neighbouring TBUs is driven in turn by whole turns of its fitted effect
   (so its own TBU keeps its split); a weighted least-squares fit of all the victim's
   readings gives the differential crosstalk ``K[top, j] - K[bot, j]`` with uncertainties
   (:func:`measure_crosstalk`, :func:`calibration.fit.fit_crosstalk`). The partner-arm
   fraction ``f`` (the fitted curves are ``(1 - f) s(I)``) is not separable from a heater's
   efficiency and stays the design value; so do entries of victims that cannot be probed
   or do not fit in the operation budget (a decaying law). See docs/calibration.md.

A checkpoint (JSON, written atomically) after every TBU lets an interrupted run resume
without redoing finished TBUs. Set-and-read operations are counted by the bench.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import scipy.sparse as sp

from calibration.bench import Bench
from calibration.evaluate import wrap
from calibration.fit import NoiseModel, Sweep, TBUFit, fit_crosstalk, fit_tbu, sweep_currents
from calibration.heater_map import invert_cubic
from calibration.map import CalibrationError, CalibrationMap, mesh_signature, now_iso, target_differential
from calibration.model import crosstalk_matrix, heater_positions, neighbour_heaters, self_phase
from calibration.paths import Probe, plan_probe, probe_rank
from photonics.physics import PhysicsDefaults
from photonics.topology import Mesh, atomic_write_text

CHECKPOINT_SCHEMA = "lumion.calibration-checkpoint"
CHECKPOINT_VERSION = 1
# Nominal heater, used only to choose the sweep range: R0 = 250 Ohm, tempco 0.02 /mA.
NOMINAL_R0_KOHM = 0.25
NOMINAL_GAMMA_PER_MA = 0.02


@dataclass(frozen=True)
class Options:
    """Knobs of :func:`calibrate`.

    Attributes:
        points: readings per heater sweep in the bootstrap pass.
        refine_points: readings per heater sweep in the refinement pass (0 skips it).
        sweep_phase_rad: nominal phase the sweep reaches (3 pi: over one full fringe for
            any heater within +-30 % of nominal).
        crosstalk_fraction: assumed crosstalk fraction f (design value 1 %) on the partner arm
            of the same TBU (never measurable from power readings) and, for the fallback law,
            on the nearest heater of a neighbouring TBU.
        crosstalk_decay_tbu: decay length (TBU lengths) of the fallback law between TBUs.
        crosstalk_cutoff_tbu: neighbours within this distance (TBU lengths) get a K entry.
        crosstalk_repeats: readings per aggressor heater and victim setting in the
            crosstalk measurement (0: do not measure, use the fallback law everywhere).
        crosstalk_baseline: readings per victim setting with no aggressor driven.
        crosstalk_drive_rad: how far an aggressor heater is driven (its fitted effect on its
            own TBU's differential phase); whole turns of 2 pi leave its TBU's split unchanged.
        max_operations: operation budget of the whole run; crosstalk victims that do not fit
            in it keep the fallback law.
        recheck_passes: at most this many passes re-measuring TBUs whose fit is suspect (see
            :func:`calibrate`, step 2b); 0 turns rechecks off.
        recheck_tol_rad: a re-fit that moves a TBU's differential phase by more than this
            (anywhere over its working range) counts as a material change.
        poor_fit_residual: a fit whose RMS normalised residual exceeds this is re-measured
            once through another light path.
        wavelength_nm: laser wavelength.
        loss: robust loss for the fits.
    """

    points: int = 16
    refine_points: int = 24
    sweep_phase_rad: float = 3 * np.pi
    crosstalk_fraction: float = 0.01
    crosstalk_decay_tbu: float = 0.1
    crosstalk_cutoff_tbu: float = 1.05
    crosstalk_repeats: int = 1
    crosstalk_baseline: int = 2
    crosstalk_drive_rad: float = 6 * np.pi
    max_operations: int | None = 10_000
    recheck_passes: int = 4
    recheck_tol_rad: float = 0.15
    poor_fit_residual: float = 4.0
    wavelength_nm: float = 1550.0
    loss: str = "soft_l1"


@dataclass
class TBURecord:
    """What is known of one TBU: its fitted differential phase and per-arm effective curves."""

    delta: float
    g2: list[float]
    g3: list[float]
    sigma_delta: float
    sigma_phase_2pi: list[float]
    rms_residual: float
    rms_residual_rel: float
    stage: str
    src: int
    outputs: list[int]
    base_ma: dict[str, float] = field(default_factory=dict)
    hops: list[int] = field(default_factory=list)
    seq: int = 0
    changed: int = 0

    @classmethod
    def from_fit(cls, fit: TBUFit, probe: Probe, stage: str,
                 base_ma: dict[str, float] | None = None, seq: int = 0) -> TBURecord:
        """Record of a fit made with ``probe``.

        ``base_ma``: non-zero currents of the TBU's crosstalk neighbours during the sweeps
        (their heat is inside the fitted ``delta``). ``seq``: ordinal of the measurement in
        the run; ``changed`` (set by the caller) is the ordinal at which the TBU's fit last
        changed materially, so measurements whose light crossed it earlier are suspect.
        """
        return cls(fit.delta, fit.rho2.tolist(), fit.rho3.tolist(), fit.sigma_delta,
                   fit.sigma_phase_2pi.tolist(), fit.rms_residual, fit.rms_residual_rel,
                   stage, probe.src, list(probe.outputs), dict(base_ma or {}),
                   sorted({h.tbu for h in probe.hops}), seq, seq)

    def effect(self, arm: int, current_ma: float) -> float:
        """Fitted effect (rad) of heater ``arm`` at ``current_ma`` on the TBU's differential."""
        return float(self.g2[arm] * current_ma**2 + self.g3[arm] * current_ma**3)

    def differs_from(self, other: TBURecord, tol_rad: float) -> bool:
        """True when the two fits set this TBU's split differently by more than ``tol_rad``.

        Compares the differential phase at every current up to the 2 pi point of each arm
        (delta included, wrapped), which is what decides where light goes.
        """
        for arm, sign in ((0, 1.0), (1, -1.0)):
            i2pi = float(invert_cubic(np.array(2 * np.pi), self.g2[arm], self.g3[arm]))
            i = np.linspace(0.0, i2pi, 9)
            a = self.delta + sign * self_phase(i, self.g2[arm], self.g3[arm])
            b = other.delta + sign * self_phase(i, other.g2[arm], other.g3[arm])
            if np.max(np.abs(wrap(a - b))) > tol_rad:
                return True
        return False


@dataclass
class CrosstalkRecord:
    """Measured differential crosstalk on one victim TBU.

    ``fraction[k]``: the victim's differential phase shift per rad of ``heaters[k]``'s fitted
    effect on its own TBU (dimensionless), ``sigma`` its 1-sigma uncertainty.
    """

    victim: int
    heaters: list[int]
    fraction: list[float]
    sigma: list[float]
    rms_residual: float
    readings: int


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


# ---------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------
def nominal_sweep_max_ma(phase_rad: float, defaults: PhysicsDefaults | None = None) -> float:
    """Current (mA) at which the nominal heater reaches ``phase_rad``."""
    d = defaults or PhysicsDefaults()
    eta = np.pi / d.heater_power_pi_mw
    rho2 = eta * NOMINAL_R0_KOHM
    return float(invert_cubic(np.array(phase_rad), rho2, rho2 * NOMINAL_GAMMA_PER_MA))


def tbu_currents(record: TBURecord, cross_fraction: float) -> tuple[float, float]:
    """(top, bottom) currents (mA) putting a calibrated TBU at ``cross_fraction``.

    Uses the effective (differential) curves, which already include the heater's heat on
    its partner arm, so no crosstalk correction is needed for a single TBU.
    """
    phase, arm = target_differential(np.array([cross_fraction]), np.array([record.delta]))
    a = int(arm[0])
    i = float(invert_cubic(phase, record.g2[a], record.g3[a])[0])
    return (i, 0.0) if a == 0 else (0.0, i)


def base_currents(n_heaters: int, records: dict[int, TBURecord], probe: Probe | None) -> np.ndarray:
    """Currents for a measurement (mA).

    Path TBUs in their states, other calibrated TBUs parked cross, uncalibrated TBUs (and
    the TBU under test) at 0 mA.
    """
    c = np.zeros(n_heaters)
    states = {h.tbu: h.state for h in probe.hops} if probe else {}
    for t, rec in records.items():
        if probe is not None and t == probe.tbu:
            continue
        frac = 0.0 if states.get(t) == "bar" else 1.0
        c[2 * t], c[2 * t + 1] = tbu_currents(rec, frac)
    return c


def measure_sweeps(bench: Bench, probe: Probe, base: np.ndarray, currents_ma: np.ndarray,
                   wavelength_nm: float) -> list[Sweep]:
    """Sweep the top then the bottom heater of ``probe.tbu``; one set-and-read per point."""
    bench.select_input(probe.src, wavelength_nm)
    sweeps = []
    for arm in (0, 1):
        powers = np.empty((len(currents_ma), len(probe.outputs)))
        for k, i in enumerate(currents_ma):
            c = base.copy()
            c[2 * probe.tbu + arm] = i
            bench.set_currents(c)
            powers[k] = 10 ** (np.asarray(bench.read_powers_dbm(list(probe.outputs))) / 10)
        sweeps.append(Sweep(arm, np.asarray(currents_ma, float), powers))
    return sweeps


def victim_currents(record: TBURecord, theta: float) -> tuple[float, float]:
    """(top, bottom) currents (mA) putting a calibrated TBU's differential phase at ``theta``."""
    need = float(np.mod(theta - record.delta, 2 * np.pi))
    if need <= np.pi:
        return float(invert_cubic(np.array(need), record.g2[0], record.g3[0])), 0.0
    return 0.0, float(invert_cubic(np.array(2 * np.pi - need), record.g2[1], record.g3[1]))


def aggressor_current(record: TBURecord, arm: int, now_ma: float, drive_rad: float,
                      max_current_ma: float) -> tuple[float, float]:
    """Current (mA) adding ``drive_rad`` to a heater's fitted effect, and the drive reached.

    With whole turns of 2 pi the aggressor's own TBU keeps its split, so light paths
    through it are undisturbed.
    """
    g_now = record.effect(arm, now_ma)
    i = min(float(invert_cubic(np.array(g_now + drive_rad), record.g2[arm], record.g3[arm])),
            max_current_ma)
    return i, record.effect(arm, i) - g_now


def crosstalk_readings(n_aggressors: int, options: Options) -> int:
    """Set-and-read operations to measure one victim with ``n_aggressors`` neighbours."""
    return 2 * (options.crosstalk_baseline + options.crosstalk_repeats * n_aggressors)


def measure_crosstalk(bench: Bench, probe: Probe, base: np.ndarray, records: dict[int, TBURecord],
                      aggressors: list[int], options: Options, noise: NoiseModel) -> CrosstalkRecord:
    """Hold ``probe.tbu`` at quadrature (pi/2, then 3 pi/2) and drive each aggressor heater.

    At quadrature a shift of the victim's differential phase by ``x`` changes its outputs by
    ``-+ c sin(x)``: first order, while every TBU on the light paths sits at bar or cross,
    where a small shift changes the transmission only to second order. Each setting starts and
    ends with baseline readings (no aggressor driven); each aggressor heater is then driven by
    ``options.crosstalk_drive_rad`` on top of its base current (whole turns: its own TBU keeps
    its split). All readings of a victim are fitted together (:func:`calibration.fit.fit_crosstalk`).
    """
    victim = probe.tbu
    bench.select_input(probe.src, options.wavelength_nm)
    powers, setting, drives = [], [], []
    n_b = options.crosstalk_baseline
    for q, theta in enumerate((np.pi / 2, 3 * np.pi / 2)):
        cv = base.copy()
        cv[2 * victim], cv[2 * victim + 1] = victim_currents(records[victim], theta)
        schedule = ([-1] * (n_b - n_b // 2)
                    + [k for k in range(len(aggressors)) for _ in range(options.crosstalk_repeats)]
                    + [-1] * (n_b // 2))
        for k in schedule:
            c = cv.copy()
            x = np.zeros(len(aggressors))
            if k >= 0:
                j = aggressors[k]
                c[j], x[k] = aggressor_current(records[j // 2], j % 2, c[j], options.crosstalk_drive_rad,
                                               bench.max_current_ma)
            bench.set_currents(c)
            powers.append(10 ** (np.asarray(bench.read_powers_dbm(list(probe.outputs))) / 10))
            setting.append(q)
            drives.append(x)
    fit = fit_crosstalk(np.array(powers), np.array(probe.signs), np.array(setting), np.array(drives),
                        noise, loss=options.loss)
    return CrosstalkRecord(victim, list(aggressors), fit.fraction.tolist(), fit.sigma.tolist(),
                           fit.rms_residual, len(powers))


def crosstalk_map(mesh: Mesh, eta: np.ndarray, options: Options,
                  crosstalk: dict[int, CrosstalkRecord] | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """K (rad/mW): the fallback law, with measured differential entries put in.

    Power readings show only ``K[top_t, j] - K[bot_t, j]``; a measured entry keeps the
    law's common part ``(K[top_t, j] + K[bot_t, j]) / 2`` (invisible to every split) and
    takes the measured difference. A measured fraction ``F`` (victim shift per rad of the
    aggressor's fitted effect ``g = (1 - f) s``) is ``F (1 - f) eta`` in rad/mW.

    Returns ``(K, fitted)``: ``fitted`` is an (n, 4) array of [victim TBU, heater, K
    difference (rad/mW), its sigma].
    """
    f = options.crosstalk_fraction
    law = crosstalk_matrix(heater_positions(mesh.tbu_xy), eta, nearest_fraction=f,
                           cutoff=options.crosstalk_cutoff_tbu, partner_fraction=f,
                           decay_length=options.crosstalk_decay_tbu).tolil()
    fitted = []
    for t, rec in sorted((crosstalk or {}).items()):
        for j, frac, sig in zip(rec.heaters, rec.fraction, rec.sigma, strict=True):
            scale = (1 - f) * eta[j]
            diff, common = frac * scale, (law[2 * t, j] + law[2 * t + 1, j]) / 2
            law[2 * t, j], law[2 * t + 1, j] = common + diff / 2, common - diff / 2
            fitted.append([t, j, diff, sig * scale])
    return law.tocsr(), np.array(fitted, float).reshape(-1, 4)


def build_map(mesh: Mesh, chip_id: str, records: dict[int, TBURecord], options: Options,
              defaults: PhysicsDefaults | None = None, quality: dict[str, Any] | None = None,
              crosstalk: dict[int, CrosstalkRecord] | None = None) -> CalibrationMap:
    """The calibration map from per-TBU records and crosstalk (measured, else the law).

    The fitted curves are differential: ``g = s - (K_partner / eta) s = (1 - f) s``; the map
    stores the self-phase ``s = g / (1 - f)`` and K, so the inversion can compensate heat
    from every neighbour, not only the partner arm. Each TBU's fitted ``delta`` includes
    the heat of its neighbours during its sweeps (recorded in ``base_ma``); that is
    removed with K, so the map's ``delta`` is the passive differential phase.
    """
    d = defaults or PhysicsDefaults()
    missing = sorted(set(range(mesh.n_tbus)) - set(records))
    if missing:
        raise CalibrationError(
            f"{len(missing)} TBUs are not calibrated yet (first: {mesh.tbu_names[missing[0]]})"
        )
    eta = np.full(mesh.n_heaters, np.pi / d.heater_power_pi_mw)
    K, fitted = crosstalk_map(mesh, eta, options, crosstalk)
    partner = np.arange(mesh.n_heaters) ^ 1
    # Fraction of each heater's own phase landing on its partner arm (K is rad/mW, heat = s/eta).
    f_partner = np.asarray(K[partner, np.arange(mesh.n_heaters)]).ravel() / eta
    g2 = np.array([records[t].g2[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    g3 = np.array([records[t].g3[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    scale = 1.0 / (1.0 - f_partner)
    rho2, rho3 = g2 * scale, g3 * scale
    delta = np.array([records[t].delta for t in range(mesh.n_tbus)])
    diff = (K[0::2] - K[1::2]).tocsr()  # (n_tbus, n_heaters): heat -> differential phase
    for t in range(mesh.n_tbus):
        base = records[t].base_ma
        if base:
            heat = np.zeros(mesh.n_heaters)
            for key, i in base.items():
                j = int(key)
                if j // 2 != t:
                    heat[j] = float(rho2[j] * i**2 + rho3[j] * i**3) / eta[j]
            delta[t] = np.mod(delta[t] - float(diff[t].dot(heat)[0]), 2 * np.pi)
    q = dict(quality or {})
    q["sigma_delta_rad"] = np.array([records[t].sigma_delta for t in range(mesh.n_tbus)])
    q["sigma_phase_2pi_rad"] = np.array([records[t].sigma_phase_2pi[k] for t in range(mesh.n_tbus)
                                         for k in (0, 1)])
    q["rms_residual"] = np.repeat([records[t].rms_residual for t in range(mesh.n_tbus)], 2)
    n_diff = sum(len(h) for h in neighbour_heaters(heater_positions(mesh.tbu_xy),
                                                   options.crosstalk_cutoff_tbu))
    q["crosstalk_entries_fitted"] = 2 * len(fitted)  # two arm entries per measured difference
    q["crosstalk_entries_assumed"] = int(K.nnz) - 2 * len(fitted)
    q["crosstalk_differences_fitted"] = len(fitted)
    q["crosstalk_differences_total"] = n_diff
    q["crosstalk_fitted"] = [[int(t), int(j), float(v), float(s)] for t, j, v, s in fitted]
    if len(fitted):
        rel = fitted[:, 3] / np.maximum(np.abs(fitted[:, 2]), 1e-12)
        q["crosstalk_median_rel_sigma"] = float(np.median(rel))
    return CalibrationMap(
        chip_id=chip_id, mesh=mesh_signature(mesh), delta=delta,
        rho2=rho2, rho3=rho3, eta=eta, crosstalk=K.tocsr(), created=now_iso(),
        tbu_names=mesh.tbu_names, quality=q,
        nearest_fraction=options.crosstalk_fraction, cutoff_tbu=options.crosstalk_cutoff_tbu,
    )


# ---------------------------------------------------------------------------------------
# Checkpoint
# ---------------------------------------------------------------------------------------
def save_checkpoint(path: Path, chip_id: str, mesh: Mesh, records: dict[int, TBURecord],
                    operations: int, duration_s: float,
                    crosstalk: dict[int, CrosstalkRecord] | None = None) -> None:
    """Write the checkpoint atomically."""
    data = {"schema": CHECKPOINT_SCHEMA, "version": CHECKPOINT_VERSION, "chip_id": chip_id,
            "mesh": mesh_signature(mesh), "operations": operations, "duration_s": duration_s,
            "tbus": {str(t): asdict(r) for t, r in sorted(records.items())},
            "crosstalk": {str(t): asdict(r) for t, r in sorted((crosstalk or {}).items())}}
    atomic_write_text(path, json.dumps(data, indent=1))


def load_checkpoint_crosstalk(path: Path) -> dict[int, CrosstalkRecord]:
    """Crosstalk victims already measured in a checkpoint (call after :func:`load_checkpoint`)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {int(t): CrosstalkRecord(**r) for t, r in data.get("crosstalk", {}).items()}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"checkpoint {path} is corrupt ({exc}); delete it to start over") from exc


def load_checkpoint(path: Path, chip_id: str, mesh: Mesh) -> tuple[dict[int, TBURecord], int, float]:
    """Records, operations and duration of an earlier run on this chip (empty if no file)."""
    if not path.exists():
        return {}, 0, 0.0
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != CHECKPOINT_SCHEMA or data.get("version") != CHECKPOINT_VERSION:
            raise CalibrationError(f"{path} is not a version-{CHECKPOINT_VERSION} calibration checkpoint")
        records = {int(t): TBURecord(**r) for t, r in data["tbus"].items()}
        ops, dur = int(data["operations"]), float(data["duration_s"])
        chip, sig = data["chip_id"], data["mesh"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"checkpoint {path} is corrupt ({exc}); delete it to start over") from exc
    if chip != chip_id or sig != mesh_signature(mesh):
        raise CalibrationError(f"checkpoint {path} belongs to chip {chip!r}, not {chip_id!r}; "
                               "delete it or give another --checkpoint")
    if any(not 0 <= t < mesh.n_tbus for t in records):
        raise CalibrationError(f"checkpoint {path} names TBUs outside this mesh")
    return records, ops, dur


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
        checkpoint: JSON file updated after every TBU; an existing one for this chip is
            resumed (finished TBUs are not measured again).
        progress: where progress lines go (None: stderr every 10 TBUs).
        keep_sweeps: keep the raw sweeps and fits (for plots).
        on_tbu: called with (stage, tbu) before each TBU is measured (tests, logging).

    Raises:
        CalibrationError: some TBU cannot be reached by light through calibrated TBUs.
    """
    options = options or Options()
    progress = progress or Progress()
    mesh = bench.mesh
    peer = mesh.peer()
    ckpt = Path(checkpoint) if checkpoint else None
    records, ops_before, dur_before = (load_checkpoint(ckpt, bench.chip_id, mesh) if ckpt
                                       else ({}, 0, 0.0))
    xrecords = load_checkpoint_crosstalk(ckpt) if ckpt else {}
    if records:
        progress.note(f"resuming from {ckpt}: {len(records)} TBUs fitted, {len(xrecords)} crosstalk "
                      f"victims measured, {ops_before} operations done (delete it to start over)")
    neighbours = neighbour_heaters(heater_positions(mesh.tbu_xy), options.crosstalk_cutoff_tbu)
    t0 = time.monotonic()
    ops0 = bench.operations
    noise = NoiseModel()
    sweeps_kept: dict[int, tuple[Probe, list[Sweep], TBUFit]] = {}

    def ops() -> int:
        return ops_before + bench.operations - ops0

    def elapsed() -> float:
        return dur_before + time.monotonic() - t0

    seq = max((r.seq for r in records.values()), default=0)

    def run_one(probe: Probe, stage: str, n_points: int, prior: TBURecord | None,
                keep_better: bool = False) -> None:
        """Measure and fit one TBU; with ``keep_better`` a worse-fitting result keeps ``prior``."""
        nonlocal seq
        if on_tbu:
            on_tbu(stage, probe.tbu)
        currents = sweep_currents(nominal_sweep_max_ma(options.sweep_phase_rad), n_points)
        base = base_currents(mesh.n_heaters, records, probe)
        sweeps = measure_sweeps(bench, probe, base, currents, options.wavelength_nm)
        pri = None if prior is None else (prior.delta, np.array(prior.g2), np.array(prior.g3))
        fit = fit_tbu(sweeps, np.array(probe.signs), noise, loss=options.loss, prior=pri)
        hot = {str(j): float(base[j]) for j in neighbours[probe.tbu] if base[j] > 0}
        seq += 1
        rec = TBURecord.from_fit(fit, probe, stage, hot, seq)
        if prior is not None and not rec.differs_from(prior, options.recheck_tol_rad):
            rec.changed = prior.changed
        if keep_better and prior is not None and rec.rms_residual >= prior.rms_residual:
            rec = replace(prior, stage=stage)
        records[probe.tbu] = rec
        if keep_sweeps:
            sweeps_kept[probe.tbu] = (probe, sweeps, fit)
        if ckpt:
            save_checkpoint(ckpt, bench.chip_id, mesh, records, ops(), elapsed(), xrecords)

    # 1. bootstrap: grow the calibrated set one TBU at a time.
    while len(records) < mesh.n_tbus:
        allowed = set(records)
        probes = [p for t in range(mesh.n_tbus) if t not in records
                  if (p := plan_probe(mesh, t, allowed, peer, passable=True)) is not None]
        if not probes:
            left = [mesh.tbu_names[t] for t in range(mesh.n_tbus) if t not in records]
            raise CalibrationError(
                f"no light path reaches {len(left)} TBUs (e.g. {left[0]}) through calibrated TBUs; "
                "the mesh needs TBUs with mesh ports at both ends to start from"
            )
        best = min(probes, key=lambda p: probe_rank(p, allowed))
        run_one(best, "bootstrap", options.points, None)
        progress.update("bootstrap", len(records), mesh.n_tbus, ops(), t0)

    # 2. refine: every TBU again, in a fully parked chip.
    if options.refine_points > 0:
        # In bootstrap order: a TBU's shortest path mostly crosses TBUs bootstrapped before it,
        # which are then already refined (index order left 2-3x more for the rechecks).
        todo = sorted((t for t in range(mesh.n_tbus) if records[t].stage == "bootstrap"),
                      key=lambda t: records[t].seq)
        allowed = set(range(mesh.n_tbus))
        for n, t in enumerate(todo, 1):
            probe = plan_probe(mesh, t, allowed - {t}, peer)
            if probe is None:  # cannot happen once bootstrapped; keep the bootstrap fit
                continue
            run_one(probe, "refine", options.refine_points, records[t])
            progress.update("refine", n, len(todo), ops(), t0)

    # 2b. recheck: a fit is only as good as the TBUs its light crossed. Re-measure TBUs whose
    # light crossed a TBU whose fit changed materially afterwards, and poor fits (once),
    # through paths avoiding every suspect TBU where possible, until nothing is due.
    def upstream_changed(t: int) -> bool:
        return any(records[h].changed > records[t].seq for h in records[t].hops)

    rechecked = 0
    if options.refine_points > 0:
        allowed = set(range(mesh.n_tbus))
        for _ in range(options.recheck_passes):
            poor = {t for t, r in records.items() if r.rms_residual > options.poor_fit_residual}
            due = [t for t in sorted(records)
                   if upstream_changed(t) or (t in poor and records[t].stage == "refine")]
            if not due:
                break
            suspects = poor | set(due)
            # Worst fit first: under budget pressure the rechecks that matter most are done.
            for n, t in enumerate(sorted(due, key=lambda t: -records[t].rms_residual), 1):
                if options.max_operations is not None and \
                        ops() + 2 * options.refine_points > options.max_operations:
                    break
                probe = (plan_probe(mesh, t, allowed - suspects, peer)
                         or plan_probe(mesh, t, allowed - {t}, peer))
                if probe is None:
                    continue
                run_one(probe, "recheck", options.refine_points, records[t],
                        keep_better=not upstream_changed(t))
                rechecked += 1
                progress.update("recheck", n, len(due), ops(), t0)

    # 3. crosstalk: each TBU at quadrature while its neighbours' heaters are driven in turn.
    if options.crosstalk_repeats > 0:
        allowed = set(range(mesh.n_tbus))
        todo = [t for t in range(mesh.n_tbus) if t not in xrecords and neighbours[t]]
        for n, t in enumerate(todo, 1):
            cost = crosstalk_readings(len(neighbours[t]), options)
            if options.max_operations is not None and ops() + cost > options.max_operations:
                break  # over budget: the remaining victims keep the fallback law
            probe = plan_probe(mesh, t, allowed - {t}, peer)
            if probe is None:
                continue
            if on_tbu:
                on_tbu("crosstalk", t)
            base = base_currents(mesh.n_heaters, records, probe)
            xrecords[t] = measure_crosstalk(bench, probe, base, records, neighbours[t], options, noise)
            if ckpt:
                save_checkpoint(ckpt, bench.chip_id, mesh, records, ops(), elapsed(), xrecords)
            progress.update("crosstalk", n, len(todo), ops(), t0)

    quality = {
        "resumed_operations": ops_before,
        "operations": ops(),
        "duration_s": elapsed(),
        "fit_rms_residual": float(np.sqrt(np.mean([r.rms_residual**2 for r in records.values()]))),
        "fit_rms_residual_rel": float(np.sqrt(np.mean([r.rms_residual_rel**2 for r in records.values()]))),
        "points_per_sweep": [options.points, options.refine_points],
        "rechecks": rechecked,
        "rechecked_tbus": sum(r.stage == "recheck" for r in records.values()),
        "poor_fits": sum(r.rms_residual > options.poor_fit_residual for r in records.values()),
        "crosstalk_operations": sum(r.readings for r in xrecords.values()),
        "crosstalk_victims": len(xrecords),
        "crosstalk_rms_residual": (float(np.sqrt(np.mean([r.rms_residual**2 for r in xrecords.values()])))
                                   if xrecords else None),
    }
    cmap = build_map(mesh, bench.chip_id, records, options, quality=quality, crosstalk=xrecords)
    return Result(cmap=cmap, records=dict(records), operations=ops(), duration_s=elapsed(),
                  sweeps=sweeps_kept, crosstalk=dict(xrecords))
