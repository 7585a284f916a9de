"""Confidence intervals over seeds: a campaign reports a mean with its half-width, never one seed.

Each seed (trace and failure history) is one independent draw, so the mean over ``n`` seeds
has a Student-t interval; a paired comparison (fabric and baseline on the same seed) is the
interval of the per-seed differences or ratios, which removes the spread between traces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95  # two-sided; the level every campaign table quotes


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> dict[str, float | int | None]:
    """``{"mean", "half_width", "n"}`` of ``values`` (Student t); half_width None below 2 values.

    Example:
        >>> d = mean_ci([1.0, 2.0, 3.0])
        >>> d["mean"], round(d["half_width"], 3), d["n"]
        (2.0, 2.484, 3)
    """
    from scipy import stats

    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if x.size == 0:
        return {"mean": None, "half_width": None, "n": 0}
    if x.size < 2:
        return {"mean": float(x[0]), "half_width": None, "n": 1}
    t = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1))
    half = t * float(x.std(ddof=1)) / math.sqrt(x.size)
    return {"mean": float(x.mean()), "half_width": half, "n": int(x.size)}


def paired(fabric: Sequence[float], baseline: Sequence[float]) -> dict[str, object]:
    """Per-seed comparison of two policies on the same seeds.

    ``difference``: interval of ``fabric - baseline``; ``ratio``: interval of ``fabric /
    baseline`` over the seeds where the baseline is not 0; ``ratio_of_means``; ``fabric_lower``:
    on how many seeds the fabric's value is below the baseline's.
    """
    f, b = np.asarray(fabric, dtype=float), np.asarray(baseline, dtype=float)
    if f.shape != b.shape:
        raise ValueError("paired values need the same seeds on both sides")
    nz = b != 0
    return {"difference": mean_ci(list(f - b)), "ratio": mean_ci(list(f[nz] / b[nz])),
            "ratio_of_means": float(f.mean() / b.mean()) if b.size and b.mean() else None,
            "fabric_lower": int(np.sum(f < b)), "n": int(f.size)}
