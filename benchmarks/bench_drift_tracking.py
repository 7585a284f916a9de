"""Calibration in service: a calibrated chip warms by a few kelvin; routes with and without tracking.

The realistic simulated smartlight chip is calibrated, a few routes are planned (avoiding any
TBU the map records as failed) and programmed, then the chip warms by ``--warming-k`` with a
``--warming-time-s`` time constant over ``--duration-s`` of simulated time. Every
``--round-s`` the :class:`calibration.tracking.DriftTracker` dithers each TBU of each live
route once, reading only each route's received power. Every ``--sample-s`` both programmings
are measured on the bench: the tracked map and the map as calibrated (no tracking); per route
the transmission (dB) and the ACR (dB: transmission minus the worst other port).

Run: python benchmarks/bench_drift_tracking.py [--seed 0] [--plot docs/img/calibration_drift_tracking.png]
     [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.bench import settle
from calibration.map import CalibrationMap
from calibration.procedure import Options, Progress, calibrate
from calibration.tracking import DriftTracker
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.configuration import Configuration, Route
from photonics.routing import route_many
from photonics.topology import smartlight

PAIRS = [(5, 28), (12, 33), (20, 2), (0, 24)]  # live routes across the chip


def measure(bench: DirectBench, cmap: CalibrationMap, routes: list[Route]) -> list[tuple[float, float]]:
    """(transmission dB, ACR dB) of every route with all of them programmed through ``cmap``."""
    mesh = bench.mesh
    bench.set_currents(cmap.currents_for(Configuration.from_routes(mesh, routes), bench.max_current_ma))
    settle(bench, Options.settle_s)
    out = []
    for r in routes:
        bench.select_input(r.src)
        ports = [p for p in range(mesh.n_ports) if p != r.src]
        p = np.asarray(bench.read_powers_dbm(ports))
        k = ports.index(r.dst)
        out.append((float(p[k]), float(p[k] - np.delete(p, k).max())))
    return out


def run(seed: int, warming_k: float, warming_time_s: float, duration_s: float, round_s: float,
        sample_s: float) -> dict:
    """The scenario; returns the time series and the summary figures."""
    mesh = smartlight()
    chip = Chip(mesh, seed=seed)
    bench = DirectBench(chip)
    result = calibrate(bench, Options(), progress=Progress(stream=None))
    cmap = result.cmap
    plan = route_many(mesh, PAIRS, failed=cmap.failed_tbus(), check_budget=False)
    routes = [r.route for r in plan.routes]
    t0 = chip.now_s()
    chip.set_temperature_profile(lambda t: warming_k * (1 - math.exp(-max(t - t0, 0.0) / warming_time_s)))
    tracker = DriftTracker(bench, cmap, routes)
    tracker.program()
    samples = []
    t_wall = time.perf_counter()
    next_round = t0 + round_s
    for k in range(int(duration_s // sample_s) + 1):
        t_sample = t0 + k * sample_s
        while next_round <= t_sample:
            bench.wait(max(next_round - chip.now_s(), 0.0))
            tracker.step()
            next_round += round_s
        bench.wait(max(t_sample - chip.now_s(), 0.0))
        tracked = measure(bench, tracker.tracked_map(), routes)
        untracked = measure(bench, cmap, routes)
        tracker.program()  # back to the live programming
        samples.append({"time_s": chip.now_s() - t0, "temperature_k": chip.temperature_k(chip.now_s()),
                        "tracked_transmission_db": [a for a, _ in tracked],
                        "tracked_acr_db": [b for _, b in tracked],
                        "untracked_transmission_db": [a for a, _ in untracked],
                        "untracked_acr_db": [b for _, b in untracked]})
    fresh, last = samples[0], samples[-1]

    def worst_drop(key: str) -> float:
        return float(max(max(f - s for f, s in zip(fresh[key], x[key], strict=True)) for x in samples))

    return {
        "seed": seed, "routes": [f"{mesh.port_names[r.src]}->{mesh.port_names[r.dst]}" for r in routes],
        "route_tbus": [len(r.hops) for r in routes], "failed_tbus": cmap.failed_tbus(),
        "warming_k": warming_k, "duration_s": duration_s, "round_s": round_s,
        "calibration_operations": result.operations,
        "tracking_readings": tracker.readings, "tracking_vetoed_dithers": tracker.vetoed,
        "tracking_ignored_estimates": tracker.ignored,
        "tracking_readings_per_round": tracker.readings / max(int(duration_s // round_s), 1),
        "fresh_acr_min_db": min(fresh["tracked_acr_db"]),
        "untracked_final_acr_min_db": min(last["untracked_acr_db"]),
        "tracked_final_acr_min_db": min(last["tracked_acr_db"]),
        "untracked_acr_worst_drop_db": worst_drop("untracked_acr_db"),
        "tracked_acr_worst_drop_db": worst_drop("tracked_acr_db"),
        "untracked_loss_worst_increase_db": worst_drop("untracked_transmission_db"),
        "tracked_loss_worst_increase_db": worst_drop("tracked_transmission_db"),
        "wall_s": time.perf_counter() - t_wall,
        "samples": samples,
    }


def plot(path: Path, data: dict) -> Path:
    """ACR of every route over simulated time, tracked (solid) and untracked (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_min = np.array([s["time_s"] for s in data["samples"]]) / 60
    fig, (ax, axt) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, height_ratios=[3, 1])
    for k, name in enumerate(data["routes"]):
        color = f"C{k}"
        ax.plot(t_min, [s["tracked_acr_db"][k] for s in data["samples"]], "-o", ms=3, color=color,
                label=f"{name}, tracked")
        ax.plot(t_min, [s["untracked_acr_db"][k] for s in data["samples"]], "--", color=color,
                label=f"{name}, not tracked")
    ax.set_ylabel("route ACR (dB)")
    ax.set_title(f"smartlight seed {data['seed']}: chip warms by {data['warming_k']:.0f} K; "
                 "tracking reads only each route's received power")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axt.plot(t_min, [s["temperature_k"] for s in data["samples"]], color="k")
    axt.set_ylabel("chip warming (K)")
    axt.set_xlabel("simulated time after calibration (min)")
    axt.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warming-k", type=float, default=3.0)
    parser.add_argument("--warming-time-s", type=float, default=1200.0)
    parser.add_argument("--duration-s", type=float, default=3600.0)
    parser.add_argument("--round-s", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=300.0)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    data = run(args.seed, args.warming_k, args.warming_time_s, args.duration_s, args.round_s, args.sample_s)
    if args.plot:
        data["plot"] = str(plot(args.plot, data))
    if args.json:
        print(json.dumps(data, indent=1))
        return
    for key, value in data.items():
        if key != "samples":
            print(f"{key:<36}{value}")


if __name__ == "__main__":
    main()
