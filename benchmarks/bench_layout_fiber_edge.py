"""Sweep of the fibre-array edge modes: which meshes route, which are refused, and the CPU cost.

Usage: python benchmarks/bench_layout_fiber_edge.py [--quick] [--wide] [MESH ...]
(needs the `layout` extra: gdsfactory). By default every hexagonal mesh hex:1x1 to
hex:5x5, smartlight and hex:9x9, in both edge modes (``grating-edge``, ``edge-coupler``);
``--wide`` takes instead every hex:RxC up to hex:9x9 with more than 5 rows or columns
(the tall meshes whose heater pads need the rows shared between the two sides,
:func:`layouts.wiring.fan_out`). hex:9x9 is refused with the default 60/80 µm pads and
is drawn again with 40 µm pads at a 50 µm pitch. Each layout is built with gdsfactory's
"Routing failed" warning raised as an error and checked with
:func:`layouts.edge_check.check_edge_io` (no error markers, one column at 127 µm west of
everything, no overlapping waveguide paths, optical LVS), the electrical LVS
(:func:`layouts.electrical_lvs.heater_lvs`: every heater on its channel's pad, one
return net) and the merged-metal check (:func:`layouts.checks.wiring_report`: every
signal pad reaches exactly one heater via, no short). ``--quick`` skips the checks
(build only). Times are the process's CPU time (``time.process_time``): the machine
may be shared; the load average is printed.

The CI runs a few of these meshes (tests/layouts/test_layout_fiber_edge.py); this is the
long sweep (about 8 minutes of CPU with the checks; ``--wide`` much longer).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

MODES = ("grating-edge", "edge-coupler")
DEFAULT_MESHES = [f"hex:{r}x{c}" for r in range(1, 6) for c in range(1, 6)] + ["smartlight", "hex:9x9"]
WIDE_MESHES = [f"hex:{r}x{c}" for r in range(1, 10) for c in range(1, 10) if max(r, c) > 5]
#: hex:9x9 again with smaller bond pads, which fit the three pad sides the edge modes leave
SMALL_PADS = {"pad_size": 40.0, "pad_pitch": 50.0}


def run(mesh: str, mode: str, check: bool, **params: float) -> dict[str, object]:
    """Build one layout (and check it); the row of the table."""
    from layouts.edge_check import check_edge_io
    from layouts.errors import LayoutError
    from layouts.mesh_cell import mesh_cell

    row: dict[str, object] = {"mesh": mesh, "mode": mode, "params": params}
    t0 = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Routing failed", category=UserWarning)
            cell = mesh_cell(mesh, fiber_io=mode, **params)
    except (LayoutError, UserWarning) as exc:
        # a refusal before drawing (e.g. the pad ring) is a documented limit; a route
        # gdsfactory could not draw is a failure of the edge modes
        failed = isinstance(exc, UserWarning) or "router could not route" in str(exc)
        row.update(status="FAIL" if failed else "refused", build_cpu_s=time.process_time() - t0,
                   reason=str(exc))
        return row
    row["build_cpu_s"] = time.process_time() - t0
    row["ports"] = sum(q.name.startswith("port:") for q in cell.ports)
    if check:
        t1 = time.process_time()
        problems = check_edge_io(cell, mesh) + electrical_problems(cell, mesh)
        row["check_cpu_s"] = time.process_time() - t1
        row["status"] = "ok" if not problems else "FAIL: " + "; ".join(problems)
    else:
        row["status"] = "built"
    return row


def electrical_problems(cell: object, mesh: str) -> list[str]:
    """What the electrical LVS and the merged-metal check find wrong with a drawn chip."""
    from layouts.checks import wiring_report
    from layouts.electrical_lvs import heater_lvs

    problems = []
    lvs = heater_lvs(cell, mesh)
    if not lvs.ok:
        problems.append(f"electrical LVS: {(lvs.wrong_pad + lvs.shared_pads + lvs.ground_faults)[:3]}")
    report = wiring_report(cell)
    shorted = sorted(ch for ch, vias in report["pad_to_vias"].items() if len(vias) != 1)
    if shorted:
        problems.append(f"signal pads reaching no via or several: channels {shorted[:5]}")
    if not report["ground_ok"]:
        problems.append("the ground vias are not one M2 net clear of the signal vias")
    return problems


def main(argv: list[str]) -> int:
    from layouts.errors import require_gdsfactory

    check = "--quick" not in argv
    named = [a for a in argv if not a.startswith("--")]
    meshes = named or (WIDE_MESHES if "--wide" in argv else DEFAULT_MESHES)
    require_gdsfactory()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{'mesh':<24}{'mode':<14}{'ports':>6}{'build CPU s':>12}{'check CPU s':>12}  status")
    failed = 0
    total = time.process_time()
    for mesh in meshes:
        for mode in MODES:
            rows = [run(mesh, mode, check)]
            if mesh == "hex:9x9" and rows[0]["status"] == "refused":
                rows.append(run(mesh, mode, check, **SMALL_PADS))
            for r in rows:
                label = r["mesh"] + (" (40/50 µm pads)" if r["params"] else "")
                status = f"{r['status']}: {r['reason']}" if "reason" in r else r["status"]
                check_s = f"{r['check_cpu_s']:.1f}" if "check_cpu_s" in r else "-"
                print(f"{label:<24}{r['mode']:<14}{r.get('ports', ''):>6}{r['build_cpu_s']:>12.1f}"
                      f"{check_s:>12}  {status}", flush=True)
                failed += str(r["status"]).startswith("FAIL")
    print(f"total CPU {time.process_time() - total:.0f} s; load average at end: {os.getloadavg()[0]:.2f}; "
          f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
