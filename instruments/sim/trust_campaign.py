"""Calibrate -> route -> program on seeded simulated chips under stress: is anything wrong silent?

One chip per (mode, seed): the realistic SmartLight-class chip on a frozen wall clock (the
bench's own operations and waits move time, so a seed repeats exactly), a stress applied,
``calibration.procedure.calibrate`` run through the Bench protocol only, and the map judged
against the hidden truth (issue 26, docs/calibration.md "Trust campaign"):

* **injected**: TBUs broken on purpose (``open_heater``/``shorted_heater``: one heater of the
  TBU, named correctly only as "open-heater"/"shorted-heater", from the electrical
  read-back); **named**: those the map records failed in the
  injected state; **wrongly named**: healthy TBUs the map records failed or unverified,
  except **unreachable** ones: healthy TBUs no light path can cross once the injected dead
  TBUs block it (both TBUs on one of its sides dead, as two adjacent dead TBUs do to a third
  beside them): nothing can calibrate or route through them, so naming them is right;
  **healthy named broken**: the wrongly named ones recorded dead or stuck, not unverified
  (a false positive: the user writes off healthy hardware; unverified only says light could
  not confirm the fit);
* **silent**: TBUs the map neither names nor gets right: an injected one it does not name,
  or a healthy one more than :data:`OFF_RAD` off (offset error, or a heater's setpoint RMS
  error over its working range), against the truth at the end of the run (drift included).
  Must be 0 in every mode;
* per-heater self-phase RMS error of the named-healthy heaters, operations;
* **routes**: :data:`ROUTES` port pairs routed with the map (``failed_tbus()`` avoided),
  programmed through it and measured: within tolerance when the measured transmission is no
  more than :data:`ROUTE_TOL_DB` below the planned one; **routes impossible**: pairs the
  failed TBUs cut apart (no route, refused by routing); **unprogrammable**: planned routes
  the map refused to set (its reason kept per chip), counted as planned and not within.

A run the procedure refuses (``CalibrationError``: e.g. light disagreeing with too much of
the map) is reported as refused: it names the problem, so it is not silent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from calibration.evaluate import phase_errors
from calibration.map import CalibrationError, CalibrationMap
from calibration.procedure import Options, Progress, calibrate
from calibration.verify import ROUTE_TOL_DB as VERIFY_ROUTE_TOL_DB
from calibration.verify import measure_route
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.errors import LumionError
from photonics.topology import Mesh, smartlight

# A TBU further off than this (rad) sends >= 0.25 % of its light the wrong way (-26 dB): the
# issue's line between a calibration that is right and one that must name the TBU.
OFF_RAD = 0.1
ROUTES = 8  # port pairs routed and measured per chip
# Planned transmission uses the nominal TBU loss; the chip's own losses scatter by 0.03 dB a
# TBU, so a route through 10-15 TBUs lands within ~0.5 dB. 3 dB apart is a route that leaks:
# photonics.tolerances.ROUTE_TOL_DB, the tolerance lumion program and lumion demo judge by.
ROUTE_TOL_DB = VERIFY_ROUTE_TOL_DB
DRIFT_K_PER_MIN = 1.0
SPREAD_FACTOR = 2.0
MODES = ("default", "dead_interior", "dead_port", "dead_adjacent", "stuck_bar", "stuck_cross",
         "crosstalk_3pct", "spread_2x", "drift_1k_per_min", "open_heater", "shorted_heater")
# Modes breaking one heater (its channel drawn on a random TBU and arm): the map must name
# the TBU with the heater's fault, found by the electrical read-back.
HEATER_MODES = {"open_heater": "open-heater", "shorted_heater": "shorted-heater"}


@dataclass
class ChipOutcome:
    """One chip's figures (see the module docstring)."""

    mode: str
    seed: int
    injected: dict[str, str]
    named: int
    wrongly_named: list[str]
    silent: list[str]
    unverified: dict[str, float]
    heater_rms_rad: list[float] = field(repr=False)
    operations: int = 0
    routes: int = 0
    routes_within: int = 0
    refused: str | None = None
    named_unreachable: list[str] = field(default_factory=list)
    routes_impossible: int = 0
    route_refusals: list[str] = field(default_factory=list)


def unreachable_tbus(mesh: Mesh, injected: dict[int, str]) -> set[int]:
    """Healthy TBUs no light path can cross with the injected dead TBUs blocking (truth)."""
    from calibration.paths import plan_probe

    dead = {t for t, how in injected.items() if how == "dead"}
    if not dead:
        return set()
    peer = mesh.peer()
    everyone = set(range(mesh.n_tbus)) - dead
    return {t for t in everyone if plan_probe(mesh, t, everyone - {t}, peer, banned=dead) is None}


