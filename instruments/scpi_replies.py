"""Reply parsers of the 816x / 8164B drivers: numbers, flags, wavelengths, powers.

Each turns the text of one reply unit into a value, or raises :class:`GarbledReplyError`
(a transient error: the exchange is retried), so a reply mangled on the line is never
returned as a value. Shared by :mod:`instruments.laser` and :mod:`instruments.power_meter`.
"""

from __future__ import annotations

import math

from instruments.errors import GarbledReplyError


def parse_float(reply: str) -> float:
    """A number reply (NR1, NR2 or NR3) -> float."""
    try:
        return float(reply)
    except ValueError as exc:
        raise GarbledReplyError(f"expected a number, got {reply!r}") from exc


def parse_nm(reply: str) -> float:
    """A wavelength reply in metres -> nm."""
    return parse_float(reply) * 1e9


def parse_flag(reply: str) -> bool:
    """A boolean reply: ``0``/``1`` (or ``+0``/``+1``)."""
    value = reply.strip().lstrip("+")
    if value not in ("0", "1"):
        raise GarbledReplyError(f"expected 0 or 1, got {reply!r}")
    return value == "1"


def watts_to_dbm(watts: float) -> float:
    """A power read in W -> dBm (a power of zero or less has no dBm value: a garbled reply)."""
    if watts <= 0:
        raise GarbledReplyError(f"a power of {watts:g} W has no dBm value")
    return 10 * math.log10(watts * 1e3)


def parse_power_dbm(unit_reply: str, value_reply: str) -> float:
    """A power with the unit it is in (``+0`` dBm / ``+1`` W) -> dBm."""
    value = parse_float(value_reply)
    return value if not parse_flag(unit_reply) else watts_to_dbm(value)
