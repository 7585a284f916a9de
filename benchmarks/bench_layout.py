"""Build time and GDS size of the mesh layout (smartlight and a 9 x 9 hexagonal mesh).

Usage: python benchmarks/bench_layout.py   (needs the `layout` extra: gdsfactory)
Each mesh is built in a fresh process so the timings do not share gdsfactory's cell cache.
The build is reported as wall clock and as the process's CPU time (the machine may be
shared: CPU time is what the build itself costs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

MESHES = ["smartlight", "hex:9x9"]

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import layouts.export
from layouts.errors import require_gdsfactory
require_gdsfactory()
t_import = time.perf_counter() - t0
from layouts.mesh_cell import mesh_cell
c0, w0 = time.process_time(), time.perf_counter()
mesh_cell(sys.argv[1])  # the build; write_layout below finds it in gdsfactory's cache
build_cpu, build_wall = time.process_time() - c0, time.perf_counter() - w0
summary = layouts.export.write_layout(sys.argv[1], sys.argv[2])
summary["import_s"] = round(t_import, 3)
summary["build_s"] = round(build_wall, 3)
summary["build_cpu_s"] = round(build_cpu, 3)
print(json.dumps(summary))
"""


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in MESHES:
            out = f"{tmp}/{spec.replace(':', '_')}.gds"
            proc = subprocess.run([sys.executable, "-c", CHILD, spec, out], capture_output=True, text=True,
                                  check=True)
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"{'mesh':<12}{'TBUs':>6}{'ports':>7}{'pads':>6}{'build s':>9}{'CPU s':>7}{'GDS kB':>9}"
          f"{'size mm':>16}")
    for r in rows:
        w, h = r["size_um"]
        print(f"{r['mesh']:<12}{r['n_tbus']:>6}{r['n_ports']:>7}{r['n_pads']:>6}{r['build_s']:>9.2f}"
              f"{r['build_cpu_s']:>7.2f}{r['gds_bytes'] / 1e3:>9.0f}{f'{w / 1e3:.1f} x {h / 1e3:.1f}':>16}")
    print("(build s excludes importing gdsfactory, about "
          f"{max(r['import_s'] for r in rows):.1f} s per process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
