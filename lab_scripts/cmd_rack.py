"""``lumion rack simulate``: a trace of tenants on a rack of meshes, photonic fabric vs fixed baseline."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from lab_scripts.common import add_json_flag, non_negative_float, positive, print_json, seed, table
from lab_scripts.errors import reading
from lab_scripts.paths import PLOT_SUFFIXES, output_file

SCHEMA = "lumion.rack.simulate"
VERSION = 1

# Rows of the human table: (metric key, label, unit). Order = the story: does it get in,
# how long does it wait, what does it get, what does the rack deliver.
ROWS = (
    ("accepted_immediately", "accepted without waiting", "fraction"),
    ("accepted_eventually", "accepted eventually", "fraction"),
    ("queue_delay_mean_h", "queueing delay, mean", "h"),
    ("queue_delay_p95_h", "queueing delay, p95", "h"),
    ("fragmentation", "fragmentation (stranded free)", "fraction"),
    ("bandwidth_per_slice", "bandwidth per slice", "lanes/acc"),
    ("step_rate", "step rate (ideal slice = 1)", "fraction"),
    ("utilisation", "utilisation", "fraction"),
    ("throughput_jobs_per_h", "job throughput", "jobs/h"),
    ("goodput_acc_h_per_h", "goodput", "acc-h/h"),
    ("goodput_fraction", "goodput / busy", "fraction"),
    ("makespan_h", "makespan", "h"),
    ("failures_in_jobs", "failures hitting a job", "count"),
    ("splices", "recovered by a splice", "count"),
    ("stalls", "jobs stalled for repair", "count"),
    ("requeues", "jobs re-queued after a failure", "count"),
    ("lost_work_acc_h", "work rolled back", "acc-h"),
    ("rejected", "rejected (never fit)", "count"),
)


def hours(text: str) -> float:
    """Argument type of a duration in hours: a finite number > 0 (``inf`` allowed for an MTBF)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of hours > 0, not {text!r}")
    return value


