"""The control plane's kill -9 soak: many crash trials of tests/controlplane/test_crash_safety.py.

The test runs 40 trials (every reconciliation outcome occurs, each restart checked); this runs
the same test with more trials (100 by default, as docs/controlplane.md reports) and prints the
outcome counts and the wall time.

    python benchmarks/bench_crash_soak.py [--trials 100]   (make bench runs it)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/controlplane/test_crash_safety.py::test_kill9_during_recoveries_then_restart"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=100)
    args = p.parse_args(argv)
    env = {**os.environ, "LUMION_CRASH_TRIALS": str(args.trials),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    # -s: the test prints its outcome counts; -p no:xdist: one process, the soak is serial
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:xdist", TEST],
                          cwd=ROOT, env=env, check=False)
    print(f"{args.trials} crash trials: exit {proc.returncode} in {time.perf_counter() - t0:.1f} s "
          f"(load average {os.getloadavg()[0]:.1f})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
