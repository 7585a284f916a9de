"""Objectives of the port matrix for :mod:`photonics.synthesis.refine`, with their cotangents.

Each returns ``(L, G)`` for ``Y`` (n_states, n_wl, n_out, n_in): ``L`` (n_states,) real,
averaged over the wavelengths, and ``G`` with ``dL = Re sum G dY``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def fidelity(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``|Tr(U^H V)|^2 / (N Tr(V^H V))`` per (state, wavelength): 1 when ``V`` is ``U`` times
    any common complex factor, so loss and a global phase do not count (they are reported
    apart); for a lossless ``V`` it is the usual ``|Tr(U^H V)|^2 / N^2``.
    """
    tr = np.einsum("pq,swpq->sw", np.conj(u), y)
    power = (np.abs(y) ** 2).sum(axis=(-2, -1))
    return np.abs(tr) ** 2 / (len(u) * np.maximum(power, 1e-300))


Objective = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def infidelity(u: np.ndarray, transmission: float = 1.0) -> Objective:
    """``1 - |Tr(U^H V)|^2 / (N^2 t)`` averaged over the wavelengths, ``t`` the power
    transmission a lossy lattice can reach (the analytic start's ``Tr(V^H V) / N``).

    Unlike :func:`fidelity` it counts the light lost: a state that matches ``U`` by sending
    power out of the wrong ports scores worse, so the optimiser cannot buy fidelity with
    loss and crosstalk.
    """
    scale = len(u) ** 2 * transmission

    def objective(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tr = np.einsum("pq,swpq->sw", np.conj(u), y)
        g = 2 * np.conj(tr)[..., None, None] * np.conj(u) / scale
        return 1 - (np.abs(tr) ** 2 / scale).mean(axis=1), -g / y.shape[1]

    return objective


def power_mismatch(target: np.ndarray, loss_weight: float) -> Objective:
    """Squared error of the output power shares against ``target`` (n_out, n_in; each column
    sums to 1), plus ``loss_weight`` times the power lost, averaged over the wavelengths.

    Shares are each output's power over the power reaching all the outputs of the column, so
    the ratios are met whatever the insertion loss; the loss term then asks for the least loss
    among the states that meet them.
    """
    def objective(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.abs(y) ** 2
        tot = p.sum(axis=-2, keepdims=True)
        share = p / tot
        err = share - target
        n_in, w = y.shape[-1], y.shape[1]
        loss = (err ** 2).sum(axis=(-2, -1)) + loss_weight * (1 - tot[..., 0, :]).sum(axis=-1)
        # d loss / d p: through the shares (quotient rule), and -loss_weight through tot
        dshare = 2 * err
        dp = (dshare - (dshare * share).sum(axis=-2, keepdims=True)) / tot - loss_weight
        return loss.mean(axis=1) / n_in, 2 * dp * np.conj(y) / (w * n_in)

    return objective
