"""Die outline, saw lane and optional thermal isolation trenches (the zoomed TBU picture:
test_cmd_layout.py::test_layout_json)."""

import pytest

from layouts.errors import LayoutError
from layouts.mesh_cell import mesh_cell
from layouts.params import LayoutParams
from photonics.topology import mesh_from_spec

pytestmark = pytest.mark.slow  # layout builds (29 s setup at load ~40)


def _region(cell, role):
    import klayout.db as kdb

    from layouts.errors import require_gdsfactory
    from layouts.pdk import layer

    gf = require_gdsfactory()
    return kdb.Region(cell.begin_shapes_rec(gf.get_layer(layer(role)))).merged()


def test_die_outline_keeps_its_margin_around_everything(smartlight_cell):
    import klayout.db as kdb

    p = LayoutParams()
    die = _region(smartlight_cell, "die")
    assert die.count() == 1
    dbu = smartlight_cell.kcl.dbu
    box = die.bbox().to_dtype(dbu)
    assert [round(box.width(), 3), round(box.height(), 3)] == smartlight_cell.info["die_um"]
    # every functional shape (waveguides, metal, pads) lies die_margin inside the die edge
    inner = kdb.Region(box.enlarged(-p.die_margin, -p.die_margin).to_itype(dbu))
    for role in ("waveguide", "metal_routing", "metal_ground", "pad", "heater"):
        assert (_region(smartlight_cell, role) - inner).is_empty(), role
    lane = _region(smartlight_cell, "dicing")
    assert lane.bbox().to_dtype(dbu).width() == pytest.approx(box.width() + 2 * p.dicing_lane)
    assert (lane & die).is_empty()


def test_trenches_only_when_asked_and_clear_of_the_via_stacks():
    plain = mesh_cell("hex:1x2")
    assert _region(plain, "trench").is_empty()
    cell = mesh_cell("hex:1x2", trench_width=10.0)
    trench = _region(cell, "trench")
    assert trench.count() == 2 * mesh_from_spec("hex:1x2").n_tbus  # two per TBU, one outside each arm
    tbu = next(i.cell for i in cell.insts if i.name.startswith("tbu_"))
    for role in ("metal_routing", "metal_ground", "heater"):
        assert (_region(tbu, role) & _region(tbu, "trench")).is_empty(), role
    assert cell.info["trench_crossings"] > 0  # band tracks cross vertical TBUs: reported, not hidden


def test_trench_parameters_are_checked():
    with pytest.raises(LayoutError, match="trench_width must be a positive number"):
        LayoutParams(trench_width=-1.0)
    assert LayoutParams(trench_width=0).trench_width == 0

