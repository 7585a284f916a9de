"""The ring filter on seeded chips: centre, bandwidth and extinction asked vs achieved.

Rows (markdown, as docs/synthesis.md shows them), one per (mesh, chip, bandwidth):

* "known chip": refined on the chip itself (every parameter known, as `--fabricated SEED`),
  measured there: what the synthesis achieves;
* "map model": refined on what a perfect power-only calibration map knows of the fabricated
  chip (`synthesis.chip_model` with its true differential phases; common arm phases 0,
  couplers and losses nominal), measured on the fabricated chip: the splits are right but
  the loop's round-trip phase is not, so the centre lands anywhere in the free spectral
  range (why the filter is a heater state, not a configuration);
* "map residual": the known-chip state with every heater off by a seeded normal error of
  sigma (rad), what a map with that residual programs.

Each row: the achieved centre's offset (pm), width (pm), extinction (dB), through level
(dB) and the CPU seconds of the synthesis.

Run:
    python benchmarks/bench_synthesis_filter.py
    python benchmarks/bench_synthesis_filter.py --meshes hex:2x2 --chips 1 --widths 0.035
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from photonics import synthesis
from photonics.physics import fabricated_params, nominal_params
from photonics.state import MeshState
from photonics.synthesis.ring import notch, sweep
from photonics.topology import mesh_from_spec

CENTRE = 1550.0
SIGMA = 0.02  # rad: the calibration's per-heater target


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default="hex:3x3,smartlight")
    ap.add_argument("--chips", type=int, default=2, help="seeded fabricated chips (seeds 6000..)")
    ap.add_argument("--widths", default="0.02,0.035", help="bandwidths asked, nm")
    return ap.parse_args()


def _measure(mesh, params, s, state: MeshState) -> dict:
    fsr = s.extra["filter"]["fsr_nm"]
    wl = sweep(CENTRE, fsr)
    from photonics.circuit import solve

    y = solve(mesh, state, wl, params, inputs=list(s.inputs))[0, :, s.outputs[0], 0]
    return notch(wl, np.abs(y) ** 2)


def _row(spec, chip, width, how, got, cpu) -> str:
    return (f"| {spec} | {chip} | {width * 1e3:.0f} | {how} | {(got['centre_nm'] - CENTRE) * 1e3:+.3f} "
            f"| {got['fwhm_nm'] * 1e3:.1f} | {got['extinction_db']:.1f} | {got['max_transmission_db']:.2f} "
            f"| {cpu} |")


def main() -> None:
    args = _args()
    print("| mesh | chip seed | width asked (pm) | refined on | centre offset (pm) | width (pm) "
          "| extinction (dB) | through (dB) | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in args.meshes.split(","):
        mesh = mesh_from_spec(spec)
        nominal = nominal_params(mesh.n_tbus, mesh.n_links)
        for width in (float(w) for w in args.widths.split(",")):
            c = time.process_time()
            s_nom = synthesis.ring_filter(mesh, CENTRE, width, nominal)
            print(_row(spec, "nominal", width, "the chip itself", _measure(mesh, nominal, s_nom, s_nom.state),
                       f"{time.process_time() - c:.1f}"), flush=True)
            for k in range(args.chips):
                seed = 6000 + k
                real = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
                c = time.process_time()
                s = synthesis.ring_filter(mesh, CENTRE, width, real)
                cpu = f"{time.process_time() - c:.1f}"
                print(_row(spec, seed, width, "the chip itself", _measure(mesh, real, s, s.state), cpu))
                model = synthesis.chip_model(mesh, np.mod(real.offset_top - real.offset_bot, 2 * np.pi))
                s_map = synthesis.ring_filter(mesh, CENTRE, width, model)
                print(_row(spec, seed, width, "map model", _measure(mesh, real, s, s_map.state), "-"))
                rng = np.random.default_rng(seed)
                noisy = MeshState(s.state.phi_top + rng.normal(0, SIGMA, mesh.n_tbus),
                                  s.state.phi_bot + rng.normal(0, SIGMA, mesh.n_tbus))
                print(_row(spec, seed, width, f"chip itself, heaters +-{SIGMA} rad",
                           _measure(mesh, real, s, noisy), "-"), flush=True)


if __name__ == "__main__":
    main()
