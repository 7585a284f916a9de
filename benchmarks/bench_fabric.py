"""Fabric benchmarks: failover compute and modelled recovery time, all-to-all schedules.

Run: .venv/bin/python benchmarks/bench_fabric.py [failover] [pairs] [tbu] [schedule]
(prints markdown tables; no argument runs them all)
"""

from __future__ import annotations

import collections
import itertools
import statistics
import sys
import time

from calibration.heater_map import IdealMap
from photonics.fabric import (
    FabricError,
    default_fabric,
    fail_tbu,
    failover,
    place_job,
    ring_job,
    schedule,
    spread_ports,
)
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


def _outcome(rec: object) -> str:
    return "hitless" if rec.hitless else f"moved {len(rec.moved)}"


def bench_pairs() -> None:
    """Every two-accelerator failure of the default ring: in sequence, and together (joint spares)."""
    fabric = default_fabric()
    hmap = IdealMap(fabric.mesh.n_heaters)
    plan = place_job(fabric, ring_job(fabric.workers), heater_map=hmap)
    rows = []
    for mode, cases in (("in sequence", list(itertools.permutations(fabric.workers, 2))),
                        ("together", list(itertools.combinations(fabric.workers, 2)))):
        outcomes: collections.Counter[str] = collections.Counter()
        margins, times = [], []
        for a, b in cases:
            t0 = time.perf_counter()
            try:
                if mode == "together":
                    rec = failover(fabric, plan.job, [a, b], plan, heater_map=hmap)
                else:
                    first = failover(fabric, plan.job, a, plan, heater_map=hmap)
                    rec = failover(fabric, first.plan.job, b, first.plan, heater_map=hmap)
            except FabricError:
                outcomes["refused"] += 1
                continue
            times.append((time.perf_counter() - t0) * 1e3)
            outcomes[_outcome(rec)] += 1
            margins.append(rec.plan.worst_margin_db)
        rows.append((mode, len(cases), dict(outcomes), min(margins), statistics.median(times), max(times)))
    print("| failures | cases | outcomes | worst margin dB | compute ms (median / max) |")
    print("|---|---|---|---|---|")
    for mode, n, outcomes, margin, med, top in rows:
        print(f"| two, {mode} | {n} | {outcomes} | {margin:.2f} | {med:.1f} / {top:.1f} |")


def bench_tbu() -> None:
    """Every TBU failure (dead, stuck bar, stuck cross) of every TBU the default ring uses."""
    fabric = default_fabric()
    hmap = IdealMap(fabric.mesh.n_heaters)
    plan = place_job(fabric, ring_job(fabric.workers), heater_map=hmap)
    used = sorted({t for r in plan.routes for t in r.tbus})
    outcomes: collections.Counter[str] = collections.Counter()
    wrote_failed = 0
    times = []
    for t in used:
        for how in ("dead", "bar", "cross"):
            t0 = time.perf_counter()
            try:
                rec = fail_tbu(fabric, plan, t, how, heater_map=hmap)
            except FabricError:
                outcomes["refused"] += 1
                continue
            times.append((time.perf_counter() - t0) * 1e3)
            wrote_failed += bool({2 * t, 2 * t + 1} & set(rec.program))
            kind = ("nothing to do" if not rec.rerouted else
                    f"swap {len(rec.spares)} accelerator(s)" if rec.spares else "re-route")
            outcomes[f"{kind}, {_outcome(rec)}" if rec.rerouted else kind] += 1
    print(f"{len(used)} TBUs x 3 ways = {3 * len(used)} failures; outcomes: {dict(outcomes)}; "
          f"recoveries writing the failed TBU's heaters: {wrote_failed}; "
          f"compute ms median / max {statistics.median(times):.1f} / {max(times):.1f}")


if __name__ == "__main__":
    parts = sys.argv[1:] or ["failover", "pairs", "tbu", "schedule"]
    if "failover" in parts:
        print("## Failover on the default smartlight fabric (ring of 8, 2 spares)\n")
        bench_failover()
    if "pairs" in parts:
        print("\n## Two failures on the default ring\n")
        bench_pairs()
    if "tbu" in parts:
        print("\n## TBU failures on the default ring\n")
        bench_tbu()
    if "schedule" in parts:
        print("\n## All-to-all by matchings\n")
        bench_schedule()
