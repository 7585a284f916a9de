"""Our merge at an earlier commit against the working tree, alternately in one process, per core.

Both copies of `photonics/circuit_merge.py` solve the same smartlight circuit as the SAX
benchmark (seeded fabrication errors, a fixed random state; 1, 100 and 1,000 wavelengths in
chunks as `photonics.circuit.solve` cuts them), called alternately on one pinned CPU so both
see the same machine; CPU time (`time.process_time`), best of the given repeats. The results
must agree to rounding (printed).

Run:
    python benchmarks/compare_merge_revisions.py 3425bda
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEATS = {1: 300, 100: 40, 1000: 8}  # alternating calls per sweep size (best of)
CHUNK = 128  # blocks per merge call, as photonics.circuit._MERGE_CHUNK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="git commit whose photonics/circuit_merge.py is the baseline")
    args = ap.parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    try:
        old_src = subprocess.run(["git", "show", f"{args.rev}:photonics/circuit_merge.py"], cwd=ROOT,
                                 check=True, capture_output=True, text=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        sys.exit(f"cannot read photonics/circuit_merge.py at {args.rev!r}: {exc}")
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from photonics import circuit_merge as new
    from photonics.circuit import tbu_transfers
    from photonics.physics import fabricated_params
    from photonics.state import MeshState
    from photonics.topology import smartlight

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(old_src)
    spec = importlib.util.spec_from_file_location("circuit_merge_baseline", f.name)
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old  # dataclasses look their module up
    spec.loader.exec_module(old)
    os.unlink(f.name)

    mesh = smartlight()
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
    inputs = np.arange(mesh.n_ports)
    print(f"baseline {args.rev} vs working tree; cpu {sorted(os.sched_getaffinity(0))}, "
          f"load average {os.getloadavg()[0]:.1f}")
    for n_wl, repeats in REPEATS.items():
        wl = np.linspace(1540.0, 1560.0, n_wl)
        T = tbu_transfers(params, state, wl).reshape(n_wl, mesh.n_tbus, 4)
        n_chunks = -(-n_wl // CHUNK)
        size = -(-n_wl // n_chunks)
        chunks = [slice(i, min(i + size, n_wl)) for i in range(0, n_wl, size)]
        runs = {}
        for name, mod in (("baseline", old), ("now", new)):
            plan = mod.merge_plan(mesh, all_first=n_wl < 16)
            runs[name] = (mod, plan, np.empty((n_wl, mesh.n_ports, mesh.n_ports), dtype=complex))

        def run(mod, plan, out, chunks=chunks, T=T):
            for c in chunks:
                mod.solve_merge(plan, T[c], t_link, inputs, out[c])

        for r in runs.values():
            run(*r)
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(repeats):
            for name, r in runs.items():
                c = time.process_time()
                run(*r)
                best[name] = min(best[name], time.process_time() - c)
        diff = float(np.abs(runs["baseline"][2] - runs["now"][2]).max())
        print(f"{n_wl} wavelengths: baseline {best['baseline'] / n_wl * 1e6:.1f} us, now "
              f"{best['now'] / n_wl * 1e6:.1f} us CPU per wavelength: {best['baseline'] / best['now']:.2f}x "
              f"(max difference {diff:.1e})")


if __name__ == "__main__":
    main()
