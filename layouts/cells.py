"""gdsfactory cells of the mesh: the dual-heater TBU (MZI) and the bent link.

Each cell is a typed gdsfactory cell function (:func:`layouts.pdk.lazy_cell`, i.e.
``gf.cell`` applied on first use because gdsfactory is imported lazily) whose keyword
parameters are exactly the dimensions it uses: the TBU's name does not change when a
pad or wire dimension of the chip does. :func:`tbu_for` and :func:`link_bend_for` pick
those parameters out of a :class:`layouts.params.LayoutParams`.

Optical ports follow the model (:mod:`photonics.topology`): ``a0``/``a1`` at end a
(x = 0), ``b0``/``b1`` at end b, with the top arm (``*0`` ports) on +y, i.e. on the left
when walking from a to b. Electrical ports: ``top_sig``/``bot_sig`` (metal routing
layer, to the bond pad) and ``top_gnd``/``bot_gnd`` (metal ground layer) at the via
stacks of each heater. Layers come from the active PDK (:mod:`layouts.pdk`).
"""

from __future__ import annotations

from typing import Any

from layouts.errors import LayoutError, require_gdsfactory
from layouts.params import LayoutParams
from layouts.pdk import layer, lazy_cell, snap

VIA_SIGNAL = "via_stack_heater_mtop"  # heater -> M2 -> top metal (the signal wire's layer)
VIA_GROUND = "via_stack_heater_m2"  # heater -> M2 (the ground grid's layer)


def _heater(c: Any, arm: Any, heater: tuple[float, float], via: tuple[float, float, float],
            side: int, name: str, layers: dict[str, Any]) -> None:
    """Draw a heater strip on ``arm`` and its two via stacks, outside the arm.

    Args:
        c: the TBU component being drawn.
        arm: the arm's straight waveguide instance (the heater is centred on it).
        heater: (length, width) of the strip, µm.
        via: (via stack size, via centre offset from the arm, port width), µm.
        side: +1 puts the via stacks above the arm, -1 below.
        name: port name prefix (``top`` or ``bot``).
        layers: heater, metal_routing and metal_ground layers of the active PDK.
    """
    gf = require_gdsfactory()
    length, width = heater
    via_size, via_offset, port_width = via
    x0, x1, y, hw = arm.x - length / 2, arm.x + length / 2, arm.y, width / 2
    c.add_polygon([(x0, y - hw), (x1, y - hw), (x1, y + hw), (x0, y + hw)], layer=layers["heater"])
    yv = y + side * via_offset
    for x, kind, spec in ((x0, "sig", VIA_SIGNAL), (x1, "gnd", VIA_GROUND)):
        # a short heater-layer bridge from the strip end out to the via stack, so the
        # vias never sit on the waveguide
        c.add_polygon([(x - hw, min(y, yv)), (x + hw, min(y, yv)), (x + hw, max(y, yv)),
                       (x - hw, max(y, yv))], layer=layers["heater"])
        c.add_ref(gf.get_component(spec, size=(via_size, via_size))).dmove((x, yv))
        c.add_port(f"{name}_{kind}", center=(x, yv), width=port_width,
                   orientation=90 if side > 0 else 270,
                   layer=layers["metal_routing" if kind == "sig" else "metal_ground"],
                   port_type="electrical")


def _trenches(c: Any, arms: tuple[Any, Any], heater_length: float, via: tuple[float, float],
              trench: tuple[float, float], layer_map: dict[str, str] | None) -> None:
    """Deep trenches outside each arm along its heater (µm), clear of the via stacks and their wires."""
    via_size, via_offset = via
    width, gap = trench
    trench_layer = layer("trench", layer_map)
    for arm, side in zip(arms, (1, -1), strict=True):
        x0 = arm.x - heater_length / 2 + via_size / 2 + gap
        x1 = arm.x + heater_length / 2 - via_size / 2 - gap
        y_in = arm.y + side * (via_offset + via_size / 2 + gap)
        y_out = y_in + side * width
        c.add_polygon([(x0, min(y_in, y_out)), (x1, min(y_in, y_out)), (x1, max(y_in, y_out)),
                       (x0, max(y_in, y_out))], layer=trench_layer)


