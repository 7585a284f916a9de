"""`lumion synthesize`: its outputs, its files, what `lumion program` makes of them, bad input."""

import json

import pytest

from lab_scripts.cli import main
from lab_scripts.errors import EXIT_INPUT, EXIT_UNVERIFIED
from photonics.configuration import Configuration
from photonics.state import MeshState
from photonics.topology import hexagonal, smartlight, square, triangular


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_splitter_json_file_and_plot_and_program_takes_the_file(capsys, tmp_path):
    out, plot = tmp_path / "split.json", tmp_path / "split.png"
    code, text, _ = run(capsys, "synthesize", "--splitter", "1:4=1,8=2,12=1", "--out", str(out),
                        "--plot", str(plot), "--json")
    assert code == 0
    d = json.loads(text)
    assert d["schema"] == "lumion.synthesize"
    assert d["kind"] == "splitter"
    assert d["achieved"][0]["max_share_error"] < 1e-3
    assert [round(x[0], 3) for x in d["achieved"][0]["shares"]] == [0.25, 0.5, 0.25]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    conf = Configuration.from_dict(json.loads(out.read_text()), smartlight())
    assert sorted(r.dst for r in conf.routes) == [4, 8, 12]
    assert conf.states().count("split") == 2
    # program reads it, programs it and checks each branch by light (an ideal map on a
    # fabricated chip lands off: exit 5, with every route named; never a refusal of the file)
    code, text, _ = run(capsys, "program", "--configuration", str(out), "--seed", "3", "--json")
    assert code in (0, EXIT_UNVERIFIED)
    report = json.loads(text)
    assert len(report["verification"]["routes"]) == 3
    assert report["n_tbus_by_state"]["split"] == 2


def test_unitary_writes_its_heater_state_and_says_why_no_configuration(capsys, tmp_path):
    out = tmp_path / "u.json"
    code, text, _ = run(capsys, "synthesize", "--mesh", "square:3x3", "--unitary", "random:3:5", "--out",
                        str(out))
    assert code == 0
    assert "not a configuration" in text
    assert "common phase" in text
    state = MeshState.load(out, square(3, 3))
    assert state.n_tbus == square(3, 3).n_tbus
    fid = float(text.splitlines()[3].split()[2])
    assert fid > 0.999


def test_unitary_on_a_triangular_mesh(capsys, tmp_path):
    out = tmp_path / "u.json"
    code, text, _ = run(capsys, "synthesize", "--mesh", "triangular:3x4", "--unitary", "random:3:5", "--out",
                        str(out), "--json")
    assert code == 0
    d = json.loads(text)
    assert d["achieved"][0]["fidelity"] > 0.999
    assert d["out_schema"] == "lumion.state"
    assert "common phase" in d["not_programmable"]
    MeshState.from_dict(json.loads(out.read_text()), triangular(3, 4))


def test_mz_filter_reports_its_passband_and_writes_its_heater_state(capsys, tmp_path):
    out, plot = tmp_path / "mz.json", tmp_path / "mz.png"
    code, text, _ = run(capsys, "synthesize", "--mesh", "hex:2x2", "--mz-filter", "1550:0.089", "--out",
                        str(out), "--plot", str(plot), "--json")
    assert code == 0
    d = json.loads(text)
    assert d["kind"] == "mz_filter"
    assert d["out_schema"] == "lumion.state"
    got = d["achieved"][0]
    assert abs(got["centre_nm"] - 1550.0) < 1e-3 * d["filter"]["fsr_nm"]
    assert abs(got["fwhm_nm"] - 0.089) < 1e-3
    assert got["extinction_db"] > 40
    assert d["filter"]["arm_difference_tbus"] == 4
    assert len(d["outputs"]) == 2
    assert "common phases of the arms" in d["not_programmable"]
    MeshState.from_dict(json.loads(out.read_text()), hexagonal(2, 2))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, text, _ = run(capsys, "synthesize", "--mesh", "hex:2x2", "--mz-filter", "1550:0.089")
    assert "passband at port:" in text
    assert "not a configuration" in text
    # without a phase-calibrated map program refuses the state in one line saying what to run
    code, text, err = run(capsys, "program", "--bench", "sim", "--mesh", "hex:2x2", "--configuration",
                          str(out))
    assert code == EXIT_INPUT
    assert len(err.strip().splitlines()) == 1
    assert "is a heater state (lumion.state" in err
    assert "lumion calibrate --common-phase" in err


