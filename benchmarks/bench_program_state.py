"""`lumion program` with a heater state, checked by light: how close a right state lands and
how far a wrong one does (the margin behind lab_scripts.state_verify.STATE_TOL).

For each seeded fabricated chip: calibrate it by light with its common phases (the defaults,
then the common-phase stage, as `lumion calibrate --common-phase`), synthesise targets through
that map (unitaries on square meshes, a Mach-Zehnder and a ring filter on hex meshes), program each state
through the map on the simulated bench of the same chip (over the instruments' wire, as
`lumion program` does) and check it by light against the synthesis's prediction. Rows:

* right: the state as synthesised: the largest |measured - predicted| over every input and
  metered port (fraction of the input's power);
* pi on one TBU: the state with one used TBU's top arm off by pi, for every used TBU: the
  smallest and the median of the same largest difference, and how many of them exceed
  STATE_TOL (caught);
* other chip's map: the same target synthesised through the map of the next chip seed,
  programmed through this chip's map.

``--margin`` measures the model alone, no bench, on inputs no test uses: for each seeded
fabricated chip (every parameter known: ``lumion synthesize --fabricated``) and each target
(Haar unitaries on square:3x3, square:4x4 and triangular:3x4; a Mach-Zehnder filter, a ring
filter, a 1:2 splitter and a 0.3 coupler on hex:2x2), the largest change a pi error on each
used TBU's top and bottom arm makes at the check's inputs, ports and wavelengths
(photonics.synthesis.prediction.pi_error_changes): how many fall at or under STATE_TOL (light
passes them) and under PI_VISIBLE (named).

Run:
    python benchmarks/bench_program_state.py                       (square:3x3 x 3 chips, hex:2x2 x 2)
    python benchmarks/bench_program_state.py --square-seeds 4350 --hex-seeds ""
    python benchmarks/bench_program_state.py --margin 101,102       (model only, 12 targets per seed)
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from calibration.budget import operation_budget
from calibration.common_phase import run_stage
from calibration.options import Options
from calibration.procedure import Progress, calibrate
from instruments.config import open_bench
from instruments.sim.chip import Chip
from instruments.sim.direct import DirectBench
from lab_scripts.program_state import load_state, state_currents
from lab_scripts.state_verify import PI_VISIBLE, STATE_TOL, verify_state
from photonics import synthesis
from photonics.physics import fabricated_params
from photonics.state import MeshState
from photonics.synthesis.prediction import check_wavelengths, pi_error_changes, state_document
from photonics.topology import Mesh, mesh_from_spec


def phase_map(mesh: Mesh, seed: int) -> Any:
    """The chip's map, calibrated by light with its common phases."""
    bench = DirectBench(Chip(mesh, seed=seed))
    result = calibrate(bench, Options(), progress=Progress(stream=None))
    cmap, _ = run_stage(bench, result.cmap, operation_budget(Options(), mesh), result.operations)
    return cmap


def targets(mesh: Mesh, cmap: Any) -> list[tuple[str, Any]]:
    """(name, synthesis) of the targets this mesh holds, through ``cmap``'s model."""
    params = synthesis.chip_model(mesh, cmap.delta, cmap.common)
    if mesh.kind == "square":
        from scipy.stats import unitary_group

        return [(f"unitary 3x3 Haar {s}", synthesis.unitary(mesh, unitary_group.rvs(3, random_state=s),
                                                            params)) for s in (0, 1)]
    return [("MZ filter 1550:0.089", synthesis.mz_filter(mesh, 1550.0, 0.089, params)),
            ("ring filter 1550:0.035", synthesis.ring_filter(mesh, 1550.0, 0.035, params))]


def worst_difference(bench: Any, cmap: Any, doc: dict[str, Any]) -> float:
    """Program ``doc`` (a state file's content) through ``cmap``; the largest |measured - predicted|."""
    program = load_state(doc, bench.mesh, "state")
    bench.controller.set_currents(state_currents(program, cmap, bench.max_current_ma))
    p = program.prediction
    results = verify_state(bench, p.inputs, p.powers, p.wavelengths_nm)
    return max(abs(r.worst.difference) for r in results if r.worst is not None)


def off_by_pi(doc: dict[str, Any], mesh: Mesh, tbu: str) -> dict[str, Any]:
    """``doc`` with ``tbu``'s top arm off by pi (its prediction kept)."""
    state = MeshState.from_dict(doc, mesh)
    top = state.phi_top.copy()
    top[mesh.tbu_index(tbu)] += np.pi
    return {**MeshState(top, state.phi_bot).to_dict(mesh), "prediction": doc["prediction"]}


