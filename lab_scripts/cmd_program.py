"""``lumion program``: program a configuration, or a synthesised heater state through a
phase-calibrated map (``lab_scripts.program_state``), onto a chip through a bench's heater
driver, then check it by light (``lab_scripts.program_verify``, ``lab_scripts.state_verify``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from lab_scripts.common import UsageError, add_json_flag, load_configuration, print_json, seed
from lab_scripts.errors import EXIT_UNVERIFIED, opening, reading
from lab_scripts.interrupts import deferred_interrupts, settle
from lab_scripts.program_budget import budget_lines, check_budget
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
        "A configuration made for another mesh than the bench's, or with a route whose link budget does not "
        "close on its lane (the check lumion route refuses plans by), is refused before anything is sent. "
        "A heater state (lumion synthesize --out, for a unitary or a filter) is set through a "
        "phase-calibrated map and each of its inputs checked by light against the synthesis's prediction. "
        "Example: lumion route --connect 5:28 --json > plan.json; "
        "lumion program --bench sim --configuration plan.json",
    )
    p.add_argument("--bench", default="sim", metavar="FILE.toml",
                   help="bench config, or 'sim' for a fresh simulated bench (default)")
    p.add_argument("--mesh", metavar="SPEC",
                   help="with --bench sim: the simulated chip's mesh (smartlight | hex:RxC | square:RxC | "
                   "triangular:RxC; default smartlight); a bench config names its own")
    p.add_argument("--configuration", required=True, metavar="FILE.json",
                   help="lumion.configuration JSON (or lumion route --json output, or a lumion.plan "
                   "file: its configuration), or a heater state (lumion.state, from lumion synthesize "
                   "--out), set through a phase-calibrated --map and checked by light")
    p.add_argument("--map", metavar="MAP.json", help="calibration map (calibration.map), if available; a "
                   "heater state needs one with common phases (lumion calibrate --common-phase)")
    p.add_argument("--trust-unverified", action="store_true",
                   help="with --map: accept routes through TBUs the map records as unverified (light "
                   "disagreed with their fit; refused by default, as lumion route avoids them)")
    p.add_argument("--transceiver", metavar="NAME",
                   help="lane profile each route's link budget is checked against before anything is sent, "
                   "as lumion route checks its plans (default: the one a lumion route --json file records, "
                   "else dwdm-10g-zr); a route it cannot carry is refused (exit 3)")
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


def program_whole(write: Callable[[], Any]) -> Any:
    """Run ``write`` (one controller write: a configuration's or a heater state's currents),
    never leaving the chip between two settings.

    Ctrl-C or SIGTERM during the write is held until the write ends (finished, or failed
    and rolled back by the controller), then raised with a line saying the chip holds the
    new configuration.
    """
    with deferred_interrupts() as pending:
        report = write()
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


def _load_target(path: str, mesh: Any) -> tuple[Any, Any]:
    """(configuration, None) or (None, heater state) from ``path``, checked for ``mesh``."""
    from lab_scripts.program_state import load_state, state_document

    doc = state_document(path)
    if doc is not None:
        with reading("heater state", path):
            return None, load_state(doc, mesh, path)
    return _plan_configuration(path, mesh) or load_configuration(path, mesh), None


def _refuse_what_the_map_cannot_set(args: argparse.Namespace, conf: Any, state: Any, heater_map: Any,
                                    mesh: Any) -> None:
    """Before anything is opened: a state needs a phase-calibrated map; neither may use a failed TBU."""
    from lab_scripts import program_state

    if state is not None:
        program_state.require_phase_map(heater_map, args.configuration, args.map)
        program_state.refuse_failed_tbus(state, heater_map, mesh, args.map, args.trust_unverified)
    elif heater_map is not None:
        refuse_failed_tbus(conf, heater_map, mesh, args.map, args.trust_unverified)


def _writer(bench: Any, conf: Any, state: Any, heater_map: Any) -> Callable[[], Any]:
    """The one write to make: the configuration through the controller's map, or the heater
    state's currents (computed now, before anything is sent) through the phase-calibrated map.
    Both go through ``MeshController.set_currents``: limits, all-or-nothing, read-back.
    """
    if state is None:
        return lambda: bench.program(conf)
    from lab_scripts.program_state import state_currents

    currents = state_currents(state, heater_map, bench.max_current_ma)
    return lambda: bench.controller.set_currents(currents)


def run(args: argparse.Namespace) -> int:
    """Load, program, report."""
    from instruments.config import load_config, open_bench
    from lab_scripts.state_verify import state_off_line, state_verification, state_verification_lines
    from photonics.configuration import mesh_fingerprint, mesh_label
    from photonics.topology import mesh_from_spec

    # every file is read and checked before any instrument is opened
    source = None if args.bench == "sim" else args.bench
    with reading("bench config", source):
        cfg = load_config(source)
    if args.mesh is not None:
        if source is not None:
            raise UsageError(f"--mesh is for --bench sim; the bench config {source} names its own mesh")
        cfg = {**cfg, "mesh": args.mesh}
    with reading(*(("mesh", args.mesh) if args.mesh is not None else ("mesh of bench config", source))):
        mesh = mesh_from_spec(cfg.get("mesh", "smartlight"))
    conf, state = _load_target(args.configuration, mesh)
    heater_map = None
    if args.map:
        from calibration.map import CalibrationMap

        with reading("calibration map", args.map):
            heater_map = CalibrationMap.load(args.map, mesh=mesh)
    _refuse_what_the_map_cannot_set(args, conf, state, heater_map, mesh)
    budget = None if conf is None else \
        check_budget(conf, mesh, args.configuration, args.transceiver, heater_map, args.trust_unverified)
    with saying(NOT_STARTED), opening(f"bench {args.bench}"):
        bench = open_bench(cfg, seed=args.seed, verify=args.verify)
    with saying(FINISHED.format(channels="every changed")), bench:
        with saying(NOT_STARTED):
            if heater_map is not None:
                with reading("calibration map", args.map):  # refuses a map made for another chip
                    heater_map.check_for(chip_id=bench.chip_id, mesh=bench.mesh, source=args.map)
                bench.controller.heater_map = heater_map
            write = _writer(bench, conf, state, heater_map)
        report = program_whole(write)
        out = {"chip_id": bench.chip_id, "mesh": mesh_label(mesh),
               "mesh_fingerprint": mesh_fingerprint(mesh), "map": args.map or "ideal",
               "programmed": "configuration" if state is None else "state", **report.to_dict(),
               "n_tbus_by_state": None if conf is None else
               {s: conf.states().count(s) for s in ("bar", "cross", "split")}}
        out["heater_faults"] = heater_faults_now(bench)
        out["budget"] = budget
        out["verification"] = verification(bench, conf, args.no_verify) if state is None else \
            state_verification(bench, state, heater_map, args.no_verify)
        # the chip holds the new configuration, checked: an interrupt from here on (closing
        # the bench, printing) changes nothing and is ignored, so no second line contradicts
        # the output's
        settle()
    lines = verification_lines if state is None else state_verification_lines
    if args.json:
        print_json(out)
    else:
        print(f"programmed {args.configuration} on {out['chip_id']} ({out['map']} map): "
              f"{report.channels} channels in {report.commands} commands, {report.bytes_written} B out / "
              f"{report.bytes_read} B back, {report.wire_time_s * 1e3:.1f} ms on the wire "
              f"({report.elapsed_s * 1e3:.1f} ms here)")
        print("\n".join(lines(out["verification"]) + budget_lines(budget)))
    faults = heater_fault_lines(out["heater_faults"])
    for line in faults:
        print(line, file=sys.stderr)
    off = off_line(out["verification"]) if state is None else state_off_line(out["verification"])
    if off:
        print(off, file=sys.stderr)
    return EXIT_UNVERIFIED if off or faults else 0
