"""Circuit solve of a whole mesh, loops included.

Unknowns are the field amplitudes ``a`` entering every TBU port. Each TBU scatters them
(``b = S a``, ``S = [[0, T.T], [T, 0]]``); each internal link feeds the wave leaving one
port into its peer (``a_p = t_link b_q``); mesh ports take the external input. So

    (I - L S) a = E x,        y = E.T S a

with ``L`` the link matrix and ``E`` the mesh-port selector. Two exact solvers, chosen
automatically:

* nested-dissection merge (photonics/circuit_merge.py, used whenever it applies, which is
  every mesh built by photonics.topology): the mesh is bisected recursively by geometry
  once (cached per mesh), and the halves' port scattering matrices are joined bottom-up,
  eliminating the link unknowns of each cut as a small dense Schur complement. Every
  step is one numpy call over all (state, wavelength) blocks; the root is the
  port-to-port matrix itself.
* sparse LU (fallback, and the reference the merge is tested against): one sparse system
  per (state, wavelength), stacked into block-diagonal matrices of a few dozen blocks and
  factorised by SuperLU.

Either way the batch runs in chunks on every core, with no Python loop over wavelengths
or states.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from photonics.circuit_merge import (
    ChipArgs,
    MergePlan,
    chip_args,
    merge_plan,
    pack_one_block,
    packed_kernel,
    solve_phases,
)
from photonics.errors import StateError
from photonics.merge_layout import LANES
from photonics.physics import (
    TBUParams,
    heater_phase_scale,
    kappa_at,
    nominal_params,
    propagation_phase,
)
from photonics.state import MeshState
from photonics.topology import Mesh


def tbu_transfers(
    params: TBUParams, state: MeshState, wavelengths_nm: np.ndarray
) -> np.ndarray:
    """Forward matrices of every TBU, shape (n_states, n_wl, n_tbus, 2, 2).

    The heater phases of ``state`` are those at the chip's reference wavelength; at
    ``lambda`` they scale by ``lambda0 / lambda`` and the couplers follow their slope
    (:func:`~photonics.physics.heater_phase_scale`, :func:`~photonics.physics.kappa_at`).
    The same matrix as :func:`~photonics.physics.mzi_transfer` (tested to 1e-15),
    written out with the loss, the propagation phase and the bottom arm's amplitude
    folded into two complex arm factors, so a wide sweep costs two complex exponentials
    per TBU and wavelength. The state-independent constants are numpy
    (:func:`transfer_constants`); the arm factors and the matrices are one compiled pass
    (``transfer_blocks`` in :mod:`photonics.circuit_kernels`), the same operations as
    :func:`arm_factors` and :func:`arm_transfers` and the same bytes (tested), without their
    dozen numpy passes over (S, W, n) temporaries: at one wavelength those passes were a
    fifth of a smartlight solve, at 1,000 about a sixth.
    """
    args = _transfer_args(params, state, np.asarray(wavelengths_nm, dtype=float))
    n_states, n_wl = args[0].shape[0], args[2].shape[0]
    out = np.empty((n_states, n_wl, params.n_tbus, 2, 2), dtype=complex)
    _fill_transfers(args, out.reshape(n_states * n_wl, params.n_tbus, 4), 0, n_states * n_wl)
    return out


def _transfer_args(params: TBUParams, state: MeshState, wl: np.ndarray) -> tuple[np.ndarray, ...]:
    """The transfer kernel's inputs for ``state`` at ``wl`` (nm): heater phases (S, n), phase
    scale (W,), arm amplitudes (n,), arm phase constants and coupler products (W, n), each a
    C-contiguous float array (:func:`tbu_transfers`).
    """
    return (*_phases(params, state), *_chip_constants(params, wl).consts)


def _phases(params: TBUParams, state: MeshState) -> tuple[np.ndarray, np.ndarray]:
    """The heater phases of ``state`` as (S, n) C-contiguous float arrays (no copy when they
    are already).
    """
    if state.n_tbus != params.n_tbus:
        raise StateError(f"state has {state.n_tbus} TBUs but the chip has {params.n_tbus}")
    top, bot = state.phi_top, state.phi_bot
    if top.ndim == 1 == bot.ndim and top.dtype == np.float64 == bot.dtype and top.flags.c_contiguous \
            and bot.flags.c_contiguous:  # one state, as a simulated chip passes it: two views
        return top.reshape(1, -1), bot.reshape(1, -1)
    return tuple(np.ascontiguousarray(np.atleast_2d(p), dtype=float) for p in (top, bot))


def _chip_constants(params: TBUParams, wl: np.ndarray) -> ChipArgs:
    """What a solve needs from the chip at ``wl`` (nm) besides the heater phases: the transfer
    kernel's constants (:func:`_transfer_args`, after the phases) and the link transmissions,
    with the compiled call's arguments for them (:class:`~photonics.circuit_merge.ChipArgs`).

    A sweep of a few wavelengths computes them on every call in ~20 small numpy calls, 40-60 us
    (a one-wavelength smartlight solve's merge takes about as long), and a chip's heaters
    change far more often than the chip: so they are kept for the last :data:`_KEPT_CHIPS`
    (chip, wavelengths) seen, and given back only when the bytes (and dtype and shape) of every
    array they are computed from equal those they were computed from (a chip whose arrays were
    changed in place is computed again, never a stale answer). They are looked up by the chip
    object's identity and the wavelengths, then that check compares the bytes: hashing the
    ~7 kB of a smartlight chip's arrays on every call, as a key made of them needed, was half
    of the look-up (3-4 us of a one-wavelength solve). Long sweeps are kept too, within a byte
    budget (:data:`_KEPT_BYTES`): at 1,000 wavelengths their numpy passes took 5.8 ms of a 36 ms
    smartlight solve (16 %, serial, before the chunks run on the cores), 4.6 MB kept.
    """
    key = check = None
    size = _kept_size(params, len(wl))
    if size <= _KEPT_BYTES // 2:  # (the key holds the wavelengths: a kept key was checked below)
        key = (id(params), wl.tobytes(), float(params.center_wavelength_nm))
        check = tuple([(a.dtype.char, a.shape, a.tobytes()) for a in map(np.asarray, (
            params.loss_db, params.kappa1, params.kappa2, params.arm_imbalance_db, params.offset_top,
            params.offset_bot, params.delay_ps, params.phase0, params.link_loss_db, params.link_phase,
            params.kappa_slope_per_nm))])
        kept = _CHIPS.get(key)
        if kept is not None and kept[0] == check:  # (another chip at a reused id: computed again)
            return kept[1]
    if (wl <= 0).any():
        raise StateError(WAVELENGTHS_ERROR)
    k = transfer_constants(params, wl)
    shape = (len(k.scale), params.n_tbus)  # (W, n)
    out = chip_args((np.ascontiguousarray(k.scale, dtype=float),
                     *(_contiguous(a, (params.n_tbus,)) for a in (k.amp_top, k.amp_bot)),
                     *(_contiguous(a, shape) for a in (k.c_top, k.c_bot, *k[-4:]))),
                    10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase))
    if key is not None:
        with _CHIPS_LOCK:  # solves run in several threads (the control plane's handlers)
            _CHIPS.pop(key, None)  # (a chip changed in place: its new constants replace the old)
            while _CHIPS and (len(_CHIPS) >= _KEPT_CHIPS or sum(e[2] for e in _CHIPS.values()) + size
                              > _KEPT_BYTES):
                del _CHIPS[next(iter(_CHIPS))]  # the oldest
            _CHIPS[key] = (check, out, size)
    return out


def _kept_size(params: TBUParams, n_wl: int) -> int:
    """Bytes of :func:`_chip_constants`' arrays for ``n_wl`` wavelengths (seven (W, n) arrays)."""
    return 8 * (7 * n_wl * params.n_tbus + 2 * params.n_tbus + n_wl) + 16 * len(params.link_loss_db)


WAVELENGTHS_ERROR = "wavelengths must be a 1-D array of positive numbers (nm)"
_CHIPS: dict = {}  # _chip_constants' kept results, oldest first; read-only to every user
_CHIPS_LOCK = threading.Lock()
_KEPT_CHIPS = 16  # chips (with their wavelengths) kept: a campaign's handful of chips, a test's few
_KEPT_BYTES = 16 << 20  # and at most this many bytes of them: a 1,000-wavelength sweep of hex:6x6
# (7.4 MB) is kept, of 10,000 wavelengths is not; a short sweep is 40 kB


def _fill_transfers(args: tuple[np.ndarray, ...], T: np.ndarray, start: int, stop: int) -> None:
    """Forward matrices of the blocks ``start .. stop`` (state-major: block ``s W + w``) into
    ``T`` (B, n, 4), from :func:`_transfer_args`' ``args``: whole states in one kernel call,
    a state cut by ``start`` or ``stop`` in one more each (``T``'s rows shaped as the kernel's
    (states, wavelengths, n, 4): numba's dispatcher, where the loader fell back, types them so).
    The solve's workers each fill their own chunk, so the transfer matrices run on every core
    as the merge does.
    """
    phi_top, phi_bot, scale, amp_top, amp_bot, *per_wl = args
    n_wl, kernel = scale.shape[0], _transfer_kernel()
    while start < stop:
        s, w0 = divmod(start, n_wl)
        if w0 == 0 and stop - start >= n_wl:  # whole states s .. s1
            s1 = s + (stop - start) // n_wl
            kernel(phi_top[s:s1], phi_bot[s:s1], scale, amp_top, amp_bot, *per_wl,
                   T[start:s1 * n_wl].reshape(s1 - s, n_wl, *T.shape[1:]))
            start = s1 * n_wl
        else:  # part of state s
            w1 = min(n_wl, w0 + stop - start)
            kernel(phi_top[s:s + 1], phi_bot[s:s + 1], scale[w0:w1], amp_top, amp_bot,
                   *(a[w0:w1] for a in per_wl), T[start:start + w1 - w0].reshape(1, w1 - w0, *T.shape[1:]))
            start += w1 - w0


def _contiguous(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` broadcast to ``shape`` as a C-contiguous float array (itself when it is one:
    ``broadcast_to`` alone costs microseconds, which a one-wavelength solve notices).
    """
    if a.shape == shape and a.dtype == np.float64 and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(np.broadcast_to(a, shape), dtype=float)


def _transfer_kernel() -> Callable:
    """The compiled transfer-matrix kernel (:func:`photonics.circuit_kernels.build`'s
    ``transfer_blocks``), loaded on first use: ``import photonics.circuit`` loads no compiler.
    """
    from photonics.kernel_loader import kernels

    return kernels()["transfer_blocks"]


def arm_factors(params: TBUParams, state: MeshState, wavelengths_nm: np.ndarray
                ) -> tuple[TransferConstants, np.ndarray, np.ndarray]:
    """The constants of :func:`tbu_transfers` and its two arm factors ``gain * exp(j phi)``
    (top, bottom; (n_states, n_wl, n_tbus) each), from which every forward matrix is linear
    (:func:`arm_transfers`).
    """
    if state.n_tbus != params.n_tbus:
        raise StateError(f"state has {state.n_tbus} TBUs but the chip has {params.n_tbus}")
    k = transfer_constants(params, np.asarray(wavelengths_nm, dtype=float))
    phases = state.batched  # (S, n, 2)
    scale = k.scale[None, :, None]  # (1, W, 1)
    top = k.amp_top * np.exp(1j * (phases[:, None, :, 0] * scale + k.c_top))
    bot = k.amp_bot * np.exp(1j * (phases[:, None, :, 1] * scale + k.c_bot))
    return k, top, bot


class TransferConstants(NamedTuple):
    """What :func:`tbu_transfers` needs besides the heater phases, per TBU and wavelength.

    Attributes:
        scale: heater phase scale ``lambda0 / lambda``, (W,).
        amp_top, amp_bot: arm amplitude gains (loss, the bottom arm's imbalance), (n,).
        c_top, c_bot: arm phase constants (rad): offset plus propagation phase, (W, n).
        t2t1, s2s1, t2s1, s2t1: coupler field products, (W, n).
    """

    scale: np.ndarray
    amp_top: np.ndarray
    amp_bot: np.ndarray
    c_top: np.ndarray
    c_bot: np.ndarray
    t2t1: np.ndarray
    s2s1: np.ndarray
    t2s1: np.ndarray
    s2t1: np.ndarray


def transfer_constants(params: TBUParams, wavelengths_nm: np.ndarray) -> TransferConstants:
    """The state-independent part of :func:`tbu_transfers` at ``wavelengths_nm`` (nm)."""
    wl0 = params.center_wavelength_nm
    prop = propagation_phase(params, wavelengths_nm)  # (W, n)
    gain_db = -params.loss_db
    k1 = kappa_at(params.kappa1, wavelengths_nm, params.kappa_slope_per_nm, wl0)  # (W, n)
    k2 = kappa_at(params.kappa2, wavelengths_nm, params.kappa_slope_per_nm, wl0)
    t1, s1, t2, s2 = np.sqrt(1 - k1), np.sqrt(k1), np.sqrt(1 - k2), np.sqrt(k2)
    return TransferConstants(
        scale=heater_phase_scale(wavelengths_nm, wl0), amp_top=10 ** (gain_db / 20),
        amp_bot=10 ** ((gain_db - params.arm_imbalance_db) / 20),
        c_top=params.offset_top + prop, c_bot=params.offset_bot + prop,
        t2t1=t2 * t1, s2s1=s2 * s1, t2s1=t2 * s1, s2t1=s2 * t1)


def arm_transfers(top: np.ndarray, bot: np.ndarray, k: TransferConstants | tuple) -> np.ndarray:
    """Forward matrices (..., 2, 2) from the arm factors ``top``/``bot`` (gain * exp(j phi)).

    ``k`` holds the coupler products (``t2t1, s2s1, t2s1, s2t1``, broadcasting against
    ``top``) as the last four fields of :class:`TransferConstants`.
    """
    t2t1, s2s1, t2s1, s2t1 = k[-4:]
    # T = c2 diag(top, bot) c1 with c = [[t, j s], [j s, t]]
    out = np.empty((*top.shape, 2, 2), dtype=complex)
    out[..., 0, 0] = t2t1 * top - s2s1 * bot
    out[..., 0, 1] = 1j * (t2s1 * top + s2t1 * bot)
    out[..., 1, 0] = 1j * (s2t1 * top + t2s1 * bot)
    out[..., 1, 1] = t2t1 * bot - s2s1 * top
    return out


def _scatter_entries(n_tbus: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row/col TBU-port indices of S's nonzeros and which T element each one is.

    ``b[4t+2+i] = T[i, j] a[4t+j]`` (forward) and ``b[4t+j] = T[i, j] a[4t+2+i]`` (back).
    """
    t = np.arange(n_tbus)[:, None]
    i = np.array([0, 0, 1, 1])[None, :]
    j = np.array([0, 1, 0, 1])[None, :]
    rows = np.concatenate([4 * t + 2 + i, 4 * t + j], axis=1).ravel()
    cols = np.concatenate([4 * t + j, 4 * t + 2 + i], axis=1).ravel()
    elem = np.tile(np.concatenate([2 * i + j, 2 * i + j], axis=1), (n_tbus, 1)).ravel()
    tbu = np.repeat(np.arange(n_tbus), 8)
    return rows, cols, elem, tbu


def solve(
    mesh: Mesh,
    state: MeshState,
    wavelengths_nm: np.ndarray | float = 1550.0,
    params: TBUParams | None = None,
    inputs: list[int] | np.ndarray | None = None,
) -> np.ndarray:
    """Port-to-port field scattering matrix of the mesh.

    Solved by nested-dissection merging of sub-network scattering matrices when the mesh
    allows it (every generated mesh does), otherwise by sparse LU; both are exact (they
    agree to ~1e-13) and :func:`solve_sparse` forces the latter.

    Args:
        mesh: topology.
        state: heater phases, one state or a batch of ``n_states``.
        wavelengths_nm: scalar or array of wavelengths (nm).
        params: chip physics (nominal defaults when omitted).
        inputs: mesh-port indices to excite (all ports when omitted).

    Returns:
        Complex array (n_states, n_wl, n_ports, n_inputs): field at every output mesh
        port for unit field at each input. Power is ``abs(S)**2``.

    Example:
        >>> from photonics.topology import hexagonal
        >>> m = hexagonal(1, 1)
        >>> S = solve(m, MeshState.uniform(m, "bar"), [1550.0])
        >>> S.shape
        (1, 1, 12, 12)
    """
    return _solve(mesh, state, wavelengths_nm, params, inputs, method="auto")


def solve_sparse(
    mesh: Mesh,
    state: MeshState,
    wavelengths_nm: np.ndarray | float = 1550.0,
    params: TBUParams | None = None,
    inputs: list[int] | np.ndarray | None = None,
) -> np.ndarray:
    """:func:`solve` by sparse LU only (the reference path; same arguments and result)."""
    return _solve(mesh, state, wavelengths_nm, params, inputs, method="sparse")


def _solve(
    mesh: Mesh,
    state: MeshState,
    wavelengths_nm: np.ndarray | float,
    params: TBUParams | None,
    inputs: list[int] | np.ndarray | None,
    method: str,
) -> np.ndarray:
    params, wl, inputs = _checked(mesh, params, wavelengths_nm, inputs)
    chip = _chip_constants(params, wl)  # (refuses a wavelength that is not positive)
    top, bot = _phases(params, state)
    return _run(mesh, params, chip, top, bot, len(wl), inputs, merge_plan(mesh) if method == "auto" else None)


def _checked(mesh: Mesh, params: TBUParams | None, wavelengths_nm: np.ndarray | float,
             inputs: list[int] | np.ndarray | None) -> tuple[TBUParams, np.ndarray, np.ndarray | None]:
    """:func:`solve`'s chip (nominal when None), wavelengths (nm, 1-D floats) and inputs (None
    for every port), checked against ``mesh`` (:class:`StateError` when they do not fit).
    """
    params = params or nominal_params(mesh.n_tbus, mesh.n_links)
    if len(params.link_loss_db) != mesh.n_links:
        raise StateError(f"params describe {len(params.link_loss_db)} links, mesh has {mesh.n_links}")
    wl = np.atleast_1d(np.asarray(wavelengths_nm, dtype=float))
    if wl.ndim != 1:
        raise StateError(WAVELENGTHS_ERROR)
    if inputs is not None:
        inputs = np.asarray(inputs, dtype=np.int64)
        if inputs.size and (inputs.min() < 0 or inputs.max() >= mesh.n_ports):
            raise StateError(f"input ports must lie in 0..{mesh.n_ports - 1}")
    return params, wl, inputs


def _run(mesh: Mesh, params: TBUParams, chip: ChipArgs, top: np.ndarray, bot: np.ndarray, n_wl: int,
         inputs: np.ndarray | None, mplan: MergePlan | None) -> np.ndarray:
    """The solve itself, from the heater phases ``top``/``bot`` (S, n) and the chip's constants
    at ``n_wl`` wavelengths to the port matrices (S, W, n_ports, n_inputs): the merge plan
    ``mplan`` (None: sparse LU) in compiled calls, sparse LU for any block it leaves non-finite.
    """
    every_input = inputs is None  # the merge then reads the root's positions as they are
    n_states, n = top.shape[0], mesh.n_tbus
    batch = n_states * n_wl
    shape = (n_states, n_wl, mesh.n_ports, mesh.n_ports if every_input else len(inputs))
    out = np.empty((batch, *shape[2:]), dtype=complex)  # chunks write in place
    if mplan is not None:
        if batch == 1:  # one block (a one-wavelength reading): one compiled call, nothing around it
            if solve_phases(mplan, chip, top, bot, 0, inputs, out):
                return out.reshape(shape)
        else:
            def chunk(c: slice) -> bool:  # phases to port matrices: one compiled call per chunk
                return solve_phases(mplan, chip, top, bot, c.start, inputs, out[c])

            if all(_run_chunked(chunk, batch, _MERGE_CHUNK, LANES)):
                return out.reshape(shape)
    # sparse LU (asked for, or a lossless loop exactly on resonance under the merge plan: let
    # SuperLU, with pivoting, try), from the forward matrices (the merge kept none of them)
    T = np.empty((batch, n, 4), dtype=complex)
    _fill_transfers((top, bot, *chip.consts), T, 0, batch)
    inputs = np.arange(mesh.n_ports) if every_input else inputs
    plan = _plan(mesh, params)
    _run_chunked(lambda c: _solve_blocks(plan, T[c], inputs, out[c]), batch, _CHUNK)
    return out.reshape(shape)


class PreparedSolve:
    """:func:`solve` of one chip at fixed wavelengths and inputs, prepared once: calling it with
    a state gives the same array, byte for byte, as ``solve(mesh, state, wavelengths_nm, params,
    inputs)``.

    For callers that solve one chip over and over at the same wavelengths (a sweep of heater
    states, a simulated chip's readings, a benchmark): the checks of the wavelengths and inputs,
    the chip constants' look-up (which compares the bytes of the chip's eleven arrays on every
    :func:`solve`) and the merge plan's look-up are done here once. What is left per call is the
    state's check, two allocations and the compiled call: at one wavelength, where a solve is a
    tenth of a millisecond, that Python around the call was a third of it (docs/physics.md).

    One state at one wavelength (a simulated chip's reading) takes a shorter path still: the
    compiled call's arguments that do not change are packed once per thread into one array
    (:func:`~photonics.circuit_merge.pack_one_block`), and a call checks the state, makes the
    output and passes the packed array's pointer and the three arrays as they are (the kernel reads their
    data pointers from the array objects). Right after another program has run (SAX's call, in the
    benchmark), everything a call touches is cold, and the 33 ctypes conversions, buffer exports,
    numpy calls and Python frames around the kernel were most of that penalty (docs/physics.md,
    "One wavelength").

    The chip is read when the solver is made: a later in-place change to ``params``' arrays is
    not seen (make a new solver; :func:`solve` notices such a change and computes again).
    """

    def __init__(self, mesh: Mesh, params: TBUParams | None = None,
                 wavelengths_nm: np.ndarray | float = 1550.0,
                 inputs: list[int] | np.ndarray | None = None) -> None:
        self.mesh = mesh
        self.params, self.wavelengths_nm, self.inputs = _checked(mesh, params, wavelengths_nm, inputs)
        self._chip = _chip_constants(self.params, self.wavelengths_nm)
        self._plan = merge_plan(mesh)
        # the one-block path (one wavelength, a merge plan, the compiled kernels loaded): None else
        self._one = packed_kernel() if self._plan is not None and len(self.wavelengths_nm) == 1 else None
        if self._one is not None:
            idx = self._plan.solve_out_idx
            pos = idx if self.inputs is None else idx[:, self.inputs]
            self._pos = np.ascontiguousarray(pos, dtype=np.int64)
            self._n = (mesh.n_tbus,)
            self._shape = (1, 1, mesh.n_ports, self._pos.shape[1])
            self._local = threading.local()  # per thread: the packed arguments (they hold its arenas)

    def __call__(self, state: MeshState) -> np.ndarray:
        """Port matrices (n_states, n_wl, n_ports, n_inputs) of ``state`` (:func:`solve`'s result)."""
        one = self._one
        if one is not None:  # one wavelength: one state as a simulated chip passes it takes the short path
            top, bot = state.phi_top, state.phi_bot
            if type(top) is _NDARRAY is type(bot) and top.shape == self._n == bot.shape \
                    and top.strides == _ONE_STRIDE == bot.strides and top.dtype is _F64 and bot.dtype is _F64:
                kept = getattr(self._local, "args", None)
                if kept is None:  # the thread's first call (kept holds the arenas it points into alive)
                    kept = self._local.args = pack_one_block(self._plan, self._chip, self._pos)
                out = _EMPTY(self._shape, _C128)
                if one(kept[1], top, bot, out):
                    return out
                # not finite (a lossless loop on resonance): sparse LU, as _run falls back
                return _run(self.mesh, self.params, self._chip, top.reshape(1, -1), bot.reshape(1, -1), 1,
                            self.inputs, None)
        top, bot = _phases(self.params, state)
        return _run(self.mesh, self.params, self._chip, top, bot, len(self.wavelengths_nm), self.inputs,
                    self._plan)


_F64 = np.dtype(np.float64)  # the one-block path's phases: native float64 (numpy's builtin dtype object)
_ONE_STRIDE = (8,)  # ... and contiguous
_C128, _EMPTY = np.dtype(complex), np.empty  # its output's dtype made once
_NDARRAY = np.ndarray  # ... and plain arrays: the kernel reads the data pointer from the object


def _run_chunked(fn: Callable[[slice], object], batch: int, chunk: int, align: int = 1) -> list:
    """``fn`` over slices of the batch, on every core this process may use (numpy and
    SuperLU release the GIL); one core runs the chunks in the calling thread. Chunks start
    at multiples of ``align`` (the merge's lane count: a chunk of 60 blocks would leave half
    a group of eight lanes empty at its end, where 64 and 56 fill every group). Returns
    what ``fn`` returned for each chunk, in order.

    On several cores the calling thread is one of the workers: it and ``workers - 1`` pool
    threads take the chunks one at a time from a shared list (:func:`_share`), so a solve wakes
    one pool thread less and none per chunk, where handing every chunk to the pool woke a pool
    thread at the start and the sleeping caller at each chunk's end (session 40:
    2-thread smartlight solves 3-8 % faster by the median, six alternating runs in one process
    at load 6-7; ``benchmarks/probe_two_cores.py`` splits the wall clock).
    """
    if batch <= chunk and batch < 2 * _PARALLEL_MIN:  # one chunk whatever the cores (as below)
        return [fn(slice(0, batch))]
    cores = _cores()
    n_chunks = max(-(-batch // chunk), min(cores, batch // _PARALLEL_MIN))
    workers = min(cores, n_chunks) if n_chunks > 1 else 1
    n_chunks = max(workers, n_chunks)
    per_chunk = -(-batch // n_chunks)
    size = -(-per_chunk // align) * align
    if workers == 1:
        return [fn(slice(i, min(i + size, batch))) for i in range(0, batch, size)]
    with _blas_single_threaded():  # one BLAS thread per worker: no oversubscription
        return _share(fn, _tapered(batch, size, workers, align), workers)


def _share(fn: Callable[[slice], object], chunks: list[slice], workers: int) -> list:
    """``fn`` of every chunk, on the calling thread and ``workers - 1`` pool threads, each
    taking the next chunk not yet taken; results in the chunks' order. If the calling thread's
    chunk raises, no further chunk is started and the pool threads' current ones are waited for
    (they write into the caller's arrays) before the error propagates; a pool thread's error
    propagates the same way once the calling thread is done.
    """
    results: list = [None] * len(chunks)
    taken = iter(range(len(chunks)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(taken, None)
            if i is None:
                return
            results[i] = fn(chunks[i])

    helpers = [_pool(workers - 1).submit(work) for _ in range(workers - 1)]
    try:
        work()
    except BaseException:
        with lock:
            for _ in taken:  # nothing left to take: the helpers stop after their current chunk
                pass
        raise
    finally:
        for h in helpers:
            h.result()
    return results


def _tapered(batch: int, size: int, workers: int, align: int) -> list[slice]:
    """Chunks of at most ``size`` blocks for ``workers`` threads, shrinking towards the batch's
    end (each at most a ``2 workers``-th of what is left, at least :data:`_PARALLEL_MIN` blocks,
    a multiple of ``align``): the workers then finish within a small chunk of each other, where
    equal chunks could leave one worker alone with a whole last chunk (64 blocks, 1.8 ms of a
    7-14 ms smartlight solve at 1,000 wavelengths on two cores, when the other was a chunk ahead).
    """
    floor = -(-_PARALLEL_MIN // align) * align
    chunks, start = [], 0
    while start < batch:
        left = batch - start
        share = -(-left // (2 * workers))
        step = min(size, max(floor, -(-share // align) * align))
        if left - step < floor and left <= size:  # no sliver after it: one chunk to the end
            step = left
        chunks.append(slice(start, min(start + step, batch)))
        start += step
    return chunks


_BLAS: list = []  # [(len(sys.modules) when made, threadpoolctl controller or None)]


def _blas_single_threaded():
    """Limit BLAS to one thread while our workers run, when ``threadpoolctl`` is installed.

    Each worker's large products (the top merges of meshes from about hex:9x9 up) would
    otherwise start BLAS threads of their own: on 2 cores, hex:12x12 at 128 wavelengths
    took 1.6 s instead of 0.2 s. Without threadpoolctl, set OPENBLAS_NUM_THREADS=1. The
    controller is remade after new imports (scipy loads a BLAS of its own) so that every
    BLAS loaded by then is held too.
    """
    if not _BLAS or _BLAS[0][0] != len(sys.modules):
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _BLAS[:] = [(len(sys.modules), None)]
        else:
            _BLAS[:] = [(len(sys.modules), ThreadpoolController())]
    if _BLAS[0][1] is None:
        return contextlib.nullcontext()
    return _BLAS[0][1].limit(limits=1, user_api="blas")


_POOLS: dict[int, object] = {}


def _pool(workers: int):
    """A persistent pool per size: its threads keep their scratch arenas between calls."""
    if workers not in _POOLS:
        from concurrent.futures import ThreadPoolExecutor

        _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lumion-solve")
    return _POOLS[workers]


SOLVE_THREADS_ENV = "LUMION_SOLVE_THREADS"  # at most this many solve threads per process


def _cores() -> int:
    """Threads a solve may use: the cores this process may run on (respects ``taskset`` and
    cgroup CPU affinity), at most ``LUMION_SOLVE_THREADS`` when that is set to a positive
    integer (a campaign's worker processes set 1: the processes already fill the cores).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    cap = os.environ.get(SOLVE_THREADS_ENV, "")
    return max(1, min(cores, int(cap))) if cap.strip().isdigit() else cores


_MERGE_CHUNK = 64  # (state, wavelength) blocks per merge call at most: the compiled merge runs LANES
# blocks at a time, so a chunk only sets how finely the workers share a batch. Finer than one chunk
# per worker so that a worker whose core is busier (a shared machine) takes fewer chunks; a chunk
# of 64 blocks is ~2 ms of work against ~20 us of Python to start it
_PARALLEL_MIN = 16  # blocks per worker below which a second core does not pay for itself
_CHUNK = 24  # (state, wavelength) blocks per sparse factorisation


@dataclass(frozen=True)
class _Plan:
    """Index arrays of one block's system, shared by every (state, wavelength) block."""

    m: int
    n_ports: int
    port_tbu_ports: np.ndarray
    s_rows: np.ndarray
    s_cols: np.ndarray
    s_elem: np.ndarray
    s_tbu: np.ndarray
    keep: np.ndarray
    ls_rows: np.ndarray
    ls_cols: np.ndarray
    ls_t: np.ndarray
    out_sel: np.ndarray
    out_port: np.ndarray


def _plan(mesh: Mesh, params: TBUParams) -> _Plan:
    n = mesh.n_tbus
    m = 4 * n
    s_rows, s_cols, s_elem, s_tbu = _scatter_entries(n)
    # L S: the row of incoming port p is -t_link * (row of outgoing port q) of S.
    t_link = 10 ** (-params.link_loss_db / 20) * np.exp(1j * params.link_phase)
    dst_of_out = np.full(m, -1)
    dst_of_out[mesh.links[:, 1]] = mesh.links[:, 0]
    dst_of_out[mesh.links[:, 0]] = mesh.links[:, 1]
    t_of_out = np.zeros(m, dtype=complex)
    t_of_out[mesh.links[:, 1]] = t_link
    t_of_out[mesh.links[:, 0]] = t_link
    keep = dst_of_out[s_rows] >= 0
    row_to_port = np.full(m, -1)
    row_to_port[mesh.port_tbu_ports] = np.arange(mesh.n_ports)
    out_sel = row_to_port[s_rows] >= 0
    return _Plan(
        m=m, n_ports=mesh.n_ports, port_tbu_ports=mesh.port_tbu_ports,
        s_rows=s_rows, s_cols=s_cols, s_elem=s_elem, s_tbu=s_tbu, keep=keep,
        ls_rows=dst_of_out[s_rows[keep]], ls_cols=s_cols[keep], ls_t=t_of_out[s_rows[keep]],
        out_sel=out_sel, out_port=row_to_port[s_rows[out_sel]],
    )


def _solve_blocks(plan: _Plan, T: np.ndarray, inputs: np.ndarray, out: np.ndarray) -> None:
    """Solve a chunk of blocks; ``T`` is (B, n_tbus, 4); writes ``out`` (B, n_ports, n_inputs)."""
    import scipy.sparse as sp  # lazily: only this fallback needs it
    from scipy.sparse.linalg import splu

    batch, m = T.shape[0], plan.m
    s_vals = T[:, plan.s_tbu, plan.s_elem]  # (B, 8n)
    ls_vals = -plan.ls_t[None, :] * s_vals[:, plan.keep]
    offsets = (np.arange(batch) * m)[:, None]
    diag = (offsets + np.arange(m)).ravel()
    rows = np.concatenate([diag, (offsets + plan.ls_rows).ravel()])
    cols = np.concatenate([diag, (offsets + plan.ls_cols).ravel()])
    vals = np.concatenate([np.ones(batch * m, dtype=complex), ls_vals.ravel()])
    A = sp.csc_matrix((vals, (rows, cols)), shape=(batch * m, batch * m))
    rhs = np.zeros((batch * m, len(inputs)), dtype=complex)
    rhs[(offsets + plan.port_tbu_ports[inputs][None, :]).ravel(),
        np.tile(np.arange(len(inputs)), batch)] = 1.0
    a = splu(A, permc_spec="MMD_AT_PLUS_A").solve(rhs).reshape(batch, m, len(inputs))
    # Outgoing wave at each mesh port: y = (S a) at the port's TBU port.
    out[...] = 0.0
    np.add.at(out, (slice(None), plan.out_port),
              s_vals[:, plan.out_sel, None] * a[:, plan.s_cols[plan.out_sel], :])


def power_db(field: np.ndarray, floor_db: float = -200.0) -> np.ndarray:
    """Power of a field in dB (relative to unit input), floored to stay finite."""
    return np.maximum(10 * np.log10(np.maximum(np.abs(field) ** 2, 1e-300)), floor_db)
