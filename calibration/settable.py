"""Which TBUs a calibration map can set, and to what: the refusal ``lumion program`` and the
control plane give before anything is sent to a TBU the map records as failed.
"""

from __future__ import annotations

import math
from typing import Any

# What an unverified TBU with no measured disagreement (NaN) is: the confirmation stage found no
# light path to it avoiding the failed and doubtful TBUs (a TBU walled in by failed neighbours,
# docs/calibration.md), or saw no fringe through the path it tried. The map does not record which
# (calibration.procedure keeps NaN for both), so neither is claimed: "no fringe through any path"
# said the TBU was dark when, walled in, it had not been looked at.
NOT_CONFIRMED = ("not confirmed by light: no light path avoiding the failed and doubtful TBUs reaches it, "
                 "or none showed a fringe (unverified for want of a confirmation, not found dark)")


def why_not_settable(heater_map: Any, t: int, state: str, trust_unverified: bool) -> str | None:
    """Why the map cannot set TBU ``t`` to ``state`` ("bar", "cross" or "split"), or None."""
    how = heater_map.failed.get(t)
    if how is None or (how == "unverified" and trust_unverified):
        return None
    if how in ("bar", "cross"):
        return None if state == how else f"stuck in {how} (its heaters do not move it)"
    if how == "dead":
        return "dead (no light passes it)"
    if how == "unverified":
        rad = heater_map.disagreement.get(t, float("nan"))
        seen = (f"light disagreed with its fit by {rad:.3f} rad" if math.isfinite(rad)
                else NOT_CONFIRMED)
        return f"unverified ({seen}; lumion program --trust-unverified routes through it all the same)"
    faulty = [label for h, label in heater_map.faulty_heaters().items() if h // 2 == t]
    return f"broken ({faulty[0] if faulty else how}): the map never drives it"
