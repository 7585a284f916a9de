"""How finely a lane's channel must be sampled for the worst ACR over it (docs/physics.md).

Usage: python benchmarks/bench_channel_sampling.py [--plans 30] [--seed 7] [--width 0.8]

Random four-route plans on smartlight (every other one on a fabricated chip), each lane on
a random channel inside the C band. For each plan the ACR of every route is computed over
the channel's slot (centre +- width / 2) on a fine 0.005 nm grid (the reference) and at
coarser steps; the table gives how much more optimistic each step is than the reference:
per route (max, p95, median) and for each plan's worst route. ``photonics.budget.
CHANNEL_STEP_NM`` is chosen from this table.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from photonics.errors import RoutingError
from photonics.physics import fabricated_params
from photonics.routing import check_routes, route_many
from photonics.topology import smartlight

STEPS_NM = (0.4, 0.2, 0.1, 0.05, 0.025)
REFERENCE_STEP_NM = 0.005
CHANNEL_RANGE_NM = (1530.73, 1563.46)  # channel centres whose whole 0.8 nm slot is in band


def _points(centre: float, width: float, step: float) -> np.ndarray:
    return np.linspace(centre - width / 2, centre + width / 2, round(width / step) + 1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plans", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--width", type=float, default=0.8, help="channel slot, nm (0.8: 100 GHz)")
    args = parser.parse_args(argv)
    mesh = smartlight()
    rng = np.random.default_rng(args.seed)
    per_route: dict[float, list[float]] = {s: [] for s in STEPS_NM}
    per_plan: dict[float, list[float]] = {s: [] for s in STEPS_NM}
    done = 0
    while done < args.plans:
        ports = rng.permutation(mesh.n_ports)[:8]
        pairs = [(int(ports[2 * i]), int(ports[2 * i + 1])) for i in range(4)]
        rng_chip = np.random.default_rng(done)
        params = fabricated_params(mesh.n_tbus, mesh.n_links, rng_chip) if done % 2 else None
        try:
            plan = route_many(mesh, pairs, params=params, check_budget=False)
        except RoutingError:
            continue  # no conflict-free set: draw another request
        routes = [r.route for r in plan.routes]
        centre = float(rng.uniform(*CHANNEL_RANGE_NM))

        def acr(points: np.ndarray, plan=plan, routes=routes, params=params) -> np.ndarray:
            return np.array([c.acr_db for c in check_routes(mesh, plan.configuration, routes, params,
                                                            wavelengths_nm=points)])

        ref = acr(_points(centre, args.width, REFERENCE_STEP_NM))
        for s in STEPS_NM:
            a = acr(_points(centre, args.width, s))
            per_route[s] += list(a - ref)
            per_plan[s].append(float(a.min() - ref.min()))
        done += 1
    print(f"{args.plans} four-route smartlight plans, {args.width:g} nm channel slots, seed {args.seed} "
          f"(load average {os.getloadavg()[0]:.1f}); ACR at the step minus ACR on a "
          f"{REFERENCE_STEP_NM:g} nm grid, dB (positive = too optimistic)\n")
    print("| step nm | points per slot | per route: max / p95 / median | plan's worst route: max / median |")
    print("|---:|---:|---:|---:|")
    for s in STEPS_NM:
        g, p = np.array(per_route[s]), np.array(per_plan[s])
        print(f"| {s:g} | {round(args.width / s) + 1} | {g.max():.2f} / {np.percentile(g, 95):.2f} / "
              f"{np.median(g):.2f} | {p.max():.2f} / {np.median(p):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
