"""Campaigns give the same table whoever runs the tasks (1 worker vs a 2-worker cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from campaigns import CampaignError, int_seed, run_tasks, task_seeds
from campaigns.tables import read_csv, write_table
from campaigns.yield_kind import chip_task, yield_summary, yield_tasks


def draw(seq):
    """A task that uses only its own seed: a few numbers from it."""
    return [float(x) for x in np.random.default_rng(seq).random(3)]


def small_grid():
    return yield_tasks(["smartlight"], [0.03, 0.3], [0.003], chips=2, seed=5, workers=4, spares=1,
                       margin_db=1.0, min_acr_db=25.0)


def test_seeds_depend_on_campaign_seed_and_index_only():
    a, b = task_seeds(3, 4), task_seeds(3, 6)
    assert [draw(s) for s in a] == [draw(s) for s in b[:4]]
    assert draw(task_seeds(4, 1)[0]) != draw(a[0])
    with pytest.raises(CampaignError):
        task_seeds(-1, 2)


@pytest.mark.slow
def test_one_worker_and_a_two_worker_cluster_give_identical_tables(tmp_path):
    distributed = pytest.importorskip("distributed")
    tasks = small_grid()
    local = run_tasks(chip_task, tasks, workers=1, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        remote = run_tasks(chip_task, tasks, scheduler=cluster.scheduler_address, progress=False)
    assert remote == local
    write_table(local, tmp_path / "a.csv")
    write_table(remote, tmp_path / "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    # the spread matters: same chips (common random numbers), different losses
    rows = read_csv(tmp_path / "a.csv")
    assert rows[0]["chip"] == rows[2]["chip"] == "0"
    assert rows[0]["job_margin_db"] != rows[2]["job_margin_db"]
    assert [g["n_chips"] for g in yield_summary(local)] == [2, 2]


def test_local_processes_match_synchronous():
    # the task function must be importable by the spawned processes: a library function
    seeds = task_seeds(9, 6)
    assert run_tasks(int_seed, seeds, workers=2, progress=False) == [int_seed(s) for s in seeds]


def test_table_formats(tmp_path):
    rows = [{"a": 1, "b": 2.5}]
    with pytest.raises(CampaignError, match=r"\.csv or \.parquet"):
        write_table(rows, tmp_path / "t.xlsx")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(CampaignError, match="needs pyarrow"):
            write_table(rows, tmp_path / "t.parquet")
        assert not (tmp_path / "t.parquet").exists()
    assert read_csv(write_table(rows, tmp_path / "t.csv")) == [{"a": "1", "b": "2.5"}]


def test_unreachable_scheduler_is_one_line():
    with pytest.raises(CampaignError, match="wants an address"):
        run_tasks(draw, task_seeds(1, 1), scheduler="127.0.0.1:1", progress=False)
