"""The dashboard: one page (plain HTML/JS/SVG in ``controlplane/static/``, no build step, no CDN).

:func:`mount` adds to the service's FastAPI app:

* ``GET /``: the page. It loads without a token; its data calls go to the service's
  authenticated ``/api/v1/status`` and ``/api/v1/events`` with the bearer token taken from
  the URL fragment (``#token=...``, never sent to the server in the page's own request)
  or asked for once and kept in the tab's ``sessionStorage``;
* ``GET /dashboard/static/...``: the page's script and style sheet;
* ``GET /dashboard/geometry.json``: the chip's drawing, computed from
  :mod:`photonics.topology` (TBU ends, each TBU port's position, mesh ports and the
  outward direction to put their labels), in TBU lengths.

The page draws the mesh, each placed link's route in its own colour, the accelerators
and spares on their ports (failed ones crossed out), the links' margins, and the event
timeline with each recovery's stages on a time axis (docs/controlplane.md, "Dashboard").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from photonics.configuration import mesh_label
from photonics.topology import PORT_LABELS, Mesh, mesh_from_spec

STATIC = Path(__file__).with_name("static")
PORT_INSET = 0.2  # a TBU port sits this far (TBU lengths) inside its TBU end, as Mesh.port_xy puts it
ARM_OFFSET = 0.08  # and this far to its arm's side


def tbu_port_xy(mesh: Mesh) -> np.ndarray:
    """(n_tbus, 4, 2) position of every TBU port (a0, a1, b0, b1), in TBU lengths.

    The same rule as :meth:`photonics.topology.Mesh.port_xy`: a little inside the TBU
    end, on its arm's side (top arm on the left walking from a to b).
    """
    a, b = mesh.tbu_xy[:, 0], mesh.tbu_xy[:, 1]
    d = (b - a) / np.linalg.norm(b - a, axis=1, keepdims=True)
    left = np.stack([-d[:, 1], d[:, 0]], axis=1)
    out = np.empty((mesh.n_tbus, 4, 2))
    for local in range(4):
        end, other = (a, b) if local < 2 else (b, a)
        side = left if local in (0, 2) else -left
        out[:, local] = end + PORT_INSET * (other - end) + ARM_OFFSET * side
    return out


def geometry(mesh: Mesh) -> dict[str, Any]:
    """The chip's drawing as JSON (``lumion.dashboard-geometry`` v1, coordinates in TBU lengths).

    ``tbus``: name, ends ``a``/``b``, port positions by label; ``ports``: name, position,
    the TBU port it is, and ``out``, the unit vector from the mesh centre (where its label
    goes); ``links``: the internal waveguide links as pairs of positions; ``bounds``:
    [xmin, ymin, xmax, ymax].
    """
    ports_xy = tbu_port_xy(mesh)
    flat = ports_xy.reshape(-1, 2)
    centre = mesh.tbu_xy.reshape(-1, 2).mean(axis=0)
    port_pos = flat[mesh.port_tbu_ports]
    out = port_pos - centre
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    lo, hi = mesh.tbu_xy.reshape(-1, 2).min(axis=0), mesh.tbu_xy.reshape(-1, 2).max(axis=0)

    def r(v: np.ndarray) -> list[float]:
        return [round(float(x), 4) for x in v]

    return {
        "schema": "lumion.dashboard-geometry", "version": 1, "mesh": mesh_label(mesh),
        "n_tbus": mesh.n_tbus, "n_ports": mesh.n_ports,
        "tbus": [{"name": name, "a": r(mesh.tbu_xy[t, 0]), "b": r(mesh.tbu_xy[t, 1]),
                  "ports": {lab: r(ports_xy[t, k]) for k, lab in enumerate(PORT_LABELS)}}
                 for t, name in enumerate(mesh.tbu_names)],
        "ports": [{"name": name, "xy": r(port_pos[n]), "out": r(out[n]),
                   "tbu_port": mesh.tbu_port_name(int(mesh.port_tbu_ports[n]))}
                  for n, name in enumerate(mesh.port_names)],
        "links": [[r(flat[i]), r(flat[j])] for i, j in mesh.links],
        "bounds": r(np.concatenate([lo, hi])),
    }


def _mesh_of(cp: Any) -> Mesh:
    """The mesh of the service's chip: its bench's, else the status' mesh spec."""
    mesh = getattr(getattr(cp, "bench", None), "mesh", None)
    if isinstance(mesh, Mesh):
        return mesh
    status = cp.status()
    spec = status.get("mesh") or next((c.get("mesh") for c in status.get("chips", []) if c.get("mesh")),
                                      "smartlight")
    return mesh_from_spec(spec)


def mount(app: Any, cp: Any) -> None:
    """Add the page (``GET /``), its assets and the geometry route to a FastAPI ``app``."""
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    drawing = geometry(_mesh_of(cp))

    @app.get("/", include_in_schema=False)
    def dashboard_page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Cache-Control": "no-cache"})

    @app.get("/dashboard/geometry.json", include_in_schema=False)
    def dashboard_geometry() -> JSONResponse:
        return JSONResponse(drawing)

    app.mount("/dashboard/static", StaticFiles(directory=STATIC), name="dashboard-static")
