"""Fabric benchmarks: failover compute and modelled recovery time, all-to-all schedules.

Run: .venv/bin/python benchmarks/bench_fabric.py   (prints markdown tables)
"""

from __future__ import annotations

import statistics
import time

from calibration.heater_map import IdealMap
from photonics.fabric import default_fabric, failover, place_job, ring_job, schedule, spread_ports
from photonics.topology import hexagonal, smartlight


def bench_failover(repeats: int = 20) -> None:
    fabric = default_fabric()
    hmap = IdealMap(fabric.mesh.n_heaters)
    job = ring_job(fabric.workers)
    plan = place_job(fabric, job, heater_map=hmap)
    failover(fabric, job, "gpu0", plan, heater_map=hmap)  # warm caches
    print("| failed | spare | re-routed | TBUs changed | heaters written | compute ms (median / min) "
          "| write ms | total ms (modelled) | worst new margin dB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for victim in fabric.workers:
        times = []
        for _ in range(repeats):
            rec = failover(fabric, job, victim, plan, heater_map=hmap)
            times.append(rec.timing_ms["compute"])
        t = dict(rec.timing_ms)
        t["compute"] = statistics.median(times)
        total = sum(v for k, v in t.items() if k != "total")
        margin = min(rec.plan.links[i].margin_db for i in rec.rerouted)
        print(f"| {victim} | {rec.spare} | {len(rec.rerouted)} | {len(rec.changed_tbus)} "
              f"| {len(rec.program)} "
              f"| {statistics.median(times):.2f} / {min(times):.2f} | {t['write']:.2f} | {total:.2f} "
              f"| {margin:.2f} |")


def bench_schedule() -> None:
    print("| mesh | ports | configurations | lower bound | labelings tried | time s | worst loss dB "
          "| worst ACR dB | worst margin dB | budget enforced |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, mesh, n, budget in (("smartlight", smartlight(), 8, True),
                                  ("smartlight", smartlight(), 16, True),
                                  ("hex:9x9", hexagonal(9, 9), 16, False),
                                  ("hex:9x9", hexagonal(9, 9), 32, False)):
        t0 = time.perf_counter()
        s = schedule(mesh, spread_ports(mesh, n), require_budget=budget)
        dt = time.perf_counter() - t0
        print(f"| {name} | {n} | {len(s.configs)} | {s.lower_bound} | {s.labelings_tried} | {dt:.2f} "
              f"| {max(c.worst_loss_db for c in s.configs):.1f} "
              f"| {min(c.worst_acr_db for c in s.configs):.1f} "
              f"| {min(c.worst_margin_db for c in s.configs):.1f} | {'yes' if budget else 'no'} |")


if __name__ == "__main__":
    print("## Failover on the default smartlight fabric (ring of 8, 2 spares)\n")
    bench_failover()
    print("\n## All-to-all by matchings\n")
    bench_schedule()
