"""PNG plots written by the ``lumion`` commands (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from photonics.atomic import save_figure


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def spectrum(path: str | Path, wavelengths_nm: np.ndarray, power_db: dict[str, np.ndarray],
             title: str, floor_db: float = -60.0) -> Path:
    """Output power (dB) per port against wavelength; ports below ``floor_db`` are omitted."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    shown = 0
    for name, p in sorted(power_db.items(), key=lambda kv: -float(np.max(kv[1]))):
        if np.max(p) < floor_db:
            continue
        if len(wavelengths_nm) > 1:
            ax.plot(wavelengths_nm, p, label=name, lw=1.2)
        else:
            ax.plot(wavelengths_nm, p, "o", label=name)
        shown += 1
    ax.set_xlabel("wavelength (nm)")
    ax.ticklabel_format(axis="x", useOffset=False)
    ax.set_ylabel("output power (dB, relative to input)")
    ax.set_ylim(bottom=floor_db)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if shown:
        ax.legend(fontsize=7, ncol=2 if shown > 8 else 1, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    save_figure(fig, out)
    plt.close(fig)
    return out


def mesh_drawing(path: str | Path, mesh: Any, routes: list[dict[str, Any]] | None = None,
                 failed: dict[int, str] | None = None, title: str = "") -> Path:
    """The mesh: TBUs as grey segments, ports numbered, routes in colours, failed TBUs marked.

    ``routes`` is a list of ``{"label": str, "tbus": [tbu index, ...]}``.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 6), dpi=120)
    for a, b in mesh.tbu_xy:
        ax.plot([a[0], b[0]], [a[1], b[1]], color="0.8", lw=3, solid_capstyle="round", zorder=1)
    colours = plt.get_cmap("tab10")
    for k, route in enumerate(routes or []):
        for t in route["tbus"]:
            a, b = mesh.tbu_xy[t]
            ax.plot([a[0], b[0]], [a[1], b[1]], color=colours(k % 10), lw=5 - 0.3 * (k % 4),
                    alpha=0.85, zorder=2, label=route["label"] if t == route["tbus"][0] else None)
    for t, how in (failed or {}).items():
        c = mesh.tbu_centers()[t]
        ax.plot(*c, marker="x", color="red", ms=12, mew=3, zorder=3)
        ax.annotate(how, c, color="red", fontsize=7, xytext=(4, 4), textcoords="offset points")
    xy = mesh.port_xy()
    centre = mesh.tbu_xy.reshape(-1, 2).mean(0)
    for n, p in enumerate(xy):
        d = p - centre
        d = d / (np.linalg.norm(d) + 1e-9)
        ax.annotate(str(n), p, xytext=(p + 0.35 * d), fontsize=6, ha="center", va="center",
                    color="0.3")
    ax.set_aspect("equal")
    ax.axis("off")
    if routes:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    save_figure(fig, out)
    plt.close(fig)
    return out
