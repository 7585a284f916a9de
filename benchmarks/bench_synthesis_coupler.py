"""The tunable coupler on meshes without a lattice (hex, smartlight, triangular), seeded chips.

One row per (mesh, chip, kappa): the largest share error at 1550 nm of

* "chip itself": refined on the fabricated chip, every parameter known;
* "through a map": refined on what a perfect power-only calibration map knows
  (`synthesis.chip_model` with the chip's differential phases: couplers, losses and common
  phases nominal), its configuration programmed on the fabricated chip through the same
  differential phases: what `lumion program --map` sets;
* "map +-0.02 rad": that, with every heater off by a seeded normal error of 0.02 rad (the
  calibration's per-heater target).

Run:
    python benchmarks/bench_synthesis_coupler.py
    python benchmarks/bench_synthesis_coupler.py --meshes hex:3x3 --chips 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from photonics import synthesis
from photonics.circuit import solve
from photonics.physics import fabricated_params
from photonics.state import MeshState

SIGMA = 0.02


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default="hex:3x3,smartlight,triangular:3x4")
    ap.add_argument("--chips", type=int, default=3, help="seeded fabricated chips (seeds 6100..)")
    ap.add_argument("--kappas", default="0.1,0.3,0.5")
    return ap.parse_args()


def _error(mesh, params, state, s, target) -> float:
    p = np.abs(solve(mesh, state, [1550.0], params, inputs=list(s.inputs))[0, 0][list(s.outputs)]) ** 2
    return float(np.abs(p / p.sum(axis=0) - target).max())


def main() -> None:
    from photonics.topology import mesh_from_spec

    args = _args()
    print("| mesh | chip seed | kappa | TBUs | chip itself | through a map | map +-0.02 rad | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in args.meshes.split(","):
        mesh = mesh_from_spec(spec)
        for k in range(args.chips):
            seed = 6100 + k
            real = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
            delta = np.mod(real.offset_top - real.offset_bot, 2 * np.pi)
            for kappa in (float(x) for x in args.kappas.split(",")):
                target = np.array([[1 - kappa, kappa], [kappa, 1 - kappa]])
                c = time.process_time()
                own = synthesis.coupler(mesh, kappa, real)
                cpu = time.process_time() - c
                via = synthesis.coupler(mesh, kappa, synthesis.chip_model(mesh, delta))
                state = via.configuration.heater_state(real.offset_top, real.offset_bot)
                rng = np.random.default_rng(seed)
                noisy = MeshState(state.phi_top + rng.normal(0, SIGMA, mesh.n_tbus),
                                  state.phi_bot + rng.normal(0, SIGMA, mesh.n_tbus))
                errs = (own.achieved[0]["max_share_error"], _error(mesh, real, state, via, target),
                        _error(mesh, real, noisy, via, target))
                cells = " | ".join(f"{e:.1e}" for e in errs)
                print(f"| {spec} | {seed} | {kappa} | {len(own.tbus)} | {cells} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
