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

When the same single TBU changes twice running (a heater sweep), the rest of the mesh
with that TBU's four link ends left open (its *complement*) is joined once from the
siblings along its path, and
every further step that changes only that TBU is one join of at most four links: at one
wavelength that is what pays, since numpy's per-call cost, not arithmetic, dominates a
path re-merge. A change of the chip itself (``params``) or of every TBU at once re-solves
everything. Any other change re-runs the merges above the changed TBUs only (compiled, the
same cost per merge as a full solve): a heater step of the realistic simulated chip, which
moves 10-37 of smartlight's 71 TBUs through thermal crosstalk, re-runs 56-92 % of the
merge work (median 66 %, issue 28). At one wavelength the transfer matrices of the changed
TBUs come from a :class:`TransferCache`, so the result is the full solve's bytes.

:class:`ColumnSolver` is the other end: a whole-mesh solve of single states at one wavelength,
one input port each (a simulated bench's reading when every step moves many TBUs), with
the merge's set-up and the transfers' per-TBU constants (:class:`TransferCache`) made once;
it returns :func:`photonics.circuit.solve`'s bytes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from photonics.circuit import arm_transfers, solve, tbu_transfers, transfer_constants
from photonics.circuit_merge import (
    _kernel,
    ancestors,
    join,
    join_plan,
    merge_plan,
    new_arenas,
    node_matrix,
    remerge,
    root_matrix,
    solve_merge,
)
from photonics.errors import StateError
from photonics.kernel_loader import _ptr
from photonics.physics import TBUParams, nominal_params
from photonics.state import MeshState
from photonics.topology import Mesh


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
        plan = merge_plan(mesh)
        if plan is None:
            raise StateError(
                "this mesh has no merge plan (a TBU linked to itself): use photonics.circuit.solve")
        self._plan = plan
        t_link = 10 ** (-self.params.link_loss_db / 20) * np.exp(1j * self.params.link_phase)
        self._t_link = t_link
        self._tc = TransferCache(self.params, float(wl[0])) if len(wl) == 1 else None
        self._top = np.empty(0)
        self._bot = np.empty(0)
        self._arenas = new_arenas(plan, len(wl))
        self._peer = mesh.peer()
        self._t_port = np.zeros(4 * mesh.n_tbus, dtype=complex)
        self._t_port[mesh.links[:, 0]] = self._t_port[mesh.links[:, 1]] = t_link
        self._children: dict[int, list[int]] = {}
        for node, par in enumerate(plan.parent):
            if par >= 0:
                self._children.setdefault(int(par), []).append(node)
        self._pending: set[int] = set()  # TBUs whose arena entries (and paths) are stale
        self._comp: tuple | None = None  # (TBU, complement matrix, its ports, join plan, order, params)
        self._root: np.ndarray | None = None  # port matrix from the last complement join
        self._last_single = -1  # the TBU the previous update changed alone (-1: not one)
        self.last_update_tbus = np.arange(mesh.n_tbus)
        self.last_update_merges = 0
        self._step: _StepScratch | None = None  # update_phases' buffers, made on its first call
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
        every = np.arange(self.mesh.n_tbus)
        if self._tc is not None:
            T = self._tc.transfers(every, top, bot)[None]  # (1, n, 2, 2)
        else:
            T = tbu_transfers(self.params, state, self.wavelengths_nm)[0]  # (W, n, 2, 2)
        remerge(self._plan, self._arenas, T.reshape(len(self.wavelengths_nm), -1, 4), every, self._t_link)
        self._top, self._bot = top.copy(), bot.copy()
        self._pending, self._comp, self._root = set(), None, None
        self.last_update_tbus = every
        self.last_update_merges = self._plan.n_merges

    def update(self, state: MeshState, params: TBUParams | None = None) -> int:
        """Solve ``state`` (and ``params``, when the chip itself changed); returns how
        many TBUs changed. Only the merges above those TBUs run again.
        """
        if params is not None and params is not self.params:
            self.params = params
            t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
            self._t_link = t_link
            self._t_port[self.mesh.links[:, 0]] = self._t_port[self.mesh.links[:, 1]] = t_link
            if self._tc is not None:
                self._tc = TransferCache(params, float(self.wavelengths_nm[0]))
            self._full(state)
            return self.mesh.n_tbus
        top, bot = self._check(state)
        changed = np.flatnonzero((top != self._top) | (bot != self._bot))
        if len(changed) == self.mesh.n_tbus:
            self._full(state)
            return len(changed)
        self.last_update_tbus = changed
        self.last_update_merges = 0
        if not len(changed):
            return 0
        self._top[changed], self._bot[changed] = top[changed], bot[changed]
        t = int(changed[0]) if len(changed) == 1 else -1
        sweeping = t >= 0 and t == self._last_single and self._pending <= {t}
        self._last_single = t
        if sweeping and self._plan.parent[self._plan.leaf_node[t]] >= 0:
            self._join_one(t)  # the same TBU again: a sweep, worth its complement
            return 1
        self._remerge(changed)
        return len(changed)

    def update_phases(self, top: np.ndarray, bot: np.ndarray) -> int:
        """:meth:`update` for one state given as its heater phases ``top``/``bot`` (rad, float
        (n_tbus,) each, contiguous and finite: a simulated chip's reading). At one wavelength
        the changed TBUs, their transfer matrices and the merges above them come from one
        compiled call (:func:`photonics.step_kernels.step_transfers`), then the merges run:
        the same numbers as :meth:`update`. Returns how many TBUs changed.
        """
        if self._tc is None:
            return self.update(MeshState(top, bot))
        st = self._step
        if st is None or st.tc is not self._tc:
            st = self._step = _StepScratch(self._plan, self._tc, self._t_link, self._arenas)
        n = self.mesh.n_tbus
        stale = st.stale
        if self._pending:  # a TBU swept alone left its arena entries stale: re-merge it too
            stale = np.zeros(n, dtype=np.uint8)
            stale[sorted(self._pending)] = 1
        counts = st.counts
        if st.transfers_c is not None:  # the C entry points, with the kept arrays' pointers made once
            st.transfers_c(_ptr(top), _ptr(bot), _ptr(self._top), _ptr(self._bot), _ptr(stale), n,
                           *st.transfer_args)
        else:
            tc = self._tc
            st.transfers(top, bot, self._top, self._bot, stale, tc.scale, tc.amp_top, tc.amp_bot,
                         tc.c_top, tc.c_bot, *tc.couplers, st.paths, st.mark, st.changed, st.tbus, st.T,
                         st.order, counts)
        k, k2, m = counts.tolist()
        self.last_update_tbus = st.changed[:k].copy()
        self.last_update_merges = 0
        if not k:
            return 0
        if k < n:  # (every TBU moved: a whole solve, which leaves the sweep memory as it was)
            t = int(st.changed[0]) if k == 1 else -1
            sweeping = t >= 0 and t == self._last_single and self._pending <= {t}
            self._last_single = t
            if sweeping and self._plan.parent[self._plan.leaf_node[t]] >= 0:
                self._join_one(t)  # the same TBU again: a sweep, worth its complement
                return 1
        if st.remerge_c is not None:
            st.remerge_c(st.T_ptr, 1, k2, *st.remerge_args, m, *st.arena_args)
        else:
            plan, arenas = self._plan, self._arenas
            st.remerge(st.T[None, :k2], st.tbus[:k2], self._t_link, plan.merges, plan.pool, st.order[:m],
                       arenas.re, arenas.im, st.wr, st.wi)
        self._pending, self._root, self._comp = set(), None, None
        self.last_update_merges = m  # every merge when every TBU changed: a full solve's
        return k

    def _transfers(self, tbus: np.ndarray) -> np.ndarray:
        """Transfer matrices (n_wl, len(tbus), 2, 2) of ``tbus`` at the held phases."""
        if self._tc is not None:
            return self._tc.transfers(tbus, self._top, self._bot)[None]
        sub = _sub_params(self.params, tbus)
        return tbu_transfers(sub, MeshState(self._top[tbus], self._bot[tbus]), self.wavelengths_nm)[0]

    def _remerge(self, changed: np.ndarray) -> None:
        """Rewrite the transfer entries of ``changed`` (and of stale TBUs) and re-run the
        merges on their paths to the root.
        """
        tbus = np.union1d(changed, np.array(sorted(self._pending), dtype=np.int64)) if self._pending \
            else changed
        only = ancestors(self._plan, tbus)
        T = self._transfers(tbus).reshape(len(self.wavelengths_nm), -1, 4)
        remerge(self._plan, self._arenas, T, tbus, self._t_link, only)
        # Another TBU moved: a kept complement (the rest of the mesh around a swept TBU) is stale.
        self._pending, self._root, self._comp = set(), None, None
        self.last_update_merges = len(only)

    def _join_one(self, t: int) -> None:
        """One TBU changed: join its new 4x4 matrix to the rest of the mesh.

        The rest of the mesh with TBU ``t``'s four link ends left open (its complement) is
        built once from the siblings along ``t``'s path, then every step that changes only
        ``t`` (a heater sweep) is a single join of at most four links.
        """
        if self._comp is None or self._comp[0] != t:
            plan = self._plan
            node, comp, ports = int(plan.leaf_node[t]), None, None
            while plan.parent[node] >= 0:
                par = int(plan.parent[node])
                sib = next(c for c in self._children[par] if c != node)
                mat, sib_ports = node_matrix(plan, sib, self._arenas)
                if comp is None:
                    comp, ports = mat, sib_ports
                else:
                    jp = join_plan(ports, sib_ports, self._peer)
                    comp, ports = join(comp, mat, jp, self._t_port, ports), jp[4]
                    self.last_update_merges += 1
                node = par
            jp = join_plan(ports, np.arange(4 * t, 4 * t + 4), self._peer)
            slot = {int(g): i for i, g in enumerate(jp[4])}
            order = np.array([slot[int(g)] for g in self.mesh.port_tbu_ports], dtype=np.int64)
            self._comp = (t, comp, ports, jp, order, _sub_params(self.params, np.array([t])))
        _, comp, ports, jp, order, sub = self._comp
        one = MeshState(self._top[t:t + 1], self._bot[t:t + 1])
        T = tbu_transfers(sub, one, self.wavelengths_nm)[0, :, 0]
        leaf = np.zeros((len(self.wavelengths_nm), 4, 4), dtype=complex)
        leaf[:, 2:, :2] = T  # b[2+i] = T[i, j] a[j]
        leaf[:, :2, 2:] = np.swapaxes(T, 1, 2)  # b[j] = T[i, j] a[2+i]
        root = join(comp, leaf, jp, self._t_port, ports)
        self._root = root[:, order][:, :, order]
        self._pending = {t}
        self.last_update_merges += 1

    def matrix(self, inputs: list[int] | np.ndarray | None = None) -> np.ndarray:
        """Port-to-port field matrix (n_wl, n_ports, n_inputs), as :func:`~photonics.circuit.solve`
        returns for one state.
        """
        n_ports = self.mesh.n_ports
        inputs = np.arange(n_ports) if inputs is None else np.asarray(inputs, dtype=np.int64)
        # a Python check: a simulated chip asks for one input per reading, where two numpy
        # reductions cost more than the read itself
        if any(not 0 <= i < n_ports for i in inputs.ravel().tolist()):
            raise StateError(f"input ports must lie in 0..{n_ports - 1}")
        if self._root is not None:
            return self._root[:, :, inputs]
        return root_matrix(self._plan, self._arenas, inputs)

    def column(self, port: int) -> np.ndarray:
        """The field at every port (n_ports,) for unit field into ``port``: ``matrix([port])``
        of a one-wavelength solver, read without its general gathers (a simulated chip's reading).
        """
        if len(self.wavelengths_nm) != 1 or not 0 <= port < self.mesh.n_ports:
            return self.matrix(inputs=[port])[0, :, 0]
        if self._root is not None:
            return self._root[0, :, port]
        if self._step is None or self._step.tc is not self._tc:
            self._step = _StepScratch(self._plan, self._tc, self._t_link, self._arenas)
        idx = self._step.columns[port]
        out = np.empty(len(idx), dtype=complex)
        out.real = self._arenas.re[0, idx, 0]
        out.imag = self._arenas.im[0, idx, 0]
        return out


class _StepScratch:
    """:meth:`CircuitSolver.update_phases`' kernels and buffers, made once per solver (and
    again for a changed chip): every TBU's merge-table rows to the root, bottom-up (-1 past the
    root); room for the changed TBUs, their transfer matrices and the merges to run; and, where
    the compiled kernels' C entry points are loaded, the pointers of every array that stays put
    (the buffers are sliced from their start, so a slice's pointer is the buffer's).
    """

    def __init__(self, plan, tc: TransferCache, t_link: np.ndarray, arenas) -> None:  # noqa: ANN001
        from photonics.kernel_loader import step_kernels

        n, n_merges = plan.n_tbus, plan.n_merges
        rows = []
        for t in range(n):
            node, path = int(plan.leaf_node[t]), []
            while plan.parent[node] >= 0:
                node = int(plan.parent[node])
                path.append(int(plan.node_merge[node]))
            rows.append(path)
        self.paths = np.full((n, max(1, *map(len, rows))), -1, dtype=np.int64)
        for t, path in enumerate(rows):
            self.paths[t, :len(path)] = path
        self.tc = tc
        self.stale = np.zeros(n, dtype=np.uint8)
        self.mark = np.zeros(n_merges, dtype=np.uint8)
        self.changed = np.zeros(n, dtype=np.int64)
        self.tbus = np.zeros(n, dtype=np.int64)
        self.T = np.zeros((n, 4), dtype=complex)
        self.order = np.zeros(n_merges, dtype=np.int64)
        self.counts = np.zeros(3, dtype=np.int64)
        self.wr = np.zeros((plan.work_size, 1))
        self.wi = np.zeros((plan.work_size, 1))
        self.columns = [np.ascontiguousarray(plan.out_idx[:, p]) for p in range(plan.n_ports)]
        self.transfers = step_kernels()["step_transfers"]
        self.remerge = _kernel("remerge_blocks", 1)
        self.transfers_c = getattr(self.transfers, "c", None)
        self.remerge_c = getattr(self.remerge, "c", None)
        self._keep = (t_link, arenas, plan)  # the arrays behind the pointers below live as long
        consts = (tc.amp_top, tc.amp_bot, tc.c_top, tc.c_bot, *tc.couplers)
        self._consts = [np.ascontiguousarray(c, dtype=float) for c in consts]
        self.transfer_args = (float(tc.scale), *map(_ptr, self._consts), _ptr(self.paths),
                              self.paths.shape[1], _ptr(self.mark), n_merges, _ptr(self.changed),
                              _ptr(self.tbus), _ptr(self.T), _ptr(self.order), _ptr(self.counts))
        self.T_ptr = _ptr(self.T)
        self.remerge_args = (_ptr(self.tbus), _ptr(t_link), len(t_link), _ptr(plan.merges), len(plan.merges),
                             _ptr(plan.pool), len(plan.pool), _ptr(self.order))
        self.arena_args = (_ptr(arenas.re), _ptr(arenas.im), arenas.re.shape[0], arenas.re.shape[1],
                           _ptr(self.wr), _ptr(self.wi), self.wr.shape[0])


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


class TransferCache:
    """Per-TBU constants of :func:`~photonics.circuit.tbu_transfers` at one wavelength
    (:func:`~photonics.circuit.transfer_constants`), so the transfer matrices of a few TBUs
    cost a dozen small array operations (the same formula, the same operations per element).
    """

    def __init__(self, params: TBUParams, wavelength_nm: float) -> None:
        k = transfer_constants(params, np.array([float(wavelength_nm)]))
        self.scale, self.amp_top, self.amp_bot = k.scale[0], k.amp_top, k.amp_bot
        self.c_top, self.c_bot = k.c_top[0], k.c_bot[0]
        self.couplers = (k.t2t1[0], k.s2s1[0], k.t2s1[0], k.s2t1[0])

    def transfers(self, tbus: np.ndarray, phi_top: np.ndarray, phi_bot: np.ndarray) -> np.ndarray:
        """Forward matrices (len(tbus), 2, 2) of ``tbus`` at heater phases ``phi_top/bot[tbus]``."""
        top = self.amp_top[tbus] * np.exp(1j * (phi_top[tbus] * self.scale + self.c_top[tbus]))
        bot = self.amp_bot[tbus] * np.exp(1j * (phi_bot[tbus] * self.scale + self.c_bot[tbus]))
        return arm_transfers(top, bot, tuple(c[tbus] for c in self.couplers))


class ColumnSolver:
    """Whole-mesh solves of single states at one wavelength, one input port each: what a
    simulated bench asks for every reading.

    The same merge as :func:`~photonics.circuit.solve` on the same transfer matrices (so the
    same bytes), without its per-call set-up: the merge plan, the link factors and the
    per-TBU constants of the transfers (:class:`TransferCache`) are made once per chip and
    wavelength, which takes ~30 % off a single-state solve on ``smartlight``. A state the
    merge cannot solve (non-finite: a lossless loop on resonance) goes to the general solve.
    """

    def __init__(self, mesh: Mesh, params: TBUParams, wavelength_nm: float) -> None:
        plan = merge_plan(mesh)
        if plan is None:
            raise StateError(
                "this mesh has no merge plan (a TBU linked to itself): use photonics.circuit.solve")
        self.mesh, self.params, self.wavelength_nm = mesh, params, float(wavelength_nm)
        self._plan = plan
        self._t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
        self._cache = TransferCache(params, wavelength_nm)
        self._all = np.arange(mesh.n_tbus)

    def field(self, state: MeshState, input_port: int) -> np.ndarray:
        """Field (n_ports,) at every mesh port for unit field into ``input_port`` in ``state``."""
        n, n_ports = self.mesh.n_tbus, self.mesh.n_ports
        if not 0 <= int(input_port) < n_ports:
            raise StateError(f"input ports must lie in 0..{n_ports - 1}")
        if state.phi_top.shape != (n,):
            raise StateError(f"ColumnSolver takes one state of {n} TBUs, not phi_top of shape "
                             f"{state.phi_top.shape}")
        T = self._cache.transfers(self._all, state.phi_top, state.phi_bot).reshape(1, n, 4)
        out = np.empty((1, n_ports, 1), dtype=complex)
        if solve_merge(self._plan, T, self._t_link, np.array([int(input_port)]), out):
            return out[0, :, 0]
        whole = solve(self.mesh, state, [self.wavelength_nm], self.params, inputs=[int(input_port)])
        return whole[0, 0, :, 0]
