"""PNG pictures of a layout (klayout pixel buffer in matplotlib, headless).

The layout is rendered by klayout with the active PDK's layer colours onto exactly
the cell's bounding box, and shown on axes in µm, so a scale bar (µm or mm) and a
title can be drawn over it. A layer legend below the picture (never over the geometry)
names every layer the picture shows, by the active PDK's layer name and GDS number, in
the colour klayout drew it with, and says what the layout draws on it (the role of
:data:`layouts.pdk.LAYER_ROLES`) where it is one of ours.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layouts.pdk import LAYER_ROLES, ROLE_WORDS
from photonics.atomic import save_figure

RENDER_WIDTH_PX = 2400  # klayout pixels across the chip: ~5 µm per pixel on smartlight (12.5 mm)
SCALE_BAR_FRACTION = 0.2  # the scale bar is the largest 1-2-5 length below this share of the width
FIGURE_WIDTH_IN = 12.0  # matplotlib figure width (inches)
MIN_ASPECT = 0.3  # keep very flat chips from giving an unreadable strip of a figure
ZOOM_CONTEXT_UM = 80.0  # around the zoomed TBU: its links, via stacks and the first wire tracks
HOLLOW_DITHER = 1  # klayout's dither pattern index of an unfilled (outline only) layer
PIXEL_HEADER_BYTES = 8  # klayout's PixelBuffer.to_bytes: width and height (uint32 each) before the pixels
#: shapes of a filled layer looked at one by one for one inside the picture before the layer's
#: region is built: on the full chip the first one is inside; a zoom may need a few
FAST_SHAPES = 64
LEGEND_MAX_COLUMNS = 4  # legend columns below the picture: a 12 in figure holds four entries a row
LEGEND_EDGE_PT = 2.0  # the legend patch's border in the layer's frame colour (M3: teal frame, purple fill)


def scale_bar_um(width_um: float) -> float:
    """Length of the scale bar (µm): the largest 1, 2 or 5 x 10^n at most a fifth of ``width_um``."""
    target = max(width_um * SCALE_BAR_FRACTION, 1e-3)
    decade = 10.0 ** math.floor(math.log10(target))
    return max(step * decade for step in (1.0, 2.0, 5.0) if step * decade <= target * (1 + 1e-9))


def scale_label(length_um: float) -> str:
    """``"2 mm"`` from 1 mm up, else ``"500 µm"``."""
    return f"{length_um / 1000:g} mm" if length_um >= 1000 else f"{length_um:g} µm"


@dataclass(frozen=True)
class LegendEntry:
    """One layer of a layout picture: what the legend shows for it.

    ``layer`` is the GDS (layer, datatype); ``label`` the PDK's name(s) for it, the number
    and our role on it (``"HEATER 47/0: heaters"``); ``color`` and ``edge_color`` the fill
    and frame colours klayout drew it with (``"#rrggbb"``).
    """

    layer: tuple[int, int]
    label: str
    color: str
    edge_color: str


def _view(component: Any) -> Any:
    """A klayout LayoutView of ``component`` with the active PDK's layer properties (colours)."""
    from gdsfactory.pdk import get_layer_views
    from klayout import lay

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
    return view


def _pixels(view: Any, box: Any, width_px: int) -> Any:
    """RGB(A) image of ``view`` over ``box`` (a klayout DBox, µm), ``width_px`` wide, as floats in 0-1.

    The same array as ``plt.imread`` of klayout's PNG of the picture (:func:`_buffer_rgb`), without
    encoding and decoding a PNG (~0.3 s of CPU for a 2400 x 1600 picture).
    """
    import klayout.db as kdb

    height_px = max(1, round(width_px * box.height() / max(box.width(), 1e-3)))
    view.zoom_box(kdb.DBox(box.left, box.bottom, box.right, box.top))
    return _buffer_rgb(view.get_pixels_with_options(width_px, height_px))


