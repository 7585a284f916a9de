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


def mtbf_figure(points: Sequence[dict[str, Any]], metrics: Sequence[str]) -> Any:
    """One panel per metric: fabric / baseline per trace against MTBF, mean and 95 % interval."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.8))
    styles = {"requeue": ("#1f3d99", "o"), "wait": ("#c0392b", "s")}
    for ax, key in zip(np.atleast_1d(axes), metrics, strict=True):
        for recovery in dict.fromkeys(p["recovery"] for p in points):
            mine = [p for p in points if p["recovery"] == recovery and p["mtbf_h"] is not None]
            ci = [p["paired"][key]["ratio"] for p in mine]
            colour, marker = styles.get(recovery, ("0.3", "^"))
            ax.errorbar([p["mtbf_h"] for p in mine], [c["mean"] for c in ci],
                        yerr=[c["half_width"] or 0.0 for c in ci], color=colour, marker=marker, ms=4,
                        capsize=3, lw=1.2, label=f"baseline {recovery}s")
        ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("MTBF per accelerator (h)")
        ax.set_title(f"{key.replace('_', ' ')}: fabric / baseline", fontsize=9)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle("Paired per-trace ratio, mean and 95 % interval", fontsize=10)
    fig.tight_layout()
    return fig


def capacity_figure(groups: Sequence[dict[str, Any]]) -> Any:
    """Fragmentation of the fabric and of each baseline per (mesh, workload), with 95 % intervals."""
    plt = _pyplot()
    labels = list(dict.fromkeys(f"{g['mesh']}\n{g['workload']}" for g in groups))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(labels) + 2), 4))
    series: dict[str, dict[str, dict[str, Any]]] = {"fabric": {}}
    for g in groups:
        label = f"{g['mesh']}\n{g['workload']}"
        series["fabric"][label] = g["fabric"]["fragmentation"]
        series.setdefault(f"baseline {g['baseline']}", {})[label] = g["baseline_metrics"]["fragmentation"]
    width = 0.8 / len(series)
    for k, (name, by_label) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i, lab in enumerate(labels) if lab in by_label]
        cis = [by_label[lab] for lab in labels if lab in by_label]
        ax.bar(xs, [c["mean"] for c in cis], width, yerr=[c["half_width"] or 0.0 for c in cis], capsize=3,
               label=name)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("fragmentation (stranded free workers)")
    ax.set_title("Fragmentation per mesh and workload, mean and 95 % interval over traces", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` atomically and close it."""
    save_figure(fig, Path(path))
    _pyplot().close(fig)
    return Path(path)
