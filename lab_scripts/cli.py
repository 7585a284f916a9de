"""The ``lumion`` command: one console command with subcommands.

Each subcommand lives in its own module (``lab_scripts/cmd_<name>.py``) exposing
``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports stay inside ``run`` so
``lumion --help`` is instant. Every failure -- argument errors included -- ends in one
line on stderr and a distinct exit code, and with ``--json`` in a ``lumion.error`` object
on stdout (see :mod:`lab_scripts.errors` and docs/cli.md).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import importlib
import logging
import logging.handlers
import os
import shutil
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

import lab_scripts
from lab_scripts.common import running
from lab_scripts.errors import (
    EXIT_INTERRUPTED,
    ArgumentError,
    Failure,
    debug_enabled,
    describe_failure,
    interrupt_behind,
    interruption,
    json_flag_in,
)
from lab_scripts.extras import check_extras
from lab_scripts.interrupts import raising_interrupts, settle

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
    "synthesize": "lab_scripts.cmd_synthesize",
}

# Log records held back while a command runs: shown after a success, dropped after a
# failure (whose one line says it all) unless LUMION_DEBUG is set. Past this many the
# oldest are dropped (and counted): a failing run still prints one line, however many
# warnings came before it, and a long run's memory stays bounded.
HELD_LOG_RECORDS = 200


class HeldRecords(logging.handlers.MemoryHandler):
    """A MemoryHandler that never flushes by itself: it keeps the last ``capacity`` records.

    (The standard one flushes when full, which printed 201 stderr lines before a failure's
    one line.) :meth:`flush` first says how many earlier records were dropped.
    """

    def __init__(self, capacity: int, target: logging.Handler) -> None:
        super().__init__(capacity, flushLevel=logging.CRITICAL + 1, target=target, flushOnClose=False)
        self.dropped = 0

    def shouldFlush(self, _record: logging.LogRecord) -> bool:  # noqa: N802 (logging's name)
        """Never on its own: the outcome decides; past the capacity the oldest record goes."""
        if len(self.buffer) > self.capacity:
            del self.buffer[0]
            self.dropped += 1
        return False

    def flush(self) -> None:
        """Print the held records, led by a count of those dropped."""
        with self.lock:
            if self.dropped and self.target is not None:
                self.target.handle(logging.makeLogRecord(
                    {"name": "lumion", "levelno": logging.WARNING, "levelname": "WARNING",
                     "msg": f"{self.dropped} earlier log records were dropped (the last "
                            f"{self.capacity} are kept)"}))
                self.dropped = 0
        super().flush()

    def discard(self) -> None:
        """Forget every held record (after a failure)."""
        with self.lock:
            self.buffer.clear()
            self.dropped = 0


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise :class:`ArgumentError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing the usage and exiting with 2."""
        raise ArgumentError(message, self.prog)

    def _get_formatter(self) -> argparse.HelpFormatter:
        """The help formatter at the terminal's width, read once per process: argparse makes
        one for every option added (to check its metavar) and each read the terminal size
        (environment and ioctl), a sixth of the time building the parser took.
        """
        return self.formatter_class(prog=self.prog, width=_help_width())


@functools.cache
def _help_width() -> int:
    """The width argparse gives help text: the terminal's columns less 2, as argparse's own."""
    return shutil.get_terminal_size().columns - 2


