"""TEST-ONLY ORACLE: a :class:`~calibration.heater_map.HeaterMap` built from a simulated chip's hidden truth.

A real bench never has this: it reads ``Chip.truth`` (passive phases, heater
coefficients, crosstalk) that calibration has to measure. It exists so end-to-end tests
of the instruments can program *good* routes on a simulated chip before the calibration
map is available, and so calibration tests have a perfect reference to compare with.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from calibration.heater_map import UnreachableError, invert_cubic
from calibration.model import heater_positions
from instruments.sim.chip import Chip
from photonics.configuration import Configuration

NONLINEAR_ITERATIONS = 30  # contraction ~0.1 per step: 30 steps reach 1e-13 rad


class TruthMap:
    """Currents realising a configuration on ``chip``, crosstalk compensated (oracle).

    Exact on the ideal chip. ``cutoff_tbu``: crosstalk between heaters farther apart than
    this (TBU lengths) is not compensated, as a calibration map would not (it only knows K
    within ``Options.crosstalk_cutoff_tbu``): the realistic chip's long tail moves a TBU by
    a few mrad, and compensating it would rewrite every channel within 2.5 TBU lengths of
    a change at the driver's 1e-4 mA resolution. ``None`` compensates all of it.
    """

    def __init__(self, chip: Chip, cutoff_tbu: float | None = 1.05) -> None:
        self.chip = chip
        self.chip_id: str | None = chip.chip_id
        h = chip.truth.heaters
        n = h.n_heaters
        K = h.crosstalk.tocoo()
        if cutoff_tbu is not None:
            pos = heater_positions(chip.mesh.tbu_xy)
            near = np.linalg.norm(pos[K.row] - pos[K.col], axis=1) <= cutoff_tbu
            K = sp.coo_matrix((K.data[near], (K.row[near], K.col[near])), shape=K.shape)
        # total = own + K (own / eta)  =>  own = (I + K diag(1/eta))^-1 total
        self._A = (sp.identity(n) + K.tocsr() @ sp.diags(1 / h.eta)).tocsc()

    def _solve_heat(self, target: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Cubic-law phases ``s`` (rad) with ``s + k s^2 + K s / eta = target`` (fixed point).

        ``k s^2`` is the realistic chip's thermo-optic nonlinearity (zero on the ideal chip);
        it is a few % of ``s``, so a handful of iterations converge to machine precision.
        """
        s = spsolve(self._A, target)
        if not k.any():
            return s
        for _ in range(NONLINEAR_ITERATIONS):
            s = spsolve(self._A, target - k * np.maximum(s, 0.0) ** 2)
        return s

    def currents_for(self, configuration: Configuration, max_current_ma: float) -> np.ndarray:
        """Currents (mA) giving the configuration's phases on this chip's arms."""
        p = self.chip.truth.params
        state = configuration.heater_state(p.offset_top, p.offset_bot)
        target = np.empty(self._A.shape[0])
        target[0::2], target[1::2] = state.phi_top, state.phi_bot
        h = self.chip.truth.heaters
        k = np.zeros(len(target)) if h.kappa_per_mw is None else h.kappa_per_mw / h.eta
        for _ in range(10):  # neighbours' heat may overshoot an arm: add 2 pi there and retry
            heat = self._solve_heat(target, k)
            low = heat < -1e-12
            if not low.any():
                break
            target = target + 2 * np.pi * low
        currents = invert_cubic(np.maximum(heat, 0.0), h.rho2, h.rho3)
        if (currents > max_current_ma).any():
            ch = int(np.argmax(currents))
            raise UnreachableError(f"channel {ch} needs {currents[ch]:.2f} mA (> {max_current_ma} mA)")
        return currents
