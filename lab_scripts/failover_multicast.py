"""``lumion failover --plan MC.json --fail ACCEL [--spare ACCEL]``: a multicast receiver failed.

The plan is a ``lumion.multicast-plan`` (``lumion collective --multicast --out``, or an
earlier ``lumion failover --out`` of one). The failed receiver is pruned (no ``--spare``:
no TBU changes) or its own part of the branch spliced to ``--spare`` over free TBUs
(:func:`photonics.fabric.multicast_failover.fail_receiver`); every held branch is solved
again and held to ``BRANCH_TOL_DB``. The answer says what was done, the TBUs and heaters
changed and every branch's power before -> after with its margin; ``--out`` writes the new
plan. With ``--bench`` the trees are written, the recovery's changed heaters written and
every branch checked by light (:mod:`lab_scripts.multicast_light`).

Exit codes as point-to-point failover: 2 bad input (one line), 3 a recovery that cannot be
made (one line naming the branch; nothing written, no heater changed), 5 light rejects it
(the chip put back to the trees before; with ``--light report`` kept and reported).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from lab_scripts.common import print_json, recovery_changes, table
from lab_scripts.errors import EXIT_UNVERIFIED, CliError, explain, reading
from lab_scripts.paths import JSON_SUFFIXES, PLOT_SUFFIXES, output_file

SCHEMA = "lumion.multicast-failover"
VERSION = 1
# Options of point-to-point failover that mean nothing for a tree: refused, not ignored.
_NOT_FOR_TREES = (("park_freed", "--park-freed"), ("together", "--together"))


def run_multicast(args: argparse.Namespace, fabric: Any) -> int:
    """Load the multicast plan, recover the failed receiver, check it (by light with a bench), report.

    ``fabric``: the one ``--fabric`` gave, or None (the plan's own, see
    :func:`photonics.fabric.multicast_io.fabric_for`).
    """
    import json

    from lab_scripts.fabric_bench import heater_map
    from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
    from photonics.fabric import default_fabric
    from photonics.fabric.multicast_io import fabric_for, multicast_from_dict
    from photonics.fabric.plan import failures_with_map

    out_path = output_file(args.out, "--out", JSON_SUFFIXES) if args.out is not None else None
    plot = output_file(args.plot, "--plot", PLOT_SUFFIXES) if args.plot is not None else None
    with reading("plan file", args.plan):
        data = json.loads(read_text(args.plan, DATA_FILE_MAX_BYTES, "plan file"))
        fabric = fabric or fabric_for(data, default_fabric(), str(args.plan))
    failed_rx, spare = _options(args, fabric)
    mesh = fabric.mesh
    hmap = heater_map(args, mesh)
    with reading("plan file", args.plan):
        run = multicast_from_dict(data, fabric, str(args.plan), failed=failures_with_map(mesh, hmap, None))
    _check_receiver(run.plan, failed_rx, spare)
    bench = _open(args, fabric)
    try:
        result = _recover(args, fabric, run, hmap, failed_rx, spare, bench)
    finally:
        if bench is not None:
            bench.close()
    new_run, report = result
    if out_path is not None:
        from photonics.fabric.multicast_io import save_multicast

        save_multicast(new_run, fabric, out_path)
    report["out"] = str(out_path) if out_path is not None else None
    report["plot"] = str(draw_trees(plot, fabric, new_run, report)) if plot is not None else None
    placed = report["placement_verification"] or {}
    # the trees as placed leaking, or read by a dark source, are said (exit 5); a branch off as
    # placed counts through the recovery's held branches (off there too), as before
    leaked = any(x["status"] == "off" for x in report["placement_tree_crosstalk"])
    code = EXIT_UNVERIFIED if report["verified"] == "off" or leaked or placed.get("dark") else 0
    if args.json:  # the stderr line below is printed with --json too, as `lumion program` prints it
        print_json({"schema": SCHEMA, "version": VERSION, **report})
    else:
        _print_text(report, "calibrated" if args.map is not None else "ideal")
    from instruments.tree_leak import leak_refusal
    from lab_scripts.failover_light import dark_line

    dark = dark_line(report["placement_verification"], "the trees as placed") or \
        dark_line(report["verification"], f"the recovery from {report['failed']}")
    if code and dark:
        print(f"lumion failover: {dark}", file=sys.stderr)
    elif code and report["refusal"]:
        print(f"lumion failover: {report['refusal']}; kept (--light report)", file=sys.stderr)
    elif code and (leak := leak_refusal(report["placement_tree_crosstalk"], "the trees as placed")):
        print(f"lumion failover: {leak}, before the recovery (the recovery kept: not its doing); calibrate "
              "the chip (lumion calibrate) and give --map", file=sys.stderr)
    elif code:
        off = ", ".join(report["verification"]["links_off"])
        print(f"lumion failover: light says {off} off its plan, before the recovery too (the trees as "
              "placed, above); calibrate the chip (lumion calibrate) and give --map", file=sys.stderr)
    return code


def _options(args: argparse.Namespace, fabric: Any) -> tuple[str, str | None]:
    """(failed receiver, spare or None) from the command line; bad input (exit 2) otherwise."""
    events = list(args.events or [])
    fails = [name for kind, name in events if kind == "fail"]
    if any(kind == "tbu" for kind, _ in events):
        raise CliError("--tbu: a multicast plan recovers a failed receiver (--fail ACCEL); a failed TBU of a "
                       "tree is not handled yet: plan the collective again with --map", "input", "UsageError")
    if len(fails) != 1:
        raise CliError(f"a multicast plan takes one --fail ACCEL (a receiver), not {len(fails)}; run again "
                       "with the plan --out wrote for the next failure", "input", "UsageError")
    for attr, flag in _NOT_FOR_TREES:
        if getattr(args, attr):
            raise CliError(f"{flag} is for point-to-point plans; drop it with a multicast plan", "input",
                           "UsageError")
    known = list(fabric.names)
    for flag, name in (("--fail", fails[0]), ("--spare", args.spare)):
        if name is not None and name not in known:
            raise CliError(f"{flag} {name}: no such accelerator in {fabric.name}; choose from "
                           f"{', '.join(known)}", "input", "FabricError")
    return fails[0], args.spare


def _check_receiver(plan: Any, failed_rx: str, spare: str | None) -> None:
    """The failed accelerator is a receiver of exactly one group (bad input otherwise)."""
    groups = [src for src, dsts in plan.groups if failed_rx in dsts]
    if len(groups) != 1:
        receivers = sorted({d for _, dsts in plan.groups for d in dsts})
        which = "any" if not groups else "exactly one"
        raise CliError(f"--fail {failed_rx}: not a receiver of {which} group of the multicast plan; its "
                       f"receivers are {', '.join(receivers)}", "input", "FabricError")
    if spare == failed_rx:
        raise CliError(f"--spare {spare} is the failed receiver; give another accelerator", "input",
                       "UsageError")


def _open(args: argparse.Namespace, fabric: Any) -> Any:
    """The MulticastBench of ``--bench`` (None without)."""
    if args.bench is None:
        return None
    from lab_scripts.fabric_bench import open_fabric_bench
    from lab_scripts.multicast_light import MulticastBench
    from photonics.fabric import TimingModel

    return MulticastBench(open_fabric_bench(args, fabric), fabric, TimingModel().settle_ms() / 1e3)


def _recover(args: argparse.Namespace, fabric: Any, run: Any, hmap: Any, failed_rx: str, spare: str | None,
             bench: Any) -> tuple[Any, dict[str, Any]]:
    """(the plan as it runs after the recovery, the report).

    The recovery is computed before the bench is touched: a refusal leaves every heater as it was.
    """
    from photonics.errors import RoutingError
    from photonics.fabric import FabricError
    from photonics.fabric.multicast_failover import fail_receiver
    from photonics.fabric.plan import heater_values

    src = next(s for s, dsts in run.plan.groups if failed_rx in dsts)
    try:
        rec = fail_receiver(fabric, run.plan, failed_rx, spare, failed=run.failed_tbus, dark=run.dark)
    except (FabricError, RoutingError) as exc:
        what = f"splicing branch {src}->{failed_rx} to {spare}" if spare else \
            f"pruning branch {src}->{failed_rx}"
        raise CliError(f"--fail {failed_rx}{f' --spare {spare}' if spare else ''}: {what} refused: "
                       f"{_why(explain(exc))}; no heater changed, nothing written", "impossible",
                       type(exc).__name__) from exc
    before = heater_values(run.plan.configuration, hmap)[0]
    placed, ref = bench.place(run.plan, before) if bench is not None else (None, {})
    placed, placed_leaks = _placement_leaks(bench, run, placed)
    writes, drift = _program(rec, hmap, run.failed_tbus, before)
    leaked = {x.source for x in placed_leaks if x.off}
    light = _light(args, bench, rec, src, before, writes, ref, (*run.failed_accelerators, failed_rx), leaked)
    report = _report(fabric, str(args.plan), run, rec, src, writes, drift, light, placed)
    report["placement_tree_crosstalk"] = [x.to_dict() for x in placed_leaks]
    dark = run.dark | ({_rx_port(fabric, run.plan, failed_rx)} if spare is None else set())
    from photonics.fabric.multicast_io import RunningMulticast

    record = {k: report[k] for k in ("failed", "spare", "action", "changed_tbus", "shift_db", "verified")}
    new = RunningMulticast(rec.plan, frozenset(dark), dict(run.failed_tbus or {}),
                           (*run.failed_accelerators, failed_rx), (*run.recoveries, record))
    return new, report


def _placement_leaks(bench: Any, run: Any, placed: dict[str, Any] | None) -> tuple[Any, list[Any]]:
    """(the placement's verification, each tree's light at the other working receivers as placed).

    The trees as written before the recovery are lit once per tree by the same checker as after
    it (instruments.tree_leak): a tree already leaking into a working receiver makes the
    placement off (exit 5, the recovery kept: not its doing), a dark source makes it off with
    ``dark``. Without a bench: (None, []).
    """
    if bench is None or placed is None:
        return placed, []
    from instruments.tree_leak import judge_leaks, tree_leaks

    leaks = tree_leaks(bench.bench, bench.fabric, run.plan, run.failed_accelerators, placed["links_off"])
    placed, _ = judge_leaks(placed, None, leaks)
    return placed, leaks


def _why(message: str) -> str:
    """The library's refusal without its own lead-in and ending (the command line says both)."""
    for lead in ("multicast failover refused: ", "multicast failover: "):
        message = message.removeprefix(lead)
    return message.removesuffix("; nothing changed")


