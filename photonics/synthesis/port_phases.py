"""Fidelity of a realised matrix up to the phases of its input and output ports.

A bench that feeds one port at a time and reads power meters cannot see the phase light
has at a mesh port: every power reading is unchanged when ``V`` becomes ``D_out V D_in``
for diagonal phase matrices. Calibration by light therefore fixes a chip's phases only up
to those (docs/calibration.md, "Common phases"), and the fidelity a calibrated chip can be
held to is the best over them: ``max |Tr(U^H D_out V D_in)|^2 / (N Tr(V^H V))``. In a system
the port phases belong to the fibres or waveguides outside the mesh, which set their own.
"""

from __future__ import annotations

import numpy as np

MAX_SWEEPS = 200  # alternating updates; each can only raise |Tr|, ~20 reach 1e-12
SWEEP_TOL = 1e-13  # stop once |Tr| rises by less than this (relative)


def port_phases(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit phases ``(d_out, d_in)`` maximising ``|Tr(U^H diag(d_out) V diag(d_in))|``, by
    alternating exact updates (each phase set alone is the phase-conjugate of its term).
    """
    u, v = np.asarray(u, complex), np.asarray(v, complex)
    n = len(u)
    d_out, d_in = np.ones(n, complex), np.ones(n, complex)
    last = -1.0
    for _ in range(MAX_SWEEPS):
        terms_in = np.einsum("ij,ij->j", np.conj(u), d_out[:, None] * v)  # Tr = sum_j terms_in_j d_in_j
        d_in = np.exp(-1j * np.angle(terms_in))
        terms_out = np.einsum("ij,ij->i", np.conj(u), v * d_in[None, :])  # Tr = sum_i terms_out_i d_out_i
        d_out = np.exp(-1j * np.angle(terms_out))
        now = float(np.abs(terms_out).sum())
        if now - last <= SWEEP_TOL * max(now, 1e-300):
            break
        last = now
    return d_out, d_in


def fidelity_up_to_port_phases(u: np.ndarray, v: np.ndarray) -> float:
    """``max over port phases |Tr(U^H D_out V D_in)|^2 / (N Tr(V^H V))`` (1 for ``V = U``
    up to port phases, a common factor and loss).

    Example:
        >>> u = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
        >>> round(fidelity_up_to_port_phases(u, np.diag([1j, -1]) @ u @ np.diag([1, 1j])), 12)
        1.0
    """
    u, v = np.asarray(u, complex), np.asarray(v, complex)
    d_out, d_in = port_phases(u, v)
    tr = np.trace(np.conj(u).T @ (d_out[:, None] * v * d_in[None, :]))
    power = float((np.abs(v) ** 2).sum())
    return float(abs(tr) ** 2 / (len(u) * max(power, 1e-300)))
