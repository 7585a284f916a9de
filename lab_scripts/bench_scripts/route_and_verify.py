"""Route port pairs, program the chip, and check each route with the power meter.

    python -m lab_scripts.bench_scripts.route_and_verify --connect 5:28 --connect 12:33 --oracle
    python -m lab_scripts.bench_scripts.route_and_verify --bench mybench.toml --map chip.json

On a fabricated chip the ideal map misses the passive phases; use a calibration map
(``--map``), or on the simulated bench the TEST-ONLY truth oracle (``--oracle``).
"""

from __future__ import annotations

import argparse

import numpy as np

from instruments.config import open_bench
from photonics.routing import check_routes, route_many

LASER_NM = 1550.0  # the bench laser's wavelength; the model is compared at the same one


def main(argv: list[str] | None = None) -> int:
    """Route, program, measure, compare with the model."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="bench config TOML (default: the simulated bench)")
    p.add_argument("--connect", action="append", default=None, metavar="SRC:DST")
    p.add_argument("--map", help="calibration map JSON")
    p.add_argument("--oracle", action="store_true",
                   help="simulated bench only: program with the chip's hidden truth (test oracle)")
    args = p.parse_args(argv)
    pairs = [tuple(int(x) for x in c.split(":")) for c in (args.connect or ["5:28", "12:33"])]
    with open_bench(args.bench) as bench:
        mesh = bench.mesh
        params = None
        if args.map:
            from calibration.map import CalibrationMap

            bench.controller.heater_map = CalibrationMap.load(args.map, chip_id=bench.chip_id, mesh=mesh)
        elif args.oracle:
            if bench.sim is None:
                raise SystemExit("--oracle needs the simulated bench")
            from instruments.sim.truth_map import TruthMap

            bench.controller.heater_map = TruthMap(bench.sim.chip)
            params = bench.sim.chip.truth.params
        plan = route_many(mesh, pairs, params=params, check_budget=False)
        report = bench.program(plan.configuration)
        routes = [r.route for r in plan.routes]
        model = check_routes(mesh, plan.configuration, routes, params, wavelengths_nm=[LASER_NM])
        dsts = [r.dst for r in routes]
        print(f"programmed {report.channels} channels, {report.wire_time_s * 1e3:.1f} ms on the wire")
        print(f"{'route':>18} {'model dB':>9} {'meter dBm':>10} {'ACR model':>10} {'ACR meter':>10}")
        ok = True
        for route, m in zip(routes, model, strict=True):
            bench.select_input(route.src, LASER_NM)
            pw = bench.read_powers_dbm(dsts)
            k = dsts.index(route.dst)
            acr = pw[k] - (np.delete(pw, k).max() if len(pw) > 1 else -np.inf)
            ok &= abs(pw[k] - m.transmission_db) < 0.5
            name = f"{mesh.port_names[route.src]}->{mesh.port_names[route.dst]}"
            print(f"{name:>18} {m.transmission_db:9.2f} {pw[k]:10.2f} {m.acr_db:10.1f} {acr:10.1f}")
    print("all routes within 0.5 dB of the model" if ok else "some routes differ from the model by > 0.5 dB")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