def rows_for(spec: str, seed: int) -> list[tuple]:
    """The table rows of one chip."""
    mesh = mesh_from_spec(spec)
    t0 = time.process_time()
    cmap, other = phase_map(mesh, seed), phase_map(mesh, seed + 1)
    cal_s = time.process_time() - t0
    cfg = {"schema": "lumion.bench", "version": 1, "mesh": spec, "heater_driver": {"address": "sim"},
           "laser": {"address": "sim"}, "power_meter": {"address": "sim"}, "sim": {"seed": seed}}
    rows = []
    with open_bench(cfg, verify="all") as bench:
        cmap.check_for(chip_id=bench.chip_id, mesh=mesh)
        for (name, s), (_, s_other) in zip(targets(mesh, cmap), targets(mesh, other), strict=True):
            doc = state_document(s, "map", [1550.0])
            right = worst_difference(bench, cmap, doc)
            pis = [worst_difference(bench, cmap, off_by_pi(doc, mesh, t)) for t in doc["prediction"]["tbus"]]
            foreign = worst_difference(bench, cmap, state_document(s_other, "other map", [1550.0]))
            rows.append((spec, seed, name, f"{right:.4f}", f"{min(pis):.3f}", f"{np.median(pis):.3f}",
                         f"{sum(x > STATE_TOL for x in pis)}/{len(pis)}", f"{foreign:.3f}", f"{cal_s:.0f}"))
            print(" | ".join(map(str, rows[-1])), file=sys.stderr)
    return rows


def margin_targets(seed: int) -> Any:
    """(mesh spec, name, synthesis) of the --margin targets, on fabricated chip ``seed``."""
    from scipy.stats import unitary_group

    unitaries = (("square:3x3", 3, range(4)), ("square:4x4", 4, range(2)), ("triangular:3x4", 3, range(2)))
    for spec, n, haar in unitaries:
        mesh = mesh_from_spec(spec)
        params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
        for s in haar:
            u = unitary_group.rvs(n, random_state=s)
            yield spec, f"unitary {n}x{n} Haar {s}", synthesis.unitary(mesh, u, params)
    mesh = mesh_from_spec("hex:2x2")
    params = fabricated_params(mesh.n_tbus, mesh.n_links, np.random.default_rng(seed))
    yield "hex:2x2", "MZ filter 1550:0.089", synthesis.mz_filter(mesh, 1550.0, 0.089, params)
    yield "hex:2x2", "ring filter 1550:0.035", synthesis.ring_filter(mesh, 1550.0, 0.035, params)
    split = synthesis.splitter(mesh, 0, [5, 9], [1, 2], params, [1550.0])
    yield "hex:2x2", "splitter 0:5=1,9=2 (a configuration)", split
    yield "hex:2x2", "coupler 0.3 (a configuration)", synthesis.coupler(mesh, 0.3, params, [1550.0])


def margin_rows(seed: int) -> list[tuple]:
    """--margin: per target, what a pi error on each used TBU's arm does to the check's readings."""
    rows = []
    for spec, name, s in margin_targets(seed):
        t0 = time.process_time()
        every = tuple(range(s.mesh.n_ports))  # the simulated bench meters every port
        change = pi_error_changes(s.mesh, s.state, s.params, tuple(s.inputs), check_wavelengths(s, [1550.0]),
                                  tuple(s.tbus), every).ravel()
        cpu_ms = (time.process_time() - t0) * 1e3
        weakest = s.mesh.tbu_names[s.tbus[int(np.argmin(change)) // 2]]
        rows.append((spec, seed, name, len(s.tbus), f"{change.min():.3f} ({weakest})",
                     f"{np.median(change):.3f}", f"{int((change <= STATE_TOL).sum())}/{change.size}",
                     f"{int((change <= PI_VISIBLE).sum())}/{change.size}", f"{cpu_ms:.0f}"))
        print(" | ".join(map(str, rows[-1])), file=sys.stderr)
    return rows


def print_table(head: list[str], rows: list[tuple]) -> None:
    """A markdown table."""
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--square-seeds", default="4350,4352,4354")
    ap.add_argument("--hex-seeds", default="4360,4362")
    ap.add_argument("--margin", metavar="SEEDS", help="model only: pi errors on fabricated chips SEEDS")
    args = ap.parse_args(argv)
    if args.margin:
        head = ["mesh", "chip seed", "target", "used TBUs", "pi on one arm: smallest", "median",
                f"passed (<= {STATE_TOL})", f"named (<= {PI_VISIBLE:.2f})", "CPU ms"]
        print_table(head, [r for seed in args.margin.split(",") for r in margin_rows(int(seed))])
        return 0
    chips = [("square:3x3", int(s)) for s in args.square_seeds.split(",") if s] + \
        [("hex:2x2", int(s)) for s in args.hex_seeds.split(",") if s]
    rows = [r for spec, seed in chips for r in rows_for(spec, seed)]
    head = ["mesh", "chip seed", "target", "right: worst diff", "pi on one TBU: smallest", "median",
            f"caught (> {STATE_TOL})", "other chip's map: worst diff", "CPU s (2 calibrations)"]
    print_table(head, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
