"""`lumion layout` end to end."""

import csv
import json

import pytest

from lab_scripts.cli import main


@pytest.mark.slow
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


def test_build_s_excludes_the_gdsfactory_import(tmp_path, monkeypatch, capsys):
    """A fake clock: the import takes 100 s, drawing takes none; build_s must not hold the import."""
    from layouts import export

    now = [0.0]
    real_import = export.require_gdsfactory

    def slow_import():
        now[0] += 100.0
        return real_import()

    monkeypatch.setattr(export, "_clock", lambda: now[0])
    monkeypatch.setattr(export, "require_gdsfactory", slow_import)
    assert main(["layout", "--mesh", "hex:1x2", "--out", str(tmp_path / "c.gds"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["import_s"] == 100.0
    assert summary["build_s"] == 0.0
    assert (summary["n_pads"], summary["n_heater_pads"]) == (26, 22)  # 22 heaters + 4 ground pads


def test_png_has_a_scale_bar_and_a_title():
    import matplotlib.pyplot as plt

    from layouts.mesh_cell import mesh_cell
    from layouts.render import layout_figure, scale_bar_um, scale_label

    assert [scale_bar_um(w) for w in (12462.0, 4000.0, 781.0, 60.0)] == [2000.0, 500.0, 100.0, 10.0]
    assert (scale_label(2000.0), scale_label(500.0)) == ("2 mm", "500 µm")
    cell = mesh_cell("hex:1x2")
    fig = layout_figure(cell, "hex:1x2 chip", width_px=400)
    ax = fig.axes[0]
    assert ax.get_title() == "hex:1x2 chip"
    box = cell.dbbox()
    assert ax.images[0].get_extent() == [box.left, box.right, box.bottom, box.top]  # axes in µm
    bars = [a for a in ax.artists if a.get_gid() == "scale_bar"]
    assert len(bars) == 1
    assert bars[0].txt_label.get_text() == scale_label(scale_bar_um(box.width()))
    plt.close(fig)
