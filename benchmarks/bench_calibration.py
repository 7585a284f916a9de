"""Full smartlight calibration on the simulated bench, several seeds, judged against the truth.

Per seed: set-and-read operations (and the bench time they would take at SmartLight's
15 ms per operation), wall-clock duration and CPU time of the run here (with the CPU spent in
the chip's solves and in the fits, and the load average), self-phase RMS/max error vs the
hidden truth over each heater's working range, the passive-offset and setpoint errors,
the fitted crosstalk K vs the truth (and what the design law alone would give), and routes
programmed through the map: ACR and loss vs the model, with and without crosstalk
compensation (all defined in docs/calibration.md).

Run: python benchmarks/bench_calibration.py [--seeds 10 | --seeds 0 1 2 5] [--model realistic|ideal]
     [--crosstalk-fraction 0.01] [--reproducible | --wall-clock] [--compare-full-solve]
     [--fit-trial-evaluations N]
     [--json]

``--seeds N`` (one number) runs seeds 0..N-1; several numbers run exactly those seeds. The chip
is the realistic simulated chip unless ``--model ideal``; ``--crosstalk-fraction`` sets both the
chip's crosstalk and what the procedure is told (the design value it assumes for the partner arm).
The chip runs on simulated time (its settling and drift move only with the bench's operations
and waits), so a seed gives the same map every run under any load: ``map_digest`` (the map
without its timestamp and run time) says so. ``--reproducible`` is accepted for the commands
recorded before that was the default; ``--wall-clock`` puts the chip on the wall clock too
(the old default: maps then depend on the machine's load).
``--compare-full-solve`` calibrates every seed twice on a chip that
solves every reading from scratch (``Chip(incremental=False)``) and twice on the default chip
(order: full, default, default, full), and reports the CPU times and whether the maps are
the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.digest import map_digest
from calibration.evaluate import differential_fraction, truth_errors
from calibration.procedure import Options, Progress, calibrate, crosstalk_map
from calibration.verify import measure_route, sample_routes
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.circuit import solve
from photonics.configuration import Configuration
from photonics.topology import smartlight

SECONDS_PER_OPERATION = 0.015  # SmartLight bench: ~15 ms per set-and-read


def time_solves(chip: Chip) -> list[float]:
    """Make ``chip.output_field`` add its CPU time (s) to the one-element list returned."""
    spent, solve_field = [0.0], chip.output_field

    def timed(input_port: int, wavelength_nm: float):
        c0 = time.process_time()
        try:
            return solve_field(input_port, wavelength_nm)
        finally:
            spent[0] += time.process_time() - c0

    chip.output_field = timed
    return spent


@contextmanager
def timed_fits():
    """Add the CPU time (s) of the fringe and crosstalk fits inside the block to the list yielded."""
    import calibration.crosstalk as xt
    import calibration.procedure as proc

    spent = [0.0]
    real = (proc.fit_tbu, xt.fit_crosstalk)

    def timing(fn):
        def wrapped(*args, **kwargs):
            c0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - c0
        return wrapped

    proc.fit_tbu, xt.fit_crosstalk = timing(real[0]), timing(real[1])
    try:
        yield spent
    finally:
        proc.fit_tbu, xt.fit_crosstalk = real


def model_route(chip: Chip, route) -> tuple[float, float]:
    """(transmission dB, ACR dB) of the route on this chip with perfectly set phases (the model)."""
    p = chip.truth.params
    conf = Configuration.from_routes(chip.mesh, [route])
    S = solve(chip.mesh, conf.heater_state(p.offset_top, p.offset_bot), [1550.0], p, inputs=[route.src])
    db = 10 * np.log10(np.maximum(abs(S[0, 0, :, 0]) ** 2, 1e-30))
    others = [q for q in range(chip.mesh.n_ports) if q not in (route.src, route.dst)]
    return float(db[route.dst]), float(db[route.dst] - db[others].max())


def run_seed(seed: int, n_routes: int, model: str = "realistic", fraction: float = 0.01, *,
             reproducible: bool = True, incremental: bool = True, trial: int | None = None) -> dict:
    mesh = smartlight()
    clock = {} if reproducible else {"clock": time.monotonic}
    chip = Chip(mesh, seed=seed, model=model, crosstalk_fraction=fraction, incremental=incremental, **clock)
    bench = DirectBench(chip)
    chip_cpu = time_solves(chip)
    t0, c0 = time.perf_counter(), time.process_time()
    options = Options(crosstalk_fraction=fraction)
    if trial is not None:
        options = replace(options, fit_trial_evaluations=trial)
    with timed_fits() as fit_cpu:
        result = calibrate(bench, options, progress=Progress(stream=None))
    duration, cpu = time.perf_counter() - t0, time.process_time() - c0
    solve_cpu = chip_cpu[0]
    solves = dict(chip.solves)
    h = chip.truth.heaters
    err = truth_errors(result.cmap, h)
    # The design law alone (what the map used before K was measured), on the same entries.
    fitted = np.array(result.cmap.quality["crosstalk_fitted"]).reshape(-1, 4)
    law, _ = crosstalk_map(mesh, result.cmap.eta, options)
    t, j = fitted[:, 0].astype(int), fitted[:, 1].astype(int)
    true = differential_fraction(h.crosstalk, h.eta, t, j)
    assumed = differential_fraction(law, result.cmap.eta, t, j)
    true_power = np.mean(true**2)  # zero on a chip without crosstalk: no relative error then
    law_error = float(np.sqrt(np.mean((assumed - true) ** 2) / true_power)) if true_power else float("nan")
    # Setpoint error of a whole configuration (every TBU bar, cross or 50:50) on the chip:
    # compensated with the fitted K, with the design law, and not compensated.
    conf = Configuration(np.random.default_rng(200 + seed).choice([0.0, 1.0, 0.5], mesh.n_tbus))
    want = 2 * np.arccos(np.sqrt(conf.cross_fraction))
    setpoint = {}
    law_map = replace(result.cmap, crosstalk=law)
    for name, cmap, comp in (("fitted", result.cmap, True), ("law", law_map, True),
                             ("uncompensated", result.cmap, False)):
        theta = h.phases(cmap.currents_for(conf, bench.max_current_ma, compensate=comp))
        e = np.angle(np.exp(1j * (theta[0::2] - theta[1::2] - want)))
        setpoint[f"config_setpoint_rms_{name}_rad"] = float(np.sqrt(np.mean(e**2)))
        setpoint[f"config_setpoint_max_{name}_rad"] = float(np.max(np.abs(e)))
    acr_on, acr_off, acr_model, dloss_on, dloss_off = [], [], [], [], []
    for route in sample_routes(mesh, n_routes, np.random.default_rng(100 + seed)):
        model, model_acr = model_route(chip, route)
        acr_model.append(model_acr)
        on = measure_route(bench, result.cmap, route, compensate=True)
        off = measure_route(bench, result.cmap, route, compensate=False)
        acr_on.append(on.acr_db)
        acr_off.append(off.acr_db)
        dloss_on.append(abs(on.transmission_db - model))
        dloss_off.append(abs(off.transmission_db - model))
    return {
        "seed": seed,
        "operations": result.operations,
        "rechecks": result.cmap.quality["rechecks"],
        "failed_tbus": len(result.cmap.failed),
        "warnings": len(result.cmap.quality["warnings"]),
        "bench_time_s_at_15ms": result.operations * SECONDS_PER_OPERATION,
        "duration_s": duration,
        "cpu_s": cpu,
        "chip_solve_cpu_s": solve_cpu,
        "fit_cpu_s": fit_cpu[0],
        "load_average_1min": round(os.getloadavg()[0], 2),
        "map_digest": map_digest(result.cmap),
        "chip_solves": solves,
        **{k: v for k, v in err.items() if not isinstance(v, np.ndarray)},
        "true_crosstalk_fraction": float(np.mean(
            np.asarray(h.crosstalk.tocsr()[np.arange(mesh.n_heaters) ^ 1, np.arange(mesh.n_heaters)]).ravel()
            / h.eta)),
        "crosstalk_operations": result.cmap.quality["crosstalk_operations"],
        "crosstalk_law_rms_error": law_error,
        "true_neighbour_fraction_rms": float(np.sqrt(np.mean(true**2))),
        **setpoint,
        "routes": n_routes,
        "acr_min_model_db": min(acr_model), "acr_median_model_db": float(np.median(acr_model)),
        "acr_min_db": min(acr_on), "acr_median_db": float(np.median(acr_on)),
        "acr_min_uncompensated_db": min(acr_off), "acr_median_uncompensated_db": float(np.median(acr_off)),
        "acr_mean_gain_db": float(np.mean(np.array(acr_on) - np.array(acr_off))),
        "loss_vs_model_max_db": max(dloss_on), "loss_vs_model_max_uncompensated_db": max(dloss_off),
    }


def compare_full_solve(seeds: list[int], model: str, fraction: float) -> list[dict]:
    """Each seed calibrated twice on a chip that solves every reading whole and twice on the
    default chip, in the order full, default, default, full (so warm-up and load trends fall
    on both alike); summed CPU and wall times of the calibrations (route checks untimed), of
    the chip's solves within them, and whether all four maps are the same bytes.
    """
    rows = []
    for seed in seeds:
        runs = [run_seed(seed, 1, model, fraction, reproducible=True, incremental=inc)
                for inc in (False, True, True, False)]
        full, fast = [runs[0], runs[3]], [runs[1], runs[2]]

        def total(rs: list[dict], key: str) -> float:
            return round(sum(r[key] for r in rs), 2)

        cpu, solve_cpu = total(fast, "cpu_s"), total(fast, "chip_solve_cpu_s")
        rows.append({"seed": seed, "model": model, "crosstalk_fraction": fraction,
                     "full_cpu_s": total(full, "cpu_s"), "cpu_s": cpu,
                     "cpu_speedup": round(total(full, "cpu_s") / cpu, 2),
                     "full_chip_solve_cpu_s": total(full, "chip_solve_cpu_s"), "chip_solve_cpu_s": solve_cpu,
                     "chip_solve_speedup": round(total(full, "chip_solve_cpu_s") / solve_cpu, 2),
                     "full_wall_s": total(full, "duration_s"), "wall_s": total(fast, "duration_s"),
                     "same_map": len({r["map_digest"] for r in runs}) == 1,
                     "map_digest": fast[0]["map_digest"], "chip_solves": fast[0]["chip_solves"],
                     "load_average_1min": round(os.getloadavg()[0], 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 5])
    parser.add_argument("--model", choices=["realistic", "ideal"], default="realistic")
    parser.add_argument("--crosstalk-fraction", type=float, default=0.01)
    parser.add_argument("--routes", type=int, default=20)
    parser.add_argument("--reproducible", action="store_true",
                        help="the chip on simulated time only (the default; kept for recorded commands)")
    parser.add_argument("--wall-clock", action="store_true",
                        help="the chip's time also follows the wall clock (maps then depend on the load)")
    parser.add_argument("--compare-full-solve", action="store_true",
                        help="also calibrate on a chip solving every reading whole; CPU times, same map?")
    parser.add_argument("--fit-trial-evaluations", type=int, default=None,
                        help="Options.fit_trial_evaluations (default: the Options default; "
                             "0: every fit start runs to its end, as before issue 28)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if len(args.seeds) == 1 and args.seeds[0] < 1:
        parser.error("--seeds N runs seeds 0..N-1, so N must be at least 1 (--seeds 1 runs seed 0); "
                     "or list two or more seeds")
    seeds = list(range(args.seeds[0])) if len(args.seeds) == 1 else args.seeds
    if args.compare_full_solve:
        for row in compare_full_solve(seeds, args.model, args.crosstalk_fraction):
            print(json.dumps(row))
        return
    rows = [run_seed(s, args.routes, args.model, args.crosstalk_fraction, reproducible=not args.wall_clock,
                     trial=args.fit_trial_evaluations) for s in seeds]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    cols = [("seed", "{}"), ("operations", "{}"), ("rechecks", "{}"), ("failed_tbus", "{}"),
            ("warnings", "{}"), ("bench_time_s_at_15ms", "{:.0f}"),
            ("duration_s", "{:.1f}"), ("cpu_s", "{:.1f}"), ("chip_solve_cpu_s", "{:.1f}"),
            ("fit_cpu_s", "{:.1f}"),
            ("map_digest", "{}"),
            ("phase_rms_error_rad", "{:.4f}"), ("phase_max_error_rad", "{:.4f}"),
            ("phase_worst_heater_rms_rad", "{:.4f}"),
            ("delta_rms_error_rad", "{:.4f}"), ("setpoint_rms_error_rad", "{:.4f}"),
            ("setpoint_max_error_rad", "{:.4f}"), ("true_crosstalk_fraction", "{:.4f}"),
            ("crosstalk_operations", "{}"), ("crosstalk_entries_fitted", "{}"),
            ("crosstalk_entries_assumed", "{}"), ("true_neighbour_fraction_rms", "{:.4f}"),
            ("crosstalk_rms_error", "{:.3f}"), ("crosstalk_rms_pull", "{:.2f}"),
            ("crosstalk_law_rms_error", "{:.3f}"),
            ("acr_min_model_db", "{:.1f}"), ("acr_median_model_db", "{:.1f}"),
            ("acr_min_db", "{:.1f}"), ("acr_min_uncompensated_db", "{:.1f}"),
            ("acr_median_db", "{:.1f}"), ("acr_median_uncompensated_db", "{:.1f}"),
            ("acr_mean_gain_db", "{:.1f}"),
            ("config_setpoint_rms_fitted_rad", "{:.4f}"), ("config_setpoint_rms_law_rad", "{:.4f}"),
            ("config_setpoint_rms_uncompensated_rad", "{:.4f}"),
            ("config_setpoint_max_fitted_rad", "{:.4f}"), ("config_setpoint_max_law_rad", "{:.4f}"),
            ("config_setpoint_max_uncompensated_rad", "{:.4f}"),
            ("loss_vs_model_max_db", "{:.3f}"), ("loss_vs_model_max_uncompensated_db", "{:.3f}")]
    for name, fmt in cols:
        print(f"{name:<36}" + "".join(f"{fmt.format(r[name]):>12}" for r in rows))


if __name__ == "__main__":
    main()
