"""Layout parameters: every dimension of the drawn chip, in µm (no gdsfactory here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from layouts.errors import LayoutError

#: parameters that are names, not dimensions
TEXT_FIELDS = frozenset({"cross_section", "wire_cross_section", "fiber_io"})
FIBER_IO = ("ring", "grating-edge", "edge-coupler")  # four sides; one west column; a west facet
OPTIONAL_FIELDS = frozenset({"trench_width"})  # dimensions where 0 means "not drawn"
# waveguide-to-waveguide spacing of the fibre-edge bundles (layouts.fiber_edge draws them, layouts.sizing
# keeps room for them): no evanescent coupling for strip WGs, µm
LANE_PITCH_UM = 10.0


@dataclass(frozen=True)
class LayoutParams:
    """Dimensions of the mesh layout, all in µm, and the waveguide cross-section name.

    The defaults give the SmartLight basic unit length of 811 µm (TBU plus one link) and
    a 10 µm spacing between the two waveguides at each end of a TBU.
    """

    basic_unit_length: float = 811.0  # TBU (port to port) + one link, µm
    port_pitch: float = 10.0  # spacing of a0/a1 (and b0/b1) at a TBU end, µm
    bend_radius: float = 10.0  # Euler bend radius of the links, µm
    arm_spacing: float = 60.0  # centre-to-centre spacing of the two MZI arms, µm
    fanin_length: float = 20.0  # S-bend from the port pitch to the MMI ports, µm
    arm_bend_length: float = 60.0  # S-bend from the MMI ports to the arms, µm
    heater_length: float = 400.0  # heater on each arm, µm
    heater_width: float = 2.5  # µm
    via_size: float = 11.0  # heater-to-metal via stack, µm
    via_offset: float = 12.0  # via centre outside the arm (away from the other arm), µm
    wire_width: float = 4.0  # M3 signal wires and M2 ground stubs (minimum; widened to meet the budget), µm
    wire_pitch: float = 10.0  # centre-to-centre spacing of parallel wires, µm
    ground_width: float = 4.0  # M2 ground rails and spines (minimum; widened to meet max_ground_drop_v), µm
    max_line_resistance_ohm: float = 50.0  # per heater signal wire; wires widen to meet it, Ohm
    max_ground_drop_v: float = 1.0  # ground rise at a heater under the power cap; 1/12 of 12 V compliance
    pad_size: float = 60.0  # square bond pads, µm
    pad_pitch: float = 80.0  # centre-to-centre pad spacing along the chip edge, µm
    gc_pitch: float = 127.0  # grating couplers of one vertex (fiber-array pitch), µm
    gc_clearance: float = 60.0  # space between the last wire track and the couplers, µm
    margin: float = 50.0  # space between functional blocks and around the chip, µm
    pad_opening_inset: float = 5.0  # passivation opening inside each pad's metal edge, µm
    die_margin: float = 100.0  # outermost shape to the die edge: saw chipping stays off the circuit, µm
    dicing_lane: float = 50.0  # saw lane around the die (half of a 100 µm street shared by two dies), µm
    trench_width: float = 0.0  # thermal isolation trenches beside each heater; 0 draws none, µm
    trench_gap: float = 5.0  # trench edge to the heater's via stacks, µm
    cross_section: str = "strip"  # waveguide cross-section of the active PDK (name)
    wire_cross_section: str = "metal_routing"  # the PDK's metal cross-section of the heater wires (name)
    fiber_io: str = "ring"  # four-sided couplers; "grating-edge"/"edge-coupler": one 127 µm west column
    max_tbus: int = 2000  # refuse bigger meshes (build time grows linearly)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in TEXT_FIELDS:
                if not isinstance(value, str) or not value:
                    raise LayoutError(f"layout parameter {f.name} must be a non-empty name, got {value!r}")
                continue
            if f.name in OPTIONAL_FIELDS and isinstance(value, int | float) and not isinstance(value, bool) \
                    and value == 0:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise LayoutError(f"layout parameter {f.name} must be a positive number, got {value!r}")
        if self.fiber_io not in FIBER_IO:
            raise LayoutError(f"fiber_io must be one of {', '.join(FIBER_IO)}, not {self.fiber_io!r}")
        if self.wire_pitch <= self.wire_width:
            raise LayoutError("wire_pitch must exceed wire_width so parallel wires do not touch")
        if self.pad_pitch <= self.pad_size:
            raise LayoutError("pad_pitch must exceed pad_size so pads do not touch")
        if 2 * self.pad_opening_inset >= self.pad_size:
            raise LayoutError("pad_opening_inset must be less than half of pad_size")
        if self.arm_spacing < 2 * (self.via_offset + self.via_size):
            raise LayoutError("arm_spacing is too small for the heater via stacks; increase it")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the parameters (stored in the regression references)."""
        return asdict(self)
