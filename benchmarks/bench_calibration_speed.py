"""In-process calibration time and accuracy per seed (issue 28): wall and CPU time of
``calibrate`` on the simulated smartlight chip (DirectBench), per-heater RMS vs the truth.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/bench_calibration_speed.py [--seeds 7000 7001 ...]
(default seeds 7000-7019). Prints one JSON line per seed (``wall_s`` and ``cpu_s`` of
``calibrate`` alone, the 1-minute load average before and after, the per-heater self-phase
RMS error's median and worst over the chip's heaters, ``calibration.evaluate``), then a
summary line over the seeds. The chip runs on simulated time, so a seed's map (its digest)
does not depend on the load; the times do: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.digest import map_digest
from calibration.evaluate import truth_errors
from calibration.procedure import Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from photonics.topology import smartlight


def run_seed(seed: int) -> dict:
    """Calibrate seed ``seed``'s realistic smartlight chip in-process; times and errors."""
    chip = Chip(smartlight(), seed=seed)
    bench = DirectBench(chip)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    result = calibrate(bench, progress=Progress(stream=None))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    err = truth_errors(result.cmap, chip.truth.heaters)
    per_heater = err["per_heater_rms_rad"]
    return {"seed": seed, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "operations": result.operations, "map_digest": map_digest(result.cmap),
            "heater_rms_median_rad": float(np.median(per_heater)),
            "heater_rms_worst_rad": float(np.max(per_heater)),
            "phase_rms_error_rad": err["phase_rms_error_rad"],
            "delta_max_error_rad": err["delta_max_error_rad"],
            "setpoint_max_error_rad": err["setpoint_max_error_rad"],
            "unverified": sum(v == "unverified" for v in result.cmap.failed.values()),
            "failed": len(result.cmap.failed), "chip_solves": dict(chip.solves)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(7000, 7020)))
    args = p.parse_args()
    rows = []
    for s in args.seeds:
        rows.append(run_seed(s))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps(summary(rows)))


def summary(rows: list[dict]) -> dict:
    """Over the seeds: total and median times, and the per-heater RMS figures' median and worst."""
    med = [r["heater_rms_median_rad"] for r in rows]
    worst = [r["heater_rms_worst_rad"] for r in rows]
    return {"seeds": len(rows), "cpu_s_total": round(sum(r["cpu_s"] for r in rows), 2),
            "cpu_s_median": float(np.median([r["cpu_s"] for r in rows])),
            "wall_s_total": round(sum(r["wall_s"] for r in rows), 2),
            "heater_rms_median_over_seeds_rad": float(np.median(med)),
            "heater_rms_median_worst_seed_rad": max(med),
            "heater_rms_worst_median_over_seeds_rad": float(np.median(worst)),
            "heater_rms_worst_worst_seed_rad": max(worst),
            "unverified_total": sum(r["unverified"] for r in rows),
            "failed_total": sum(r["failed"] for r in rows)}


if __name__ == "__main__":
    main()
