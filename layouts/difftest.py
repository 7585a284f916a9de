"""Geometry regression by XOR against a reference GDS (as gdsfactory's ``difftest`` does).

gdsfactory's own :func:`gdsfactory.difftest.difftest` asks on the terminal whether to
overwrite the reference and opens KLayout; this is the same comparison, non-interactive:
for every GDS layer the flattened shapes of the cell and of the reference are XOR-ed
with klayout, and any area left over is a difference (a moved, resized, added or
removed shape). Text labels are compared by string and position. The comparison is
exact on the 1 nm database grid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layouts.errors import LayoutError
from photonics.atomic import atomic_path

LayerKey = tuple[int, int]


@dataclass
class GeometryDiff:
    """What differs between a cell and its reference GDS.

    ``xor_um2`` maps ``"layer/datatype"`` to the XOR area (µm²) of that layer and
    ``xor_bbox_um`` to the bounding box of the difference (left, bottom, right, top, µm);
    ``labels_missing`` / ``labels_extra`` are labels only in the reference / the cell.
    """

    xor_um2: dict[str, float] = field(default_factory=dict)
    xor_bbox_um: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    labels_missing: list[tuple[str, float, float]] = field(default_factory=list)
    labels_extra: list[tuple[str, float, float]] = field(default_factory=list)

    def __bool__(self) -> bool:
        """True when the geometry or the labels differ."""
        return bool(self.xor_um2 or self.labels_missing or self.labels_extra)

    def summary(self) -> str:
        """One line per differing layer or label, for an assertion message."""
        lines = [f"layer {k}: XOR area {a:.6g} µm² in box {self.xor_bbox_um[k]}"
                 for k, a in self.xor_um2.items()]
        lines += [f"label {t!r} at ({x}, {y}) missing" for t, x, y in self.labels_missing]
        lines += [f"label {t!r} at ({x}, {y}) added" for t, x, y in self.labels_extra]
        return "\n".join(lines)


def _shapes(layout: Any, cell: Any) -> tuple[dict[LayerKey, Any], dict[LayerKey, set[tuple[str, int, int]]]]:
    """Polygons (merged semantics) and label set per (layer, datatype) of ``cell`` with its sub-cells."""
    import klayout.db as kdb

    regions, texts = {}, {}
    for index in layout.layer_indexes():
        info = layout.get_info(index)
        key = (info.layer, info.datatype)
        # not merged here: the XOR merges its inputs itself, and merging both first doubled the
        # work (SmartLight against its reference: 1.6-1.8 s -> 0.7-0.9 s of CPU, issue 29)
        region = kdb.Region(cell.begin_shapes_rec(index))
        if not region.is_empty():
            regions[key] = region
        labels = {(t.string, t.x, t.y) for t in kdb.Texts(cell.begin_shapes_rec(index)).each()}
        if labels:
            texts[key] = labels
    return regions, texts


def read_gds(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """``(layout, top cell)`` of a GDS file with one top cell (klayout)."""
    import klayout.db as kdb

    layout = kdb.Layout()
    layout.read(str(path))
    return layout, layout.top_cell()


def geometry_diff(component: Any, reference: str | os.PathLike[str]) -> GeometryDiff:
    """XOR of ``component`` (a gdsfactory Component) against the ``reference`` GDS file."""
    import klayout.db as kdb

    ref_layout, ref_cell = read_gds(reference)
    if abs(ref_layout.dbu - component.kcl.dbu) > 1e-12:
        raise LayoutError(f"reference {reference} has a {ref_layout.dbu} µm grid, the layout "
                          f"{component.kcl.dbu} µm; regenerate the reference")
    dbu = ref_layout.dbu
    ref_regions, ref_texts = _shapes(ref_layout, ref_cell)
    run_regions, run_texts = _shapes(component.kcl.layout, component.kdb_cell)
    diff = GeometryDiff()
    for key in sorted(set(ref_regions) | set(run_regions)):
        xor = ref_regions.get(key, kdb.Region()) ^ run_regions.get(key, kdb.Region())
        if not xor.is_empty():
            name = f"{key[0]}/{key[1]}"
            box = xor.bbox()
            diff.xor_um2[name] = xor.area() * dbu**2
            diff.xor_bbox_um[name] = (box.left * dbu, box.bottom * dbu, box.right * dbu, box.top * dbu)
    ref_labels = set().union(*ref_texts.values()) if ref_texts else set()
    run_labels = set().union(*run_texts.values()) if run_texts else set()
    diff.labels_missing = sorted((t, x * dbu, y * dbu) for t, x, y in ref_labels - run_labels)
    diff.labels_extra = sorted((t, x * dbu, y * dbu) for t, x, y in run_labels - ref_labels)
    return diff


def write_reference(component: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``component`` as the reference GDS ``path`` (atomically; no metadata, so small)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        component.write_gds(tmp, with_metadata=False)
    return path
