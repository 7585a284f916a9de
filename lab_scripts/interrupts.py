"""Ctrl-C and SIGTERM held back while a write to the chip is in progress.

A write cut midway leaves the chip in neither its old nor its new configuration. Inside
:func:`deferred_interrupts` SIGINT and SIGTERM are noted, not raised; when the block ends
the caller raises them with a message saying which configuration the chip holds
(``lumion program``: the write was finished first). A write cannot hang for long: the
driver's time-outs and retries bound it (a few seconds at most).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from lab_scripts.errors import Terminated

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
