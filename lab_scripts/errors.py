"""The ``lumion`` error contract: every failure is one line, a kind and an exit code.

A failure of any subcommand -- a malformed command line, a bad input file, a request that
cannot be met, an instrument that does not answer, or a bug -- ends as exactly one line
on stderr (``lumion CMD: error: WHAT; HINT``) and, with ``--json``, one
``lumion.error`` object on stdout. The kinds and their exit codes are listed in
:data:`KINDS` and documented in docs/cli.md.

Example:
    >>> from photonics.errors import RoutingError
    >>> failure = describe_failure(RoutingError("no conflict-free routes"), "lumion route")
    >>> (failure.kind, failure.exit_code)
    ('impossible', 3)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from photonics.errors import BudgetError, LumionError, RoutingError

ERROR_SCHEMA = "lumion.error"
ERROR_VERSION = 1

# Exit codes. 2 stays "bad input" because scripts written against the first releases
# (and the README's "errors exit with status 2") treat 2 as "fix your file or value";
# argument-parser mistakes therefore get the sysexits.h code EX_USAGE (64), and bugs
# EX_SOFTWARE (70), so no two kinds share a code.
EXIT_OK = 0
EXIT_INPUT = 2
EXIT_IMPOSSIBLE = 3
EXIT_INSTRUMENT = 4
# `lumion calibrate` wrote its map, but light did not confirm some TBUs (named "unverified" in
# the map and the report): not a success a script may take for one, not an error either.
EXIT_UNVERIFIED = 5
# `lumion calibrate` measured the chip but refused to vouch for a map of it (calibration.map
# .CalibrationRefusedError: it drifted too fast, light disagrees with too much of the map, or its
# crosstalk is not what the model describes): the input was fine, the chip is not ready.
EXIT_REFUSED = 6
EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69  # sysexits EX_UNAVAILABLE: an optional package this command needs is missing
EXIT_BUG = 70
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C

# A message longer than this is cut: a terminal line and a log line stay readable, and a
# hostile file quoted inside an exception (200k brackets) never floods the terminal.
MAX_MESSAGE_CHARS = 400

DEBUG_ENV = "LUMION_DEBUG"
REPORT_TO = "the LUMION issue tracker"


@dataclass(frozen=True)
class Kind:
    """One class of failure: its exit code and what the user should do about it."""

    exit_code: int
    hint: str


KINDS: dict[str, Kind] = {
    "usage": Kind(EXIT_USAGE, "see `{prog} --help` for the options and their forms"),
    "input": Kind(EXIT_INPUT, "fix the file, path or value named above (file formats: docs/schemas.md)"),
    "impossible": Kind(EXIT_IMPOSSIBLE, "the request is well-formed but cannot be met; relax it "
                                        "(other ports or accelerators, fewer links, wider limits)"),
    "refused": Kind(EXIT_REFUSED, "no map of this chip can be trusted as it is now, so there is none to "
                                  "program: do what the line says (let its temperature settle, check the "
                                  "TEC and the chip), then run lumion calibrate again, which starts afresh "
                                  "(docs/calibration.md)"),
    "instrument": Kind(EXIT_INSTRUMENT, "check the instrument is on and connected and that the bench "
                                        "config's address is right (docs/instruments.md)"),
    "unavailable": Kind(EXIT_UNAVAILABLE, "install the extra named above (or everything: "
                                          "pip install 'lumion[all]')"),
    "bug": Kind(EXIT_BUG, f"this is a bug: please report it to {REPORT_TO} with the command line "
                          f"and the traceback {DEBUG_ENV}=1 prints"),
    "unverified": Kind(EXIT_UNVERIFIED, "light says the chip does not do what the heater map planned; "
                                        "calibrate the chip again (lumion calibrate) and give the new --map"),
    "interrupted": Kind(EXIT_INTERRUPTED, "run the command again to start over or resume"),
}


# Optional packages (top-level import name) and the extra of pyproject.toml that installs each.
EXTRAS = {
    "matplotlib": "plot",
    "serial": "instruments", "pyvisa": "instruments", "pyvisa_py": "instruments", "smbus2": "instruments",
    "gdsfactory": "layout", "kfactory": "layout", "klayout": "layout",
    "fastapi": "serve", "uvicorn": "serve",
    "dask": "campaign", "distributed": "campaign",
}


def missing_extra(exc: BaseException | None) -> tuple[str, str] | None:
    """(package, extra) when ``exc`` is the import of an optional package that is not installed."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    package = exc.name.split(".")[0]
    return (package, EXTRAS[package]) if package in EXTRAS else None


