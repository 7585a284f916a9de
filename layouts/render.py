"""PNG pictures of a layout (matplotlib, headless)."""

from __future__ import annotations

import os
from typing import Any

from photonics.atomic import save_figure


def save_png(component: Any, path: str | os.PathLike[str], dpi: int = 200) -> None:
    """Render ``component`` with gdsfactory's plot (klayout pixel buffer) into a PNG file."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the bench PC or in CI
    import matplotlib.pyplot as plt

    fig = component.plot(return_fig=True, show_labels=False, show_ruler=False)
    if fig is None:  # pragma: no cover - plot() without a figure
        fig = plt.gcf()
    fig.set_size_inches(12, 12 * max(0.3, component.dysize / max(component.dxsize, 1.0)))
    save_figure(fig, path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
