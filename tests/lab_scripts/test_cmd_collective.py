"""`lumion collective`: JSON contract, step files, one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_scripts.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_ring_json(capsys):
    code, d = run_json(capsys, ["collective", "--pattern", "ring", "--accelerators", "4", "--size-mb", "8"])
    assert code == 0
    assert d["schema"] == "lumion.collective"
    assert d["version"] == 1
    for key in ("completion_ms", "first_run_ms", "setup_ms", "switches", "switch_ms", "fixed_ms",
                "configurations", "rounds", "speedup_vs_fixed_ring", "n_configurations"):
        assert key in d
    assert d["collective"]["n_steps"] == 6
    assert d["accelerators"] == 4
    # 8 MB over 4 ranks at 10 Gb/s: 6 steps of 2 MB (1.6 ms) + 10 us each
    assert d["fixed_ms"]["ring"] == 6 * (0.01 + 1.6)
    assert d["completion_ms"] == d["fixed_ms"]["ring"]


def test_step_file_and_human_output(capsys):
    assert main(["collective", "--pattern", str(EXAMPLES / "allreduce-ring-4.toml")]) == 0
    out = capsys.readouterr().out
    assert "fixed ring" in out
    assert "completion" in out


def test_refusals_are_one_line(capsys):
    code, d = run_json(capsys, ["collective", "--pattern", "ring"])
    assert code == 64
    assert "--accelerators" in d["error"]
    code, d = run_json(capsys, ["collective", "--pattern", "halving-doubling", "--accelerators", "6"])
    assert code == 2
    assert "power-of-two" in d["error"]
    code, d = run_json(capsys, ["collective", "--pattern", str(EXAMPLES / "allreduce-ring-4.toml"),
                                "--accelerators", "5"])
    assert code == 64
    assert "4 ranks" in d["error"]
    code, d = run_json(capsys, ["collective", "--pattern", "nope.json"])
    assert code == 2
    assert "not found" in d["error"]
    code, d = run_json(capsys, ["collective", "--pattern", "ring", "--accelerators", "11"])
    assert code == 3
    assert "cannot be routed" in d["error"]
    err = capsys.readouterr().err
    assert err.count("\n") <= 1


def test_fixed_topology_has_its_own_alpha_beta(capsys):
    base = ["collective", "--pattern", "ring", "--accelerators", "4", "--size-mb", "8"]
    _, same = run_json(capsys, base)
    _, faster = run_json(capsys, [*base, "--fixed-gbps", "20", "--fixed-alpha-us", "0"])
    assert faster["fixed_ms"]["ring"] == pytest.approx(6 * 0.8)
    assert faster["completion_ms"] == same["completion_ms"]


def test_straggler_says_when_the_plain_ring_is_faster(capsys):
    base = ["collective", "--pattern", "straggler", "--accelerators", "4", "--size-mb", "8"]
    assert main([*base, "--lag-ms", "0"]) == 0
    assert "(plain ring is faster at this lag)" in capsys.readouterr().out
    assert main([*base, "--lag-ms", "100"]) == 0
    assert "(straggler-aware is faster at this lag)" in capsys.readouterr().out


def test_multicast_broadcast_reports_trees_and_the_point_to_point_schedules(capsys):
    code, d = run_json(capsys, ["collective", "--pattern", "broadcast-flat", "--accelerators", "4",
                                "--size-mb", "64", "--multicast"])
    assert code == 0
    assert d["multicast_rounds"] == 1
    assert any("trees" in c for c in d["configurations"])
    schedules = {"broadcast-flat (point to point)", "broadcast-chain", "broadcast-tree"}
    assert set(d["point_to_point_ms"]) == schedules
    assert d["speedup_vs_point_to_point"] == min(d["point_to_point_ms"].values()) / d["completion_ms"]
    assert d["speedup_vs_point_to_point"] > 1.0
    assert main(["collective", "--pattern", "broadcast-flat", "--accelerators", "4", "--multicast"]) == 0
    out = capsys.readouterr().out
    assert "multicast: 1 of 1 round(s) ran on trees (widest tree routed: 1 to 3)" in out


def test_unknown_transceiver_is_one_line(capsys):
    code = main(["collective", "--pattern", "ring", "--accelerators", "4", "--transceiver", "nope"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "dwdm-10g-zr" in err[0]