class _Version(argparse.Action):
    """``--version``: print ``lumion VERSION`` and exit; the version is read only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,  # noqa: ARG002
                 values: object, option_string: str | None = None) -> None:  # noqa: ARG002
        print(f"lumion {lab_scripts.__version__}")  # on stdout, as argparse's own version action
        parser.exit()


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (used by ``main`` and by the docs), built once per process.

    Parsing changes nothing in a parser, so one serves every call of :func:`main`: building
    it (every subcommand's options) took ~30 ms, 95 % of an in-process ``main()`` that fails
    on its input -- the fuzz tests make hundreds of them, and a ``lumion`` forked from a
    parent that built it (tests, docs) starts without it. The command that runs is its
    module's ``run`` at that moment (:func:`_command`), not the one the parser recorded.
    """
    parser = Parser(
        prog="lumion",
        description="LUMION bench software: model, route, calibrate, program and lay out "
        "a programmable photonic MZI mesh. Exit codes: 0 ok, 2 bad input, 3 impossible "
        "request, 4 instrument fault, 5 unverified (calibrate, program, demo), 6 calibration "
        "refused, 64 usage, 69 optional package missing, 70 internal bug (docs/cli.md).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


def _command(name: str) -> Callable[[argparse.Namespace], int | None]:
    """The ``run`` function of subcommand ``name``'s module, looked up now (a test may replace it)."""
    return importlib.import_module(COMMANDS[name]).run


@contextlib.contextmanager
def _held_logs() -> Iterator[HeldRecords | None]:
    """Hold library log records (when nobody configured logging) until the outcome is known."""
    root = logging.getLogger()
    if root.handlers:  # an embedding program (or pytest) handles logging itself
        yield None
        return
    target = logging.StreamHandler(sys.stderr)
    target.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    held = HeldRecords(HELD_LOG_RECORDS, target)
    root.addHandler(held)
    try:
        yield held
    finally:
        root.removeHandler(held)
        held.close()


def _run(argv: list[str], held: HeldRecords | None) -> int:
    prog, want_json = "lumion", json_flag_in(argv)
    try:
        args = build_parser().parse_args(argv)
        prog, want_json = f"lumion {args.command}", bool(getattr(args, "json", False))
        check_extras(args)  # before any work: a missing extra is said at once
        with running(args.command):
            code = int(_command(args.command)(args) or 0)
    except SystemExit as exc:  # --help and --version print and exit 0
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        return _interrupted(exc, prog, want_json, held)
    except Exception as exc:
        interrupt = interrupt_behind(exc)
        if interrupt is not None:  # an interrupt that C code handed back as another error
            if debug_enabled():
                traceback.print_exc(file=sys.stderr)
            return _interrupted(interrupt, prog, want_json, held)
        failure = describe_failure(exc, prog)
        if debug_enabled():
            if held is not None:
                held.flush()
            traceback.print_exc(file=sys.stderr)
        elif held is not None:
            held.discard()
        if want_json:
            print(failure.to_json(), flush=True)
        print(failure.line(), file=sys.stderr, flush=True)
        return failure.exit_code
    if held is not None:
        held.flush()
    return code


def _interrupted(exc: KeyboardInterrupt, prog: str, want_json: bool, held: HeldRecords | None) -> int:
    """Say that Ctrl-C or SIGTERM stopped the command (one line, and the JSON object); 130."""
    if held is not None:
        held.discard()
    failure = Failure(prog=prog, kind="interrupted", message=interruption(exc), origin=type(exc).__name__)
    if want_json:
        print(failure.to_json(), flush=True)
    print(failure.line(), file=sys.stderr, flush=True)
    return failure.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lumion`` console script; returns the exit status.

    Run as the program (``argv`` None) the process ends here when the command was
    interrupted (see :func:`_end_interrupted`).
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_program = argv is None
    with _held_logs() as held, raising_interrupts(restore=not as_program):
        code = _run(arguments, held)
        settle()  # the outcome is settled and said: a signal from here on changes nothing
    if as_program:
        _ignore_late_signals()
        if code == EXIT_INTERRUPTED:
            _end_interrupted(code)
    return code


def _ignore_late_signals() -> None:
    """Ctrl-C or SIGTERM while the interpreter shuts down changes nothing: ignore them.

    Otherwise a signal in those last moments kills the process unreported (SIGTERM) or
    prints a traceback (SIGINT) after its one line or its output was already given.
    """
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def _end_interrupted(code: int) -> NoReturn:
    """End an interrupted ``lumion`` process with ``code`` (130) after its exit handlers.

    CPython marks a KeyboardInterrupt "unhandled" when it leaves code run by ``exec`` of a
    string -- as ``dataclasses`` and ``collections.namedtuple`` do while a module is being
    imported -- even when an outer ``except`` handles it, and then ends the process by
    SIGINT after the interpreter shut down (Modules/main.c ``exit_sigint``; CPython
    gh-128130 keeps the mark). A Ctrl-C landing inside a lazy import of ``lumion
    program``'s start thus exited -2 after its line said the chip holds its old
    configuration. Ending here, after ``atexit`` handlers and flushing the output, keeps
    the exit status the line promises.
    """
    atexit._run_exitfuncs()  # what interpreter shutdown runs first (files, temporary folders)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more can be said
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
