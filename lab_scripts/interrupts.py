"""Ctrl-C and SIGTERM held back while a write to the chip is in progress.

A write cut midway leaves the chip in neither its old nor its new configuration. Inside
:func:`deferred_interrupts` SIGINT and SIGTERM are noted, not raised; when the block ends
the caller raises them with a message saying which configuration the chip holds
(``lumion program``: the write was finished first). A write cannot hang for long: the
driver's time-outs and retries bound it (a few seconds at most).

Once a command's outcome is settled (:func:`settle`: ``lumion program`` has written and
checked the chip; any command once it returned) a signal changes nothing: the handlers
:func:`raising_interrupts` installs ignore it. Before, a signal landing between the last
statement of a command and the end of the process printed a second, wrong line (or none:
the default SIGTERM action), after the output had said which configuration the chip holds.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from lab_scripts.errors import Terminated
from photonics.compiled_calls import hold_until_return

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Outcome:
    """Whether the running command's outcome is settled (then signals are ignored)."""

    settled = False


def settle() -> None:
    """From now on SIGINT and SIGTERM change nothing (the handlers of :func:`raising_interrupts`)."""
    _Outcome.settled = True


def settled() -> bool:
    """True once :func:`settle` was called in the current :func:`raising_interrupts` block."""
    return _Outcome.settled


def _interrupt(signum: int, _frame: object) -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM :class:`Terminated`; nothing once settled.

    Inside a numba-compiled call the exception is raised when the call returns
    (:mod:`photonics.compiled_calls`): raised in numba's callback it crashed the process or
    came out as a SystemError, an "internal bug" (exit 70) instead of an interruption.
    """
    if _Outcome.settled:
        return
    exc = Terminated(signum) if signum == signal.SIGTERM else KeyboardInterrupt()
    if hold_until_return(exc):
        return
    raise exc


@contextlib.contextmanager
def raising_interrupts(restore: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM raise (as Ctrl-C does) until :func:`settle`, then are ignored.

    So ``kill`` (and a service manager stopping a run) ends a command the way Ctrl-C does:
    cleanup runs, ``lumion program`` finishes or rolls back, and one line says what
    happened. ``restore=False`` (the ``lumion`` program itself) keeps the handlers to the
    end of the process: putting the defaults back would reopen a window in which SIGTERM
    kills the process unreported. Only the main thread can take signals; elsewhere
    nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _Outcome.settled = False
    previous = {s: signal.signal(s, _interrupt) for s in HELD_SIGNALS}
    try:
        yield
    finally:
        if restore:
            for s, handler in previous.items():
                signal.signal(s, handler)
            _Outcome.settled = False


@dataclass
class Pending:
    """The first signal that arrived inside the block (None: none)."""

    signum: int | None = None

    def raise_if_any(self, message: str) -> None:
        """Raise the held signal as KeyboardInterrupt (SIGINT) or :class:`Terminated` (SIGTERM)."""
        if self.signum == signal.SIGTERM:
            raise Terminated(message)
        if self.signum is not None:
            raise KeyboardInterrupt(message)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[Pending]:
    """Hold SIGINT and SIGTERM for the block (main thread only; elsewhere signals never arrive)."""
    pending = Pending()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return

    def hold(signum: int, _frame: object) -> None:
        pending.signum = pending.signum or signum

    previous = {s: signal.signal(s, hold) for s in HELD_SIGNALS}
    try:
        yield pending
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