def finite_hours(text: str) -> float:
    """Argument type of a finite duration in hours > 0."""
    value = hours(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number of hours > 0, not {text!r}")
    return value


def hours_or_zero(text: str) -> float:
    """Argument type of a finite duration in hours that may be zero."""
    return 0.0 if text.strip() in ("0", "0.0") else finite_hours(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    from photonics.rack.failure_defaults import (
        CHECKPOINT_H,
        MTBF_H,
        RECOVERIES,
        RECOVERY,
        REPAIR_H,
        RESTART_H,
    )

    p = sub.add_parser(
        "rack",
        help="simulate tenants on a rack of meshes: photonic fabric vs a fixed static-ring baseline",
        description="Replay a job trace (arrivals, sizes, ring/line/all-to-all patterns, durations; "
        "CSV or JSON lines) or a seeded synthetic one on a rack of meshes, with seeded accelerator "
        "failures, under two policies in the same run: the photonic fabric (any free accelerators, "
        "circuits routed around the other tenants, spares spliced in on failure) and a fixed "
        "electrical-style baseline (a static ring: contiguous slices, a failure stalls the job until "
        "repair). Prints the metrics side by side (docs/rack.md defines them). "
        "Example: lumion rack simulate --synthetic 60 --seed 1 --plot rack.png",
    )
    p.add_argument("action", choices=["simulate"], help="simulate: run the trace under both policies")
    p.add_argument("--rack", metavar="FILE.toml", help="rack description (lumion.rack v1); default: two "
                   "SmartLight meshes, 16 accelerators + 2 spares, 4 fibres "
                   "(examples/rack-two-smartlight.toml)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE", help="job trace: .csv with a header, or .jsonl")
    src.add_argument("--synthetic", type=positive, metavar="N", help="a seeded synthetic trace of N jobs")
    p.add_argument("--seed", type=seed, default=0, help="seed of the synthetic trace and of the failures "
                   "(default 0)")
    p.add_argument("--backfill", action="store_true", help="start any queued job that fits (first fit), "
                   "not only the head of the queue (FIFO)")
    p.add_argument("--mtbf-h", type=hours, default=MTBF_H, help="mean time between failures per "
                   f"accelerator, hours (default {MTBF_H:g}, a stress value: a real GPU's is ~5e4, "
                   "docs/rack.md; inf: no failures)")
    p.add_argument("--repair-h", type=finite_hours, default=REPAIR_H,
                   help=f"repair time, hours (default {REPAIR_H:g})")
    p.add_argument("--checkpoint-h", type=finite_hours, default=CHECKPOINT_H,
                   help=f"progress between checkpoints, hours (default {CHECKPOINT_H:g})")
    p.add_argument("--restart-h", type=hours_or_zero, default=RESTART_H,
                   help=f"time to resume from a checkpoint, hours (default {RESTART_H:g})")
    p.add_argument("--recovery", choices=RECOVERIES, default=RECOVERY,
                   help="a failed job that is not spliced (the baseline: every one): requeue = give the "
                   "slice back and restart from the checkpoint on free accelerators, as a cluster scheduler "
                   f"does; wait = keep the slice until the repair (default {RECOVERY})")
    step = p.add_argument_group("step time (docs/rack.md: a job's step = compute + its collective on what it "
                                "holds; the trace's duration_h is its run time on the ideal slice)")
    step.add_argument("--buffer-mb", type=non_negative_float, default=None, metavar="MB",
                      help="bytes per rank each step's collective moves, MB (default 256)")
    step.add_argument("--compute-ms", type=non_negative_float, default=None, metavar="MS",
                      help="computation per step, ms (default 500)")
    step.add_argument("--gbps", type=rate_gbps, default=None, metavar="GBPS",
                      help="payload rate of one lane, Gb/s (default 10, the rack's DWDM lane)")
    step.add_argument("--fixed-duration", action="store_true",
                      help="every job runs its duration_h whatever it holds (no step model; the model "
                      "before issue 30)")
    p.add_argument("--baseline", metavar="SPEC", help="the fixed topology to compare with: ring (the "
                   "workers' two lanes as a 1-D torus) or torus:RxC (four links each, R x C = workers); "
                   "default: the rack file's, else ring")
    p.add_argument("--max-lanes", type=positive, metavar="N", help="lanes the fabric may give a slice "
                   "(default: all the accelerators' lanes)")
    p.add_argument("--plot", metavar="FILE.png", help="busy accelerators and queue length over simulated "
                   "time, both policies")
    add_json_flag(p)
    p.set_defaults(run=run)


def rate_gbps(text: str) -> float:
    """Argument type of a lane rate: a finite number of Gb/s > 0."""
    value = non_negative_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of Gb/s > 0, not {text!r}")
    return value


def step_model(args: argparse.Namespace) -> Any:
    """The StepModel the options ask for; None with --fixed-duration (UsageError for a mix)."""
    from lab_scripts.common import UsageError
    from photonics.collectives import CostModel
    from photonics.rack import RackError, StepModel
    from photonics.rack.steptime import BUFFER_MB, COMPUTE_MS

    given = [o for o, v in (("--buffer-mb", args.buffer_mb), ("--compute-ms", args.compute_ms),
                            ("--gbps", args.gbps)) if v is not None]
    if args.fixed_duration:
        if given:
            raise UsageError(f"--fixed-duration has no step to price: drop {', '.join(given)}")
        return None
    cost = CostModel(gbps=args.gbps) if args.gbps is not None else CostModel()
    try:
        return StepModel(BUFFER_MB if args.buffer_mb is None else args.buffer_mb,
                         COMPUTE_MS if args.compute_ms is None else args.compute_ms, cost)
    except RackError as exc:
        raise UsageError(str(exc)) from None


def change(fabric: float, baseline: float) -> float | None:
    """Relative change of the fabric over the baseline (0.66 = +66 %); None when the baseline is 0."""
    return (fabric - baseline) / baseline if baseline else None


def run(args: argparse.Namespace) -> int:
    """Load the rack and trace, simulate both policies, report."""
    from photonics.rack import (
        FailureModel,
        default_rack,
        load_rack,
        load_trace,
        run_simulation,
        synthetic_trace,
    )
    from photonics.rack.baseline import baseline_shape

    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    if args.rack:
        with reading("rack file", args.rack):
            rack = load_rack(args.rack)
    else:
        rack = default_rack()
    if args.trace:
        with reading("trace file", args.trace):
            trace = load_trace(args.trace)
        source = args.trace
    else:
        trace = synthetic_trace(args.synthetic, seed=args.seed)
        source = "synthetic"
    failures = FailureModel(args.mtbf_h, args.repair_h, args.checkpoint_h, args.restart_h, args.recovery)
    model = step_model(args)
    baseline = args.baseline or rack.baseline
    with reading("--baseline", baseline):
        baseline_shape(baseline, len(rack.workers))
    sims = {p: run_simulation(rack, trace, seed=args.seed, policy=p, backfill=args.backfill,
                              failures=failures, max_lanes=args.max_lanes, baseline=baseline,
                              step_model=model)
            for p in ("fabric", "baseline")}
    metrics = {p: s.metrics.to_dict() for p, s in sims.items()}
    if plot is not None:
        plot = timeline_plot(plot, sims, f"{rack.name}: {len(trace)} jobs, seed {args.seed}")
    numeric = [k for k, v in metrics["fabric"].items() if isinstance(v, int | float) and k != "n_jobs"]
    payload: dict[str, Any] = {
        "schema": SCHEMA, "version": VERSION,
        "rack": {"name": rack.name, "meshes": dict(rack.mesh_specs), "workers": len(rack.workers),
                 "spares": len(rack.spares), "fibres": len(rack.fibres), "lanes": rack.n_lanes},
        "trace": {"source": source, "n_jobs": len(trace)},
        "seed": args.seed, "queue": "backfill" if args.backfill else "fifo",
        "baseline_topology": baseline, "max_lanes": args.max_lanes or rack.n_lanes,
        "failures": {"mtbf_h": args.mtbf_h if math.isfinite(args.mtbf_h) else None, "repair_h": args.repair_h,
                     "checkpoint_h": args.checkpoint_h, "restart_h": args.restart_h,
                     "recovery": args.recovery},
        "step": None if model is None else {"buffer_mb": model.buffer_mb, "compute_ms": model.compute_ms,
                                            "gbps": model.cost.gbps, "alpha_ms": model.cost.alpha_ms},
        "fabric": metrics["fabric"], "baseline": metrics["baseline"],
        "change": {k: change(metrics["fabric"][k], metrics["baseline"][k]) for k in numeric},
        "plot": str(plot) if plot is not None else None,
    }
    if args.json:
        print_json(payload)
        return 0
    print(f"rack {rack.name}: {', '.join(f'{m} = {s}' for m, s in rack.mesh_specs.items())}; "
          f"{len(rack.workers)} workers + {len(rack.spares)} spares, {rack.n_lanes} lanes each, "
          f"{len(rack.fibres)} fibres")
    print(f"trace {source}: {len(trace)} jobs, seed {args.seed}, queue {payload['queue']}, "
          f"MTBF {args.mtbf_h:g} h, repair {args.repair_h:g} h, recovery {args.recovery}; "
          f"baseline {baseline}")
    print("step: fixed durations (no step model)" if model is None else
          f"step: {model.compute_ms:g} ms compute + the collective of {model.buffer_mb:g} MB per rank "
          f"at {model.cost.gbps:g} Gb/s per lane")
    rows = []
    for key, label, unit in ROWS:
        c = payload["change"].get(key)
        rows.append([label, unit, metrics["fabric"][key], metrics["baseline"][key],
                     f"{c:+.0%}" if c is not None else "-"])
    print(table(rows, ["metric", "unit", "fabric", "baseline", "fabric vs baseline"]))
    if plot is not None:
        print(f"plot: {plot}")
    return 0


def timeline_plot(path: str | Path, sims: dict[str, Any], title: str) -> Path:
    """Two stacked panels over simulated time: busy accelerators, jobs waiting; one line per policy."""
    from lab_scripts.plots import _pyplot, _save

    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.2), dpi=120, sharex=True)
    colours = {"fabric": "#1f3d99", "baseline": "#c0392b"}
    for policy, sim in sims.items():
        s = sim.series
        label = f"{policy} (makespan {sim.metrics.makespan_h:.0f} h)"
        top.step(s.time_h, s.busy, where="post", color=colours[policy], lw=1.2, label=label)
        bottom.step(s.time_h, s.queue, where="post", color=colours[policy], lw=1.2)
    top.set_ylabel("busy accelerators")
    bottom.set_ylabel("jobs waiting")
    bottom.set_xlabel("simulated time (h)")
    top.set_title(title, pad=26)
    top.legend(ncol=2, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    for ax in (top, bottom):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)
