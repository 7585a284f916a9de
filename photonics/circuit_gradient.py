"""Exact derivatives of the port-to-port matrix with respect to every heater phase.

The mesh's waves obey ``(I - L S) a = E x`` and the mesh ports see ``y = E^T S a``
(:mod:`photonics.circuit`). With ``F = (I - L S)^-1 E`` (column ``q``: the waves entering
every TBU port when port ``q`` is lit), a change of the TBUs' scattering changes the port
matrix by

    dY = E^T (I - S L)^-1 dS (I - L S)^-1 E = F^T dS F

because ``S`` and ``L`` are symmetric (the circuit is reciprocal): the adjoint of lighting
output ``p`` is lighting ``p`` itself. A TBU's ``S_t = [[0, T^T], [T, 0]]``, so

    dY[p, q] / dT_t[i, j] = F_p[t, 2+i] F_q[t, j] + F_p[t, j] F_q[t, 2+i]

and ``dT/dphi`` is the TBU's own matrix with one arm factor differentiated (``j scale``
times the arm). The waves ``F`` come from the merge itself: the nested-dissection merge
(:mod:`photonics.circuit_merge`) keeps each merge's elimination ``W`` (waves entering A on
the cut per wave entering the merged node), and one pass from the root down hands every
sub-network the waves entering its ports, to the four waves entering each TBU
(:mod:`photonics.circuit_gradient_kernels`). No finite differences anywhere.

Two uses:

* :func:`jacobian`: ``dY/dphi`` for every heater, output and input port (and
  :func:`power_jacobian` for ``d|Y|^2/dphi``), batched over states and wavelengths: it
  needs the waves for the inputs and for the outputs.
* :func:`value_and_grad`: a real objective of ``Y`` and its gradient over every heater, a
  reverse (adjoint) pass: with ``dL = Re sum G[p, q] dY[p, q]`` the objective's cotangent
  ``G``, whatever the number of heaters. Two reverse passes, the cheaper taken
  (:func:`by_cotangent`): the waves of the lit inputs and of the outputs weighted by ``G``'s
  columns handed down the tree (``adjoint_blocks``: a cost per input, best for a few), or
  the cotangent ``C`` of every node's matrix handed down (``cotangent_blocks``): the node's
  waves reach its halves through ``P_A = [W; I]`` and ``P_B = [T (A_cc W + [A_ce, 0]); I]``,
  so ``dS_node = P^T dS_half P`` and a half's cotangent is ``P C P^T`` (symmetric, as ``C``
  is taken: ``dY`` is), and a TBU's is ``dL/dT[i, j] = 2 C[2+i, j]``; about ``2 k ne^2``
  multiply-adds per merge whatever the ports, best for an objective over most inputs.
  Both run in the production kernels' layout (:func:`photonics.circuit_kernels.keep_blocks`:
  LANES wavelengths side by side, or the one-lane build for one, each merge's ``A_c`` and
  ``W`` kept per wavelength), so a sweep costs a small multiple of the value alone
  (docs/synthesis.md gives the numbers); :func:`jacobian` keeps the per-block kernels of
  :mod:`photonics.circuit_gradient_kernels`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from photonics.circuit import (
    TransferConstants,
    _run_chunked,
    arm_factors,
    arm_transfers,
    solve,
    tbu_transfers,
    transfer_constants,
)
from photonics.circuit_merge import MergePlan, _scratch, lanes_for, merge_plan
from photonics.errors import StateError
from photonics.kernel_loader import entry_name, kernels
from photonics.physics import TBUParams, nominal_params
from photonics.state import MeshState
from photonics.topology import Mesh

_CHUNK = 8  # (state, wavelength) blocks per kernel call: keeps each worker's arenas small


@dataclass(frozen=True)
class GradientPlan:
    """Where the gradient kernels keep each merge's ``W`` and each node's waves."""

    merge: MergePlan
    w_offs: np.ndarray  # (n_merges,) offset of each merge's W (k x ne)
    w_size: int
    g_size: int  # scratch of the largest merge
    f_offs: np.ndarray  # (n_merges, 3) per-excitation field offsets of node, A, B
    leaf_off: np.ndarray  # (n_tbus,) per-excitation field offset of every TBU
    f_size: int  # field entries per excitation
    root_slot: np.ndarray  # (n_ports,) row of mesh port n in the root's matrix
    s_offs: np.ndarray  # (n_merges,) offset of each merge's kept A_c and W (batched pass)
    s_size: int  # kept entries per (state, wavelength) block
    node_leaf_off: np.ndarray  # (n_tbus,) arena offset of every TBU's 4x4 matrix (and its cotangent)
    c_work: int  # temporaries of the node-cotangent pass: R, M, N (k x ne each) of the largest merge
    wave_macs: int  # multiply-adds per block of the lit ports' waves, per objective input
    cotangent_macs: int  # multiply-adds per block of every node's cotangent


_GPLANS: weakref.WeakKeyDictionary[Mesh, GradientPlan] = weakref.WeakKeyDictionary()  # as merge_plan's


def gradient_plan(mesh: Mesh) -> GradientPlan:
    """The cached :class:`GradientPlan` of ``mesh`` (every generated mesh has a merge plan)."""
    hit = _GPLANS.get(mesh)
    if hit is not None:
        return hit
    plan = merge_plan(mesh)
    if plan is None:
        raise StateError("this mesh has no merge plan (a TBU looped onto itself): no gradient")
    if plan.n_merges == 0:  # the kernels find the root's waves at the last merge's node
        raise StateError("a mesh of one TBU has no merge to take the gradient through: use "
                         "photonics.circuit.arm_transfers' derivative directly")
    k, ea, eb = (plan.merges[:, c] for c in (5, 6, 7))
    ne = ea + eb
    w_sizes = k * ne
    w_offs = np.concatenate([[0], np.cumsum(w_sizes)[:-1]]).astype(np.int64)
    sizes = np.array([len(p) for p in plan.node_ports], dtype=np.int64)
    node_f = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)  # times m at run time
    off_node = {int(o): i for i, o in enumerate(plan.node_off)}
    merge_nodes = np.flatnonzero(plan.node_merge >= 0)
    f_offs = np.zeros((plan.n_merges, 3), dtype=np.int64)
    for nd in merge_nodes:
        row = plan.merges[plan.node_merge[nd]]
        a, b = off_node[int(row[1])], off_node[int(row[3])]
        f_offs[plan.node_merge[nd]] = (node_f[nd], node_f[a], node_f[b])
    s_sizes = k * (k + ea) + k * ne
    root_ports = plan.node_ports[-1]
    slot = {int(g): i for i, g in enumerate(root_ports)}
    gp = GradientPlan(
        merge=plan, w_offs=w_offs, w_size=int(w_sizes.sum()),
        g_size=int(np.max(k * (k + ne) + k * k + k * eb)) if len(k) else 1,
        f_offs=f_offs, leaf_off=node_f[plan.leaf_node], f_size=int(sizes.sum()),
        root_slot=np.array([slot[int(g)] for g in mesh.port_tbu_ports], dtype=np.int64),
        s_offs=np.concatenate([[0], np.cumsum(s_sizes)[:-1]]).astype(np.int64),
        s_size=max(int(s_sizes.sum()), 1),
        node_leaf_off=np.ascontiguousarray(plan.node_off[plan.leaf_node], dtype=np.int64),
        c_work=max(int(np.max(3 * k * ne)) if len(k) else 1, 1),
        wave_macs=int(np.sum(2 * (k * ne + k * (k + ea)))) + 8 * plan.n_tbus,
        cotangent_macs=int(np.sum(2 * k * ne * ne + 2 * k * k * ne)))
    _GPLANS[mesh] = gp
    return gp


def _kernels():
    from photonics import circuit_gradient_kernels  # numba: loaded on first use only

    return circuit_gradient_kernels


@dataclass(frozen=True, eq=False)
class Solved:
    """A batch solved with every merge kept: what the derivatives are read from.

    Attributes:
        Y: port matrices (n_states, n_wl, n_ports, n_ports), as :func:`photonics.circuit.solve`.
        dT: ``dT/dphi`` (n_states, n_wl, n_tbus, 2 [top, bot], 4 [T00, T01, T10, T11]).
    """

    plan: GradientPlan
    Y: np.ndarray
    dT: np.ndarray  # noqa: N815 (the matrix is T, as in photonics.circuit)
    arena: np.ndarray
    w: np.ndarray
    t_link: np.ndarray

    def fields(self, x: np.ndarray) -> np.ndarray:
        """Waves entering every TBU port, (B, n_tbus, 4, m), for mesh-port excitations
        ``x`` (B, n_ports, m) (``B`` = states x wavelengths, state-major).
        """
        gp, k = self.plan, _kernels()
        batch, m = x.shape[0], x.shape[2]
        root_x = np.zeros((batch, len(gp.root_slot), m), dtype=complex)
        root_x[:, gp.root_slot] = x
        out = np.empty((batch, gp.merge.n_tbus, 4, m), dtype=complex)

        def run(c: slice) -> None:
            k.field_blocks(self.arena[c], self.w[c], gp.merge.merges, gp.merge.pool, self.t_link,
                           gp.w_offs, gp.f_offs * m, root_x[c], gp.leaf_off * m,
                           np.empty(gp.f_size * m, dtype=complex), out[c])

        _run_chunked(run, batch, _CHUNK)
        return out


def solve_kept(mesh: Mesh, state: MeshState, wavelengths_nm: np.ndarray | float = 1550.0,
               params: TBUParams | None = None) -> Solved:
    """Solve every (state, wavelength) block keeping what the derivatives need."""
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    wl = np.atleast_1d(np.asarray(wavelengths_nm, dtype=float))
    if wl.ndim != 1 or (wl <= 0).any():
        raise StateError("wavelengths must be a 1-D array of positive numbers (nm)")
    gp = gradient_plan(mesh)
    T = tbu_transfers(params, state, wl)  # (S, W, n, 2, 2)
    n_states, n_wl, n = T.shape[:3]
    batch = n_states * n_wl
    T = np.ascontiguousarray(T.reshape(batch, n, 4))
    t_link = np.ascontiguousarray(10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase),
                                  dtype=complex)
    arena = np.empty((batch, gp.merge.size), dtype=complex)
    w = np.empty((batch, max(gp.w_size, 1)), dtype=complex)
    k = _kernels()

    def run(c: slice) -> None:
        k.forward_blocks(T[c], t_link, gp.merge.merges, gp.merge.pool, gp.w_offs, arena[c], w[c],
                         np.empty(gp.g_size, dtype=complex))

    _run_chunked(run, batch, _CHUNK)
    Y = arena[:, gp.merge.out_idx].reshape(n_states, n_wl, mesh.n_ports, mesh.n_ports)
    if not np.isfinite(Y).all():
        raise StateError("the circuit is singular at this state (a lossless loop on resonance): "
                         "no derivative; add loss or detune a loop")
    return Solved(gp, Y, _transfer_derivatives(params, state, wl), arena, w, t_link)


def _transfer_derivatives(params: TBUParams, state: MeshState, wl: np.ndarray) -> np.ndarray:
    """``dT/dphi_top`` and ``dT/dphi_bot`` of every TBU, (S, W, n, 2, 4)."""
    k = transfer_constants(params, wl)
    phases = state.batched
    scale = k.scale[None, :, None]
    top = k.amp_top * np.exp(1j * (phases[:, None, :, 0] * scale + k.c_top))
    bot = k.amp_bot * np.exp(1j * (phases[:, None, :, 1] * scale + k.c_bot))
    zero = np.zeros_like(top)
    d_top = arm_transfers(1j * scale * top, zero, k)
    d_bot = arm_transfers(zero, 1j * scale * bot, k)
    return np.stack([d_top, d_bot], axis=3).reshape(*top.shape, 2, 4)


def _unit(n_ports: int, batch: int, ports: np.ndarray) -> np.ndarray:
    x = np.zeros((batch, n_ports, len(ports)), dtype=complex)
    x[:, ports, np.arange(len(ports))] = 1.0
    return x


def _ports(ports: list[int] | np.ndarray | None, n: int) -> np.ndarray:
    p = np.arange(n) if ports is None else np.asarray(ports, dtype=np.int64)
    if p.ndim != 1 or (p.size and (p.min() < 0 or p.max() >= n)):
        raise StateError(f"ports must be indices 0..{n - 1}")
    return p


def jacobian(mesh: Mesh, state: MeshState, wavelengths_nm: np.ndarray | float = 1550.0,
             params: TBUParams | None = None, inputs: list[int] | np.ndarray | None = None,
             outputs: list[int] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Port matrix and its derivative with respect to every heater phase (rad).

    Returns:
        ``(Y, dY)``: ``Y`` (n_states, n_wl, n_out, n_in) as :func:`photonics.circuit.solve`
        restricted to ``outputs`` x ``inputs`` (all ports when omitted), and ``dY``
        (n_states, n_wl, n_tbus, 2, n_out, n_in): ``dY[..., t, 0, p, q]`` is
        ``dY[p, q] / dphi_top(t)``, ``[..., t, 1, ...]`` the bottom heater's.
    """
    solved = solve_kept(mesh, state, wavelengths_nm, params)
    ins, outs = _ports(inputs, mesh.n_ports), _ports(outputs, mesh.n_ports)
    n_states, n_wl = solved.Y.shape[:2]
    batch = n_states * n_wl
    f = solved.fields(_unit(mesh.n_ports, batch, np.concatenate([ins, outs])))
    fi, fo = f[..., : len(ins)], f[..., len(ins):]
    d = solved.dT.reshape(batch, mesh.n_tbus, 2, 2, 2)  # (B, n, heater, i, j)
    # dY[p, q] = sum_ij dT[i, j] (Fo[2+i, p] Fi[j, q] + Fo[j, p] Fi[2+i, q])
    dy = (np.einsum("btip,bthij,btjq->bthpq", fo[:, :, 2:], d, fi[:, :, :2], optimize=True)
          + np.einsum("btjp,bthij,btiq->bthpq", fo[:, :, :2], d, fi[:, :, 2:], optimize=True))
    Y = solved.Y[:, :, outs][:, :, :, ins]
    return Y, dy.reshape(n_states, n_wl, mesh.n_tbus, 2, len(outs), len(ins))


