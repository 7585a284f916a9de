"""``lumion program``: program a configuration onto a chip through a bench's heater driver."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

from lab_scripts.common import add_json_flag, load_configuration, print_json, seed
from lab_scripts.errors import EXIT_UNVERIFIED, opening, reading
from lab_scripts.interrupts import deferred_interrupts, settle
from lab_scripts.program_heaters import heater_fault_lines, heater_faults_now, refuse_failed_tbus
from lab_scripts.program_verify import off_line, verification, verification_lines
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text

# the driver's modes (instruments.heater_driver.VERIFY_MODES), without importing the
# instruments package at parser time (``lumion --help`` stays instant)
VERIFY_MODES = ("last", "all")
DEFAULT_VERIFY = "all"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "program",
        help="program a configuration (lumion.configuration JSON) onto the chip",
        description="Turn a configuration into heater currents (ideal map unless --map is given), "
        "check limits, write only the changed channels and report bytes and time on the wire. "
        "A configuration made for another mesh than the bench's is refused before anything is sent. "
        "Example: lumion route --connect 5:28 --json > plan.json; "
        "lumion program --bench sim --configuration plan.json",
    )
    p.add_argument("--bench", default="sim", metavar="FILE.toml",
                   help="bench config, or 'sim' for a fresh simulated bench (default)")
    p.add_argument("--configuration", required=True, metavar="FILE.json",
                   help="lumion.configuration JSON (or lumion route --json output, or a lumion.plan "
                   "file: its configuration)")
    p.add_argument("--map", metavar="MAP.json", help="calibration map (calibration.map), if available")
    p.add_argument("--trust-unverified", action="store_true",
                   help="with --map: accept routes through TBUs the map records as unverified (light "
                   "disagreed with their fit; refused by default, as lumion route avoids them)")
    p.add_argument("--seed", type=seed, default=None, help="chip seed for a simulated bench")
    p.add_argument("--verify", choices=VERIFY_MODES, default=DEFAULT_VERIFY,
                   help="which channels of each vector setting are read back in its own exchange: "
                   "'all' (default: a byte changed on the line anywhere in a vector is caught) or 'last' "
                   "(the vector's end marker only; about a third of the wire time). Overrides the bench "
                   "config's [heater_driver] verify")
    p.add_argument("--no-verify", action="store_true",
                   help="skip measuring each route with the laser and meter after programming "
                   "(the output then says the routes were not verified by light)")
    add_json_flag(p)
    p.set_defaults(run=run)


def _plan_configuration(path: str, mesh: Any) -> Any:
    """The configuration of a ``lumion.plan`` file (``lumion failover --out``); None for other files.

    Any other file, or one that does not parse, is left to ``load_configuration`` (which
    reports it); a plan's configuration made for another mesh is refused the same way.
    """
    from photonics.configuration import Configuration

    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "configuration"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != "lumion.plan":
        return None
    with reading("configuration of plan", path):
        return Configuration.from_dict(data.get("configuration"), mesh, source=f"{path} (its configuration)")


# What an interrupt's one line says, by when it came (docs/cli.md, "Interrupts").
NOT_STARTED = "stopped before writing anything: the chip holds its old configuration"
FINISHED = ("the write in progress was finished first: the chip holds the new configuration "
            "({channels} channels written)")


def program_whole(bench: Any, conf: Any) -> Any:
    """Program ``conf``, never leaving the chip between two configurations.

    Ctrl-C or SIGTERM during the write is held until the write ends (finished, or failed
    and rolled back by the controller), then raised with a line saying the chip holds the
    new configuration.
    """
    with deferred_interrupts() as pending:
        report = bench.program(conf)
    pending.raise_if_any(FINISHED.format(channels=report.channels))
    return report


@contextlib.contextmanager
def saying(message: str) -> Iterator[None]:
    """An interrupt inside the block is raised again with ``message`` (which configuration holds)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if str(exc) and not str(exc).isdigit():  # already says it
            raise
        raise type(exc)(message) from exc


def run(args: argparse.Namespace) -> int:
    """Load, program, report."""
    from instruments.config import load_config, open_bench
    from photonics.configuration import mesh_fingerprint, mesh_label
    from photonics.topology import mesh_from_spec

    # every file is read and checked before any instrument is opened
    source = None if args.bench == "sim" else args.bench
    with reading("bench config", source):
        cfg = load_config(source)
    with reading("mesh of bench config", source):
        mesh = mesh_from_spec(cfg.get("mesh", "smartlight"))
    conf = _plan_configuration(args.configuration, mesh) or load_configuration(args.configuration, mesh)
    heater_map = None
    if args.map:
        from calibration.map import CalibrationMap

        with reading("calibration map", args.map):
            heater_map = CalibrationMap.load(args.map, mesh=mesh)
        refuse_failed_tbus(conf, heater_map, mesh, args.map, args.trust_unverified)
    with saying(NOT_STARTED), opening(f"bench {args.bench}"):
        bench = open_bench(cfg, seed=args.seed, verify=args.verify)
    with saying(FINISHED.format(channels="every changed")), bench:
        with saying(NOT_STARTED):
            if heater_map is not None:
                with reading("calibration map", args.map):  # refuses a map made for another chip
                    heater_map.check_for(chip_id=bench.chip_id, mesh=bench.mesh, source=args.map)
                bench.controller.heater_map = heater_map
        report = program_whole(bench, conf)
        out = {"chip_id": bench.chip_id, "mesh": mesh_label(mesh),
               "mesh_fingerprint": mesh_fingerprint(mesh), "map": args.map or "ideal", **report.to_dict(),
               "n_tbus_by_state": {s: conf.states().count(s) for s in ("bar", "cross", "split")}}
        out["heater_faults"] = heater_faults_now(bench)
        out["verification"] = verification(bench, conf, args.no_verify)
        # the chip holds the new configuration, checked: an interrupt from here on (closing
        # the bench, printing) changes nothing and is ignored, so no second line contradicts
        # the output's
        settle()
    if args.json:
        print_json(out)
    else:
        print(f"programmed {args.configuration} on {out['chip_id']} ({out['map']} map): "
              f"{report.channels} channels in {report.commands} commands, {report.bytes_written} B out / "
              f"{report.bytes_read} B back, {report.wire_time_s * 1e3:.1f} ms on the wire "
              f"({report.elapsed_s * 1e3:.1f} ms here)")
        print("\n".join(verification_lines(out["verification"])))
    faults = heater_fault_lines(out["heater_faults"])
    for line in faults:
        print(line, file=sys.stderr)
    off = off_line(out["verification"])
    if off:
        print(off, file=sys.stderr)
    return EXIT_UNVERIFIED if off or faults else 0
