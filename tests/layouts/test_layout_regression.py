"""Geometry and settings regression of small cells, the way gdsfactory tests its own.

A reference YAML per cell (tests/layouts/ref/) stores the settings, bounding box, every
port and, per GDS layer, the polygon count and area of the flattened cell. A change to
any of them fails the test. To accept a deliberate change, re-run with
``LUMION_UPDATE_LAYOUT_REFS=1`` and commit the rewritten YAML (see docs/layout.md).
"""

import os
from pathlib import Path

import pytest
import yaml

from layouts.cells import link_bend, tbu_mzi
from layouts.mesh_cell import mesh_cell

REF = Path(__file__).parent / "ref"
UPDATE = os.environ.get("LUMION_UPDATE_LAYOUT_REFS") == "1"

CELLS = {
    "tbu_mzi": tbu_mzi,
    "link_bend": link_bend,
    "mesh_hex_1x2": lambda: mesh_cell("hex:1x2"),
}


def fingerprint(cell):
    import klayout.db as kdb

    box = cell.dbbox()
    layers = {}
    for index in cell.kcl.layer_indexes():
        region = kdb.Region(cell.begin_shapes_rec(index)).merged()
        if region.is_empty():
            continue
        info = cell.kcl.get_info(index)
        layers[f"{info.layer}/{info.datatype}"] = {
            "polygons": region.count(),
            "area_um2": round(region.area() * cell.kcl.dbu**2, 3),
        }
    settings = cell.settings.model_dump() if hasattr(cell.settings, "model_dump") else dict(cell.settings)
    return {
        "name": cell.name,
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()},
        "bbox_um": [round(box.left, 3), round(box.bottom, 3), round(box.right, 3), round(box.top, 3)],
        "ports": sorted([p.name, round(p.x, 3), round(p.y, 3), round(p.orientation)] for p in cell.ports),
        "layers": layers,
    }


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_matches_reference(name):
    got = fingerprint(CELLS[name]())
    path = REF / f"{name}.yaml"
    if UPDATE or not path.exists():
        REF.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(got, sort_keys=True))
        if not UPDATE:
            pytest.fail(f"wrote missing reference {path}; commit it and re-run")
    want = yaml.safe_load(path.read_text())
    assert got["settings"] == want["settings"], "settings changed"
    assert got["bbox_um"] == want["bbox_um"], "bounding box changed"
    assert got["ports"] == want["ports"], "ports changed"
    assert got["layers"] == want["layers"], "geometry changed (per-layer polygons/area)"
    assert got["name"] == want["name"], "cell name changed"
