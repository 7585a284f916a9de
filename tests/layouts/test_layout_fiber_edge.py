"""Every mesh port on one fibre-array column: planar, at 127 µm, clear of metal, and still the model."""

import itertools

import pytest

from layouts.checks import expected_connectivity, netlist_connectivity, overlapping_paths
from layouts.errors import LayoutError
from layouts.lvs import layout_vs_model
from layouts.mesh_cell import mesh_cell
from layouts.params import LayoutParams
from photonics.topology import mesh_from_spec


@pytest.fixture(scope="module")
def edge_cell():
    return mesh_cell("smartlight", fiber_io="grating-edge")


def _wg(inst):
    import klayout.db as kdb

    from layouts.errors import require_gdsfactory

    gf = require_gdsfactory()
    return kdb.Region(inst.cell.begin_shapes_rec(gf.get_layer("WG"))).transformed(inst.trans)


def test_ports_still_reach_their_tbus_and_simulate_as_the_model(edge_cell):
    mesh = mesh_from_spec("smartlight")
    assert netlist_connectivity(edge_cell) == expected_connectivity(mesh)
    assert layout_vs_model(edge_cell, mesh).ok


def test_one_column_at_the_fibre_array_pitch(edge_cell):
    gcs = [i for i in edge_cell.insts if i.name.startswith("gc_port_")]
    assert len(gcs) == 40
    assert len({round(g.ports["o2"].x, 3) for g in gcs}) == 1  # one column
    ys = sorted(g.ports["o2"].y for g in gcs)
    assert {round(b - a, 3) for a, b in itertools.pairwise(ys)} == {LayoutParams().gc_pitch}
    # no coupler under metal (a fibre sees the grating through the oxide, not through metal)
    import klayout.db as kdb

    from layouts.errors import require_gdsfactory

    gf = require_gdsfactory()
    metal = kdb.Region()
    for name in ("M2", "M3", "MTOP"):
        metal += kdb.Region(edge_cell.begin_shapes_rec(gf.get_layer(name)))
    couplers = kdb.Region()
    for g in gcs:
        couplers += _wg(g)
    assert (couplers & metal).is_empty()


def test_no_two_waveguide_paths_cross(edge_cell):
    """No routed path overlaps another or the mesh (touching at a port is not overlap)."""
    assert overlapping_paths(edge_cell) == []


def test_the_crossing_check_sees_a_crossing():
    from layouts.errors import require_gdsfactory

    gf = require_gdsfactory()
    c = gf.Component()
    s = gf.components.straight(length=20)
    c.add_ref(s, name="a").dmove((0, 0))
    c.add_ref(s, name="b").drotate(90).dmove((10, -10))
    assert overlapping_paths(c) == [("a", "b")]


def test_edge_couplers_make_the_west_facet():
    cell = mesh_cell("hex:1x2", fiber_io="edge-coupler")
    assert layout_vs_model(cell, "hex:1x2").ok
    tips = [q.x for q in cell.ports if q.name.startswith("port:")]
    assert len({round(x, 3) for x in tips}) == 1  # every tip on one line: the facet
    ys = sorted(q.y for q in cell.ports if q.name.startswith("port:"))
    assert {round(b - a, 3) for a, b in itertools.pairwise(ys)} == {127.0}
    import klayout.db as kdb

    from layouts.errors import require_gdsfactory
    from layouts.pdk import layer

    gf = require_gdsfactory()
    die = kdb.Region(cell.begin_shapes_rec(gf.get_layer(layer("die")))).bbox().to_dtype(cell.kcl.dbu)
    assert die.left == pytest.approx(tips[0], abs=1e-3)  # the die's west edge is the facet: no margin
    assert all(i.name.startswith("ec_port_") for i in cell.insts if "_port_" in i.name)


def test_unknown_fiber_io_is_refused():
    with pytest.raises(LayoutError, match="fiber_io must be one of ring, grating-edge, edge-coupler"):
        LayoutParams(fiber_io="edge")
