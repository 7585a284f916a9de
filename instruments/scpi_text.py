"""IEEE 488.2 message text: splitting units and arguments outside quoted strings.

Plain syntax, shared by our SCPI drivers (replies) and the simulated instruments
(program messages); it decides nothing about what a command means.

Example:
    >>> split_outside_quotes('SYST:ERR?;*IDN?', ";")
    ['SYST:ERR?', '*IDN?']
    >>> split_outside_quotes('+0,"No error; all good"', ",")
    ['+0', '"No error; all good"']
"""

from __future__ import annotations


def split_outside_quotes(text: str, sep: str) -> list[str]:
    """Split on ``sep`` except inside "..." or '...' strings."""
    parts, buf, quote = [], [], ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == sep:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    parts.append("".join(buf))
    return parts
