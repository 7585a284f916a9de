"""Heater signal wires as gdsfactory electrical routes, with ports the netlist extraction follows.

Every heater's signal wire is drawn as gdsfactory route instances (straights and
``wire_corner`` bends of the active PDK's metal routing cross-section at the sized wire
width, each with electrical ports ``e1``/``e2``), in two pieces that meet port to port:

1. **Band route** (our backbone, gdsfactory's placer): from the heater's signal via along
   the planned band track (:mod:`layouts.wiring`) to a *front* outside the mesh, placed by
   ``gf.routing.route_single`` through the planner's waypoints. gdsfactory's routers
   cannot find these paths themselves: a wire threads between the TBUs on one metal
   layer, on the track that keeps it clear of every other wire's drop, and no router of
   gdsfactory 9 knows that ordering.
2. **Pad bundle** (gdsfactory's router): the wires of one pad array (the top row, bottom
   row or side column fed from one side of the mesh) leave their fronts together and
   ``gf.routing.route_bundle_electrical`` river-routes them to the pads' edge ports, with
   its own collision check. The fronts are where the planner's fan-out would turn: the
   channel corners for a pad row (so the bundle stays above or below the couplers), one
   line outside the row wires' columns for a side column.

All lengths are in µm.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from layouts.errors import LayoutError, require_gdsfactory, routing_errors
from layouts.params import LayoutParams
from layouts.pdk import layer, snap
from layouts.wiring import PadPlan, Wire

PAD_EDGE_PORT = {"top": "e4", "bottom": "e2", "left": "e3", "right": "e1"}  # pad port facing the wire
ROW_FRONT_POINT = 4  # planned points of a row wire: via, drop, exit, column foot, channel corner, ...
WIRE_STRAIGHT_PREFIX = "wire_straight"  # cell names of the route straights (the LVS treats them as metal)
WIRE_JUNCTION = "wire_junction"  # cell name of a T/cross junction of the ground grid (metal)
_JUNCTION_SIDES = {"W": (-1, 0, 180), "N": (0, 1, 90), "E": (1, 0, 0), "S": (0, -1, 270)}
#: wires per call of the bundle router for a pad row. kfactory's route_smart (gdsfactory
#: 9.45) detours and then reports a collision when a bundle of 36 wires fans out to a pad
#: row; bundles of 12 consecutive wires of one front are routed cleanly
MAX_BUNDLE_WIRES = 12
_ANGLE = {(1, 0): 0, (0, 1): 90, (-1, 0): 180, (0, -1): 270}

_straights: dict[tuple[Any, ...], Any] = {}


def wire_cross_section(p: LayoutParams, layer_map: dict[str, str] | None = None, role: str = "metal_routing",
                       width: float | None = None) -> Any:
    """The PDK's metal routing cross-section (``p.wire_cross_section``) for heater wiring.

    Taken at ``width`` (default: the drawn wire width) and on the layer of ``role``
    (:mod:`layouts.pdk`; ``metal_ground`` for the return grid).
    """
    gf = require_gdsfactory()
    try:
        xs = gf.get_cross_section(p.wire_cross_section)
    except (KeyError, ValueError) as exc:
        raise LayoutError(f"the active PDK has no cross-section {p.wire_cross_section!r} for the heater "
                          "wires; pass wire_cross_section='<its metal routing cross-section>'") from exc
    return xs.copy(width=width or p.wire_width, layer=layer(role, layer_map))


def metal_segment(c: Any, xs: Any, start: tuple[float, float], end: tuple[float, float]) -> Any:
    """One straight piece of metal from ``start`` to ``end`` (Manhattan, µm) as a ported instance.

    Its ports (``xs``'s port names, e.g. ``e1`` at ``start`` and ``e2`` at ``end``) let
    gdsfactory's netlist extraction follow the metal (:mod:`layouts.electrical_lvs`).
    """
    angle = _heading(start, end)
    ref = c.add_ref(_straight_factory(xs)(abs(end[0] - start[0]) + abs(end[1] - start[1])))
    ref.drotate(angle)
    ref.dmove(start)
    return ref


def metal_junction(c: Any, xs: Any, center: tuple[float, float], arms: dict[str, float]) -> Any:
    """A square of ``xs``'s width at ``center`` where metal pieces meet, one port per arm (µm).

    ``arms`` maps a side (``"W"``, ``"N"``, ``"E"``, ``"S"``) to the width of the piece
    arriving there; its port sits on that edge of the square. Every piece then meets
    exactly one port, so gdsfactory's netlist extraction sees pairs (three pieces ending on
    one point would be a multi-connection it refuses by default).
    """
    gf = require_gdsfactory()
    gds_layer = gf.get_layer(xs.layer)
    side = snap(xs.width)
    key = ("junction", gds_layer.layer, gds_layer.datatype, side, tuple(sorted(arms.items())))
    cell = _straights.get(key)
    if cell is None or cell.destroyed():
        tag = "".join(f"{k}{snap(v):g}" for k, v in sorted(arms.items()))
        cell = gf.Component(name=f"{WIRE_JUNCTION}_{gds_layer.layer}_{gds_layer.datatype}_W{side:g}_{tag}")
        cell.function_name = WIRE_JUNCTION
        cell.settings = gf.kf.KCellSettings(width=side, layer=str(gds_layer.name),
                                            arms=dict(sorted(arms.items())))
        h = side / 2
        cell.add_polygon([(-h, -h), (h, -h), (h, h), (-h, h)], layer=gds_layer)
        for name, (dx, dy, angle) in _JUNCTION_SIDES.items():
            if name in arms:
                cell.add_port(f"e_{name}", center=(dx * h, dy * h), width=snap(arms[name]), orientation=angle,
                              layer=gds_layer, port_type="electrical")
        cell.lock()
        _straights[key] = cell
    ref = c.add_ref(cell)
    ref.dmove(center)
    return ref


def _straight_factory(xs: Any) -> Callable[..., Any]:
    """A straight-wire cell factory for the routers: one rectangle with two electrical ports.

    gdsfactory's own ``straight`` looks its cross-section up by name in the PDK on every new
    length (~7 ms a cell); a chip has hundreds of distinct lengths, so the cells are made here
    (~0.5 ms) and kept per (layer, width, length). Port names and types come from ``xs``.
    """
    gf = require_gdsfactory()
    kf = gf.kf
    gds_layer = gf.get_layer(xs.layer)
    names = xs.sections[0].port_names
    kinds = xs.sections[0].port_types

    def straight(length: float, width: float | None = None, **_: Any) -> Any:
        w = snap(width or xs.width)
        key = (gds_layer.layer, gds_layer.datatype, names, w, snap(length))
        cell = _straights.get(key)
        if cell is None or cell.destroyed():
            cell = gf.Component(name=f"{WIRE_STRAIGHT_PREFIX}_{gds_layer.layer}_{gds_layer.datatype}"
                                     f"_W{w:g}_L{snap(length):.3f}")
            cell.function_name = WIRE_STRAIGHT_PREFIX
            cell.settings = kf.KCellSettings(length=snap(length), width=w, layer=str(gds_layer.name))
            cell.add_polygon([(0, -w / 2), (length, -w / 2), (length, w / 2), (0, w / 2)], layer=gds_layer)
            for name, kind, x, angle in zip(names, kinds, (0.0, length), (180, 0), strict=True):
                cell.add_port(name, center=(x, 0.0), width=w, orientation=angle, layer=gds_layer,
                              port_type=kind)
            cell.info["length"] = snap(length)
            cell.lock()
            _straights[key] = cell
        return cell

    return straight


def _clean(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Drop repeated and collinear interior points (the placer wants corners only)."""
    pts = [points[0]]
    for q in points[1:]:
        if abs(q[0] - pts[-1][0]) > 1e-9 or abs(q[1] - pts[-1][1]) > 1e-9:
            pts.append(q)
    out = [pts[0]]
    for a, b, c in zip(pts, pts[1:], pts[2:], strict=False):
        if not ((abs(a[0] - b[0]) < 1e-9 and abs(b[0] - c[0]) < 1e-9)
                or (abs(a[1] - b[1]) < 1e-9 and abs(b[1] - c[1]) < 1e-9)):
            out.append(b)
    out.append(pts[-1])
    return out


