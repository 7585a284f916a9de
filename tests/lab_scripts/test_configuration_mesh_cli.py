"""A configuration made for one mesh is refused on another, before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import instruments.config
from lab_scripts.cli import main
from photonics.configuration import Configuration, MeshMismatchError, mesh_fingerprint
from photonics.routing import route_many
from photonics.topology import Mesh, hexagonal

INPUT = 2  # docs/cli.md: a file, path or value is bad


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def routed(capsys: pytest.CaptureFixture[str], tmp_path: Path, mesh: str, connect: str) -> Path:
    """``lumion route --mesh MESH --connect CONNECT --json`` saved to a file."""
    code, out, _ = run(capsys, "route", "--mesh", mesh, "--connect", connect, "--json")
    assert code == 0
    path = tmp_path / f"plan-{mesh.replace(':', '_')}.json"
    path.write_text(out)
    return path


@pytest.fixture
def no_bench(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record any attempt to open a bench (there must be none)."""
    opened: list[object] = []
    monkeypatch.setattr(instruments.config, "open_bench", lambda *a, **k: opened.append(a))
    return opened


def test_route_json_records_the_mesh(capsys, tmp_path):
    data = json.loads(routed(capsys, tmp_path, "hex:1x2", "0:5").read_text())
    assert data["configuration"]["mesh"] == "hex:1x2"
    assert data["configuration"]["mesh_fingerprint"] == mesh_fingerprint(hexagonal(1, 2))
    code, out, _ = run(capsys, "mesh", "--mesh", "hex:1x2", "--json")
    assert code == 0
    assert json.loads(out)["mesh_fingerprint"] == data["configuration"]["mesh_fingerprint"]


def test_plan_for_hex_1x2_is_not_programmed_on_smartlight(capsys, tmp_path, no_bench):
    plan = routed(capsys, tmp_path, "hex:1x2", "0:5")
    code, out, err = run(capsys, "program", "--bench", "sim", "--configuration", str(plan), "--json")
    assert code == INPUT
    error = json.loads(out)
    assert error["kind"] == "input"
    assert error["type"] == "MeshMismatchError"
    assert "made for mesh hex:1x2" in error["error"]
    assert "cannot be used on mesh smartlight" in error["error"]
    assert err.count("\n") == 1
    assert no_bench == []  # nothing was opened, so nothing was sent


def test_plan_for_hex_1x2_is_not_simulated_on_smartlight(capsys, tmp_path):
    plan = routed(capsys, tmp_path, "hex:1x2", "0:5")
    code, _, err = run(capsys, "simulate", "--configuration", str(plan), "--input", "0")
    assert code == INPUT
    assert "made for mesh hex:1x2" in err
    assert "smartlight" in err
    code, out, _ = run(capsys, "simulate", "--mesh", "hex:1x2", "--configuration", str(plan),
                       "--input", "0", "--json")
    assert code == 0
    powers = json.loads(out)["outputs_db"]
    assert max(powers, key=lambda k: powers[k][0]) == "port:5"  # the routed light arrives


def test_old_file_for_another_mesh_is_refused(capsys, tmp_path, no_bench):
    data = json.loads(routed(capsys, tmp_path, "hex:1x2", "0:5").read_text())["configuration"]
    legacy = {k: v for k, v in data.items() if k not in ("mesh", "mesh_fingerprint")} | {"version": 1}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(legacy))
    code, _, err = run(capsys, "program", "--configuration", str(path))
    assert code == INPUT
    assert "version 1: no mesh recorded" in err
    assert no_bench == []


def test_program_on_the_right_mesh_reports_it(capsys, tmp_path):
    bench = tmp_path / "b.toml"
    bench.write_text('schema = "lumion.bench"\nversion = 1\nmesh = "hex:1x2"\n'
                     '[heater_driver]\naddress = "sim"\n[laser]\naddress = "sim"\n'
                     '[power_meter]\naddress = "sim"\n[sim]\nseed = 3\n')
    plan = routed(capsys, tmp_path, "hex:1x2", "0:5")
    code, out, _ = run(capsys, "program", "--bench", str(bench), "--configuration", str(plan), "--json",
                       "--no-verify")
    assert code == 0
    report = json.loads(out)
    assert report["mesh"] == "hex:1x2"
    assert report["mesh_fingerprint"] == mesh_fingerprint(hexagonal(1, 2))


def test_python_api_refuses_a_same_size_other_mesh_before_writing():
    """MeshController.currents_for (via bench.program) checks the fingerprint, not just the size."""
    data = hexagonal(1, 2).to_dict()
    ports = data["ports"]
    ports[0]["tbu_port"], ports[1]["tbu_port"] = ports[1]["tbu_port"], ports[0]["tbu_port"]
    other = Mesh.from_dict(data)
    plan = route_many(other, [("port:0", "port:5")])
    conf = Configuration.from_routes(other, [r.route for r in plan.routes])
    cfg = {"schema": "lumion.bench", "version": 1, "mesh": "hex:1x2", "heater_driver": {"address": "sim"},
           "laser": {"address": "sim"}, "power_meter": {"address": "sim"}, "sim": {"seed": 2}}
    with instruments.config.open_bench(cfg) as bench:
        before = bench.currents().copy()
        written: list[np.ndarray] = []
        bench.controller.set_currents = written.append  # a spy: nothing may reach the driver
        with pytest.raises(MeshMismatchError, match=r"made for mesh custom .* on mesh hex:1x2"):
            bench.program(conf)
        assert written == []
        np.testing.assert_array_equal(bench.currents(), before)
