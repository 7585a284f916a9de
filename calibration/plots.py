"""PNG plots of a calibration: one TBU's fringe fits and a chip overview (matplotlib, lazily).

matplotlib is imported inside the functions (Agg backend), so ``import calibration`` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from calibration.fit import Sweep, TBUFit, fringe_model
from calibration.map import CalibrationMap
from calibration.paths import Probe
from photonics.atomic import save_figure
from photonics.topology import Mesh


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fringe_fit(path: str | Path, mesh: Mesh, probe: Probe, sweeps: list[Sweep], fit: TBUFit) -> Path:
    """Measured powers and fitted fringes of one TBU (both heaters), with residuals."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(sweeps), figsize=(5.5 * len(sweeps), 6), dpi=110, sharex="col",
                             gridspec_kw={"height_ratios": [3, 1]}, squeeze=False)
    for col, (s, res) in enumerate(zip(sweeps, fit.residuals, strict=True)):
        fine = np.linspace(0, s.current_ma.max(), 400)
        model = fringe_model(fine, s.arm, fit.delta, fit.rho2[s.arm], fit.rho3[s.arm],
                             fit.amplitude_mw, fit.floor_mw, fit.signs)
        ax, rax = axes[0, col], axes[1, col]
        for j, port in enumerate(probe.outputs):
            kind = "cross" if fit.signs[j] > 0 else "bar"
            ax.plot(s.current_ma, s.power_mw[:, j], "o", ms=4, label=f"{mesh.port_names[port]} ({kind})")
            ax.plot(fine, model[:, j], "-", lw=1, color=ax.lines[-1].get_color())
            rax.plot(s.current_ma, res[:, j], "o", ms=3)
        arm = ("top", "bottom")[s.arm]
        ax.set_title(f"{mesh.tbu_names[probe.tbu]} {arm} heater (ch {2 * probe.tbu + s.arm}): "
                     f"rho2={fit.rho2[s.arm]:.4f} rad/mA², rho3={fit.rho3[s.arm]:.4f} rad/mA³", fontsize=8)
        ax.set_ylabel("power (mW)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        rax.axhline(0, color="k", lw=0.5)
        rax.set_xlabel("heater current (mA)")
        rax.set_ylabel("residual (σ)")
    fig.suptitle(f"delta = alpha_top - alpha_bot = {fit.delta:.4f} ± {fit.sigma_delta:.4f} rad; "
                 f"light {mesh.port_names[probe.src]} -> {len(probe.hops)} other TBUs", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)


def map_overview(path: str | Path, mesh: Mesh, cmap: CalibrationMap,
                 per_heater_error_rad: np.ndarray | None = None) -> Path:
    """The mesh drawn with each TBU coloured by its fitted delta, plus heater-curve histograms."""
    plt = _pyplot()
    n_panels = 3 if per_heater_error_rad is not None else 2
    fig, axes = plt.subplots(1, n_panels, figsize=(5 * n_panels + 3, 4.5), dpi=110,
                             gridspec_kw={"width_ratios": [2.2] + [1] * (n_panels - 1)})
    ax = axes[0]
    cm = plt.get_cmap("twilight")
    for t, ((ax_, ay), (bx, by)) in enumerate(mesh.tbu_xy):
        ax.plot([ax_, bx], [ay, by], "-", lw=4, color=cm(cmap.delta[t] / (2 * np.pi)))
    sc = ax.scatter([], [], c=[], cmap=cm, vmin=0, vmax=2 * np.pi)
    fig.colorbar(sc, ax=ax, label="delta = alpha_top - alpha_bot (rad)")
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(f"{cmap.chip_id}: passive differential phase per TBU", fontsize=9)
    axes[1].hist(cmap.rho2, bins=30)
    axes[1].set_xlabel("rho2 (rad/mA²)")
    axes[1].set_ylabel("heaters")
    axes[1].set_title(f"self-phase curves; crosstalk f = {cmap.nearest_fraction:.3%}", fontsize=9)
    if per_heater_error_rad is not None:
        axes[2].hist(per_heater_error_rad * 1e3, bins=30)
        axes[2].set_xlabel("RMS phase error vs truth (mrad)")
        axes[2].set_title("per heater, working range 0..2π", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
