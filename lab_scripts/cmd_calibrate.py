"""``lumion calibrate``: fit every heater of a chip on a bench and write its calibration map."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab_scripts.common import (
    UsageError,
    add_json_flag,
    count,
    fraction,
    load_mesh,
    positive,
    print_json,
    seed,
    table,
)
from lab_scripts.errors import EXIT_OK, EXIT_UNVERIFIED, opening, reading
from lab_scripts.paths import JSON_SUFFIXES, output_file, output_folder

DEFAULT_SEED = 0  # the simulated chip when neither --seed nor [sim] seed says otherwise
# Readings per heater sweep at the least: a one-arm, one-output fringe fit already has five
# parameters (delta, rho2, rho3, amplitude, floor), and eight readings leave it some to spare.
MIN_SWEEP_POINTS = 8

# What each kind of calibration warning means for the user and what to do; printed once per
# kind under the warnings (a newcomer cannot guess "crosstalk fit set aside"). Key: text the
# warning line contains.
WARNING_MEANINGS: dict[str, str] = {
    "crosstalk fit set aside": (
        "the heat its neighbours leak into that TBU did not fit the crosstalk model, so the map "
        "compensates it with the design value (--crosstalk-fraction) instead of a measured one; "
        "the map is still good and routed through, but that TBU's phase may be slightly off while "
        "its neighbours are hot (a little less ACR on its routes); nothing to do unless its routes "
        "measure poorly, then calibrate again (docs/calibration.md, 'Thermal crosstalk')"),
    "failed (": (
        "that TBU did not behave like a working heater and switch; the map records it as failed "
        "and routing (route --map, the fabric) goes around it; check the chip or its wiring"),
    "heaters not checked electrically": (
        "the bench's heater driver gave no voltage and current read-back, so an open or shorted "
        "heater could only show as a TBU without a fringe (named by light, not by its cause); use a "
        "driver that reads both (docs/calibration.md, 'Heater faults')"),
}


def operation_budget_arg(text: str) -> int | str:
    """Argument type of ``--max-operations``: ``auto`` or an integer >= 1."""
    return "auto" if text == "auto" else positive(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "calibrate",
        help="bootstrap-calibrate every heater (phase vs current, crosstalk) and write the map",
        description="Calibrate a chip through its bench (laser, power meter, heater driver) and write "
        "a versioned calibration map. Example: lumion calibrate --bench sim --seed 1 "
        "--out map.json --plot plots/",
    )
    p.add_argument("--bench", required=True, metavar="FILE|sim",
                   help="bench config file, or 'sim' for the in-process simulated bench")
    p.add_argument("--seed", type=seed, default=None,
                   help="simulated chip seed: given, it wins; else a bench config's [sim] seed; else 0")
    p.add_argument("--mesh", default="smartlight",
                   help="mesh of the simulated chip: smartlight | hex:RxC | ... (with --bench sim)")
    p.add_argument("--out", required=True, metavar="MAP.json", help="where to write the map")
    p.add_argument("--checkpoint", metavar="FILE", help="resume file (default: MAP.json.ckpt)")
    p.add_argument("--points", type=count, default=16, help="readings per heater sweep, bootstrap pass")
    p.add_argument("--refine-points", type=count, default=24,
                   help="readings per heater sweep, refinement pass (0 skips it)")
    p.add_argument("--crosstalk-fraction", type=fraction, default=0.01,
                   help="nearest-heater thermal crosstalk fraction f (see docs/calibration.md)")
    p.add_argument("--verify-routes", type=count, default=8,
                   help="routes to program and measure afterwards, with and without crosstalk "
                   "compensation (0 skips)")
    p.add_argument("--max-operations", type=operation_budget_arg, default="auto", metavar="N|auto",
                   help="set-and-read operations the run may take before it is refused (auto: the "
                   "mesh's nominal plan x 1.35, 10,000 on SmartLight; docs/calibration.md)")
    p.add_argument("--no-drift-tracking", action="store_true",
                   help="do not re-measure reference TBUs through the run to follow and compensate the "
                   "chip's temperature drift (on by default, ~2 %% of the operations; docs/calibration.md)")
    p.add_argument("--common-phase", action="store_true",
                   help="also measure every TBU's common phase by interference (a unitary or filter "
                        "needs it; docs/calibration.md, 'Common phases')")
    p.add_argument("--plot", metavar="DIR", help="write fringe-fit and overview PNGs here")
    p.add_argument("--plot-tbu", default=None, help="TBU whose fringe fits are plotted (default: worst fit)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_json_flag(p)
    p.set_defaults(run=run)


def open_bench(args: argparse.Namespace) -> Any:
    """The bench named by ``--bench``: the in-process simulator or a bench config file."""
    if args.bench == "sim":
        from instruments.sim.chip import Chip
        from instruments.sim.direct import DirectBench

        args.effective_seed = effective_seed(args.seed, None)
        return DirectBench(Chip(load_mesh(args.mesh), seed=args.effective_seed))
    from instruments.config import load_config
    from instruments.config import open_bench as open_config_bench
    from photonics.topology import mesh_from_spec

    with reading("bench config", args.bench):  # every file is checked before an instrument opens
        cfg = load_config(args.bench)
        mesh_from_spec(cfg.get("mesh", "smartlight"))
    with opening(f"bench {args.bench}"):
        # None lets the config's own [sim] seed decide (start_simulators); --seed overrides it.
        bench = open_config_bench(cfg, seed=args.seed)
    args.effective_seed = effective_seed(args.seed, cfg)
    return bench


def effective_seed(given: int | None, config: dict[str, Any] | None) -> int:
    """The simulated chip's seed: ``--seed`` when given, else the config's ``[sim] seed``, else 0."""
    if given is not None:
        return given
    return int((config or {}).get("sim", {}).get("seed", DEFAULT_SEED))


def run(args: argparse.Namespace) -> int:
    """Calibrate, save, report."""
    if args.points < MIN_SWEEP_POINTS or (args.refine_points and args.refine_points < MIN_SWEEP_POINTS):
        raise UsageError(f"sweeps need at least {MIN_SWEEP_POINTS} points (--points, --refine-points)")
    out = output_file(args.out, "--out", JSON_SUFFIXES)
    ckpt = output_file(args.checkpoint, "--checkpoint") if args.checkpoint is not None else \
        out.with_name(out.name + ".ckpt")
    plot_dir = output_folder(args.plot, "--plot") if args.plot is not None else None
    bench = open_bench(args)
    try:
        payload, errors = _calibrate_and_report(bench, args, out, ckpt, plot_dir)
    finally:
        close = getattr(bench, "close", None)
        if close:
            close()
    if args.json:
        print_json(payload)
    else:
        _print_report(payload, errors)
    return EXIT_UNVERIFIED if payload["unverified_tbus"] else EXIT_OK


def _calibrate_and_report(bench: Any, args: argparse.Namespace, out: Path, ckpt: Path,
                          plot_dir: Path | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Calibrate through ``bench``, write the map to ``out``, verify routes and plot as asked.

    Returns:
        (the report, the errors against the simulated chip's truth or None on real hardware).
    """
    import sys

    from calibration.procedure import Options, Progress, calibrate

    options = Options(points=args.points, refine_points=args.refine_points,
                      crosstalk_fraction=args.crosstalk_fraction, max_operations=args.max_operations,
                      drift_references=0 if args.no_drift_tracking else Options.drift_references)
    progress = Progress(stream=None if args.quiet or args.json else sys.stderr)
    result = calibrate(bench, options, checkpoint=ckpt, progress=progress, keep_sweeps=plot_dir is not None)
    cmap = result.cmap
    if args.common_phase and not cmap.quality.get("crosstalk_refusal"):  # a refused map is only written
        from calibration.budget import operation_budget
        from calibration.common_phase import run_stage

        before = bench.operations
        cmap, _ = run_stage(bench, cmap, operation_budget(options, bench.mesh), result.operations,
                            options.wavelength_nm, options.settle_s)
        result = replace(result, cmap=cmap, operations=result.operations + bench.operations - before)
    payload = _map_summary(result, bench.mesh, out)
    if cmap.common is not None:
        payload["common_phase"] = cmap.quality["common_phase"]
    payload["drift_tracking"] = options.drift_references > 0
    errors = _judge_against_truth(bench, cmap, payload)
    cmap.save(out)
    ckpt.unlink(missing_ok=True)  # the map is written: a later run starts afresh
    cmap.check_usable()  # a refused map is written (to inspect) but not verified or used
    if args.verify_routes > 0:
        payload.update(_verify_routes(bench, cmap, args.verify_routes, args.effective_seed))
    if plot_dir is not None:
        plot_dir.mkdir(exist_ok=True)
        payload["plot"] = _plots(plot_dir, bench.mesh, result, errors, args.plot_tbu)
    return payload, errors


