"""``lumion program --map`` refuses, before anything is sent, a configuration that needs a TBU
the map records as failed: dead, stuck in the other state, unverified, or with a broken heater
(issue 26: never say OK while the light goes elsewhere). One stderr line names the TBU; exit 3.

Before this check only a heater fault was refused: a route through a dead, stuck or
unverified TBU was programmed (the map leaves a failed TBU undriven) and only light, where a
meter exists, could say it was off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_scripts.cli import main
from lab_scripts.errors import EXIT_IMPOSSIBLE

MESH = "hex:1x2"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def bench_file(tmp_path: Path) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(f'schema = "lumion.bench"\nversion = 1\nmesh = "{MESH}"\n'
                    '[heater_driver]\naddress = "sim"\n[laser]\naddress = "sim"\n'
                    '[power_meter]\naddress = "sim"\n[sim]\nseed = 3\nchip = "realistic"\n')
    return path


def plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[Path, object]:
    """A route 0 -> 5 (file) and its first hop."""
    from lab_scripts.common import load_configuration
    from photonics.topology import mesh_from_spec

    code, out, _ = run(capsys, "route", "--mesh", MESH, "--connect", "0:5", "--json")
    assert code == 0
    path = tmp_path / "plan.json"
    path.write_text(out)
    return path, load_configuration(str(path), mesh_from_spec(MESH)).routes[0].hops[0]


def map_file(tmp_path: Path, failed: dict[int, str], disagreement: dict[int, float] | None = None) -> Path:
    """A map of the bench's mesh (nominal fits) recording ``failed``."""
    from calibration.assemble import build_map, placeholder_record
    from calibration.options import Options
    from photonics.physics import PhysicsDefaults
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(MESH)
    records = {k: placeholder_record(PhysicsDefaults()) for k in range(mesh.n_tbus) if k not in failed}
    cmap = build_map(mesh, "sim-hexagonal-1x2-seed3", records, Options(), failed=failed,
                     disagreement=disagreement or {})
    return cmap.save(tmp_path / "map.json")


def refused(capsys, tmp_path, conf: Path, cmap: Path, *extra: str) -> str:
    code, out, err = run(capsys, "program", "--bench", str(bench_file(tmp_path)), "--configuration",
                         str(conf), "--map", str(cmap), *extra)
    assert (code, out, err.count("\n")) == (EXIT_IMPOSSIBLE, "", 1), err
    assert "nothing was sent" in err
    return err


def other(state: str) -> str:
    return "bar" if state == "cross" else "cross"


def test_a_route_through_a_dead_tbu_is_refused(capsys, tmp_path):
    conf, hop = plan(capsys, tmp_path)
    err = refused(capsys, tmp_path, conf, map_file(tmp_path, {hop.tbu: "dead"}))
    from photonics.topology import mesh_from_spec
    assert f"crosses {mesh_from_spec(MESH).tbu_names[hop.tbu]} in {hop.state}" in err
    assert "records as dead" in err


def test_a_route_needing_a_stuck_tbu_in_its_other_state_is_refused(capsys, tmp_path):
    conf, hop = plan(capsys, tmp_path)
    err = refused(capsys, tmp_path, conf, map_file(tmp_path, {hop.tbu: other(hop.state)}))
    assert f"stuck in {other(hop.state)}" in err


def test_a_route_through_a_stuck_tbu_in_its_own_state_is_programmed(capsys, tmp_path):
    """Stuck in the state the route needs: the TBU passes the light that way undriven."""
    conf, hop = plan(capsys, tmp_path)
    code, _, err = run(capsys, "program", "--bench", str(bench_file(tmp_path)), "--configuration", str(conf),
                       "--map", str(map_file(tmp_path, {hop.tbu: hop.state})), "--no-verify")
    assert code == 0, err


def test_a_route_through_an_unverified_tbu_is_refused_unless_trusted(capsys, tmp_path):
    conf, hop = plan(capsys, tmp_path)
    cmap = map_file(tmp_path, {hop.tbu: "unverified"}, {hop.tbu: 0.123})
    err = refused(capsys, tmp_path, conf, cmap)
    assert "unverified (light disagreed with its fit by 0.123 rad" in err
    assert "--trust-unverified" in err
    code, _, err = run(capsys, "program", "--bench", str(bench_file(tmp_path)), "--configuration", str(conf),
                       "--map", str(cmap), "--trust-unverified", "--no-verify")
    assert code == 0, err


def test_a_split_at_a_failed_tbu_is_refused(capsys, tmp_path):
    """A synthesized configuration (no routes) that splits light at a dead TBU."""
    from photonics.configuration import Configuration
    from photonics.topology import mesh_from_spec

    mesh = mesh_from_spec(MESH)
    conf = Configuration.parked(mesh)
    fractions = conf.cross_fraction.copy()
    fractions[2] = 0.5
    path = tmp_path / "split.json"
    path.write_text(json.dumps(Configuration(fractions, mesh=mesh).to_dict(mesh)))
    err = refused(capsys, tmp_path, path, map_file(tmp_path, {2: "bar"}))
    assert f"splits light at {mesh.tbu_names[2]}" in err


def test_an_unverified_tbu_without_a_disagreement_is_not_called_dark():
    """Audit of session 38: an unverified TBU the confirmation stage could not reach (walled in by
    failed neighbours: no light path to it) was refused as 'no fringe through any path', as if it
    were dark. The map records NaN for both that and a fringe not seen; the line now says what it is."""
    import math
    from types import SimpleNamespace

    from calibration.settable import why_not_settable

    cmap = SimpleNamespace(failed={3: "unverified"}, disagreement={3: math.nan})
    why = why_not_settable(cmap, 3, "bar", trust_unverified=False)
    assert "no fringe through any path" not in why
    assert "no light path avoiding the failed and doubtful TBUs reaches it" in why
    assert "not found dark" in why
