"""Geometry regression by XOR against reference GDS files, the way gdsfactory tests its cells.

For each cell, ``tests/layouts/ref/<cell>.gds`` is the reference geometry: every layer of
the flattened cell is XOR-ed with it (klayout, exact on the 1 nm grid) and the labels are
compared by text and position; ``<cell>.yaml`` keeps the cell name (gdsfactory's
settings hash), bounding box and ports. To accept a deliberate change, run

    LUMION_UPDATE_LAYOUT_REFS=1 .venv/bin/python -m pytest tests/layouts/test_layout_regression.py

and commit the rewritten files (see docs/layout.md).
"""

import os
from pathlib import Path

import pytest
import yaml

from layouts.cells import link_bend, tbu_mzi
from layouts.difftest import geometry_diff, write_reference
from layouts.mesh_cell import mesh_cell

REF = Path(__file__).parent / "ref"
UPDATE = os.environ.get("LUMION_UPDATE_LAYOUT_REFS") == "1"
MOVE_UM = 0.2  # how far the mutation test moves one via: far below any area/count change

CELLS = {
    "tbu_mzi": tbu_mzi,
    "link_bend": link_bend,
    "mesh_hex_1x2": lambda: mesh_cell("hex:1x2"),
    "mesh_smartlight": lambda: mesh_cell("smartlight"),
}


def fingerprint(cell):
    """Name, bounding box and ports (µm) of a cell: what a GDS file does not hold."""
    box = cell.dbbox()
    return {
        "name": cell.name,
        "bbox_um": [round(box.left, 3), round(box.bottom, 3), round(box.right, 3), round(box.top, 3)],
        "ports": sorted([p.name, round(p.x, 3), round(p.y, 3), round(p.orientation)] for p in cell.ports),
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_matches_reference(name):
    cell = CELLS[name]()
    gds, meta = REF / f"{name}.gds", REF / f"{name}.yaml"
    if UPDATE or not gds.exists():
        write_reference(cell, gds)
        meta.write_text(yaml.safe_dump(fingerprint(cell), sort_keys=True))
        if not UPDATE:
            pytest.fail(f"wrote missing reference {gds}; commit it and re-run")
    diff = geometry_diff(cell, gds)
    assert not diff, f"{name} geometry changed:\n{diff.summary()}"
    want = yaml.safe_load(meta.read_text())
    got = fingerprint(cell)
    assert got["bbox_um"] == want["bbox_um"], "bounding box changed"
    assert got["ports"] == want["ports"], "ports changed"
    assert got["name"] == want["name"], "cell name changed"


def _per_layer_count_and_area(cell):
    """The old regression fingerprint (polygon count and area per layer), for comparison."""
    import klayout.db as kdb

    out = {}
    for index in cell.kcl.layer_indexes():
        region = kdb.Region(cell.begin_shapes_rec(index)).merged()
        if not region.is_empty():
            out[index] = (region.count(), region.area())
    return out


def test_a_moved_shape_fails_the_xor():
    """Move one via of the TBU by 0.2 µm: count and area per layer stay, the XOR does not."""
    import gdsfactory as gf
    import klayout.db as kdb

    reference = tbu_mzi()
    mutant = gf.Component()
    mutant.add_ref(reference)
    mutant.flatten()
    via2 = gf.get_layer("VIA2")
    shape = next(iter(mutant.shapes(via2).each()))
    shape.transform(kdb.DTrans(MOVE_UM, 0.0))
    assert _per_layer_count_and_area(mutant) == _per_layer_count_and_area(reference)
    diff = geometry_diff(mutant, REF / "tbu_mzi.gds")
    assert list(diff.xor_um2) == ["43/0"]
    assert diff.xor_um2["43/0"] == pytest.approx(2 * MOVE_UM * 0.7, rel=0.2)  # two slivers, via 0.7 µm high
    assert "43/0" in diff.summary()


def test_a_moved_label_fails_the_comparison():
    import gdsfactory as gf

    mutant = gf.Component()
    mutant.add_ref(mesh_cell("hex:1x2"))
    mutant.flatten()
    text = gf.get_layer("TEXT")
    shape = next(s for s in mutant.shapes(text).each() if s.is_text())
    shape.text_dpos = shape.text_dpos + gf.kdb.DVector(1.0, 0.0)
    diff = geometry_diff(mutant, REF / "mesh_hex_1x2.gds")
    assert diff.labels_missing
    assert diff.labels_extra
    assert not diff.xor_um2
