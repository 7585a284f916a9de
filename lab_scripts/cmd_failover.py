"""``lumion failover``: fail accelerators or TBUs of a running job and recover (spares, re-routes).

It acts on a running plan (``--plan``, a ``lumion.plan`` file) or places the default ring
first, applies each failure in order, and writes the new plan (``--out``). A failure that
cannot be recovered is refused (exit 3) and the plan written holds every earlier recovery.
With ``--bench`` each recovery is programmed and verified by light
(:mod:`lab_scripts.failover_light`): one light refuses after its repairs exits 5 with the
chip and ``--out`` back at the plan before it; without a bench every recovery says
``verified: "not measured"``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab_scripts.common import add_json_flag, print_json, recovery_changes, seed, table
from lab_scripts.errors import EXIT_UNVERIFIED, CliError, explain, planning, reading
from lab_scripts.fabric_bench import heater_map, open_fabric_bench
from lab_scripts.paths import JSON_SUFFIXES, PLOT_SUFFIXES, output_file, sibling
from photonics.atomic import save_figure
from photonics.errors import LumionError

SCHEMA = "lumion.failover"
VERSION = 1
DEFAULT_VICTIM = "gpu2"  # the demo's failure when no failure, plan or output is given


class _Event(argparse.Action):
    """Collect ``--fail`` and ``--tbu`` in command-line order (failures happen in that order)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: Any, option_string: str | None = None) -> None:
        events = list(getattr(namespace, "events", None) or [])
        events.append(("tbu" if option_string == "--tbu" else "fail", str(values)))
        namespace.events = events


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "failover",
        help="fail accelerators or TBUs of a running job and recover each (spares, re-routes, timed)",
        description="Act on a running plan (--plan, written by --out) or place a ring over the "
        "fabric's non-spare accelerators, then apply the failures in order: --fail ACCEL swaps in a "
        "spare, --tbu TBU re-routes around a failed TBU (or swaps the accelerator whose lane it "
        "cuts). Each recovery re-routes only the links it must, programs only the heaters that "
        "change and reports a modelled timing breakdown. A failure that cannot be recovered exits "
        "3 and the plan written by --out keeps every earlier recovery. A multicast plan (lumion "
        "collective --multicast --out MC.json) is acted on too: --fail a receiver prunes it, with --spare "
        "its branch is spliced to that accelerator (docs/collectives.md). Examples: "
        "lumion failover --out plan.json; lumion failover --plan plan.json --fail gpu5 --fail gpu4 "
        "--out plan2.json --json; lumion failover --plan mc.json --fail gpu2 --spare spare0 --out mc2.json",
    )
    p.add_argument("--fabric", metavar="FILE", help="fabric JSON (lumion.fabric v1); default: the "
                   "smartlight fabric with 8 accelerators and 2 spares")
    p.add_argument("--plan", metavar="PLAN.json", help="the running plan (lumion.plan v1) to act on; "
                   "default: place a ring over the fabric's non-spare accelerators")
    p.add_argument("--fail", action=_Event, dest="events", metavar="ACCEL",
                   help="accelerator that failed; repeat for failures in sequence (with no --fail, "
                   f"--tbu, --plan or --out: {DEFAULT_VICTIM})")
    p.add_argument("--tbu", action=_Event, dest="events", metavar="tbu:R.C.K",
                   help="TBU that failed (in --state); repeat for several, in order with --fail")
    p.add_argument("--state", choices=("dead", "bar", "cross"), default="dead",
                   help="how the --tbu TBUs failed: dead, or stuck in bar or cross (default dead)")
    p.add_argument("--together", action="store_true",
                   help="the --fail accelerators failed at once: choose their spares jointly")
    p.add_argument("--policy", choices=("hitless", "fewest-moves"), default="fewest-moves",
                   help="when no hitless splice closes: refuse (hitless) or re-place the job moving "
                   "the fewest running links (fewest-moves, default)")
    p.add_argument("--spare", metavar="ACCEL",
                   help="with a multicast plan (--plan MC.json, lumion.multicast-plan): splice the failed "
                   "receiver's branch to this accelerator over free TBUs (without: the receiver is pruned); "
                   "point-to-point plans choose their spare themselves")
    p.add_argument("--out", metavar="NEW.json", help="write the resulting plan (lumion.plan v1, or "
                   "lumion.multicast-plan v1 for a multicast plan), atomically; on a refusal it holds the "
                   "recoveries before the refused failure (a multicast plan: nothing is written)")
    p.add_argument("--map", metavar="MAP.json",
                   help="calibration map (lumion calibrate): heater currents from its fit, and the TBUs it "
                   "records as failed or unverified are never routed through, in the placement and in "
                   "every recovery (checked against the fabric's mesh as `lumion route --map` does)")
    p.add_argument("--bench", metavar="FILE.toml",
                   help="program the plan and every recovery on this bench (a bench config, or sim for "
                   "a simulated one) and verify each by light: every link measured against its planned "
                   "received power (3 dB), held links against their reading before (0.5 dB); a link "
                   "off is repaired around the TBUs light blames or refused (exit 5, the chip put back; "
                   "a multicast branch off or held branch moved: refused, the chip put back)")
    p.add_argument("--seed", type=seed, default=None, help="chip seed for a simulated --bench")
    p.add_argument("--light", choices=("repair", "report"), default="repair",
                   help="with --bench, a recovery light rejects is repaired or refused (repair, default) "
                   "or kept and reported verified: off, exit 5 (report)")
    p.add_argument("--park-freed", action="store_true",
                   help="park the TBUs the old links no longer use (more heater writes)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the mesh after the last recovery; a "
                   "recovery timeline goes next to it (FILE-timeline.png)")
    add_json_flag(p)
    p.set_defaults(run=run, events=None)


