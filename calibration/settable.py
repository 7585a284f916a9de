"""Which TBUs a calibration map can set, and to what: the refusal ``lumion program`` and the
control plane give before anything is sent to a TBU the map records as failed.
"""

from __future__ import annotations

import math
from typing import Any

# What an unverified TBU with no measured disagreement (NaN) is, in a map that does not say why
# (made before session 39, calibration.map.UNVERIFIED_REASONS): the confirmation stage found no
# light path to it avoiding the failed and doubtful TBUs (a TBU walled in by failed neighbours,
# docs/calibration.md), or saw no fringe through the path it tried. Neither is claimed: "no
# fringe through any path" said the TBU was dark when, walled in, it had not been looked at.
NOT_CONFIRMED = ("not confirmed by light: no light path avoiding the failed and doubtful TBUs reaches it, "
                 "or none showed a fringe (unverified for want of a confirmation, not found dark)")
# The same, where the map records why (calibration.map.UNVERIFIED_REASONS): what light showed.
UNCONFIRMED_BECAUSE = {
    "no-light-path": ("not confirmed by light: no light path avoiding the failed and doubtful TBUs reaches "
                      "it (not looked at, not found dark)"),
    "no-fringe": ("not confirmed by light: the light paths tried through it showed no fringe (it, or a "
                  "TBU on those paths, may be dark)"),
}


def unconfirmed_text(reason: str | None, disagreement_rad: float) -> str:
    """What light showed of an unverified TBU, from the map's ``unverified_reason`` (None: not
    recorded) and ``disagreement_rad`` (rad; NaN when none was measured).

    Example:
        >>> unconfirmed_text("disagrees", 0.41)
        'light disagreed with its fit by 0.410 rad'
    """
    if math.isfinite(disagreement_rad):
        return f"light disagreed with its fit by {disagreement_rad:.3f} rad"
    return UNCONFIRMED_BECAUSE.get(reason or "", NOT_CONFIRMED)


def recorded_as(heater_map: Any, t: int, command: str = "lumion program") -> str | None:
    """How the map records TBU ``t``, one phrase (None: not failed): "dead (no light passes it)",
    "stuck in bar ...", "unverified (what light showed; ``command`` --trust-unverified ...)",
    "broken (its faulty heater)".
    """
    how = heater_map.failed.get(t)
    if how is None:
        return None
    if how in ("bar", "cross"):
        return f"stuck in {how} (its heaters do not move it)"
    if how == "dead":
        return "dead (no light passes it)"
    if how == "unverified":
        seen = unconfirmed_text(getattr(heater_map, "unverified_reason", {}).get(t),
                                heater_map.disagreement.get(t, float("nan")))
        return f"unverified ({seen}; {command} --trust-unverified routes through it all the same)"
    faulty = [label for h, label in heater_map.faulty_heaters().items() if h // 2 == t]
    return f"broken ({faulty[0] if faulty else how}): the map never drives it"


def why_not_settable(heater_map: Any, t: int, state: str, trust_unverified: bool) -> str | None:
    """Why the map cannot set TBU ``t`` to ``state`` ("bar", "cross" or "split"), or None."""
    how = heater_map.failed.get(t)
    if how is None or (how == "unverified" and trust_unverified):
        return None
    if how in ("bar", "cross") and state == how:
        return None
    return recorded_as(heater_map, t)
