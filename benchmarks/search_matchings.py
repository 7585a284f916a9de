"""All-to-all at the N - 1 bound: `schedule` on N spread ports of smartlight (16 by default).

No circle-method labeling of the 16 spread ports routes all 15 of its matchings, so
`photonics.fabric.schedule` falls back to its 1-factorization search
(`photonics.fabric.factorize`). This script runs `schedule` as `lumion schedule` does, once
per seed, and reports for each run the configurations, the method, the matchings the
search routed, CPU time (`time.process_time`) and wall clock, and the load average (the
machine may be shared). Every configuration of the result is re-checked here: a perfect
matching, every pair once, conflict-free routes (`conflicts`) and the circuit solve's
transmission (`check_routes`), margin >= 3 dB.

Run: python benchmarks/search_matchings.py [--ports 16] [--seeds 0,1,2] [--table]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

from photonics.fabric import schedule, spread_ports
from photonics.routing import check_routes, conflicts
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import smartlight

MARGIN_DB = REQUIRED_MARGIN_DB  # schedule's default required margin, re-checked on every link


def verify(mesh, s) -> None:
    """Raise AssertionError unless ``s`` is a conflict-free all-to-all of its ports."""
    pairs = [frozenset(p) for c in s.configs for p in c.pairs]
    assert sorted(pairs, key=sorted) == sorted({frozenset(p) for p in itertools.combinations(s.ports, 2)},
                                               key=sorted), "pairs not covered exactly once"
    for c in s.configs:
        routes = list(c.configuration.routes)
        assert not conflicts(mesh, routes), f"conflicting routes in {c.pairs}"
        for chk, t in zip(check_routes(mesh, c.configuration, routes), c.transmissions_db, strict=True):
            assert chk.transmission_db >= t - 1e-9
        assert c.worst_margin_db >= MARGIN_DB, f"margin below {MARGIN_DB} dB in {c.pairs}"
        if not c.split:
            assert sorted(v for p in c.pairs for v in p) == sorted(s.ports), "not a perfect matching"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", type=int, default=16)
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    ap.add_argument("--table", action="store_true", help="print each configuration of the last run")
    args = ap.parse_args(argv)
    mesh = smartlight()
    ports = spread_ports(mesh, args.ports)
    print(f"ports {ports}; bound {len(ports) - 1} configurations")
    print("| seed | configurations | method | search questions | CPU s | wall s | load (1 min) |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    s = None
    for seed in (int(x) for x in args.seeds.split(",")):
        c0, w0 = time.process_time(), time.perf_counter()
        s = schedule(mesh, ports, seed=seed,
                     progress=lambda line: print(line, file=sys.stderr, flush=True))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        verify(mesh, s)
        print(f"| {seed} | {len(s.configs)} | {s.method} | {s.search_checks} | {cpu:.1f} | {wall:.1f} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)
    if args.table and s is not None:
        print("\n| # | pairs | worst loss (dB) | worst ACR (dB) | margin (dB) |\n|---|---|---:|---:|---:|")
        for k, c in enumerate(s.configs):
            print(f"| {k + 1} | {', '.join(f'({a}, {b})' for a, b in c.pairs)} | {c.worst_loss_db:.1f} | "
                  f"{c.worst_acr_db:.1f} | {c.worst_margin_db:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
