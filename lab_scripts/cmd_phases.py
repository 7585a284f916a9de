"""``lumion phases``: route every phase of a job description and time the switches between them."""

from __future__ import annotations

import argparse

from lab_scripts.cmd_schedule import save_configurations
from lab_scripts.common import add_json_flag, print_json, table
from lab_scripts.errors import planning, reading
from lab_scripts.paths import output_folder

SCHEMA = "lumion.phases"
VERSION = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "phases",
        help="per-phase reconfiguration: route each phase of a TOML job, heater deltas, switch times",
        description="Route every phase of a job description (TOML, see examples/tp4-dp2.toml) on its "
        "fabric and report the sequence of configurations, the heaters that change between "
        "consecutive ones and the modelled switch time. Example: lumion phases examples/tp4-dp2.toml",
    )
    p.add_argument("job", metavar="JOB.toml", help="phased job description")
    p.add_argument("--fabric", metavar="FILE", help="fabric JSON (overrides the job's own)")
    p.add_argument("--map", metavar="FILE",
                   help="calibration map: heater currents from its fit, and the TBUs it records as failed "
                   "or unverified are never routed through (default: the ideal law)")
    p.add_argument("--out", metavar="DIR", help="write each step's configuration as a lumion.configuration "
                   "file (DIR/phase-01.json, ...) that `lumion program --configuration` accepts")
    add_json_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Plan and report."""
    from calibration.heater_map import IdealMap
    from photonics.fabric import Fabric, FabricError, default_fabric, load_job_toml, plan_phases

    out = output_folder(args.out, "--out") if args.out is not None else None
    with reading("job file", args.job):
        job = load_job_toml(args.job)
    path = args.fabric or job.fabric
    if path:
        with reading("fabric file", path):
            fabric = Fabric.load(path)
    else:
        fabric = default_fabric()
    hmap = IdealMap(fabric.mesh.n_heaters)
    if args.map is not None:  # its failed TBUs are avoided (photonics.fabric.failures_with_map)
        from calibration.map import CalibrationMap

        hmap = CalibrationMap.load(args.map, mesh=fabric.mesh)
    with planning(FabricError):  # job and fabric are valid: a refusal is a job it cannot route
        steps = plan_phases(fabric, job, heater_map=hmap)
    mesh = fabric.mesh
    confs = [s.configuration.for_mesh(mesh) for s in steps]
    files = save_configurations(out, "phase", confs, mesh) if out is not None else []
    if args.json:
        rows = [{**s.to_dict(), "configuration": c.to_dict(mesh),
                 "configuration_file": files[k] if files else None}
                for k, (s, c) in enumerate(zip(steps, confs, strict=True))]
        print_json({"schema": SCHEMA, "version": VERSION, "job": job.name, "fabric": fabric.name,
                    "cyclic": True, "configurations": rows,
                    "cycle_switch_ms": sum(s.switch_ms["total"] for s in steps),
                    "out": str(out) if out else None})
        return 0
    print(f"job {job.name}: {len(job.phases)} phase(s), {len(steps)} configuration(s) on {fabric.name}; "
          "switch = write + settle + re-lock + verify into each step (the first from the last)")
    rows = [(k + 1, s.phase, s.step, len(s.links), s.worst_margin_db, s.changed_tbus, s.changed_heaters,
             s.switch_ms["total"]) for k, s in enumerate(steps)]
    print(table(rows, ["#", "phase", "step", "links", "margin dB", "TBUs chg", "heaters chg", "switch ms"]))
    if files:
        print(f"wrote {len(files)} configurations to {out} (lumion program --configuration {files[0]})")
    return 0