def _rx_port(fabric: Any, plan: Any, name: str) -> int:
    """The mesh port a receiver of ``plan`` listens on."""
    from photonics.fabric.multicast import group_ports

    for (_, dsts), (_, rxs) in zip(plan.groups, group_ports(fabric, plan.groups), strict=True):
        if name in dsts:
            return int(rxs[dsts.index(name)])
    raise ValueError(name)


def _program(rec: Any, hmap: Any, failed: Any, before: np.ndarray) -> tuple[dict[int, float], float]:
    """({heater channel: value} to write, largest change a held channel would have wanted).

    Only channels outside the TBUs the remaining trees hold and outside failed TBUs are
    written, like a point-to-point recovery (:func:`photonics.fabric.splice.heater_program`):
    a crosstalk-compensating map may re-trim a parked neighbour, never a held TBU.
    """
    from photonics.fabric.plan import WRITE_RESOLUTION, heater_values

    wanted = heater_values(rec.plan.configuration, hmap)[0]
    held = {t for tr in rec.plan.trees for t in tr.tbus} - set(rec.changed_tbus)
    frozen = sorted(c for t in held | set(failed or {}) for c in (2 * t, 2 * t + 1))
    writable = np.ones(len(wanted), dtype=bool)
    writable[frozen] = False
    delta = np.abs(wanted - before)
    write = np.flatnonzero(writable & (delta > WRITE_RESOLUTION))
    drift = float(delta[sorted(c for t in held for c in (2 * t, 2 * t + 1))].max()) if held else 0.0
    return {int(c): float(wanted[c]) for c in write}, drift


