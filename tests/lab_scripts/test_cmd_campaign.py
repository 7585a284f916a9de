"""`lumion campaign`: local run vs a real `dask scheduler` + `dask worker` on 127.0.0.1."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab_scripts.cli import main

# Looked up, not imported: every pytest-xdist worker collects this file (importing Dask's
# distributed took 0.7 s of CPU at load ~11), one runs its tests, and they import it (issue 29).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="Dask distributed (the campaign extra) is not installed")
BIN = Path(sys.executable).parent
ARGS = ["campaign", "--kind", "yield", "--mesh", "smartlight", "--chips", "2", "--accelerators", "4",
        "--spares", "1", "--margin-db", "1", "--seed", "1"]
# A cluster of two processes starts in a few seconds on a loaded 2-core machine; past
# this something is wrong and the test says so instead of hanging.
START_TIMEOUT_S = 60


def scheduler_address(scheduler_file: Path, proc: subprocess.Popen) -> str:
    """The address the scheduler announces in its file once it listens (it chose the port)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, KeyError):
            return json.loads(scheduler_file.read_text())["address"]
        assert proc.poll() is None, "the dask scheduler exited before announcing its address"
        time.sleep(0.1)
    raise AssertionError(f"no dask scheduler address in {scheduler_file} after {START_TIMEOUT_S} s")


def dask_cli() -> list[str]:
    exe = BIN / "dask"
    return [str(exe)] if exe.exists() else [shutil.which("dask") or "dask"]


def wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, timeout=START_TIMEOUT_S) as client:
        client.wait_for_workers(n, timeout=START_TIMEOUT_S)


@pytest.fixture
def cluster(tmp_path):
    # port 0: the scheduler picks a free port and writes its address to the file (a port chosen
    # here and bound later could be taken by another test worker in between)
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [subprocess.Popen([*dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--scheduler-file", str(scheduler_file),
                               "--dashboard-address", "127.0.0.1:0", "--no-show"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        address = scheduler_address(scheduler_file, procs[0])
        # one worker process, no nanny process supervising it (a third interpreter importing
        # distributed, ~1 s of CPU, that only restarts a dying worker; issue 29)
        procs.append(subprocess.Popen([*dask_cli(), "worker", address, "--nworkers", "1", "--nthreads", "1",
                                       "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"], cwd=tmp_path,
                                      env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        wait_for_workers(address, 1)
        yield address
    finally:
        # killed, not asked to stop: a graceful Dask shutdown is not what this tests, and it took
        # 1.2 s on a quiet machine and 20.6 s at load 8 (a worker's close waiting on its scheduler)
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_same_yield_locally_and_on_a_real_cluster(capsys, tmp_path, cluster):
    code, local = run_json(capsys, [*ARGS, "--out", str(tmp_path / "local.csv"),
                                    "--plot", str(tmp_path / "y.png")])
    assert code == 0
    assert local["schema"] == "lumion.campaign"
    assert local["version"] == 1
    for key in ("yield", "n_chips", "seconds", "groups"):
        assert key in local
    assert local["n_chips"] == 2
    assert (tmp_path / "y.png").stat().st_size > 0
    code, remote = run_json(capsys, [*ARGS, "--scheduler", cluster, "--out", str(tmp_path / "remote.csv")])
    assert code == 0
    assert remote["scheduler"] == cluster
    assert remote["workers"] == 1  # the cluster's one worker (was null)
    assert remote["yield"] == local["yield"]
    assert remote["groups"] == local["groups"]
    assert (tmp_path / "local.csv").read_bytes() == (tmp_path / "remote.csv").read_bytes()


def test_refusals_are_one_line(capsys, tmp_path):
    code, d = run_json(capsys, [*ARGS, "--out", str(tmp_path / "t.xlsx")])
    assert code == 2
    assert ".csv or .parquet" in d["error"]
    code, d = run_json(capsys, [*ARGS, "--scheduler", "nowhere:1"])
    assert code == 2
    assert "tcp://" in d["error"]
    code, d = run_json(capsys, [*ARGS, "--loss-spread-db", "-1"])
    assert code == 64
