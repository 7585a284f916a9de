"""Write a mesh layout: GDS, pad map (CSV and JSON) and an optional PNG."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from layouts.errors import require_gdsfactory
from photonics.atomic import atomic_path, atomic_write_text

PAD_FIELDS = ("pad", "channel", "tbu", "arm", "x", "y", "edge", "wire_ohm")
_clock = time.perf_counter  # the timer of import_s and build_s (a module attribute, so tests can fake it)


def pad_map_csv(rows: list[dict[str, Any]]) -> str:
    """The pad map as CSV text: pad, channel, tbu, arm, x (µm), y (µm), edge, wire_ohm (Ohm)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=PAD_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row[k] is None else row[k]) for k in PAD_FIELDS})
    return buf.getvalue()


def write_layout(mesh: str, out: str | os.PathLike[str], png: str | os.PathLike[str] | None = None,
                 **params: Any) -> dict[str, Any]:
    """Build the layout of ``mesh`` and write ``out`` (GDS) plus ``<out>.pads.csv``.

    Returns the summary printed by ``lumion layout --json``: gds, pad_map, png, n_tbus,
    n_ports, n_pads (heater and ground), n_heater_pads, size_um ([width, height] in µm), the
    electrical figures (:mod:`layouts.sizing`: wire_width_um, ground_width_um,
    max_line_resistance_ohm, max_ground_drop_v, ground_current_ma, sheet resistances),
    import_s (importing gdsfactory and activating a PDK, s; ~0 when already imported) and
    build_s (drawing the cell only, s: the import is not in it).
    """
    from layouts.mesh_cell import mesh_cell
    from layouts.render import save_png, tbu_box

    start = _clock()
    require_gdsfactory()
    import_s = _clock() - start
    start = _clock()
    c = mesh_cell(mesh, **params)
    build_s = _clock() - start
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:  # a half-written GDS never replaces a good one
        c.write_gds(tmp)
    rows = list(c.info["pads"])
    pad_map = out.with_suffix(".pads.csv")
    atomic_write_text(pad_map, pad_map_csv(rows))
    atomic_write_text(out.with_suffix(".pads.json"), json.dumps({"schema": "lumion.padmap", "version": 1,
                                                                 "mesh": mesh, "pads": rows}, indent=1))
    box = c.dbbox()
    png_tbu = None
    n_heater_pads = sum(1 for r in rows if r["channel"] is not None)
    if png:
        title = (f"{mesh}: {c.info['n_tbus']} TBUs, {c.info['n_ports']} ports, {n_heater_pads} heater pads, "
                 f"{box.width() / 1000:.2f} x {box.height() / 1000:.2f} mm")
        save_png(c, png, title=title)
        png_tbu = Path(png).with_name(Path(png).stem + "-tbu.png")
        save_png(c, png_tbu, box=tbu_box(c), title=f"{mesh}: TBU tbu:0.0.0 with its links, vias and wires")
    return {
        "gds": str(out),
        "pad_map": str(pad_map),
        "pad_map_json": str(out.with_suffix(".pads.json")),
        "png": str(png) if png else None,
        "plot_tbu": str(png_tbu) if png else None,
        "mesh": mesh,
        "cell": c.name,
        "n_tbus": c.info["n_tbus"],
        "n_ports": c.info["n_ports"],
        "n_pads": c.info["n_pads"],
        "n_heater_pads": n_heater_pads,
        "size_um": [round(box.width(), 3), round(box.height(), 3)],
        "gds_bytes": out.stat().st_size,
        **c.info["electrical"],
        "import_s": round(import_s, 3),
        "build_s": round(build_s, 3),
    }
