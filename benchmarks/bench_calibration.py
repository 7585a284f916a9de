"""Full smartlight calibration on the simulated bench, several seeds, judged against the truth.

Per seed: set-and-read operations (and the bench time they would take at SmartLight's
15 ms per operation), wall-clock duration of the run here, self-phase RMS/max error vs the
hidden truth over each heater's working range, the passive-offset and setpoint errors,
the fitted crosstalk K vs the truth (and what the design law alone would give), and routes
programmed through the map: ACR and loss vs the model, with and without crosstalk
compensation (all defined in docs/calibration.md).

Run: python benchmarks/bench_calibration.py [--seeds 10 | --seeds 0 1 2 5] [--model realistic|ideal]
     [--crosstalk-fraction 0.01] [--json]

``--seeds N`` (one number) runs seeds 0..N-1; several numbers run exactly those seeds. The chip
is the realistic simulated chip unless ``--model ideal``; ``--crosstalk-fraction`` sets both the
chip's crosstalk and what the procedure is told (the design value it assumes for the partner arm).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.evaluate import differential_fraction, truth_errors
from calibration.procedure import Options, Progress, calibrate, crosstalk_map
from calibration.verify import measure_route, sample_routes
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.circuit import solve
from photonics.configuration import Configuration
from photonics.topology import smartlight

SECONDS_PER_OPERATION = 0.015  # SmartLight bench: ~15 ms per set-and-read


def model_route(chip: Chip, route) -> tuple[float, float]:
    """(transmission dB, ACR dB) of the route on this chip with perfectly set phases (the model)."""
    p = chip.truth.params
    conf = Configuration.from_routes(chip.mesh, [route])
    S = solve(chip.mesh, conf.heater_state(p.offset_top, p.offset_bot), [1550.0], p, inputs=[route.src])
    db = 10 * np.log10(np.maximum(abs(S[0, 0, :, 0]) ** 2, 1e-30))
    others = [q for q in range(chip.mesh.n_ports) if q not in (route.src, route.dst)]
    return float(db[route.dst]), float(db[route.dst] - db[others].max())


def run_seed(seed: int, n_routes: int, model: str = "realistic", fraction: float = 0.01) -> dict:
    mesh = smartlight()
    chip = Chip(mesh, seed=seed, model=model, crosstalk_fraction=fraction)
    bench = DirectBench(chip)
    t0 = time.perf_counter()
    options = Options(crosstalk_fraction=fraction)
    result = calibrate(bench, options, progress=Progress(stream=None))
    duration = time.perf_counter() - t0
    h = chip.truth.heaters
    err = truth_errors(result.cmap, h)
    # The design law alone (what the map used before K was measured), on the same entries.
    fitted = np.array(result.cmap.quality["crosstalk_fitted"]).reshape(-1, 4)
    law, _ = crosstalk_map(mesh, result.cmap.eta, options)
    t, j = fitted[:, 0].astype(int), fitted[:, 1].astype(int)
    true = differential_fraction(h.crosstalk, h.eta, t, j)
    assumed = differential_fraction(law, result.cmap.eta, t, j)
    law_error = float(np.sqrt(np.mean((assumed - true) ** 2) / np.mean(true**2)))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 5])
    parser.add_argument("--model", choices=["realistic", "ideal"], default="realistic")
    parser.add_argument("--crosstalk-fraction", type=float, default=0.01)
    parser.add_argument("--routes", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seeds = list(range(args.seeds[0])) if len(args.seeds) == 1 else args.seeds
    rows = [run_seed(s, args.routes, args.model, args.crosstalk_fraction) for s in seeds]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    cols = [("seed", "{}"), ("operations", "{}"), ("rechecks", "{}"), ("failed_tbus", "{}"),
            ("warnings", "{}"), ("bench_time_s_at_15ms", "{:.0f}"),
            ("duration_s", "{:.1f}"),
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
