"""The mesh cell: TBUs, links, grating couplers at the mesh ports, heater wiring and pads.

``mesh_cell("smartlight")`` draws the chip of a mesh topology in the gdsfactory style (a
cached cell function of plain settings). Names follow :mod:`photonics.topology`:
instance ``tbu_<r>_<c>_<s>`` is TBU ``tbu:<r>.<c>.<s>``, instance ``link_<i>`` is
``Mesh.links[i]``, the coupler of mesh port ``port:<n>`` is ``gc_port_<n>`` and the
component's optical port is named ``port:<n>``; bond pad ``pad_ch<ch>`` (component port
``heater:<ch>``, text label ``ch<ch>``) drives heater channel ``ch`` (``2*i`` = top arm of
TBU ``i``, ``2*i+1`` = bottom arm). All lengths are in µm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from layouts import draw
from layouts.cells import link_bend_for, link_straight_length, tbu_for, vertical_half_gap
from layouts.electrical import Electrical
from layouts.errors import LayoutError, require_gdsfactory
from layouts.fiber_edge import plan_edge, route_to_edge
from layouts.geometry import Placement, place_mesh
from layouts.names import instance_name
from layouts.params import LayoutParams
from layouts.pdk import lazy_cell
from layouts.routing import route_signal_wires
from layouts.sizing import metal_sheets, size_wiring
from layouts.wiring import Terminal
from photonics.topology import PORT_LABELS, Mesh, mesh_from_spec

GC_SPEC = "grating_coupler_elliptical_te"
EC_SPEC = "edge_coupler_silicon"  # inverse taper to a cleaved facet (fiber_io="edge-coupler")


def mesh_cell(mesh: str = "smartlight", layer_map: dict[str, str] | None = None, **params: Any) -> Any:
    """The layout of a mesh as a cached gdsfactory cell, drawn with the active PDK.

    Args:
        mesh: ``smartlight``, ``hex:RxC`` or a mesh JSON file (see ``lumion mesh``).
        layer_map: layer-role overrides for a PDK whose layer names differ from the
            generic PDK's (see :mod:`layouts.pdk`).
        **params: overrides of :class:`layouts.params.LayoutParams` (µm, cross_section).

    Returns:
        The gdsfactory Component; ``info["pads"]`` holds the pad map rows.

    Raises:
        LayoutError: the mesh is not hexagonal or too large for the pad ring.
    """
    settings = LayoutParams(**params).to_dict()  # validated before gdsfactory caches anything
    return mesh_layout(mesh=mesh, layer_map=layer_map, **settings)


@lazy_cell
def mesh_layout(mesh: str = "smartlight", layer_map: dict[str, str] | None = None, **settings: Any) -> Any:
    """The gdsfactory cell of :func:`mesh_cell` (``settings``: every :class:`LayoutParams` field)."""
    return build_mesh(mesh_from_spec(mesh), LayoutParams(**settings), layer_map)


def build_mesh(mesh: Mesh, p: LayoutParams, layer_map: dict[str, str] | None = None) -> Any:
    """Draw ``mesh`` into a new (uncached) gdsfactory Component; see :func:`mesh_cell`."""
    gf = require_gdsfactory()
    if mesh.n_tbus > p.max_tbus:
        raise LayoutError(f"{mesh.n_tbus} TBUs is more than the {p.max_tbus} the layout draws "
                          "(raise max_tbus if you really want it)")
    c = gf.Component()
    tbu = tbu_for(p, layer_map)
    half_x = link_straight_length(p) / 2
    bend = gf.get_component("bend_euler", radius=p.bend_radius, cross_section=p.cross_section)
    half_y = vertical_half_gap(p, bend.info["length"])
    placement = place_mesh(mesh, tbu.info["length"], half_x, half_y)
    refs = _place_tbus(c, mesh, placement, tbu)
    _place_links(c, mesh, placement, refs, p)

    gc = gf.get_component(GC_SPEC, cross_section=p.cross_section)
    gc_len = gc.dbbox().right - gc.dbbox().left
    terminals, grounds = _terminals(placement, refs)
    core = c.dbbox()
    starts = draw.exit_ports(c, placement, refs, p)
    edge = plan_edge(placement, {k: (s.x, s.y) for k, s in starts.items()}) \
        if p.fiber_io != "ring" else None
    lanes = (len(edge.top), len(edge.bottom)) if edge else None
    w = size_wiring(p, placement, terminals, grounds, core, gc_len, metal_sheets(layer_map), lanes)
    if w.params.wire_width != p.wire_width:  # the via ports take the sized wire width
        sized = tbu_for(w.params, layer_map)
        for ref in refs:
            ref.cell = sized
    p = w.params
    if edge is None:
        draw.mesh_ports(c, placement, starts, p, gc, {"N": w.y_gc_top, "S": w.y_gc_bot,
                                                       "W": w.x_gc_left, "E": w.x_gc_right})
    else:
        x_metal = min(x for wire in w.bands.wires for x, _ in wire.points)
        grating = p.fiber_io == "grating-edge"
        coupler = gc if grating else gf.get_component(EC_SPEC, cross_section=p.cross_section)
        route_to_edge(c, placement, starts, p, (coupler, "gc" if grating else "ec"), edge, (
            w.y_gc_top, w.y_gc_bot, max(s.x for s in starts.values()) + 2 * p.bend_radius,
            core.left - 2 * p.bend_radius, x_metal - p.margin))
    draw.ground(c, grounds, (w.rails, w.y_rail_top, w.y_rail_bot), w.pads, p, layer_map)
    rows = draw.pads(c, mesh, w.bands.wires, w.pads, p, layer_map)
    w.electrical = _drawn_lines(w.electrical, route_signal_wires(c, w.bands.wires, w.pads, p, layer_map), p)
    rows = [replace(r, wire_ohm=None if r.channel is None else round(w.electrical.line_ohm[r.channel], 3))
            for r in rows]
    facet = min(q.x for q in c.ports if q.name.startswith("port:")) if p.fiber_io == "edge-coupler" else None
    die = draw.die(c, p, layer_map, facet_x=facet)
    c.info["die_um"] = [round(die.width(), 3), round(die.height(), 3)]
    c.info["trench_crossings"] = draw.trench_crossings(c, layer_map) if p.trench_width else 0
    c.info["pads"] = [r.__dict__ for r in rows]
    c.info["n_tbus"] = mesh.n_tbus
    c.info["n_ports"] = mesh.n_ports
    c.info["n_pads"] = len(rows)
    c.info["electrical"] = {
        "wire_width_um": p.wire_width, "ground_width_um": p.ground_width,
        "max_line_resistance_ohm": round(w.electrical.max_line_ohm, 3),
        "max_ground_drop_v": round(w.electrical.max_ground_drop_v, 4),
        "ground_current_ma": round(w.electrical.ground_current_ma, 3),
        "routing_sheet_ohm_sq": round(w.electrical.routing_sheet_ohm, 5),
        "ground_sheet_ohm_sq": round(w.electrical.ground_sheet_ohm, 5),
    }
    return c


def _drawn_lines(planned: Electrical, squares: dict[int, float], p: LayoutParams) -> Electrical:
    """The line resistances of the drawn routes (which replace the planner's polylines).

    Raises:
        LayoutError: a drawn wire is over ``max_line_resistance_ohm`` (gdsfactory's bundle
            router took a longer path than the sizing planned).
    """
    lines = {ch: sq * planned.routing_sheet_ohm for ch, sq in squares.items()}
    worst = max(lines, key=lines.get)
    if lines[worst] > p.max_line_resistance_ohm:
        raise LayoutError(f"the drawn wire of heater channel {worst} is {lines[worst]:.1f} Ohm, over "
                          f"max_line_resistance_ohm {p.max_line_resistance_ohm}; raise it")
    return replace(planned, line_ohm=lines)


def _place_tbus(c: Any, mesh: Mesh, placement: Placement, tbu: Any) -> list[Any]:
    refs = []
    for name, where in zip(mesh.tbu_names, placement.tbus, strict=True):
        ref = c.add_ref(tbu, name=instance_name(name))
        ref.drotate(where.rotation)
        ref.dmove((where.x, where.y))
        refs.append(ref)
    return refs


def _place_links(c: Any, mesh: Mesh, placement: Placement, refs: list[Any], p: LayoutParams) -> None:
    """One link instance per ``Mesh.links`` row, joined to both TBU ports (checked)."""
    gf = require_gdsfactory()
    straight = gf.get_component("straight", length=link_straight_length(p), cross_section=p.cross_section)
    bend = link_bend_for(p)
    for i, (g1, g2) in enumerate(mesh.links):
        (t1, l1), (t2, l2) = divmod(int(g1), 4), divmod(int(g2), 4)
        v1, v2 = placement.tbus[t1].vertical, placement.tbus[t2].vertical
        if v1 and v2:
            raise LayoutError(f"link {i} joins two vertical TBUs; not a brick-wall mesh")
        if v2:  # the bent link starts with its straight run at the vertical TBU
            (t1, l1), (t2, l2) = (t2, l2), (t1, l1)
        start, target = refs[t1].ports[PORT_LABELS[l1]], refs[t2].ports[PORT_LABELS[l2]]
        ref = c.add_ref(straight if not (v1 or v2) else bend, name=f"link_{i}")
        for mirror in (False, True):
            ref.connect("o1", start, mirror=mirror)
            if _same_place(ref.ports["o2"], target):
                break
        else:
            raise LayoutError(f"link {i} ({mesh.tbu_port_name(int(g1))} - {mesh.tbu_port_name(int(g2))}) "
                              "does not meet its TBU ports; the placement is inconsistent")


def _same_place(a: Any, b: Any) -> bool:
    return abs(a.x - b.x) < 1e-3 and abs(a.y - b.y) < 1e-3


def _terminals(placement: Placement, refs: list[Any]) -> tuple[list[Terminal], list[tuple]]:
    """Signal vias (with their band) and ground vias ``(x, y, band)`` of every heater."""
    signals, grounds = [], []
    for i, (ref, where) in enumerate(zip(refs, placement.tbus, strict=True)):
        (_, ka), (_, kb) = placement.vertices[i]
        for k, arm in enumerate(("top", "bot")):
            for kind in ("sig", "gnd"):
                port = ref.ports[f"{arm}_{kind}"]
                # vertical TBUs wire into their own band, horizontal ones into the
                # band their via faces (above or below the line)
                band = min(ka, kb) if where.vertical else (ka - 1 if port.y > where.y else ka)
                if kind == "sig":
                    signals.append(Terminal(2 * i + k, port.x, port.y, band))
                else:
                    grounds.append((port.x, port.y, band))
    return signals, grounds
