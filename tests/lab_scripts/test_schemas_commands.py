"""Every command's ``--json`` output validates against its committed JSON Schema.

Each command runs for real (in-process through ``lab_scripts.cli.main``; ``serve`` and ``bench
serve``, which serve until a signal, are validated by the tests that start them as processes:
tests/controlplane/test_api.py, test_serve_security.py, tests/instruments/test_bench_serve_rerun.py)
on small meshes, and its stdout is validated with the ``jsonschema`` library against
``lab_scripts/schemas/json/``.
"""

import json
from pathlib import Path

import jsonschema
import pytest

from lab_scripts import schemas
from lab_scripts.cli import COMMANDS, main
from lab_scripts.common import output_schema
from lab_scripts.errors import EXIT_UNVERIFIED

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
    "mesh": [["mesh", "--mesh", "hex:1x2"], ["mesh", "--mesh", "hex:1x2", "--full"]],
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
    "collective": [["collective", "--pattern", "ring", "--accelerators", "4", "--size-mb", "1"],
                   ["collective", "--pattern", "straggler", "--accelerators", "4", "--lag-ms", "2"],
                   ["collective", "--pattern", str(EXAMPLES / "allreduce-ring-4.toml")],
                   ["collective", "--pattern", "broadcast-flat", "--accelerators", "4", "--multicast"]],
    "rack": [["rack", "simulate", "--synthetic", "6", "--seed", "1", "--plot", "rack.png"]],
    # yield: a ring of 4 with 1 spare, 6 s for the two chips (a ring of 8 with 2 spares, the
    # default, took 165 s at load 15, 46 s CPU, for the same schema; issue 29)
    "campaign": [["campaign", "--kind", "yield", "--mesh", "hex:2x3", "--chips", "2", "--accelerators", "4",
                  "--spares", "1", "--plot", "y.png"],
                 ["campaign", "--kind", "availability", "--traces", "1", "--jobs", "4"],
                 ["campaign", "--kind", "availability", "--traces", "2", "--jobs", "3", "--mtbf-h", "40,inf"],
                 ["campaign", "--kind", "capacity", "--traces", "2", "--jobs", "3"]],
    "synthesize": [["synthesize", "--mesh", "square:3x3", "--unitary", "dft:3", "--out", "u.json"],
                   ["synthesize", "--mesh", "hex:2x2", "--splitter", "0:5=1,9=2", "--out", "s.json",
                    "--plot", "s.png"],
                   ["synthesize", "--mesh", "triangular:3x4", "--unitary", "dft:3"],
                   ["synthesize", "--mesh", "hex:2x2", "--filter", "1550:0.035"],
                   ["synthesize", "--mesh", "hex:2x2", "--mz-filter", "1550:0.089"]],
}


@pytest.mark.slow
@pytest.mark.parametrize(("command", "argv"), [(c, a) for c, runs in CASES.items() for a in runs],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v)[:40])
def test_output_follows_its_schema(command, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, d = run_json(capsys, *argv)
    # the demo without calibration programs the ideal map: light finds its links off (exit 5)
    assert code == (EXIT_UNVERIFIED if command == "demo" else 0), d
    check(d, command)


def test_program_output_follows_its_schema(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = route_file(capsys, tmp_path)
    code, d = run_json(capsys, "program", "--configuration", str(plan))
    # the ideal map on the fabricated simulated chip: the check by light finds the route off
    assert code == EXIT_UNVERIFIED, d
    assert d["verification"]["status"] == "off"
    check(d, "program")


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
    "collective": ["collective", "--pattern", "nonsense", "--accelerators", "4"],
    "rack": ["rack", "simulate", "--trace", "missing.csv"],
    "serve": ["serve", "--bench", "missing.toml", "--db", "cp.db"],
    "campaign": ["campaign", "--kind", "yield", "--chips", "0"],
    "synthesize": ["synthesize", "--mesh", "hex:2x2", "--unitary", "dft:3"],
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
    # serve: its announce line is checked on the API tests' service (tests/controlplane/test_api.py,
    # test_announcement_and_token_file) and the TLS one in test_serve_security.py; bench serve's
    # output and the config it writes in tests/instruments/test_bench_serve_rerun.py; instead of
    # a process of each started here for it alone; layout's output and pad map (and failover's
    # plan file) in tests/lab_scripts/test_outputs_named.py, whose run of it is the same (issue 29)
    covered = set(CASES) | {"layout", "program", "bench", "serve"}
    assert set(COMMANDS) <= covered
    assert set(COMMANDS) <= set(FAILURES)
    for command in COMMANDS:
        schemas.load(output_schema(command)[0])


def test_a_wrong_output_is_refused():
    """The schemas can fail: a renamed key, a string for a number, a missing version."""
    good = {"schema": "lumion.program", "version": 1, "chip_id": "c", "mesh": "smartlight",
            "mesh_fingerprint": "1948373a8d1f84e8", "map": "ideal", "programmed": "configuration",
            "channels": 1, "commands": 1,
            "bytes_written": 14, "bytes_read": 14, "wire_time_s": 0.004, "elapsed_s": 0.001,
            "n_tbus_by_state": {"bar": 1, "cross": 70, "split": 0},
            "verification": {"status": "skipped", "tolerance_db": 3.0, "wavelength_nm": 1550.0, "routes": []}}
    schemas.validate(good)
    for bad in ({**good, "wire_time_ms": 4.0}, {**good, "channels": "1"},
                {k: v for k, v in good.items() if k != "version"}, {**good, "mesh_fingerprint": "xyz"}):
        with pytest.raises(jsonschema.ValidationError):
            schemas.validate(bad, "lumion.program")