@lazy_cell
def tbu_mzi(
    *,
    length: float = 781.0,
    port_pitch: float = 10.0,
    arm_spacing: float = 60.0,
    fanin_length: float = 20.0,
    arm_bend_length: float = 60.0,
    heater_length: float = 400.0,
    heater_width: float = 2.5,
    via_size: float = 11.0,
    via_offset: float = 12.0,
    port_width: float = 4.0,
    trench_width: float = 0.0,
    trench_gap: float = 5.0,
    cross_section: str = "strip",
    mmi: str = "mmi2x2",
    layer_map: dict[str, str] | None = None,
) -> Any:
    """A balanced dual-heater MZI (one TBU): MMI 2x2, two heated arms, MMI 2x2.

    Args:
        length: port-to-port length (µm); the arms take what the bends and MMIs leave.
        port_pitch: spacing of a0/a1 (and b0/b1), µm.
        arm_spacing: centre-to-centre spacing of the arms, µm.
        fanin_length: S-bend from the port pitch to the MMI ports, µm.
        arm_bend_length: S-bend from the MMI ports to the arms, µm.
        heater_length: heater strip on each arm, µm.
        heater_width: width of the heater strip, µm.
        via_size: side of the square heater via stacks, µm.
        via_offset: via stack centre outside the arm (away from the other arm), µm.
        port_width: width of the electrical ports (the wire width), µm.
        trench_width: width of the thermal isolation trenches drawn outside each arm, beyond
            its via stacks, along the heater (0: none), µm. They stop short of the via
            stacks, so the wires leaving the vias never cross them.
        trench_gap: trench edge to the via stacks' outer edge, µm.
        cross_section: waveguide cross-section of the active PDK.
        mmi: 2x2 MMI cell of the active PDK (ports o1, o2 west; o3, o4 east).
        layer_map: layer-role overrides (see :mod:`layouts.pdk`).

    Returns:
        A gdsfactory Component with end a at x = 0 and end b at x = ``info["length"]`` (µm).

    Raises:
        LayoutError: the arms are shorter than the heater.
    """
    gf = require_gdsfactory()
    layers = {role: layer(role, layer_map) for role in ("heater", "metal_routing", "metal_ground")}
    c = gf.Component()
    splitter = gf.get_component(mmi, cross_section=cross_section)
    mmi_len = splitter.ports["o3"].x - splitter.ports["o1"].x
    half_pitch = abs(splitter.ports["o2"].y - splitter.ports["o1"].y) / 2
    arm_len = snap(length - 2 * (fanin_length + mmi_len + arm_bend_length))
    if arm_len < heater_length + 2 * via_size:
        raise LayoutError(
            f"a {length} µm TBU leaves {arm_len:.1f} µm per arm, less than the heater "
            f"({heater_length} µm); lengthen basic_unit_length or shorten heater_length")
    fan = gf.get_component("bend_s", size=(fanin_length, snap(port_pitch / 2 - half_pitch)),
                           cross_section=cross_section)
    sbend = gf.get_component("bend_s", size=(arm_bend_length, snap(arm_spacing / 2 - half_pitch)),
                             cross_section=cross_section)
    straight = gf.get_component("straight", length=arm_len, cross_section=cross_section)

    mmi_a = c.add_ref(splitter, name="mmi_a")
    mmi_a.dmove((fanin_length - splitter.ports["o1"].x, 0))
    fan_a0 = c.add_ref(fan, name="fan_a0").connect("o2", mmi_a.ports["o2"], mirror=True)
    fan_a1 = c.add_ref(fan, name="fan_a1").connect("o2", mmi_a.ports["o1"])
    arm_t0 = c.add_ref(sbend, name="arm_t0").connect("o1", mmi_a.ports["o3"])
    arm_b0 = c.add_ref(sbend, name="arm_b0").connect("o1", mmi_a.ports["o4"], mirror=True)
    top = c.add_ref(straight, name="arm_top").connect("o1", arm_t0.ports["o2"])
    bot = c.add_ref(straight, name="arm_bot").connect("o1", arm_b0.ports["o2"])
    arm_t1 = c.add_ref(sbend, name="arm_t1").connect("o2", top.ports["o2"], mirror=True)
    c.add_ref(sbend, name="arm_b1").connect("o2", bot.ports["o2"])
    mmi_b = c.add_ref(splitter, name="mmi_b").connect("o2", arm_t1.ports["o1"])
    fan_b0 = c.add_ref(fan, name="fan_b0").connect("o1", mmi_b.ports["o3"])
    fan_b1 = c.add_ref(fan, name="fan_b1").connect("o1", mmi_b.ports["o4"], mirror=True)
    for name, ref, port in (("a0", fan_a0, "o1"), ("a1", fan_a1, "o1"),
                            ("b0", fan_b0, "o2"), ("b1", fan_b1, "o2")):
        c.add_port(name, port=ref.ports[port])
    via = (via_size, via_offset, port_width)
    _heater(c, top, (heater_length, heater_width), via, +1, "top", layers)
    _heater(c, bot, (heater_length, heater_width), via, -1, "bot", layers)
    if trench_width:
        _trenches(c, (top, bot), heater_length, (via_size, via_offset), (trench_width, trench_gap), layer_map)
    c.info["length"] = length
    c.info["arm_length"] = arm_len
    return c


@lazy_cell
def link_bend(*, bend_radius: float = 10.0, port_pitch: float = 10.0, cross_section: str = "strip") -> Any:
    """Straight then a 90° Euler bend, exactly as long as the straight link (2R + pitch, µm).

    Args:
        bend_radius: Euler bend radius, µm.
        port_pitch: port pitch at a TBU end (sets the straight link length), µm.
        cross_section: waveguide cross-section of the active PDK.
    """
    gf = require_gdsfactory()
    c = gf.Component()
    bend = gf.get_component("bend_euler", radius=bend_radius, cross_section=cross_section)
    run = snap(2 * bend_radius + port_pitch - bend.info["length"])
    s = c.add_ref(gf.get_component("straight", length=run, cross_section=cross_section), name="run")
    b = c.add_ref(bend, name="bend").connect("o1", s.ports["o2"])
    c.add_port("o1", port=s.ports["o1"])
    c.add_port("o2", port=b.ports["o2"])
    c.info["length"] = run + bend.info["length"]
    return c


def tbu_for(p: LayoutParams, layer_map: dict[str, str] | None = None) -> Any:
    """The TBU cell of a layout: :func:`tbu_mzi` with the parameters it uses from ``p``."""
    return tbu_mzi(length=snap(p.basic_unit_length - link_straight_length(p)), port_pitch=p.port_pitch,
                   arm_spacing=p.arm_spacing, fanin_length=p.fanin_length,
                   arm_bend_length=p.arm_bend_length, heater_length=p.heater_length,
                   heater_width=p.heater_width, via_size=p.via_size, via_offset=p.via_offset,
                   port_width=p.wire_width, trench_width=p.trench_width, trench_gap=p.trench_gap,
                   cross_section=p.cross_section, layer_map=layer_map)


def link_bend_for(p: LayoutParams) -> Any:
    """The bent link of a layout: :func:`link_bend` with the parameters it uses from ``p``."""
    return link_bend(bend_radius=p.bend_radius, port_pitch=p.port_pitch, cross_section=p.cross_section)


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
