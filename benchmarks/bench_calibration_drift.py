"""Drift during calibration (issue 26 item 4): errors vs truth at 0, 1, 3, 6 K/min, and what it costs.

Per seed and rate, a realistic SmartLight-class chip on a frozen wall clock (the same bytes every
run) whose temperature rises at the rate from the start is calibrated with default ``Options()``
and judged against its truth at the end of the run (``instruments.sim.trust_campaign.tbu_errors``:
a TBU's error is the larger of its offset error and its heaters' setpoint RMS errors). Seeds 9200+:
no test uses them. Drift is tracked (``Options()``: ``drift_references=4``, the default); ``--no-tracking``
runs without (``drift_references=0``: the procedure before issue 26 item 4).

    python benchmarks/bench_calibration_drift.py --seeds 6 --rates 0,1,3,6 [--no-tracking]

One JSON line per chip on stdout, then a per-rate summary line.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from calibration.map import CalibrationError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import OFF_RAD, tbu_errors
from photonics.topology import smartlight

FIRST_SEED = 9200


def run_chip(seed: int, k_per_min: float, options: Options) -> dict:
    """Calibrate one drifting chip; its figures (or the refusal's line)."""
    chip = Chip(smartlight(), seed, clock=lambda: 0.0)
    if k_per_min:
        chip.set_temperature_profile(lambda t_s: k_per_min * t_s / 60.0)
    bench = DirectBench(chip)
    row = {"seed": seed, "k_per_min": k_per_min}
    try:
        result = calibrate(bench, options, progress=Progress(stream=None))
    except CalibrationError as exc:
        return row | {"refused": str(exc), "operations": bench.operations}
    cmap = result.cmap
    off, heater_rms = tbu_errors(cmap, chip)
    ok = [t for t in range(chip.mesh.n_tbus) if t not in cmap.failed]
    heaters = [h for h in range(chip.mesh.n_heaters) if h // 2 not in cmap.failed]
    drift = cmap.quality.get("drift", {})
    return row | {
        "operations": result.operations, "named": len(cmap.failed),
        "silent_over_0_1_rad": int(np.sum(off[ok] > OFF_RAD)),
        "tbu_error_rms_rad": float(np.sqrt(np.mean(off[ok] ** 2))), "tbu_error_max_rad": float(off[ok].max()),
        "heater_rms_median_rad": float(np.median(heater_rms[heaters])),
        "heater_rms_worst_rad": float(heater_rms[heaters].max()),
        "reference_operations": drift.get("reference_operations", 0),
        "drift_k_per_min_seen": drift.get("drift_k_per_min"),
        "compensated_tbus": drift.get("drift_compensated_tbus", 0),
    }


def summary(rows: list[dict]) -> dict:
    """Per rate: chips, refused, silent, TBU error RMS median / max, worst heater, operations."""
    done = [r for r in rows if "refused" not in r]
    return {"chips": len(rows), "refused": len(rows) - len(done),
            "silent_over_0_1_rad": sum(r["silent_over_0_1_rad"] for r in done),
            "tbu_error_rms_median_rad": (float(np.median([r["tbu_error_rms_rad"] for r in done]))
                                         if done else None),
            "tbu_error_max_rad": max((r["tbu_error_max_rad"] for r in done), default=None),
            "heater_rms_worst_rad": max((r["heater_rms_worst_rad"] for r in done), default=None),
            "operations_median": float(np.median([r["operations"] for r in done])) if done else None,
            "reference_operations_median": float(np.median([r["reference_operations"] for r in done]))
            if done else None}


def main(argv: list[str] | None = None) -> int:
    """Run every seed at every rate; exit 1 if anything was silently more than 0.1 rad off."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=6)
    p.add_argument("--first-seed", type=int, default=FIRST_SEED)
    p.add_argument("--rates", default="0,1,3,6", help="K/min, comma-separated")
    p.add_argument("--no-tracking", action="store_true", help="Options(drift_references=0): tracking off")
    args = p.parse_args(argv)
    options = Options(drift_references=0) if args.no_tracking else Options()
    rates = [float(x) for x in args.rates.split(",") if x]
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for rate in rates:
            rows.append(run_chip(seed, rate, options))
            print(json.dumps(rows[-1]), flush=True)
    silent = 0
    for rate in rates:
        s = summary([r for r in rows if r["k_per_min"] == rate])
        silent += s["silent_over_0_1_rad"]
        print(json.dumps({"k_per_min": rate} | s), flush=True)
    return 1 if silent else 0


if __name__ == "__main__":
    raise SystemExit(main())
