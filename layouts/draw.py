"""Drawing helpers of the mesh cell: couplers, ground grid, pads, die (µm; wires: :mod:`layouts.routing`)."""

from __future__ import annotations

import itertools
from typing import Any

from layouts.errors import LayoutError, require_gdsfactory
from layouts.geometry import Placement
from layouts.names import PadInfo
from layouts.params import LayoutParams
from layouts.pdk import GRID_UM, grid_steps, layer, snap
from layouts.wiring import PadPlan, Wire
from photonics.topology import Mesh

_ANGLE = {"N": 90, "S": 270, "W": 180, "E": 0}
MIN_SBEND_LENGTH = 40.0  # shortest S-bend before a coupler, µm (keeps the bend gentle)
VIA_GROUND_PAD = "via_stack_m2_m3"  # ground pad landing: the M2 grid up to the pad metal


def exit_ports(c: Any, placement: Placement, refs: list[Any], p: LayoutParams) -> dict[int, Any]:
    """The port each mesh port leaves from, heading its exit direction (N/S/W/E).

    A TBU port that faces another way turns there with one Euler bend (instance
    ``esc_<k>``, added to ``c``). Returns exit index -> gdsfactory port.
    """
    gf = require_gdsfactory()
    starts = {}
    for k, e in enumerate(placement.exits):
        port = refs[e.tbu].ports[e.label]
        if round(port.orientation) % 360 != _ANGLE[e.direction]:
            escape = gf.get_component("bend_euler", radius=p.bend_radius, cross_section=p.cross_section)
            bend = c.add_ref(escape, name=f"esc_{k}")
            for mirror in (False, True):
                bend.connect("o1", port, mirror=mirror)
                if round(bend.ports["o2"].orientation) % 360 == _ANGLE[e.direction]:
                    break
            else:
                raise LayoutError(f"{e.name} cannot turn {e.direction}")
            port = bend.ports["o2"]
        starts[k] = port
    return starts


def mesh_ports(c: Any, placement: Placement, starts: dict[int, Any], p: LayoutParams, gc: Any,
               at: dict[str, float]) -> None:
    """A grating coupler per mesh port, on a row (N/S) or column (W/E) outside the mesh.

    From its exit port (:func:`exit_ports`) each port runs straight, and an S-bend near
    the coupler spreads the two ports of one vertex to the fiber-array pitch.
    ``at`` gives the coupler row y (N, S) and column x (W, E), µm.
    """
    for direction in "NSWE":
        ks = [k for k, e in enumerate(placement.exits) if e.direction == direction]
        along = (lambda q: q.x) if direction in "NS" else (lambda q: q.y)
        ks.sort(key=lambda k: along(starts[k]))
        targets = _spread(ks, placement, starts, along, p.gc_pitch)
        for k, t in zip(ks, targets, strict=True):
            _route_to_coupler(c, k, (starts[k], t, at[direction], direction), gc, placement, p)


def _spread(ks: list[int], placement: Placement, starts: dict[int, Any], along: Any,
            pitch: float) -> list[float]:
    """Coupler positions along the row: the two ports of a vertex go ±pitch/2 about it.

    Each port of a pair moves out by the same grid-snapped amount, so the two S-bends of
    a vertex are one cell (the pair's pitch is then within 1 nm of ``pitch``).
    """
    out = []
    for i, k in enumerate(ks):
        vertex = placement.exits[k].vertex
        pair = [j for j in ks if placement.exits[j].vertex == vertex]
        if len(pair) == 2:
            low, high = along(starts[pair[0]]), along(starts[pair[1]])
            # halve in whole grid steps: a float half of an odd nm count rounds either way
            spread = (grid_steps(pitch) - grid_steps(high - low)) // 2 * GRID_UM
            out.append(high + spread if k == pair[1] else low - spread)
        else:
            out.append(along(starts[k]))
        if i and out[-1] - out[-2] < pitch / 2:
            raise LayoutError("mesh-port couplers would overlap; increase basic_unit_length")
    return out