def _light(args: argparse.Namespace, bench: Any, rec: Any, src: str, before: np.ndarray,
           writes: dict[int, float], ref: dict[str, Any], gone: tuple[str, ...],
           leaked: set[str] = frozenset()) -> dict[str, Any]:
    """The light keys of the report: write the recovery, check every branch and each tree's light at
    the other working receivers (instruments.tree_leak; ``gone``: failed or pruned receivers), or
    say not measured. A tree whose source is in ``leaked`` leaked as placed already: off, reported,
    not the recovery's doing, so it refuses nothing (as a held branch off before the recovery).
    """
    from instruments.tree_leak import judge_leaks, tree_leaks
    from lab_scripts.failover_light import NO_BENCH, VERIFIED
    from lab_scripts.multicast_light import branch_names, judge, unverified
    from photonics.fabric.verify import not_measured

    names = branch_names(rec.plan)
    new = [f"{src}->{rec.spare}"] if rec.spare else []
    if bench is None:
        v = not_measured(names, [names.index(n) for n in new], NO_BENCH)
        return {"verified": VERIFIED[v["status"]], "verification": v, "unverified_branches": names,
                "refusal": None, "tree_crosstalk": []}
    after = before.copy()
    for ch, value in writes.items():
        after[ch] = value
    bench.write(after)
    checks = bench.check(rec.plan, new, ref)
    v, why = judge(checks)
    leaks = tree_leaks(bench.bench, bench.fabric, rec.plan, gone, v["links_off"])
    v, why = judge_leaks(v, why, leaks, leaked)  # its light in another working receiver: refused
    if why is not None and args.light == "repair":
        bench.write(before)
        raise CliError(f"--fail {rec.failed}: {why}; the chip is back to the trees before the recovery, "
                       "nothing written", "unverified", "VerificationError")
    return {"verified": VERIFIED[v["status"]], "verification": v, "unverified_branches": unverified(checks),
            "refusal": why, "tree_crosstalk": [x.to_dict() for x in leaks]}