@pytest.mark.parametrize(("argv", "says"), [
    (["--mesh", "hex:2x2", "--unitary", "dft:3"], "square mesh"),
    (["--mesh", "square:3x3", "--coupler", "1.5"], "coupling"),
    (["--splitter", "1:99=1"], "port 99"),
    (["--splitter", "1:4=1,4=2"], None),
    (["--mesh", "square:3x3", "--unitary", "NOT_UNITARY"], "not unitary"),
    (["--mesh", "hex:2x2", "--filter", "1550:x"], "CENTRE_NM:BANDWIDTH_NM"),
    (["--mesh", "hex:2x2", "--filter", "1550:0.1"], "free spectral range"),
    (["--mesh", "hex:2x2", "--mz-filter", "1550:0.05"], "0.0890 (4 TBUs)"),
    (["--mesh", "hex:2x2", "--mz-filter", "1550"], "--mz-filter takes CENTRE_NM:BANDWIDTH_NM"),
    (["--mesh", "triangular:3x3", "--unitary", "dft:3"], "triangular:3x4"),
])
def test_bad_input_is_one_line(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "NOT_UNITARY").write_text(json.dumps([[1, 0.2], [0, 1]]))
    code, text, err = run(capsys, "synthesize", *argv)
    assert code in (EXIT_INPUT, 64)
    assert len(err.strip().splitlines()) == 1
    assert not text
    if says:
        assert says in err
    code, text, _ = run(capsys, "synthesize", *argv, "--json")
    assert json.loads(text)["schema"] == "lumion.error"


@pytest.mark.slow  # 11 s in the quick suite at load 12-27 (issue 29)
def test_filter_reports_its_notch_and_writes_its_heater_state(capsys, tmp_path):
    out, plot = tmp_path / "ring.json", tmp_path / "ring.png"
    code, text, _ = run(capsys, "synthesize", "--mesh", "hex:2x2", "--filter", "1550:0.035", "--out",
                        str(out), "--plot", str(plot), "--json")
    assert code == 0
    d = json.loads(text)
    assert d["kind"] == "filter"
    assert d["out_schema"] == "lumion.state"
    got = d["achieved"][0]
    assert abs(got["centre_nm"] - 1550.0) < 1e-4
    assert abs(got["fwhm_nm"] - 0.035) < 2e-3
    assert got["extinction_db"] > 20
    assert len(d["filter"]["loop"]) == 6
    assert d["not_programmable"]
    assert "common phase" in d["not_programmable"]
    MeshState.from_dict(json.loads(out.read_text()), hexagonal(2, 2))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _oracle_map(seed, path):
    """TEST-ONLY ORACLE: the simulated chip's hidden heater truth as a calibration map (what a
    perfect calibration of `--seed SEED`'s chip would find), saved to ``path``."""
    import numpy as np

    from calibration.map import CalibrationMap, mesh_signature
    from instruments.sim.bench import SimulatedBench

    with SimulatedBench(smartlight(), seed, crosstalk_fraction=0.01, model="realistic") as sim:
        chip = sim.chip
        h, p, mesh = chip.truth.heaters, chip.truth.params, chip.mesh
        cmap = CalibrationMap(chip_id=chip.chip_id, mesh=mesh_signature(mesh),
                              delta=np.mod(p.offset_top - p.offset_bot, 2 * np.pi), rho2=h.rho2, rho3=h.rho3,
                              eta=h.eta, crosstalk=h.crosstalk.tocsr(), created="oracle",
                              tbu_names=mesh.tbu_names, nearest_fraction=0.01, cutoff_tbu=1.05,
                              failed={11: "unverified"})  # on the tree the map-free route takes
    return cmap.save(path)


def test_a_splitter_refined_on_a_map_is_confirmed_by_light_when_programmed_through_it(capsys, tmp_path):
    """The whole path: synthesize on the map's model (its unverified TBU avoided), program the
    configuration through the same map on the chip it describes, every branch measured ok."""
    cmap = _oracle_map(3, tmp_path / "map.json")
    out = tmp_path / "split.json"
    code, text, _ = run(capsys, "synthesize", "--splitter", "1:4=1,8=2,12=1", "--map", str(cmap), "--out",
                        str(out), "--json")
    assert code == 0
    d = json.loads(text)
    assert "tbu:" in d["tbus"][0]
    assert smartlight().tbu_names[11] not in d["tbus"]
    assert d["chip"].startswith("calibration map")
    code, text, _ = run(capsys, "program", "--configuration", str(out), "--map", str(cmap), "--seed", "3",
                        "--json")
    report = json.loads(text)
    assert code == 0, report
    assert [r["status"] for r in report["verification"]["routes"]] == ["ok", "ok", "ok"]