def port_tbus(mesh: Mesh) -> set[int]:
    """TBUs owning a mesh port."""
    return {int(g) // 4 for g in mesh.port_tbu_ports}


def neighbours(mesh: Mesh, t: int) -> set[int]:
    """TBUs linked directly to ``t``."""
    peer = mesh.peer()
    return {int(peer[4 * t + k]) // 4 for k in range(4) if peer[4 * t + k] >= 0} - {t}


def faults_for(mode: str, mesh: Mesh, rng: np.random.Generator) -> dict[int, str]:
    """The TBUs a mode breaks (index -> "dead" | "bar" | "cross" | a heater fault), drawn from ``rng``."""
    edge = port_tbus(mesh)
    inner = sorted(set(range(mesh.n_tbus)) - edge)
    pick = lambda pool: int(rng.choice(sorted(pool)))  # noqa: E731 - one-line draw
    if mode == "dead_interior":
        return {pick(inner): "dead"}
    if mode == "dead_port":
        return {pick(edge): "dead"}
    if mode == "dead_adjacent":
        a = pick(inner)
        return {a: "dead", pick(neighbours(mesh, a)): "dead"}
    if mode in ("stuck_bar", "stuck_cross"):
        return {pick(range(mesh.n_tbus)): mode.split("_")[1]}
    if mode in HEATER_MODES:
        return {pick(range(mesh.n_tbus)): HEATER_MODES[mode]}
    return {}


def widen_spread(chip: Chip, factor: float) -> None:
    """Scale every fabrication deviation of ``chip``'s truth about its mean by ``factor``:
    coupler ratios, losses, arm imbalance, heater efficiency, resistance and tempco (the
    heat each neighbour feels follows the new efficiencies).
    """
    t = chip.truth

    def wider(x: np.ndarray) -> np.ndarray:
        return np.mean(x) + factor * (x - np.mean(x))

    p = replace(t.params, kappa1=np.clip(wider(t.params.kappa1), 0.01, 0.99),
                kappa2=np.clip(wider(t.params.kappa2), 0.01, 0.99),
                loss_db=np.clip(wider(t.params.loss_db), 0, None),
                arm_imbalance_db=np.abs(wider(t.params.arm_imbalance_db)))
    h = t.heaters
    eta, r0, gamma = wider(h.eta), wider(t.r0_kohm), wider(t.gamma_per_ma)
    K = (sp.csr_matrix(h.crosstalk) @ sp.diags(eta / h.eta)).tocsr()
    heaters = replace(h, eta=eta, rho2=eta * r0, rho3=eta * r0 * gamma, crosstalk=K)
    truth = replace(t, params=p, heaters=heaters, r0_kohm=r0, gamma_per_ma=gamma)
    chip.truth = chip._truth = truth  # the campaign's own chip, before any reading
    chip._params = None


def make_chip(mode: str, seed: int, mesh: Mesh | None = None) -> tuple[Chip, dict[int, str]]:
    """The stressed chip of ``mode`` and seed, and the TBUs broken on purpose."""
    mesh = mesh or smartlight()
    rng = np.random.default_rng([seed, MODES.index(mode)])
    injected = faults_for(mode, mesh, rng)
    kinds = set(HEATER_MODES.values())
    broken = {t: how for t, how in injected.items() if how not in kinds}
    heaters = {2 * t + int(rng.integers(2)): how for t, how in injected.items() if how in kinds}
    chip = Chip(mesh, seed, clock=lambda: 0.0, failed=broken, heater_faults=heaters,
                crosstalk_fraction=0.03 if mode == "crosstalk_3pct" else 0.01)
    if mode == "spread_2x":
        widen_spread(chip, SPREAD_FACTOR)
    if mode == "drift_1k_per_min":
        chip.set_temperature_profile(lambda t_s: DRIFT_K_PER_MIN * t_s / 60.0)
    return chip, injected


def tbu_errors(cmap: CalibrationMap, chip: Chip) -> tuple[np.ndarray, np.ndarray]:
    """(per-TBU error, per-heater self-phase RMS) (rad) of ``cmap`` against the chip's truth
    now: a TBU's error is the larger of its offset error and its heaters' setpoint RMS errors.
    """
    h = chip.truth.heaters
    alpha = h.alpha.copy()
    if chip.truth.drift_rad_per_k is not None:  # the chip as it is now, its drift included
        alpha[0::2] += chip.truth.drift_rad_per_k * chip.temperature_k(chip.now_s())
    err = phase_errors(cmap, alpha, h.rho2, h.rho3, h.crosstalk, h.eta, kappa=h.kappa_per_mw)
    setpoint = err["per_heater_setpoint_rms_rad"].reshape(-1, 2).max(axis=1)
    return np.maximum(np.abs(err["delta_error_rad"]), setpoint), err["per_heater_rms_rad"]


def route_check(bench: DirectBench, cmap: CalibrationMap, rng: np.random.Generator
                ) -> tuple[int, int, int, list[str]]:
    """(routes planned, routes measured within :data:`ROUTE_TOL_DB` of plan, port pairs no
    route joins around the map's failed and unverified TBUs, why planned routes could not be
    programmed) for :data:`ROUTES` random port pairs.

    Neither a pair the failed TBUs cut apart nor a route the map cannot program is a crash:
    the first is a refusal (counted), the second a planned route not within tolerance, with
    the map's one-line reason kept.
    """
    from photonics.routing import route_many

    mesh = bench.mesh
    planned = within = impossible = 0
    refusals: list[str] = []
    for _ in range(ROUTES):
        src, dst = (int(x) for x in rng.choice(mesh.n_ports, size=2, replace=False))
        try:
            plan = route_many(mesh, [(src, dst)], failed=cmap.failed_tbus(), check_budget=False)
        except LumionError:  # no way around the failed TBUs: refused, not mis-routed
            impossible += 1
            continue
        r = plan.routes[0]
        planned += 1
        try:
            reading = measure_route(bench, cmap, r.route)
        except LumionError as exc:  # the map cannot set the route (e.g. a heater short of pi)
            refusals.append(f"{mesh.port_names[src]}->{mesh.port_names[dst]}: {exc}")
            continue
        within += reading.transmission_db >= r.check.transmission_db - ROUTE_TOL_DB
    return planned, within, impossible, refusals


def run_chip(mode: str, seed: int, options: Options | None = None, mesh: Mesh | None = None) -> ChipOutcome:
    """Calibrate one stressed chip and judge it (see the module docstring)."""
    chip, injected = make_chip(mode, seed, mesh)
    names = chip.mesh.tbu_names
    bench = DirectBench(chip)
    inj = {names[t]: how for t, how in injected.items()}
    try:
        result = calibrate(bench, options or Options(), progress=Progress(stream=None))
    except CalibrationError as exc:
        return ChipOutcome(mode, seed, inj, 0, [], [], {}, [], bench.operations, refused=str(exc))
    cmap = result.cmap
    off, heater_rms = tbu_errors(cmap, chip)
    named = sum(cmap.failed.get(t) == how for t, how in injected.items())
    cut_off = unreachable_tbus(chip.mesh, injected)
    wrong = [names[t] for t in cmap.failed if t not in injected and t not in cut_off]
    silent = [names[t] for t in range(chip.mesh.n_tbus)
              if t not in cmap.failed and (t in injected or off[t] > OFF_RAD)]
    healthy = [h for h in range(chip.mesh.n_heaters) if h // 2 not in cmap.failed]
    planned, within, impossible, refusals = route_check(bench, cmap, np.random.default_rng([seed, 7]))
    return ChipOutcome(mode, seed, inj, named, wrong, silent, cmap.unverified_tbus(),
                       [float(heater_rms[h]) for h in healthy], result.operations, planned, within,
                       named_unreachable=[names[t] for t in sorted(cut_off) if t in cmap.failed],
                       routes_impossible=impossible, route_refusals=refusals)


def summarise(outcomes: list[ChipOutcome]) -> dict[str, Any]:
    """Per-mode figures of a campaign (see the module docstring)."""
    out: dict[str, Any] = {}
    for mode in dict.fromkeys(o.mode for o in outcomes):
        rows = [o for o in outcomes if o.mode == mode]
        done = [o for o in rows if o.refused is None]
        rms = np.array([x for o in done for x in o.heater_rms_rad])
        worst_per_chip = [max(o.heater_rms_rad) for o in done if o.heater_rms_rad]
        out[mode] = {
            "chips": len(rows), "refused": len(rows) - len(done),
            "injected": sum(len(o.injected) for o in rows),
            "named_correctly": sum(o.named for o in done),
            "wrongly_named": sum(len(o.wrongly_named) for o in done),
            "healthy_named_broken": sum(len(set(o.wrongly_named) - set(o.unverified)) for o in done),
            "named_unreachable": sum(len(o.named_unreachable) for o in done),
            "unverified": sum(len(o.unverified) for o in done),
            "silent_over_0_1_rad": sum(len(o.silent) for o in done),
            "heater_rms_median_rad": float(np.median(rms)) if rms.size else None,
            "heater_rms_worst_rad": float(rms.max()) if rms.size else None,
            "chips_meeting_0_02_rad_per_heater": sum(w <= 0.02 for w in worst_per_chip),
            "operations_median": float(np.median([o.operations for o in done])) if done else None,
            "operations_max": max((o.operations for o in done), default=None),
            "routes": sum(o.routes for o in done), "routes_within": sum(o.routes_within for o in done),
            "routes_impossible": sum(o.routes_impossible for o in done),
            "routes_unprogrammable": sum(len(o.route_refusals) for o in done),
        }
    return out


def run_campaign(modes: tuple[str, ...], seeds: list[int], options: Options | None = None,
                 on_chip: Callable[[ChipOutcome], None] | None = None,
                 mesh: Mesh | None = None) -> list[ChipOutcome]:
    """Every mode on every seed (seed by seed, so a cut-short run covers every mode); ``on_chip``
    sees each outcome as it comes. ``mesh``: the chips' mesh (None: SmartLight).
    """
    outcomes = []
    for seed in seeds:
        for mode in modes:
            o = run_chip(mode, seed, options, mesh)
            outcomes.append(o)
            if on_chip:
                on_chip(o)
    return outcomes
