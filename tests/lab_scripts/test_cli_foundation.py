import json
from pathlib import Path

import pytest

from lab_scripts.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_mesh_json_has_counts_and_names(capsys):
    code, out, _ = run(capsys, "mesh", "--mesh", "smartlight", "--json", "--full")
    data = json.loads(out)
    assert code == 0
    assert (data["n_tbus"], data["n_ports"], data["n_heaters"]) == (71, 40, 142)
    assert data["ports"][0] == "port:0"
    assert data["tbus"][0] == "tbu:0.0.0"
    assert data["heaters"][3] == {"channel": 3, "tbu": "tbu:0.0.1", "arm": "bot"}
    assert data["full"] is True


def test_mesh_json_is_a_readable_summary_unless_full_is_asked(capsys):
    # issue 29: `mesh --json` printed 2,087 lines; the per-TBU lists now need --full
    code, out, _ = run(capsys, "mesh", "--mesh", "smartlight", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["full"] is False
    assert (data["n_tbus"], data["n_links"], len(data["ports"])) == (71, 122, 40)
    assert not {"tbus", "heaters", "links", "port_sides", "geometry"} & set(data)
    assert out.count("\n") < 80
    assert data["version"] == 2


def test_mesh_save_and_reload(capsys, tmp_path):
    path = tmp_path / "m.json"
    assert run(capsys, "mesh", "--mesh", "square:2x2", "--save", str(path))[0] == 0
    code, out, _ = run(capsys, "mesh", "--mesh", str(path), "--json")
    assert code == 0
    assert json.loads(out)["n_tbus"] == 12


def test_bad_mesh_is_a_clear_error(capsys):
    code, out, err = run(capsys, "mesh", "--mesh", "hex:3by6", "--json")
    assert code == 2
    assert "unknown mesh" in json.loads(out)["error"]
    assert "hex:RxC" in err


def test_simulate_all_bar_routes_port_to_one_output(capsys, tmp_path):
    png = tmp_path / "s.png"
    code, out, _ = run(capsys, "simulate", "--all", "bar", "--input", "port:3",
                       "--wavelengths", "1549:1551:5", "--json", "--plot", str(png))
    data = json.loads(out)
    assert code == 0
    assert len(data["wavelengths_nm"]) == 5
    best = max(data["outputs_db"].items(), key=lambda kv: kv[1][0])
    assert best[1][0] == pytest.approx(-0.5, abs=0.01)  # one TBU in bar
    assert png.stat().st_size > 10_000


def test_simulate_state_file(capsys, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"schema": "lumion.state", "version": 1, "default": "cross"}))
    code, out, _ = run(capsys, "simulate", "--mesh", "hex:1x1", "--state", str(state),
                       "--input", "0", "--json")
    assert code == 0
    assert set(json.loads(out)["outputs_db"]) == {f"port:{n}" for n in range(12)}


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["--input", "port:99"], "unknown port", 2),
        (["--input", "3", "--wavelengths", "1550:1540:3"], "START:STOP:N", 64),
    ],
)
def test_simulate_errors(capsys, argv, message, status):
    code, out, _ = run(capsys, "simulate", "--all", "bar", "--json", *argv)
    assert code == status
    assert message in json.loads(out)["error"]


@pytest.mark.slow
def test_demo_writes_plot_and_reports_fsr(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "--out", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["ring"]["fsr_ghz"] == pytest.approx(data["ring"]["expected_fsr_ghz"], rel=0.01)
    assert set(data["plot"]) == {"mesh_before", "mesh_after", "timeline", "ring_spectrum"}
    assert all(Path(p).exists() for p in data["plot"].values())
