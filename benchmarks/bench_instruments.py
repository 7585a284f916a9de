"""Instrument benchmarks over the real transports (heater driver on a pty).

* whole-chip program: every smartlight heater (142 channels) from zero;
* one-failover delta: one route of three moves to a spare port (truth map and ideal map);
* soak: N reconfigurations alternating between the two plans, no error allowed, memory
  measured with tracemalloc before/after.

    python benchmarks/bench_instruments.py --soak 10000 [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc

import numpy as np

from calibration.heater_map import IdealMap
from instruments.config import open_bench
from instruments.sim.truth_map import TruthMap
from photonics.routing import route_many


def timed(fn, repeat=5):
    out = []
    for _ in range(repeat):
        out.append(fn())
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--soak", type=int, default=10_000, help="reconfigurations in the soak")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--protocol", choices=("binary", "ascii", "both"), default="both",
                   help="the heater driver's wire mode; 'both' measures each in the same run")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    protocols = ("ascii", "binary") if args.protocol == "both" else (args.protocol,)
    results = {proto: run(proto, args) for proto in protocols}
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for proto, res in results.items():
            for k, v in res.items():
                print(proto, k, v)
    return 0


def run(protocol, args):
    results = {}
    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "smartlight", "sim": {"seed": args.seed},
           "heater_driver": {"address": "sim", "protocol": protocol}, "laser": {"address": "sim"},
           "power_meter": {"address": "sim"}}
    with open_bench(cfg, seed=args.seed) as bench:
        chip, mesh, ctl = bench.sim.chip, bench.mesh, bench.controller
        params = chip.truth.params
        a = route_many(mesh, [(5, 28), (12, 33), (20, 2)], params=params, check_budget=False)
        b = route_many(mesh, [(5, 28), (14, 33), (20, 2)], params=params, check_budget=False)
        results["failover_changed_tbus"] = len(b.configuration.changed_tbus(a.configuration))
        for name, hmap in (("truth_map", TruthMap(chip)), ("ideal_map", IdealMap(mesh.n_heaters))):
            ctl.heater_map = hmap
            whole = []
            for _ in range(5):
                ctl.set_currents(np.zeros(mesh.n_heaters))
                whole.append(bench.program(a.configuration))
            delta = []
            for _ in range(5):
                bench.program(a.configuration)
                delta.append(bench.program(b.configuration))
            for label, reps in (("whole_chip", whole), ("failover_delta", delta)):
                r = reps[-1]
                results[f"{label}_{name}"] = {
                    "channels": r.channels, "commands": r.commands, "bytes_written": r.bytes_written,
                    "bytes_read": r.bytes_read, "wire_time_ms": r.wire_time_s * 1e3,
                    "host_time_ms_median": statistics.median(x.elapsed_s for x in reps) * 1e3,
                }
        # soak: alternate plans through the truth map, no error allowed
        ctl.heater_map = TruthMap(chip)
        ca, cb = ctl.currents_for(a.configuration), ctl.currents_for(b.configuration)
        for _ in range(50):  # warm up caches before measuring memory
            ctl.set_currents(ca)
            ctl.set_currents(cb)
        gc.collect()
        tracemalloc.start()
        m0 = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        wire = 0.0
        for k in range(args.soak):
            wire += ctl.set_currents(ca if k % 2 == 0 else cb).wire_time_s
        dt = time.perf_counter() - t0
        gc.collect()
        m1 = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        step = 24.0 / 0xFFFF if protocol == "binary" else 1e-4  # one binary word / 4 ASCII decimals
        ok = bool(np.allclose(chip.currents_ma, cb if args.soak % 2 == 0 else ca, atol=step))
        results["soak"] = {"reconfigurations": args.soak, "errors": 0, "host_time_s": dt,
                           "per_reconfiguration_ms": dt / max(args.soak, 1) * 1e3,
                           "wire_time_s_total": wire, "traced_memory_before_kb": m0 / 1024,
                           "traced_memory_after_kb": m1 / 1024, "memory_growth_kb": (m1 - m0) / 1024,
                           "final_state_correct": ok}
    return results


if __name__ == "__main__":
    raise SystemExit(main())
