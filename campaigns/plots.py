"""Campaign plots (matplotlib, imported lazily): yield against required margin, policies side by side."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from photonics.atomic import save_figure

# Required margins the yield curve is drawn over (dB): 0 to the default fabric's best ~9 dB.
MARGIN_AXIS_DB = np.linspace(0.0, 12.0, 121)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def chip_margin_db(row: dict[str, Any]) -> float:
    """The margin a chip keeps over the job and its spare substitutes (dB; -inf: unroutable)."""
    spare = row.get("spare_margin_db")
    return min(row["job_margin_db"], spare) if spare is not None else row["job_margin_db"]


def chip_acr_db(row: dict[str, Any]) -> float:
    """The worst ACR (dB) over the job and its spare substitutes."""
    spare = row.get("spare_acr_db")
    return min(row["job_acr_db"], spare) if spare is not None else row["job_acr_db"]


def yield_figure(rows: Sequence[dict[str, Any]], required_margin_db: float, min_acr_db: float) -> Any:
    """Yield vs required margin (ACR >= ``min_acr_db`` too), one curve per grid point."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 6))
    groups: dict[tuple[str, float, float], list[float]] = {}
    for r in rows:
        # a chip failing the crosstalk criterion yields at no margin
        margin = chip_margin_db(r) if chip_acr_db(r) >= min_acr_db else -math.inf
        groups.setdefault((r["mesh"], r["loss_spread_db"], r["kappa_spread"]), []).append(margin)
    for (mesh, ls, ks), margins in groups.items():
        m = np.array([x if math.isfinite(x) else -np.inf for x in margins])
        ax.plot(MARGIN_AXIS_DB, [(m >= t).mean() for t in MARGIN_AXIS_DB],
                label=f"{mesh}, loss sd {ls:g} dB, kappa sd {ks:g} ({len(m)} chips)")
    ax.axvline(required_margin_db, color="0.4", ls="--", lw=1, label=f"required {required_margin_db:g} dB")
    ax.set_xlabel(f"required link margin (dB), with ACR >= {min_acr_db:g} dB")
    ax.set_ylabel("yield (fraction of chips)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Chips carrying the ring and every single-failure spare splice", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8)
    fig.tight_layout()
    return fig


def availability_figure(rows: Sequence[dict[str, Any]], metrics: Sequence[str]) -> Any:
    """One panel per metric: each trace's value under both policies, joined (paired)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 4))
    for ax, key in zip(np.atleast_1d(axes), metrics, strict=True):
        traces = sorted({r["trace"] for r in rows})
        for t in traces:
            pair = {r["policy"]: r[key] for r in rows if r["trace"] == t}
            ax.plot([0, 1], [pair.get("baseline"), pair.get("fabric")], color="0.7", lw=0.8, marker="o",
                    ms=3)
        for x, pol in enumerate(("baseline", "fabric")):
            vals = [r[key] for r in rows if r["policy"] == pol]
            ax.plot([x - 0.2, x + 0.2], [np.mean(vals)] * 2, color="#1f3d99", lw=2.5)
        ax.set_xticks([0, 1], ["fixed\nbaseline", "photonic\nfabric"])
        ax.set_xlim(-0.5, 1.5)
        ax.set_title(key.replace("_", " "), fontsize=9)
    fig.suptitle("Per-trace metrics (grey: one trace, paired; blue: mean)", fontsize=10)
    fig.tight_layout()
    return fig


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` atomically and close it."""
    save_figure(fig, Path(path))
    _pyplot().close(fig)
    return Path(path)
