"""What the layout needs from a PDK: layer roles, cell functions and the 1 nm grid.

The cells never hard-code a GDS layer. Each shape is drawn on a *role* (waveguide,
heater, ...) and the role is looked up by layer **name** in the layer map of the PDK
that is active when the cell is built (``gdsfactory.get_active_pdk().layers``). The
default names are those of gdsfactory's generic PDK; a foundry PDK that names its
layers differently is served by passing ``layer_map={"heater": "HT", ...}`` to
:func:`layouts.mesh_cell.mesh_cell` (only the roles that differ).

Sub-cells (MMI, bends, via stacks, pads, grating coupler) are taken from the active
PDK's cell library by name (``gf.get_component("mmi2x2", ...)``), and every waveguide
cell gets the ``cross_section`` parameter of the layout (default ``"strip"``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from layouts.errors import LayoutError, require_gdsfactory

#: role -> layer name in the active PDK's layer map (generic PDK names and layers)
LAYER_ROLES: dict[str, str] = {
    "waveguide": "WG",  # strip waveguide core (1/0); set by the cross-section, listed for checks
    "heater": "HEATER",  # resistive heater strips and their bridges to the vias (47/0)
    "metal_routing": "M3",  # heater signal wires, one planar layer (49/0)
    "metal_ground": "M2",  # the shared heater return grid, may cross M3 (45/0)
    "pad": "MTOP",  # bond pad metal, the top metal (49/0 in the generic PDK, = M3)
    "pad_opening": "PADOPEN",  # passivation opening over each bond pad (46/0)
    "text": "TEXT",  # port and pad labels (66/0)
    "die": "FLOORPLAN",  # the die outline (64/0)
    "dicing": "DICING",  # the saw lane around the die (100/0)
    "trench": "DEEPTRENCH",  # thermal isolation trenches beside the heaters (4/0)
}

#: role -> what the layout draws on it, in words (the layer legend of a layout picture)
ROLE_WORDS: dict[str, str] = {
    "waveguide": "waveguides",
    "heater": "heaters",
    "metal_routing": "heater signal wires",
    "metal_ground": "heater ground grid",
    "pad": "bond pads",
    "pad_opening": "pad openings",
    "text": "labels",
    "die": "die outline",
    "dicing": "saw lane",
    "trench": "isolation trenches",
}

#: database grid of gdsfactory's PDKs (1 nm). Lengths computed from other lengths
#: (S-bend spans, straight runs) are snapped to it before they become cell
#: parameters: 103.63699999 and 103.637 are one geometry and must be one cell.
GRID_DECIMALS = 3
GRID_UM = 10.0**-GRID_DECIMALS

P = ParamSpec("P")
R = TypeVar("R")


def snap(value: float) -> float:
    """``value`` (µm) rounded to the 1 nm grid, with -0.0 normalised to 0.0."""
    return round(value, GRID_DECIMALS) + 0.0


def grid_steps(value: float) -> int:
    """``value`` (µm) as a whole number of 1 nm grid steps (for exact integer halving)."""
    return round(value / GRID_UM)


def layer(role: str, layer_map: Mapping[str, str] | None = None) -> Any:
    """The active PDK's layer for ``role`` (a key of :data:`LAYER_ROLES`).

    Args:
        role: waveguide, heater, metal_routing, metal_ground, pad, pad_opening or text.
        layer_map: overrides of :data:`LAYER_ROLES` (role -> layer name in the PDK).

    Raises:
        LayoutError: unknown role, or the active PDK has no layer of that name.
    """
    gf = require_gdsfactory()
    names = {**LAYER_ROLES, **(layer_map or {})}
    if role not in names:
        raise LayoutError(f"unknown layer role {role!r}; use one of {sorted(LAYER_ROLES)}")
    pdk = gf.get_active_pdk()
    members = getattr(pdk.layers, "__members__", {})
    if names[role] not in members:
        raise LayoutError(
            f"the active PDK {pdk.name!r} has no layer {names[role]!r} for the {role} role; "
            f"pass layer_map={{{role!r}: '<its layer name>'}}")
    return members[names[role]]


def lazy_cell(func: Callable[P, R]) -> Callable[P, R]:
    """Make ``func`` a gdsfactory cell (``gf.cell``) on its first call.

    gdsfactory is imported lazily, so the decorator cannot be applied at import time.
    The wrapped function keeps its own name and keyword parameters, so the cell name
    and cache key follow exactly the parameters the cell uses.
    """
    cell: list[Callable[..., R]] = []

    @functools.wraps(func)
    def make(*args: P.args, **kwargs: P.kwargs) -> R:
        gf = require_gdsfactory()
        if not cell:
            cell.append(gf.cell(func))
        return cell[0](*args, **kwargs)

    return make