def _route_to_coupler(c: Any, k: int, route: tuple[Any, float, float, str], gc: Any, placement: Placement,
                      p: LayoutParams) -> None:
    """Straight run, S-bend and coupler from ``route = (start port, lateral, level, direction)``.

    ``lateral`` is the coupler's position along its row or column and ``level`` the row
    y or column x (µm). The S-bend span and offset are snapped to the 1 nm grid, so all
    S-bends of one geometry are one cell.
    """
    gf = require_gdsfactory()
    start, lateral, level, direction = route
    exit_ = placement.exits[k]
    n = exit_.name.split(":")[1]
    dist = abs((level - start.y) if direction in "NS" else (level - start.x))
    offset = snap(abs(lateral - (start.x if direction in "NS" else start.y)))
    s_len = snap(max(MIN_SBEND_LENGTH, 2 * offset)) if offset > 0 else 0.0
    run = snap(dist - s_len)
    if run < 0:
        raise LayoutError(f"no room to route {exit_.name} to its coupler")
    port = start
    if run > 0:
        straight = gf.get_component("straight", length=run, cross_section=p.cross_section)
        port = c.add_ref(straight, name=f"pr_{n}_run").connect("o1", port).ports["o2"]
    if s_len:
        bend_s = gf.get_component("bend_s", size=(s_len, offset), cross_section=p.cross_section)
        sb = c.add_ref(bend_s, name=f"pr_{n}_s")
        for mirror in (False, True):
            sb.connect("o1", port, mirror=mirror)
            got = sb.ports["o2"].x if direction in "NS" else sb.ports["o2"].y
            if abs(got - lateral) < 1e-2:
                break
        port = sb.ports["o2"]
    coupler = c.add_ref(gc, name=f"gc_port_{n}").connect("o1", port)
    c.add_port(exit_.name, port=coupler.ports["o2"])
    c.add_label(exit_.name, position=(coupler.ports["o2"].x, coupler.ports["o2"].y),
                layer=layer("text"))


def ground(c: Any, grounds: list[tuple[float, float, int]], levels: tuple[list[float], float, float],
           pads: PadPlan, p: LayoutParams, layer_map: dict[str, str] | None = None) -> None:
    """The common heater return on M2: a stub per heater, a rail per band, two spines.

    ``levels = (rails, y_top, y_bottom)``: y of the rail in each inner band and of the
    outer rails above the first and below the last line (µm).

    Every piece of metal is ported for gdsfactory's netlist extraction: a straight of the
    PDK's metal cross-section on the ground layer (:func:`layouts.routing.metal_segment`)
    from a ground via, a junction or a ground pad to the next, and a square junction
    (:func:`layouts.routing.metal_junction`) wherever a stub lands on a rail or a rail on
    a spine. M2 never carries a signal (signal wires are M3 only), so the ground grid may
    cross every signal wire; it stays clear of the M2 landings of the signal via stacks,
    which sit at the heater ends, away from the band centres where the rails run.

    Raises:
        LayoutError: two stubs land on a rail closer than the ground width.
    """
    from layouts.routing import metal_junction, metal_segment, wire_cross_section

    gf = require_gdsfactory()
    rails, y_top, y_bottom = levels
    stub_xs = wire_cross_section(p, layer_map, "metal_ground")
    grid_xs = wire_cross_section(p, layer_map, "metal_ground", p.ground_width)
    half = p.ground_width / 2
    last = len(rails)
    (xl, yt), (_, yb), (xr, _), _ = pads.ground_pads
    levels_y = [y_top, *rails, y_bottom]
    feet: dict[float, dict[float, dict[str, float]]] = {y: {} for y in levels_y}
    for x, y, band in grounds:
        rail = y_top if band == -1 else y_bottom if band == last else rails[band]
        side = "N" if y > rail else "S"
        metal_segment(c, stub_xs, (x, y), (x, rail + (half if side == "N" else -half)))
        feet[rail].setdefault(x, {"W": p.ground_width, "E": p.ground_width})[side] = p.wire_width
    for y in levels_y:
        xs_on_rail = sorted(feet[y])
        if any(b - a < p.ground_width for a, b in itertools.pairwise([xl, *xs_on_rail, xr])):
            raise LayoutError("two heater ground stubs land closer than the ground width; lower "
                              "max_ground_drop_v's demand (a narrower ground) or lengthen the TBUs")
        for x in xs_on_rail:
            metal_junction(c, grid_xs, (x, y), feet[y][x])
        for a, b in itertools.pairwise([xl, *xs_on_rail, xr]):
            metal_segment(c, grid_xs, (a + half, y), (b - half, y))
    for x, inward in ((xl, "E"), (xr, "W")):
        tee = {"N": p.ground_width, "S": p.ground_width, inward: p.ground_width}
        for y in levels_y:
            metal_junction(c, grid_xs, (x, y), tee)
        stops = [(yt, 0.0), *((y, half) for y in levels_y), (yb, 0.0)]  # (y, half-size of what is there)
        for (a, ha), (b, hb) in itertools.pairwise(stops):
            metal_segment(c, grid_xs, (x, a - ha), (x, b + hb))
    via = gf.get_component(VIA_GROUND_PAD, size=(p.pad_size, p.pad_size))
    for i, (x, y) in enumerate(pads.ground_pads):
        c.add_ref(via, name=f"gnd_via_{i}").dmove((x, y))


