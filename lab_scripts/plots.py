"""Plots written by the ``lumion`` commands (matplotlib, Agg backend, imported lazily).

Each plot has a ``*_figure`` function that builds and returns the figure (tests inspect
its artists) and a writer that saves it atomically and closes it. Legends sit outside
the axes, so they never hide data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from photonics.atomic import save_figure

# A spectrum names (in colour, in the legend) at most this many of its strongest ports;
# weaker ports above the floor are drawn thin and grey under one legend entry.
LABELLED_PORTS = 8
WEAK_COLOUR = "0.72"

# How a mesh drawing colours an accelerator (see AcceleratorMark.status).
STATUS_COLOURS = {"job": "#1f3d99", "spare": "#1b8a3a", "out": "#c0392b"}
STATUS_NAMES = {"job": "accelerator in the job", "spare": "spare accelerator",
                "out": "failed / not in the job"}
# Route colours: tab10 without its red (3) and grey (7). Red means failed in every mesh
# drawing (failed TBUs, failed accelerators) and grey is the unused mesh, so a route never
# wears either (issue 29: the failed red was also a route's colour).
ROUTE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
FAILED_COLOUR = STATUS_COLOURS["out"]
# Route stripes (points, and TBU lengths for the spacing): a TBU carrying two routes
# shows two thinner stripes side by side, each fully opaque, so no colour mixes with
# another (issue 29: shared TBUs came out in mixed colours).
ROUTE_WIDTH = 4.5
SHARED_ROUTE_WIDTH = 2.6
LANE_SPACING = 0.07
# A route label ending in this mark was re-routed by the last recovery the picture shows.
REROUTED_MARK = " *"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` atomically to ``path`` and close it."""
    out = Path(path)
    save_figure(fig, out)
    _pyplot().close(fig)
    return out


# -- spectra ----------------------------------------------------------------------------
def spectrum_limits(values_db: list[np.ndarray], floor_db: float) -> tuple[float, float]:
    """Y limits (dB) that hold every value (clipped at ``floor_db``) with room above and below.

    The top is the next multiple of 5 dB at least 1 dB above the strongest value; the
    bottom the multiple of 10 dB at least 5 dB below the weakest, never below the floor.

    Example:
        >>> spectrum_limits([np.array([-0.5, -0.5])], -60.0)
        (-10.0, 5.0)
    """
    top = max(float(np.max(v)) for v in values_db)
    low = max(min(float(np.min(v)) for v in values_db), floor_db)
    upper = 5.0 * math.ceil((top + 1.0) / 5.0)
    lower = max(floor_db, 10.0 * math.floor((low - 5.0) / 10.0))
    return lower, upper


def spectrum_figure(wavelengths_nm: np.ndarray, power_db: Mapping[str, np.ndarray], title: str,
                    floor_db: float = -60.0, labelled: int = LABELLED_PORTS) -> Any:
    """Output power (dB relative to the input) per port against wavelength (nm).

    Ports whose maximum is below ``floor_db`` are omitted; values below it are drawn at
    it. The ``labelled`` strongest ports get a colour and a legend entry; the others are
    thin grey lines under one entry. The legend sits to the right of the axes.
    """
    plt = _pyplot()
    wl = np.asarray(wavelengths_nm, float)
    ranked = sorted(((name, np.maximum(np.asarray(p, float), floor_db)) for name, p in power_db.items()
                     if np.max(p) >= floor_db), key=lambda kv: -float(np.max(kv[1])))
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120, layout="constrained")
    style = "-" if len(wl) > 1 else "o"
    colours = plt.get_cmap("tab10")
    for k, (name, p) in enumerate(ranked):
        strong = k < labelled
        weak_label = f"{len(ranked) - labelled} weaker ports" if k == labelled else None
        ax.plot(wl, p, style, lw=1.4 if strong else 0.7, ms=5 if strong else 3,
                color=colours(k % 10) if strong else WEAK_COLOUR, zorder=3 if strong else 2,
                label=name if strong else weak_label)
    ax.set_xlabel("wavelength (nm)")
    ax.ticklabel_format(axis="x", useOffset=False)
    ax.set_ylabel("output power (dB, relative to input)")
    if ranked:
        ax.set_ylim(*spectrum_limits([p for _, p in ranked], floor_db))
    else:
        ax.set_ylim(floor_db, 5.0)
        ax.text(0.5, 0.5, f"no port above {floor_db:g} dB", transform=ax.transAxes, ha="center")
    if len(wl) == 1:
        ax.set_xlim(wl[0] - 0.5, wl[0] + 0.5)
    else:
        ax.set_xlim(float(wl.min()), float(wl.max()))  # ascending even for a frequency grid
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ranked:
        note = f"ports below {floor_db:g} dB omitted;\nvalues below it drawn at it"
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  title=note, title_fontsize=6)
    return fig


