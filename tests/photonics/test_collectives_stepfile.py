"""Step files (TACCL-style): the examples load and complete; mistakes get one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from photonics.collectives import CollectiveError, load_steps, parse_steps, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def base(**over):
    d = {"schema": "lumion.collective-steps", "version": 1, "collective": "allreduce", "ranks": 2,
         "chunks": 1, "step": [{"op": "reduce", "sends": [[0, 1, 0]]}, {"sends": [[1, 0, 0]]}]}
    d.update(over)
    return d


def test_examples_load_and_complete():
    ring = load_steps(EXAMPLES / "allreduce-ring-4.toml")
    assert (ring.kind, ring.n_ranks, ring.n_chunks, len(ring.steps)) == ("allreduce", 4, 4, 6)
    assert simulate(ring).complete
    a2a = load_steps(EXAMPLES / "alltoall-pairs-4.json")
    assert a2a.kind == "alltoall"
    assert simulate(a2a).complete


def test_minimal_file_and_per_send_op():
    coll = parse_steps(base())
    assert coll.steps[0].sends[0].op == "reduce"
    assert coll.steps[1].sends[0].op == "copy"
    coll = parse_steps(base(step=[{"sends": [[0, 1, 0, "reduce"]]}, {"sends": [[1, 0, 0]]}]))
    assert coll.steps[0].sends[0].op == "reduce"


@pytest.mark.parametrize(("change", "message"), [
    ({"schema": "x"}, "not a LUMION step file"),
    ({"version": 2}, "unsupported version"),
    ({"extra": 1}, "unknown field"),
    ({"collective": "gather"}, "collective must be one of"),
    ({"ranks": 1}, "ranks must be an integer >= 2"),
    ({"chunks": 0}, "chunks must be an integer >= 1"),
    ({"step": []}, "at least one step"),
    ({"step": [{"sends": [[0, 2, 0]]}]}, "step 1, send 1: send 0 -> 2 names a rank outside"),
    ({"step": [{"sends": [[0, 1, 3]]}]}, "chunk 3 is outside"),
    ({"step": [{"sends": [[0, 1]]}]}, r"write it \[src, dst, chunk\]"),
    ({"step": [{"sends": [[0, 1, "a"]]}]}, "are integers"),
    ({"step": [{"op": "sum", "sends": [[0, 1, 0]]}]}, "op must be one of"),
    ({"step": [{"sends": [[0, 1, 0]]}]}, "does not complete the allreduce: rank 0 chunk 0 lacks"),
    ({"step": [{"op": "reduce", "sends": [[0, 1, 0], [0, 1, 0]]}]}, "listed twice"),
])
def test_mistakes_are_one_line_errors(change, message):
    with pytest.raises(CollectiveError, match=message) as info:
        parse_steps(base(**change), "my.json")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("my.json")


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(CollectiveError, match="not found"):
        load_steps(tmp_path / "missing.json")
    bad = tmp_path / "s.yaml"
    bad.write_text("x")
    with pytest.raises(CollectiveError, match=r"\.json or \.toml"):
        load_steps(bad)
    broken = tmp_path / "s.json"
    broken.write_text("{")
    with pytest.raises(CollectiveError, match="not valid JSON"):
        load_steps(broken)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(base()))
    assert load_steps(ok).name == "ok"
