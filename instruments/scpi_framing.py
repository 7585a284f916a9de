"""IEEE 488.2 framing of one SCPI exchange: the tagged message, and which reply line is its.

A message is ``*ESE <tag>;<units>;*ESR?;*ESE?``; the instrument executes the units in
order and answers them on one line, so that line is the reply to the message exactly when
its last unit is the tag. ``*ESR?`` in the same message reports what happened while it
ran. docs/protocol-scpi.md, "Framing and faults", gives the rules built on this;
:class:`instruments.scpi.ScpiInstrument` sends the frames and reads the lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from instruments.errors import GarbledReplyError
from instruments.scpi_text import split_outside_quotes

# The tag lives in the Standard Event Status Enable register: *ESE takes 0..255 (§10.10) and
# *ESE? returns it; it has no effect unless service requests are used. 0 is its power-on
# value, so tags run 1..255 and a stale reply would need 255 newer frames to collide.
TAG_MODULUS = 255
ESR_PON = 128  # Standard Event Status Register bit 7: power on (§11.5.1.2)
ESR_ERROR_BITS = 4 | 8 | 16 | 32  # query, device-dependent, execution, command error (§11.5.1)
FRAME_TAIL = ("*ESR?", "*ESE?")
# Lines discarded while waiting for one reply before the exchange counts as failed: one
# late reply, one duplicate and one unsolicited line can precede it; 8 is ample margin.
STALE_LINES_MAX = 8


@dataclass
class Frame:
    """The reply to one tagged message.

    Attributes:
        replies: the reply units of the message's own units (the frame tail taken off).
        esr: the Standard Event Status Register as ``*ESR?`` read it at the end.
        complete: every expected reply unit came (a refused unit answers nothing).
    """

    replies: list[str]
    esr: int
    complete: bool


def split_replies(line: str) -> list[str]:
    """A response line -> its units (IEEE 488.2 joins them with ``;``; quoted text may hold one)."""
    return [part.strip() for part in split_outside_quotes(line, ";")]


def absolute_unit(unit: str) -> str:
    """A program message unit made independent of the path the previous unit left."""
    return unit if unit.startswith((":", "*")) else ":" + unit


def framed_message(tag: int, units: Sequence[str]) -> str:
    """``*ESE <tag>;<units>;*ESR?;*ESE?``: ``units`` in one message that ends with its tag."""
    return ";".join([f"*ESE {tag}", *(absolute_unit(u) for u in units), *FRAME_TAIL])


def tagged_frame(line: str, tag: int, n_replies: int | None, name: str) -> Frame | None:
    """``line`` as the reply to frame ``tag``; None when it is not that reply (late, duplicated,
    unsolicited or corrupted: the caller discards it).

    ``n_replies``: reply units the message's own units give (None: any number).
    """
    units_in = split_replies(line)
    if len(units_in) < len(FRAME_TAIL) or units_in[-1].lstrip("+") != str(tag):
        return None
    try:
        esr = int(units_in[-2])
    except ValueError as exc:
        raise GarbledReplyError(f"{name}: *ESR? gave {units_in[-2]!r}") from exc
    body = units_in[:-len(FRAME_TAIL)]
    return Frame(body, esr, n_replies is None or len(body) == n_replies)
