"""The SCPI error queue: a ``SYST:ERR?`` entry parsed, and the error that entries raise.

The instrument queues an entry (``-222,"Data out of range"``) for each command it refused;
``0,"No error"`` means the queue is empty. -1xx codes say it did not understand the
command at all (:class:`UnknownCommandError`), any other code that it refused the value or
the state (:class:`DeviceError`); both carry the instrument's own text.
"""

from __future__ import annotations

import re

from instruments.errors import DeviceError, GarbledReplyError, UnknownCommandError

_ENTRY = re.compile(r'^([+-]?\d+)\s*,\s*"?(.*?)"?$')
ERROR_DRAIN_LIMIT = 32  # SYST:ERR? queries before giving up on an endless queue (queues hold ~30)
COMMAND_ERRORS = (-199, -100)  # SCPI-99 -1xx: the instrument did not understand the command


def parse_error_entry(reply: str, name: str) -> tuple[int, str]:
    """A ``SYST:ERR?`` reply -> (code, text); ``name``: the instrument, for the message."""
    m = _ENTRY.match(reply.strip())
    if not m:
        raise GarbledReplyError(f"{name}: SYST:ERR? gave {reply!r}")
    return int(m.group(1)), m.group(2)


def device_error(name: str, command: str | None, errs: list[tuple[int, str]]) -> DeviceError:
    """The error to raise for the entries ``errs`` drained after ``command`` (None: unknown)."""
    text = "; ".join(f"{c}: {t}" for c, t in errs)
    what = f"{command!r}" if command else "a command"
    if COMMAND_ERRORS[0] <= errs[0][0] <= COMMAND_ERRORS[1]:
        return UnknownCommandError(
            f"{name} rejected {what}: {text}; the driver and the instrument disagree on the command "
            "set: check the model (*IDN?) and its firmware", code=errs[0][0])
    return DeviceError(f"{name} refused {what}: {text}; check the value against the instrument's "
                       "limits and state (locked? output off?)", code=errs[0][0])
