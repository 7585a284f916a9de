"""The suite's order (tests/conftest.py): heaviest files first, each file's tests together."""

from tests.conftest import SLOW_GUESS_S, file_weights, guessed_weights, heaviest_files_first

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
