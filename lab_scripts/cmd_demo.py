"""``lumion demo``: the end-to-end story on the simulated bench.

1. A simulated SmartLight-size chip with hidden fabrication errors (seeded) on an
   in-process bench (laser, power meter, heater driver).
2. Calibrate it (the fitted map is cached in ``--out`` and reused on the next run), or
   with ``--no-calibrate`` program through the ideal map.
3. Place a ring over the eight accelerators of the default fabric; program it and
   measure every link with the power meter.
4. Fail an accelerator, splice in the best spare (only the changed heaters are
   written), measure again: every link's received power against its plan (off by more
   than ``photonics.tolerances.ROUTE_TOL_DB`` is not ok: exit 5), every held link's power
   against what it read before the failure (hitless only when none moved by more than
   ``photonics.tolerances.HELD_TOL_DB``), and the recovery's timing breakdown.
5. Plots: the mesh with routes before and after, the recovery timeline, and (from the
   physics foundation) one hexagonal cell as a ring resonator.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab_scripts.common import add_json_flag, print_json, recovery_changes, seed, table
from lab_scripts.errors import EXIT_UNVERIFIED, CliError, planning
from lab_scripts.paths import output_folder
from photonics.tolerances import HELD_TOL_DB, ROUTE_TOL_DB


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser("demo", help="run the end-to-end demo on the simulated bench",
                       description="Calibrate a simulated chip, route a ring of accelerators, fail "
                       "one, recover with a spare and verify with the power meter. "
                       "Example: lumion demo --out lumion-demo")
    p.add_argument("--out", default="lumion-demo", help="folder for the plots and the cached map (created)")
    p.add_argument("--fail", default="gpu2", metavar="ACCEL", help="accelerator to fail (default gpu2)")
    p.add_argument("--seed", type=seed, default=1, help="seed of the simulated chip (default 1)")
    p.add_argument("--no-calibrate", action="store_true",
                   help="skip calibration; program through the ideal (uncalibrated) map")
    add_json_flag(p)
    p.set_defaults(run=run)


def _planned_rx_dbm(fabric: Any, plan: Any) -> list[float]:
    """Received power (dBm) the plan expects on every link: the TX lane's power less the
    facets and access routing (as :func:`_measure_links` adds them) and the route's planned loss.
    """
    from photonics.physics import PhysicsDefaults

    d = PhysicsDefaults()
    return [fabric.lane(lk.route.src).tx_power_dbm - 2 * d.fiber_to_chip_loss_db - d.access_routing_loss_db
            + lk.transmission_db for lk in plan.links]


def _measure_links(bench: Any, fabric: Any, plan: Any) -> list[float]:
    """Received power (dBm) of every link: mesh transmission measured with the power meter
    (laser at the TX port, meter at the RX port), then the lane budget's facets and access.
    """
    from photonics.physics import PhysicsDefaults

    d = PhysicsDefaults()
    out = []
    for lk in plan.links:
        bench.select_input(lk.route.src)
        trans = float(bench.read_powers_dbm([lk.route.dst])[0]) - bench.laser_power_dbm
        tx = fabric.lane(lk.route.src)
        out.append(tx.tx_power_dbm - 2 * d.fiber_to_chip_loss_db - d.access_routing_loss_db + trans)
    return out


def _ring_resonator(out: Path) -> tuple[dict[str, Any], Path]:
    import numpy as np

    from lab_scripts.plots import spectrum
    from photonics.circuit import power_db, solve
    from photonics.physics import C_UM_PER_PS, PhysicsDefaults, nominal_params, split_phases
    from photonics.state import MeshState
    from photonics.topology import hexagonal

    d = PhysicsDefaults()
    ring = hexagonal(1, 1)
    top, bot = split_phases(np.array([0.3, 0, 0, 0, 0, 0]))
    f = np.linspace(193.40, 193.46, 1201)
    wl = C_UM_PER_PS / f * 1e3
    inp = int(np.flatnonzero(ring.port_tbu_ports == 0)[0])
    thru = int(np.flatnonzero(ring.port_tbu_ports == 2)[0])
    S = solve(ring, MeshState(top, bot), wl, nominal_params(ring.n_tbus, ring.n_links, d),
              inputs=[inp])[0, :, :, 0]
    p = power_db(S).T
    dips = np.flatnonzero((p[thru, 1:-1] < p[thru, :-2]) & (p[thru, 1:-1] < p[thru, 2:])) + 1
    fsr_ghz = float(np.diff(f[dips]).mean() * 1e3) if len(dips) > 1 else float("nan")
    plot = spectrum(out / "ring_spectrum.png", wl, {ring.port_names[k]: p[k] for k in range(ring.n_ports)},
                    "one hexagonal cell as a ring resonator (TBU 0 couples 30 %)")
    return {"fsr_ghz": fsr_ghz, "expected_fsr_ghz": 1e3 / (6 * d.basic_unit_delay_ps),
            "extinction_db": float(p[thru].max() - p[thru].min())}, plot


def run(args: argparse.Namespace) -> int:
    """Run the demo and print a short report."""
    from instruments.sim.chip import Chip
    from instruments.sim.direct import DirectBench
    from photonics.configuration import mesh_label

    t_start = time.perf_counter()
    out = output_folder(args.out, "--out")
    fabric = _fabric_with_worker(args.fail)
    out.mkdir(exist_ok=True)
    mesh = fabric.mesh
    bench = DirectBench(Chip(mesh, seed=args.seed))
    say = (lambda *_a: None) if args.json else (lambda *a: print(*a, flush=True))
    say(f"simulated chip {bench.chip_id}: {mesh.n_tbus} TBUs, {mesh.n_ports} ports, {mesh.n_heaters} heaters")
    calib, hmap = _heater_map(bench, out, args, say)
    job, plan, before, p_before = _place_ring(bench, fabric, hmap, out)
    rec, after = _fail_and_recover(bench, fabric, job, plan, hmap, args.fail)
    planned = _planned_rx_dbm(fabric, rec.plan)
    rec_d = rec.to_dict(mesh)
    plots = {"mesh_before": p_before, **_recovery_plots(out, fabric, rec, rec_d, args.fail)}
    ring_fig, plots["ring_spectrum"] = _ring_resonator(out)
    links = _link_rows(fabric, rec, before, after, planned)
    drift = _held_links_drift(job, rec, before, after)
    verification = _verification(links, drift)
    report = {
        "mesh": mesh_label(mesh),
        "chip": {"chip_id": bench.chip_id, "n_tbus": mesh.n_tbus, "n_ports": mesh.n_ports,
                 "n_heaters": mesh.n_heaters},
        "calibration": calib,
        "fabric": fabric.name,
        "failover": rec_d,
        "links": links,
        "held_links_power_change_db": drift,
        "all_links_close": all(x["measured_margin_db"] > 0 for x in links),
        "verification": verification,
        "ring": ring_fig,
        "plot": {name: str(path) for name, path in plots.items()},
        "elapsed_s": time.perf_counter() - t_start,
    }
    if args.json:
        print_json(report)
    else:
        _print_story(report, plan, rec, args.fail, say)
    if verification["status"] != "ok":  # one line on stderr: what light showed, what to do
        print(f"lumion demo: {verification['summary']}", file=sys.stderr)
        return EXIT_UNVERIFIED
    return 0


def _verification(links: list[dict[str, Any]], held_change_db: float) -> dict[str, Any]:
    """What light says of the recovery: every link within :data:`ROUTE_TOL_DB` of its plan,
    every held link within ``photonics.tolerances.HELD_TOL_DB`` of what it read before (``hitless_by_light``).
    """
    off = [x["link"] for x in links if x["status"] != "ok"]
    hitless = held_change_db <= HELD_TOL_DB
    problems = []
    if off:
        problems.append(f"{len(off)} of {len(links)} links measure more than {ROUTE_TOL_DB:g} dB off their "
                        f"plan ({', '.join(off)})")
    if not hitless:
        problems.append(f"held links moved by up to {held_change_db:.2f} dB (more than {HELD_TOL_DB:g} dB): "
                        "the recovery was not hitless")
    summary = "; ".join(problems) + ("; the heater map does not describe this chip: calibrate it (drop "
                                     "--no-calibrate) or check the bench" if problems else "")
    return {"status": "off" if problems else "ok", "tolerance_db": ROUTE_TOL_DB,
            "held_tolerance_db": HELD_TOL_DB, "links_off": off, "hitless_by_light": hitless,
            "summary": summary or "every link as planned"}


def _fabric_with_worker(name: str) -> Any:
    """The default fabric, after checking that ``name`` (the accelerator to fail) is in its ring."""
    from photonics.fabric import default_fabric

    fabric = default_fabric()
    workers = [a.name for a in fabric.accelerators if not a.spare]
    if name not in workers:
        raise CliError(f"--fail {name}: no such accelerator in the ring; choose from {', '.join(workers)}",
                       "input", "FabricError")
    return fabric


def _heater_map(bench: Any, out: Path, args: argparse.Namespace, say: Callable[..., None]
                ) -> tuple[dict[str, Any], Any]:
    """(what the report says of calibration, the heater map to program through): the ideal map
    with ``--no-calibrate``, else the chip's map cached in ``out``, else a fresh calibration.
    """
    from calibration.heater_map import IdealMap

    if args.no_calibrate:
        return {"calibrated": False}, IdealMap(bench.mesh.n_heaters)
    from calibration.map import CalibrationError, CalibrationMap

    cache = out / f"calibration-{bench.chip_id}.json"
    try:
        hmap = CalibrationMap.load(cache, chip_id=bench.chip_id)
    except CalibrationError:
        return _calibrate_into(bench, cache, say, quiet=args.json)
    say(f"calibration: reusing {cache}")
    return {"calibrated": True, "cached": str(cache), "elapsed_s": 0.0}, hmap


def _calibrate_into(bench: Any, cache: Path, say: Callable[..., None], quiet: bool
                    ) -> tuple[dict[str, Any], Any]:
    """Calibrate the chip with the default options and cache the map for the next run."""
    from calibration.procedure import Options, Progress, calibrate

    say("calibration: sweeping every heater on the simulated bench (cached for the next run) ...")
    t0 = time.perf_counter()
    res = calibrate(bench, Options(), progress=Progress(stream=None if quiet else sys.stderr, every=20))
    res.cmap.save(cache)
    calib = {"calibrated": True, "cached": str(cache), "elapsed_s": time.perf_counter() - t0,
             "operations": res.operations}
    return calib, res.cmap


def _place_ring(bench: Any, fabric: Any, hmap: Any, out: Path) -> tuple[Any, Any, list[float], Path]:
    """Place a ring over the fabric's workers, program it and measure every link.

    Returns:
        (the ring job, its plan, each link's received power (dBm), the plot of the plan).
    """
    from lab_scripts.cmd_failover import draw_plan
    from photonics.fabric import place_job, ring_job

    job = ring_job(fabric.workers, "ring")
    plan = place_job(fabric, job, heater_map=hmap)
    bench.set_currents(plan.heater)
    before = _measure_links(bench, fabric, plan)
    plot = draw_plan(out / "mesh_before.png", fabric.mesh, plan, "ring of 8 accelerators", fabric=fabric)
    return job, plan, before, plot


def _fail_and_recover(bench: Any, fabric: Any, job: Any, plan: Any, hmap: Any, fail: str
                      ) -> tuple[Any, list[float]]:
    """Fail accelerator ``fail``, splice in the best spare writing only the heaters that change,
    and measure every link again: (the recovery, each link's received power (dBm)).
    """
    from photonics.fabric import FabricError, failover

    with planning(FabricError):
        rec = failover(fabric, job, fail, plan, heater_map=hmap)
    written = bench.currents()
    for ch, value in rec.program.items():
        written[ch] = value
    bench.set_currents(written)
    return rec, _measure_links(bench, fabric, rec.plan)


def _recovery_plots(out: Path, fabric: Any, rec: Any, rec_d: dict[str, Any], fail: str) -> dict[str, Path]:
    """The mesh with its routes after the recovery, and the recovery's modelled timeline."""
    from lab_scripts.cmd_failover import draw_plan, timeline_plot

    return {
        "mesh_after": draw_plan(out / "mesh_after.png", fabric.mesh, rec.plan,
                                f"{fail} failed, {rec.spare} spliced in", rec.rerouted, fabric),
        "timeline": timeline_plot(out / "recovery_timeline.png", [rec_d], "modelled recovery timeline"),
    }


def _link_rows(fabric: Any, rec: Any, before: list[float], after: list[float],
               planned: list[float]) -> list[dict[str, Any]]:
    """One row per link after the recovery: modelled and measured margins, planned and measured
    received power (``status`` off beyond :data:`ROUTE_TOL_DB`), and the power it read before
    the failure (None for a re-routed link).
    """
    # A link's margin is against the receiver it now ends at: a re-routed link ends at the
    # spare's lane, not at the failed accelerator's.
    return [{"link": f"{lk.link[0]}->{lk.link[1]}", "rerouted": i in rec.rerouted,
             "model_margin_db": lk.margin_db,
             "measured_rx_dbm": after[i],
             "measured_margin_db": after[i] - fabric.lane(lk.route.dst).rx_sensitivity_dbm,
             "planned_rx_dbm": planned[i], "difference_db": after[i] - planned[i],
             "status": "ok" if abs(after[i] - planned[i]) <= ROUTE_TOL_DB else "off",
             "before_rx_dbm": None if i in rec.rerouted else before[i]}
            for i, lk in enumerate(rec.plan.links)]


def _held_links_drift(job: Any, rec: Any, before: list[float], after: list[float]) -> float:
    """Largest change (dB) of received power over the links the recovery left in place."""
    held = [i for i in range(len(job.links)) if i not in rec.rerouted]
    return max(abs(after[i] - before[i]) for i in held)


def _print_story(report: dict[str, Any], plan: Any, rec: Any, fail: str, say: Callable[..., None]) -> None:
    """The report for a reader: calibration, placement, recovery, links, timings, plots."""
    calib, links, ring_fig = report["calibration"], report["links"], report["ring"]
    if calib.get("elapsed_s"):  # a calibration ran in this demo (not read from the cache)
        say(f"calibration: {calib['elapsed_s']:.1f} s, {calib['operations']} set-and-read operations")
    say(f"ring placed: {len(plan.links)} links, worst model margin {plan.worst_margin_db:.2f} dB")
    changes = recovery_changes(len(rec.changed_tbus), len(rec.program), rec.plan.heater_unit,
                               "calibrated" if calib.get("calibrated") else "ideal")
    v = report["verification"]
    light = ("hitless by light" if v["hitless_by_light"]
             else f"NOT hitless by light (> {v['held_tolerance_db']:g} dB)")
    say(f"{fail} fails -> {rec.spare} spliced in: {changes}; other routes bit-identical: "
        f"{rec.held_unchanged}; their measured power moved by at most "
        f"{report['held_links_power_change_db']:.3f} dB: {light}")
    print(table([(x["link"], "yes" if x["rerouted"] else "", x["model_margin_db"], x["planned_rx_dbm"],
                  x["measured_rx_dbm"], x["measured_margin_db"], x["status"]) for x in links],
                ["link", "re-routed", "model margin dB", "planned rx dBm", "measured rx dBm",
                 "measured margin dB", f"vs plan (+-{v['tolerance_db']:g} dB)"]))
    t = rec.timing_ms
    print(table([(s, t[s]) for s in ("detect", "compute", "write", "settle", "relock", "verify", "total")],
                ["recovery stage", "ms"]))
    print(f"recovery {t['total']:.1f} ms modelled (LUMION prototype: ~1 s; Morphlux: 1.2 s)")
    print(f"ring resonator: FSR {ring_fig['fsr_ghz']:.2f} GHz (expected {ring_fig['expected_fsr_ghz']:.2f})")
    for p in report["plot"].values():
        print(f"wrote {p}")