def _buffer_rgb(buffer: Any) -> Any:
    """A klayout PixelBuffer as ``plt.imread`` reads its PNG: float32 RGB (RGBA if transparent) in 0-1.

    ``to_bytes`` is two native uint32 (width, height), then one native uint32 ``0xAARRGGBB`` a
    pixel, row by row from the top; read as bytes on a little-endian machine that is B, G, R, A.
    Anything else (another byte order, a layout of the bytes klayout changed) takes the PNG
    round trip, so the picture is the same either way.
    """
    import io
    import sys

    import matplotlib.pyplot as plt
    import numpy as np

    width, height = buffer.width(), buffer.height()
    raw = buffer.to_bytes()
    if (sys.byteorder != "little" or len(raw) != PIXEL_HEADER_BYTES + 4 * width * height
            or np.frombuffer(raw[:PIXEL_HEADER_BYTES], dtype=np.uint32).tolist() != [width, height]):
        return plt.imread(io.BytesIO(buffer.to_png_data()))
    bgra = np.frombuffer(raw, dtype=np.uint8, offset=PIXEL_HEADER_BYTES).reshape(height, width, 4)
    channels = [2, 1, 0, 3] if buffer.transparent else [2, 1, 0]  # klayout's PNG: RGBA only when transparent
    return np.divide(bgra[..., channels], 255, dtype=np.float32)  # as matplotlib reads an 8-bit PNG


def pdk_layer_names() -> dict[tuple[int, int], list[str]]:
    """(layer, datatype) -> the active PDK's names for it (``(49, 0)``: ``["M3", "MTOP"]``)."""
    from layouts.errors import require_gdsfactory

    gf = require_gdsfactory()
    names: dict[tuple[int, int], list[str]] = {}
    for name, value in getattr(gf.get_active_pdk().layers, "__members__", {}).items():
        names.setdefault((int(value[0]), int(value[1])), []).append(name)
    return names


def _label(key: tuple[int, int], names: dict[tuple[int, int], list[str]]) -> str:
    """``"M3/MTOP 49/0: heater signal wires, bond pads"``: PDK names, GDS number, our roles."""
    own = names.get(key, [])
    roles = [ROLE_WORDS[role] for role, name in LAYER_ROLES.items() if name in own]
    text = f"{'/'.join(own) or 'unnamed'} {key[0]}/{key[1]}"
    return f"{text}: {', '.join(roles)}" if roles else text


def _drawn_in(view: Any, node: Any, box: Any) -> bool:
    """True when the picture of ``box`` shows the layer of ``node``.

    A layer shows when one of its polygons, boxes or paths (texts are not drawn) has an
    edge inside ``box``, or covers part of it with a fill that is not hollow (klayout's
    dither pattern 1): the die outline around a zoomed TBU is drawn hollow, so it does not
    show there. A filled layer with one shape of some area strictly inside ``box`` covers
    part of it: that is looked for first (:func:`_fills_part_of`), since building and
    merging the layer's region costs ~0.1 s a layer on SmartLight.
    """
    import klayout.db as kdb

    cellview = view.cellview(max(node.source_cellview, 0))
    layout = cellview.layout()
    index = layout.find_layer(node.source_layer, node.source_datatype)
    if index is None or index < 0:
        return False
    window_box = box.to_itype(layout.dbu)
    filled = node.eff_dither_pattern(True) != HOLLOW_DITHER
    if filled and _fills_part_of(_drawn_shapes(cellview, index, box), window_box):
        return True
    window = kdb.Region(window_box)
    region = kdb.Region(_drawn_shapes(cellview, index, box))
    if not (region.edges() & window).is_empty():
        return True
    return filled and not (region & window).is_empty()


def _drawn_shapes(cellview: Any, index: int, box: Any) -> Any:
    """The polygons, boxes and paths of layer ``index`` overlapping ``box`` (µm), through the hierarchy."""
    import klayout.db as kdb

    shapes = cellview.cell.begin_shapes_rec_overlapping(index, box)
    shapes.shape_flags = kdb.Shapes.SPolygons | kdb.Shapes.SBoxes | kdb.Shapes.SPaths
    return shapes


def _fills_part_of(shapes: Any, window: Any) -> bool:
    """True when one of the first :data:`FAST_SHAPES` of ``shapes`` has area strictly inside
    ``window`` (a klayout Box, dbu): then the layer's region meets the window in that area.
    False says nothing (the caller builds the region).
    """
    inner = window.enlarged(-1, -1)  # strictly inside: not touching the window's edge
    for _ in range(FAST_SHAPES):
        if shapes.at_end():
            return False
        shape = shapes.shape()
        polygon = shape.polygon
        if polygon is not None:
            polygon = polygon.transformed(shapes.trans())
            if polygon.area() > 0 and inner.contains(polygon.bbox().p1) and inner.contains(polygon.bbox().p2):
                return True
        shapes.next()
    return False


