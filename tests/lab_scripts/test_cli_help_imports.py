"""`lumion --help` (and each subcommand's) loads no numeric library: a subcommand imports its
work when it runs (issue 29: 230 ms of the 340-410 ms went to importing scipy for the help).
Time is measured in benchmarks/bench_cli_help.py; this checks the cause, which does not
depend on the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lab_scripts.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
# Libraries that cost tens to hundreds of ms to import, and our packages built on them.
HEAVY = ("numpy", "scipy", "matplotlib", "numba", "networkx", "gdsfactory", "dask", "fastapi", "pydantic",
         "calibration", "instruments", "controlplane", "layouts", "campaigns")

# One interpreter prints every help in turn and notes which one first loaded each module.
PROBE = """
import contextlib, io, json, sys
from lab_scripts.cli import main
report = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(argv)
    report.append({"argv": argv, "code": code, "help": len(out.getvalue()),
                   "modules": sorted({m.split(".")[0] for m in sys.modules})})
print(json.dumps(report))
"""
HELPS = [["--help"], *([name, "--help"] for name in sorted(COMMANDS))]


def helps() -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HELPS)], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def test_help_imports_no_numeric_library():
    report = helps()
    assert [r["argv"] for r in report] == HELPS
    for r in report:  # modules accumulate: the first help to load a heavy one is named
        assert r["code"] == 0
        assert r["help"] > 200  # it did print the help
        loaded = sorted(set(HEAVY) & set(r["modules"]))
        assert not loaded, f"lumion {' '.join(r['argv'])} imported {loaded}"
