"""Synthesis on seeded chips: time of a unitary, fidelity against fabrication and map errors.

Tables (markdown, as docs/synthesis.md shows them):

1. time: Haar-random N x N unitaries (seeds 0..--unitaries-1) on square:NxN (or, with
   --kind triangular, triangular:Nx(N+1), the smallest that holds N modes), nominal chip:
   start and refined fidelity, L-BFGS steps, CPU seconds of the whole synthesis;
2. fabrication error: chips fabricated with coupler spread kappa_spread (and random arm
   offsets). "known chip": refined on the chip itself (every parameter known), evaluated
   there. "couplers unknown": refined on the chip with nominal couplers (arm phases known,
   coupler errors not), evaluated on the real chip;
3. map residual: refined on the real chip (kappa_spread 0.003), then every heater phase off
   by a seeded normal error of sigma rad (what a map with that residual does), evaluated on
   the real chip; for the unitary and for a 1-to-4 splitter on smartlight (ratios 1:2:3:4);
4. power-only map: refined on what a calibration map knows (differential phases only, the
   common arm phase 0), evaluated on the real chip: why a unitary is not a configuration.

Run:
    python benchmarks/bench_synthesis.py                  (N = 6 on square:6x6, 3 unitaries, 2 chips)
    python benchmarks/bench_synthesis.py --n 4 --unitaries 1 --chips 1
    python benchmarks/bench_synthesis.py --kind triangular   (N = 6 on triangular:6x7)
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import numpy as np
from scipy.stats import unitary_group

from photonics import synthesis
from photonics.physics import fabricated_params, nominal_params
from photonics.state import MeshState
from photonics.synthesis.report import power_report, unitary_report
from photonics.topology import Mesh, smartlight, square, triangular

SPREADS = (0.0, 0.003, 0.01, 0.02)
SIGMAS = (0.005, 0.01, 0.02, 0.05)
SPLIT = (1, [4, 8, 12, 20], [1, 2, 3, 4])


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6, help="modes (mesh square:NxN or triangular:Nx(N+1))")
    ap.add_argument("--kind", choices=("square", "triangular"), default="square", help="mesh of the unitary")
    ap.add_argument("--unitaries", type=int, default=3)
    ap.add_argument("--chips", type=int, default=2, help="seeded chips per row")
    return ap.parse_args()


def _noisy(state: MeshState, sigma: float, rng: np.random.Generator) -> MeshState:
    return MeshState(state.phi_top + rng.normal(0, sigma, state.phi_top.shape),
                     state.phi_bot + rng.normal(0, sigma, state.phi_bot.shape))


def _fid(mesh, params, s, u, state=None) -> float:
    wl = np.array([1550.0])
    row = unitary_report(mesh, params, state or s.state, u, wl, np.array(s.inputs), np.array(s.outputs))
    return row[0]["fidelity"]


def _mesh(kind: str, n: int) -> Mesh:
    """The smallest mesh of ``kind`` that holds an ``n``-mode lattice."""
    return square(n, n) if kind == "square" else triangular(n, n + 1)


def timing(kind: str, n: int, count: int) -> None:
    mesh = _mesh(kind, n)
    params = nominal_params(mesh.n_tbus, mesh.n_links)
    print(f"\n| unitary ({n}x{n} on {kind}:{mesh.rows}x{mesh.cols}, nominal) | start fidelity | fidelity "
          "| loss dB | worst crosstalk dB | steps | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for seed in range(count):
        u = unitary_group.rvs(n, random_state=seed)
        c = time.process_time()
        s = synthesis.unitary(mesh, u, params)
        cpu = time.process_time() - c
        a = s.achieved[0]
        print(f"| Haar seed {seed} | {s.start[0]['fidelity']:.4f} | {a['fidelity']:.7f} | {a['loss_db']:.2f} "
              f"| {a['worst_crosstalk_db']:.1f} | {s.steps} | {cpu:.1f} |")
        sys.stdout.flush()


def fabrication(kind: str, n: int, chips: int) -> None:
    mesh = _mesh(kind, n)
    u = unitary_group.rvs(n, random_state=100)
    print("\n| kappa spread | fidelity, known chip | fidelity, couplers unknown | chips |")
    print("|---|---|---|---|")
    for spread in SPREADS:
        known, blind = [], []
        for chip in range(chips):
            true = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(1000 + chip),
                                     kappa_spread=spread)
            s = synthesis.unitary(mesh, u, true)
            known.append(s.achieved[0]["fidelity"])
            nominal = nominal_params(mesh.n_tbus, mesh.n_links)
            model = replace(true, kappa1=nominal.kappa1, kappa2=nominal.kappa2)
            b = synthesis.unitary(mesh, u, model)
            blind.append(_fid(mesh, true, b, u))
        print(f"| {spread} | {min(known):.6f} (worst) | {min(blind):.6f} (worst) | {chips} |")
        sys.stdout.flush()


def residual(kind: str, n: int, chips: int) -> None:
    mesh, hexm = _mesh(kind, n), smartlight()
    u = unitary_group.rvs(n, random_state=100)
    print(f"\n| map residual sigma (rad) | unitary fidelity ({n}x{n}) | splitter 1:2:3:4 largest share error "
          "| chips |")
    print("|---|---|---|---|")
    base = []
    for chip in range(chips):
        rng = np.random.default_rng(2000 + chip)
        true = fabricated_params(mesh.n_tbus, mesh.n_links, rng)
        true_h = fabricated_params(hexm.n_tbus, hexm.n_links, rng)
        base.append((true, synthesis.unitary(mesh, u, true), true_h,
                     synthesis.splitter(hexm, *SPLIT, params=true_h)))
    want = np.array(SPLIT[2], float)[:, None] / sum(SPLIT[2])
    for sigma in (0.0, *SIGMAS):
        fids, errs = [], []
        for chip, (true, s, true_h, sp) in enumerate(base):
            rng = np.random.default_rng([3000 + chip, int(sigma * 1e4)])
            fids.append(_fid(mesh, true, s, u, _noisy(s.state, sigma, rng)))
            rows = power_report(hexm, true_h, _noisy(sp.state, sigma, rng), want, np.array([1550.0]),
                                np.array([SPLIT[0]]), np.array(SPLIT[1]))
            errs.append(rows[0]["max_share_error"])
        print(f"| {sigma} | {min(fids):.5f} (worst) | {max(errs):.2e} (worst) | {chips} |")
        sys.stdout.flush()


def power_only(kind: str, n: int, chips: int) -> None:
    mesh = _mesh(kind, n)
    u = unitary_group.rvs(n, random_state=100)
    print("\n| chip | fidelity, refined on the map's model (differential phases only) | on the real chip |")
    print("|---|---|---|")
    for chip in range(chips):
        true = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(4000 + chip))
        model = synthesis.chip_model(mesh, true.offset_top - true.offset_bot)
        s = synthesis.unitary(mesh, u, model)
        print(f"| seed {4000 + chip} | {s.achieved[0]['fidelity']:.6f} | {_fid(mesh, true, s, u):.4f} |")
        sys.stdout.flush()


def main() -> None:
    args = _args()
    timing(args.kind, args.n, args.unitaries)
    fabrication(args.kind, args.n, args.chips)
    residual(args.kind, args.n, args.chips)
    power_only(args.kind, args.n, args.chips)


if __name__ == "__main__":
    main()
