"""Every command's ``--json`` output validates against its committed JSON Schema.

Each command runs for real (in-process through ``lab_scripts.cli.main``; ``bench serve`` in
its own process, since it serves until a signal) on small meshes, and its stdout is
validated with the ``jsonschema`` library against ``lab_scripts/schemas/json/``.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from lab_scripts import schemas
from lab_scripts.cli import COMMANDS, main
from lab_scripts.common import output_schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def check(document, command):
    name, version = output_schema(command)
    assert (document["schema"], document["version"]) == (name, version)
    schemas.validate(document, name)
    return document


def route_file(capsys, tmp_path, mesh="smartlight", connect="0:20"):
    code, d = run_json(capsys, "route", "--mesh", mesh, "--connect", connect)
    assert code == 0
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    return path


# command -> argument lists (run in tmp_path); several where options add keys
CASES = {
    "mesh": [["mesh", "--mesh", "hex:1x2"]],
    "simulate": [["simulate", "--mesh", "hex:1x2", "--all", "cross", "--input", "0",
                  "--wavelengths", "1549:1551:3", "--plot", "s.png"]],
    "route": [["route", "--mesh", "hex:1x2", "--connect", "0:5", "--failed", "tbu:0.1.5=bar"],
              ["route", "--connect", "3:20", "--connect", "5:28", "--exact", "--worst", "--plot", "r.png"]],
    "failover": [["failover"], ["failover", "--fail", "gpu2", "--fail", "gpu5", "--plot", "f.png"]],
    "schedule": [["schedule", "--ports", "0,5,20,27"]],
    "phases": [["phases", str(EXAMPLES / "tp4-dp2.toml")]],
    "calibrate": [["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--out", "m.json",
                   "--points", "24", "--verify-routes", "2", "--quiet"]],
    "demo": [["demo", "--no-calibrate", "--out", "demo"]],
}


@pytest.mark.parametrize(("command", "argv"), [(c, a) for c, runs in CASES.items() for a in runs],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_output_follows_its_schema(command, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, d = run_json(capsys, *argv)
    assert code == 0, d
    check(d, command)


def test_layout_output_follows_its_schema(capsys, tmp_path, monkeypatch):
    pytest.importorskip("gdsfactory")
    monkeypatch.chdir(tmp_path)
    code, d = run_json(capsys, "layout", "--mesh", "hex:1x1", "--out", "chip.gds", "--png", "chip.png")
    assert code == 0, d
    check(d, "layout")
    assert d["plot"] == "chip.png"
    assert Path(d["plot"]).stat().st_size > 0
    schemas.validate(json.loads(Path(d["pad_map_json"]).read_text()))  # the pad map file too


def test_program_output_follows_its_schema(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = route_file(capsys, tmp_path)
    code, d = run_json(capsys, "program", "--configuration", str(plan))
    assert code == 0, d
    check(d, "program")


def test_bench_serve_output_follows_its_schema(tmp_path):
    cmd = [sys.executable, "-m", "lab_scripts.cli", "bench", "serve", "--json", "--mesh", "hex:1x2",
           "--write-config", str(tmp_path / "b.toml")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        d = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    check(d, "bench")
    assert d["mesh"] == "hex:1x2"
    import tomllib

    schemas.validate(tomllib.loads((tmp_path / "b.toml").read_text()), "lumion.bench")


# one failing command line per command: the lumion.error object validates too
FAILURES = {
    "mesh": ["mesh", "--mesh", "hex:0x0"],
    "simulate": ["simulate", "--all", "bar", "--input", "port:99"],
    "route": ["route", "--connect", "0:99"],
    "layout": ["layout", "--out", "missing/x.gds"],
    "demo": ["demo", "--fail", "nobody"],
    "failover": ["failover", "--fail", "nobody"],
    "schedule": ["schedule", "--ports", "0"],
    "phases": ["phases", "missing.toml"],
    "calibrate": ["calibrate", "--bench", "missing.toml", "--out", "m.json"],
    "bench": ["bench", "serve", "--config", "missing.toml"],
    "program": ["program", "--configuration", "missing.json"],
}


@pytest.mark.parametrize("command", sorted(FAILURES))
def test_error_output_follows_its_schema(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, d = run_json(capsys, *FAILURES[command])
    assert code != 0
    schemas.validate(d, "lumion.error")
    assert d["exit_code"] == code
    assert d["command"] == f"lumion {command}"


def test_every_command_is_covered():
    """A new command needs an output schema and a case here (docs/schemas.md says how)."""
    covered = set(CASES) | {"layout", "program", "bench"}
    assert set(COMMANDS) <= covered
    assert set(COMMANDS) <= set(FAILURES)
    for command in COMMANDS:
        schemas.load(output_schema(command)[0])


def test_a_wrong_output_is_refused():
    """The schemas can fail: a renamed key, a string for a number, a missing version."""
    good = {"schema": "lumion.program", "version": 1, "chip_id": "c", "mesh": "smartlight",
            "mesh_fingerprint": "1948373a8d1f84e8", "map": "ideal", "channels": 1, "commands": 1,
            "bytes_written": 14, "bytes_read": 14, "wire_time_s": 0.004, "elapsed_s": 0.001,
            "tbus": {"bar": 1, "cross": 70, "split": 0}}
    schemas.validate(good)
    for bad in ({**good, "wire_time_ms": 4.0}, {**good, "channels": "1"},
                {k: v for k, v in good.items() if k != "version"}, {**good, "mesh_fingerprint": "xyz"}):
        with pytest.raises(jsonschema.ValidationError):
            schemas.validate(bad, "lumion.program")
