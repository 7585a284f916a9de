"""Campaign time against workers: the same yield campaign on 1 and 2 local processes and on a
2-worker dask.distributed LocalCluster over loopback, in one run (ratios against 1 worker).

The machine has 2 cores (shared), so 2 workers is the most that can help. Every run must
give the same table (checked); only the time may differ.

Usage: python benchmarks/bench_campaign.py [--chips N] [--mesh SPEC]
"""

from __future__ import annotations

import argparse
import time

from campaigns import run_tasks
from campaigns.yield_kind import chip_task, yield_summary, yield_tasks
from photonics.tolerances import REQUIRED_MARGIN_DB


def timed(label, fn):
    t0 = time.perf_counter()
    rows = fn()
    return label, time.perf_counter() - t0, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chips", type=int, default=24)
    ap.add_argument("--mesh", default="smartlight")
    args = ap.parse_args()
    tasks = yield_tasks([args.mesh], [0.03], [0.003], chips=args.chips, seed=1, workers=8, spares=2,
                        margin_db=REQUIRED_MARGIN_DB, min_acr_db=25.0)
    runs = [timed("local, 1 worker (synchronous)",
                  lambda: run_tasks(chip_task, tasks, workers=1, progress=False)),
            timed("local, 2 processes", lambda: run_tasks(chip_task, tasks, workers=2, progress=False))]
    from distributed import LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        start_s = time.perf_counter() - t0
        runs.append(timed("LocalCluster, 2 workers (loopback)",
                          lambda: run_tasks(chip_task, tasks, scheduler=cluster.scheduler_address,
                                            progress=False)))
    base_rows = runs[0][2]
    assert all(r[2] == base_rows for r in runs), "a campaign's table changed with the number of workers"
    base = runs[0][1]
    print(f"yield campaign: {len(tasks)} chips on {args.mesh} (8 workers + 2 spares, a placement and "
          "8 failovers per chip); "
          f"yield {yield_summary(base_rows)[0]['yield']:.3f} in every run")
    print("| scheduler | time s | speed-up vs 1 worker |")
    print("|---|---|---|")
    for label, sec, _ in runs:
        print(f"| {label} | {sec:.1f} | {base / sec:.2f}x |")
    print(f"(LocalCluster start-up, not counted above: {start_s:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
