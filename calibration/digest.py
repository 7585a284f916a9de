"""A calibration map's content digest: what the same seed must reproduce byte for byte.

The saved map also records when it was made (``created``) and how long the run took in
wall-clock seconds (``quality.duration_s``); those two differ every run by nature, so the
digest leaves them out and covers everything else (every fitted number, failure and warning).
"""

from __future__ import annotations

import hashlib
import json

from calibration.map import CalibrationMap

# Wall-clock facts a map records: they differ run to run by nature, never with the chip.
RUN_FIELDS = ("created",)
RUN_QUALITY_FIELDS = ("duration_s",)
DIGEST_HEX_DIGITS = 16  # 64 bits: a chance collision between two different maps is negligible


def map_digest(cmap: CalibrationMap) -> str:
    """SHA-256 (first :data:`DIGEST_HEX_DIGITS` hex digits) of the map as saved, without its
    timestamp and run time.
    """
    data = cmap.to_dict()
    for key in RUN_FIELDS:
        data.pop(key, None)
    data["quality"] = {k: v for k, v in data.get("quality", {}).items() if k not in RUN_QUALITY_FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:DIGEST_HEX_DIGITS]
