"""How long `lumion --help` takes: a fresh interpreter printing the help, against a bare one.

Each repeat starts ``python -m lab_scripts.cli --help`` (what the ``lumion`` script runs)
and ``python -c pass`` alternately, wall clock of the whole process; best and median of
``--repeats``, with the load average at the start (the machine is shared). ``--also MODULE``
times importing a module the same way (e.g. ``photonics.rack.simulate``, the import that
used to dominate the help: issue 29).

Usage: python benchmarks/bench_cli_help.py [--repeats 21] [--also photonics.rack.simulate]
       [--against OLD-CHECKOUT] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall_s(argv: list[str], root: Path = ROOT) -> float:
    """Wall-clock seconds of one process running ``argv`` from checkout ``root`` (output discarded)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    start = time.perf_counter()
    subprocess.run(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(cases: dict[str, tuple[list[str], Path]], repeats: int) -> dict[str, dict[str, float]]:
    """Best and median wall time (ms) per case (argv, checkout), the cases run alternately."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (argv, root) in cases.items():
            times[name].append(wall_s(argv, root))
    return {name: {"best_ms": 1e3 * min(t), "median_ms": 1e3 * statistics.median(t)}
            for name, t in times.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--also", action="append", default=[], metavar="MODULE")
    parser.add_argument("--against", metavar="CHECKOUT", help="also time the help of another checkout "
                        "(e.g. a git worktree of an older revision), alternately with this one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    help_argv = [sys.executable, "-m", "lab_scripts.cli", "--help"]
    cases = {"python -c pass": ([sys.executable, "-c", "pass"], ROOT), "lumion --help": (help_argv, ROOT)}
    if args.against:
        cases[f"lumion --help ({args.against})"] = (help_argv, Path(args.against).resolve())
    for module in args.also:
        cases[f"import {module}"] = ([sys.executable, "-c", f"import {module}"], ROOT)
    load = os.getloadavg()[0]
    result = measure(cases, args.repeats)
    if args.json:
        print(json.dumps({"load_average": load, "repeats": args.repeats, "cases": result}, indent=1))
        return 0
    print(f"load average {load:.2f} at the start, {args.repeats} repeats, wall clock of a fresh process")
    width = max(len(name) for name in result)
    print(f"{'case':{width}s} {'best ms':>8s} {'median ms':>10s}")
    for name, r in result.items():
        print(f"{name:{width}s} {r['best_ms']:8.1f} {r['median_ms']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
