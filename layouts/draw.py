"""Drawing helpers of the mesh cell: mesh-port couplers, wires, ground grid, pads (µm)."""

from __future__ import annotations

from typing import Any

from layouts.errors import LayoutError
from layouts.geometry import Placement
from layouts.params import LayoutParams
from layouts.wiring import PadPlan, Wire
from photonics.topology import Mesh

_ANGLE = {"N": 90, "S": 270, "W": 180, "E": 0}


def mesh_ports(c: Any, gf: Any, placement: Placement, refs: list[Any], p: LayoutParams, gc: Any,
               at: dict[str, float]) -> None:
    """A grating coupler per mesh port, on a row (N/S) or column (W/E) outside the mesh.

    Each port turns (one Euler bend) to its exit direction, runs straight, and an S-bend
    near the coupler spreads the two ports of one vertex to the fiber-array pitch.
    ``at`` gives the coupler row y (N, S) and column x (W, E), µm.
    """
    starts = {}
    for k, e in enumerate(placement.exits):
        port = refs[e.tbu].ports[e.label]
        if round(port.orientation) % 360 != _ANGLE[e.direction]:
            bend = c.add_ref(gf.components.bend_euler(radius=p.bend_radius), name=f"esc_{k}")
            for mirror in (False, True):
                bend.connect("o1", port, mirror=mirror)
                if round(bend.ports["o2"].orientation) % 360 == _ANGLE[e.direction]:
                    break
            else:
                raise LayoutError(f"{e.name} cannot turn {e.direction}")
            port = bend.ports["o2"]
        starts[k] = port
    for direction in "NSWE":
        ks = [k for k, e in enumerate(placement.exits) if e.direction == direction]
        along = (lambda q: q.x) if direction in "NS" else (lambda q: q.y)
        ks.sort(key=lambda k: along(starts[k]))
        targets = _spread(ks, placement, starts, along, p.gc_pitch)
        for k, t in zip(ks, targets, strict=True):
            _route_to_coupler(c, gf, k, starts[k], t, at[direction], direction, gc, placement)


def _spread(ks: list[int], placement: Placement, starts: dict[int, Any], along: Any,
            pitch: float) -> list[float]:
    """Coupler positions along the row: the two ports of a vertex go ±pitch/2 about it."""
    out = []
    for i, k in enumerate(ks):
        vertex = placement.exits[k].vertex
        pair = [j for j in ks if placement.exits[j].vertex == vertex]
        if len(pair) == 2:
            centre = (along(starts[pair[0]]) + along(starts[pair[1]])) / 2
            out.append(centre + (pitch / 2 if k == pair[1] else -pitch / 2))
        else:
            out.append(along(starts[k]))
        if i and out[-1] - out[-2] < pitch / 2:
            raise LayoutError("mesh-port couplers would overlap; increase basic_unit_length")
    return out


def _route_to_coupler(c: Any, gf: Any, k: int, start: Any, lateral: float, level: float, direction: str,
                      gc: Any, placement: Placement) -> None:
    exit_ = placement.exits[k]
    n = exit_.name.split(":")[1]
    dist = abs((level - start.y) if direction in "NS" else (level - start.x))
    offset = lateral - (start.x if direction in "NS" else start.y)
    s_len = max(40.0, 2 * abs(offset)) if abs(offset) > 1e-3 else 0.0
    run = round(dist - s_len, 3)
    if run < 0:
        raise LayoutError(f"no room to route {exit_.name} to its coupler")
    port = start
    if run > 0:
        run_ref = c.add_ref(gf.components.straight(length=run), name=f"pr_{n}_run")
        port = run_ref.connect("o1", port).ports["o2"]
    if s_len:
        sb = c.add_ref(gf.components.bend_s(size=(s_len, round(abs(offset), 3))), name=f"pr_{n}_s")
        for mirror in (False, True):
            sb.connect("o1", port, mirror=mirror)
            got = sb.ports["o2"].x if direction in "NS" else sb.ports["o2"].y
            if abs(got - lateral) < 1e-2:
                break
        port = sb.ports["o2"]
    coupler = c.add_ref(gc, name=f"gc_port_{n}").connect("o1", port)
    c.add_port(exit_.name, port=coupler.ports["o2"])
    c.add_label(exit_.name, position=(coupler.ports["o2"].x, coupler.ports["o2"].y),
                layer=gf.gpdk.LAYER.TEXT)


