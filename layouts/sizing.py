"""Plan the heater wiring and size it: signal wires to a resistance budget, the ground to a drop budget.

:func:`size_wiring` runs the planar router (:mod:`layouts.wiring`) for the placed mesh,
measures every signal line and the shared ground (:mod:`layouts.electrical`), and widens
the signal wires (keeping their spacing) and the ground rails and spines until each line
is within ``max_line_resistance_ohm`` and the ground drop within ``max_ground_drop_v``
(:class:`layouts.params.LayoutParams`). Widths grow in whole 0.5 µm steps, so a sized
layout is reproducible and its cells are few. All lengths are in µm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from layouts.electrical import (
    Electrical,
    GroundGrid,
    ground_drops_v,
    line_resistances,
    sheet_resistance_ohm_sq,
    worst_case_heater_current_ma,
)
from layouts.errors import LayoutError
from layouts.geometry import Placement
from layouts.params import LANE_PITCH_UM, LayoutParams
from layouts.wiring import BandPlan, Frame, PadFrame, PadPlan, Terminal, fan_out, route_bands

WIDTH_STEP_UM = 0.5  # widths are rounded up to this step: few distinct geometries, reproducible
MAX_SIZING_ROUNDS = 8  # widening moves the pads outward a little; a few rounds settle it
GROUND_RAIL_CLEARANCE_UM = 5.0  # M2 rail edge to a signal via's M2 landing (a design-rule-like gap)
DEFAULT_SHEETS = {"metal_routing": ("Aluminum", 2.0), "metal_ground": ("Aluminum", 0.7)}  # generic PDK M3/M2


def metal_sheets(layer_map: dict[str, str] | None = None) -> dict[str, float]:
    """Sheet resistance (Ohm/sq) of the routing and ground metal from the active PDK's layer stack.

    Each role's layer is looked up in the PDK's ``layer_stack`` (thickness, material); a PDK
    without a stack entry for it falls back to :data:`DEFAULT_SHEETS` (the generic PDK's
    2.0 µm M3 and 0.7 µm M2 aluminium).
    """
    from layouts.errors import require_gdsfactory
    from layouts.pdk import layer

    gf = require_gdsfactory()
    stack = getattr(gf.get_active_pdk(), "layer_stack", None)
    out = {}
    for role, default in DEFAULT_SHEETS.items():
        role_layer = layer(role, layer_map)
        wanted = str(getattr(role_layer, "name", role_layer))
        found = [(lv.material, float(lv.thickness)) for lv in (stack.layers.values() if stack else ())
                 if str(getattr(lv, "layer", "")) == wanted and getattr(lv, "material", None)]
        out[role] = sheet_resistance_ohm_sq(*(found[0] if found else default))
    return out


@dataclass
class Wiring:
    """The sized wiring plan: parameters actually drawn, wire routes, pads, rails (µm)."""

    params: LayoutParams
    bands: BandPlan
    pads: PadPlan
    rails: list[float]
    y_rail_top: float
    y_rail_bot: float
    y_gc_top: float
    y_gc_bot: float
    x_gc_left: float
    x_gc_right: float
    electrical: Electrical


def _step_up(value: float) -> float:
    return math.ceil(value / WIDTH_STEP_UM - 1e-9) * WIDTH_STEP_UM


def _plan(p: LayoutParams, placement: Placement, terminals: list[Terminal], core: Any,
          gc_len: float, lanes: tuple[int, int] | None = None) -> Wiring:
    """Route every heater to a pad with ``p``'s widths (no electrical figures yet).

    ``lanes``: with the fibre-array edge (:mod:`layouts.fiber_edge`), the number of
    waveguide lanes over the top and under the bottom; they take the place of the
    north and south coupler rows, and the west side gets no pad column.
    """
    x_mid = (core.left + core.right) / 2
    outer_start = p.arm_spacing / 2 + p.via_offset + p.via_size / 2 + p.wire_pitch + p.wire_width
    frame = Frame(placement.pitch_y, placement.n_lines, p.heater_length / 2 - p.via_size - p.wire_pitch,
                  outer_start, x_mid)
    # the S-bend that spreads a vertex's two ports to the fiber pitch needs ~gc_pitch of run
    x_gc_left = core.left - p.gc_clearance - p.gc_pitch
    x_gc_right = core.right + p.gc_clearance + p.gc_pitch
    x_left = x_gc_left - gc_len - 2 * p.margin - p.pad_size
    x_right = x_gc_right + gc_len + 2 * p.margin + p.pad_size
    bands = route_bands(terminals, frame, p.wire_pitch, x_left, x_right)
    y_last = placement.line_y(placement.n_lines - 1)
    widen = (p.ground_width - p.wire_width) / 2  # a wider outer rail grows away from the mesh
    y_rail_top = outer_start + bands.top_tracks * p.wire_pitch + widen
    y_rail_bot = y_last - outer_start - bands.bottom_tracks * p.wire_pitch - widen
    y_gc_top = y_rail_top + widen + p.gc_clearance + p.gc_pitch
    y_gc_bot = y_rail_bot - widen - p.gc_clearance - p.gc_pitch
    frame_top, frame_bottom = y_gc_top + gc_len + p.margin, y_gc_bot - gc_len - p.margin
    if lanes is not None:  # lanes start gc_clearance beyond the rails; the pads go beyond them
        y_gc_top, y_gc_bot = y_rail_top + widen + p.gc_clearance, y_rail_bot - widen - p.gc_clearance
        frame_top = y_gc_top + lanes[0] * LANE_PITCH_UM + p.margin
        frame_bottom = y_gc_bot - lanes[1] * LANE_PITCH_UM - p.margin
    pads = fan_out(bands.wires, PadFrame(frame_top, frame_bottom, x_left, x_right, x_mid),
                   p.wire_pitch, p.pad_pitch, p.pad_size, p.margin,
                   no_column="L" if lanes is not None else "")
    rails = [-(b + 0.5) * placement.pitch_y for b in range(placement.n_lines - 1)]
    empty = Electrical({}, {}, 0.0, 0.0, 0.0)
    return Wiring(p, bands, pads, rails, y_rail_top, y_rail_bot, y_gc_top, y_gc_bot, x_gc_left, x_gc_right,
                  empty)


def _measure(w: Wiring, grounds: list[tuple[float, float, int]], sheets: dict[str, float],
             n_lines: int) -> Electrical:
    p = w.params
    lines = line_resistances([(x.channel, x.points) for x in w.bands.wires], p.wire_width,
                             sheets["metal_routing"])
    last = n_lines - 1
    rail_of = {-1: 0, last: len(w.rails) + 1}
    vias = tuple((x, y, rail_of.get(band, band + 1)) for x, y, band in grounds)
    (xl, yt), (_, yb), (xr, _), _ = w.pads.ground_pads
    grid = GroundGrid(vias, (w.y_rail_top, *w.rails, w.y_rail_bot), (xl, xr), (yt, yb))
    current = worst_case_heater_current_ma(len(lines))
    drops = ground_drops_v(grid, p.ground_width, sheets["metal_ground"], current)
    # grounds are listed per TBU, top arm then bottom: entry k is heater channel k
    return Electrical(lines, {k: float(v) for k, v in enumerate(drops)}, current,
                      sheets["metal_routing"], sheets["metal_ground"])


def max_ground_width(p: LayoutParams) -> float:
    """Widest M2 rail an inner band holds (µm).

    An inner rail must stay clear of the vertical TBUs' signal via landings (at the heater
    ends, ``heater_length / 2`` from the band centre); a spine, centred on its ground pad
    ``margin + pad_size / 2`` inside the wires' exit line, must stay clear of the couplers
    another ``margin + pad_size / 2`` further in.
    """
    inner = 2 * (p.heater_length / 2 - p.via_size / 2 - GROUND_RAIL_CLEARANCE_UM)
    spine = 2 * (p.margin + p.pad_size / 2 - GROUND_RAIL_CLEARANCE_UM)
    return min(inner, spine)


def size_wiring(p: LayoutParams, placement: Placement, terminals: list[Terminal],
                grounds: list[tuple[float, float, int]], core: Any, gc_len: float,
                sheets: dict[str, float], lanes: tuple[int, int] | None = None) -> Wiring:
    """Route and size the wiring (see module doc); ``lanes`` as for :func:`_plan`.

    Raises:
        LayoutError: the budgets cannot be met within the room the mesh leaves.
    """
    space = p.wire_pitch - p.wire_width
    for _ in range(MAX_SIZING_ROUNDS):
        w = _plan(p, placement, terminals, core, gc_len, lanes)
        w.electrical = _measure(w, grounds, sheets, placement.n_lines)
        e = w.electrical
        ok_lines = e.max_line_ohm <= p.max_line_resistance_ohm
        ok_ground = e.max_ground_drop_v <= p.max_ground_drop_v
        if ok_lines and ok_ground:
            return w
        width = p.wire_width if ok_lines else _step_up(
            p.wire_width * e.max_line_ohm / p.max_line_resistance_ohm)
        ground = p.ground_width if ok_ground else _step_up(
            p.ground_width * e.max_ground_drop_v / p.max_ground_drop_v)
        if ground > max_ground_width(p):
            raise LayoutError(
                f"the shared ground drops {e.max_ground_drop_v:.2f} V (budget {p.max_ground_drop_v} V) and "
                f"cannot widen past {max_ground_width(p):.0f} µm; raise max_ground_drop_v, use a thicker "
                "ground metal, or a smaller mesh")
        p = replace(p, wire_width=width, wire_pitch=width + space, ground_width=max(ground, width))
    raise LayoutError(f"wire sizing did not settle in {MAX_SIZING_ROUNDS} rounds "
                      f"(lines {e.max_line_ohm:.1f} Ohm, ground {e.max_ground_drop_v:.2f} V); "
                      "relax max_line_resistance_ohm or max_ground_drop_v")
