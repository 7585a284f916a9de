"""`schedule` and `phases` emit configurations `program` accepts; `mesh --json` can be drawn."""

from __future__ import annotations

import json
from pathlib import Path

from lab_scripts.cli import main
from photonics.configuration import Configuration
from photonics.topology import smartlight

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_json(capsys, argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_schedule_writes_programmable_configurations(capsys, tmp_path):
    out = tmp_path / "sched"
    code, d = run_json(capsys, ["schedule", "--ports", "spread:8", "--out", str(out)])
    assert code == 0
    assert (d["schema"], d["version"]) == ("lumion.schedule", 1)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"matching-{k:02d}.json" for k in range(1, 8)]
    mesh = smartlight()
    for row, path in zip(d["configurations"], files, strict=True):
        assert row["configuration_file"] == str(path)
        on_disk = json.loads(path.read_text())
        assert on_disk == row["configuration"]
        conf = Configuration.from_dict(on_disk, mesh)
        assert len(conf.routes) == 4  # one route per pair of the matching
        ends = sorted(mesh.port_names[p] for r in conf.routes for p in (r.src, r.dst))
        assert ends == sorted(p for pair in row["pairs"] for p in pair)


def test_phases_configuration_is_programmed_on_the_simulated_bench(capsys, tmp_path):
    out = tmp_path / "phases"
    code, d = run_json(capsys, ["phases", str(EXAMPLES / "tp4-dp2.toml"), "--out", str(out)])
    assert code == 0
    assert (d["schema"], d["version"]) == ("lumion.phases", 1)
    assert len(d["configurations"]) == 3
    step = d["configurations"][0]
    assert step["configuration"]["schema"] == "lumion.configuration"
    path = step["configuration_file"]
    code, prog = run_json(capsys, ["program", "--bench", "sim", "--configuration", path, "--no-verify"])
    assert code == 0
    assert prog["mesh_fingerprint"] == step["configuration"]["mesh_fingerprint"]
    assert prog["channels"] > 0
    states = list(step["configuration"]["tbus"].values())
    assert prog["n_tbus_by_state"] == {s: states.count(s) for s in ("bar", "cross")} | {"split": 0}


def test_mesh_json_has_links_to_draw(capsys):
    code, d = run_json(capsys, ["mesh", "--mesh", "smartlight", "--full"])
    assert code == 0
    mesh = smartlight()
    assert len(d["links"]) == d["n_links"] == mesh.n_links
    tbu_ports = {f"{t}/{side}" for t in mesh.tbu_names for side in ("a0", "a1", "b0", "b1")}
    ends = [e for lk in d["links"] for e in (lk["from"], lk["to"])]
    assert set(ends) <= tbu_ports
    assert len(set(ends)) == len(ends)  # a TBU port has at most one link
    assert set(d["port_sides"]) == set(d["ports"])
    assert not set(d["port_sides"].values()) & set(ends)  # a mesh port's side has no link
    assert set(d["geometry"]["tbus"]) == set(d["tbus"])
    # the same names as the topology file
    assert [[lk["from"], lk["to"]] for lk in d["links"]] == mesh.to_dict()["links"]
