"""``lumion failover``: fail accelerators of a running ring job and splice in spares, hitlessly."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab_scripts.common import UsageError, add_json_flag, print_json, table
from lab_scripts.errors import planning, reading
from lab_scripts.paths import PLOT_SUFFIXES, output_file, sibling
from photonics.atomic import save_figure


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "failover",
        help="fail accelerators of a ring job and recover each with a spare (hitless, timed)",
        description="Place a ring over the fabric's non-spare accelerators, then fail the given "
        "accelerators one after another; each recovery re-routes only the failed accelerator's "
        "links, programs only the heaters that change, and reports a modelled timing breakdown. "
        "Example: lumion failover --fail gpu2 --fail gpu5 --json",
    )
    p.add_argument("--fabric", metavar="FILE", help="fabric JSON (lumion.fabric v1); default: the "
                   "smartlight fabric with 8 accelerators and 2 spares")
    p.add_argument("--fail", action="append", metavar="ACCEL", help="accelerator to fail; repeat for "
                   "failures in sequence (default: gpu2)")
    p.add_argument("--park-freed", action="store_true",
                   help="park the TBUs the old links no longer use (more heater writes)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the mesh after the last recovery; a "
                   "recovery timeline goes next to it (FILE-timeline.png)")
    add_json_flag(p)
    p.set_defaults(run=run)


def timeline_plot(path: str | Path, recoveries: list[dict[str, Any]], title: str) -> Path:
    """Stacked horizontal bars: one per recovery, one segment per timing stage (ms, log-free)."""
    from lab_scripts.plots import _pyplot

    plt = _pyplot()
    stages = ["detect", "compute", "write", "settle", "relock", "verify"]
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, 1.7 + 0.6 * len(recoveries)), dpi=120)
    for k, rec in enumerate(recoveries):
        left = 0.0
        for i, s in enumerate(stages):
            w = rec["timing_ms"][s]
            ax.barh(k, w, left=left, color=colours(i), label=s if k == 0 else None)
            left += w
        ax.text(left, k, f"  {left:.1f} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(recoveries)), [f"{r['failed']} -> {r['spare']}" for r in recoveries])
    ax.invert_yaxis()
    ax.set_xlabel("time since the failure (ms, modelled; compute measured)")
    ax.set_title(title, pad=26)  # room for the legend between the title and the bars
    ax.legend(ncol=6, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_xlim(0, max(sum(r["timing_ms"][s] for s in stages) for r in recoveries) * 1.25)
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


def run(args: argparse.Namespace) -> int:
    """Place the ring, fail, recover, report."""
    from calibration.heater_map import IdealMap
    from photonics.fabric import Fabric, FabricError, default_fabric, failover, place_job, ring_job

    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    if args.fabric:
        with reading("fabric file", args.fabric):
            fabric = Fabric.load(args.fabric)
    else:
        fabric = default_fabric()
    victims = args.fail or ["gpu2"]
    known = [a.name for a in fabric.accelerators]
    unknown = [v for v in victims if v not in known]
    if unknown:
        raise UsageError(f"--fail {unknown[0]}: no such accelerator in {fabric.name}; "
                         f"choose from {', '.join(known)}")
    mesh = fabric.mesh
    hmap = IdealMap(mesh.n_heaters)
    reports = []
    rec = None
    with planning(FabricError):  # the fabric is valid: a refusal here is a request it cannot meet
        job = ring_job(fabric.workers, "ring")
        plan = place_job(fabric, job, heater_map=hmap)
        for victim in victims:
            rec = failover(fabric, plan.job, victim, plan, heater_map=hmap, park_freed=args.park_freed)
            reports.append(rec.to_dict(mesh))
            plan = rec.plan
    plots = []
    if plot and rec is not None:
        plots.append(str(draw_plan(plot, mesh, plan, f"after failing {', '.join(victims)}", rec.rerouted,
                                   fabric)))
        plots.append(str(timeline_plot(sibling(plot, "timeline"), reports, "recovery timeline")))
    if args.json:
        out: dict[str, Any] = dict(reports[-1])
        out.update({"fabric": fabric.name, "failovers": reports, "plots": plots})
        print_json(out)
        return 0
    for r in reports:
        t = r["timing_ms"]
        print(f"{r['failed']} failed -> {r['spare']} spliced in: re-routed {', '.join(r['rerouted_links'])}; "
              f"{len(r['changed_tbus'])} TBUs and {len(r['changed_heaters'])} heaters changed; "
              f"other routes unchanged: {r['unaffected_routes_unchanged']}")
        stages = ("detect", "compute", "write", "settle", "relock", "verify", "total")
        print(table([(s, t[s]) for s in stages], ["stage", "ms"]))
    print(table([(lk["link"], lk["n_tbus"], lk["loss_db"], lk["acr_db"], lk["margin_db"])
                 for lk in reports[-1]["links"]], ["link", "TBUs", "loss dB", "ACR dB", "margin dB"]))
    for p in plots:
        print(f"wrote {p}")
    return 0
