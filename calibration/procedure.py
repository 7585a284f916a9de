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
   again in a clean surrounding (no uncalibrated TBU scattering light back into the
   measured outputs); this fit replaces the bootstrap fit.
3. **Crosstalk.** Power readings show only each TBU's differential phase, where a heater's
   heat on its partner arm cancels part of its own phase: the fitted curves are
   ``(1 - f) s(I)`` with ``f`` the nearest-heater crosstalk fraction. ``f`` (and with it K,
   following the 1/d^2 law of heat spreading) is taken from the design value unless a
   measurement is given; see docs/calibration.md.

A checkpoint (JSON, written atomically) after every TBU lets an interrupted run resume
without redoing finished TBUs. Set-and-read operations are counted by the bench.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from calibration.bench import Bench
from calibration.fit import NoiseModel, Sweep, TBUFit, fit_tbu, sweep_currents
from calibration.heater_map import invert_cubic
from calibration.map import CalibrationError, CalibrationMap, mesh_signature, now_iso, target_differential
from calibration.model import crosstalk_matrix, heater_positions
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
        crosstalk_fraction: nearest-heater crosstalk fraction f (design value 1 %).
        crosstalk_cutoff_tbu: neighbours within this distance (TBU lengths) get a K entry.
        wavelength_nm: laser wavelength.
        loss: robust loss for the fits.
    """

    points: int = 16
    refine_points: int = 24
    sweep_phase_rad: float = 3 * np.pi
    crosstalk_fraction: float = 0.01
    crosstalk_cutoff_tbu: float = 1.05
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

    @classmethod
    def from_fit(cls, fit: TBUFit, probe: Probe, stage: str) -> TBURecord:
        """Record of a fit made with ``probe``."""
        return cls(fit.delta, fit.rho2.tolist(), fit.rho3.tolist(), fit.sigma_delta,
                   fit.sigma_phase_2pi.tolist(), fit.rms_residual, fit.rms_residual_rel,
                   stage, probe.src, list(probe.outputs))


@dataclass
class Progress:
    """Minimal stderr progress: a line every ``every`` TBUs and at the end of each stage."""

    stream: TextIO | None = field(default_factory=lambda: sys.stderr)
    every: int = 10

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


def build_map(mesh: Mesh, chip_id: str, records: dict[int, TBURecord], options: Options,
              defaults: PhysicsDefaults | None = None, quality: dict[str, Any] | None = None
              ) -> CalibrationMap:
    """The calibration map from per-TBU records and the crosstalk law.

    The fitted curves are differential: ``g = s - (K_partner / eta) s = (1 - f) s``; the map
    stores the self-phase ``s = g / (1 - f)`` and K, so the inversion can compensate heat
    from every neighbour, not only the partner arm.
    """
    d = defaults or PhysicsDefaults()
    missing = sorted(set(range(mesh.n_tbus)) - set(records))
    if missing:
        raise CalibrationError(
            f"{len(missing)} TBUs are not calibrated yet (first: {mesh.tbu_names[missing[0]]})"
        )
    eta = np.full(mesh.n_heaters, np.pi / d.heater_power_pi_mw)
    K = crosstalk_matrix(heater_positions(mesh.tbu_xy), eta, nearest_fraction=options.crosstalk_fraction,
                         cutoff=options.crosstalk_cutoff_tbu)
    partner = np.arange(mesh.n_heaters) ^ 1
    # Fraction of each heater's own phase landing on its partner arm (K is rad/mW, heat = s/eta).
    f_partner = np.asarray(K[partner, np.arange(mesh.n_heaters)]).ravel() / eta
    g2 = np.array([records[t].g2[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    g3 = np.array([records[t].g3[k] for t in range(mesh.n_tbus) for k in (0, 1)])
    scale = 1.0 / (1.0 - f_partner)
    q = dict(quality or {})
    q["sigma_delta_rad"] = np.array([records[t].sigma_delta for t in range(mesh.n_tbus)])
    q["sigma_phase_2pi_rad"] = np.array([records[t].sigma_phase_2pi[k] for t in range(mesh.n_tbus)
                                         for k in (0, 1)])
    q["rms_residual"] = np.repeat([records[t].rms_residual for t in range(mesh.n_tbus)], 2)
    return CalibrationMap(
        chip_id=chip_id, mesh=mesh_signature(mesh),
        delta=np.array([records[t].delta for t in range(mesh.n_tbus)]),
        rho2=g2 * scale, rho3=g3 * scale, eta=eta, crosstalk=K.tocsr(), created=now_iso(),
        tbu_names=mesh.tbu_names, quality=q,
        nearest_fraction=options.crosstalk_fraction, cutoff_tbu=options.crosstalk_cutoff_tbu,
    )


# ---------------------------------------------------------------------------------------
# Checkpoint
# ---------------------------------------------------------------------------------------
def save_checkpoint(path: Path, chip_id: str, mesh: Mesh, records: dict[int, TBURecord],
                    operations: int, duration_s: float) -> None:
    """Write the checkpoint atomically."""
    data = {"schema": CHECKPOINT_SCHEMA, "version": CHECKPOINT_VERSION, "chip_id": chip_id,
            "mesh": mesh_signature(mesh), "operations": operations, "duration_s": duration_s,
            "tbus": {str(t): asdict(r) for t, r in sorted(records.items())}}
    atomic_write_text(path, json.dumps(data, indent=1))


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
    t0 = time.monotonic()
    ops0 = bench.operations
    noise = NoiseModel()
    sweeps_kept: dict[int, tuple[Probe, list[Sweep], TBUFit]] = {}

    def ops() -> int:
        return ops_before + bench.operations - ops0

    def elapsed() -> float:
        return dur_before + time.monotonic() - t0

    def run_one(probe: Probe, stage: str, n_points: int, prior: TBURecord | None) -> None:
        if on_tbu:
            on_tbu(stage, probe.tbu)
        currents = sweep_currents(nominal_sweep_max_ma(options.sweep_phase_rad), n_points)
        base = base_currents(mesh.n_heaters, records, probe)
        sweeps = measure_sweeps(bench, probe, base, currents, options.wavelength_nm)
        pri = None if prior is None else (prior.delta, np.array(prior.g2), np.array(prior.g3))
        fit = fit_tbu(sweeps, np.array(probe.signs), noise, loss=options.loss, prior=pri)
        records[probe.tbu] = TBURecord.from_fit(fit, probe, stage)
        if keep_sweeps:
            sweeps_kept[probe.tbu] = (probe, sweeps, fit)
        if ckpt:
            save_checkpoint(ckpt, bench.chip_id, mesh, records, ops(), elapsed())

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
        todo = [t for t in range(mesh.n_tbus) if records[t].stage != "refine"]
        allowed = set(range(mesh.n_tbus))
        for n, t in enumerate(todo, 1):
            probe = plan_probe(mesh, t, allowed - {t}, peer)
            if probe is None:  # cannot happen once bootstrapped; keep the bootstrap fit
                continue
            run_one(probe, "refine", options.refine_points, records[t])
            progress.update("refine", n, len(todo), ops(), t0)

    quality = {
        "operations": ops(),
        "duration_s": elapsed(),
        "fit_rms_residual": float(np.sqrt(np.mean([r.rms_residual**2 for r in records.values()]))),
        "fit_rms_residual_rel": float(np.sqrt(np.mean([r.rms_residual_rel**2 for r in records.values()]))),
        "points_per_sweep": [options.points, options.refine_points],
    }
    cmap = build_map(mesh, bench.chip_id, records, options, quality=quality)
    return Result(cmap=cmap, records=dict(records), operations=ops(), duration_s=elapsed(),
                  sweeps=sweeps_kept)
