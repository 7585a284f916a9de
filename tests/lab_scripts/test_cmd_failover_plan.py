"""`lumion failover` acting on plan files: place and save, fail in steps, refusals keep history."""

from __future__ import annotations

import json

from lab_scripts.cli import main


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_place_and_save_then_act_on_the_plan(capsys, tmp_path):
    p0, p1 = tmp_path / "p0.json", tmp_path / "p1.json"
    code, d = run_json(capsys, ["failover", "--out", str(p0)])
    assert code == 0
    assert (d["schema"], d["version"]) == ("lumion.failover", 1)
    assert d["failovers"] == []
    assert d["plan"] == str(p0)
    assert len(d["links"]) == 8
    saved = json.loads(p0.read_text())
    assert saved["schema"] == "lumion.plan"
    assert saved["recoveries"] == []
    # the refused case: gpu5 then gpu4 on the default fabric
    code, d = run_json(capsys, ["failover", "--plan", str(p0), "--fail", "gpu5", "--fail", "gpu4",
                                "--out", str(p1)])
    assert code == 0
    assert [f["failed"] for f in d["failovers"]] == ["gpu5", "gpu4"]
    assert all(lk["budget_ok"] for lk in d["links"])
    assert d["worst_margin_db"] > 4.0
    plan = json.loads(p1.read_text())
    assert [r["failed"] for r in plan["recoveries"]] == ["gpu5", "gpu4"]
    assert plan["failed_accelerators"] == ["gpu5", "gpu4"]
    # the earlier plan's routes that no failure touched are the same in the new one
    before = {lk["link"]: lk["route"] for lk in saved["links"]}
    after = {lk["link"]: lk["route"] for lk in plan["links"]}
    for link in ("gpu0->gpu1", "gpu1->gpu2", "gpu6->gpu7", "gpu7->gpu0"):
        assert after[link] == before[link]


def test_refusal_keeps_earlier_recoveries(capsys, tmp_path):
    out = tmp_path / "p.json"
    code, d = run_json(capsys, ["failover", "--fail", "gpu1", "--fail", "gpu5", "--fail", "gpu6",
                                "--out", str(out)])
    assert code == 3
    assert d["schema"] == "lumion.error"
    assert d["kind"] == "impossible"
    assert "failure 3 of 3 (--fail gpu6) refused" in d["error"]
    assert "no spare" in d["error"]
    plan = json.loads(out.read_text())
    assert [r["failed"] for r in plan["recoveries"]] == ["gpu1", "gpu5"]
    assert "gpu6" in plan["job"]["accelerators"]  # the refused failure changed nothing
    # no --json: one line on stderr
    assert main(["failover", "--plan", str(out), "--fail", "gpu6"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--fail gpu6" in err[0]


def test_failed_write_leaves_no_half_file(capsys, tmp_path, monkeypatch):
    from photonics import atomic

    out = tmp_path / "p.json"
    out.write_text("old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", boom)  # the last step of an atomic write fails
    code = main(["failover", "--out", str(out)])
    capsys.readouterr()
    assert code != 0
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_tbu_failure_and_together(capsys, tmp_path):
    code, d = run_json(capsys, ["failover", "--tbu", "tbu:0.2.0", "--state", "dead"])
    assert code == 0
    assert d["failed"] == "tbu:0.2.0"
    assert d["spares"] == {"gpu2": "spare1"}  # the dead TBU cuts gpu2's lane: swap, not refuse
    code, d = run_json(capsys, ["failover", "--fail", "gpu5", "--fail", "gpu4", "--together"])
    assert code == 0
    assert len(d["failovers"]) == 1
    assert set(d["spares"]) == {"gpu5", "gpu4"}
    code, d = run_json(capsys, ["failover", "--tbu", "tbu:9.9.9"])
    assert code == 2  # a wrong name in a valid option is bad input, not a usage error
    assert "--tbu tbu:9.9.9" in d["error"]
    code, d = run_json(capsys, ["failover", "--fail", "gpu9"])
    assert code == 2
    assert d["kind"] == "input"
    assert "choose from gpu0, gpu1" in d["error"]


def test_plan_for_another_fabric_is_refused(capsys, tmp_path):
    from photonics.fabric import Accelerator, make_fabric
    from photonics.topology import hexagonal

    p0 = tmp_path / "p0.json"
    assert main(["failover", "--out", str(p0)]) == 0
    capsys.readouterr()
    fab = tmp_path / "fab.json"
    make_fabric(hexagonal(4, 6), [Accelerator("gpu0", (1,), (0,)), Accelerator("gpu1", (5,), (4,))],
                mesh_spec="hex:4x6").save(fab)
    code, d = run_json(capsys, ["failover", "--fabric", str(fab), "--plan", str(p0)])
    assert code == 2
    assert "another mesh" in d["error"]


def test_program_applies_a_plan_file(capsys, tmp_path):
    plan_path = tmp_path / "p.json"
    assert main(["failover", "--fail", "gpu3", "--out", str(plan_path)]) == 0
    capsys.readouterr()
    code, d = run_json(capsys, ["program", "--bench", "sim", "--configuration", str(plan_path),
                                "--no-verify"])
    assert code == 0
    conf = json.loads(plan_path.read_text())["configuration"]
    states = list(conf["tbus"].values())
    assert d["n_tbus_by_state"] == {"bar": states.count("bar"), "cross": states.count("cross"), "split": 0}
    assert d["mesh_fingerprint"] == conf["mesh_fingerprint"]
