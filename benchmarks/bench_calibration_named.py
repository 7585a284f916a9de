"""What the calibration names, against the truth, per chip of the trust campaign (session 38).

Per (seed, mesh, mode): the campaign's stressed chip (``instruments.sim.trust_campaign.make_chip``)
calibrated with ``Options()`` and judged, without the campaign's route check (the costly part):

* ``fp``: healthy TBUs recorded failed (dead, bar, cross, a heater fault), not unverified, that
  light could still reach (``unreachable_tbus``): a false positive, healthy hardware written off;
* ``fn``: injected TBUs not named, and healthy ones left unnamed more than 0.1 rad off (the
  campaign's ``OFF_RAD``): false negatives, a wrong answer no one is told about;
* ``unverified``: TBUs named unverified; ``silent_005``: healthy TBUs unnamed more than 0.05
  rad off (the confirmation's tolerance).

One JSON line per chip on stdout, then the totals (``--summary-only`` to print only those).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_calibration_named.py \\
        --meshes hex:3x4,square:4x4 --modes dead_interior,shorted_heater --first-seed 9860 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibration.map import CalibrationError
from calibration.procedure import Options, Progress, calibrate
from instruments.sim.direct import DirectBench
from instruments.sim.trust_campaign import OFF_RAD, make_chip, tbu_errors, unreachable_tbus
from photonics.topology import mesh_from_spec

WITHIN_RAD = 0.05  # the confirmation's tolerance (calibration.confirm.CONFIRM_TOL_RAD)


def judge(spec: str, mode: str, seed: int) -> dict:
    """One chip's figures (see the module docstring)."""
    t0 = time.process_time()
    chip, injected = make_chip(mode, seed, mesh_from_spec(spec))
    names = chip.mesh.tbu_names
    row: dict = {"mesh": spec, "mode": mode, "seed": seed,
                 "injected": {names[t]: how for t, how in injected.items()}}
    try:
        result = calibrate(DirectBench(chip), Options(), progress=Progress(stream=None))
    except CalibrationError as exc:
        return row | {"refused": str(exc)}
    failed = result.cmap.failed
    off, _ = tbu_errors(result.cmap, chip)
    cut = unreachable_tbus(chip.mesh, injected)
    healthy = [t for t in range(chip.mesh.n_tbus) if t not in injected]
    return row | {
        "fp": [names[t] for t, how in failed.items()
               if t not in injected and t not in cut and how != "unverified"],
        "fn": [names[t] for t in injected if t not in failed]
        + [names[t] for t in healthy if t not in failed and off[t] > OFF_RAD],
        "unverified": [names[t] for t, how in failed.items() if how == "unverified"],
        "silent_005": [names[t] for t in healthy if t not in failed and off[t] > WITHIN_RAD],
        "ops": result.operations, "cpu_s": round(time.process_time() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Judge every chip asked for; exit 1 when any false negative was found."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meshes", default="smartlight,hex:3x4,square:4x4")
    p.add_argument("--modes", default="default,dead_interior,shorted_heater")
    p.add_argument("--first-seed", type=int, default=9860)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--summary-only", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for spec in args.meshes.split(","):
            for mode in args.modes.split(","):
                rows.append(judge(spec, mode, seed))
                if not args.summary_only:
                    print(json.dumps(rows[-1]), flush=True)
    done = [r for r in rows if "refused" not in r]
    total = {k: sum(len(r[k]) for r in done) for k in ("fp", "fn", "unverified", "silent_005")}
    print(json.dumps({"chips": len(rows), "refused": len(rows) - len(done),
                      "injected": sum(len(r["injected"]) for r in rows), **total}))
    return 1 if total["fn"] else 0


if __name__ == "__main__":
    sys.exit(main())