def layer_legend(view: Any, box: Any) -> list[LegendEntry]:
    """The layers ``view`` shows inside ``box`` (visible, with shapes there), in klayout's layer order."""
    names = pdk_layer_names()
    out: dict[tuple[int, int], LegendEntry] = {}
    nodes = view.begin_layers()
    while not nodes.at_end():
        node = nodes.current()
        key = (node.source_layer, node.source_datatype)
        if node.visible and key[0] >= 0 and key not in out and _drawn_in(view, node, box):
            out[key] = LegendEntry(key, _label(key, names), _hex(node.eff_fill_color(True)),
                                   _hex(node.eff_frame_color(True)))
        nodes.next()
    return list(out.values())


def _hex(argb: int) -> str:
    """A klayout colour (``0xAARRGGBB``) as ``"#rrggbb"``."""
    return f"#{argb & 0xFFFFFF:06x}"


def _add_legend(fig: Any, entries: list[LegendEntry]) -> None:
    """The layer legend below the picture, in a band of its own (constrained layout)."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=e.color, edgecolor=e.edge_color, linewidth=LEGEND_EDGE_PT, label=e.label)
               for e in entries]
    legend = fig.legend(handles=handles, loc="outside lower center", title="layers",
                        ncols=min(LEGEND_MAX_COLUMNS, max(1, len(handles))), fontsize="small", frameon=False)
    legend.set_gid("layer_legend")


def _layout_pass(renderer: Any) -> bool:
    """True while matplotlib draws a figure with drawing switched off.

    Saving a figure with a layout engine (constrained layout) or ``bbox_inches="tight"``
    draws it twice: once with every ``draw_*`` of the renderer replaced by a no-op
    (``RendererBase._draw_disabled``: ``functools.update_wrapper`` of ``RendererBase``'s
    own method, which is how it is told apart) to place the artists and measure them,
    then for real.
    """
    from matplotlib.backend_bases import RendererBase

    return getattr(getattr(renderer, "draw_image", None), "__wrapped__", None) is RendererBase.draw_image


def _add_chip_image(ax: Any, image: Any, extent: tuple[float, float, float, float]) -> Any:
    """``ax.imshow(image, extent=extent, origin="upper", interpolation="antialiased")``, except
    that the image is resampled only when it is drawn for real.

    Resampling the klayout picture is most of a PNG's cost (~0.4 s of CPU of ~1 s per
    picture): in the layout pass (:func:`_layout_pass`) nothing is drawn and the image's
    place is its extent, so it is skipped there. The PNG is byte for byte the same.
    """
    import matplotlib
    from matplotlib.image import AxesImage

    class ChipImage(AxesImage):
        def draw(self, renderer: Any) -> None:
            if not _layout_pass(renderer):
                super().draw(renderer)

    im = ChipImage(ax, extent=extent, origin="upper", interpolation="antialiased", resample=None)  # as imshow
    ax.set_aspect(matplotlib.rcParams["image.aspect"])  # as imshow: the chip's µm square
    im.set_data(image)
    im.set_clip_path(ax.patch)
    im.set_extent(im.get_extent())  # the data limits and view: the image's extent
    ax.add_image(im)
    return im


def layout_figure(component: Any, title: str, width_px: int = RENDER_WIDTH_PX, box: Any = None) -> Any:
    """A matplotlib figure of ``component`` (or of ``box`` of it, µm) with a scale bar, ``title``
    and a legend of the layers it shows (below the picture).
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on the bench PC or in CI
    import matplotlib.pyplot as plt
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

    box = box or component.dbbox()
    view = _view(component)
    image = _pixels(view, box, width_px)
    extent = (box.left, box.right, box.bottom, box.top)
    width_um, height_um = extent[1] - extent[0], extent[3] - extent[2]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, FIGURE_WIDTH_IN * max(MIN_ASPECT, height_um / width_um)),
                           layout="constrained")
    _add_chip_image(ax, image, extent)
    ax.set_axis_off()
    length = scale_bar_um(width_um)
    bar = AnchoredSizeBar(ax.transData, length, scale_label(length), "lower right", pad=0.6,
                          color="black", frameon=True, size_vertical=height_um / 150)
    bar.set_gid("scale_bar")
    ax.add_artist(bar)
    ax.set_title(title)
    _add_legend(fig, layer_legend(view, box))
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