def _map_summary(result: Any, mesh: Any, out: Path) -> dict[str, Any]:
    """The report's head: what was calibrated, at what cost, and how well the fits went."""
    import numpy as np

    cmap = result.cmap
    return {
        "chip_id": cmap.chip_id, "out": str(out), "n_tbus": mesh.n_tbus, "n_heaters": mesh.n_heaters,
        "operations": result.operations, "duration_s": round(result.duration_s, 3),
        "resumed_operations": cmap.quality["resumed_operations"],
        "fit_rms_residual": cmap.quality["fit_rms_residual"],
        "fit_rms_residual_rel": cmap.quality["fit_rms_residual_rel"],
        "worst_sigma_phase_2pi_rad": float(np.max(cmap.quality["sigma_phase_2pi_rad"])),
        "crosstalk_fraction": cmap.nearest_fraction, "crosstalk_entries": int(cmap.crosstalk.nnz),
        "failed_tbus": {mesh.tbu_names[t]: how for t, how in sorted(cmap.failed.items())},
        "unverified_tbus": {name: (rad if np.isfinite(rad) else None)
                            for name, rad in cmap.unverified_tbus().items()},
        "unverified_reasons": cmap.unverified_reasons(),
        **{k: cmap.quality[k] for k in ("confirmed_tbus", "confirmed_on_independent_path",
                                        "confirm_max_disagreement_rad") if k in cmap.quality},
        "drift": cmap.quality.get("drift"),
        "warnings": list(cmap.quality.get("warnings", [])),
    }


