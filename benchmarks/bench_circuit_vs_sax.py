"""Our circuit solve against SAX on the same circuit, in one run.

The `smartlight` mesh (71 TBUs, 40 ports) with seeded fabrication errors in a fixed random
state; 1, 100 and 1,000 wavelengths. For each: SAX's first call (trace + JIT compile),
SAX's steady-state call (best of 5), our previous sparse-LU path (`solve_sparse`, best of
5), our default path (`solve`, nested-dissection merge, best of 5), SAX / ours, and the
largest difference in any S-parameter (ours vs SAX, and merge vs sparse LU). Then a
second table for state batches (ours only: sparse LU vs merge).

Run: make bench   (installs the `bench` extra: sax, jax, klujax)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from sax_circuit import build_sax_circuit, sax_matrix, sax_settings

from photonics.circuit import solve, solve_sparse
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.topology import smartlight


def best_of(fn, repeats: int = 5) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    mesh = smartlight()
    rng = np.random.default_rng(2024)
    params = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
    state = MeshState.random(mesh, rng)
    circuit = build_sax_circuit(mesh)
    rows = []
    for n_wl in (1, 100, 1000):
        wl = np.linspace(1540.0, 1560.0, n_wl)
        kwargs = sax_settings(mesh, params, state, wl)

        def run_sax(kwargs=kwargs):
            return {k: np.asarray(v) for k, v in circuit(**kwargs).items()}

        t = time.perf_counter()
        run_sax()
        sax_first = time.perf_counter() - t
        sax_t, sdict = best_of(run_sax)
        sparse_t, ref = best_of(lambda wl=wl: solve_sparse(mesh, state, wl, params))
        ours_t, ours = best_of(lambda wl=wl: solve(mesh, state, wl, params))
        diff = float(np.abs(ours[0] - sax_matrix(sdict, mesh.n_ports, n_wl)).max())
        rows.append((n_wl, sax_first, sax_t, sparse_t, ours_t, diff, float(np.abs(ours - ref).max())))
    print("| wavelengths | SAX first call (s) | SAX (s) | ours before: sparse LU (s) | ours now: merge (s) "
          "| SAX / ours before | SAX / ours now | max abs S diff vs SAX | merge vs sparse LU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_wl, first, s, sp, o, diff, dref in rows:
        print(f"| {n_wl} | {first:.2f} | {s:.4f} | {sp:.4f} | {o:.4f} | {s / sp:.2f}x | {s / o:.1f}x "
              f"| {diff:.1e} | {dref:.1e} |")
    print()
    print("| states x wavelengths | sparse LU (s) | merge (s) | speed-up | max abs difference |")
    print("|---|---|---|---|---|")
    for n_states, n_wl in ((100, 1), (10, 100)):
        batch = MeshState.random(mesh, rng, n_states=n_states)
        wl = np.linspace(1540.0, 1560.0, n_wl)
        sp, ref = best_of(lambda b=batch, wl=wl: solve_sparse(mesh, b, wl, params), 3)
        o, ours = best_of(lambda b=batch, wl=wl: solve(mesh, b, wl, params), 3)
        dref = float(np.abs(ours - ref).max())
        print(f"| {n_states} x {n_wl} | {sp:.4f} | {o:.4f} | {sp / o:.1f}x | {dref:.1e} |")

if __name__ == "__main__":
    main()
