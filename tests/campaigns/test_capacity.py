"""The capacity campaign (mesh x workload x baseline) and the intervals every rack campaign reports."""

from __future__ import annotations

import json

import pytest

from campaigns import CampaignError, run_tasks
from campaigns.availability_kind import availability_summary, availability_tasks, trace_task
from campaigns.capacity_kind import capacity_summary, capacity_task, capacity_tasks
from campaigns.intervals import mean_ci, paired
from lab_scripts.cli import main
from photonics.rack import default_rack, slot_rack


def test_mean_ci_is_the_student_interval_and_narrows_with_more_seeds():
    few = mean_ci([1.0, 2.0, 3.0, 4.0])
    many = mean_ci([1.0, 2.0, 3.0, 4.0] * 8)
    assert few["mean"] == many["mean"] == 2.5
    assert few["half_width"] == pytest.approx(3.182446 * 1.290994 / 2, rel=1e-5)  # t(0.975, 3) s / sqrt(n)
    assert many["half_width"] < few["half_width"] / 3
    assert mean_ci([5.0]) == {"mean": 5.0, "half_width": None, "n": 1}


def test_paired_figures_count_the_seeds_where_the_fabric_is_lower():
    p = paired([1.0, 3.0, 2.0], [2.0, 1.0, 0.0])
    assert p["fabric_lower"] == 1
    assert p["difference"]["mean"] == pytest.approx(1.0)
    assert p["ratio"]["n"] == 2  # the seed where the baseline is 0 has no ratio
    assert p["ratio"]["mean"] == pytest.approx((0.5 + 3.0) / 2)


def test_slot_rack_is_the_default_rack_on_smartlight_and_spreads_slots_on_a_larger_mesh():
    assert slot_rack("smartlight").to_dict() == default_rack().to_dict()
    big = slot_rack("hex:5x10")
    assert big.mesh_specs == {"m0": "hex:5x10", "m1": "hex:5x10"}
    assert (len(big.workers), len(big.spares), len(big.fibres)) == (16, 2, 4)
    starts = sorted(min(a.rx) for a in big.accelerators if a.mesh == "m0")
    assert starts[-1] - starts[0] > 36  # spread over more than a SmartLight's 40-port edge


def test_capacity_grid_pairs_each_baseline_with_the_same_fabric_trace():
    tasks = capacity_tasks(meshes=["smartlight"], workloads=["rings", "all-to-all"],
                           baselines=["ring", "torus:4x4"], traces=2, jobs=3, seed=4)
    assert len(tasks) == 2 * 2 * 3  # workloads x traces x (fabric + two baselines)
    assert {t.seed for t in tasks if t.trace == 0} == {tasks[0].seed}
    with pytest.raises(CampaignError, match="unknown workload"):
        capacity_tasks(meshes=["smartlight"], workloads=["moe"], baselines=["ring"], traces=1, jobs=1, seed=0)
    with pytest.raises(CampaignError, match="R x C"):
        capacity_tasks(meshes=["smartlight"], workloads=["rings"], baselines=["torus:3x3"], traces=1, jobs=1,
                       seed=0)


@pytest.mark.slow  # 18 s in the quick suite at load 12-27 (issue 29)
def test_capacity_rows_summarise_with_intervals():
    tasks = capacity_tasks(meshes=["smartlight"], workloads=["rings"], baselines=["ring"], traces=2, jobs=4,
                           seed=3)
    rows = run_tasks(capacity_task, tasks, progress=False)
    assert run_tasks(capacity_task, tasks, progress=False) == rows  # deterministic per seed
    (group,) = capacity_summary(rows)
    assert group["n_traces"] == 2
    frag = [r["fragmentation"] for r in rows if r["policy"] == "fabric"]
    assert group["fabric"]["fragmentation"]["mean"] == pytest.approx(sum(frag) / 2)
    assert group["fabric"]["fragmentation"]["half_width"] is not None


@pytest.mark.slow  # 61 s in the quick suite at load 12-27 (issue 29)
def test_availability_sweep_reports_each_point_with_intervals():
    tasks = availability_tasks(traces=2, jobs=3, seed=5, mtbfs=[30.0, float("inf")],
                               recoveries=["requeue", "wait"])
    assert len(tasks) == 2 * 2 * 2 * 2
    rows = run_tasks(trace_task, tasks, progress=False)
    summary = availability_summary(rows)
    assert summary["mean"] is None  # no mean across grid points
    assert [(p["mtbf_h"], p["recovery"]) for p in summary["points"]] == [
        (30.0, "requeue"), (30.0, "wait"), (None, "requeue"), (None, "wait")]
    for p in summary["points"]:
        ci = p["paired"]["throughput_jobs_per_h"]["ratio"]
        assert ci["n"] == 2
        assert ci["half_width"] is not None
    assert summary["points"][2]["failures"] == 0
    with pytest.raises(CampaignError, match="recovery must be one of"):
        availability_tasks(traces=1, jobs=1, seed=0, recoveries=["pray"])


@pytest.mark.slow  # 12 s in the quick suite at load 12-27 (issue 29)
def test_cli_capacity_json(capsys, tmp_path):
    code = main(["campaign", "--kind", "capacity", "--traces", "2", "--jobs", "3", "--seed", "2",
                 "--workload", "rings", "--baseline", "ring,torus:4x4", "--plot", str(tmp_path / "c.png"),
                 "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert d["kind"] == "capacity"
    assert [(g["mesh"], g["workload"], g["baseline"]) for g in d["capacity"]] == [
        ("smartlight", "rings", "ring"), ("smartlight", "rings", "torus:4x4")]
    assert d["capacity"][0]["fabric"]["fragmentation"]["n"] == 2
    assert (tmp_path / "c.png").stat().st_size > 0


def test_availability_fixed_duration_is_the_model_before_issue_30():
    tasks = availability_tasks(traces=1, jobs=4, seed=6, mtbfs=[40.0], recoveries=["wait"],
                               fixed_duration=True)
    rows = run_tasks(trace_task, tasks, progress=False)
    assert all(r["step_rate"] == 1.0 for r in rows)  # nobody's run time depends on what it holds
    assert all(r["requeues"] == 0 for r in rows)
