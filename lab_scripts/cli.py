"""The ``lumion`` command: one console command with subcommands.

Each subcommand lives in its own module (``lab_scripts/cmd_<name>.py``) exposing
``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports stay inside ``run`` so
``lumion --help`` is instant. Errors we raise on purpose (``LumionError``) exit with
status 2 and a one-line reason; with ``--json`` the reason is also printed as
``{"error": ..., "type": ...}`` on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from photonics.errors import LumionError

# name -> module; a module adds its own parser and runs its own command.
COMMANDS: dict[str, str] = {
    "mesh": "lab_scripts.cmd_mesh",
    "simulate": "lab_scripts.cmd_simulate",
    "route": "lab_scripts.cmd_route",
    "layout": "lab_scripts.cmd_layout",
    "demo": "lab_scripts.cmd_demo",
    "failover": "lab_scripts.cmd_failover",
    "schedule": "lab_scripts.cmd_schedule",
    "phases": "lab_scripts.cmd_phases",
    "calibrate": "lab_scripts.cmd_calibrate",
    "bench": "lab_scripts.cmd_bench",
    "program": "lab_scripts.cmd_program",
}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (used by ``main`` and by the docs)."""
    parser = argparse.ArgumentParser(
        prog="lumion",
        description="LUMION bench software: model, route, calibrate, program and lay out "
        "a programmable photonic MZI mesh.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lumion`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except LumionError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc), "type": type(exc).__name__}))
        print(f"lumion {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"lumion {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
