"""Optical I/O on one edge: every mesh port routed to one column of couplers at the fibre-array pitch.

With ``fiber_io="grating-edge"`` all mesh ports reach a single column of grating couplers
on the chip's west edge, ``gc_pitch`` (127 µm, a standard fibre array) apart, so one
fibre array reaches every port; with ``"edge-coupler"`` the column is of inverse-taper
edge couplers whose tips form the west facet (the die edge there has no margin), for a
V-groove array at the same pitch. (The default ``"ring"`` puts couplers on all four sides.)

Planar by construction. Cut the mesh boundary at the middle of its east side and walk it
counter-clockwise: east ports above the cut (bottom to top), north ports (east to west),
west ports (top to bottom), south ports (west to east), east ports below the cut (bottom
to top). The couplers take the ports in that order, top to bottom. Paths that go over
the top (east-upper and north ports) climb to a lane of their own, the first in the
order on the outermost lane, and run west; paths that go under the bottom do the
mirror; west ports run straight west. So every path reaches the vertical line
``x_strip`` (west of the mesh) in the couplers' order, with no two crossing, and
gdsfactory's bundle router (``route_bundle``) takes the bundle from there to the
couplers (a river route: same order at both ends).

The column's height is fixed (``gc_pitch`` per port), its vertical position is not:
it is centred on the strip, then shifted by the least amount that leaves every
waveguide either straight or with a jog of at least two bend footprints
(:func:`coupler_column`). A smaller jog cannot be made with two 90° bends, and the
river router then loops the waveguide round into its neighbours: the routing
collisions hex:2x2 (a 16.3 µm jog) and hex:4x3 had with a centred column. The fan-out
needs far less horizontal room than the column leaves (gdsfactory's ``get_min_spacing``:
71-251 µm against 447-1,487 µm from hex:1x1 to hex:6x9). Any routing failure is a
one-line :class:`~layouts.errors.LayoutError`, never a warning and error-layer polygons;
:func:`layouts.edge_check.check_edge_io` checks a drawn edge. Lengths in µm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layouts.errors import LayoutError, require_gdsfactory, routing_errors
from layouts.geometry import Placement
from layouts.params import LANE_PITCH_UM, LayoutParams
from layouts.pdk import GRID_UM, grid_steps, layer, snap


@dataclass(frozen=True)
class EdgePlan:
    """Which port takes which lane (the order of the coupler column, and the top and bottom lanes)."""

    order: tuple[int, ...]  # exit indices, in coupler order top to bottom
    top: tuple[int, ...]  # exits going over the top, outermost first
    bottom: tuple[int, ...]  # exits going under the bottom, innermost first
    east_upper: frozenset[int]
    east_lower: frozenset[int]


def plan_edge(placement: Placement, exit_xy: dict[int, tuple[float, float]]) -> EdgePlan:
    """Order the exits along the boundary (see module doc); ``exit_xy`` = exit port positions."""
    by = {d: [k for k, e in enumerate(placement.exits) if e.direction == d] for d in "NSWE"}
    y_mid = sum(y for _, y in exit_xy.values()) / max(len(exit_xy), 1)
    east = sorted(by["E"], key=lambda k: exit_xy[k][1])  # bottom to top
    east_upper = [k for k in east if exit_xy[k][1] >= y_mid]
    east_lower = [k for k in east if exit_xy[k][1] < y_mid]
    north = sorted(by["N"], key=lambda k: -exit_xy[k][0])  # east to west
    west = sorted(by["W"], key=lambda k: -exit_xy[k][1])  # top to bottom
    south = sorted(by["S"], key=lambda k: exit_xy[k][0])  # west to east
    order = (*east_upper, *north, *west, *south, *east_lower)
    return EdgePlan(order, (*east_upper, *north), (*south, *east_lower), frozenset(east_upper),
                    frozenset(east_lower))


def _perimeter_points(k: int, start: Any, plan: EdgePlan, frame: tuple[float, ...],
                      x_strip: float) -> list[tuple[float, float]]:
    """Manhattan points from an exit port to ``x_strip`` (heading west), per the lane plan.

    ``frame = (y_top, y_bottom, x_east, _)``: the first top lane, the first bottom lane, and
    the first east lane (µm).
    """
    y_top, y_bottom, x_east = frame[:3]
    x0, y0 = start.x, start.y
    if k in plan.top:
        j = len(plan.top) - 1 - plan.top.index(k)  # outermost (first) gets the highest lane
        y_lane = y_top + j * LANE_PITCH_UM
        if k in plan.east_upper:
            x_lane = x_east + (len(plan.east_upper) - 1 - plan.top.index(k)) * LANE_PITCH_UM
            return [(x0, y0), (x_lane, y0), (x_lane, y_lane), (x_strip, y_lane)]
        return [(x0, y0), (x0, y_lane), (x_strip, y_lane)]
    if k in plan.bottom:
        j = plan.bottom.index(k)  # innermost (first) gets the shallowest lane
        y_lane = y_bottom - j * LANE_PITCH_UM
        if k in plan.east_lower:
            x_lane = x_east + (plan.bottom.index(k) - (len(plan.bottom) - len(plan.east_lower))) \
                * LANE_PITCH_UM
            return [(x0, y0), (x_lane, y0), (x_lane, y_lane), (x_strip, y_lane)]
        return [(x0, y0), (x0, y_lane), (x_strip, y_lane)]
    return [(x0, y0), (x_strip, y0)]  # a west port runs straight to the strip


def route_to_edge(c: Any, placement: Placement, starts: dict[int, Any], p: LayoutParams,
                  coupler_cell: tuple[Any, str], plan: EdgePlan,
                  frame: tuple[float, float, float, float, float]) -> None:
    """Route every exit to one coupler column on the west edge (see module doc).

    ``starts``: exit index -> the port each exit leaves from (after its escape bend);
    ``frame = (y_top, y_bottom, x_east, x_strip, x_column)``: first top lane, first bottom
    lane, first east lane, the strip line west of the mesh, and the couplers' waveguide
    ends (west of every metal shape), µm. ``coupler_cell = (cell, prefix)``: the coupler
    (waveguide port ``o1`` facing west in the cell, fibre or facet port ``o2``) and its
    instance name prefix (``gc`` or ``ec``: instances ``<prefix>_port_<n>``).
    Sets ``c.info["fiber_column_shift_um"]``: how far :func:`coupler_column` moved the
    column from the centre of the bundle (µm, up is positive).

    Raises:
        LayoutError: gdsfactory could not route the bundle (see :func:`layouts.errors.routing_errors`).
    """
    gf = require_gdsfactory()
    gc, prefix = coupler_cell
    x_strip, x_gc = frame[3], frame[4]
    strip_ports = []
    for k in plan.order:
        points = _perimeter_points(k, starts[k], plan, frame, x_strip)
        pts = [(snap(x), snap(y)) for x, y in points]
        path = gf.path.smooth(pts, radius=p.bend_radius) if len(pts) > 2 else gf.Path(pts)
        route = gf.path.extrude(path, cross_section=p.cross_section)
        ref = c.add_ref(route, name=f"io_{placement.exits[k].name.split(':')[1]}")
        _attach(ref, starts[k])
        strip_ports.append(ref.ports["o2"])
    # the bundle's bends are the links' Euler bends; a jog needs two of their footprints
    bend = gf.get_component("bend_euler", radius=p.bend_radius, cross_section=p.cross_section)
    footprint = abs(bend.ports["o2"].y - bend.ports["o1"].y)
    ys = coupler_column([q.y for q in strip_ports], p.gc_pitch, 2 * footprint)
    centred = (strip_ports[0].y + strip_ports[-1].y) / 2 + (len(ys) - 1) / 2 * p.gc_pitch
    c.info["fiber_column_shift_um"] = snap(ys[0] - centred)  # how far the column left the centre
    couplers = []  # top to bottom, in plan order
    for k, y in zip(plan.order, ys, strict=True):
        coupler = c.add_ref(gc, name=f"{prefix}_port_{placement.exits[k].name.split(':')[1]}")
        coupler.drotate(180)  # waveguide port o1 faces east, towards the mesh
        coupler.dmove((x_gc - coupler.ports["o1"].x, y - coupler.ports["o1"].y))
        couplers.append(coupler)
        fibre, name = coupler.ports["o2"], placement.exits[k].name
        c.add_port(name, port=fibre)
        c.add_label(name, position=(fibre.x, fibre.y), layer=layer("text"))
    with routing_errors(f"the {len(strip_ports)} fibre I/O waveguides to the {prefix} column",
                        "use fiber_io='ring' (couplers on four sides) for this mesh"):
        gf.routing.route_bundle(c, strip_ports, [q.ports["o1"] for q in couplers],
                                cross_section=p.cross_section, bend=bend, separation=LANE_PITCH_UM,
                                on_collision="error", on_placer_error="error", raise_on_error=True)


def coupler_column(strip_ys: Sequence[float], pitch: float, min_jog: float) -> list[float]:
    """The couplers' y, ``pitch`` apart, for waveguides arriving at ``strip_ys`` (top to bottom).

    The column is centred on the strip, then shifted by the least amount (µm, ties to
    the shift upwards) after which every waveguide either runs straight (its coupler at
    its own y) or jogs by at least ``min_jog`` (µm): a jog with two 90° bends cannot be
    shorter than two bend footprints. Worked in whole grid steps, so the test is exact.
    """
    n = len(strip_ys)
    if n == 0:
        return []
    centre = (strip_ys[0] + strip_ys[-1]) / 2
    base = [grid_steps(snap(centre + ((n - 1) / 2 - i) * pitch)) for i in range(n)]
    ys = [grid_steps(y) for y in strip_ys]
    jog = grid_steps(min_jog)
    # a shift s makes waveguide i straight at s = d_i and is allowed from |s - d_i| >= jog;
    # the least allowed shift is therefore 0 or one of these points
    offsets = [y - b for y, b in zip(ys, base, strict=True)]
    candidates = sorted({0, *offsets, *(d + jog for d in offsets), *(d - jog for d in offsets)},
                        key=lambda s: (abs(s), -s))
    for s in candidates:
        if all(s == d or abs(s - d) >= jog for d in offsets):
            return [snap((b + s) * GRID_UM) for b in base]
    raise AssertionError("unreachable: a shift beyond every offset by min_jog is always allowed")


def _attach(ref: Any, start: Any) -> None:
    """Check the extruded path (drawn in chip coordinates) starts exactly on ``start``."""
    if abs(ref.ports["o1"].x - start.x) > 1e-3 or abs(ref.ports["o1"].y - start.y) > 1e-3:
        raise LayoutError("an edge I/O path does not start at its mesh port; the plan is inconsistent")
