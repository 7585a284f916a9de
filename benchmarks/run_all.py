"""Run every benchmark script (benchmarks/bench_*.py) in turn and print their tables.

Usage: make bench   (or: python benchmarks/run_all.py [NAME ...] to run a subset)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(name in s.stem for name in argv)]
    failed = []
    for script in scripts:
        print(f"\n## {script.stem}\n", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"\n({script.name}: exit {code}, {time.perf_counter() - start:.1f} s)", flush=True)
        if code:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
