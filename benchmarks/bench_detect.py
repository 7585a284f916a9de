"""Optical failure detection, end to end: kill a transmitter, time the declaration and the recovery.

The ControlPlane runs over the simulated bench's real transports (heater driver on a pty,
one SFF-8636 module per accelerator behind an I2C bridge on a pty) with telemetry on the
auto policy. Each round places the 8-accelerator ring, waits until telemetry has seen
every link lit, kills one accelerator's transmitter (``SimulatedBench.kill_transmitter``)
and waits for the recovery; then deletes the job, repairs and revives the accelerator.

Per round: the true detect time (kill to declaration; the kill instant is known only
because the simulator recorded it), the bounds the monitor reports without knowing it
(``detect_min_ms`` .. ``detect_ms``), the recovery's measured detect stage (failure
onset bound to the report) and its whole measured duration (detect to verify).

Usage: python benchmarks/bench_detect.py [--kills 20] [--period-s 0.05] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from controlplane import telemetry

# The tests' rack (simulated bench + opened bench + ControlPlane), loaded by path: an installed
# dependency ships a top-level ``tests`` package that would shadow the repository's.
_spec = importlib.util.spec_from_file_location(
    "lumion_test_rack", Path(__file__).resolve().parents[1] / "tests" / "controlplane" / "rack.py")
_rack = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _rack
_spec.loader.exec_module(_rack)
Rack, wait_for = _rack.Rack, _rack.wait_for

RING = [f"gpu{k}" for k in range(8)]


def _lit(handle: telemetry.Telemetry, names: set[str]) -> bool:
    links = handle.snapshot()["links"]
    return set(links) == names and all(v["armed"] and v["dark"] is False for v in links.values())


def one_round(rack: Rack, handle: telemetry.Telemetry, victim: str) -> dict[str, float]:
    """Place the ring, kill ``victim``, wait for the recovery, undo everything; the times (ms)."""
    job = rack.cp.place_job(accelerators=RING, pattern="ring")
    names = {lk["link"] for lk in rack.cp.status()["links"]}
    wait_for(lambda: _lit(handle, names), what="the ring lit")
    before = max((e["id"] for e in rack.events()), default=0)
    kill = rack.sim.kill_transmitter(victim)
    kill_epoch = time.time() - (time.monotonic() - kill["t_s"])
    recs = wait_for(lambda: [e for e in rack.cp.events(before, 500) if e["kind"] == "recovery"],
                    what="the recovery")
    rec = recs[0]
    dark = next(e for e in rack.cp.events(before, 500) if e["kind"] == "accelerator-dark")
    stages = {s["stage"]: s for s in rec["stages"]}
    out = {
        "true_ms": (dark["declared_s"] - kill_epoch) * 1e3,
        "min_ms": dark["detect_min_ms"],
        "max_ms": dark["detect_ms"],
        "stage_ms": (stages["detect"]["end_s"] - stages["detect"]["start_s"]) * 1e3,
        "total_ms": (max(s["end_s"] for s in rec["stages"]) - stages["detect"]["start_s"]) * 1e3,
        "kill_to_verified_ms": (max(s["end_s"] for s in rec["stages"]) - kill_epoch) * 1e3,
        "polls": dark["polls"],
    }
    rack.cp.delete_job(job["id"])
    rack.cp.repair(victim)
    rack.sim.revive_transmitter(victim)
    return out


def _summary(values: list[float]) -> str:
    v = np.asarray(values)
    return (f"{np.median(v):7.1f} {np.percentile(v, 90):7.1f} {v.min():7.1f} {v.max():7.1f}")


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the per-round table and the distribution."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--period-s", type=float, default=telemetry.DEFAULT_PERIOD_S)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        rack = Rack(Path(tmp) / "cp.db", seed=args.seed)
        handle = telemetry.start(rack.cp, args.period_s, "auto")
        rows = []
        try:
            for k in range(args.kills):
                victim = str(rng.choice(RING))
                rows.append({"victim": victim, **one_round(rack, handle, victim)})
                r = rows[-1]
                print(f"kill {k + 1:2d} {victim}: true {r['true_ms']:6.1f} ms in [{r['min_ms']:6.1f}, "
                      f"{r['max_ms']:6.1f}], detect stage {r['stage_ms']:6.1f} ms, "
                      f"recovery {r['total_ms']:6.1f} ms", flush=True)
            poll_ms = handle.snapshot()["poll_ms"]
        finally:
            handle.stop()
            rack.close()
    inside = sum(r["min_ms"] <= r["true_ms"] <= r["max_ms"] for r in rows)
    print(f"\nperiod {args.period_s * 1e3:.0f} ms, debounce {rows[0]['polls']} polls, {len(rows)} kills, "
          f"last poll {poll_ms:.1f} ms; true detect inside the reported bounds in {inside}/{len(rows)}")
    print("\n| quantity (ms) | median | p90 | min | max |\n|---|---|---|---|---|")
    for key, label in (("true_ms", "kill -> declaration (true)"), ("min_ms", "reported lower bound"),
                       ("max_ms", "reported upper bound"), ("stage_ms", "recovery's detect stage"),
                       ("total_ms", "recovery, detect stage to verified"),
                       ("kill_to_verified_ms", "kill -> links verified (true)")):
        print(f"| {label} | " + " | ".join(_summary([r[key] for r in rows]).split()) + " |")
    ratio = statistics.median(r["true_ms"] for r in rows) / (args.period_s * 1e3)
    print(f"\nmedian true detect / poll period: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
