"""The names a drawn mesh gives its parts, shared by the drawing and by the checks that read it back.

Instance ``tbu_<r>_<c>_<s>`` is TBU ``tbu:<r>.<c>.<s>`` (:func:`instance_name`); a row of
the pad map is a :class:`PadInfo`. Drawing modules write these names and verification
modules (:mod:`layouts.checks`, :mod:`layouts.lvs`, :mod:`layouts.electrical_lvs`) look
them up, so they live here, below both (no gdsfactory here).
"""

from __future__ import annotations

from dataclasses import dataclass


def instance_name(tbu_name: str) -> str:
    """Instance name of a TBU in the layout: ``tbu:0.1.2`` -> ``tbu_0_1_2``."""
    return tbu_name.replace(":", "_").replace(".", "_")


@dataclass(frozen=True)
class PadInfo:
    """One bond pad of the pad map (centre in µm)."""

    pad: str
    channel: int | None
    tbu: str
    arm: str
    x: float
    y: float
    edge: str
    wire_ohm: float | None = None  # signal wire resistance, pad to heater via (Ohm); None for ground pads
