"""What a synthesised state does, at every wavelength asked: the numbers a user checks.

For a unitary: the fidelity (:func:`photonics.synthesis.objectives.fidelity`), the loss
``-10 log10(Tr(V^H V) / N)`` (dB) and the worst crosstalk (the most power any input puts
into a mesh port that is not one of the outputs, dB relative to the input). For port powers:
each output's share of the power reaching the outputs, the largest share error, the
insertion loss of every input (dB) and the worst crosstalk likewise.
"""

from __future__ import annotations

import numpy as np

from photonics.circuit import solve
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.synthesis.objectives import fidelity
from photonics.topology import Mesh

FLOOR_DB = -200.0  # what a zero power reads as, in dB


def _db(p: np.ndarray | float) -> np.ndarray:
    return np.maximum(10 * np.log10(np.maximum(np.asarray(p, float), 1e-300)), FLOOR_DB)


def _crosstalk_db(y_all: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """Per wavelength: the most power (dB re input) any input sends to a non-output port."""
    others = np.setdiff1d(np.arange(y_all.shape[-2]), outputs)
    if not len(others):
        return np.full(y_all.shape[0], FLOOR_DB)
    return _db((np.abs(y_all[:, others]) ** 2).max(axis=(-2, -1)))


def unitary_report(mesh: Mesh, params: TBUParams, state: MeshState, u: np.ndarray,
                   wavelengths_nm: np.ndarray, inputs: np.ndarray, outputs: np.ndarray) -> list[dict]:
    """One row per wavelength: fidelity, loss (dB), worst crosstalk (dB)."""
    y_all = solve(mesh, state, wavelengths_nm, params, inputs=inputs)[0]  # (W, ports, n)
    v = y_all[:, outputs]
    fid = fidelity(u, v[None])[0]
    loss = -_db((np.abs(v) ** 2).sum(axis=(-2, -1)) / len(u))
    xt = _crosstalk_db(y_all, outputs)
    return [{"wavelength_nm": float(w), "fidelity": float(f), "loss_db": float(lo),
             "worst_crosstalk_db": float(x)}
            for w, f, lo, x in zip(wavelengths_nm, fid, loss, xt, strict=True)]


def power_report(mesh: Mesh, params: TBUParams, state: MeshState, target: np.ndarray,
                 wavelengths_nm: np.ndarray, inputs: np.ndarray, outputs: np.ndarray) -> list[dict]:
    """One row per wavelength: achieved shares (n_out x n_in), largest share error,
    insertion loss per input (dB), worst crosstalk (dB).
    """
    y_all = solve(mesh, state, wavelengths_nm, params, inputs=inputs)[0]
    p = np.abs(y_all[:, outputs]) ** 2
    tot = p.sum(axis=-2, keepdims=True)
    share = p / np.maximum(tot, 1e-300)
    xt = _crosstalk_db(y_all, outputs)
    return [{"wavelength_nm": float(w), "shares": s.round(6).tolist(),
             "max_share_error": float(np.abs(s - target).max()),
             "insertion_loss_db": (-_db(t[0])).round(4).tolist(), "worst_crosstalk_db": float(x)}
            for w, s, t, x in zip(wavelengths_nm, share, tot, xt, strict=True)]
