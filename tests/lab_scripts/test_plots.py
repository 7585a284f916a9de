"""Plots show their data: lines inside the axes limits, legends off the data, accelerators named."""

from __future__ import annotations

import numpy as np
import pytest

from lab_scripts.cli import main
from lab_scripts.plots import LABELLED_PORTS, fabric_marks, mesh_figure, spectrum_figure

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.transforms import Bbox  # noqa: E402

WL = np.linspace(1549.0, 1551.0, 201)


def drawn(fig):
    """Lay the figure out (constrained layout runs at draw time) and return its renderer."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def assert_lines_inside_limits(ax, margin=0.02):
    """Every plotted point lies inside the limits, and clear of the top edge by ``margin``."""
    low, high = ax.get_ylim()
    x_low, x_high = ax.get_xlim()
    for line in ax.lines:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        if not len(y):
            continue
        assert y.min() >= low
        assert y.max() <= high - margin * (high - low), f"{line.get_label()} sits on or above the top"
        assert x.min() >= x_low
        assert x.max() <= x_high


def assert_legend_off(fig, ax, area: Bbox) -> None:
    renderer = drawn(fig)
    legend = ax.get_legend()
    assert legend is not None
    box = legend.get_window_extent(renderer)
    assert not box.overlaps(area), f"legend {box} covers the data area {area}"
    assert fig.bbox.contains(box.x0, box.y0)
    assert fig.bbox.contains(box.x1, box.y1)


def test_readme_spectrum_line_is_inside_the_frame():
    """The README's first plot: one flat port at -0.5 dB (ideal bar mesh)."""
    fig = spectrum_figure(WL, {"port:4": np.full(201, -0.5), "port:9": np.full(201, -90.0)},
                          "smartlight: light into port:3")
    ax = fig.axes[0]
    assert_lines_inside_limits(ax)
    low, high = ax.get_ylim()
    assert low < -0.5 - 0.05 * (high - low)  # clear of the bottom too
    assert ax.get_xlabel() == "wavelength (nm)"
    assert "dB" in ax.get_ylabel()
    assert_legend_off(fig, ax, ax.get_window_extent(drawn(fig)))


def test_forty_port_legend_names_the_strongest_and_stays_off_the_axes():
    rng = np.random.default_rng(0)
    ports = {f"port:{k}": -5.0 * k + 3 * np.sin(WL * 40 + k) - rng.uniform(0, 2) for k in range(40)}
    ports["port:39"] = np.where(np.arange(201) % 20 == 0, -300.0, -20.0)  # deep notches
    fig = spectrum_figure(WL, ports, "40 ports")
    ax = fig.axes[0]
    assert_lines_inside_limits(ax)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == LABELLED_PORTS + 1
    assert labels[0] == "port:0"
    assert labels[-1].endswith("weaker ports")
    assert_legend_off(fig, ax, ax.get_window_extent(drawn(fig)))


def test_single_wavelength_point_is_inside_the_axes():
    fig = spectrum_figure(np.array([1550.0]), {"port:1": np.array([-3.0])}, "one wavelength")
    assert_lines_inside_limits(fig.axes[0])


@pytest.mark.slow
def test_failover_mesh_plot_names_every_accelerator_and_keeps_the_legend_off_the_mesh():
    from photonics.fabric import default_fabric, failover, place_job, ring_job

    fabric = default_fabric()
    plan = place_job(fabric, ring_job(fabric.workers, "ring"))
    rec = failover(fabric, plan.job, "gpu2", plan)
    marks = fabric_marks(fabric, rec.plan.job.accelerators)
    status = {m.name: m.status for m in marks}
    assert status["gpu2"] == "out"
    assert status[rec.spare] == "job"
    routes = [{"label": f"{a}->{b}", "tbus": list(lk.route.tbus)}
              for lk, (a, b) in zip(rec.plan.links, rec.plan.job.links, strict=True)]
    fig = mesh_figure(fabric.mesh, routes, rec.plan.failed_tbus, "after gpu2", marks)
    ax = fig.axes[0]
    renderer = drawn(fig)
    texts = [t.get_text() for t in ax.texts]
    for acc in fabric.accelerators:
        assert any(t.startswith(acc.name + "\n") for t in texts), acc.name
    mesh_xy = fabric.mesh.tbu_xy.reshape(-1, 2)
    data_area = Bbox(ax.transData.transform([mesh_xy.min(0), mesh_xy.max(0)]))
    assert_legend_off(fig, ax, data_area)
    for text in ax.texts:  # every label is inside the figure, so none is cut off
        box = text.get_window_extent(renderer)
        assert fig.bbox.contains(box.x0, box.y0)
        assert fig.bbox.contains(box.x1, box.y1)


@pytest.mark.slow
def test_failover_plot_is_written(tmp_path, capsys):
    png = tmp_path / "rec.png"
    assert main(["failover", "--fail", "gpu2", "--plot", str(png)]) == 0
    assert f"wrote {png}" in capsys.readouterr().out
    assert png.stat().st_size > 20_000