def pads(c: Any, mesh: Mesh, wires: list[Wire], plan: PadPlan, p: LayoutParams,
         layer_map: dict[str, str] | None = None) -> list[PadInfo]:
    """Bond pads with a pad opening and a text label; returns the pad map rows.

    Rows are the signal pads by channel, then the ground pads. The pad opening (the
    passivation window a bond wire lands in) is ``p.pad_opening_inset`` inside the metal.
    """
    gf = require_gdsfactory()
    text = layer("text", layer_map)
    pad = gf.get_component("pad", size=(p.pad_size, p.pad_size), layer=layer("pad", layer_map),
                           bbox_layers=(layer("pad_opening", layer_map),),
                           bbox_offsets=(-p.pad_opening_inset,))
    rows = []
    for w in sorted(wires, key=lambda w: w.channel):
        ref = c.add_ref(pad, name=f"pad_ch{w.channel}")
        ref.dmove(w.pad)
        c.add_port(f"heater:{w.channel}", port=ref.ports["pad"])
        c.add_label(f"ch{w.channel}", position=w.pad, layer=text)
        rows.append(PadInfo(f"pad_ch{w.channel}", w.channel, mesh.tbu_names[w.channel // 2],
                            ("top", "bot")[w.channel % 2], round(w.pad[0], 3), round(w.pad[1], 3),
                            w.pad_edge))
    for i, (x, y) in enumerate(plan.ground_pads):
        c.add_ref(pad, name=f"pad_gnd{i}").dmove((x, y))
        c.add_label("GND", position=(x, y), layer=text)
        rows.append(PadInfo(f"pad_gnd{i}", None, "", "gnd", round(x, 3), round(y, 3),
                            "top" if y > 0 else "bottom"))
    return rows


def die(c: Any, p: LayoutParams, layer_map: dict[str, str] | None = None,
        facet_x: float | None = None) -> Any:
    """The die outline ``die_margin`` outside everything drawn, and the saw lane around it.

    Returns the die box (µm, a klayout DBox). The lane is a ring ``dicing_lane`` wide on
    the dicing role, the outline a rectangle on the die role (the floorplan layer).
    ``facet_x``: the west edge is a cleaved or polished facet at this x (the edge
    couplers' tips), with no margin.
    """
    import klayout.db as kdb

    box = c.dbbox().enlarged(p.die_margin, p.die_margin)
    if facet_x is not None:
        box = kdb.DBox(facet_x, box.bottom, box.right, box.top)
    c.add_polygon([(box.left, box.bottom), (box.right, box.bottom), (box.right, box.top),
                   (box.left, box.top)], layer=layer("die", layer_map))
    outer = box.enlarged(p.dicing_lane, p.dicing_lane)
    dbu = c.kcl.dbu
    ring = kdb.Region(outer.to_itype(dbu)) - kdb.Region(box.to_itype(dbu))
    for poly in ring.each():
        c.add_polygon(poly.to_dtype(dbu), layer=layer("dicing", layer_map))
    return box


def trench_crossings(c: Any, layer_map: dict[str, str] | None = None) -> int:
    """Number of signal-wire (metal routing) shapes that cross an isolation trench.

    A wire over a deep trench needs the foundry's step-coverage rule; the count tells the
    designer how many there are (the tracks of the bands cross vertical TBUs).
    """
    import klayout.db as kdb

    gf = require_gdsfactory()
    wires = kdb.Region(c.begin_shapes_rec(gf.get_layer(layer("metal_routing", layer_map)))).merged()
    trenches = kdb.Region(c.begin_shapes_rec(gf.get_layer(layer("trench", layer_map))))
    return wires.interacting(trenches).count()
