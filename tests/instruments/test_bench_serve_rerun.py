"""`lumion bench serve --write-config` is safe to rerun: the file names its server, goes away
with it, and a file whose server has stopped is refused in one line (issue 29)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib

import pytest

from instruments.config import load_config
from instruments.errors import BenchConfigError
from lab_scripts import schemas
from lab_scripts.cli import main
from lab_scripts.common import output_schema

# Generous: starting Python, numpy and the simulators on a loaded 2-core machine.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    return int(proc.stdout)


def bench_text(pid: int, host: str | None = None) -> str:
    return ('schema = "lumion.bench"\nversion = 1\nmesh = "smartlight"\nchip_id = "sim-x"\n'
            '[heater_driver]\naddress = "/dev/pts/999"\n[laser]\naddress = "TCPIP::127.0.0.1::1::SOCKET"\n'
            '[power_meter]\naddress = "TCPIP::127.0.0.1::2::SOCKET"\n'
            f'[server]\npid = {pid}\nhost = "{host or socket.gethostname()}"\n')


def test_a_config_whose_server_stopped_is_refused_in_one_line(tmp_path, capsys):
    stale = tmp_path / "bench.toml"
    stale.write_text(bench_text(dead_pid()))
    with pytest.raises(BenchConfigError, match="no longer running"):
        load_config(stale)
    (tmp_path / "c.json").write_text("{}")
    code = main(["program", "--bench", str(stale), "--configuration", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "no longer running" in err
    assert "lumion bench serve" in err
    assert "cannot open serial port" not in err


def test_a_running_server_or_another_hosts_file_is_not_judged_stale(tmp_path):
    live = tmp_path / "live.toml"
    live.write_text(bench_text(os.getppid()))
    assert load_config(live)["server"]["pid"] == os.getppid()
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(bench_text(dead_pid(), host="another-machine"))
    assert load_config(elsewhere)["server"]["host"] == "another-machine"


@pytest.mark.slow
def test_serve_refuses_a_config_path_another_running_server_owns(tmp_path):
    owned = tmp_path / "bench.toml"
    owned.write_text(bench_text(os.getpid()))  # this test process stands for the running server
    before = owned.read_text()
    proc = subprocess.run([sys.executable, "-m", "lab_scripts.cli", "bench", "serve", "--mesh", "hex:1x1",
                           "--write-config", str(owned)], capture_output=True, text=True,
                          timeout=START_TIMEOUT_S, check=False)
    assert proc.returncode == 2
    assert f"pid {os.getpid()}" in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert owned.read_text() == before


def wait_for_own_config(path, proc) -> dict:
    """The config once it names ``proc`` (what the README's wait loop checks)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            data = {}
        if data.get("server", {}).get("pid") == proc.pid:
            return data
        time.sleep(0.05)
    raise AssertionError(f"{path} never named pid {proc.pid}")


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_server_replaces_a_stale_config_and_removes_its_own_when_stopped(tmp_path, stop):
    path = tmp_path / "bench.toml"
    path.write_text(bench_text(dead_pid()))  # left behind by a server killed with -9
    proc = subprocess.Popen([sys.executable, "-m", "lab_scripts.cli", "bench", "serve", "--mesh", "hex:1x2",
                             "--json", "--write-config", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        announced = json.loads(proc.stdout.readline())
        # `lumion bench serve --json`'s output and the config it writes follow their schemas
        # (checked here rather than in a server started for it alone by test_schemas_commands)
        assert (announced["schema"], announced["version"]) == output_schema("bench")
        schemas.validate(announced, output_schema("bench")[0])
        assert announced["mesh"] == "hex:1x2"
        assert announced["pid"] == proc.pid
        assert announced["config"] == str(path)
        data = wait_for_own_config(path, proc)
        schemas.validate(data, "lumion.bench")
        assert data["server"]["host"] == socket.gethostname()
        assert load_config(path)["chip_id"] == announced["chip_id"]
        proc.send_signal(stop)
        proc.wait(STOP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert not path.exists()
