"""`lumion calibrate` on the simulated bench."""

import json

import pytest

from calibration.confirm import LEVELS
from calibration.model import heater_positions, neighbour_heaters
from calibration.procedure import Options, crosstalk_readings
from lab_scripts.cli import main
from photonics.topology import hexagonal


@pytest.mark.slow  # a calibration with plots (19 s at load 30)
def test_calibrate_sim_json_and_plots(tmp_path, capsys):
    out = tmp_path / "map.json"
    code = main(["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--seed", "4", "--out", str(out),
                 "--points", "12", "--refine-points", "16", "--verify-routes", "2",
                 "--plot", str(tmp_path / "plots"), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("n_heaters", "operations", "duration_s", "fit_rms_residual", "phase_rms_error_rad",
                "phase_max_error_rad", "min_acr_db"):
        assert key in data
    assert data["n_heaters"] == 12
    neighbours = neighbour_heaters(heater_positions(hexagonal(1, 1).tbu_xy))
    xt = sum(crosstalk_readings(len(n), Options()) for n in neighbours)
    assert data["confirmed_tbus"] == 6
    assert data["unverified_tbus"] == {}
    refs = data["drift"]["reference_operations"]  # drift tracking is on by default
    assert data["drift_tracking"]
    assert refs > 0
    # fits (a TBU refined at one output, keeping clear of its dependents, is measured again at
    # both: counted with the rechecks), crosstalk, confirmation
    rechecks = json.loads(out.read_text())["quality"]["rechecks"]
    assert rechecks <= 1
    assert data["operations"] == 6 * 2 * (12 + 16) + rechecks * 2 * 16 + xt + 6 * LEVELS + refs
    assert data["phase_rms_error_rad"] < 0.02
    assert data["crosstalk_entries_fitted"] > 0
    assert data["crosstalk_rms_error"] < 0.25
    assert json.loads(out.read_text())["chip_id"] == "sim-hexagonal-1x1-seed4"
    assert not (tmp_path / "map.json.ckpt").exists()
    assert len(list((tmp_path / "plots").glob("*.png"))) == 2


def test_calibrate_refuses_bad_arguments(tmp_path, capsys):
    code = main(["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--out",
                 str(tmp_path / "nodir" / "map.json"), "--json"])
    assert code == 2
    assert "does not exist" in json.loads(capsys.readouterr().out)["error"]


def _sim_config(tmp_path, seed, extra=""):
    path = tmp_path / "bench.toml"
    path.write_text('schema = "lumion.bench"\nversion = 1\nmesh = "hex:1x1"\n'
                    '[heater_driver]\naddress = "sim"\n[laser]\naddress = "sim"\n'
                    f'[power_meter]\naddress = "sim"\n[sim]\nseed = {seed}\nheater_link = "url"\n{extra}')
    return path


def test_bench_config_chooses_the_simulated_chip_model(tmp_path):
    import argparse

    from lab_scripts.cmd_calibrate import open_bench

    for extra, model in (("", "realistic"), ('chip = "ideal"\n', "ideal")):
        bench = open_bench(argparse.Namespace(bench=str(_sim_config(tmp_path, 1, extra)), seed=None,
                                              mesh="smartlight"))
        try:
            assert bench.sim.chip.model == model
            assert (bench.sim.chip.truth.realism is None) == (model == "ideal")
        finally:
            bench.close()


def test_seed_precedence_config_then_flag(tmp_path):
    """A bench config's [sim] seed is used unless --seed is given explicitly."""
    import argparse

    from lab_scripts.cmd_calibrate import open_bench

    cfg = _sim_config(tmp_path, 7)
    for given, want in ((None, 7), (3, 3), (0, 0)):
        bench = open_bench(argparse.Namespace(bench=str(cfg), seed=given, mesh="smartlight"))
        try:
            assert bench.sim.chip.seed == want
            assert bench.chip_id.endswith(f"seed{want}")
        finally:
            bench.close()


@pytest.mark.slow  # 17 s in the quick suite at load 12-27 (issue 29)
def test_calibrate_tracks_drift_by_default_and_reports_it(tmp_path, capsys):
    """Issue 26 item 4: drift tracking was off unless a script set Options(drift_references=4),
    and `lumion calibrate` said nothing of drift. Now it is on, its figures are in --json and in
    the report, and --no-drift-tracking turns it off."""
    args = ["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--seed", "4", "--out",
            str(tmp_path / "m.json"), "--points", "12", "--refine-points", "16", "--verify-routes", "0"]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["drift_tracking"] is True
    drift = data["drift"]
    assert len(drift["reference_tbus"]) == 4
    assert drift["reference_rounds"] >= 2
    assert drift["drift_seen_rad"] < 0.015  # a stable chip: nothing to compensate
    assert drift["drift_compensated_tbus"] == 0
    assert main(args) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("drift:")]
    assert len(line) == 1
    assert "none seen" in line[0]
    assert "tbu:" in line[0]
    assert main([*args, "--no-drift-tracking", "--json"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["drift_tracking"] is False
    assert off["drift"] is None
    assert "drift" not in json.loads((tmp_path / "m.json").read_text())["quality"]


def test_max_operations_on_the_command_line(tmp_path, capsys):
    """--max-operations sets the budget (the refusal names it and how to raise it); a bad value
    is a usage error before any work."""
    out = tmp_path / "m.json"
    args = ["calibrate", "--bench", "sim", "--mesh", "hex:1x1", "--seed", "4", "--out", str(out),
            "--verify-routes", "0", "--quiet"]
    assert main([*args, "--max-operations", "50"]) == 6
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "budget of 50 set-and-read operations" in err[0]
    assert "--max-operations" in err[0]
    assert not out.exists()
    assert main([*args, "--max-operations", "0"]) == 64  # usage
    assert "--max-operations" in capsys.readouterr().err