def power_jacobian(mesh: Mesh, state: MeshState, wavelengths_nm: np.ndarray | float = 1550.0,
                   params: TBUParams | None = None, inputs: list[int] | np.ndarray | None = None,
                   outputs: list[int] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Port powers ``|Y|^2`` and their derivatives (1/rad), shapes as :func:`jacobian`."""
    Y, dY = jacobian(mesh, state, wavelengths_nm, params, inputs, outputs)
    return np.abs(Y) ** 2, 2 * np.real(np.conj(Y)[:, :, None, None] * dY)


Objective = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``f(Y) -> (L, G)``: ``Y`` (n_states, n_wl, n_out, n_in), ``L`` (n_states,) real and ``G``
shaped like ``Y`` with ``dL = Re sum G dY`` (for ``|Y|^2`` terms, ``G = 2 w conj(Y)``)."""


KEEP_BYTES = 1 << 28  # what the batched pass keeps of a whole sweep's merges (A_c and W of every
# merge: 66 kB per wavelength on square:6x6, so 1000 wavelengths keep 66 MB), kept for the
# next call: past it the forward merges run a second time, chunk by chunk, beside the
# downward pass (bounded memory for any sweep, at one more forward solve)
_GROUPS = 16  # lane groups per chunk of the batched pass: a worker's kept store and fields
# stay a few MB


def value_and_grad(mesh: Mesh, state: MeshState, objective: Objective,
                   wavelengths_nm: np.ndarray | float = 1550.0, params: TBUParams | None = None,
                   inputs: list[int] | np.ndarray | None = None,
                   outputs: list[int] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A real objective of the port matrix and its gradient over every heater phase.

    One forward merge that keeps, per merge, the half's cut rows ``A_c`` and the
    elimination ``W`` (:func:`photonics.circuit_kernels.keep_blocks`), then one reverse
    (adjoint) pass from the root down, whichever costs fewer multiply-adds
    (:func:`by_cotangent`): the waves of the ``inputs`` and of the ``outputs`` weighted by the
    objective's cotangent (``adjoint_blocks``, cheap for a few inputs), or the cotangent of
    every node's matrix (``cotangent_blocks``, whose cost does not depend on the ports the
    objective reads). Reverse mode either way: the cost does not grow with the number of
    heaters. Every kernel runs LANES wavelengths side by side, as the production solve does,
    or the one-lane build for a single wavelength.

    Returns:
        ``(L, grad)``: ``L`` (n_states,) and ``grad`` (n_states, n_tbus, 2) in 1/rad
        (``[..., 0]`` top heaters, ``[..., 1]`` bottom), summed over wavelengths through
        ``objective``.
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    wl = np.atleast_1d(np.asarray(wavelengths_nm, dtype=float))
    if wl.ndim != 1 or (wl <= 0).any():
        raise StateError("wavelengths must be a 1-D array of positive numbers (nm)")
    gp = gradient_plan(mesh)
    ins, outs = _ports(inputs, mesh.n_ports), _ports(outputs, mesh.n_ports)
    consts, top, bot = arm_factors(params, state, wl)
    n_states, n_wl, n = top.shape
    batch = n_states * n_wl
    T = np.ascontiguousarray(arm_transfers(top, bot, consts).reshape(batch, n, 4))
    t_link = np.ascontiguousarray(10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase),
                                  dtype=complex)
    lanes = lanes_for(batch)
    groups = -(-batch // lanes)
    keep_all = groups * gp.s_size * lanes * 16 <= KEEP_BYTES
    Y = np.empty((batch, mesh.n_ports, len(ins)), dtype=complex)
    store = _kept(gp, T, t_link, ins, Y, lanes) if keep_all else None
    if store is None:
        Y[:] = solve(mesh, state, wl, params, inputs=ins).reshape(batch, mesh.n_ports, len(ins))
    if not np.isfinite(Y).all():
        raise StateError("the circuit is singular at this state (a lossless loop on resonance): "
                         "no derivative; add loss or detune a loop")
    Y = Y.reshape(n_states, n_wl, mesh.n_ports, len(ins))
    if not np.array_equal(outs, np.arange(mesh.n_ports)):  # every output in order: no copy (37 MB at
        Y = Y[:, :, outs]  # 1000 wavelengths on square:6x6, 4 % of value + gradient)
    loss, G = objective(Y)
    cotangent = _contiguous(G, Y.shape).reshape(batch, len(outs), len(ins))
    z = _adjoint(gp, T, t_link, (ins, outs), cotangent, store, lanes)
    return np.asarray(loss, dtype=float), _heater_gradient(z.reshape(n_states, n_wl, n, 4), consts, top, bot)


def _contiguous(G: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The objective's cotangent as a C-contiguous complex array of ``shape``, copied only
    when it is not one already (a broadcast view always is copied).
    """
    G = np.asarray(G, dtype=complex)
    return G if G.shape == shape and G.flags.c_contiguous else np.ascontiguousarray(np.broadcast_to(G, shape))


NODE_MAC_SPEEDUP = 1.3  # how much faster the node pass runs a multiply-add than the waves pass:
# its products are long dot products (every row of C), the waves' are short (k cut ports) with
# indirect rows. Measured at the crossover (taskset -c 1, load 12): smartlight at 10 inputs
# 3.62 / 3.40 ms (64 wavelengths) and 0.11 / 0.12 ms (one), square:6x6 at 16 inputs 6.15 /
# 7.39 ms and 0.20 / 0.25 ms (nodes / waves); by count alone the nodes came from 12 and 18.


def by_cotangent(gp: GradientPlan, n_inputs: int) -> bool:
    """Whether the reverse pass of an objective over ``n_inputs`` inputs carries every node's
    cotangent (a fixed number of multiply-adds) rather than the waves of the ``2 n_inputs``
    lit ports (a number per input): whichever takes less time, by the multiply-add counts and
    the node pass's faster multiply-add (:data:`NODE_MAC_SPEEDUP`). The node pass from 10
    inputs on smartlight, 14 on square:6x6.
    """
    return gp.cotangent_macs < NODE_MAC_SPEEDUP * n_inputs * gp.wave_macs


def _reused(name: str, rows: int, lanes: int) -> np.ndarray:
    """The calling thread's buffer ``name`` of exactly (rows, lanes), a view of one kept
    between calls (a fresh multi-MB array costs a page fault per 4 kB on every call: a
    third of the forward pass at 64 wavelengths). At most KEEP_BYTES each.
    """
    return _scratch(name, rows, lanes)[:rows]


def _group_slices(c: slice, batch: int, lanes: int) -> slice:
    """The blocks of groups ``c``."""
    return slice(c.start * lanes, min(c.stop * lanes, batch))


def _keep(gp: GradientPlan, T: np.ndarray, t_link: np.ndarray, sr: np.ndarray, si: np.ndarray,
          out_pos: np.ndarray, out: np.ndarray) -> None:
    """Forward merges of the blocks ``T`` into the kept store ``sr``/``si`` (groups, s_size,
    lanes); port matrices at ``out_pos`` into ``out``.
    """
    plan, lanes = gp.merge, sr.shape[2]
    kernels()[entry_name("keep_blocks", lanes)](
        T, t_link, plan.merges, plan.pool, gp.s_offs, _scratch("re", plan.size, lanes),
        _scratch("im", plan.size, lanes), _scratch("wr", plan.work_size, lanes),
        _scratch("wi", plan.work_size, lanes), sr, si, out_pos, out)


def _kept(gp: GradientPlan, T: np.ndarray, t_link: np.ndarray, ins: np.ndarray, Y: np.ndarray,
          lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward merges of every group, keeping ``A_c`` and ``W``; port matrices into ``Y``."""
    groups = -(-len(T) // lanes)
    sr = _reused("sr", groups * gp.s_size, lanes).reshape(groups, gp.s_size, lanes)
    si = _reused("si", groups * gp.s_size, lanes).reshape(groups, gp.s_size, lanes)
    out_pos = np.ascontiguousarray(gp.merge.out_idx[:, ins])

    def run(c: slice) -> None:
        b = _group_slices(c, len(T), lanes)
        _keep(gp, T[b], t_link, sr[c], si[c], out_pos, Y[b])

    _run_chunked(run, groups, _GROUPS)
    return sr, si


def _adjoint(gp: GradientPlan, T: np.ndarray, t_link: np.ndarray, ports: tuple[np.ndarray, np.ndarray],
             G: np.ndarray, store: tuple[np.ndarray, np.ndarray] | None, lanes: int) -> np.ndarray:
    """``z`` (batch, n_tbus, 4): the objective's derivative with respect to every TBU's
    forward matrix, from its cotangent ``G`` (batch, outputs, inputs) on ``ports`` (inputs,
    outputs) and the kept merges (``store``), or from a forward pass run again per chunk when
    the sweep was too long to keep (``store`` None).
    """
    plan, groups = gp.merge, -(-len(T) // lanes)
    z = np.empty((len(T), plan.n_tbus, 4), dtype=complex)
    reverse = _by_nodes if by_cotangent(gp, len(ports[0])) else _by_waves

    def run(c: slice) -> None:
        b = _group_slices(c, len(T), lanes)
        if store is None:
            sr = np.empty((c.stop - c.start, gp.s_size, lanes))
            si = np.empty_like(sr)
            _keep(gp, T[b], t_link, sr, si, np.zeros((0, 0), dtype=np.int64),
                  np.empty((b.stop - b.start, 0, 0), dtype=complex))
        else:
            sr, si = store[0][c], store[1][c]
        reverse(gp, sr, si, t_link, ports, G[b], z[b])

    _run_chunked(run, groups, _GROUPS)
    return z


def _by_waves(gp: GradientPlan, sr: np.ndarray, si: np.ndarray, t_link: np.ndarray,
              ports: tuple[np.ndarray, np.ndarray], G: np.ndarray, z: np.ndarray) -> None:
    """``z`` of kept blocks by the waves of the lit inputs and of the outputs weighted by ``G``
    (:func:`photonics.circuit_kernels.adjoint_blocks`).
    """
    plan, lanes = gp.merge, sr.shape[2]
    ins, outs = ports
    m = 2 * len(ins)
    root_x = np.zeros((len(G), len(gp.root_slot), m), dtype=complex)
    root_x[:, gp.root_slot[ins], np.arange(len(ins))] = 1.0
    root_x[:, gp.root_slot[outs], len(ins):] = G
    rows = gp.f_size * m + 4
    kernels()[entry_name("adjoint_blocks", lanes)](
        sr, si, plan.merges, plan.pool, t_link, gp.s_offs, np.ascontiguousarray(gp.f_offs * m), root_x,
        np.ascontiguousarray(gp.leaf_off * m), len(ins), _scratch("fr", rows, lanes),
        _scratch("fi", rows, lanes), z)


def _by_nodes(gp: GradientPlan, sr: np.ndarray, si: np.ndarray, t_link: np.ndarray,
              ports: tuple[np.ndarray, np.ndarray], G: np.ndarray, z: np.ndarray) -> None:
    """``z`` of kept blocks by every node's cotangent, root first
    (:func:`photonics.circuit_kernels.cotangent_blocks`).
    """
    plan, lanes = gp.merge, sr.shape[2]
    ins, outs = ports
    kernels()[entry_name("cotangent_blocks", lanes)](
        sr, si, plan.merges, plan.pool, t_link, gp.s_offs, G, np.ascontiguousarray(gp.root_slot[outs]),
        np.ascontiguousarray(gp.root_slot[ins]), gp.node_leaf_off, _scratch("cr", plan.size, lanes),
        _scratch("ci", plan.size, lanes), _scratch("tr", gp.c_work, lanes), _scratch("ti", gp.c_work, lanes),
        z)


def _heater_gradient(z: np.ndarray, k: TransferConstants, top: np.ndarray, bot: np.ndarray) -> np.ndarray:
    """``dL/dphi`` (n_states, n_tbus, 2), summed over wavelengths, from ``z = dL/dT``
    (n_states, n_wl, n_tbus, 4): every forward matrix is linear in its arm factors
    (:func:`photonics.circuit.arm_transfers`) and ``d top / d phi_top = j scale top``.
    """
    z00, z01, z10, z11 = np.moveaxis(z, -1, 0)
    js = 1j * k.scale[None, :, None]
    g_top = np.real(js * top * (k.t2t1 * z00 + 1j * k.t2s1 * z01 + 1j * k.s2t1 * z10 - k.s2s1 * z11))
    g_bot = np.real(js * bot * (-k.s2s1 * z00 + 1j * k.s2t1 * z01 + 1j * k.t2s1 * z10 + k.t2t1 * z11))
    return np.stack([g_top.sum(axis=1), g_bot.sum(axis=1)], axis=-1)