def _heading(a: tuple[float, float], b: tuple[float, float]) -> int:
    dx, dy = b[0] - a[0], b[1] - a[1]
    return _ANGLE[(int(dx > 0) - int(dx < 0), int(dy > 0) - int(dy < 0))]


def _port(name: str, xy: tuple[float, float], angle: int, xs: Any) -> Any:
    gf = require_gdsfactory()
    return gf.Port(name=name, center=xy, orientation=angle, width=xs.width, layer=gf.get_layer(xs.layer),
                   port_type="electrical")


def _front(w: Wire, plan: PadPlan) -> tuple[tuple[float, float], int]:
    """Where the band route of ``w`` hands over to the pad bundle, and the bundle's heading.

    A row wire comes back along its channel to the line its band track left the mesh on
    (``x`` of the exit), so the wires of one pad row enter the bundle router as one
    vertical front heading for the pads, as river routers expect (a staggered front makes
    kfactory's router detour round the fronts' bounding box).
    """
    x_exit = w.points[2][0]
    if w.pad_edge in ("top", "bottom"):
        return (x_exit, w.points[ROW_FRONT_POINT][1]), (0 if w.side == "L" else 180)
    return (plan.side_front[w.side], w.points[2][1]), (180 if w.side == "L" else 0)


def _backbone_um(route: Any, dbu: float) -> float:
    pts = [(q.x * dbu, q.y * dbu) for q in route.backbone]
    return sum(abs(b[0] - a[0]) + abs(b[1] - a[1]) for a, b in itertools.pairwise(pts))


