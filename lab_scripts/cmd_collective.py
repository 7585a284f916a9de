"""``lumion collective``: compile a collective into mesh configurations and time it."""

from __future__ import annotations

import argparse
import math
from typing import Any

from lab_scripts.common import (
    UsageError,
    add_json_flag,
    count,
    non_negative_float,
    positive,
    print_json,
    table,
)
from lab_scripts.errors import CliError, planning, reading
from lab_scripts.paths import JSON_SUFFIXES, output_file

SCHEMA = "lumion.collective"
VERSION = 1
BUILT_IN = ("ring", "tree", "halving-doubling", "all-to-all", "straggler", "tree-multicast",
            "broadcast-chain", "broadcast-tree", "broadcast-flat", "allgather-ring", "allgather-flat")
# What --multicast compares a pattern with: the point-to-point schedules of the same collective.
POINT_TO_POINT = {"broadcast": ("broadcast-chain", "broadcast-tree"), "allgather": ("allgather-ring",),
                  "allreduce": ("ring", "tree")}


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, not {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "collective",
        help="compile a collective (ring/tree/halving-doubling/all-to-all/straggler/step file) "
        "into mesh configurations and compare its time with a fixed ring and torus",
        description="Compile a collective into a sequence of mesh configurations (routed, split when "
        "a step does not fit, kept or reconfigured by a small DP) and report its completion time "
        "against the same collective on a fixed ring and torus (docs/collectives.md). Example: "
        "lumion collective --pattern ring --accelerators 8 --size-mb 64",
    )
    p.add_argument("--pattern", required=True, metavar="PATTERN|FILE",
                   help=f"{' | '.join(BUILT_IN)}, or a step file (.json/.toml, lumion.collective-steps)")
    p.add_argument("--accelerators", type=positive, metavar="N",
                   help="number of ranks (required for built-in patterns; a step file gives its own)")
    p.add_argument("--size-mb", type=_positive_float, default=64.0, metavar="M",
                   help="buffer per rank, MB (1e6 bytes; default 64)")
    p.add_argument("--mesh", default="smartlight", help="smartlight | hex:RxC | ... (default smartlight)")
    p.add_argument("--gbps", type=_positive_float, default=10.0, help="circuit rate, Gb/s (default 10)")
    p.add_argument("--alpha-us", type=non_negative_float, default=10.0,
                   help="latency per message hop, us (default 10)")
    p.add_argument("--relock-ms", type=non_negative_float, default=None,
                   help="receiver re-lock per switch, ms (default: the lanes' own, 5 ms)")
    p.add_argument("--fixed-gbps", type=_positive_float, default=None,
                   help="the fixed ring/torus links' rate, Gb/s (default: --gbps)")
    p.add_argument("--fixed-alpha-us", type=non_negative_float, default=None,
                   help="the fixed topology's latency per hop, us (default: --alpha-us)")
    p.add_argument("--straggler", type=count, default=None, metavar="RANK",
                   help="the late rank (default: the last rank, for --pattern straggler)")
    p.add_argument("--lag-ms", type=non_negative_float, default=0.0,
                   help="how late the straggler joins, ms (default 0)")
    p.add_argument("--multicast", action="store_true",
                   help="let a step that sends one chunk to several ranks run on optical multicast trees "
                   "(tunable splitters, split loss in each branch's budget) where that is faster; compares "
                   "with the point-to-point schedules of the same collective (docs/collectives.md)")
    p.add_argument("--transceiver", default=None, metavar="PROFILE",
                   help="lane profile of every accelerator (default dwdm-10g-zr; its power budget decides "
                   "how wide a multicast tree can split)")
    p.add_argument("--out", metavar="MC.json",
                   help="with --multicast: write the first configuration of trees the schedule runs as a "
                   "multicast plan (lumion.multicast-plan v1), atomically; `lumion failover --plan MC.json "
                   "--fail ACCEL [--spare ACCEL]` acts on it")
    add_json_flag(p)
    p.set_defaults(run=run)


