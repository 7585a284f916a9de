"""Confirmed SCPI settings: :class:`Setting` and the declarative :func:`scpi_control` property.

A setting goes out as ``<setting>;*OPC?;<read-back>`` in one message and counts only when
the read-back equals what was asked (:meth:`Setting.check`); the driver
(:class:`instruments.scpi.ScpiInstrument`) then owns it and re-applies it after a restart.
Drivers declare their settings with :func:`scpi_control`, in the style of PyMeasure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from instruments.base import as_float, check_range
from instruments.errors import SettingLostError
from instruments.scpi_replies import parse_float

# Read-back tolerance of a wavelength setting (the laser's and the meter heads'):
# 1 pm: ten times the 81600B's 0.1 pm setting resolution (the instrument may round to it),
# far below the smallest wavelength step the calibration uses (10 pm).
WAVELENGTH_TOLERANCE_NM = 1e-3


@dataclass(frozen=True)
class Setting:
    """One setting: the command, and the queries whose replies confirm it.

    Attributes:
        key: what it sets (one owned value per key); None: not owned (no read-back).
        command: the setting as sent (``SOUR0:WAV 1550.0000NM``).
        readback: queries answering the value now in force.
        parse: their replies -> the value, in the unit of ``expected``.
        expected: the value the instrument must report (as sent, after rounding).
        tolerance: largest accepted difference for numbers (same unit).
    """

    key: str | None
    command: str
    readback: tuple[str, ...] = ()
    parse: Callable[[list[str]], Any] | None = None
    expected: Any = None
    tolerance: float = 0.0

    def check(self, replies: list[str], name: str) -> None:
        """Raise :class:`SettingLostError` unless ``replies`` report :attr:`expected`."""
        if self.parse is None:
            return
        got = self.parse(replies)
        if isinstance(self.expected, float):
            ok = abs(got - self.expected) <= self.tolerance
        else:
            ok = got == self.expected
        if not ok:
            raise SettingLostError(
                f"{name}: {self.command!r} was not applied: the instrument reports {got!r}, expected "
                f"{self.expected!r}; resent, or check that nothing else controls the instrument")


def scpi_control(get_cmd: str | None, set_cmd: str | None, doc: str, *,
                 parse: Callable[[str], Any] = parse_float, limits: tuple[float, float] | None = None,
                 unit: str = "", fmt: Callable[[float], str] = repr, tolerance: float = 0.0) -> property:
    """A property: ``get_cmd`` queried (twice, compared) and parsed; ``set_cmd`` a confirmed setting.

    Templates use the owner's ids (``{src}``, ``{slot}``) and ``{value}``. Limits are
    checked before anything is sent; numpy scalars are welcome; booleans go as 0/1. The
    setting is read back with ``get_cmd`` and must equal the value sent within
    ``tolerance`` (in the property's unit); the driver then owns it.
    """

    def fget(self: Any) -> Any:
        owner = getattr(self, "parent", self)
        return owner.query_value(get_cmd.format(**self.ids), parse)  # type: ignore[union-attr]

    def fset(self: Any, value: Any) -> None:
        expected: Any
        if isinstance(value, bool | np.bool_):
            text, expected = ("1" if value else "0"), bool(value)
        else:
            what = doc.split(" (", maxsplit=1)[0]
            text = fmt(check_range(value, *limits, what, unit) if limits else as_float(value, what))
            expected = float(text)
        query = get_cmd.format(**self.ids)  # type: ignore[union-attr]
        owner = getattr(self, "parent", self)
        owner.apply(Setting(query, set_cmd.format(value=text, **self.ids), (query,),  # type: ignore[union-attr]
                            lambda r: parse(r[0]), expected, tolerance))

    return property(fget if get_cmd else None, fset if set_cmd else None, doc=doc)
