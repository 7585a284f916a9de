"""Heater wiring as a circuit: line resistance, shared-ground drop, wires sized to a budget."""

import numpy as np
import pytest

from layouts.electrical import (
    GroundGrid,
    ground_drops_v,
    polyline_squares,
    sheet_resistance_ohm_sq,
    worst_case_heater_current_ma,
)
from layouts.errors import LayoutError
from layouts.mesh_cell import mesh_cell
from layouts.params import LayoutParams

pytestmark = pytest.mark.slow  # layout builds in the fixtures (43 s setup at load ~40)


def test_ground_network_matches_hand_calculation():
    """One via on a rail midway between two spines, pads at the spines' ends.

    Stub 100 µm, rail halves 1000 µm each to spines, spines 500 µm up and 500 µm down to
    pads: each spine is two 500 µm pieces in parallel (to its top and bottom pad).
    """
    rs, w, i_ma = 0.04, 10.0, 20.0
    grid = GroundGrid(vias=((0.0, 100.0, 0),), rail_y=(0.0,), spine_x=(-1000.0, 1000.0),
                      pad_y=(500.0, -500.0))
    r = lambda um: rs * um / w  # noqa: E731
    half = r(1000) + r(500) / 2  # rail half, then the spine's two halves in parallel
    expected = i_ma * 1e-3 * (r(100) + half / 2)  # the two sides in parallel
    assert ground_drops_v(grid, w, rs, i_ma)[0] == pytest.approx(expected, rel=1e-12)


def test_power_cap_current_maximises_the_return_current():
    n, i = 142, worst_case_heater_current_ma(142)
    assert n * 0.25 * (i**2) == pytest.approx(1000.0)  # exactly the 1 W cap (R = 0.25 kOhm)
    # any unequal split of the same power returns less current
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(n)) * 1000.0
    assert np.sqrt(p / 0.25).sum() < n * i


def test_pad_map_resistance_is_the_drawn_metal(smartlight_cell):
    """wire_ohm agrees with the M3 metal klayout sees on the pad's net (area / width^2 squares)."""
    import klayout.db as kdb

    from layouts.checks import _merged
    from layouts.pdk import layer

    e = smartlight_cell.info["electrical"]
    w = e["wire_width_um"]
    m3 = _merged(smartlight_cell, layer("metal_routing"))
    dbu = smartlight_cell.kcl.dbu
    rows = [r for r in smartlight_cell.info["pads"] if r["channel"] is not None]
    pad_area = 60.0 * 60.0
    for row in rows[::17]:
        point = kdb.DPoint(row["x"], row["y"]).to_itype(dbu)
        net = next(p for p in m3.each() if p.bbox().contains(point) and p.inside(point))
        squares = (net.area() * dbu * dbu - pad_area) / w**2
        # corners count 1 square in the model vs ~1 of area: agreement within a few %
        assert row["wire_ohm"] == pytest.approx(squares * e["routing_sheet_ohm_sq"], rel=0.05)
    assert max(r["wire_ohm"] for r in rows) == pytest.approx(e["max_line_resistance_ohm"], abs=1e-3)


def test_default_layout_meets_its_budgets(smartlight_cell):
    e, p = smartlight_cell.info["electrical"], LayoutParams()
    assert e["max_line_resistance_ohm"] <= p.max_line_resistance_ohm
    assert e["max_ground_drop_v"] <= p.max_ground_drop_v
    assert e["ground_width_um"] > p.wire_width  # 4 µm grounds drop ~5.6 V: the sizing widened them
    assert e["routing_sheet_ohm_sq"] == pytest.approx(sheet_resistance_ohm_sq("Aluminum", 2.0), rel=1e-3)


def test_a_tighter_line_budget_widens_the_wires():
    loose = mesh_cell("hex:1x2").info["electrical"]
    tight = mesh_cell("hex:1x2", max_line_resistance_ohm=4.0).info["electrical"]
    assert loose["wire_width_um"] == 4.0
    assert tight["wire_width_um"] > 4.0
    assert tight["max_line_resistance_ohm"] <= 4.0 < loose["max_line_resistance_ohm"]


def test_an_impossible_ground_budget_is_one_clear_error():
    with pytest.raises(LayoutError, match=r"shared ground drops .* raise max_ground_drop_v"):
        mesh_cell("hex:1x2", max_ground_drop_v=0.001)


def test_polyline_squares():
    assert polyline_squares([(0, 0), (10, 0), (10, 5)], 5.0) == 3.0
