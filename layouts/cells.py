"""gdsfactory cells of the mesh: the dual-heater TBU (MZI) and the two link shapes.

Every function imports gdsfactory lazily (see :func:`layouts.errors.require_gdsfactory`).
Optical ports follow the model (:mod:`photonics.topology`): ``a0``/``a1`` at end a
(x = 0), ``b0``/``b1`` at end b, with the top arm (``*0`` ports) on +y, i.e. on the left
when walking from a to b. Electrical ports: ``top_sig``/``bot_sig`` (M3, to the bond pad)
and ``top_gnd``/``bot_gnd`` (M2, to the ground grid) at the via stacks of each heater.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layouts.errors import LayoutError, require_gdsfactory
from layouts.params import LayoutParams

MMI_PORT_HALF_PITCH = 0.625  # the generic PDK's mmi2x2 ports sit at ±0.625 µm


def _heater(c: Any, gf: Any, arm: Any, p: LayoutParams, side: int, name: str) -> None:
    """Draw a heater strip on ``arm`` and its two via stacks, outside the arm (side=±1)."""
    layer = gf.gpdk.LAYER
    x0 = arm.x - p.heater_length / 2
    x1 = arm.x + p.heater_length / 2
    y = arm.y
    hw = p.heater_width / 2
    c.add_polygon([(x0, y - hw), (x1, y - hw), (x1, y + hw), (x0, y + hw)], layer=layer.HEATER)
    yv = y + side * p.via_offset
    for x, kind, spec in ((x0, "sig", "via_stack_heater_mtop"), (x1, "gnd", "via_stack_heater_m2")):
        # a short heater-layer bridge from the strip end out to the via stack, so the
        # vias never sit on the waveguide
        c.add_polygon([(x - hw, min(y, yv)), (x + hw, min(y, yv)), (x + hw, max(y, yv)),
                       (x - hw, max(y, yv))], layer=layer.HEATER)
        via = c.add_ref(gf.get_component(spec, size=(p.via_size, p.via_size)))
        via.dmove((x, yv))
        c.add_port(f"{name}_{kind}", center=(x, yv), width=p.wire_width,
                   orientation=90 if side > 0 else 270,
                   layer=layer.M3 if kind == "sig" else layer.M2, port_type="electrical")


def _lazy_cell(basename: str, builder: Callable[[Any, LayoutParams], Any]) -> Callable[[LayoutParams], Any]:
    """Wrap ``builder(gf, params)`` in ``gf.cell`` on first use (gdsfactory is imported lazily).

    gdsfactory caches cells by their settings, so the flat parameter dict is passed as
    keyword arguments: the cell name and the cache key then follow every dimension.
    """
    cache: dict[str, Callable[..., Any]] = {}

    def make(params: LayoutParams | None = None) -> Any:
        if "cell" not in cache:
            gf = require_gdsfactory()

            def build(**settings: Any) -> Any:
                return builder(gf, LayoutParams(**settings))

            build.__name__ = basename
            cache["cell"] = gf.cell(basename=basename)(build)
        return cache["cell"](**(params or LayoutParams()).to_dict())

    return make


def _build_tbu(gf: Any, p: LayoutParams) -> Any:
    c = gf.Component()
    total = p.basic_unit_length - link_straight_length(p)
    mmi = gf.components.mmi2x2()
    mmi_len = mmi.ports["o3"].x - mmi.ports["o1"].x
    arm_len = total - 2 * (p.fanin_length + mmi_len + p.arm_bend_length)
    if arm_len < p.heater_length + 2 * p.via_size:
        raise LayoutError(
            f"basic_unit_length {p.basic_unit_length} µm leaves {arm_len:.1f} µm per arm, less than "
            f"the heater ({p.heater_length} µm); lengthen the unit or shorten the heater")
    fan = gf.components.bend_s(size=(p.fanin_length, p.port_pitch / 2 - MMI_PORT_HALF_PITCH))
    sbend = gf.components.bend_s(size=(p.arm_bend_length, p.arm_spacing / 2 - MMI_PORT_HALF_PITCH))
    straight = gf.components.straight(length=arm_len)

    mmi_a = c.add_ref(mmi, name="mmi_a")
    mmi_a.dmove((p.fanin_length - mmi.ports["o1"].x, 0))
    fan_a0 = c.add_ref(fan, name="fan_a0").connect("o2", mmi_a.ports["o2"], mirror=True)
    fan_a1 = c.add_ref(fan, name="fan_a1").connect("o2", mmi_a.ports["o1"])
    arm_t0 = c.add_ref(sbend, name="arm_t0").connect("o1", mmi_a.ports["o3"])
    arm_b0 = c.add_ref(sbend, name="arm_b0").connect("o1", mmi_a.ports["o4"], mirror=True)
    top = c.add_ref(straight, name="arm_top").connect("o1", arm_t0.ports["o2"])
    bot = c.add_ref(straight, name="arm_bot").connect("o1", arm_b0.ports["o2"])
    arm_t1 = c.add_ref(sbend, name="arm_t1").connect("o2", top.ports["o2"], mirror=True)
    c.add_ref(sbend, name="arm_b1").connect("o2", bot.ports["o2"])
    mmi_b = c.add_ref(mmi, name="mmi_b").connect("o2", arm_t1.ports["o1"])
    fan_b0 = c.add_ref(fan, name="fan_b0").connect("o1", mmi_b.ports["o3"])
    fan_b1 = c.add_ref(fan, name="fan_b1").connect("o1", mmi_b.ports["o4"], mirror=True)
    for name, ref, port in (("a0", fan_a0, "o1"), ("a1", fan_a1, "o1"),
                            ("b0", fan_b0, "o2"), ("b1", fan_b1, "o2")):
        c.add_port(name, port=ref.ports[port])
    _heater(c, gf, top, p, +1, "top")
    _heater(c, gf, bot, p, -1, "bot")
    c.info["length"] = total
    c.info["arm_length"] = arm_len
    return c


def _build_link_bend(gf: Any, p: LayoutParams) -> Any:
    """Straight then a 90° Euler bend, as long as the straight link (2R + pitch)."""
    c = gf.Component()
    bend = gf.components.bend_euler(radius=p.bend_radius)
    run = link_straight_length(p) - bend.info["length"]
    s = c.add_ref(gf.components.straight(length=round(run, 3)), name="run")
    b = c.add_ref(bend, name="bend").connect("o1", s.ports["o2"])
    c.add_port("o1", port=s.ports["o1"])
    c.add_port("o2", port=b.ports["o2"])
    c.info["length"] = round(run, 3) + bend.info["length"]
    return c


tbu_mzi = _lazy_cell("tbu_mzi", _build_tbu)
tbu_mzi.__doc__ = """A balanced dual-heater MZI (one TBU): MMI 2x2, two heated arms, MMI 2x2.

Args:
    params: dimensions in µm; the arms are as long as makes the cell plus one link
        exactly ``params.basic_unit_length``.

Returns:
    A gdsfactory Component with end a at x = 0 and end b at x = ``info["length"]`` (µm).
"""
link_bend = _lazy_cell("link_bend", _build_link_bend)
link_bend.__doc__ = "The link between a vertical and a horizontal TBU: straight + 90° bend (µm)."


def vertical_half_gap(p: LayoutParams, bend_length: float) -> float:
    """Distance (µm) from a vertex to the ends of its vertical TBUs.

    Chosen so the bent link (straight + 90° bend of optical length ``bend_length``) is
    exactly as long as the straight link across the vertex, so every path through a TBU
    and one link has the same basic unit length.
    """
    return 3 * p.bend_radius + 1.5 * p.port_pitch - bend_length


def link_straight_length(p: LayoutParams) -> float:
    """Optical length of every link (µm): the straight link across a vertex, 2R + pitch."""
    return 2 * p.bend_radius + p.port_pitch
