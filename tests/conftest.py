"""The suite's order: the files that take longest run first, so two workers stay busy to the end.

pytest-xdist hands tests to workers in collection order. Alphabetical order can leave a
60-second test to start last on one worker while the other sits idle (issue 29). Each test
file is weighed: by the seconds its tests took in a measured run when there is a record
(``tests/durations.json``: setup + call + teardown per test, summed per file, of the tests
selected to run: ``-m "not slow"`` weighs the quick ones), otherwise by its tests marked
``slow`` (``SLOW_GUESS_S`` each). The heaviest files run first, a file's
tests stay together and in their own order (a module fixture is set up once per worker), and
files of no weight keep their order after the rest. The order depends only on the record and
the markers, never on this run's timing, so every worker collects the same list.

To record durations (a whole run: 10 min at load ~5 here)::

    LUMION_RECORD_DURATIONS=tests/durations.json .venv/bin/python -m pytest -n 2 -q

The garbage collector is off while the suite is collected (what collection makes, modules and
test items, lives to the end) and runs with a larger young generation after that
(:func:`pytest_collection`). No test's outcome depends on when cyclic garbage is freed; the
collector's time is what changes.
"""

from __future__ import annotations

import gc
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

RECORD = Path(__file__).with_name("durations.json")
RECORD_ENV = "LUMION_RECORD_DURATIONS"
# Tests shorter than this (s) are left out of the record: ordering files by their long tests
# is what matters, and the record stays small enough to read in a diff.
RECORD_MIN_S = 0.05
# The weight of a test marked slow in a file the record does not know: "over about a second"
# (pyproject.toml's marker), and the slow process, layout and calibration tests take 2-60 s.
SLOW_GUESS_S = 5.0
# Objects allocated between young collections once the suite is collected (CPython's default
# 700): a worker's young collections then run 10x less often and each finds more of its objects
# already freed by their reference counts. With collection's collector off as well, its CPU in a
# one-process run of tests/photonics fell from 1.65 s to 0.41 s (gc.callbacks; gc.freeze() of
# collection's objects gained nothing more, 0.35 s, and hides them from gc.get_referrers, which
# hypothesis's register_random relies on: a false warning).
GC_YOUNG_THRESHOLD = 7000

# hypothesis loads its third-party plugins when first imported (collection does it); the one
# installed is trio's (deterministic trio scheduling: no test here runs trio), whose import and
# the full garbage collection hypothesis's register_random makes cost each worker ~0.5 s
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")


def file_of(nodeid: str) -> str:
    """The test file part of a node id (``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``)."""
    return nodeid.split("::", 1)[0]


def file_weights(durations: dict[str, float]) -> dict[str, float]:
    """Seconds per test file: the sum of its tests' recorded durations."""
    weights: dict[str, float] = defaultdict(float)
    for nodeid, seconds in durations.items():
        weights[file_of(nodeid)] += seconds
    return dict(weights)


def heaviest_files_first(nodeids: list[str], weights: dict[str, float]) -> list[int]:
    """Indices of ``nodeids`` in run order: files by weight (heaviest first), each file's tests
    together in their collected order; files without a weight after the rest, in their order."""
    first_seen: dict[str, int] = {}
    for k, nodeid in enumerate(nodeids):
        first_seen.setdefault(file_of(nodeid), k)

    def key(k: int) -> tuple[float, int, int]:
        name = file_of(nodeids[k])
        return (-weights.get(name, 0.0), first_seen[name], k)

    return sorted(range(len(nodeids)), key=key)


def _load_record(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def guessed_weights(nodeids: list[str], slow: list[bool], known: set[str]) -> dict[str, float]:
    """``SLOW_GUESS_S`` per test marked slow, per file not in ``known``."""
    weights: dict[str, float] = defaultdict(float)
    for nodeid, is_slow in zip(nodeids, slow, strict=True):
        if is_slow and file_of(nodeid) not in known:
            weights[file_of(nodeid)] += SLOW_GUESS_S
    return dict(weights)


def run_weights(nodeids: list[str], slow: list[bool], record: dict[str, float]) -> dict[str, float]:
    """Seconds per test file of the tests that will run: their recorded durations, plus the
    guess for slow tests of files the record does not know at all.

    Only the tests selected count: under ``-m "not slow"`` a file whose recorded time is its
    slow tests (the docs examples' shell blocks, the kill -9 soak) has a few light tests left
    and must not go first, ahead of the files whose quick tests take the time.
    """
    selected = set(nodeids)
    weights = file_weights({k: v for k, v in record.items() if k in selected})
    weights.update(guessed_weights(nodeids, slow, set(file_weights(record))))
    return weights


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session):
    """Collect with the garbage collector off, then turn it on with a larger young generation.
    Under xdist the controller collects nothing: it gets the collector back here too.
    """
    try:
        yield
    finally:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        gc.enable()


@pytest.hookimpl(trylast=True)  # after -m/-k deselected theirs: order what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    nodeids = [item.nodeid for item in items]
    slow = [item.get_closest_marker("slow") is not None for item in items]
    order = heaviest_files_first(nodeids, run_weights(nodeids, slow, _load_record(RECORD)))
    items[:] = [items[k] for k in order]


class _Recorder:
    """Sums each test's setup, call and teardown durations; writes them at the end (controller)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        kept = {k: round(v, 2) for k, v in sorted(self.seconds.items()) if v >= RECORD_MIN_S}
        self.path.write_text(json.dumps(kept, indent=0) + "\n", encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    # Collecting the suite allocates a few hundred thousand objects (modules, classes, test
    # items) that all live to the end, and the collector scanned them ~600 times for nothing
    # (0.65-0.77 s of a worker's ~6 s collection): off until collection ends (pytest_collection).
    gc.disable()
    path = os.environ.get(RECORD_ENV)
    if path and not hasattr(config, "workerinput"):  # the controller sees every worker's reports
        config.pluginmanager.register(_Recorder(Path(path)), "lumion-durations")
