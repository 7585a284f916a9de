"""The Mach-Zehnder filter on seeded chips: centre, bandwidth and extinction asked vs achieved.

First table: the bandwidths each mesh holds (one per arm length difference) and the TBUs
of the layout. Then rows (markdown, as docs/synthesis.md shows them), one per (mesh, chip,
bandwidth):

* "the chip itself": refined on the chip (every parameter known, as `--fabricated SEED`),
  measured there: what the synthesis achieves;
* "map model": refined on what a perfect power-only calibration map knows of the fabricated
  chip (`synthesis.chip_model` with its true differential phases; common arm phases 0,
  couplers and losses nominal), measured on the fabricated chip: the couplers are right but
  the arms' phase difference is not, so the passband lands anywhere in the free spectral
  range (why the filter is a heater state, not a configuration);
* "heaters +-0.02 rad": the known-chip state with every heater off by a seeded normal error
  of sigma (rad), what a map with that residual programs.

Each row: the passband's centre offset (pm), width (pm), extinction (dB), peak level (dB)
and the CPU seconds of the synthesis.

Run:
    python benchmarks/bench_synthesis_mzi.py
    python benchmarks/bench_synthesis_mzi.py --meshes hex:2x2 --chips 1 --differences 4
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from photonics import synthesis
from photonics.physics import fabricated_params, nominal_params
from photonics.state import MeshState
from photonics.synthesis.mzi import mzi_layout, passband, reachable, sweep
from photonics.topology import mesh_from_spec

CENTRE = 1550.0
SIGMA = 0.02  # rad: the calibration's per-heater target


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default="hex:3x3,smartlight")
    ap.add_argument("--chips", type=int, default=2, help="seeded fabricated chips (seeds 6000..)")
    ap.add_argument("--differences", default="2,4,8,12", help="arm length differences (TBUs) to synthesise")
    return ap.parse_args()


def _measure(mesh, params, s, state: MeshState) -> dict:
    from photonics.circuit import solve

    wl = sweep(CENTRE, s.extra["filter"]["fsr_nm"])
    y = solve(mesh, state, wl, params, inputs=list(s.inputs))[0, :, s.outputs[0], 0]
    return passband(wl, np.abs(y) ** 2)


def _row(spec, chip, width, how, got, cpu) -> str:
    return (f"| {spec} | {chip} | {width * 1e3:.1f} | {how} | {(got['centre_nm'] - CENTRE) * 1e3:+.3f} "
            f"| {got['fwhm_nm'] * 1e3:.1f} | {got['extinction_db']:.1f} | {got['max_transmission_db']:.2f} "
            f"| {cpu} |")


def held(specs: list[str]) -> None:
    print("| mesh | arm difference (TBUs) | bandwidth at 1550 nm (nm) | free spectral range (nm) "
          "| layout TBUs "
          "| arms (TBUs) |")
    print("|---|---|---|---|---|---|")
    for spec in specs:
        mesh = mesh_from_spec(spec)
        for k, w in reachable(mesh, nominal_params(mesh.n_tbus, mesh.n_links), CENTRE).items():
            lay = mzi_layout(mesh, k)
            print(f"| {spec} | {k} | {w:.4f} | {2 * w:.4f} | {len(lay.tbus)} "
                  f"| {len(lay.arms[0])} + {len(lay.arms[1])} |", flush=True)


def main() -> None:
    args = _args()
    specs = args.meshes.split(",")
    held(specs)
    print("\n| mesh | chip seed | width asked (pm) | refined on | centre offset (pm) | width (pm) "
          "| extinction (dB) | peak (dB) | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in specs:
        mesh = mesh_from_spec(spec)
        nominal = nominal_params(mesh.n_tbus, mesh.n_links)
        widths = reachable(mesh, nominal, CENTRE)
        for k in (int(d) for d in args.differences.split(",")):
            if k not in widths:
                continue
            width = round(widths[k], 4)
            c = time.process_time()
            s_nom = synthesis.mz_filter(mesh, CENTRE, width, nominal)
            print(_row(spec, "nominal", width, "the chip itself", _measure(mesh, nominal, s_nom, s_nom.state),
                       f"{time.process_time() - c:.1f}"), flush=True)
            for i in range(args.chips):
                seed = 6000 + i
                real = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
                c = time.process_time()
                s = synthesis.mz_filter(mesh, CENTRE, width, real)
                cpu = f"{time.process_time() - c:.1f}"
                print(_row(spec, seed, width, "the chip itself", _measure(mesh, real, s, s.state), cpu))
                model = synthesis.chip_model(mesh, np.mod(real.offset_top - real.offset_bot, 2 * np.pi))
                s_map = synthesis.mz_filter(mesh, CENTRE, width, model)
                print(_row(spec, seed, width, "map model", _measure(mesh, real, s, s_map.state), "-"))
                rng = np.random.default_rng(seed)
                noisy = MeshState(s.state.phi_top + rng.normal(0, SIGMA, mesh.n_tbus),
                                  s.state.phi_bot + rng.normal(0, SIGMA, mesh.n_tbus))
                print(_row(spec, seed, width, f"heaters +-{SIGMA} rad", _measure(mesh, real, s, noisy), "-"),
                      flush=True)


if __name__ == "__main__":
    main()