def spectrum(path: str | Path, wavelengths_nm: np.ndarray, power_db: Mapping[str, np.ndarray],
             title: str, floor_db: float = -60.0) -> Path:
    """Write :func:`spectrum_figure` to ``path`` (format from the suffix)."""
    return _save(spectrum_figure(wavelengths_nm, power_db, title, floor_db), path)


# -- mesh drawings ----------------------------------------------------------------------
@dataclass(frozen=True)
class AcceleratorMark:
    """An accelerator drawn at its mesh ports: ``name``, its ``tx``/``rx`` ports and ``status``.

    ``status`` is a key of :data:`STATUS_COLOURS`: ``job`` (in the running job),
    ``spare`` or ``out`` (failed, or otherwise not in the job).
    """

    name: str
    tx: tuple[int, ...]
    rx: tuple[int, ...]
    status: str = "job"

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port the accelerator has a lane on."""
        return self.tx + self.rx

    @property
    def text(self) -> str:
        """``gpu3`` over ``tx 12 rx 13``."""
        lanes = " ".join(f"{what} {','.join(map(str, ports))}" for what, ports in (("tx", self.tx),
                                                                                  ("rx", self.rx)) if ports)
        return f"{self.name}\n{lanes}"


def fabric_marks(fabric: Any, in_job: Iterable[str]) -> list[AcceleratorMark]:
    """One :class:`AcceleratorMark` per accelerator of ``fabric``.

    Accelerators named in ``in_job`` are ``job``, other spares ``spare``, the rest ``out``.
    """
    members = set(in_job)
    return [AcceleratorMark(acc.name, tuple(map(int, acc.tx)), tuple(map(int, acc.rx)),
                            "job" if acc.name in members else "spare" if acc.spare else "out")
            for acc in fabric.accelerators]


def mesh_figure(mesh: Any, routes: list[dict[str, Any]] | None = None,
                failed: Mapping[int, str] | None = None, title: str = "",
                accelerators: list[AcceleratorMark] | None = None) -> Any:
    """The mesh: TBUs as grey segments, ports numbered, routes in colours, failed TBUs marked.

    ``routes`` is a list of ``{"label": str, "tbus": [tbu index, ...]}``; each of
    ``accelerators`` is named outside its ports (with its tx and rx port numbers) in the
    colour of its status. Coordinates are in TBU lengths (axes hidden); the legend sits
    to the right of the mesh.
    """
    plt = _pyplot()
    marks = accelerators or []
    fig, ax = plt.subplots(figsize=(11, 6.5 if marks else 6), dpi=120, layout="constrained")
    for a, b in mesh.tbu_xy:
        ax.plot([a[0], b[0]], [a[1], b[1]], color="0.8", lw=3, solid_capstyle="round", zorder=1)
    _draw_routes(ax, mesh, routes or [])
    for t, how in (failed or {}).items():
        c = mesh.tbu_centers()[t]
        ax.plot(*c, marker="x", color=FAILED_COLOUR, ms=12, mew=3, zorder=3, ls="none")
        ax.annotate(how, c, color=FAILED_COLOUR, fontsize=7, xytext=(4, 4), textcoords="offset points")
    if failed:
        ax.plot([], [], "x", color=FAILED_COLOUR, ms=8, mew=2, label="failed TBU (how it failed)")
    _port_annotations(ax, mesh, marks)
    for status in sorted({m.status for m in marks}, key=list(STATUS_COLOURS).index):
        ax.plot([], [], "s", color=STATUS_COLOURS[status], label=STATUS_NAMES[status])
    ax.set_aspect("equal")
    ax.axis("off")
    if ax.get_legend_handles_labels()[0]:
        rerouted = any(r["label"].endswith(REROUTED_MARK) for r in routes or [])
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title_fontsize=7,
                  title="routes (* = re-routed by the last recovery)" if rerouted else None)
    ax.set_title(title, pad=14)
    return fig


def route_lanes(routes: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[int, int]]:
    """For each (route index, TBU) drawn: (its lane, the number of routes on that TBU).

    A TBU carries two light paths, so two routes may share one; each gets its own lane
    (a parallel stripe) instead of being painted over the other.
    """
    users: dict[int, list[int]] = {}
    for k, route in enumerate(routes):
        for t in dict.fromkeys(route["tbus"]):
            users.setdefault(t, []).append(k)
    return {(k, t): (lane, len(ks)) for t, ks in users.items() for lane, k in enumerate(ks)}


def _draw_routes(ax: Any, mesh: Any, routes: list[dict[str, Any]]) -> None:
    """Each route in its colour; routes sharing a TBU side by side (see :func:`route_lanes`)."""
    lanes = route_lanes(routes)
    for k, route in enumerate(routes):
        colour = ROUTE_COLOURS[k % len(ROUTE_COLOURS)]
        for t in dict.fromkeys(route["tbus"]):
            a, b = np.asarray(mesh.tbu_xy[t], dtype=float)
            lane, shared = lanes[(k, t)]
            along = (b - a) / (np.linalg.norm(b - a) + 1e-12)
            shift = np.array([-along[1], along[0]]) * LANE_SPACING * (lane - (shared - 1) / 2)
            ax.plot([a[0] + shift[0], b[0] + shift[0]], [a[1] + shift[1], b[1] + shift[1]],
                    color=colour, lw=ROUTE_WIDTH if shared == 1 else SHARED_ROUTE_WIDTH,
                    solid_capstyle="butt", zorder=2,
                    label=route["label"] if t == route["tbus"][0] else None)


def _port_annotations(ax: Any, mesh: Any, marks: list[AcceleratorMark]) -> None:
    """Port numbers just outside each port; accelerators further out, in their status colour."""
    xy = mesh.port_xy()
    centre = mesh.tbu_xy.reshape(-1, 2).mean(0)

    def outward(p: np.ndarray) -> np.ndarray:
        d = p - centre
        return d / (np.linalg.norm(d) + 1e-9)

    for n, p in enumerate(xy):
        ax.annotate(str(n), p, xytext=(p + 0.35 * outward(p)), fontsize=6, ha="center", va="center",
                    color="0.3")
    for mark in marks:
        p = xy[list(mark.ports)].mean(0)
        d = outward(p)
        horizontal = abs(d[0]) > 0.5
        ha = ("left" if d[0] > 0 else "right") if horizontal else "center"
        va = "center" if horizontal else ("bottom" if d[1] > 0 else "top")
        ax.annotate(mark.text, p, xytext=(p + 0.9 * d), fontsize=6, ha=ha, va=va, linespacing=1.1,
                    color=STATUS_COLOURS[mark.status], fontweight="bold")
    # room for the outer labels inside the axes
    reach_x, reach_y = (2.2, 1.5) if marks else (0.6, 0.6)
    ax.set_xlim(xy[:, 0].min() - reach_x, xy[:, 0].max() + reach_x)
    ax.set_ylim(xy[:, 1].min() - reach_y, xy[:, 1].max() + reach_y)


def mesh_drawing(path: str | Path, mesh: Any, routes: list[dict[str, Any]] | None = None,
                 failed: Mapping[int, str] | None = None, title: str = "",
                 accelerators: list[AcceleratorMark] | None = None) -> Path:
    """Write :func:`mesh_figure` to ``path`` (format from the suffix)."""
    return _save(mesh_figure(mesh, routes, failed, title, accelerators), path)
