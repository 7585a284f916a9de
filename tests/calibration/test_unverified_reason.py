"""The map says why a TBU is unverified, and `lumion program` / `lumion route --map` say it too.

Session 38's audit: calibration's own warning told apart a TBU no light path reached (walled
in by failed neighbours: not looked at, nothing says it is dark), one whose lit path showed no
fringe, and one light measured off; the map kept only ``disagreement_rad`` (null for the first
two), so `lumion program`'s refusal could only say "no light path reaches it, or none showed a
fringe". The map now records ``unverified_reason`` and the refusal names the one that happened.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from calibration import procedure
from calibration.confirm import Confirmation
from calibration.map import CalibrationError, CalibrationMap
from calibration.procedure import Options, Progress, calibrate
from calibration.settable import NOT_CONFIRMED, why_not_settable
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from lab_scripts.cli import main
from lab_scripts.errors import EXIT_IMPOSSIBLE
from lab_scripts.schemas import validate
from photonics.topology import hexagonal, mesh_from_spec

FAST = Options(points=12, refine_points=16, crosstalk_repeats=0)
TBU = 4  # of hexagonal(1, 1): one of its six (two would be more than calibration's refusal share)
MESH = "hex:1x2"
LOOKED_FOR = "no light path avoiding the failed and doubtful TBUs reaches it (not looked at, not found dark)"
NO_FRINGE = "the light paths tried through it showed no fringe"


RESULTS: dict[str, object] = {}


@pytest.fixture(scope="module", params=["no-light-path", "no-fringe"])
def unconfirmed(request):
    """A hexagonal(1, 1) calibration where no confirmation path reaches TBU 4 ("no-light-path":
    walled in) or its lit path stays dark ("no-fringe"), and no re-fit helps: it ends
    unverified with no disagreement measured. Returns (how, mesh, map).
    """
    real_probe, real_confirm = procedure.confirm_probe, procedure.confirm_tbu

    def no_path(run, t, doubtful, asked=frozenset()):
        return (None, False) if t == TBU else real_probe(run, t, doubtful, asked)

    def dark_path(bench, cmap, probe, base, **kw):
        c = real_confirm(bench, cmap, probe, base, **kw)
        if probe.tbu != TBU:
            return c
        return Confirmation(TBU, math.nan, math.nan, math.nan, 0.01, c.independent_path, c.src, c.outputs)

    chip = Chip(hexagonal(1, 1), 3, clock=lambda: 0.0)
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "no-light-path":
            mp.setattr(procedure, "confirm_probe", no_path)
        else:
            mp.setattr(procedure, "confirm_tbu", dark_path)
        mp.setattr(procedure, "refit_doubtful", lambda run, t, doubtful: None)
        result = calibrate(DirectBench(chip), FAST, progress=Progress(stream=None))
    RESULTS[request.param] = result  # the whole result, for the report test below
    return request.param, chip.mesh, result.cmap


def test_the_map_records_why_a_tbu_is_unverified_and_the_refusal_says_it(unconfirmed, tmp_path):
    how, mesh, cmap = unconfirmed
    assert cmap.failed == {TBU: "unverified"}
    assert cmap.unverified_reason == {TBU: how}
    assert math.isnan(cmap.disagreement[TBU])
    doc = json.loads(cmap.save(tmp_path / "map.json").read_text())
    validate(doc, "lumion.calibration")
    assert doc["tbus"][TBU]["unverified_reason"] == how
    back = CalibrationMap.load(tmp_path / "map.json", mesh=mesh)
    assert back.unverified_reasons() == {mesh.tbu_names[TBU]: how}
    why = why_not_settable(back, TBU, "bar", trust_unverified=False)
    if how == "no-light-path":
        assert LOOKED_FOR in why
        assert "fringe" not in why
    else:
        assert NO_FRINGE in why
        assert "no light path" not in why


def test_a_map_before_the_reason_is_read_and_says_either(unconfirmed):
    _, mesh, cmap = unconfirmed
    doc = json.loads(json.dumps(cmap.to_dict(), default=float).replace("NaN", "null"))
    for t in doc["tbus"]:
        t.pop("unverified_reason", None)
    old = CalibrationMap.from_dict(doc)
    assert old.unverified_reasons() == {mesh.tbu_names[TBU]: None}
    assert NOT_CONFIRMED in why_not_settable(old, TBU, "bar", trust_unverified=False)


@pytest.mark.parametrize(("reason", "rad", "said"), [
    ("sideways", None, "unverified_reason must be no-light-path/no-fringe/disagrees, not 'sideways'"),
    ("disagrees", None, "unverified_reason 'disagrees' does not match its disagreement_rad (null)"),
    ("no-fringe", 0.4, "unverified_reason 'no-fringe' does not match its disagreement_rad (0.4)"),
])
def test_a_reason_that_contradicts_the_map_is_refused_in_one_line(tmp_path, reason, rad, said):
    path = map_file(tmp_path, {1: "unverified"}, {1: math.nan if rad is None else rad})
    doc = json.loads(path.read_text())
    doc["tbus"][1]["unverified_reason"] = reason
    with pytest.raises(CalibrationError, match="malformed") as info:
        CalibrationMap.from_dict(doc, source="map.json")
    assert said in str(info.value)
    assert "\n" not in str(info.value)


def map_file(tmp_path: Path, failed: dict[int, str], disagreement: dict[int, float],
             reasons: dict[int, str] | None = None) -> Path:
    """A map of ``MESH`` (nominal fits, the sim bench's chip id) recording ``failed``."""
    from calibration.assemble import build_map, placeholder_record
    from photonics.physics import PhysicsDefaults

    mesh = mesh_from_spec(MESH)
    records = {k: placeholder_record(PhysicsDefaults()) for k in range(mesh.n_tbus) if k not in failed}
    cmap = build_map(mesh, "sim-hexagonal-1x2-seed3", records, Options(), failed=failed,
                     disagreement=disagreement, unverified_reason=reasons or {})
    return cmap.save(tmp_path / "map.json")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_program_and_route_name_a_walled_in_tbu_as_not_looked_at(capsys, tmp_path):
    code, out, _ = cli(capsys, "route", "--mesh", MESH, "--connect", "0:5", "--json")
    assert code == 0
    conf = tmp_path / "plan.json"
    conf.write_text(out)
    t = mesh_from_spec(MESH).tbu_index(json.loads(out)["routes"][0]["tbus"][0]["tbu"])
    cmap = map_file(tmp_path, {t: "unverified"}, {t: np.nan}, {t: "no-light-path"})
    bench = tmp_path / "bench.toml"
    bench.write_text(f'schema = "lumion.bench"\nversion = 1\nmesh = "{MESH}"\n'
                     '[heater_driver]\naddress = "sim"\n[laser]\naddress = "sim"\n'
                     '[power_meter]\naddress = "sim"\n[sim]\nseed = 3\nchip = "realistic"\n')
    code, out, err = cli(capsys, "program", "--bench", str(bench), "--configuration", str(conf),
                         "--map", str(cmap))
    assert (code, out, err.count("\n")) == (EXIT_IMPOSSIBLE, "", 1), err
    assert LOOKED_FOR in err
    assert "or none showed a fringe" not in err

    name = mesh_from_spec(MESH).tbu_names[t]
    # a pair routed without it (port 0's only way out is through it)
    code, out, _ = cli(capsys, "route", "--mesh", MESH, "--connect", "1:6", "--map", str(cmap), "--json")
    assert code == 0
    doc = json.loads(out)
    validate(doc, "lumion.route")
    assert LOOKED_FOR in doc["map_avoided"][name]
    assert "lumion route --trust-unverified" in doc["map_avoided"][name]
    assert name not in {h["tbu"] for r in doc["routes"] for h in r["tbus"]}
    code, out, _ = cli(capsys, "route", "--mesh", MESH, "--connect", "1:6", "--map", str(cmap))
    assert f"avoided {name}: the calibration map {cmap} records it as unverified (not confirmed by light: " \
           f"{LOOKED_FOR}" in out


def test_lumion_calibrate_prints_what_light_showed(unconfirmed, tmp_path, capsys):
    """`lumion calibrate`'s UNVERIFIED line said "no light path ... reaches it, or none showed a
    fringe" for both; it now says the one that happened (and --json carries unverified_reasons)."""
    from lab_scripts.cmd_calibrate import _map_summary, _print_report

    how, mesh, _ = unconfirmed
    payload = {**_map_summary(RESULTS[how], mesh, tmp_path / "map.json"), "drift_tracking": False}
    assert payload["unverified_reasons"] == {mesh.tbu_names[TBU]: how}
    _print_report(payload, None)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("UNVERIFIED"))
    assert (LOOKED_FOR if how == "no-light-path" else NO_FRINGE) in line
    assert "or none showed a fringe" not in line
