"""Nested-dissection circuit solve: merge sub-networks, keep only their ports.

The TBUs are split recursively in two along the longer side of their bounding box (a
fixed, geometry-based nested-dissection order computed once per mesh). Bottom-up, the
scattering matrices of the two halves of every split are joined across the links that
cross the cut: with ``A`` and ``B`` the two halves, ``c`` their ports on the cut links
(link transmission ``t`` folded into the rows of ``A_c*`` and ``B_c*``) and ``e`` the
ports kept, the waves entering ``A`` on the cut are

    i_A = (I - B_cc A_cc)^-1 [B_cc A_ce, B_ce] [x_A; x_B],   i_B = [A_ce, 0] x + A_cc i_A

and the merged matrix is ``[[A_ee, 0], [0, B_ee]] + [[A_ec i_A], [B_ec i_B]]``. That is
exactly the Schur complement of the link unknowns of the cut, eliminated in an order that
keeps every dense block small (the largest is cut-size x port-count). The root of the
tree is the port-to-port matrix itself: no internal wave is ever solved for.

Every sub-network is reciprocal (each TBU's ``S = [[0, T.T], [T, 0]]`` and each link
are), so its matrix is symmetric: ``A_ec = A_ce.T``, and a merge forms only the upper
triangle of its matrix and mirrors it (:func:`photonics.circuit_kernels._merge`).

Execution. This module builds the plan once per mesh: every node's matrix has a place in
one flat arena per (state, wavelength) block (a TBU's 4x4 at ``16 * tbu``, then every
merge's ``ne x ne``, row-major, children before parents), and a merge table says where
each merge reads its halves and which of their ports are cut or kept. The compiled
kernels (:mod:`photonics.circuit_kernels`, numba) run the whole tree one block at a time,
each merge's gather, products and adds fused, so a block's few hundred kB stay in the
core's cache from the leaves to the root. The full solve runs a second merge table over a
compact arena (:func:`_compact`: a matrix's space is reused once its parent has merged it),
one per thread, from the heater phases to the port matrices in one compiled call per chunk
(:func:`solve_phases`); :class:`~photonics.circuit_solver.CircuitSolver` keeps an arena per
wavelength in the plan's own layout and re-runs only the merges above the TBUs that changed
(:func:`ancestors`).

Passive networks make every ``I - B_cc A_cc`` well conditioned unless the whole circuit
is (a lossless closed loop exactly on resonance), so the cut is eliminated without
pivoting: each pivot step is the same kind of round-trip matrix for a smaller cut. A
non-finite result sends the caller to sparse LU.

numba is imported when the first merge runs (:func:`_kernels`), not with this module: a
command that never solves does not pay for loading the compiler.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from photonics.merge_layout import LANES, LEAF_SIZE
from photonics.topology import Mesh


@dataclass(frozen=True)
class MergePlan:
    """A mesh's merge tree, compiled to a merge table the kernels read (cached per mesh).

    Nodes are numbered children first (a post-order of the bisection tree); the merges
    are the nodes that are not TBUs, in the same order, so running them in table order
    always finds both halves already merged.
    """

    n_tbus: int
    n_ports: int
    size: int  # arena entries per (state, wavelength) block
    merges: np.ndarray  # (n_merges, 9) merge table (photonics.circuit_kernels' columns)
    pool: np.ndarray  # per merge: A cut, B cut, A kept, B kept (local ports), cut links
    work_size: int  # complex temporaries of the largest merge
    out_idx: np.ndarray  # (n_ports, n_ports) arena position of S[port, port]
    parent: np.ndarray  # (n_nodes,) parent node of every node (-1 at the root)
    node_merge: np.ndarray  # (n_nodes,) row of a merge node in ``merges`` (-1 for a TBU)
    leaf_node: np.ndarray  # (n_tbus,) tree node of every TBU
    node_off: np.ndarray  # (n_nodes,) arena offset of every node's matrix
    solve_merges: np.ndarray  # the merge table the full solve runs: the same merges, every node's matrix
    # in a compact arena where a matrix's space is reused once its parent has merged it (:func:`_compact`)
    solve_size: int  # arena entries of the full solve's compact arena
    solve_out_idx: np.ndarray  # (n_ports, n_ports) position of S[port, port] in the compact arena
    solve_args: tuple[int, ...]  # the compiled call's arguments for solve_merges and pool (pointers, sizes)
    node_ports: tuple[np.ndarray, ...] = field(repr=False)  # ports of every node (global TBU-port ids)
    above: np.ndarray = field(repr=False)  # (n_tbus, n_merges) bool: merge m lies on TBU t's path

    @property
    def n_merges(self) -> int:
        """Merges in the tree (one fewer than the TBUs)."""
        return len(self.merges)


_PLANS: weakref.WeakKeyDictionary[Mesh, MergePlan | None] = weakref.WeakKeyDictionary()


def merge_plan(mesh: Mesh) -> MergePlan | None:
    """The cached merge plan of ``mesh``, or None when the method does not apply."""
    if mesh not in _PLANS:
        _PLANS[mesh] = _build_plan(mesh)
    return _PLANS[mesh]


def _bisect(tbus: np.ndarray, centers: np.ndarray, tbu_links: np.ndarray) -> dict:
    """Recursive bisection: at each split, the straight cut (along x or y, near the
    middle) that crosses the fewest links; ``tbu_links`` is (n_links, 2) TBU pairs.
    """
    if len(tbus) == 1:
        return {"tbus": tbus, "children": ()}
    xy = centers[tbus]
    inside = np.zeros(len(centers), dtype=bool)
    inside[tbus] = True
    links = tbu_links[inside[tbu_links[:, 0]] & inside[tbu_links[:, 1]]]
    n = len(tbus)
    best = None
    for axis in (0, 1):
        order = np.lexsort((xy[:, 1 - axis], xy[:, axis]))
        rank = np.empty(len(centers), dtype=np.int64)
        rank[tbus[order]] = np.arange(n)
        lo, hi = np.sort(rank[links], axis=1).T if len(links) else (np.zeros(0), np.zeros(0))
        for half in range(max(1, (2 * n) // 5), max(2, n - (2 * n) // 5 + 1)):
            if half >= n:
                continue
            cut = int(((lo < half) & (hi >= half)).sum())
            key = (cut, abs(2 * half - n), axis)
            if best is None or key < best[0]:
                best = (key, order, half)
    _, order, half = best
    return {"tbus": tbus, "children": (_bisect(tbus[order[:half]], centers, tbu_links),
                                       _bisect(tbus[order[half:]], centers, tbu_links))}


@dataclass
class _Node:
    """Plan-time view of a tree node."""

    ports: list[int]  # global TBU-port ids
    children: tuple[_Node, ...] = ()
    tbu: int = -1
    off: int = -1  # arena offset of its matrix
    id: int = -1


def _tree(node: dict, nodes: list[_Node]) -> _Node:
    """The bisection tree as nodes, appended children first."""
    if not node["children"]:
        t = int(node["tbus"][0])
        out = _Node(ports=[4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3], tbu=t, off=LEAF_SIZE * t)
    else:
        out = _Node(ports=[], children=tuple(_tree(c, nodes) for c in node["children"]))
    out.id = len(nodes)
    nodes.append(out)
    return out


def _cut(a: _Node, b: _Node, peer: np.ndarray) -> tuple[list[int], list[int], list[int], list[int]]:
    """Local indices of the halves' ports: A's cut, B's matching cut, A's kept, B's kept."""
    pos_b = {g: i for i, g in enumerate(b.ports)}
    ca = [i for i, g in enumerate(a.ports) if peer[g] in pos_b]
    cb = [pos_b[int(peer[a.ports[i]])] for i in ca]
    sa, sb = set(ca), set(cb)
    return (ca, cb, [i for i in range(len(a.ports)) if i not in sa],
            [i for i in range(len(b.ports)) if i not in sb])


