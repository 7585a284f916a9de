"""Gradient refinement of a mesh state against a chip model (scipy's L-BFGS-B).

The objective is any real function of the port matrix (:data:`photonics.circuit_gradient.
Objective`); its gradient over the chosen TBUs' heater phases comes from the merge
(:func:`photonics.circuit_gradient.value_and_grad`), exact, one forward and one downward
pass per step, so the optimiser never differences anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from photonics.circuit import _blas_single_threaded
from photonics.circuit_gradient import Objective, value_and_grad
from photonics.physics import TBUParams
from photonics.state import MeshState
from photonics.topology import Mesh

MAX_STEPS = 400  # L-BFGS iterations: a 6x6 unitary converges in ~100-200 from the analytic start
FTOL = 1e-13  # relative objective change at which L-BFGS stops (objectives are ~1e-4..1)
GTOL = 1e-9  # largest gradient entry (1/rad) at which it stops


@dataclass(frozen=True)
class Refined:
    """A refined state and how the optimiser ended."""

    state: MeshState
    objective: float
    steps: int
    evaluations: int
    message: str


def with_phases(state: MeshState, tbus: np.ndarray, x: np.ndarray) -> MeshState:
    """``state`` with the heater phases of ``tbus`` replaced by ``x`` = [top..., bot...] (rad)."""
    top, bot = state.phi_top.copy(), state.phi_bot.copy()
    top[tbus], bot[tbus] = x[: len(tbus)], x[len(tbus):]
    return MeshState(top, bot)


def refine(mesh: Mesh, params: TBUParams, state: MeshState, tbus: np.ndarray, objective: Objective,
           wavelengths_nm: np.ndarray, inputs: np.ndarray, outputs: np.ndarray,
           max_steps: int = MAX_STEPS) -> Refined:
    """Minimise ``objective`` over the heater phases of ``tbus`` (the rest stay as in ``state``).

    Phases are wrapped into [0, 2 pi) at the end: heaters only add phase, and a phase and
    the same phase plus 2 pi are the same state.
    """
    tbus = np.asarray(tbus, dtype=np.int64)
    x0 = np.concatenate([state.phi_top[tbus], state.phi_bot[tbus]])

    def f(x: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = value_and_grad(mesh, with_phases(state, tbus, x), objective, wavelengths_nm, params,
                                    inputs, outputs)
        return float(loss[0]), np.concatenate([grad[0, tbus, 0], grad[0, tbus, 1]])

    with _blas_single_threaded():  # L-BFGS-B's small BLAS calls: threads only contend (20 ms a step)
        res = minimize(f, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": max_steps, "ftol": FTOL, "gtol": GTOL})
    best = with_phases(state, tbus, np.mod(res.x, 2 * np.pi))
    return Refined(best, float(res.fun), int(res.nit), int(res.nfev), str(res.message))
