"""``lumion failover --map`` never routes through a TBU the map records as failed or unverified
(issue 26, item 5): the placement and the recovery both avoid it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from instruments.sim.chip import Chip
from lab_scripts.cli import main
from lab_scripts.common import load_mesh
from tests.controlplane.rack import oracle_map


def _failover(capsys, *extra: str) -> dict:
    assert main(["failover", "--fail", "gpu2", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _plan(tmp_path, capsys, *extra: str) -> tuple[dict, dict]:
    """(the failover report, the plan it wrote: every link's route after the recovery)."""
    out = tmp_path / f"plan{len(list(tmp_path.glob('plan*.json')))}.json"
    report = _failover(capsys, "--out", str(out), *extra)
    return report, json.loads(out.read_text())


def _tbus(plan: dict, links: list[str] | None = None) -> set[str]:
    return {hop["tbu"] for lk in plan["links"] if links is None or lk["link"] in links
            for hop in lk["route"]["tbus"]}


@pytest.mark.parametrize("how", ["dead", "unverified"])
def test_failover_map_never_routes_through_a_tbu_the_map_names(tmp_path, capsys, how):
    mesh = load_mesh("smartlight")
    report, plan = _plan(tmp_path, capsys)
    edge = {mesh.tbu_names[int(g) // 4] for g in mesh.port_tbu_ports}  # would cut a port off
    name = sorted(_tbus(plan, report["rerouted_links"]) - edge)[0]  # the spare's route crosses it today
    tbu = mesh.tbu_names.index(name)
    cmap = replace(oracle_map(Chip(mesh, 0)), failed={tbu: how},
                   disagreement={tbu: 0.3} if how == "unverified" else {})
    cmap.save(tmp_path / "map.json")
    report, plan = _plan(tmp_path, capsys, "--map", str(tmp_path / "map.json"))
    assert report["spare"]
    assert report["rerouted_links"]
    assert name not in _tbus(plan)


def test_failover_map_with_a_plan_in_phases_is_refused_in_one_line(tmp_path, capsys):
    mesh = load_mesh("smartlight")
    oracle_map(Chip(mesh, 0)).save(tmp_path / "map.json")
    plan = tmp_path / "plan.json"
    assert _failover(capsys, "--out", str(plan))["failovers"]
    raw = json.loads(plan.read_text())
    raw["heater_unit"] = "rad"
    plan.write_text(json.dumps(raw))
    code = main(["failover", "--plan", str(plan), "--map", str(tmp_path / "map.json"), "--fail", "gpu4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "--map" in err[0]


def test_failover_text_names_the_map_the_currents_came_through(tmp_path, capsys):
    """The report said "ideal map" even when --map gave a calibrated one."""
    oracle_map(Chip(load_mesh("smartlight"), 0)).save(tmp_path / "map.json")
    assert main(["failover", "--fail", "gpu2"]) == 0
    assert "ideal map" in capsys.readouterr().out
    assert main(["failover", "--fail", "gpu2", "--map", str(tmp_path / "map.json")]) == 0
    out = capsys.readouterr().out
    assert "calibrated map" in out
    assert "ideal map" not in out