def _outcome(report: dict[str, Any]) -> str:
    """The spare(s) brought in, or what a TBU repair did."""
    return report["spare"] or ("re-routed" if report["rerouted_links"] else "no link affected")


# A stage shorter than this share of the longest recovery is a sliver on the bar: it gets
# a marker, and every stage's time is in the legend (the worst over the recoveries drawn).
THIN_STAGE = 0.01


def timeline_plot(path: str | Path, recoveries: list[dict[str, Any]], title: str) -> Path:
    """Stacked horizontal bars: one per recovery, one segment per timing stage (ms, log-free)."""
    from lab_scripts.plots import _pyplot

    plt = _pyplot()
    stages = ["detect", "compute", "write", "settle", "relock", "verify"]
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, 1.7 + 0.6 * len(recoveries)), dpi=120)
    longest = max(sum(r["timing_ms"][s] for s in stages) for r in recoveries)
    for k, rec in enumerate(recoveries):
        left = 0.0
        for i, s in enumerate(stages):
            w = rec["timing_ms"][s]
            worst = max(r["timing_ms"][s] for r in recoveries)
            ax.barh(k, w, left=left, color=colours(i), label=f"{s} {worst:.2g} ms" if k == 0 else None)
            if w < THIN_STAGE * longest:  # too thin to see: a tick above the bar in its colour
                ax.plot(left + w / 2, k - 0.5, marker="v", color=colours(i), ms=6, ls="none")
            left += w
        ax.text(left, k, f"  {left:.1f} ms", va="center", fontsize=8)
    labels = [f"{r['failed']} -> {_outcome(r)}" for r in recoveries]
    ax.set_yticks(range(len(recoveries)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time since the failure (ms, modelled; compute measured)")
    ax.set_title(title, pad=26)  # room for the legend between the title and the bars
    ax.legend(ncol=6, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_xlim(0, longest * 1.25)
    fig.tight_layout()
    out = Path(path)
    save_figure(fig, out)
    plt.close(fig)
    return out


def draw_plan(path: str | Path, mesh: Any, plan: Any, title: str, highlight: tuple[int, ...] = (),
              fabric: Any = None) -> Path:
    """The mesh with every link of ``plan`` drawn; re-routed links are marked with ``*``.

    With ``fabric``, each accelerator's lanes are named at their ports, coloured by
    whether it is in the job, a spare, or out (failed).
    """
    from lab_scripts.plots import fabric_marks, mesh_drawing

    drawn = [{"label": f"{a}->{b}{' *' if i in highlight else ''}", "tbus": list(lk.route.tbus)}
             for i, (lk, (a, b)) in enumerate(zip(plan.links, plan.job.links, strict=True))]
    marks = fabric_marks(fabric, plan.job.accelerators) if fabric is not None else None
    return mesh_drawing(path, mesh, drawn, plan.failed_tbus, title, marks)


def _events(args: argparse.Namespace, fabric: Any) -> list[tuple[str, Any]]:
    """The failures to apply, checked against the fabric before anything runs."""
    events = list(args.events or [])
    if not events and args.plan is None and args.out is None:
        events = [("fail", DEFAULT_VICTIM)]
    known = list(fabric.names)
    for kind, name in events:  # a well-formed option naming nothing there is bad input (exit 2)
        if kind == "fail" and name not in known:
            raise CliError(f"--fail {name}: no such accelerator in {fabric.name}; "
                           f"choose from {', '.join(known)}", "input", "FabricError")
        if kind == "tbu":
            try:
                fabric.mesh.tbu_index(name)
            except Exception as exc:  # MeshSpecError (a LumionError) with the names it knows
                raise CliError(f"--tbu {name}: {explain(exc)}", "input", type(exc).__name__) from None
    if args.together:
        names = [n for k, n in events if k == "fail"]
        events = [("together", names)] + [e for e in events if e[0] == "tbu"] if names else events
    return events


def _apply(fabric: Any, plan: Any, event: tuple[str, Any], args: argparse.Namespace, hmap: Any) -> Any:
    """One recovery (a Recovery) for one failure event."""
    from photonics.fabric import fail_tbu, failover

    kind, what = event
    if kind == "tbu":
        return fail_tbu(fabric, plan, what, args.state, heater_map=hmap, policy=args.policy)
    return failover(fabric, plan.job, what, plan, heater_map=hmap, park_freed=args.park_freed,
                    policy=args.policy)


def _describe(event: tuple[str, Any], args: argparse.Namespace) -> str:
    kind, what = event
    if kind == "tbu":
        return f"--tbu {what} ({args.state})"
    if kind == "together":
        return "--fail " + " --fail ".join(what) + " (together)"
    return f"--fail {what}"


def run(args: argparse.Namespace) -> int:
    """Load or place the plan, apply the failures in order, save and report."""
    from photonics.fabric import (
        Fabric,
        FabricError,
        default_fabric,
        load_plan,
        place_job,
        ring_job,
        save_plan,
    )

    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    out_path = output_file(args.out, "--out", JSON_SUFFIXES) if args.out is not None else None
    if args.fabric:
        with reading("fabric file", args.fabric):
            fabric = Fabric.load(args.fabric)
    else:
        fabric = default_fabric()
    if args.plan is not None and is_multicast_file(args.plan):
        from lab_scripts.failover_multicast import run_multicast

        return run_multicast(args, fabric if args.fabric else None)
    if args.spare is not None:
        raise CliError(f"--spare {args.spare}: it splices a receiver of a multicast plan (--plan MC.json); "
                       "point-to-point failover chooses its spare itself: drop --spare", "input",
                       "UsageError")
    events = _events(args, fabric)
    mesh = fabric.mesh
    hmap = heater_map(args, mesh)
    if args.plan is not None:
        with reading("plan file", args.plan):
            plan = load_plan(args.plan, fabric)
        if plan.heater_unit == "rad" and args.map is not None:  # phases and mA would mix
            raise CliError(f"--map: {args.plan} holds heater phases (rad), made without a heater map; "
                           "place the job again with --map (lumion failover --map MAP --out PLAN)",
                           "input", "PlanError")
        if plan.heater_unit == "rad":  # a plan made without a heater map stays in phases
            hmap = None
    else:
        with planning(FabricError):  # the fabric is valid: a refusal is a ring it cannot carry
            plan = place_job(fabric, ring_job(fabric.workers, "ring"), heater_map=hmap)
    run_ = _bench_run(args, fabric, plan)
    try:
        placed = run_.place(plan) if run_ is not None else None
        reports, rec, plan = _recoveries(fabric, plan, events, args, hmap, run_, out_path)
    finally:
        if run_ is not None:
            run_.close()
    if out_path is not None:
        save_plan(plan, fabric, out_path)
    plots = []
    if plot and rec is not None:
        victims = [_describe(e, args).split(" ", 1)[1] for e in events]
        plots.append(str(draw_plan(plot, mesh, plan, f"the job after {', '.join(victims)} failed and the "
                                              "fabric recovered it", rec.rerouted, fabric)))
        plots.append(str(timeline_plot(sibling(plot, "timeline"), reports, "recovery timeline")))
    placed_off = placed is not None and placed["status"] == "off"
    code = EXIT_UNVERIFIED if placed_off or any(r["verified"] == "off" for r in reports) else 0
    if args.json:
        payload: dict[str, Any] = {"schema": SCHEMA, "version": VERSION, **(reports[-1] if reports else {})}
        if not reports:  # nothing failed: the placed (or loaded) plan's job and links
            payload.update({"job": plan.job.to_dict(), "links": [lk.to_dict(mesh) for lk in plan.links]})
        payload.update({"fabric": fabric.name, "failovers": reports, "plot": plots,
                        "plan": str(out_path) if out_path is not None else None,
                        "worst_margin_db": plan.worst_margin_db, "placement_verification": placed})
        print_json(payload)
    else:
        if placed is not None:
            _print_placement(placed)
        _print_text(reports, plan, out_path, plots, "calibrated" if args.map is not None else "ideal")
    if code:  # with --json too: the one stderr line of exit 5, as `lumion program` prints it
        print(f"lumion failover: {off_line(reports, placed)}", file=sys.stderr)
    return code


def off_line(reports: list[dict[str, Any]], placed: dict[str, Any] | None) -> str:
    """Why light did not accept the placement or a recovery kept with ``--light report`` (the
    stderr line of exit 5): the links off their plan and the held links that moved (by how
    much), then what to do.
    """
    from lab_scripts.failover_light import dark_line

    dark = dark_line(placed, "the placement (placement_verification)") or next(
        (line for r in reports if (line := dark_line(r["verification"], f"the recovery from {r['failed']}"))),
        None)
    if dark:
        return dark
    if placed is not None and placed["status"] == "off":
        v, what = placed, "the placement (placement_verification)"
    else:
        v, what = next(r["verification"] for r in reports if r["verified"] == "off"), "the recovery"
    off = [x["link"] + (f" ({x['reason']})" if x["reason"] else "")  # a dark transmitter: said
           for x in v["links"] if x["status"] == "off"]
    hit = [f"{x['link']} {x['change_db']:+.2f} dB" for x in v["links"] if x["status"] == "hit"]
    said = []
    if off:
        said.append(f"links off their plan (beyond {v['tolerance_db']:g} dB or crosstalk): {', '.join(off)}")
    if hit:
        said.append(f"held links moved beyond {v['held_tolerance_db']:g} dB: {', '.join(hit)}")
    return (f"light did not accept {what}: {'; '.join(said)}; calibrate the chip (lumion calibrate) and "
            "give --map")


def is_multicast_file(path: str) -> bool:
    """Whether ``path`` declares itself a multicast plan (an unreadable file is not: the plan
    loader then says what is wrong with it).
    """
    import json

    from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
    from photonics.fabric.multicast_io import is_multicast_plan

    try:
        return is_multicast_plan(json.loads(read_text(path, DATA_FILE_MAX_BYTES, "plan file")))
    except (OSError, ValueError, RecursionError, LumionError):
        return False


def _bench_run(args: argparse.Namespace, fabric: Any, plan: Any) -> Any:
    """The opened bench of ``--bench`` (None without): checked against the fabric and the plan."""
    if args.bench is None:
        return None
    from lab_scripts.failover_light import BenchRun
    from photonics.fabric import TimingModel

    if plan.heater_unit == "rad":
        raise CliError("--bench: the plan holds heater phases (rad), made without a heater map; place the "
                       "job again without --plan (or with --map)", "input", "PlanError")
    bench = open_fabric_bench(args, fabric)
    return BenchRun(bench, fabric, TimingModel().settle_ms() / 1e3, repair=args.light == "repair")


def _recoveries(fabric: Any, plan: Any, events: list[tuple[str, Any]], args: argparse.Namespace, hmap: Any,
                run_: Any, out_path: Path | None) -> tuple[list[dict[str, Any]], Any, Any]:
    """Apply every failure in order (programmed and verified by light with a bench):
    (each recovery's report, the last recovery, the plan after them).
    """
    from lab_scripts.failover_light import unmeasured
    from photonics.fabric import FabricError, save_plan
    from photonics.fabric.verify import VerificationError

    reports: list[dict[str, Any]] = []
    rec = None
    for k, event in enumerate(events):
        try:
            if run_ is None:
                rec = _apply(fabric, plan, event, args, hmap)
                light = unmeasured(rec)
            else:
                rec, light = run_.recover(plan, lambda p, e=event: _apply(fabric, p, e, args, hmap))
        except FabricError as exc:
            kept = ""
            if out_path is not None:
                save_plan(plan, fabric, out_path)
                kept = (f"; {out_path} holds the plan as it ran before this failure "
                        f"({len(plan.recoveries)} recoveries so far)")
            kind = "unverified" if isinstance(exc, VerificationError) else "impossible"
            raise CliError(f"failure {k + 1} of {len(events)} ({_describe(event, args)}) refused: "
                           f"{explain(exc)}{kept}", kind, type(exc).__name__) from exc
        reports.append({**rec.to_dict(fabric.mesh), **light})
        plan = rec.plan
    return reports, rec, plan


def _print_placement(v: dict[str, Any]) -> None:
    """What light said of the placed plan (every link new light: its power and its ACR judged)."""
    bad = [x for x in v["links"] if x["status"] != "ok"]
    worst = min((x["acr_db"] for x in v["links"] if x["acr_db"] is not None), default=None)
    acr = f", lowest ACR {worst:.1f} dB" if worst is not None else ""
    print(f"placement verified by light: {v['status']} (tolerance {v['tolerance_db']:g} dB{acr})")
    if v.get("dark"):
        print(f"NOT verified by light: {v['dark']}")
    if bad:
        print(table([(x["link"], x["meter"] or "", x["planned_dbm"], x["measured_dbm"], x["difference_db"],
                      "" if x["acr_db"] is None else x["acr_db"], x["status"]) for x in bad],
                    ["link", "meter", "planned dBm", "measured dBm", "diff dB", "ACR dB", "status"]))


def _print_light(r: dict[str, Any]) -> None:
    """What light said of one recovery: verified, and each new (or off) link measured vs planned."""
    v = r["verification"]
    if r["verified"] == "not measured":
        print(f"verified by light: not measured ({v['links'][0]['reason'] if v['links'] else 'no links'})")
        return
    around = f"; routed around suspect TBUs {', '.join(r['suspect_tbus'])}" if r["suspect_tbus"] else ""
    print(f"verified by light: {r['verified']} (tolerance {v['tolerance_db']:g} dB, held "
          f"{v['held_tolerance_db']:g} dB; {len(r['light_attempts'])} attempt(s){around})")
    rows = [x for x in v["links"] if x["rerouted"] or x["status"] != "ok"]
    print(table([(x["link"], x["meter"] or "", x["planned_dbm"], x["measured_dbm"], x["difference_db"],
                  "" if x["change_db"] is None else x["change_db"], x["status"]) for x in rows],
                ["link", "meter", "planned dBm", "measured dBm", "diff dB", "moved dB", "status"]))
    if v.get("dark"):
        print(f"NOT verified by light: {v['dark']}")
    if v["hitless_by_light"] is False:
        moved = ", ".join(f"{x['link']} {x['change_db']:+.2f} dB" for x in v["links"] if x["status"] == "hit")
        print(f"NOT hitless by light: held links moved beyond {v['held_tolerance_db']:g} dB: {moved}")


def _print_text(reports: list[dict[str, Any]], plan: Any, out_path: Path | None, plots: list[str],
                map_name: str) -> None:
    """The human-readable report: each recovery, its timing, then the links as they run.

    ``map_name`` is what the currents were computed through: "calibrated" with ``--map``, else "ideal".
    """
    for r in reports:
        t = r["timing_ms"]
        moved = ", ".join(m["link"] for m in r["moved_links"])
        how = "hitless" if r["hitless"] else f"NOT hitless: moved {moved}"
        changes = recovery_changes(len(r["changed_tbus"]), len(r["changed_heaters"]), r["heater_unit"],
                                   map_name)
        print(f"{r['failed']} failed -> {_outcome(r)}: re-routed "
              f"{', '.join(r['rerouted_links']) or 'nothing'}; {changes}; {how}")
        stages = ("detect", "compute", "write", "settle", "relock", "verify", "total")
        print(table([(s, t[s]) for s in stages], ["stage", "ms"]))
        _print_light(r)
    print(table([(lk.link[0] + "->" + lk.link[1], len(lk.route.hops), lk.loss_db, lk.acr_db, lk.margin_db)
                 for lk in plan.links], ["link", "TBUs", "loss dB", "ACR dB", "margin dB"]))
    for path in ([str(out_path)] if out_path is not None else []) + plots:
        print(f"wrote {path}")
