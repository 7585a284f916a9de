"""Is a drawn fibre-array edge right? One column of couplers at the pitch, clean routes, LVS passing.

The check of what :mod:`layouts.fiber_edge` draws (``fiber_io`` ``grating-edge`` or
``edge-coupler``); it sits with the other verifiers, above the drawing modules, and
imports them, never the other way. Lengths in µm.
"""

from __future__ import annotations

import itertools
from typing import Any

from layouts.checks import overlapping_paths
from layouts.errors import require_gdsfactory
from layouts.lvs import layout_vs_model
from layouts.params import LayoutParams
from photonics.topology import mesh_from_spec


def check_edge_io(component: Any, mesh: Any, gc_pitch: float = LayoutParams.gc_pitch) -> list[str]:
    """What is wrong with a drawn fibre-array edge (``fiber_io`` ``grating-edge`` or ``edge-coupler``).

    An empty list means: no gdsfactory error markers in the cell, every mesh port of
    ``mesh`` (a :class:`~photonics.topology.Mesh` or its spec) on one coupler column at
    exactly ``gc_pitch`` (µm) west of everything else, no two waveguide paths overlapping
    (:func:`layouts.checks.overlapping_paths`), and the optical LVS
    (:func:`layouts.lvs.layout_vs_model`) passing. For a layout engineer before tape-out,
    and the tests.
    """
    gf = require_gdsfactory()
    model = mesh_from_spec(mesh) if isinstance(mesh, str) else mesh
    problems = []
    error_layer = gf.get_layer(gf.CONF.layer_error_path)
    if not component.dbbox(error_layer).empty():
        problems.append(f"gdsfactory drew error markers on layer {tuple(gf.CONF.layer_error_path)}")
    ports = [q for q in component.ports if q.name.startswith("port:")]
    if len(ports) != model.n_ports:
        problems.append(f"{len(ports)} mesh ports drawn, the model has {model.n_ports}")
    xs = {round(q.x, 3) for q in ports}
    if len(xs) != 1:
        problems.append(f"the mesh ports are on {len(xs)} columns, not one")
    gaps = {round(b - a, 3) for a, b in itertools.pairwise(sorted(q.y for q in ports))}
    if gaps and gaps != {round(gc_pitch, 3)}:
        problems.append(f"coupler spacings {sorted(gaps)} µm, not {gc_pitch}")
    couplers = ("gc_port_", "ec_port_")
    rest = [i.dbbox().left for i in component.insts if not i.name.startswith(couplers)]
    if xs and rest and max(xs) > min(rest):
        problems.append("the coupler column is not west of the rest of the chip")
    overlaps = overlapping_paths(component)
    if overlaps:
        problems.append(f"waveguide paths overlap: {overlaps[:3]}")
    if not layout_vs_model(component, model).ok:
        problems.append("the optical LVS fails (layouts.lvs.layout_vs_model)")
    return problems