def test_descending_wavelength_grid_keeps_the_axis_ascending():
    fig = spectrum_figure(WL[::-1], {"port:1": np.linspace(-1, -9, 201)}, "frequency grid")
    low, high = fig.axes[0].get_xlim()
    assert low < high
    assert_lines_inside_limits(fig.axes[0])


def test_one_colour_meaning_per_thing_and_a_legend_for_every_mark():
    # issue 29: the failed red was also a route's colour, and `*` was explained nowhere
    from matplotlib.colors import to_hex

    from lab_scripts.plots import FAILED_COLOUR, ROUTE_COLOURS
    from photonics.topology import hexagonal

    mesh = hexagonal(1, 2)
    routes = [{"label": f"r{k}{' *' if k == 1 else ''}", "tbus": [k]} for k in range(10)]
    fig = mesh_figure(mesh, routes, {3: "dead"}, "t")
    ax = fig.axes[0]
    route_colours = {to_hex(line.get_color()) for line in ax.lines if line.get_label().startswith("r")}
    assert route_colours <= set(ROUTE_COLOURS)
    assert to_hex(FAILED_COLOUR) not in route_colours
    assert "#d62728" not in route_colours  # tab10's red
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert any("failed TBU" in label for label in labels)
    assert "* = re-routed" in legend.get_title().get_text()


def test_the_routes_picture_shows_each_route_s_loss_acr_and_margin(tmp_path, monkeypatch, capsys):
    # issue 29: routes.png had no loss or margin on it
    import lab_scripts.plots

    seen = {}

    def capture(path, mesh, routes, *args, **kwargs):
        seen["labels"] = [r["label"] for r in routes]

    monkeypatch.setattr(lab_scripts.plots, "mesh_drawing", capture)
    assert main(["route", "--mesh", "hex:1x2", "--connect", "0:5", "--plot", str(tmp_path / "r.png"),
                 "--json"]) == 0
    import json

    r = json.loads(capsys.readouterr().out)["routes"][0]
    assert seen["labels"] == [f"port:0->port:5: loss {r['loss_db']:.1f} dB, ACR {r['acr_db']:.1f} dB, "
                              f"margin {r['margin_db']:.1f} dB"]


def test_the_timeline_names_every_stage_s_time_and_marks_the_slivers(tmp_path, monkeypatch):
    # issue 29: settle (0.05 ms) and verify (0.3 ms) were too thin to see on a ~90 ms bar
    from lab_scripts import cmd_failover

    figures = []
    monkeypatch.setattr(cmd_failover, "save_figure", lambda fig, path: figures.append(fig))
    timing = {"detect": 1.2, "compute": 40.0, "write": 27.0, "settle": 0.046, "relock": 5.0, "verify": 0.32}
    cmd_failover.timeline_plot(tmp_path / "t.png", [{"failed": "gpu2", "spare": "spare0", "timing_ms": timing,
                                                     "rerouted_links": []}], "t")
    ax = figures[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "settle 0.046 ms" in labels
    assert "verify 0.32 ms" in labels
    markers = [line for line in ax.lines if line.get_marker() == "v"]
    assert len(markers) == 2  # settle and verify, each under 1 % of the bar


def test_routes_sharing_a_tbu_are_drawn_side_by_side_not_mixed():
    # issue 29: a TBU carrying two routes came out in a mix of both colours
    from photonics.topology import hexagonal

    mesh = hexagonal(1, 2)
    routes = [{"label": "a", "tbus": [0, 1]}, {"label": "b", "tbus": [1, 2]}]
    fig = mesh_figure(mesh, routes, None, "t")
    lines = [ln for ln in fig.axes[0].lines if ln.get_color() in ("#1f77b4", "#ff7f0e")]
    a, b = np.asarray(mesh.tbu_xy[1], dtype=float)

    def on_tbu1(line):
        xs, ys = line.get_data()
        mid = np.array([np.mean(xs), np.mean(ys)])
        return np.linalg.norm(mid - (a + b) / 2) < 0.2

    shared = [ln for ln in lines if on_tbu1(ln)]
    assert sorted(ln.get_color() for ln in shared) == ["#1f77b4", "#ff7f0e"]
    fig.canvas.draw()  # final layout, so data-to-pixel transforms hold
    to_pixels = fig.axes[0].transData.transform
    first, second = (to_pixels(np.column_stack(ln.get_data())) for ln in shared)
    gap_px = np.linalg.norm(first[0] - second[0])
    width_px = max(ln.get_linewidth() for ln in shared) * fig.dpi / 72
    assert gap_px >= 0.9 * width_px, f"stripes overlap: {gap_px:.1f} px apart, {width_px:.1f} px wide"
    assert all(ln.get_alpha() in (None, 1.0) for ln in shared)
