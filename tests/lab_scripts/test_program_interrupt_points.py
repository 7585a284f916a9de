"""An interrupt at chosen points of `lumion program`, run as the program (issue 27).

The random-moment trials of tests/instruments/test_program_processes.py hit these points
only now and then; here the process signals itself exactly there, so each test fails
on the code before the fix it guards:

* a Ctrl-C landing while a lazily imported module is being built (code run by ``exec``
  of a string, as ``dataclasses`` does) exited -2 -- CPython marks that interrupt
  unhandled and kills the process by SIGINT at exit -- after the one line had said the
  chip holds its old configuration;
* a signal arriving once the chip was written and the output printed added a second
  line (exit 130) contradicting nothing it could know: the outcome was already said.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab_scripts.cli import main

ROOT = Path(__file__).resolve().parents[2]

# `lumion program` as `python -m lab_scripts.cli` runs it (main() with no argv, the module
# run as __main__: CPython's exit then checks the unhandled-interrupt mark), with one of
# its steps replaced by: signal this process at that point, then carry on.
DRIVER = """
import os, signal, sys
import instruments.config as config
import lab_scripts.cmd_program as program
point, sig = sys.argv[1], getattr(signal, sys.argv[2])
if point == "start":
    real_open = config.open_bench
    def open_bench(*args, **kwargs):
        # the signal arrives while code made by exec() runs (a dataclass being built)
        exec("import os, time\\nos.kill(os.getpid(), sig)\\ntime.sleep(5)", {"sig": sig})
        return real_open(*args, **kwargs)
    config.open_bench = open_bench
else:  # "printing": the chip is written and checked, the output being printed
    real_lines = program.verification_lines
    def verification_lines(*args, **kwargs):
        os.kill(os.getpid(), sig)
        return real_lines(*args, **kwargs)
    program.verification_lines = verification_lines
sys.argv = ["lumion", "program", *sys.argv[3:]]
from lab_scripts.cli import main
sys.exit(main())
"""


@pytest.fixture(scope="module")
def configuration(tmp_path_factory):
    """The plan the tests program, written by `lumion route` in this process (its process is not
    the point here; 1 s of CPU as its own)."""
    path = tmp_path_factory.mktemp("conf") / "plan.json"
    with open(path, "w") as out, contextlib.redirect_stdout(out):
        assert main(["route", "--connect", "5:28", "--json"]) == 0
    return path


def run(point, sig, configuration, tmp_path, *extra):
    (tmp_path / "lumion_at_point.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
           "LUMION_LOCK_DIR": str(tmp_path / "locks")}
    argv = [sys.executable, "-m", "lumion_at_point", point, sig, "--configuration", str(configuration),
            "--no-verify", *extra]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_ctrl_c_inside_exec_at_the_start_exits_130_saying_the_old_configuration(configuration, tmp_path,
                                                                                 json_flag):
    proc = run("start", "SIGINT", configuration, tmp_path, *json_flag)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "SIGINT" in lines[0]
    assert "stopped before writing anything: the chip holds its old configuration" in lines[0]
    if json_flag:
        error = json.loads(proc.stdout)
        assert (error["schema"], error["kind"], error["exit_code"]) == ("lumion.error", "interrupted", 130)
        assert "old configuration" in error["error"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_outcome_is_printed_changes_nothing(configuration, tmp_path, sig):
    proc = run("printing", sig, configuration, tmp_path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.startswith(f"programmed {configuration}")
    assert proc.stderr.strip() == "", proc.stderr
