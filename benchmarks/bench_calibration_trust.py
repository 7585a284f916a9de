"""Issue 26's campaign: calibrate -> route -> program on seeded chips under stress modes.

Per mode and seed, a realistic SmartLight-class chip (frozen wall clock: the same bytes every
run) is stressed, calibrated through the Bench protocol, judged against its hidden truth and
routed with its map (instruments/sim/trust_campaign.py says what each figure means). Seeds
9200 + k: no test uses them.

    python benchmarks/bench_calibration_trust.py --seeds 6 [--modes default,dead_port] [--json]
    python benchmarks/bench_calibration_trust.py --mesh hex:3x4 --first-seed 9700 --seeds 4 --modes default
    python benchmarks/bench_calibration_trust.py --from-lines run1.err run2.err   # merge runs
    python benchmarks/bench_calibration_trust.py --stage program --first-seed 9800 --seeds 2 \
        [--meshes hex:3x4,square:4x4,smartlight] [--faults shift:pi,drift:5]
    python benchmarks/bench_calibration_trust.py --stage failover --first-seed 9800 --seeds 1
    python benchmarks/bench_calibration_trust.py --stage dark --first-seed 9860 --seeds 1 \
        --meshes hex:3x4,smartlight
    python benchmarks/bench_calibration_trust.py --stage state --first-seed 9870 --seeds 1 \
        --meshes square:4x4,hex:3x4
    python benchmarks/bench_calibration_trust.py --stage multicast --first-seed 9860 --seeds 1

``--stage program`` (benchmarks/trust_program_stage.py) goes on past calibration: the map
routed and programmed through the CLI onto a chip faulted after its calibration (phase
shifts, stuck and dead TBUs, broken heaters, a warmer chip), what ``lumion program`` said
against where the light went; exit 1 if any run was silent.

Each chip's figures go to stderr as one JSON line as soon as it is done, so runs split over
several processes (or cut short) are summarised together with ``--from-lines``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict

from calibration.options import Options
from instruments.sim.trust_campaign import MODES, ChipOutcome, run_campaign, summarise
from photonics.topology import mesh_from_spec

FIRST_SEED = 9200  # 9000-9002 (the first campaign) and 9100-9101 (its short test) are in tests now


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; print the per-mode table (or JSON); exit 1 if anything was silent."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=6, help="seeds per mode (9200, 9201, ...)")
    p.add_argument("--first-seed", type=int, default=FIRST_SEED)
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--no-drift-tracking", action="store_true",
                   help="calibrate with Options(drift_references=0) (tracking is on by default)")
    p.add_argument("--mesh", default=None,
                   help="mesh of the chips (smartlight, hex:RxC, square:RxC; default: smartlight)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--per-chip", action="store_true",
                   help="after the table, one line per chip: worst heater RMS and what the map named")
    p.add_argument("--from-lines", nargs="+", metavar="FILE",
                   help="summarise the per-chip JSON lines earlier runs wrote on stderr instead of running")
    p.add_argument("--stage", choices=("calibrate", "program", "failover", "dark", "state", "multicast"),
                   default="calibrate",
                   help="program: calibrate -> route -> program through the CLI, faults after calibration; "
                   "failover: lumion failover --bench --map --fail gpu2 on the default fabric; dark: both "
                   "with the bench laser dark (output off, or dead while it reports itself on); state: "
                   "lumion synthesize --map --out, then lumion program of the heater state, faults after "
                   "calibration; multicast: lumion collective --multicast --out, then lumion failover --plan "
                   "--fail gpu2 [--spare spare1] --bench sim --map, faults on the tree's TBUs")
    p.add_argument("--meshes", default="hex:3x4,square:4x4,smartlight", help="--stage program: meshes")
    p.add_argument("--faults", default=None, help="--stage program: comma-separated faults (default: all)")
    p.add_argument("--work", default=None, help="--stage program: folder for maps and plans (reused)")
    args = p.parse_args(argv)
    if args.stage in ("program", "failover", "dark", "state", "multicast"):
        return program_stage(args)
    t0, c0 = time.perf_counter(), time.process_time()
    if args.from_lines:
        outcomes = read_lines(args.from_lines)
    else:
        modes = tuple(m for m in args.modes.split(",") if m)
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))

        def note(o):  # one JSON line per chip on stderr: a cut-short campaign keeps what it measured
            line = asdict(o) | {"elapsed_s": round(time.perf_counter() - t0)}
            print(json.dumps(line), file=sys.stderr, flush=True)

        options = Options(drift_references=0) if args.no_drift_tracking else None
        mesh = mesh_from_spec(args.mesh) if args.mesh else None
        outcomes = run_campaign(modes, seeds, options, on_chip=note, mesh=mesh)
    table = summarise(outcomes)
    result = {"seeds": sorted({o.seed for o in outcomes}), "modes": table, "cpu_s": time.process_time() - c0,
              "load_average_1min": round(os.getloadavg()[0], 2),
              "chips": [asdict(o) | {"heater_rms_rad": None} for o in outcomes]}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(table)
        if args.per_chip:
            print_chips(outcomes)
    return 1 if any(row["silent_over_0_1_rad"] for row in table.values()) else 0


COLUMNS = ["chips", "refused", "injected", "named_correctly", "wrongly_named", "healthy_named_broken",
           "named_unreachable", "unverified", "silent_over_0_1_rad", "heater_rms_median_rad",
           "heater_rms_worst_rad", "chips_meeting_0_02_rad_per_heater", "operations_median", "operations_max",
           "routes", "routes_within", "routes_impossible", "routes_unprogrammable"]


def print_table(table: dict) -> None:
    """The per-mode table as Markdown (docs/calibration.md holds it so)."""
    print("| mode | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for mode, row in table.items():
        cells = [f"{row[c]:.4f}" if isinstance(row[c], float) and "rad" in c else
                 f"{row[c]:.0f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS]
        print(f"| {mode} | " + " | ".join(cells) + " |")


def print_chips(outcomes: list[ChipOutcome]) -> None:
    """One line per chip: worst per-heater RMS (rad) and every TBU the map named or missed."""
    for o in outcomes:
        worst = max(o.heater_rms_rad) if o.heater_rms_rad else float("nan")
        extra = {k: v for k, v in (("wrong", o.wrongly_named), ("unreachable", o.named_unreachable),
                                   ("unverified", {n: round(r, 3) for n, r in o.unverified.items()}),
                                   ("silent", o.silent), ("refused", o.refused),
                                   ("unprogrammable", o.route_refusals)) if v}
        print(f"    {o.mode} {o.seed}: worst heater {worst:.4f} rad, injected {o.injected or '-'}, "
              f"named {o.named}{''.join(f', {k} {v}' for k, v in extra.items())}")


def program_stage(args: argparse.Namespace) -> int:
    """The program stage (benchmarks/trust_program_stage.py): one JSON line per run on stderr,
    the per-fault table on stdout; 1 if any run was silent wrong.
    """
    import tempfile
    from pathlib import Path

    from trust_program_stage import (
        DARK_FAULTS,
        FAILOVER_FAULTS,
        FAULTS,
        MULTICAST_FAULTS,
        run_dark_seed,
        run_failover_seed,
        run_mesh_seed,
        run_multicast_seed,
        run_state_seed,
    )
    from trust_program_stage import summarise as summarise_program

    defaults = {"program": FAULTS, "failover": FAILOVER_FAULTS, "dark": DARK_FAULTS, "state": FAULTS,
                "multicast": MULTICAST_FAULTS}
    default = defaults[args.stage]
    faults = tuple(f for f in (args.faults.split(",") if args.faults else default) if f)
    folder = Path(args.work or tempfile.mkdtemp(prefix="trust-program-"))
    folder.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        per_mesh = {"dark": run_dark_seed, "state": run_state_seed}.get(args.stage, run_mesh_seed)
        one = {"failover": run_failover_seed, "multicast": run_multicast_seed}.get(args.stage)
        runs = [one(seed, folder, faults)] if one is not None else \
            [per_mesh(spec, seed, folder, faults) for spec in args.meshes.split(",") if spec]
        for o in (o for run in runs for o in run):
            print(json.dumps(asdict(o)), file=sys.stderr, flush=True)
            outcomes.append(o)
    table = summarise_program(outcomes)
    if args.json:
        print(json.dumps({"table": table, "runs": [asdict(o) for o in outcomes]}, indent=1))
    else:
        extra = {"dark": ("named", "blamed_mesh"), "state": ("named",)}.get(args.stage, ())
        keys = ("runs", "silent_wrong", "conservative", "correct", *extra)
        print(f"| fault | {' | '.join(keys)} |\n" + "|---" * (len(keys) + 1) + "|")
        for fault, row in table.items():
            cells = " | ".join(str(row.get(k, 0)) for k in keys)
            print(f"| {fault} | {cells} |")
        for o in outcomes:
            if o.verdict != "correct":
                print(f"    {o.verdict}: {o.mesh} {o.seed} {o.fault} {o.tbu or ''}: exit {o.exit_code}, "
                      f"{o.status}; truth {o.light_wrong or 'right'}; said {o.said[:160]!r}")
    return 1 if any(o.verdict == "silent_wrong" for o in outcomes) else 0


def read_lines(paths: list[str]) -> list[ChipOutcome]:
    """Chips from the per-chip JSON lines of earlier runs (first of each mode and seed kept),
    in mode order, then seed order.
    """
    seen: dict[tuple[str, int], ChipOutcome] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                data = json.loads(line)
                data.pop("elapsed_s", None)
                o = ChipOutcome(**data)
                seen.setdefault((o.mode, o.seed), o)
    order = {m: k for k, m in enumerate(MODES)}
    return [seen[k] for k in sorted(seen, key=lambda k: (order.get(k[0], len(order)), k[1]))]


if __name__ == "__main__":
    raise SystemExit(main())
