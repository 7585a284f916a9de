"""The picture `lumion synthesize --plot` writes: the target next to what the chip model does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lab_scripts.plots import _pyplot, _save


def synthesis_plot(path: str | Path, result: Any, wavelength_index: int = 0) -> Path:
    """Target vs achieved at the first wavelength asked: for a unitary the power matrices
    ``|U|^2`` and ``|V|^2`` (V normalised to unit mean row power) and ``arg(U*V)``; for port
    powers, bars of the target and achieved shares per output.
    """
    plt = _pyplot()
    if result.kind in ("filter", "mz_filter"):
        return _filter_plot(plt, path, result)
    row = result.achieved[wavelength_index]
    wl = row["wavelength_nm"]
    if result.kind == "unitary":
        v = _achieved_matrix(result, wavelength_index)
        fig, axes = plt.subplots(1, 3, figsize=(12, 4))
        for ax, mat, title in ((axes[0], np.abs(result.target) ** 2, "target |U|²"),
                               (axes[1], np.abs(v) ** 2, "achieved |V|² (normalised)")):
            im = ax.imshow(mat, vmin=0, vmax=1, cmap="viridis")
            ax.set_title(title)
            ax.set_xlabel("input mode")
            ax.set_ylabel("output mode")
        fig.colorbar(im, ax=axes[:2])
        ph = axes[2].imshow(np.angle(np.conj(result.target) * v), vmin=-np.pi, vmax=np.pi, cmap="twilight")
        axes[2].set_title("arg(U* V) (rad): flat when right")
        fig.colorbar(ph, ax=axes[2])
        fig.suptitle(f"unitary at {wl:.2f} nm: fidelity {row['fidelity']:.6f}, loss {row['loss_db']:.2f} dB")
    else:
        target = np.asarray(result.target)
        shares = np.asarray(row["shares"])
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [f"{result.mesh.port_names[i]}→{result.mesh.port_names[o]}"
                  for i in result.inputs for o in result.outputs]
        x = np.arange(len(labels))
        ax.bar(x - 0.2, target.T.ravel(), 0.4, label="target")
        ax.bar(x + 0.2, shares.T.ravel(), 0.4, label="achieved")
        ax.set_xticks(x, labels, rotation=30, ha="right")
        ax.set_ylabel("share of the power reaching the outputs")
        ax.legend()
        ax.set_title(f"{result.kind} at {wl:.2f} nm: largest share error {row['max_share_error']:.2e}")
    return _save(fig, path)


def _achieved_matrix(result: Any, wavelength_index: int) -> np.ndarray:
    """The achieved matrix V at one wavelength, scaled to the target's power and global phase."""
    from photonics.circuit import solve

    wl = np.array([result.achieved[wavelength_index]["wavelength_nm"]])
    v = solve(result.mesh, result.state, wl, result.params, inputs=list(result.inputs))[0, 0]
    v = v[list(result.outputs)]
    tr = np.sum(np.conj(result.target) * v)
    scale = np.sqrt((np.abs(v) ** 2).sum() / len(v))
    return v / scale * np.exp(-1j * np.angle(tr)) if scale > 0 else v


def _filter_plot(plt: Any, path: str | Path, result: Any) -> Path:
    """The transmission to each output over two free spectral ranges, the asked band shaded:
    the ring's bus, or the Mach-Zehnder's pass output and its complement.
    """
    from photonics.circuit import solve

    f = result.extra["filter"]
    c, bw, fsr = f["centre_nm"], f["bandwidth_nm"], f["fsr_nm"]
    wl = np.linspace(c - fsr, c + fsr, 1601)
    y = solve(result.mesh, result.state, wl, result.params, inputs=list(result.inputs))[0, :, :, 0]
    ring = result.kind == "filter"
    labels = ["achieved (chip model)"] if ring else ["pass output (chip model)", "complement output"]
    row = result.achieved[0]
    fig, ax = plt.subplots(figsize=(8, 4))
    for port, label in zip(result.outputs, labels, strict=False):
        ax.plot(wl, 10 * np.log10(np.maximum(np.abs(y[:, port]) ** 2, 1e-30)), label=label)
    ax.axvspan(c - bw / 2, c + bw / 2, color="tab:orange", alpha=0.25, label="asked band")
    ax.set_xlabel("wavelength (nm)")
    ax.set_ylabel("bus transmission (dB)" if ring else "transmission (dB)")
    ax.legend()
    ax.set_title(f"{'ring' if ring else 'Mach-Zehnder'} filter: centre {row['centre_nm']:.5f} nm, width "
                 f"{row['fwhm_nm'] * 1e3:.1f} pm, extinction {row['extinction_db']:.1f} dB")
    return _save(fig, path)