def _report(fabric: Any, plan: str, run: Any, rec: Any, src: str, writes: dict[int, float], drift: float,
            light: dict[str, Any], placed: Any) -> dict[str, Any]:
    """The JSON-ready answer (``lumion.multicast-failover`` v1)."""
    from photonics.fabric.multicast_failover import BRANCH_TOL_DB

    mesh = fabric.mesh
    old = {(b.src, b.dst): b.transmission_db for row in run.plan.branches for b in row}
    rows = []
    for row, check in zip(rec.plan.branches, rec.plan.checks, strict=True):
        for b in row:
            was = old.get((b.src, b.dst))
            change = None if was is None else b.transmission_db - was
            rows.append({"link": f"{b.src}->{b.dst}", "held": was is not None, "before_db": was,
                         "after_db": b.transmission_db, "change_db": change, "margin_db": b.margin_db,
                         "budget_ok": b.budget_ok, "acr_db": check.acr_db})
    return {"fabric": fabric.name, "plan": plan, "failed": rec.failed, "spare": rec.spare,
            "action": "spliced" if rec.spare else "pruned", "branch": f"{src}->{rec.failed}",
            "changed_tbus": [mesh.tbu_names[t] for t in rec.changed_tbus],
            "changed_heaters": [{"channel": c, "heater": f"heater:{c}", "current_ma": v}
                                for c, v in sorted(writes.items())],
            "heater_unit": "mA", "held_heater_drift": drift, "shift_db": rec.shift_db,
            "tolerance_db": BRANCH_TOL_DB, "branches": rows,
            "groups": [{"src": s, "dsts": list(ds)} for s, ds in rec.plan.groups],
            "worst_margin_db": rec.plan.worst_margin_db, **light, "placement_verification": placed}


