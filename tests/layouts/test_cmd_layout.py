"""`lumion layout` end to end."""

import csv
import json

from lab_scripts.cli import main


def test_layout_json(tmp_path, capsys):
    out = tmp_path / "chip.gds"
    png = tmp_path / "chip.png"
    assert main(["layout", "--mesh", "hex:1x2", "--out", str(out), "--png", str(png), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("gds", "n_tbus", "n_ports", "n_pads", "size_um", "pad_map"):
        assert key in summary
    assert (summary["n_tbus"], summary["n_ports"], summary["n_heater_pads"]) == (11, 16, 22)
    assert out.stat().st_size > 10_000
    assert png.read_bytes()[:4] == b"\x89PNG"
    with open(summary["pad_map"]) as handle:
        rows = list(csv.DictReader(handle))
    assert {int(r["channel"]) for r in rows if r["channel"]} == set(range(22))
    assert json.loads((tmp_path / "chip.pads.json").read_text())["schema"] == "lumion.padmap"


def test_layout_text(tmp_path, capsys):
    assert main(["layout", "--mesh", "hex:1x1", "--out", str(tmp_path / "c.gds")]) == 0
    assert "6 TBUs" in capsys.readouterr().out


def test_unsupported_mesh_exits_2_with_json_error(tmp_path, capsys):
    code = main(["layout", "--mesh", "square:2x2", "--out", str(tmp_path / "s.gds"), "--json"])
    assert code == 2
    error = json.loads(capsys.readouterr().out)
    assert error["type"] == "LayoutError"
    assert "hex:RxC" in error["error"]
    assert not (tmp_path / "s.gds").exists()