def route_signal_wires(c: Any, wires: list[Wire], plan: PadPlan, p: LayoutParams,
                       layer_map: dict[str, str] | None = None) -> dict[int, float]:
    """Draw every heater's wire, via to its pad ``pad_ch<ch>`` (already placed in ``c``).

    Returns ``{channel: drawn centre-line length in squares}`` (route backbones / width).

    Raises:
        LayoutError: gdsfactory's placer could not follow a band path, or its router could
            not place a bundle without a collision.
    """
    gf = require_gdsfactory()
    xs = wire_cross_section(p, layer_map)
    straight = _straight_factory(xs)
    corner = gf.get_component("wire_corner", cross_section=xs)
    dbu = c.kcl.dbu
    pads = {inst.name: inst for inst in c.insts if inst.name.startswith("pad_ch")}
    length: dict[int, float] = {}
    groups: dict[tuple[str, str], list[tuple[Wire, Any, Any]]] = {}
    for w in wires:
        front, heading = _front(w, plan)
        rows = w.pad_edge in ("top", "bottom")
        band = _clean([*w.points[: ROW_FRONT_POINT + 1 if rows else 2], front])
        start = _port(f"via{w.channel}", band[0], _heading(band[0], band[1]), xs)
        end = _port(f"front{w.channel}", band[-1], (_heading(band[-2], band[-1]) + 180) % 360, xs)
        with routing_errors(f"the wire of heater channel {w.channel} along its band track",
                            "increase wire_pitch"):
            # on_error="error": kfactory's PlacerError (corners closer than a wire width)
            route = gf.routing.route_single(c, start, end, cross_section=xs, bend=corner, straight=straight,
                                            waypoints=band[1:-1], port_type="electrical", auto_taper=False,
                                            on_error="error")
        length[w.channel] = _backbone_um(route, dbu)
        pad_port = pads[f"pad_ch{w.channel}"].ports[PAD_EDGE_PORT[w.pad_edge]]
        groups.setdefault((w.side, w.pad_edge), []).append((w, _port(f"out{w.channel}", front, heading, xs),
                                                            pad_port))
    for (side, edge), group in sorted(groups.items()):
        group.sort(key=lambda m: m[1].y)  # along the (vertical) front, as the river router reads it
        # a side column is one bundle (its jogs share the room beside the front); a pad row
        # may be split, its wires are nested Ls that meet nothing of the next bundle
        size = MAX_BUNDLE_WIRES if edge in ("top", "bottom") else len(group)
        for first in range(0, len(group), size):
            members = group[first:first + size]
            with routing_errors(f"{len(members)} wires from the {'left' if side == 'L' else 'right'} side "
                                f"to the {edge} pads", "increase wire_pitch or margin"):
                # every failure raises: gdsfactory's defaults (gf.CONF) may be set to ignore them
                routes = gf.routing.route_bundle_electrical(
                    c, [m[1] for m in members], [m[2] for m in members], cross_section=xs, bend=corner,
                    straight=straight, separation=p.wire_pitch - p.wire_width, auto_taper=False,
                    on_collision="error", on_placer_error="error", raise_on_error=True)
            for (w, _, _), route in zip(members, routes, strict=True):
                length[w.channel] += _backbone_um(route, dbu)
    return {ch: um / p.wire_width for ch, um in length.items()}
