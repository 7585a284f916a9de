"""``lumion schedule --map`` routes around the TBUs the map records as failed (issue 26, item 5)."""

from __future__ import annotations

import json
from dataclasses import replace

from instruments.sim.chip import Chip
from lab_scripts.cli import main
from lab_scripts.common import load_mesh
from tests.controlplane.rack import oracle_map

PORTS = "spread:4"


def _schedule(capsys, *extra: str) -> dict:
    assert main(["schedule", "--mesh", "smartlight", "--ports", PORTS, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _routed(out: dict) -> list:
    routes = [r for c in out["configurations"] for r in c["configuration"]["routes"]]
    return [hop["tbu"] for r in routes for hop in r["tbus"]]


def test_schedule_map_avoids_a_tbu_it_records_as_dead(tmp_path, capsys):
    mesh = load_mesh("smartlight")
    used = sorted(set(_routed(_schedule(capsys))))
    assert used
    name = used[0]
    tbu = mesh.tbu_names.index(name) if isinstance(name, str) else name
    replace(oracle_map(Chip(mesh, 0)), failed={tbu: "dead"}).save(tmp_path / "map.json")
    routed = _routed(_schedule(capsys, "--map", str(tmp_path / "map.json")))
    assert routed
    assert mesh.tbu_names[tbu] not in routed


def test_schedule_bad_map_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "map.json").write_text("{not json")
    assert main(["schedule", "--ports", PORTS, "--map", str(tmp_path / "map.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
