"""Job traces: CSV and JSON lines, refusals, seeded synthetic traces."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from photonics.rack import RackError, TraceJob, load_trace, parse_trace, synthetic_trace, trace_to_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_examples_load():
    csv_jobs = load_trace(EXAMPLES / "rack-trace-small.csv")
    assert len(csv_jobs) == 12
    assert {j.pattern for j in csv_jobs} == {"ring", "line", "all-to-all"}
    jl = load_trace(EXAMPLES / "rack-trace-synthetic-24.jsonl")
    assert jl == synthetic_trace(24, seed=7)


def test_csv_sorted_by_arrival_and_default_names():
    jobs = parse_trace("arrival_h,size,pattern,duration_h\n2,4,ring,1\n1,2,line,0.5\n")
    assert [j.arrival_h for j in jobs] == [1.0, 2.0]
    assert [j.name for j in jobs] == ["job1", "job0"]
    assert jobs[0] == TraceJob("job1", 1.0, 2, "line", 0.5)


def test_jsonl_round_trip():
    jobs = synthetic_trace(10, seed=3)
    assert parse_trace(trace_to_jsonl(jobs)) == jobs


@pytest.mark.parametrize(("text", "message"), [
    ("arrival_h,size,pattern,duration_h\n0,4,star,1\n", "pattern must be one of"),
    ("arrival_h,size,pattern,duration_h\n0,1,ring,1\n", "size must be an integer >= 2"),
    ("arrival_h,size,pattern,duration_h\n0,2.5,ring,1\n", "size must be an integer"),
    ("arrival_h,size,pattern,duration_h\n-1,4,ring,1\n", "arrival_h must be a number >= 0"),
    ("arrival_h,size,pattern,duration_h\n0,4,ring,0\n", "duration_h must be a number > 0"),
    ("arrival_h,size,pattern,duration_h\n0,4,ring,nan\n", "duration_h must be a number > 0"),
    ("arrival_h,size,pattern\n0,4,ring\n", "missing field(s) duration_h"),
    ("arrival_h,size,pattern,duration_h\n0,four,ring,1\n", "must be numbers"),
    ("arrival_h,size,pattern,duration_h\n0,4,ring,1,9\n", "more values than the header"),
    ("arrival_h,size,pattern,duration_h,colour\n0,4,ring,1,red\n", "unknown field(s) colour"),
    ("arrival_h,size,pattern,duration_h\n", "holds no jobs"),
    ("", "is empty"),
    ('{"arrival_h": 0, "size": 2, "pattern": "ring", "duration_h": 1}\n{oops\n', "line 2: not valid JSON"),
    ('[1, 2]\n', "must be a JSON object"),
    ('{"name": "a", "arrival_h": 0, "size": 2, "pattern": "ring", "duration_h": 1}\n'
     '{"name": "a", "arrival_h": 1, "size": 2, "pattern": "ring", "duration_h": 1}\n', "used twice"),
])
def test_refusals_are_one_line(text, message):
    with pytest.raises(RackError) as err:
        parse_trace(text, "t", "jsonl" if text.startswith(("{", "[")) else "csv")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(RackError, match="not found"):
        load_trace(tmp_path / "none.csv")


def test_synthetic_is_seeded():
    a, b, c = synthetic_trace(20, seed=5), synthetic_trace(20, seed=5), synthetic_trace(20, seed=6)
    assert a == b
    assert a != c
    assert a[0].arrival_h == 0.0
    assert all(x.arrival_h <= y.arrival_h for x, y in itertools.pairwise(a))
    with pytest.raises(RackError):
        synthetic_trace(0, seed=1)
