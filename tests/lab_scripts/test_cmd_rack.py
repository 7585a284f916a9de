"""`lumion rack simulate`: JSON keys, the table, the plot, and one-line refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lab_scripts.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
METRICS = ("accepted_immediately", "accepted_eventually", "queue_delay_mean_h", "queue_delay_p95_h",
           "fragmentation", "bandwidth_per_slice", "utilisation", "throughput_jobs_per_h",
           "goodput_acc_h_per_h", "goodput_fraction", "makespan_h", "splices", "stalls")


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.slow
def test_json_side_by_side(capsys, tmp_path):
    code, d = run_json(capsys, ["rack", "simulate", "--trace", str(EXAMPLES / "rack-trace-small.csv"),
                                "--rack", str(EXAMPLES / "rack-two-smartlight.toml"), "--seed", "1",
                                "--plot", str(tmp_path / "r")])
    assert code == 0
    assert d["schema"] == "lumion.rack.simulate"
    assert d["version"] == 1
    assert d["rack"]["meshes"] == {"m0": "smartlight", "m1": "smartlight"}
    assert d["trace"]["n_jobs"] == 12
    assert d["queue"] == "fifo"
    for policy in ("fabric", "baseline"):
        assert d[policy]["policy"] == policy
        assert set(METRICS) <= set(d[policy])
        assert d[policy]["completed"] + d[policy]["rejected"] == 12
    b, f = d["baseline"]["bandwidth_per_slice"], d["fabric"]["bandwidth_per_slice"]
    assert d["change"]["bandwidth_per_slice"] == (f - b) / b
    assert d["plot"] == str(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


@pytest.mark.slow
def test_synthetic_table_is_deterministic(capsys):
    # 4 jobs of seed 2: a job queues and a failure hits a job under both policies, so waiting,
    # backfill and failure draws are all in the table compared (6 jobs: 3.3 s of CPU a run
    # against 0.7 s; issue 29)
    argv = ["rack", "simulate", "--synthetic", "4", "--seed", "2", "--backfill"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    assert re.search(r"accepted without waiting +fraction +0\.75 +0\.75", first), first
    assert re.search(r"failures hitting a job +count +1 +1", first), first
    assert "bandwidth per slice" in first
    assert "queue backfill" in first


def test_refusals(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = "lumion.rack"\nversion = 7\n')
    code, d = run_json(capsys, ["rack", "simulate", "--rack", str(bad), "--synthetic", "3"])
    assert code == 2
    assert "unsupported rack version 7" in d["error"]
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_h,size,pattern,duration_h\n0,4,star,1\n")
    code, d = run_json(capsys, ["rack", "simulate", "--trace", str(trace)])
    assert code == 2
    assert "pattern must be one of" in d["error"]
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "3", "--trace", str(trace)])
    assert code == 64  # one trace source
    code, d = run_json(capsys, ["rack", "simulate"])
    assert code == 64
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "2", "--mtbf-h", "0"])
    assert code == 64
    missing = str(tmp_path / "no" / "p.png")
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "2", "--plot", missing])
    assert code == 2
    assert "does not exist" in d["error"]
    err = capsys.readouterr().err
    assert err.count("\n") <= 1


def test_no_failures_is_null_and_valid(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "4", "--mtbf-h", "inf",
                                "--baseline", "torus:4x4", "--max-lanes", "1"])
    assert code == 0
    assert d["failures"]["mtbf_h"] is None
    assert d["baseline_topology"] == "torus:4x4"
    assert d["max_lanes"] == 1
    for policy in ("fabric", "baseline"):
        assert d[policy]["failures"] == 0
        assert d[policy]["stalls"] == 0
    assert d["fabric"]["bandwidth_per_slice"] <= 1.0  # one lane at most per accelerator
    schema = json.loads((Path(__file__).resolve().parents[2] / "lab_scripts" / "schemas" / "json"
                         / "lumion.rack.simulate.schema.json").read_text())
    jsonschema.validate(d, schema)


def test_step_and_recovery_options(capsys):
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "3", "--seed", "1", "--recovery", "wait",
                                "--gbps", "40", "--compute-ms", "100"])
    assert code == 0
    assert d["failures"]["recovery"] == "wait"
    assert d["step"] == {"buffer_mb": 256.0, "compute_ms": 100.0, "gbps": 40.0, "alpha_ms": 0.01}
    for policy in ("fabric", "baseline"):
        assert 0.0 < d[policy]["step_rate"] <= 1.0
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "3", "--fixed-duration"])
    assert code == 0
    assert d["step"] is None
    assert d["fabric"]["step_rate"] == d["baseline"]["step_rate"] == 1.0
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "3", "--fixed-duration", "--gbps", "40"])
    assert code == 64
    assert "--fixed-duration has no step to price: drop --gbps" in d["error"]
    code, d = run_json(capsys, ["rack", "simulate", "--synthetic", "3", "--gbps", "inf"])
    assert code == 64