def _judge_against_truth(bench: Any, cmap: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """On a simulated bench, the map's errors against the chip's hidden truth, also added (the
    scalar ones) to ``payload`` and to the map's quality record; None on real hardware.
    """
    import numpy as np

    chip = getattr(bench, "chip", None) or getattr(getattr(bench, "sim", None), "chip", None)
    if chip is None:
        return None
    from calibration.evaluate import truth_errors

    errors = truth_errors(cmap, chip.truth.heaters)
    payload.update({k: v for k, v in errors.items() if not isinstance(v, np.ndarray)})
    cmap.quality.update({k: v for k, v in errors.items() if not isinstance(v, np.ndarray)})
    return errors


def _verify_routes(bench: Any, cmap: Any, n_routes: int, seed: int) -> dict[str, Any]:
    """Program ``n_routes`` sampled routes with and without crosstalk compensation and measure
    each: the per-route rows, the worst ACR (dB) both ways and the bench operations it took.
    """
    import numpy as np

    from calibration.verify import measure_route, sample_routes

    mesh = bench.mesh
    ops0 = bench.operations
    routes = sample_routes(mesh, n_routes, np.random.default_rng(seed), avoid=set(cmap.failed))
    rows = []
    for r in routes:
        on = measure_route(bench, cmap, r, compensate=True)
        off = measure_route(bench, cmap, r, compensate=False)
        rows.append({"src": mesh.port_names[r.src], "dst": mesh.port_names[r.dst], "n_tbus": len(r.hops),
                     "transmission_db": on.transmission_db, "acr_db": on.acr_db,
                     "acr_uncompensated_db": off.acr_db,
                     "transmission_uncompensated_db": off.transmission_db})
    return {"routes": rows, "min_acr_db": min(r["acr_db"] for r in rows),
            "min_acr_uncompensated_db": min(r["acr_uncompensated_db"] for r in rows),
            "verify_operations": bench.operations - ops0}


def warning_meanings(warnings: list[str]) -> list[str]:
    """One line per kind of warning present: what it means and what to do (WARNING_MEANINGS)."""
    return [f"  ({kind}: {meaning})" for kind, meaning in WARNING_MEANINGS.items()
            if any(kind in w for w in warnings)]


def drift_line(payload: dict[str, Any]) -> str:
    """One line: the drift the reference TBUs saw during the run and what was compensated."""
    d = payload.get("drift")
    if not payload.get("drift_tracking"):
        return "drift: not tracked (--no-drift-tracking)"
    if not d or d["reference_rounds"] < 2:
        return "drift: not tracked (no reference TBU could be read; see the warnings)"
    from calibration.drift import DRIFT_SEEN_RAD

    refs = f"reference TBUs {', '.join(d['reference_tbus'])}"
    cost = f"{d['reference_rounds']} rounds, {d['reference_operations']} operations"
    if d["drift_seen_rad"] <= DRIFT_SEEN_RAD:
        return (f"drift: none seen: {refs} moved at most {d['drift_seen_rad']:.3f} rad ({cost}); a map is "
                f"compensated once one moves {DRIFT_SEEN_RAD} rad")
    kelvin = "" if d["drift_k_per_min"] is None else f", ~{d['drift_k_per_min']:.1f} K/min"
    return (f"drift: {d['drift_rad_per_min']:.3f} rad/min{kelvin} at {refs} (largest change "
            f"{d['drift_seen_rad']:.3f} rad, {cost}); {d['drift_compensated_tbus']} TBUs compensated")


def _print_report(payload: dict[str, Any], errors: dict[str, Any] | None) -> None:
    """The report for a reader: cost, fit quality, warnings, truth errors, routes, plots."""
    from calibration.settable import unconfirmed_text

    print(f"calibrated {payload['n_heaters']} heaters of {payload['chip_id']} in {payload['operations']} "
          f"operations ({payload['duration_s']:.1f} s); map written to {payload['out']}")
    print(f"fit residual RMS {payload['fit_rms_residual']:.2f} sigma "
          f"({payload['fit_rms_residual_rel']:.2%} of fringe amplitude)")
    for line in payload["warnings"]:
        print(f"warning: {line}")
    for line in warning_meanings(payload["warnings"]):
        print(line)
    if "confirmed_tbus" in payload:
        worst = payload["confirm_max_disagreement_rad"]
        print(f"confirmed by light: {payload['confirmed_tbus']} of {payload['n_tbus']} TBUs "
              f"({payload['confirmed_on_independent_path']} through a path other than their fit's)"
              + (f", largest disagreement {worst:.3f} rad" if worst is not None else ""))
    print(drift_line(payload))
    for name, rad in payload["unverified_tbus"].items():
        seen = (unconfirmed_text(payload["unverified_reasons"].get(name), math.nan) if rad is None
                else f"light disagrees with its fit by {rad:.3f} rad")
        print(f"UNVERIFIED {name}: {seen}; routing avoids it (exit status {EXIT_UNVERIFIED})")
    if errors is not None:
        print(f"vs truth: self-phase RMS {errors['phase_rms_error_rad']:.4f} rad, max "
              f"{errors['phase_max_error_rad']:.4f} rad; delta RMS {errors['delta_rms_error_rad']:.4f} rad; "
              f"setpoint RMS {errors['setpoint_rms_error_rad']:.4f} rad")
    if "routes" in payload:
        print(table([[r["src"], r["dst"], r["n_tbus"], r["transmission_db"], r["acr_db"],
                      r["acr_uncompensated_db"]] for r in payload["routes"]],
                    ["src", "dst", "TBUs", "trans dB", "ACR dB", "ACR no-comp dB"]))
    for p in payload.get("plot", []):
        print(f"plot: {p}")


def _plots(directory: Any, mesh: Any, result: Any, errors: Any, tbu: str | None) -> list[str]:
    from calibration.plots import fringe_fit, map_overview

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    if result.sweeps:
        if tbu is None:
            t = max(result.sweeps, key=lambda k: result.sweeps[k][2].rms_residual)
        else:
            t = mesh.tbu_index(tbu)
            if t not in result.sweeps:
                raise UsageError(f"{tbu} was not measured in this run (it was resumed from a checkpoint)")
        probe, sweeps, fit = result.sweeps[t]
        name = mesh.tbu_names[t].replace(":", "_").replace(".", "_")
        paths.append(str(fringe_fit(directory / f"fringe_{name}.png", mesh, probe, sweeps, fit)))
    err = errors["per_heater_rms_rad"] if errors else None
    paths.append(str(map_overview(directory / "calibration_map.png", mesh, result.cmap, err)))
    return paths