def _print_text(r: dict[str, Any], map_name: str) -> None:
    """The human-readable report: what was done, every branch before -> after, light, files."""
    changes = recovery_changes(len(r["changed_tbus"]), len(r["changed_heaters"]), r["heater_unit"], map_name)
    done = f"spliced to spare {r['spare']}" if r["spare"] else "pruned"
    tbus = f": {', '.join(r['changed_tbus'])}" if r["changed_tbus"] else ""
    print(f"{r['failed']} failed -> branch {r['branch']} {done}; {changes}{tbus}")
    print(table([(b["link"], "held" if b["held"] else "new", b["before_db"] if b["held"] else "",
                  b["after_db"], "" if b["change_db"] is None else f"{b['change_db']:+.5f}", b["margin_db"])
                 for b in r["branches"]],
                ["branch", "", "before dB", "after dB", "change dB", "margin dB"]))
    print(f"held branches moved {r['shift_db']:.5f} dB at most in the circuit solve (tolerance "
          f"{r['tolerance_db']:g} dB); worst margin {r['worst_margin_db']:.2f} dB")
    _print_light(r)
    for path in (r["out"], r["plot"]):
        if path:
            print(f"wrote {path}")


def draw_trees(path: Path, fabric: Any, run: Any, report: dict[str, Any]) -> Path:
    """The mesh after the recovery: every branch drawn (the spare's marked ``*``), the
    accelerators named at their ports (in a group, spare, or out), failed TBUs marked.
    """
    from lab_scripts.plots import fabric_marks, mesh_drawing

    plan = run.plan
    drawn = [{"label": f"{src}->{d}{' *' if d == report['spare'] else ''}", "tbus": list(b.tbus)}
             for (src, dsts), tree in zip(plan.groups, plan.trees, strict=True)
             for d, b in zip(dsts, tree.branches, strict=True)]
    members = {a for src, dsts in plan.groups for a in (src, *dsts)}
    title = f"the trees after {report['failed']} failed ({report['action']}" + \
        (f" to {report['spare']})" if report["spare"] else ")")
    return mesh_drawing(path, fabric.mesh, drawn, dict(run.failed_tbus or {}), title,
                        fabric_marks(fabric, members))


def _print_light(r: dict[str, Any]) -> None:
    """What light said: every branch measured vs planned (and vs before for a held one)."""
    v, placed = r["verification"], r["placement_verification"]
    if placed is not None:
        off = f"; off: {', '.join(placed['links_off'])}" if placed["links_off"] else ""
        print(f"the trees as placed, read by light before the recovery: {placed['status']}{off}")
        _print_tree_crosstalk(r["placement_tree_crosstalk"], "as placed")
    if r["verified"] == "not measured" and not any(x["meter"] for x in v["links"]):
        print(f"verified by light: not measured ({v['links'][0]['reason'] if v['links'] else 'no branch'})")
        return
    named = f"; not measured: {', '.join(r['unverified_branches'])}" if r["unverified_branches"] else ""
    print(f"verified by light: {r['verified']} (tolerance {v['tolerance_db']:g} dB, held "
          f"{v['held_tolerance_db']:g} dB{named})")
    print(table([(x["link"], x["meter"] or "", x["planned_dbm"], x["measured_dbm"], x["before_dbm"],
                  x["change_db"], x["status"]) for x in v["links"]],
                ["branch", "meter", "planned dBm", "measured dBm", "before dBm", "change dB", "status"]))
    if v.get("dark"):
        print(f"NOT verified by light: {v['dark']}")
    _print_tree_crosstalk(r["tree_crosstalk"], "after the recovery")


def _print_tree_crosstalk(leaks: list[dict[str, Any]], when: str) -> None:
    """One line per tree: its light at the other working receivers (instruments.tree_leak)."""
    for x in leaks:
        acr = f"ACR {x['acr_db']:.1f} dB (at least {x['min_acr_db']:g}) into {x['victim']}, weakest branch " \
            f"{x['weakest_branch']}" if x["acr_db"] is not None else f"NOT measured ({x['reason']})"
        print(f"tree from {x['source']} {when}, its light at the other working receivers: {acr}: "
              f"{x['status']}")
