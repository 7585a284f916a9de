"""The availability campaign: paired traces, fabric vs the fixed baseline, via photonics.rack."""

from __future__ import annotations

import json

import pytest

from campaigns import CampaignError, run_tasks
from campaigns.availability_kind import (
    HEADLINE,
    POLICIES,
    availability_summary,
    availability_tasks,
    trace_task,
)
from lab_scripts.cli import main


def test_tasks_pair_both_policies_on_one_seed():
    tasks = availability_tasks(traces=3, jobs=4, seed=2)
    assert [(t.trace, t.policy) for t in tasks] == [(t, p) for t in range(3) for p in POLICIES]
    for t in range(3):
        a, b = (x for x in tasks if x.trace == t)
        assert a.seed is b.seed
    with pytest.raises(CampaignError):
        availability_tasks(traces=0, jobs=4, seed=2)


def test_rows_are_reproducible_and_summarised():
    tasks = availability_tasks(traces=1, jobs=4, seed=11)
    rows = run_tasks(trace_task, tasks, progress=False)
    assert [r["policy"] for r in rows] == list(POLICIES)
    assert all(r["n_jobs"] == 4 for r in rows)
    assert run_tasks(trace_task, tasks, progress=False) == rows
    summary = availability_summary(rows)
    for key in HEADLINE:
        assert summary["mean"]["fabric"][key] == rows[0][key]
        if rows[1][key]:
            assert summary["fabric_over_baseline"][key] == pytest.approx(rows[0][key] / rows[1][key])


def test_cli_availability_json(capsys, tmp_path):
    code = main(["campaign", "--kind", "availability", "--traces", "1", "--jobs", "4", "--seed", "3",
                 "--out", str(tmp_path / "a.csv"), "--plot", str(tmp_path / "a.png"), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert d["schema"] == "lumion.campaign"
    assert d["kind"] == "availability"
    assert d["n_traces"] == 1
    assert set(d["mean"]) == set(POLICIES)
    assert (tmp_path / "a.png").stat().st_size > 0
    lines = (tmp_path / "a.csv").read_text().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("trace,mtbf_h,recovery,policy,")
