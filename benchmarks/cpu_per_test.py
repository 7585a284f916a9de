"""A pytest plugin that records each test's CPU time, for finding where the suite's work goes.

Wall-clock durations (``--durations``) on a shared machine say more about the load than
about the test; CPU time says what the test itself costs. For each test (setup, call and
teardown) this writes one JSON line: the test id, the CPU seconds of the worker process
plus the children it waited for (``resource.getrusage``: a subprocess counts once
``subprocess.run`` or ``Popen.wait`` has reaped it), and the wall seconds. Processes forked
by ``tests/lumion_zygote.py`` are reaped by the zygote, not the worker: their CPU is not
counted. One file per pytest-xdist worker, ``$LUMION_CPU_LOG.<worker>``::

    LUMION_CPU_LOG=/tmp/cpu PYTHONPATH=.:benchmarks .venv/bin/python -m pytest -n 2 \\
        --dist worksteal -p cpu_per_test -m slow -q
    cat /tmp/cpu.* | python benchmarks/cpu_per_test.py      # the 40 costliest, and the sum
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

DEFAULT_LOG = "/tmp/lumion-cpu"  # the log files' prefix when LUMION_CPU_LOG is not set
SHOWN = 40  # tests listed by the summary


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and of the children it has reaped."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any) -> Iterator[None]:
    """Time one test's setup, call and teardown; append its line to this worker's file."""
    cpu0, wall0 = cpu_s(), time.monotonic()
    yield
    row = {"id": item.nodeid, "cpu": round(cpu_s() - cpu0, 2), "wall": round(time.monotonic() - wall0, 2)}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{os.environ.get('LUMION_CPU_LOG', DEFAULT_LOG)}.{worker}", "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def main() -> None:
    """Read the JSON lines on stdin; print the costliest tests by CPU and the totals (s)."""
    rows = sorted((json.loads(line) for line in sys.stdin if line.strip()), key=lambda r: -r["cpu"])
    for r in rows[:SHOWN]:
        print(f"{r['cpu']:7.2f} s CPU {r['wall']:7.2f} s wall  {r['id']}")
    cpu, wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
    print(f"{len(rows)} tests: {cpu:.1f} s CPU, {wall:.1f} s wall")


if __name__ == "__main__":
    main()
