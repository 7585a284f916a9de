"""The suite's order (tests/conftest.py): heaviest files first, each file's tests together."""

import re
from pathlib import Path

from tests.conftest import (
    RECORD,
    SLOW_GUESS_S,
    _load_record,
    file_weights,
    guessed_weights,
    heaviest_files_first,
    run_weights,
)

IDS = ["tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "tests/c.py::t1[x]", "tests/c.py::t1[y]"]


def test_heaviest_file_first_and_each_file_together_in_its_order():
    weights = file_weights({"tests/b.py::t1": 3.0, "tests/c.py::t1[x]": 1.0, "tests/c.py::t1[y]": 2.5})
    assert weights == {"tests/b.py": 3.0, "tests/c.py": 3.5}
    order = [IDS[k] for k in heaviest_files_first(IDS, weights)]
    # c (3.5 s) before b (3 s); a is unknown: last, its tests in their order
    assert order == ["tests/c.py::t1[x]", "tests/c.py::t1[y]", "tests/b.py::t1",
                     "tests/a.py::t1", "tests/a.py::t2"]


def test_without_weights_the_collected_order_stays():
    assert heaviest_files_first(IDS, {}) == list(range(len(IDS)))


def test_slow_tests_weigh_a_file_the_record_does_not_know():
    slow = [False, True, True, True, True]
    guess = guessed_weights(IDS, slow, known={"tests/c.py"})
    assert guess == {"tests/a.py": SLOW_GUESS_S, "tests/b.py": SLOW_GUESS_S}


def test_only_the_tests_that_run_weigh_their_file():
    """Under -m "not slow" a file heavy by its slow tests alone goes after the files whose
    quick tests take the time (the quick suite was ordered by whole-file weights)."""
    record = {"tests/a.py::quick": 0.1, "tests/a.py::long": 60.0, "tests/b.py::quick": 3.0}
    quick = ["tests/a.py::quick", "tests/b.py::quick", "tests/c.py::t1"]
    weights = run_weights(quick, [False, False, False], record)
    assert weights == {"tests/a.py": 0.1, "tests/b.py": 3.0}
    assert [quick[k] for k in heaviest_files_first(quick, weights)] == quick[1::-1] + quick[2:]
    everything = [*quick, "tests/a.py::long"]
    assert run_weights(everything, [False, False, True, True], record) == {
        "tests/a.py": 60.1, "tests/b.py": 3.0, "tests/c.py": SLOW_GUESS_S}  # c: not in the record


# The committed record may miss a few files with slow tests added since it was made: those
# are weighed by the guess (SLOW_GUESS_S per slow test). Below this share it is stale.
RECORD_COVERS_MIN = 0.9


# A test marked slow: a decorator, a module's pytestmark, or a parameter's marks.
SLOW_MARK = re.compile(
    r"^\s*@pytest\.mark\.slow|^pytestmark\b.*pytest\.mark\.slow|marks=\[?pytest\.mark\.slow", re.M)


def files_with_slow_tests(root: Path) -> set[str]:
    """Test files (``tests/...`` paths) that mark a test, or themselves, slow."""
    return {str(p.relative_to(root.parent)) for p in root.rglob("test_*.py")
            if SLOW_MARK.search(p.read_text(encoding="utf-8"))}


def test_the_committed_record_weighs_the_files_with_slow_tests():
    """A fresh clone has no run of its own: the committed record orders it (issue 29)."""
    weights = file_weights(_load_record(RECORD))
    slow = files_with_slow_tests(RECORD.parent)
    known = slow & set(weights)
    assert len(known) >= RECORD_COVERS_MIN * len(slow), (
        f"tests/durations.json weighs {len(known)} of the {len(slow)} files with slow tests; record "
        f"it again (tests/conftest.py says how). Missing: {sorted(slow - known)}")


def test_an_unreadable_record_weighs_nothing(tmp_path):
    bad = tmp_path / "durations.json"
    bad.write_text("{not json", encoding="utf-8")
    assert _load_record(bad) == {}
    assert _load_record(tmp_path / "absent.json") == {}
    bad.write_text('["a list"]', encoding="utf-8")
    assert _load_record(bad) == {}


def test_the_garbage_collector_is_back_on_once_the_suite_is_collected():
    """tests/conftest.py turns it off while collecting; left off, a worker would keep every
    cycle of garbage its tests make until the run ends."""
    import gc

    from tests.conftest import GC_YOUNG_THRESHOLD

    assert gc.isenabled()
    assert gc.get_threshold()[0] == GC_YOUNG_THRESHOLD
