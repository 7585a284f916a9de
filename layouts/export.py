"""Write a mesh layout: GDS, pad map (CSV and JSON) and an optional PNG."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from photonics.atomic import atomic_path, atomic_write_text

PAD_FIELDS = ("pad", "channel", "tbu", "arm", "x", "y", "edge")


def pad_map_csv(rows: list[dict[str, Any]]) -> str:
    """The pad map as CSV text: pad, channel, tbu, arm, x (µm), y (µm), edge."""
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
    n_ports, n_pads, size_um ([width, height] in µm), build_s.
    """
    from layouts.mesh_cell import mesh_cell
    from layouts.render import save_png

    start = time.perf_counter()
    c = mesh_cell(mesh, **params)
    build_s = time.perf_counter() - start
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:  # a half-written GDS never replaces a good one
        c.write_gds(tmp)
    rows = list(c.info["pads"])
    pad_map = out.with_suffix(".pads.csv")
    atomic_write_text(pad_map, pad_map_csv(rows))
    atomic_write_text(out.with_suffix(".pads.json"), json.dumps({"schema": "lumion.padmap", "version": 1,
                                                                 "mesh": mesh, "pads": rows}, indent=1))
    if png:
        save_png(c, png)
    box = c.dbbox()
    return {
        "gds": str(out),
        "pad_map": str(pad_map),
        "pad_map_json": str(out.with_suffix(".pads.json")),
        "png": str(png) if png else None,
        "mesh": mesh,
        "cell": c.name,
        "n_tbus": c.info["n_tbus"],
        "n_ports": c.info["n_ports"],
        "n_pads": c.info["n_pads"],
        "n_heater_pads": sum(1 for r in rows if r["channel"] is not None),
        "size_um": [round(box.width(), 3), round(box.height(), 3)],
        "gds_bytes": out.stat().st_size,
        "build_s": round(build_s, 3),
    }