def _work_size(k: int, ea: int, eb: int) -> int:
    """Temporaries of one merge (photonics.circuit_kernels._merge): A_c, X, B_t, the
    eliminated system and V_B.
    """
    return k * (k + ea) + k * k + k * eb + k * (k + ea + eb) + k * eb


def _build_plan(mesh: Mesh) -> MergePlan | None:
    n = mesh.n_tbus
    if (mesh.links[:, 0] // 4 == mesh.links[:, 1] // 4).any():
        return None  # a TBU looped onto itself: never cut, so never joined here
    peer = np.full(4 * n, -1)
    link_of = np.full(4 * n, -1)
    peer[mesh.links[:, 0]], peer[mesh.links[:, 1]] = mesh.links[:, 1], mesh.links[:, 0]
    link_of[mesh.links[:, 0]] = link_of[mesh.links[:, 1]] = np.arange(mesh.n_links)
    nodes: list[_Node] = []
    root = _tree(_bisect(np.arange(n), mesh.tbu_centers(), mesh.links // 4), nodes)
    rows: list[list[int]] = []
    pool: list[int] = []
    node_merge = np.full(len(nodes), -1)
    off, joined, work = LEAF_SIZE * n, 0, 0
    for nd in nodes:  # children first
        if not nd.children:
            continue
        a, b = nd.children
        ca, cb, ea, eb = _cut(a, b, peer)
        joined += len(ca)
        nd.ports = [a.ports[i] for i in ea] + [b.ports[i] for i in eb]
        nd.off = off
        off += len(nd.ports) ** 2
        node_merge[nd.id] = len(rows)
        rows.append([nd.off, a.off, len(a.ports), b.off, len(b.ports), len(ca), len(ea), len(eb), len(pool)])
        pool += ca + cb + ea + eb + [int(link_of[a.ports[i]]) for i in ca]
        work = max(work, _work_size(len(ca), len(ea), len(eb)))
    if joined != mesh.n_links:
        return None
    slot = {g: i for i, g in enumerate(root.ports)}
    if any(int(g) not in slot for g in mesh.port_tbu_ports):
        return None
    slots = np.array([slot[int(g)] for g in mesh.port_tbu_ports], dtype=np.int64)
    parent = np.full(len(nodes), -1)
    leaf_node = np.full(n, -1)
    for nd in nodes:
        for c in nd.children:
            parent[c.id] = nd.id
        if nd.tbu >= 0:
            leaf_node[nd.tbu] = nd.id
    p = len(root.ports)
    merges = np.array(rows, dtype=np.int64).reshape(-1, 9)
    solve_merges, solve_size = _compact(merges, LEAF_SIZE * n)
    pool_arr = np.array(pool, dtype=np.int64)
    from photonics.kernel_loader import array_pointer as ptr  # no compiler: ctypes only
    out_idx = root.off + slots[:, None] * p + slots[None, :]
    above = np.zeros((n, len(rows)), dtype=bool)
    for t in range(n):
        node = leaf_node[t]
        while parent[node] >= 0:
            node = parent[node]
            above[t, node_merge[node]] = True
    return MergePlan(
        n_tbus=n, n_ports=mesh.n_ports, size=off, merges=merges, pool=pool_arr,
        work_size=work, out_idx=out_idx, parent=parent, node_merge=node_merge, leaf_node=leaf_node,
        node_off=np.array([nd.off for nd in nodes], dtype=np.int64), solve_merges=solve_merges,
        solve_size=solve_size,  # (one TBU alone: no merge, the root is its leaf)
        solve_out_idx=out_idx - root.off + (solve_merges[-1, 0] if rows else root.off),
        solve_args=(ptr(solve_merges), len(solve_merges), ptr(pool_arr), len(pool_arr)),
        node_ports=tuple(np.array(nd.ports, dtype=np.int64) for nd in nodes), above=above,
    )


def _compact(merges: np.ndarray, leaves: int) -> tuple[np.ndarray, int]:
    """``merges`` with every merge's output moved into a compact arena, and its size (entries).

    The plan's own layout gives every node's matrix a place of its own (the incremental solver
    and the gradient keep them all), 147 kB a block on smartlight, 307 kB on hex:6x6 (eight
    times that for the 8-lane build): beyond the core's L2 cache at eight lanes. A full solve
    needs a node's matrix only until its parent has merged it, so here each merge's output
    takes the first free stretch (first fit, merges in table order) that holds it, and its
    halves' stretches are freed once it is written (never before: the merge reads its halves
    while it writes). The TBUs' matrices stay where the kernels fill them (``16 * tbu``).
    smartlight then needs 5,024 entries instead of 9,408, hex:6x6 8,024 instead of 19,652.
    Only where the numbers live changes, never an operation: the same bytes.
    """
    table = merges.copy()
    free: list[tuple[int, int]] = []  # (start, size), ascending, never adjacent
    top = leaves
    placed: dict[int, int] = {}  # a merge output's offset in the plan's layout -> in the compact one

    def take(size: int) -> int:
        nonlocal top
        for i, (start, room) in enumerate(free):
            if room >= size:
                free[i:i + 1] = [(start + size, room - size)] if room > size else []
                return start
        top += size
        return top - size

    def give(start: int, size: int) -> None:
        free.append((start, size))
        free.sort()
        joined: list[tuple[int, int]] = []
        for a, z in free:
            if joined and joined[-1][0] + joined[-1][1] == a:
                joined[-1] = (joined[-1][0], joined[-1][1] + z)
            else:
                joined.append((a, z))
        free[:] = joined

    out, a_off, a_p, b_off, b_p, ea, eb = 0, 1, 2, 3, 4, 6, 7  # merge-table columns (circuit_kernels')
    for row in table:
        ne = int(row[ea] + row[eb])
        new = take(ne * ne)  # while both halves still hold their place
        placed[int(row[out])] = new
        row[out] = new
        for off, ports in ((a_off, a_p), (b_off, b_p)):
            if row[off] >= leaves:  # a merge's output (a TBU stays at 16 * tbu)
                row[off] = placed[int(row[off])]
                give(int(row[off]), int(row[ports]) ** 2)
    return table, top


def merge_macs(plan: MergePlan) -> int:
    """Complex multiply-adds per (state, wavelength) block, as the kernel does them.

    Per merge (:func:`photonics.circuit_kernels._merge`): ``X [A_cc, A_ce]`` (k^2 (k+ea)),
    Gauss-Jordan on the k x (k + ne) system (step j touches k rows of k + ne - 1 - j
    columns), the upper triangle of the A rows (k per entry), ``V_B = A_cc W_B``
    (k^2 eb) and the upper triangle of the B-B block (k per entry).
    """
    k, ea, eb = (plan.merges[:, c] for c in (5, 6, 7))
    ne = ea + eb
    gj = k * (k * (k + ne - 1) - k * (k - 1) // 2)
    top = k * (ea * ne - ea * (ea - 1) // 2)
    return int(np.sum(k * k * (k + ea) + gj + top + k * k * eb + k * (eb * (eb + 1) // 2)))


def _kernels() -> dict:
    """The compiled kernels (:mod:`photonics.kernel_loader`), loaded on first use."""
    from photonics.kernel_loader import kernels

    return kernels()


_SCRATCH = threading.local()  # per thread: the full solve's arena and every merge's temporaries


def _scratch(name: str, rows: int, lanes: int = LANES) -> np.ndarray:
    """The calling thread's float buffer ``name`` of (rows, lanes) (reused: a fresh one
    costs a page fault per 4 kB on every call). Contents are whatever the last user left.
    """
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    buf = bufs.get((name, lanes))
    if buf is None or buf.shape[0] < rows:
        buf = bufs[(name, lanes)] = np.empty((max(rows, 1), lanes))
    return buf


def lanes_for(batch: int) -> int:
    """Lanes of the kernel build that merges ``batch`` blocks: one block alone runs the
    one-lane build (the ``LANES``-lane build would compute empty lanes beside it).
    """
    return 1 if batch == 1 else LANES


def _kernel(name: str, lanes: int) -> Callable:
    """Kernel ``name`` of the ``lanes``-lane build (looked up once: a one-wavelength solve
    is a fraction of a millisecond, and an import statement per call shows in it).
    """
    fn = _BY_NAME.get((name, lanes))
    if fn is None:
        from photonics.kernel_loader import entry_name

        fn = _BY_NAME[(name, lanes)] = _kernels()[entry_name(name, lanes)]
    return fn


_BY_NAME: dict[tuple[str, int], Callable] = {}


def solve_merge(plan: MergePlan, T: np.ndarray, t_link: np.ndarray, inputs: np.ndarray | None,
                out: np.ndarray) -> bool:
    """Port matrices of a batch into ``out`` (B, n_ports, n_inputs); ``T`` is (B, n_tbus, 4);
    ``inputs`` None for every port in order (the root's positions are then read as they are,
    without gathering a copy of them on every call).

    Returns whether every entry is finite (else the caller falls back to sparse LU).
    """
    lanes = lanes_for(T.shape[0])
    re, im, wr, wi, *_ = _solve_scratch(plan, lanes)
    return bool(_kernel("solve_blocks", lanes)(
        np.ascontiguousarray(T, dtype=complex), np.ascontiguousarray(t_link, dtype=complex),
        plan.solve_merges, plan.pool, re, im, wr, wi,
        plan.solve_out_idx if inputs is None else np.ascontiguousarray(plan.solve_out_idx[:, inputs]), out))


class ChipArgs(NamedTuple):
    """What :func:`solve_phases` reads of a chip at a set of wavelengths, besides the heater
    phases: the transfer kernel's constants (``scale`` (W,), ``amp_top``, ``amp_bot`` (n,),
    ``c_top``, ``c_bot``, ``t2t1``, ``s2s1``, ``t2s1``, ``s2t1`` (W, n), C-contiguous floats:
    :func:`photonics.circuit.transfer_constants`), the link transmissions ``t_link``, and the
    compiled call's arguments for them (pointers and sizes: :func:`chip_args`), made once with
    the arrays, which this tuple keeps alive.
    """

    consts: tuple[np.ndarray, ...]
    t_link: np.ndarray
    head: tuple[int, ...]
    tail: tuple[int, int]


def chip_args(consts: tuple[np.ndarray, ...], t_link: np.ndarray) -> ChipArgs:
    """:class:`ChipArgs` of ``consts`` (the nine arrays, in :class:`ChipArgs`' order) and
    ``t_link``.
    """
    from photonics.kernel_loader import array_pointer as ptr

    t_link = np.ascontiguousarray(t_link, dtype=complex)
    scale, *rest = consts
    return ChipArgs(tuple(consts), t_link, (ptr(scale), len(scale), *map(ptr, rest)),
                    (ptr(t_link), len(t_link)))


def solve_phases(plan: MergePlan, chip: ChipArgs, top: np.ndarray, bot: np.ndarray, start: int,
                 inputs: np.ndarray | None, out: np.ndarray) -> bool:
    """Blocks ``start .. start + B`` (state-major: block ``s W + w``; ``B = len(out)``) of a solve,
    from the heater phases to the port matrices, in ONE compiled call (``solve_phases`` of
    :mod:`photonics.circuit_kernels`): each group's forward matrices into the calling thread's
    scratch (one group's, reused: nothing batch-long besides ``out`` is written), the merges, the
    root into ``out`` (B, n_ports, n_inputs). ``top``/``bot``: heater phases (S, n_tbus),
    C-contiguous floats; ``inputs`` None for every port in order.

    At one wavelength the arithmetic is a tenth of a millisecond and each numpy call, foreign
    call and argument conversion around it a microsecond or more, so everything that stays put
    is converted once: the chip's arrays (:class:`ChipArgs`), the plan's (``solve_args``),
    the calling thread's arenas (:func:`_solve_scratch`). Returns whether every entry is finite
    (else the caller falls back to sparse LU, computing the forward matrices again).
    """
    lanes = 1 if out.shape[0] == 1 else LANES
    fn = _kernel("solve_phases", lanes)
    re, im, wr, wi, T, scratch, t_ptr = _solve_scratch(plan, lanes)
    pos = plan.solve_out_idx if inputs is None else np.ascontiguousarray(plan.solve_out_idx[:, inputs])
    c = getattr(fn, "c", None)
    if c is None:  # numba's dispatcher (the loader fell back): the same kernel, given the arrays (T's
        # first lanes x n_tbus x 4 entries, as the compiled call's pointer reads them)
        T = T.reshape(-1)[:lanes * plan.n_tbus * 4].reshape(lanes, plan.n_tbus, 4)
        return bool(fn(top, bot, *chip.consts, start, T, chip.t_link, plan.solve_merges, plan.pool, re, im,
                       wr, wi, pos, out))
    ptr = _pointer()
    return bool(c(ptr(top), ptr(bot), top.shape[0], top.shape[1], *chip.head, start, t_ptr, out.shape[0],
                  *chip.tail, *plan.solve_args, *scratch, ptr(pos), pos.shape[0], pos.shape[1], ptr(out)))


def packed_kernel() -> Callable | None:
    """The one-block solve over packed arguments (``solve_packed_1`` of
    :mod:`photonics.kernel_loader`: ``fn(args' pointer, phi_top, phi_bot, out) -> int``, the three
    arrays C-contiguous ndarrays, passed as they are), or None where the kernels run through numba's
    dispatcher (the loader fell back) or an array object's data pointer is not where
    :func:`data_word` looks for it.
    """
    if data_word() is None:
        return None
    return _kernels().get("solve_packed_1")


def pack_one_block(plan: MergePlan, chip: ChipArgs, pos: np.ndarray) -> tuple[np.ndarray, int, tuple]:
    """The calling thread's packed arguments of a one-block :func:`solve_phases` (one state at
    one wavelength; ``pos`` the root's arena positions, C-contiguous int64, kept alive by the
    caller, as ``plan`` and ``chip``): ``(args, args' pointer, arenas)``, ``args`` the int64
    array :func:`packed_kernel` reads (the compiled ``solve_phases``' 33 arguments in their
    order, the phases' and output's slots 0 but the first, which holds :func:`data_word`),
    ``arenas`` the thread's :func:`_solve_scratch` they point into, which the caller keeps with
    ``args``: a larger plan solved later in the thread replaces the thread's arenas, and ``args``
    then still points into live memory of this plan's size (used by this thread only), so no
    check per call is needed.
    """
    ptr = _pointer()
    got = _solve_scratch(plan, 1)
    *_, scratch, t_ptr = got
    args = np.array((data_word(), 0, 1, plan.n_tbus, *chip.head, 0, t_ptr, 1, *chip.tail, *plan.solve_args,
                     *scratch, ptr(pos), pos.shape[0], pos.shape[1], 0), dtype=np.int64)
    return args, ptr(args), got


@functools.cache
def data_word() -> int | None:
    """The 8-byte word of a numpy array object that holds its data pointer, found by looking, or
    None where it is not found (then :class:`~photonics.circuit.PreparedSolve` converts pointers
    instead). numpy's ``PyArrayObject`` starts with CPython's object header, then ``char *data``:
    word 2 on CPython's 64-bit builds (a free-threaded build's header is longer). The packed
    kernel reads it there, so a one-wavelength call passes its arrays as they are, without a
    buffer export each (docs/physics.md, "One wavelength").
    """
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None  # id() is an object's address only in CPython
    probes = (np.empty(3), np.zeros((2, 5), complex), np.arange(4.0)[1:])
    for word in range(2, _HEADER_WORDS_MAX + 1):
        if all(ctypes.c_int64.from_address(id(a) + 8 * word).value == a.ctypes.data for a in probes):
            return word
    return None


_HEADER_WORDS_MAX = 6  # the longest object header looked past: a free-threaded CPython's is 4 words


def _pointer() -> Callable[[np.ndarray], int]:
    """:func:`photonics.kernel_loader.array_pointer` (looked up once, as :func:`_kernel`)."""
    if not _POINTER:
        from photonics.kernel_loader import array_pointer

        _POINTER.append(array_pointer)
    return _POINTER[0]


_POINTER: list[Callable[[np.ndarray], int]] = []


def _solve_scratch(plan: MergePlan, lanes: int) -> tuple:
    """The calling thread's arenas for the full solve, at least ``plan``'s compact arena and
    temporaries, and one group's forward matrices: ``(re, im, wr, wi, T, args, t_ptr)``, ``args``
    the arenas' pointers and row counts for the compiled call, ``t_ptr`` ``T``'s pointer. Kept
    apart from :func:`_scratch`'s (whose buffers the gradient may replace with larger ones), so
    the pointers made once stay valid.
    """
    kept = getattr(_SCRATCH, "solve", None)
    if kept is None:
        kept = _SCRATCH.solve = {}
    got = kept.get(lanes)
    if (got is None or got[0].shape[0] < plan.solve_size or got[2].shape[0] < plan.work_size
            or got[4].shape[1] < plan.n_tbus):
        from photonics.kernel_loader import array_pointer as ptr

        size = max(plan.solve_size, got[0].shape[0] if got else 0)
        work = max(plan.work_size, got[2].shape[0] if got else 0)
        n_tbus = max(plan.n_tbus, got[4].shape[1] if got else 0)
        re, im, wr, wi = np.empty((size, lanes)), np.empty((size, lanes)), np.empty((work, lanes)), \
            np.empty((work, lanes))
        T = np.empty((lanes, n_tbus, 4), dtype=complex)  # the kernel reads n_tbus of a row's TBUs
        got = kept[lanes] = (re, im, wr, wi, T, (ptr(re), ptr(im), size, ptr(wr), ptr(wi), work), ptr(T))
    return got


class Arenas(NamedTuple):
    """Every node's matrix for ``batch`` blocks, kept between calls: real and imaginary
    parts (groups, entries, lanes), block ``b`` in lane ``b % lanes`` of group ``b // lanes``
    (``lanes``: :func:`lanes_for` the batch).
    """

    re: np.ndarray
    im: np.ndarray
    batch: int


def new_arenas(plan: MergePlan, batch: int) -> Arenas:
    """Kept arenas for :func:`remerge` (zero: lanes past the batch stay finite)."""
    lanes = lanes_for(batch)
    groups = -(-batch // lanes)
    return Arenas(np.zeros((groups, plan.size, lanes)), np.zeros((groups, plan.size, lanes)), batch)


def remerge(plan: MergePlan, arenas: Arenas, T: np.ndarray, tbus: np.ndarray,
            t_link: np.ndarray, merges: np.ndarray | None = None) -> None:
    """Write the forward matrices ``T`` (B, len(tbus), 4) of ``tbus`` into every block's
    arena and re-run ``merges`` (merge-table rows, ascending: children first; all when
    None). Every entry a merge writes is the same as a full solve's.
    """
    order = np.arange(plan.n_merges) if merges is None else np.asarray(merges, dtype=np.int64)
    lanes = arenas.re.shape[2]
    _kernel("remerge_blocks", lanes)(
        np.ascontiguousarray(T, dtype=complex), np.ascontiguousarray(tbus, dtype=np.int64),
        np.ascontiguousarray(t_link, dtype=complex), plan.merges, plan.pool, order, arenas.re,
        arenas.im, _scratch("wr", plan.work_size, lanes), _scratch("wi", plan.work_size, lanes))


def _read(arenas: Arenas, idx: np.ndarray) -> np.ndarray:
    """Arena entries ``idx`` (any shape) of every block: (batch, *idx.shape)."""
    if arenas.batch == 1:  # one wavelength (a simulated chip's reading): lane 0 of group 0
        one = np.empty((1, *idx.shape), dtype=complex)
        one.real[0] = arenas.re[0, idx, 0]
        one.imag[0] = arenas.im[0, idx, 0]
        return one
    out = np.empty((arenas.re.shape[0], arenas.re.shape[2], *idx.shape), dtype=complex)
    out.real = np.moveaxis(arenas.re[:, idx], -1, 1)  # (groups, LANES, *idx.shape): exactly the
    out.imag = np.moveaxis(arenas.im[:, idx], -1, 1)  # kernel's parts, as solve_blocks writes them
    return out.reshape(-1, *idx.shape)[: arenas.batch]


def ancestors(plan: MergePlan, tbus: np.ndarray) -> np.ndarray:
    """Merge-table rows of every merge above the TBUs ``tbus`` (their paths to the root),
    ascending (children first).
    """
    return np.flatnonzero(plan.above[np.asarray(tbus, dtype=np.int64)].any(axis=0))


def root_matrix(plan: MergePlan, arenas: Arenas, inputs: np.ndarray) -> np.ndarray:
    """Port matrices (B, n_ports, n_inputs) read from solved arenas."""
    return _read(arenas, plan.out_idx[:, inputs])


def node_matrix(plan: MergePlan, node: int, arenas: Arenas) -> tuple[np.ndarray, np.ndarray]:
    """A tree node's matrix (B, p, p) read from solved arenas, and its ports."""
    ports = plan.node_ports[node]
    p = len(ports)
    return _read(arenas, plan.node_off[node] + np.arange(p * p).reshape(p, p)), ports


def join_plan(pa: np.ndarray, pb: np.ndarray, peer: np.ndarray) -> tuple[np.ndarray, ...]:
    """Index arrays to join sub-networks with ports ``pa`` and ``pb`` (global TBU-port ids)
    across every link between them: (cut of A, matching cut of B, kept of A, kept of B,
    ports of the result: A's kept, then B's kept).
    """
    pos_b = {int(g): i for i, g in enumerate(pb)}
    ca = np.array([i for i, g in enumerate(pa) if int(peer[g]) in pos_b], dtype=np.int64)
    cb = np.array([pos_b[int(peer[pa[i]])] for i in ca], dtype=np.int64)
    ea = np.setdiff1d(np.arange(len(pa)), ca)
    eb = np.setdiff1d(np.arange(len(pb)), cb)
    return ca, cb, ea, eb, np.concatenate([pa[ea], pb[eb]])


def join(a: np.ndarray, b: np.ndarray, jp: tuple[np.ndarray, ...], t_port: np.ndarray,
         pa: np.ndarray) -> np.ndarray:
    """Join two sub-networks across every link between them: the same Schur complement as
    a merge, for dense batch-first matrices a (B, na, na), b (B, nb, nb); ``jp`` from
    :func:`join_plan`, ``pa`` A's ports and ``t_port`` the link transmission at each port.
    The result's ports are ``jp[4]``.
    """
    ca, cb, ea, eb, _ = jp
    k, na = len(ca), len(ea)
    t = t_port[pa[ca]][None, :, None]
    a_c, a_e = a[:, ca], a[:, ea]
    b_c, b_e = b[:, cb], b[:, eb]
    acc, ace, aec, aee = a_c[:, :, ca] * t, a_c[:, :, ea] * t, a_e[:, :, ca], a_e[:, :, ea]
    bcc, bce, bec, bee = b_c[:, :, cb] * t, b_c[:, :, eb] * t, b_e[:, :, cb], b_e[:, :, eb]
    out = np.zeros((a.shape[0], na + len(eb), na + len(eb)), dtype=complex)
    out[:, :na, :na] = aee
    out[:, na:, na:] = bee
    if k:
        g = np.eye(k) - bcc @ acc
        w = np.linalg.solve(g, np.concatenate([bcc @ ace, bce], axis=2))
        ib = acc @ w
        ib[:, :, :na] += ace
        out[:, :na] += aec @ w
        out[:, na:] += bec @ ib
    return out
