"""The ``lumion`` command: one console command with subcommands.

Each subcommand lives in its own module (``lab_scripts/cmd_<name>.py``) exposing
``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports stay inside ``run`` so
``lumion --help`` is instant. Every failure -- argument errors included -- ends in one
line on stderr and a distinct exit code, and with ``--json`` in a ``lumion.error`` object
on stdout (see :mod:`lab_scripts.errors` and docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import logging.handlers
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import NoReturn

import lab_scripts
from lab_scripts.common import running
from lab_scripts.errors import (
    EXIT_INTERRUPTED,
    ArgumentError,
    debug_enabled,
    describe_failure,
    json_flag_in,
)
from lab_scripts.extras import check_extras

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
    "collective": "lab_scripts.cmd_collective",
    "campaign": "lab_scripts.cmd_campaign",
    "serve": "lab_scripts.cmd_serve",
    "rack": "lab_scripts.cmd_rack",
}

# Log records held back while a command runs: shown after a success, dropped after a
# failure (whose one line says it all) unless LUMION_DEBUG is set. Past this many they
# are shown at once, so a long run with many warnings still reports them live.
HELD_LOG_RECORDS = 200


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise :class:`ArgumentError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing the usage and exiting with 2."""
        raise ArgumentError(message, self.prog)


class _Version(argparse.Action):
    """``--version``: print ``lumion VERSION`` and exit; the version is read only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: object, option_string: str | None = None) -> None:  # noqa: ARG002
        print(f"lumion {lab_scripts.__version__}")  # on stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (used by ``main`` and by the docs)."""
    parser = Parser(
        prog="lumion",
        description="LUMION bench software: model, route, calibrate, program and lay out "
        "a programmable photonic MZI mesh. Exit codes: 0 ok, 2 bad input, 3 impossible "
        "request, 4 instrument fault, 64 usage, 69 optional package missing, 70 internal bug "
        "(docs/cli.md).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


@contextlib.contextmanager
def _held_logs() -> Iterator[logging.handlers.MemoryHandler | None]:
    """Hold library log records (when nobody configured logging) until the outcome is known."""
    root = logging.getLogger()
    if root.handlers:  # an embedding program (or pytest) handles logging itself
        yield None
        return
    target = logging.StreamHandler(sys.stderr)
    target.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    held = logging.handlers.MemoryHandler(HELD_LOG_RECORDS, flushLevel=logging.CRITICAL + 1,
                                          target=target, flushOnClose=False)
    root.addHandler(held)
    try:
        yield held
    finally:
        root.removeHandler(held)
        held.close()


def _run(argv: list[str], held: logging.handlers.MemoryHandler | None) -> int:
    prog, want_json = "lumion", json_flag_in(argv)
    try:
        args = build_parser().parse_args(argv)
        prog, want_json = f"lumion {args.command}", bool(getattr(args, "json", False))
        check_extras(args)  # before any work: a missing extra is said at once
        with running(args.command):
            code = int(args.run(args) or 0)
    except SystemExit as exc:  # --help and --version print and exit 0
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        failure = describe_failure(exc, prog)
        if debug_enabled():
            if held is not None:
                held.flush()
            traceback.print_exc(file=sys.stderr)
        elif held is not None:
            held.buffer.clear()
        if want_json:
            print(failure.to_json(), flush=True)
        print(failure.line(), file=sys.stderr, flush=True)
        return failure.exit_code
    if held is not None:
        held.flush()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lumion`` console script; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    with _held_logs() as held:
        return _run(arguments, held)


if __name__ == "__main__":
    sys.exit(main())
