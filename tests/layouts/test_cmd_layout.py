"""`lumion layout` end to end."""

import csv
import json

import numpy as np
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
    # the zoomed TBU picture beside it, named in the output (tests/layouts/test_layout_die.py
    # had its own layout and pictures for this until issue 29)
    assert summary["plot_tbu"] == str(tmp_path / "chip-tbu.png")
    assert (tmp_path / "chip-tbu.png").stat().st_size > 10_000
    with open(summary["pad_map"]) as handle:
        rows = list(csv.DictReader(handle))
    assert {int(r["channel"]) for r in rows if r["channel"]} == set(range(22))
    assert json.loads((tmp_path / "chip.pads.json").read_text())["schema"] == "lumion.padmap"


@pytest.mark.slow  # a layout build (8 s at load 30)
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


def _layers_with_polygons(cell, box=None):
    """(layer, datatype) of every layer with a polygon in ``cell`` (or one overlapping ``box``),
    counted with klayout on the flattened cell, and visible in the active PDK's layer views.
    """
    import klayout.db as kdb
    from gdsfactory.pdk import get_layer_views

    hidden = {tuple(v.layer) for v in get_layer_views().layer_views.values() if v.layer and not v.visible}
    out = set()
    for index in cell.kcl.layer_indexes():
        info = cell.kcl.layout.get_info(index)
        shapes = cell.begin_shapes_rec(index)
        shapes.shape_flags = kdb.Shapes.SPolygons | kdb.Shapes.SBoxes | kdb.Shapes.SPaths  # not labels
        region = kdb.Region(shapes)
        if box is not None:
            region &= kdb.Region(box.to_itype(cell.kcl.dbu))
        if not region.is_empty() and (info.layer, info.datatype) not in hidden:
            out.add((info.layer, info.datatype))
    return out


def _legend_layers(fig):
    """The layer legend's entries as {(layer, datatype): text} (``"HEATER 47/0: heaters"``)."""
    import re

    legends = [g for g in fig.legends if g.get_gid() == "layer_legend"]
    assert len(legends) == 1, "the picture has no layer legend"
    out = {}
    for text in legends[0].get_texts():
        number = re.search(r" (\d+)/(\d+)(:|$)", text.get_text())
        out[(int(number[1]), int(number[2]))] = text.get_text()
    return legends[0], out


@pytest.mark.slow  # a layout build and its pictures
def test_png_has_a_layer_legend_of_the_layers_it_shows_off_the_chip():
    """Every layer drawn on the chip is in the legend, by the PDK's name, and nothing else;
    the legend sits below the picture, clear of the geometry (issue 29)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from layouts.mesh_cell import mesh_cell
    from layouts.pdk import layer
    from layouts.render import layout_figure, pdk_layer_names, tbu_box

    cell = mesh_cell("hex:1x2")
    names = pdk_layer_names()
    fig = layout_figure(cell, "hex:1x2 chip", width_px=400)
    legend, entries = _legend_layers(fig)
    assert set(entries) == _layers_with_polygons(cell)
    for key, text in entries.items():
        assert text.startswith(f"{'/'.join(names[key])} {key[0]}/{key[1]}")
    heater, wires = tuple(layer("heater")), tuple(layer("metal_routing"))
    assert entries[heater].endswith(": heaters")
    assert "heater signal wires" in entries[wires]
    patches = dict(zip(entries, legend.get_patches(), strict=True))
    image = np.ma.getdata(fig.axes[0].images[0].get_array())[..., :3].reshape(-1, 3)
    # every pixel's colour as matplotlib's to_hex spells it (round(v * 255), two hex digits
    # each), in one numpy pass: to_hex per pixel took 4-14 s of CPU here (issue 29)
    sample = image[:: max(1, len(image) // 200_000)].astype(float)
    levels = np.unique(np.round(sample * 255).astype(int), axis=0)
    drawn = {"#" + "".join(f"{v:02x}" for v in row) for row in levels}
    assert to_hex(patches[heater].get_facecolor()) in drawn  # the colour klayout drew the heaters in
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box, chip = legend.get_window_extent(renderer), fig.axes[0].get_window_extent(renderer)
    assert not box.overlaps(chip), f"legend {box} covers the picture {chip}"
    assert fig.bbox.contains(box.x0, box.y0)
    assert fig.bbox.contains(box.x1, box.y1)
    plt.close(fig)

    zoom = tbu_box(cell)
    fig = layout_figure(cell, "one TBU", width_px=400, box=zoom)
    _, zoomed = _legend_layers(fig)
    assert heater in zoomed
    assert set(zoomed) <= _layers_with_polygons(cell, zoom)
    assert tuple(layer("pad_opening")) not in zoomed  # no pad near tbu:0.0.0
    assert tuple(layer("dicing")) not in zoomed  # the saw lane is outside the zoom
    plt.close(fig)


@pytest.mark.parametrize("transparent", [False, True])
def test_the_picture_is_read_as_from_klayouts_png(transparent):
    """The pixels taken from klayout's buffer (layouts.render._buffer_rgb, no PNG round trip:
    issue 29) are the array matplotlib reads from klayout's PNG of the same buffer, channel
    for channel: a byte order read wrong would swap the layers' colours without an error."""
    import io

    import matplotlib.pyplot as plt
    from klayout import lay

    from layouts.render import _buffer_rgb

    buffer = lay.PixelBuffer(5, 3)
    buffer.transparent = transparent
    for x, y, argb in [(0, 0, 0xFF102030), (4, 0, 0x80FF0000), (2, 1, 0xFF00FF00), (4, 2, 0x400000FF)]:
        buffer.set_pixel(x, y, argb)
    want = plt.imread(io.BytesIO(buffer.to_png_data()))
    got = _buffer_rgb(buffer)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
