"""PNG pictures of a layout (klayout pixel buffer in matplotlib, headless).

The layout is rendered by klayout with the active PDK's layer colours onto exactly
the cell's bounding box, and shown on axes in µm, so a scale bar (µm or mm) and a
title can be drawn over it.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

from photonics.atomic import save_figure

RENDER_WIDTH_PX = 2400  # klayout pixels across the chip: ~5 µm per pixel on smartlight (12.5 mm)
SCALE_BAR_FRACTION = 0.2  # the scale bar is the largest 1-2-5 length below this share of the width
FIGURE_WIDTH_IN = 12.0  # matplotlib figure width (inches)
MIN_ASPECT = 0.3  # keep very flat chips from giving an unreadable strip of a figure
ZOOM_CONTEXT_UM = 80.0  # around the zoomed TBU: its links, via stacks and the first wire tracks


def scale_bar_um(width_um: float) -> float:
    """Length of the scale bar (µm): the largest 1, 2 or 5 x 10^n at most a fifth of ``width_um``."""
    target = max(width_um * SCALE_BAR_FRACTION, 1e-3)
    decade = 10.0 ** math.floor(math.log10(target))
    return max(step * decade for step in (1.0, 2.0, 5.0) if step * decade <= target * (1 + 1e-9))


def scale_label(length_um: float) -> str:
    """``"2 mm"`` from 1 mm up, else ``"500 µm"``."""
    return f"{length_um / 1000:g} mm" if length_um >= 1000 else f"{length_um:g} µm"


def _pixels(component: Any, width_px: int, box: Any = None) -> tuple[Any, tuple[float, float, float, float]]:
    """RGBA image of ``component`` over ``box`` (default: its bounding box; a klayout DBox, µm)
    and that box as (left, right, bottom, top), µm.
    """
    import io

    import klayout.db as kdb
    import matplotlib.pyplot as plt
    from gdsfactory.pdk import get_layer_views
    from klayout import lay

    box = box or component.dbbox()
    height_px = max(1, round(width_px * box.height() / max(box.width(), 1e-3)))
    view = lay.LayoutView()
    index = view.create_layout(True)
    view.active_cellview_index = index
    cellview = view.cellview(index)
    cellview.layout().assign(component.kcl.layout)
    cellview.cell = cellview.layout().cell(component.name)
    view.max_hier()
    with tempfile.TemporaryDirectory() as tmp:
        lyp = Path(tmp) / "layers.lyp"
        get_layer_views().to_lyp(filepath=lyp)  # the active PDK's colours
        view.load_layer_props(str(lyp))
    view.add_missing_layers()
    view.set_config("text-visible", "false")
    view.set_config("grid-visible", "false")
    view.zoom_box(kdb.DBox(box.left, box.bottom, box.right, box.top))
    png = view.get_pixels_with_options(width_px, height_px).to_png_data()
    return plt.imread(io.BytesIO(png)), (box.left, box.right, box.bottom, box.top)


def layout_figure(component: Any, title: str, width_px: int = RENDER_WIDTH_PX, box: Any = None) -> Any:
    """A matplotlib figure of ``component`` (or of ``box`` of it, µm) with a scale bar and ``title``."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the bench PC or in CI
    import matplotlib.pyplot as plt
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

    image, extent = _pixels(component, width_px, box)
    width_um, height_um = extent[1] - extent[0], extent[3] - extent[2]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, FIGURE_WIDTH_IN * max(MIN_ASPECT, height_um / width_um)))
    ax.imshow(image, extent=extent, origin="upper", interpolation="antialiased")
    ax.set_axis_off()
    length = scale_bar_um(width_um)
    bar = AnchoredSizeBar(ax.transData, length, scale_label(length), "lower right", pad=0.6,
                          color="black", frameon=True, size_vertical=height_um / 150)
    bar.set_gid("scale_bar")
    ax.add_artist(bar)
    ax.set_title(title)
    return fig


def save_png(component: Any, path: str | os.PathLike[str], title: str | None = None, dpi: int = 200,
             box: Any = None) -> None:
    """Write a PNG of ``component`` (or of ``box`` of it, a klayout DBox in µm) with a scale
    bar and a title (default: the cell name).
    """
    import matplotlib.pyplot as plt

    fig = layout_figure(component, title or component.name, box=box)
    save_figure(fig, path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def tbu_box(component: Any, instance: str = "tbu_0_0_0", context_um: float = ZOOM_CONTEXT_UM) -> Any:
    """The box (µm) around one TBU instance and ``context_um`` of its surroundings (wires, links)."""
    for inst in component.insts:
        if inst.name == instance:
            return inst.dbbox().enlarged(context_um, context_um)
    raise KeyError(instance)
