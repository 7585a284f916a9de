"""Incremental circuit solve: after a heater change, re-merge only what the change touches.

A :class:`CircuitSolver` holds one mesh state solved at fixed wavelengths, together with
every intermediate sub-network matrix of the nested-dissection merge
(:mod:`photonics.circuit_merge`). :meth:`CircuitSolver.update` takes the next state,
finds the TBUs whose heater phases differ, recomputes their transfer matrices and
re-runs only the merges on their paths to the root: one merge per tree level for a
single TBU (7 of the 70 merges on ``smartlight``), the same arithmetic at the same
arena positions as a full solve, so the result equals :func:`photonics.circuit.solve`
of the new state (tested to 1e-12 over random update sequences).

This is what a simulated bench does when calibration steps one heater at a time::

    solver = CircuitSolver(mesh, state, [1550.0], params)
    for phase in sweep:
        state = with_phase(state, tbu, phase)   # one heater (plus its crosstalk)
        solver.update(state)
        power = abs(solver.matrix(inputs=[port])[0, :, 0]) ** 2

A change of the chip itself (``params``) or of most TBUs at once (a temperature step)
re-solves everything: :data:`_FULL_FRACTION` says where the path re-merge stops paying.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from photonics.circuit import tbu_transfers
from photonics.circuit_merge import (
    ancestors,
    merge_plan,
    new_arenas,
    root_matrix,
    run_levels,
)
from photonics.errors import StateError
from photonics.physics import TBUParams, nominal_params
from photonics.state import MeshState
from photonics.topology import Mesh

_FULL_FRACTION = 0.25  # more TBUs changed than this share: one full merge beats many paths
_LAST_MIN_BATCH = 16  # as photonics.circuit: fewer wavelengths run every level batch-first


class CircuitSolver:
    """One mesh state solved at fixed wavelengths, updated by re-merging changed paths.

    Args:
        mesh: topology (any mesh with a merge plan: every generated mesh has one).
        state: heater phases of ONE state (``phi_top`` of shape (n_tbus,)).
        wavelengths_nm: scalar or 1-D array of wavelengths (nm), fixed for the solver.
        params: chip physics (nominal when omitted).

    Attributes:
        last_update_tbus: TBUs whose transfer matrices the last call recomputed.
        last_update_merges: merges it re-ran (the full tree's count after a full solve).
    """

    def __init__(
        self,
        mesh: Mesh,
        state: MeshState,
        wavelengths_nm: np.ndarray | float = 1550.0,
        params: TBUParams | None = None,
    ) -> None:
        wl = np.atleast_1d(np.asarray(wavelengths_nm, dtype=float))
        if wl.ndim != 1 or (wl <= 0).any():
            raise StateError("wavelengths must be a 1-D array of positive numbers (nm)")
        self.mesh = mesh
        self.wavelengths_nm = wl
        self.params = params or nominal_params(mesh.n_tbus, mesh.n_links)
        if len(self.params.link_loss_db) != mesh.n_links:
            raise StateError(
                f"params describe {len(self.params.link_loss_db)} links, mesh has {mesh.n_links}")
        plan = merge_plan(mesh, all_first=len(wl) < _LAST_MIN_BATCH)
        if plan is None:
            raise StateError(
                "this mesh has no merge plan (a TBU linked to itself): use photonics.circuit.solve")
        self._plan = plan
        t_link = 10 ** (-self.params.link_loss_db / 20) * np.exp(1j * self.params.link_phase)
        self._t_ext = np.append(t_link, 0.0)
        self._top = np.empty(0)
        self._bot = np.empty(0)
        self._arenas: tuple[np.ndarray, np.ndarray | None] | None = None
        self.last_update_tbus = np.arange(mesh.n_tbus)
        self.last_update_merges = 0
        self._full(state)

    @property
    def state(self) -> MeshState:
        """The heater phases currently solved."""
        return MeshState(self._top.copy(), self._bot.copy())

    def _check(self, state: MeshState) -> tuple[np.ndarray, np.ndarray]:
        if state.phi_top.ndim != 1:
            raise StateError("CircuitSolver holds one state: pass phi_top of shape (n_tbus,), not a batch")
        if state.n_tbus != self.mesh.n_tbus:
            raise StateError(f"state has {state.n_tbus} TBUs but the mesh has {self.mesh.n_tbus}")
        return state.phi_top, state.phi_bot

    def _full(self, state: MeshState) -> None:
        top, bot = self._check(state)
        T = tbu_transfers(self.params, state, self.wavelengths_nm)[0]  # (W, n, 2, 2)
        last, first = new_arenas(self._plan, T.reshape(len(self.wavelengths_nm), -1, 4))
        run_levels(self._plan, last, first, self._t_ext)
        self._arenas = (last, first)
        self._top, self._bot = top.copy(), bot.copy()
        self.last_update_tbus = np.arange(self.mesh.n_tbus)
        self.last_update_merges = sum(lev.n_merge for lev in self._plan.levels)

    def update(self, state: MeshState, params: TBUParams | None = None) -> int:
        """Solve ``state`` (and ``params``, when the chip itself changed); returns how
        many TBUs changed. Only the merges above those TBUs run again.
        """
        if params is not None and params is not self.params:
            self.params = params
            t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
            self._t_ext = np.append(t_link, 0.0)
            self._full(state)
            return self.mesh.n_tbus
        top, bot = self._check(state)
        changed = np.flatnonzero((top != self._top) | (bot != self._bot))
        if len(changed) > _FULL_FRACTION * self.mesh.n_tbus:
            self._full(state)
            return len(changed)
        self.last_update_tbus = changed
        self.last_update_merges = 0
        if not len(changed):
            return 0
        last, first = self._arenas
        sub = _sub_params(self.params, changed)
        T = tbu_transfers(sub, MeshState(top[changed], bot[changed]), self.wavelengths_nm)[0]
        rows = (4 * changed[:, None] + np.arange(4)[None, :]).ravel()
        last[rows] = T.reshape(len(self.wavelengths_nm), -1).T
        only = ancestors(self._plan, changed)
        run_levels(self._plan, last, first, self._t_ext, only)
        self._top[changed], self._bot[changed] = top[changed], bot[changed]
        self.last_update_merges = sum(len(m) for m in only.values())
        return len(changed)

    def matrix(self, inputs: list[int] | np.ndarray | None = None) -> np.ndarray:
        """Port-to-port field matrix (n_wl, n_ports, n_inputs), as :func:`~photonics.circuit.solve`
        returns for one state.
        """
        n_ports = self.mesh.n_ports
        inputs = np.arange(n_ports) if inputs is None else np.asarray(inputs, dtype=np.int64)
        if inputs.size and (inputs.min() < 0 or inputs.max() >= n_ports):
            raise StateError(f"input ports must lie in 0..{n_ports - 1}")
        return root_matrix(self._plan, *self._arenas, inputs)


def _sub_params(params: TBUParams, tbus: np.ndarray) -> TBUParams:
    """The per-TBU parameters of ``tbus`` only (links untouched: transfers do not use them)."""
    slope = params.kappa_slope_per_nm
    return replace(
        params,
        loss_db=params.loss_db[tbus], kappa1=params.kappa1[tbus], kappa2=params.kappa2[tbus],
        arm_imbalance_db=params.arm_imbalance_db[tbus], offset_top=params.offset_top[tbus],
        offset_bot=params.offset_bot[tbus], delay_ps=params.delay_ps[tbus], phase0=params.phase0[tbus],
        kappa_slope_per_nm=slope[tbus] if np.ndim(slope) else slope,
    )