def _collective(args: argparse.Namespace) -> Any:
    """The collective ``--pattern`` names (a photonics Collective, imported lazily)."""
    from dataclasses import replace

    from photonics.collectives import by_pattern, load_steps, straggler_allreduce

    if args.pattern not in BUILT_IN:
        with reading("step file", args.pattern):
            coll = load_steps(args.pattern)
        if args.accelerators is not None and args.accelerators != coll.n_ranks:
            raise UsageError(f"{args.pattern} is a schedule for {coll.n_ranks} ranks, not --accelerators "
                             f"{args.accelerators}; drop --accelerators or make them agree")
    elif args.accelerators is None:
        raise UsageError(f"--pattern {args.pattern} needs --accelerators N")
    elif args.pattern == "straggler":
        _check_rank(args.straggler, args.accelerators)
        return straggler_allreduce(args.accelerators, args.straggler, args.lag_ms)
    else:
        coll = by_pattern(args.pattern, args.accelerators)
    _check_rank(args.straggler, coll.n_ranks)
    if args.lag_ms:
        slow = coll.n_ranks - 1 if args.straggler is None else args.straggler
        coll = replace(coll, lag_ms={slow: args.lag_ms})
    return coll


def _check_rank(rank: int | None, n_ranks: int) -> None:
    """Bad input (exit 2) for a ``--straggler`` that names no rank of the collective."""
    if rank is not None and not 0 <= rank < n_ranks:
        raise CliError(f"--straggler {rank} is not a rank of the {n_ranks}-rank collective; "
                       f"give 0..{n_ranks - 1}", "input", "CollectiveError")


def run(args: argparse.Namespace) -> int:
    """Compile and report."""
    from photonics.collectives import CollectiveError, CostModel, compile_collective, rank_names

    if args.out is not None and not args.multicast:
        raise UsageError("--out writes a multicast plan: give --multicast too")
    out = output_file(args.out, "--out", JSON_SUFFIXES) if args.out is not None else None
    coll = _collective(args)
    with planning(CollectiveError):
        fabric = _fabric(args, coll.n_ranks)
        names = rank_names(fabric, coll.n_ranks)
        cost = CostModel(alpha_ms=args.alpha_us / 1e3, gbps=args.gbps, relock_ms=args.relock_ms)
        fixed_alpha_us = args.alpha_us if args.fixed_alpha_us is None else args.fixed_alpha_us
        fixed = CostModel(alpha_ms=fixed_alpha_us / 1e3,
                          gbps=args.gbps if args.fixed_gbps is None else args.fixed_gbps)
        result = compile_collective(coll, fabric, names, size_bytes=args.size_mb * 1e6, cost=cost,
                                    fixed_cost=fixed, multicast=args.multicast)
        others = _point_to_point(args, coll, fabric, names, cost, fixed) if args.multicast else {}
        written = _write_multicast(out, result, fabric) if out is not None else None
    ring = result.fixed_ms.get("ring")
    payload = {"schema": SCHEMA, "version": VERSION, "pattern": args.pattern, "accelerators": coll.n_ranks,
               "size_mb": args.size_mb, **result.to_dict(),
               "speedup_vs_fixed_ring": (ring / result.completion_ms) if ring else None}
    if args.multicast:
        best = min(others.items(), key=lambda kv: kv[1]) if others else None
        payload["point_to_point_ms"] = others
        payload["speedup_vs_point_to_point"] = best[1] / result.completion_ms if best else None
    if out is not None:
        payload["multicast_plan"] = str(out)
    if args.json:
        print_json(payload)
        return 0
    print(f"{coll.name} {coll.kind} over {coll.n_ranks} ranks on {fabric.name}: {len(coll.steps)} steps, "
          f"{len(result.rounds)} rounds, {len(result.configs)} configurations routed, "
          f"{args.size_mb:g} MB per rank at {args.gbps:g} Gb/s")
    rows = [(k + 1, r.label, r.config, r.to_dict()["mode"], r.switch_ms, r.end_ms - r.start_ms, r.end_ms)
            for k, r in enumerate(result.rounds)]
    print(table(rows, ["#", "step", "config", "mode", "switch ms", "transfer ms", "ends at ms"]))
    torus = result.fixed_ms.get("torus")
    print(f"completion {result.completion_ms:.2f} ms per run (steady state; {result.switches} switch(es), "
          f"{result.switch_ms:.2f} ms switching); first run from a parked chip {result.first_run_ms:.2f} ms")
    torus_text = f"{torus:.2f} ms (4 lanes per rank)" if torus is not None else "n/a (no 2-D torus)"
    print(f"fixed ring {ring:.2f} ms; fixed torus {torus_text}")
    if args.multicast:
        _print_multicast(result, others)
    if coll.name == "straggler":
        _compare_with_late_ring(coll, fabric, names, args, cost, fixed, result.completion_ms)
    if written is not None:
        print(f"wrote {out}: {written}")
    return 0