class CliError(LumionError):
    """A failure the CLI has already classified (``kind`` is a key of :data:`KINDS`).

    ``origin`` is the class name of the exception it replaces (reported as ``type``).
    """

    def __init__(self, message: str, kind: str, origin: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.origin = origin or type(self).__name__


class UsageError(LumionError):
    """A command-line value is malformed; the message says the expected form."""


class ArgumentError(CliError):
    """The command line does not parse (unknown option, missing or malformed value)."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message, "usage", "ArgumentError")
        self.prog = prog


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt (``lumion`` installs it)."""


def interruption(exc: BaseException) -> str:
    """What stopped the command, for its one line: Ctrl-C, SIGTERM, and what was done about it.

    A command that finished or rolled back its work on the way out says so in the
    exception's text (``lumion program``).
    """
    signal_name = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted (Ctrl-C / SIGINT)"
    said = str(exc) if str(exc) and not str(exc).isdigit() else ""
    return f"{signal_name}: {said}" if said else signal_name


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM ``exc`` was raised from or while handling, if any (else None).

    C code that calls back into Python can hand an interrupt raised there back as another
    error (numba: ``SystemError: ... returned a result with an exception set``, session 39);
    the command was still interrupted, not broken: exit 130, never 70.
    """
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


@dataclass(frozen=True)
class Failure:
    """A classified failure, ready to print."""

    prog: str
    kind: str
    message: str
    origin: str

    @property
    def exit_code(self) -> int:
        """The process exit status of this kind."""
        return KINDS[self.kind].exit_code

    @property
    def hint(self) -> str:
        """What to do, one sentence."""
        return KINDS[self.kind].hint.format(prog=self.prog)

    def line(self) -> str:
        """The one stderr line."""
        label = "internal error" if self.kind == "bug" else "error"
        return one_line(f"{self.prog}: {label}: {self.message}; {self.hint}", 2 * MAX_MESSAGE_CHARS)

    def to_json(self) -> str:
        """The ``lumion.error`` object printed on stdout with ``--json``."""
        return json.dumps({"schema": ERROR_SCHEMA, "version": ERROR_VERSION, "error": self.message,
                           "kind": self.kind, "hint": self.hint, "type": self.origin,
                           "exit_code": self.exit_code, "command": self.prog})


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` with every run of whitespace (newlines too) made one space, cut to ``limit``."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _is_instrument_os_error(exc: BaseException) -> bool:
    """Network and device-link failures: unresolvable host, refused or dropped connection."""
    if isinstance(exc, socket.gaierror | ConnectionError | TimeoutError):
        return True
    module = type(exc).__module__.split(".")[0]
    return module in ("serial", "pyvisa", "pyvisa_py", "smbus2")


def classify(exc: BaseException) -> str:
    """The kind (a key of :data:`KINDS`) of any exception reaching the top of ``lumion``."""
    from instruments.errors import BenchConfigError, InstrumentError, LimitError

    if isinstance(exc, CliError):
        return exc.kind
    if missing_extra(exc) or missing_extra(exc.__cause__):  # also a library's own "needs X" error
        return "unavailable"
    if isinstance(exc, UsageError):
        return "usage"
    if isinstance(exc, BenchConfigError):
        return "input"
    # by name: calibration is not imported for --help; its subclasses too (OperationBudgetError
    # went out as an input error, exit 2, while docs/calibration.md promised exit 6)
    if any(c.__name__ == "CalibrationRefusedError" for c in type(exc).__mro__):
        return "refused"
    if isinstance(exc, LimitError | RoutingError | BudgetError) or type(exc).__name__ == "UnreachableError":
        return "impossible"
    if isinstance(exc, InstrumentError) or type(exc).__name__ == "BenchLimitError":
        return "instrument"
    if isinstance(exc, LumionError):
        return "input"
    if _is_instrument_os_error(exc):
        return "instrument"
    if isinstance(exc, OSError | UnicodeDecodeError | RecursionError | json.JSONDecodeError
                  | tomllib.TOMLDecodeError):
        return "input"
    return "bug"


def explain(exc: BaseException) -> str:
    """A one-line reason for ``exc`` (OS and decoding errors in plain words)."""
    if isinstance(exc, LumionError):
        return one_line(str(exc))
    missing = missing_extra(exc)
    if missing:
        package, extra = missing
        return f"this needs the optional package {package}, not installed: pip install 'lumion[{extra}]'"
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return one_line(f"not valid JSON: {exc}")
    if isinstance(exc, tomllib.TOMLDecodeError):
        return one_line(f"not valid TOML: {exc}")
    if isinstance(exc, socket.gaierror):
        return one_line(f"host name not found ({exc.strerror or exc})")
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return one_line(f"{where}{exc.strerror}")
    text = str(exc)
    return one_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def describe_failure(exc: BaseException, prog: str) -> Failure:
    """Classify ``exc`` and word it for ``prog`` (``lumion`` or ``lumion CMD``)."""
    kind = classify(exc)
    if isinstance(exc, ArgumentError):
        prog = exc.prog
    origin = exc.origin if isinstance(exc, CliError) else type(exc).__name__
    message = explain(exc)
    return Failure(prog=prog, kind=kind, message=message, origin=origin)


# Errors a loader may raise on a malformed file when it does not validate a field itself.
_LOAD_ERRORS = (LumionError, OSError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                RecursionError, OverflowError)


@contextlib.contextmanager
def reading(what: str, path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Turn any failure while loading ``what`` from ``path`` into an ``input`` error naming it.

    Instrument errors (other than a bad bench config) pass through unchanged.
    """
    from instruments.errors import BenchConfigError, InstrumentError

    try:
        yield
    except CliError:
        raise
    except InstrumentError as exc:
        if not isinstance(exc, BenchConfigError):
            raise
        raise CliError(explain(exc), "input", type(exc).__name__) from exc
    except _LOAD_ERRORS as exc:
        reason = explain(exc)
        name = str(path)
        message = reason if isinstance(exc, LumionError) and name in reason else \
            f"cannot read {what} {name}: {reason}"
        raise CliError(one_line(message), "input", type(exc).__name__) from exc


@contextlib.contextmanager
def planning(*kinds_of_refusal: type[BaseException]) -> Iterator[None]:
    """Report ``kinds_of_refusal`` raised inside the block as ``impossible`` requests.

    For planners that use one exception type both for bad files and for requests they
    cannot meet (a fabric with no spare left): after loading, it means the latter.
    """
    try:
        yield
    except kinds_of_refusal as exc:
        raise CliError(explain(exc), "impossible", type(exc).__name__) from exc


@contextlib.contextmanager
def opening(what: str) -> Iterator[None]:
    """Report a connection failure while opening ``what`` (a bench) as an ``instrument`` fault.

    Transport libraries raise plain ``OSError`` or even a bare ``Exception`` (pyvisa-py's
    "could not connect") for an unresolvable host or a closed port; those are faults of
    the bench's wiring, not bugs.
    """
    try:
        yield
    except LumionError:
        raise
    except Exception as exc:
        if not (isinstance(exc, OSError) or type(exc) is Exception or _is_instrument_os_error(exc)):
            raise
        raise CliError(one_line(f"cannot open the instruments of {what}: {explain(exc)}"), "instrument",
                       type(exc).__name__) from exc


def debug_enabled() -> bool:
    """True when ``LUMION_DEBUG`` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0", "false", "no")


def json_flag_in(argv: list[str] | Any) -> bool:
    """Whether a raw command line asks for JSON (for failures before the parser finishes)."""
    return "--json" in list(argv)
