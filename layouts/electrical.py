"""Electrical figures of the heater wiring: line resistance, shared-ground drop, wire sizing.

Pure geometry and circuit arithmetic (numpy/scipy, no gdsfactory). The drawn wires are
Manhattan polylines (:mod:`layouts.wiring`), so a wire's resistance is its sheet
resistance times its length in squares (centre-line length / width; a corner square
counts as one, which over-estimates by ~0.44 square per corner: a few squares out of
thousands). The shared ground (M2: one stub per heater, a rail per band, two spines,
four pads) is solved as a resistor network by nodal analysis (scipy sparse LU): every
heater injects its current at its ground via, the ground pads are at 0 V, and the drop
at a heater is its via's potential.

Why it matters: the heater driver (Qontrol Q8iv-class) forces a current, so wire and
ground resistance do not change a heater's power, but they eat the channel's voltage
compliance: ``I (R_heater + R_line) + V_ground <= V_compliance`` at full scale, and the
ground drop couples channels (one heater's current moves every other heater's return
potential).

Sheet resistances come from the active PDK's layer stack (thickness and material of the
routing and ground layers); :data:`RESISTIVITY_OHM_M` holds the materials' resistivity.

Example:
    >>> round(polyline_squares([(0, 0), (400, 0), (400, 300)], 4.0), 1)
    175.0
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layouts.errors import LayoutError

#: bulk resistivity at 20 °C (Ohm m); CRC Handbook of Chemistry and Physics, 97th ed.,
#: "Electrical resistivity of pure metals" (Al 2.65e-8, Cu 1.68e-8); TiN films ~1e-6
#: (reactively sputtered, Thin Solid Films 2002). Deposited Al films run ~10 % higher:
#: :data:`FILM_FACTOR`.
RESISTIVITY_OHM_M: dict[str, float] = {"aluminum": 2.65e-8, "copper": 1.68e-8, "tin": 1.0e-6,
                                       "tungsten": 5.6e-8}
FILM_FACTOR = 1.1  # thin-film resistivity above bulk (grain boundaries, surface scattering)
HEATER_R0_OHM = 250.0  # nominal heater resistance (calibration.heater_map: r0 = 0.25 kOhm)
MAX_TOTAL_POWER_MW = 1000.0  # the controller's total heater power limit (instruments.config default)


def sheet_resistance_ohm_sq(material: str, thickness_um: float) -> float:
    """Sheet resistance (Ohm/square) of a metal film: ``rho * FILM_FACTOR / t``.

    Example:
        >>> round(sheet_resistance_ohm_sq("Aluminum", 2.0), 4)
        0.0146
    """
    key = material.lower()
    if key not in RESISTIVITY_OHM_M:
        raise LayoutError(f"no resistivity known for material {material!r}; "
                          f"known: {', '.join(sorted(RESISTIVITY_OHM_M))}")
    if thickness_um <= 0:
        raise LayoutError(f"metal thickness must be positive, got {thickness_um} µm")
    return RESISTIVITY_OHM_M[key] * FILM_FACTOR / (thickness_um * 1e-6)


def polyline_squares(points: Sequence[tuple[float, float]], width_um: float) -> float:
    """Length of a Manhattan polyline in squares of ``width_um`` (centre-line length / width)."""
    pts = np.asarray(points, dtype=float)
    return float(np.abs(np.diff(pts, axis=0)).sum() / width_um)


def worst_case_heater_current_ma(n_heaters: int, total_power_mw: float = MAX_TOTAL_POWER_MW,
                                 r0_ohm: float = HEATER_R0_OHM) -> float:
    """Per-heater current (mA) that maximises the total return current under a power limit.

    For a fixed total power ``P`` over ``N`` equal heaters the summed current ``sum I`` is
    largest when the power is shared equally (Cauchy-Schwarz), ``I = sqrt(P / (N R))``.

    Example:
        >>> round(worst_case_heater_current_ma(142), 2)
        5.31
    """
    return float(np.sqrt(total_power_mw * 1e-3 / (n_heaters * r0_ohm)) * 1e3)


@dataclass(frozen=True)
class GroundGrid:
    """The shared return as drawn (µm): heater ground vias, rails, spines, pads.

    Attributes:
        vias: ``(x, y, rail)`` per heater ground via; ``rail`` indexes ``rail_y``.
        rail_y: y of every horizontal rail (top outer, inner bands, bottom outer).
        spine_x: x of the two vertical spines (left, right).
        pad_y: y of the ground pads on each spine (top, bottom).
    """

    vias: tuple[tuple[float, float, int], ...]
    rail_y: tuple[float, ...]
    spine_x: tuple[float, float]
    pad_y: tuple[float, float]


def ground_drops_v(grid: GroundGrid, width_um: float, sheet_ohm: float, current_ma: float) -> np.ndarray:
    """Voltage (V) of every heater's ground via when each heater returns ``current_ma``.

    Nodes: each via, its stub's foot on the rail, every rail end on a spine, and the pads.
    Every piece of metal between two neighbouring nodes is a resistor of
    ``sheet_ohm * length / width_um``; pads are held at 0 V.
    """
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    nodes: dict[tuple[float, float], int] = {}
    edges: list[tuple[int, int, float]] = []

    def node(x: float, y: float) -> int:
        return nodes.setdefault((round(x, 3), round(y, 3)), len(nodes))

    def wire(points: list[tuple[float, float]]) -> None:
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            length = abs(x1 - x0) + abs(y1 - y0)
            if length > 0:
                edges.append((node(x0, y0), node(x1, y1), sheet_ohm * length / width_um))

    xl, xr = grid.spine_x
    for x, y, r in grid.vias:
        wire([(x, y), (x, grid.rail_y[r])])
    for r, y in enumerate(grid.rail_y):
        xs = sorted({xl, xr, *(x for x, _, k in grid.vias if k == r)})
        wire([(x, y) for x in xs])
    for x in (xl, xr):
        ys = sorted({*grid.rail_y, *grid.pad_y}, reverse=True)
        wire([(x, y) for y in ys])
    n = len(nodes)
    g = sp.lil_matrix((n, n))
    for a, b, ohm in edges:
        g[a, a] += 1 / ohm
        g[b, b] += 1 / ohm
        g[a, b] -= 1 / ohm
        g[b, a] -= 1 / ohm
    pads = sorted({node(x, y) for x in (xl, xr) for y in grid.pad_y})
    free = np.setdiff1d(np.arange(n), pads)
    inject = np.zeros(n)
    via_nodes = [node(x, y) for x, y, _ in grid.vias]
    np.add.at(inject, via_nodes, current_ma * 1e-3)
    g = g.tocsr()
    v = np.zeros(n)
    v[free] = spla.spsolve(g[free][:, free].tocsc(), inject[free])
    return v[via_nodes]


@dataclass(frozen=True)
class Electrical:
    """Electrical summary of a drawn chip (see :func:`summarise`)."""

    line_ohm: dict[int, float]  # signal wire resistance per heater channel, Ohm
    ground_drop_v: dict[int, float]  # ground potential at each heater's return, V
    ground_current_ma: float  # per-heater current the ground drop assumes, mA
    routing_sheet_ohm: float
    ground_sheet_ohm: float

    @property
    def max_line_ohm(self) -> float:
        """Largest signal-line resistance, Ohm."""
        return max(self.line_ohm.values(), default=0.0)

    @property
    def max_ground_drop_v(self) -> float:
        """Largest ground drop, V."""
        return max(self.ground_drop_v.values(), default=0.0)


def line_resistances(wires: Sequence[tuple[int, Sequence[tuple[float, float]]]], width_um: float,
                     sheet_ohm: float) -> dict[int, float]:
    """``{channel: Ohm}`` of signal wires given as ``(channel, polyline)`` pairs."""
    return {ch: sheet_ohm * polyline_squares(pts, width_um) for ch, pts in wires}


def required_width_um(max_squares_um: float, sheet_ohm: float, budget_ohm: float) -> float:
    """Narrowest width (µm) that keeps a wire of ``max_squares_um`` µm length within ``budget_ohm``.

    Example:
        >>> round(required_width_um(15500.0, 0.0146, 50.0), 2)
        4.53
    """
    return sheet_ohm * max_squares_um / budget_ohm