def _write_multicast(out: Any, result: Any, fabric: Any) -> str:
    """Write the schedule's first configuration of trees (in run order) as a multicast plan.

    It is planned again with :func:`~photonics.fabric.multicast.plan_multicast` (the compiler
    keeps configurations, not plans) and must come out as the configuration the schedule
    runs: routing is deterministic, and a difference is a bug, never written silently.
    Returns what was written, in words. CollectiveError when no round ran on trees.
    """
    import numpy as np

    from photonics.collectives import CollectiveError
    from photonics.fabric.multicast import plan_multicast
    from photonics.fabric.multicast_io import RunningMulticast, save_multicast

    names = result.ranks
    first = next((r for r in result.rounds if r.multicast), None)
    if first is None:
        raise CollectiveError("--out: no round of this schedule runs on multicast trees (point to point was "
                              "faster, or no tree closed its budget); nothing written")
    cs = result.configs[first.config]
    groups = [(names[s], [names[d] for d in ds]) for s, ds in cs.trees]
    plan = plan_multicast(fabric, groups)
    if not np.array_equal(plan.configuration.cross_fraction, cs.configuration.cross_fraction):
        raise CollectiveError("internal: the multicast plan routed again differs from the schedule's "
                              "configuration; nothing written")
    save_multicast(RunningMulticast(plan), fabric, out)
    trees = ", ".join(f"{s}->{'+'.join(ds)}" for s, ds in plan.groups)
    return (f"configuration {cs.index} (round {first.step + 1}, {first.label}): {trees}; worst branch margin "
            f"{plan.worst_margin_db:.2f} dB")


def _compare_with_late_ring(coll: Any, fabric: Any, names: list[str], args: argparse.Namespace, cost: Any,
                            fixed: Any, straggler_ms: float) -> None:
    """Print what a plain ring all-reduce, started when the straggler arrives, would take."""
    from dataclasses import replace

    from photonics.collectives import compile_collective, ring_allreduce

    late = replace(ring_allreduce(coll.n_ranks), lag_ms=coll.lag_ms)
    ring = compile_collective(late, fabric, names, size_bytes=args.size_mb * 1e6, cost=cost, fixed_cost=fixed)
    better = "straggler-aware" if straggler_ms < ring.completion_ms else "plain ring"
    print(f"plain ring all-reduce waiting for the straggler: {ring.completion_ms:.2f} ms on the mesh "
          f"({better} is faster at this lag)")


def _fabric(args: argparse.Namespace, n: int) -> Any:
    """The slot fabric of ``--mesh`` with ``--transceiver`` on every lane."""
    from photonics.budget import transceiver_profile
    from photonics.collectives import slot_fabric
    from photonics.errors import BudgetError

    if args.transceiver is None:
        return slot_fabric(args.mesh, n)
    try:
        lane = transceiver_profile(args.transceiver)
    except BudgetError as exc:
        raise CliError(str(exc), "input", "BudgetError") from None
    return slot_fabric(args.mesh, n, transceiver=lane)


def _point_to_point(args: argparse.Namespace, coll: Any, fabric: Any, names: list[str], cost: Any,
                    fixed: Any) -> dict[str, float]:
    """Completion (ms) of the collective compiled point to point, and of its usual schedules."""
    from photonics.collectives import by_pattern, compile_collective

    out = {f"{coll.name} (point to point)": compile_collective(
        coll, fabric, names, size_bytes=args.size_mb * 1e6, cost=cost, fixed_cost=fixed).completion_ms}
    for pattern in POINT_TO_POINT.get(coll.kind, ()):
        if pattern != coll.name:
            other = by_pattern(pattern, coll.n_ranks)
            out[pattern] = compile_collective(other, fabric, names, size_bytes=args.size_mb * 1e6, cost=cost,
                                              fixed_cost=fixed).completion_ms
    return out


def _print_multicast(result: Any, others: dict[str, float]) -> None:
    """How much of the run used multicast trees, and the point-to-point schedules' times."""
    widest = max((len(ds) for c in result.configs for _, ds in c.trees), default=0)
    used = result.multicast_rounds
    print(f"multicast: {used} of {len(result.rounds)} round(s) ran on trees" +
          (f" (widest tree routed: 1 to {widest})" if widest else " (no tree closed its budget or paid)"))
    for name, ms in others.items():
        print(f"  point to point, {name}: {ms:.2f} ms ({ms / result.completion_ms:.2f}x the multicast time)")
