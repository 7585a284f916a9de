"""Driver base: a lock around every exchange, retries on transient faults, DEBUG logging.

Drivers are short and declarative, in the style of PyMeasure: a property built by
:func:`control` (or :func:`measurement`) holds a command template, a reply parser and
limits; :class:`Instrument` does the talking. Templates may name ids of the object that
owns the property (``{slot}``, ``{chan}``), so channel objects reuse them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from instruments.errors import ConnectionLostError, LimitError, TransientError
from instruments.transport import Transport

log = logging.getLogger("instruments")


def as_float(value: Any, what: str) -> float:
    """``value`` as a finite Python float (numpy scalars and 0-d arrays welcome)."""
    try:
        x = float(np.asarray(value, dtype=float))
    except (TypeError, ValueError) as exc:
        raise LimitError(f"{what} must be a number, not {value!r}") from exc
    if not np.isfinite(x):
        raise LimitError(f"{what} must be finite, not {x}")
    return x


def check_range(value: Any, low: float, high: float, what: str, unit: str) -> float:
    """``value`` as float, or :class:`LimitError` when outside ``[low, high]`` (nothing sent)."""
    x = as_float(value, what)
    if not low <= x <= high:
        raise LimitError(f"{what} {x:g} {unit} is outside {low:g}..{high:g} {unit}; nothing was sent")
    return x


class Instrument:
    """A transport plus a lock, retries and logging.

    Args:
        transport: an open :class:`~instruments.transport.Transport`.
        name: used in log lines and error messages.
        retries: extra attempts after a transient error (timeout, garbage, dropped link);
            a dropped link is reopened before the next attempt.
    """

    def __init__(self, transport: Transport, *, name: str = "instrument", retries: int = 2) -> None:
        self.transport = transport
        self.name = name
        self.retries = retries
        self.lock = threading.RLock()
        self.log = log.getChild(name)

    # -- exchanges ----------------------------------------------------------------------
    def write(self, command: str) -> None:
        """Send a command that has no reply (SCPI settings)."""
        with self.lock:
            self._retry(lambda: self._send(command), command)

    def query(self, command: str) -> str:
        """Send a command and return its reply line."""
        with self.lock:
            return self._retry(lambda: self._exchange(command), command)

    def ask(self, command: str, check: Callable[[str, str], Any]) -> Any:
        """Query and pass (command, reply) to ``check``, retrying when it raises a transient error."""
        with self.lock:
            return self._retry(lambda: check(command, self._exchange(command)), command)

    def _send(self, command: str) -> None:
        self.log.debug("%s <- %r", self.name, command)
        self.transport.write(command)

    def _exchange(self, command: str) -> str:
        self._send(command)
        reply = self.transport.read()
        self.log.debug("%s -> %r", self.name, reply)
        return reply

    def _retry(self, attempt: Callable[[], Any], command: str) -> Any:
        for k in range(self.retries + 1):
            try:
                return attempt()
            except TransientError as exc:
                if k == self.retries:
                    raise
                self.log.warning("%s: %r failed (%s); retry %d/%d", self.name, command, exc, k + 1,
                                 self.retries)
                try:
                    if isinstance(exc, ConnectionLostError):
                        self.transport.reopen()
                    else:
                        self.transport.clear()
                except TransientError as again:
                    self.log.warning("%s: recovery failed: %s", self.name, again)
        raise AssertionError("unreachable")

    # -- link -----------------------------------------------------------------------------
    def reconnect(self) -> None:
        """Close and reopen the link (after a cable was replugged or the instrument rebooted)."""
        with self.lock:
            self.log.info("%s: reconnecting", self.name)
            self.transport.reopen()

    def close(self) -> None:
        """Close the link."""
        with self.lock:
            self.transport.close()

    def __enter__(self) -> Instrument:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Channel:
    """A sub-unit addressed by ids in the parent's command templates (e.g. a meter head)."""

    def __init__(self, parent: Instrument, **ids: int) -> None:
        self.parent = parent
        self.ids = ids

    def write(self, command: str) -> None:
        """Send through the parent."""
        self.parent.write(command)

    def query(self, command: str) -> str:
        """Query through the parent."""
        return self.parent.query(command)

    def ask(self, command: str, check: Callable[[str, str], Any]) -> Any:
        """Checked query through the parent (retried on transient errors)."""
        return self.parent.ask(command, check)


def _ids(obj: Any) -> dict[str, Any]:
    return getattr(obj, "ids", {})


def control(get_cmd: str | None, set_cmd: str | None, doc: str, *, parse: Callable[[str], Any] = float,
            limits: tuple[float, float] | None = None, unit: str = "",
            fmt: Callable[[float], str] | None = None, check_errors: bool = False) -> property:
    """A property that queries ``get_cmd`` and writes ``set_cmd.format(value=..., **ids)``.

    Args:
        get_cmd: query template, or None for write-only.
        set_cmd: setting template with ``{value}``, or None for read-only.
        doc: docstring (say the unit).
        parse: reply -> value.
        limits: (low, high) checked before sending.
        unit: for error messages.
        fmt: value -> text in the command (default ``repr`` of the float).
        check_errors: after a setting, drain the instrument's error queue (``check_errors()``).
    """

    def fget(self: Any) -> Any:
        if get_cmd is None:
            raise AttributeError("write-only property")
        return self.ask(get_cmd.format(**_ids(self)), lambda _cmd, reply: parse(reply))

    def fset(self: Any, value: Any) -> None:
        if set_cmd is None:
            raise AttributeError("read-only property")
        if isinstance(value, bool | np.bool_):
            text = "1" if value else "0"
        else:
            what = doc.split(" (", maxsplit=1)[0]
            x = check_range(value, *limits, what, unit) if limits else as_float(value, doc)
            text = fmt(x) if fmt else repr(x)
        self.write(set_cmd.format(value=text, **_ids(self)))
        if check_errors:
            owner = getattr(self, "parent", self)
            owner.check_errors()

    return property(fget if get_cmd else None, fset if set_cmd else None, doc=doc)


def measurement(get_cmd: str, doc: str, *, parse: Callable[[str], Any] = float) -> property:
    """A read-only property that queries ``get_cmd`` (templated with the owner's ids)."""
    return control(get_cmd, None, doc, parse=parse)