def _path_polygon(points: list[tuple[float, float]], width: float) -> Any:
    import klayout.db as kdb

    pts = [points[0]]
    for q in points[1:]:
        if abs(q[0] - pts[-1][0]) > 1e-9 or abs(q[1] - pts[-1][1]) > 1e-9:
            pts.append(q)
    path = kdb.DPath([kdb.DPoint(x, y) for x, y in pts], width, width / 2, width / 2)
    return path.polygon()


def signal_wires(c: Any, gf: Any, wires: list[Wire], p: LayoutParams) -> None:
    """Each heater's M3 wire from its via to its pad (planar by construction)."""
    for w in wires:
        c.add_polygon(_path_polygon(w.points, p.wire_width), layer=gf.gpdk.LAYER.M3)


def ground(c: Any, gf: Any, grounds: list[tuple[float, float, int]], rails: list[float], y_top: float,
           y_bottom: float, pads: PadPlan, p: LayoutParams) -> None:
    """The common heater return on M2: a stub per heater, a rail per band, two spines.

    M2 never carries a signal (signal wires are M3 only), so the ground grid may cross
    every signal wire; it stays clear of the M2 landings of the signal via stacks, which
    sit at the heater ends, away from the band centres where the rails run.
    """
    layer = gf.gpdk.LAYER.M2
    last = len(rails)
    (xl, yt), (_, yb), (xr, _), _ = pads.ground_pads
    for x, y, band in grounds:
        rail = y_top if band == -1 else y_bottom if band == last else rails[band]
        c.add_polygon(_path_polygon([(x, y), (x, rail)], p.wire_width), layer=layer)
    for y in [y_top, *rails, y_bottom]:
        c.add_polygon(_path_polygon([(xl, y), (xr, y)], p.wire_width), layer=layer)
    for x in (xl, xr):
        c.add_polygon(_path_polygon([(x, yt), (x, yb)], p.wire_width), layer=layer)
    via = gf.components.via_stack_m2_m3(size=(p.pad_size, p.pad_size))
    for i, (x, y) in enumerate(pads.ground_pads):
        c.add_ref(via, name=f"gnd_via_{i}").dmove((x, y))


def pads(c: Any, gf: Any, mesh: Mesh, wires: list[Wire], plan: PadPlan, p: LayoutParams) -> list[Any]:
    """Bond pads with text labels; returns the pad map rows (signal pads, then ground)."""
    from layouts.mesh_cell import PadInfo

    pad = gf.components.pad(size=(p.pad_size, p.pad_size))
    rows = []
    for w in sorted(wires, key=lambda w: w.channel):
        ref = c.add_ref(pad, name=f"pad_ch{w.channel}")
        ref.dmove(w.pad)
        c.add_port(f"heater:{w.channel}", port=ref.ports["pad"])
        c.add_label(f"ch{w.channel}", position=w.pad, layer=gf.gpdk.LAYER.TEXT)
        rows.append(PadInfo(f"pad_ch{w.channel}", w.channel, mesh.tbu_names[w.channel // 2],
                            ("top", "bot")[w.channel % 2], round(w.pad[0], 3), round(w.pad[1], 3),
                            w.pad_edge))
    for i, (x, y) in enumerate(plan.ground_pads):
        c.add_ref(pad, name=f"pad_gnd{i}").dmove((x, y))
        c.add_label("GND", position=(x, y), layer=gf.gpdk.LAYER.TEXT)
        rows.append(PadInfo(f"pad_gnd{i}", None, "", "gnd", round(x, 3), round(y, 3),
                            "top" if y > 0 else "bottom"))
    return rows
