"""``lumion campaign``: what-if campaigns (chip yield, availability under failures) on Dask."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from lab_scripts.common import UsageError, add_json_flag, positive, print_json, seed, table
from lab_scripts.paths import PLOT_SUFFIXES, output_file
from photonics.tolerances import REQUIRED_MARGIN_DB

SCHEMA = "lumion.campaign"
VERSION = 1
KINDS = ("yield", "availability", "capacity")
TABLE_SUFFIXES = (".csv", ".parquet")


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected numbers >= 0 separated by commas, not {text!r}")
    return values


def _hours_list(text: str) -> list[float]:
    """Comma-separated hours > 0 (``inf``: no failures)."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected hours > 0 (inf: no failures) separated by commas, "
                                         f"not {text!r}")
    return values


def _names(text: str) -> list[str]:
    values = [x.strip() for x in text.split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected names separated by commas, not {text!r}")
    return values


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "campaign",
        help="what-if campaigns on Dask: chip yield, availability under failures, capacity and "
        "fragmentation (fabric vs baseline)",
        description="Run many seeded simulations on Dask (the local processes scheduler by default, a "
        "dask.distributed cluster with --scheduler) and write a table and a plot; results never depend "
        "on the number of workers (docs/campaigns.md). Example: "
        "lumion campaign --kind yield --mesh smartlight --chips 40 --seed 1 --json",
    )
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("--seed", type=seed, default=1, help="campaign seed (default 1)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="a running dask scheduler")
    p.add_argument("--workers", type=positive, default=1, help="local worker processes (default 1)")
    p.add_argument("--out", metavar="FILE.csv|.parquet", help="write the per-task table")
    p.add_argument("--plot", metavar="FILE.png", help="write the campaign's plot")
    y = p.add_argument_group("yield")
    y.add_argument("--mesh", default="smartlight", help="mesh spec(s), comma-separated (default smartlight); "
                   "also the capacity kind's mesh axis")
    y.add_argument("--chips", type=positive, default=40, help="fabricated chips per grid point (default 40)")
    y.add_argument("--accelerators", type=positive, default=8, help="workers in the ring job (default 8)")
    y.add_argument("--spares", type=int, default=2, help="spare accelerators (default 2)")
    y.add_argument("--margin-db", type=float, default=REQUIRED_MARGIN_DB,
                   help=f"required link margin, dB (default {REQUIRED_MARGIN_DB:g})")
    y.add_argument("--min-acr-db", type=float, default=25.0,
                   help="required attenuation-to-crosstalk ratio, dB (default 25)")
    y.add_argument("--loss-spread-db", type=_floats, default=[0.03],
                   help="per-TBU loss standard deviation(s), dB, comma-separated (default 0.03)")
    y.add_argument("--er-spread", type=_floats, default=[0.003],
                   help="coupler kappa standard deviation(s), setting the extinction spread (default 0.003)")
    a = p.add_argument_group("availability and capacity")
    a.add_argument("--traces", type=positive, default=8,
                   help="synthetic traces = seeds per grid point (default 8)")
    a.add_argument("--jobs", type=positive, default=10, help="jobs per trace (default 10)")
    a.add_argument("--mtbf-h", type=_hours_list, default=None, metavar="H[,H...]",
                   help="mean time between failures per accelerator, hours, comma-separated for a sweep "
                   "(inf: none; default: availability the rack model's 500, capacity inf)")
    a.add_argument("--recovery", type=_names, default=["requeue"], metavar="R[,R...]",
                   help="a failed job that is not spliced: requeue (restart from its checkpoint on free "
                   "accelerators) and/or wait (for the repair); default requeue")
    a.add_argument("--fixed-duration", action="store_true",
                   help="availability: every job runs its duration_h whatever it holds (no step model; "
                   "with --recovery wait, the model before issue 30)")
    a.add_argument("--workload", type=_names, default=["mixed"], metavar="W[,W...]",
                   help="capacity: rings, mixed (the synthetic default), all-to-all (default mixed)")
    a.add_argument("--baseline", type=_names, default=["ring"], metavar="B[,B...]",
                   help="capacity: fixed topologies compared with, ring and/or torus:RxC (default ring)")
    add_json_flag(p)
    p.set_defaults(run=run)


def _yield_tasks(args: argparse.Namespace) -> list[Any]:
    from campaigns.yield_kind import yield_tasks

    if args.spares < 0:
        raise UsageError(f"--spares must be >= 0, not {args.spares}")
    meshes = [m.strip() for m in args.mesh.split(",") if m.strip()]
    return yield_tasks(meshes, args.loss_spread_db, args.er_spread, chips=args.chips, seed=args.seed,
                       workers=args.accelerators, spares=args.spares, margin_db=args.margin_db,
                       min_acr_db=args.min_acr_db)


def run(args: argparse.Namespace) -> int:
    """Run the campaign and report."""
    from campaigns import run_tasks
    from campaigns.tables import write_table

    out = output_file(args.out, "--out", TABLE_SUFFIXES) if args.out else None
    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot else None
    fn, tasks = _tasks(args)
    t0 = time.perf_counter()
    used: dict[str, Any] = {}
    rows = run_tasks(fn, tasks, scheduler=args.scheduler, workers=args.workers, label=f"campaign {args.kind}",
                     used=used)
    seconds = time.perf_counter() - t0
    if out:
        write_table(rows, out)
    payload: dict[str, Any] = {"schema": SCHEMA, "version": VERSION, "kind": args.kind, "seed": args.seed,
                               "scheduler": args.scheduler or "local-processes",
                               "workers": used["workers"],
                               "n_tasks": len(tasks), "seconds": seconds}
    if args.kind == "yield":
        payload |= _yield_payload(args, rows, plot)
    elif args.kind == "availability":
        payload |= _availability_payload(rows, plot)
    else:
        payload |= _capacity_payload(rows, plot)
    payload |= {"out": str(out) if out else None, "plot": str(plot) if plot else None}
    if args.json:
        print_json(payload)
        return 0
    _print_human(args, payload)
    return 0


def _tasks(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The task function and payloads of the campaign kind asked for."""
    if args.kind == "yield":
        from campaigns.yield_kind import chip_task

        return chip_task, _yield_tasks(args)
    if args.kind == "availability":
        from campaigns.availability_kind import availability_tasks, trace_task

        return trace_task, availability_tasks(traces=args.traces, jobs=args.jobs, seed=args.seed,
                                              mtbfs=args.mtbf_h, recoveries=args.recovery,
                                              fixed_duration=args.fixed_duration)
    from campaigns.capacity_kind import capacity_task, capacity_tasks

    if args.mtbf_h is not None and len(args.mtbf_h) > 1:
        raise UsageError("--kind capacity takes one --mtbf-h (failures are not its axis)")
    meshes = [m.strip() for m in args.mesh.split(",") if m.strip()]
    return capacity_task, capacity_tasks(meshes=meshes, workloads=args.workload, baselines=args.baseline,
                                         traces=args.traces, jobs=args.jobs, seed=args.seed,
                                         mtbf_h=args.mtbf_h[0] if args.mtbf_h else math.inf)


def _yield_payload(args: argparse.Namespace, rows: list[dict[str, Any]], plot: Any) -> dict[str, Any]:
    from campaigns.yield_kind import yield_summary

    if plot:
        from campaigns.plots import save, yield_figure

        save(yield_figure(rows, args.margin_db, args.min_acr_db), plot)
    return {"yield": sum(r["ok"] for r in rows) / len(rows), "n_chips": len(rows),
            "margin_db": args.margin_db, "min_acr_db": args.min_acr_db, "accelerators": args.accelerators,
            "spares": args.spares, "groups": yield_summary(rows)}


def _availability_payload(rows: list[dict[str, Any]], plot: Any) -> dict[str, Any]:
    from campaigns.availability_kind import HEADLINE, availability_summary

    summary = availability_summary(rows)
    if plot:
        from campaigns.plots import availability_figure, mtbf_figure, save

        if len(summary["points"]) == 1:
            save(availability_figure(rows, HEADLINE[:4]), plot)
        else:
            save(mtbf_figure(summary["points"], ("throughput_jobs_per_h", "goodput_acc_h_per_h")), plot)
    return {"n_traces": len({r["trace"] for r in rows}), "failures": sum(r["failures"] for r in rows),
            **summary}


def _capacity_payload(rows: list[dict[str, Any]], plot: Any) -> dict[str, Any]:
    from campaigns.capacity_kind import capacity_summary

    groups = capacity_summary(rows)
    if plot:
        from campaigns.plots import capacity_figure, save

        save(capacity_figure(groups), plot)
    return {"n_traces": len({r["trace"] for r in rows}), "failures": sum(r["failures"] for r in rows),
            "capacity": groups}


def _pm(ci: dict[str, Any], digits: int = 3) -> str:
    """``mean ± half-width`` of an interval (just the mean when there is no half-width)."""
    if ci["mean"] is None:
        return "n/a"
    if ci["half_width"] is None:
        return f"{ci['mean']:.{digits}f}"
    return f"{ci['mean']:.{digits}f} ± {ci['half_width']:.{digits}f}"


def _print_human(args: argparse.Namespace, payload: dict[str, Any]) -> None:
    print(f"campaign {args.kind}: {payload['n_tasks']} tasks on {payload['scheduler']} in "
          f"{payload['seconds']:.1f} s (seed {args.seed})")
    if args.kind == "yield":
        rows = [(g["mesh"], f"{g['loss_spread_db']:g}", f"{g['kappa_spread']:g}", g["n_chips"], g["yield"])
                for g in payload["groups"]]
        print(table(rows, ["mesh", "loss sd dB", "kappa sd", "chips", "yield"]))
        print(f"yield {payload['yield']:.3f} over {payload['n_chips']} chips "
              f"(margin >= {args.margin_db:g} dB, "
              f"ACR >= {args.min_acr_db:g} dB, {args.spares} spare(s))")
    elif args.kind == "availability":
        rows = []
        for pt in payload["points"]:
            for k in ("throughput_jobs_per_h", "goodput_acc_h_per_h", "step_rate", "fragmentation"):
                pair = pt["paired"][k]
                # fragmentation is often 0 on the baseline: compare it by difference, not ratio
                versus = f"{_pm(pair['difference'])} (diff)" if k == "fragmentation" else _pm(pair["ratio"])
                mean = pt["policies"]
                rows.append((f"{pt['mtbf_h'] or 'inf'}", pt["recovery"], k, _pm(mean["fabric"][k]),
                             _pm(mean["baseline"][k]), versus, f"{pair['fabric_lower']}/{pair['n']}"))
        print(table(rows, ["MTBF h", "recovery", "metric", "fabric", "baseline",
                           "fabric vs baseline per trace", "fabric lower"]))
        print("± : 95 % interval over the traces (Student t)")
    else:
        rows = [(g["mesh"], g["workload"], g["baseline"], _pm(g["fabric"]["fragmentation"]),
                 _pm(g["baseline_metrics"]["fragmentation"]), _pm(g["paired"]["fragmentation"]["difference"]),
                 _pm(g["paired"]["throughput_jobs_per_h"]["ratio"])) for g in payload["capacity"]]
        print(table(rows, ["mesh", "workload", "baseline", "fabric frag", "baseline frag", "difference",
                           "throughput fabric/baseline"]))
        print("± : 95 % interval over the traces (Student t)")
    for key in ("out", "plot"):
        if payload[key]:
            print(f"wrote {payload[key]}")
