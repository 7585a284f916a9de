"""Batched nested-dissection circuit solve: merge sub-networks, keep only their ports.

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
are), so its matrix is symmetric: ``A_ec = A_ce.T``, and a merge forms only its A rows
``[A_ee, 0] + A_ce.T W`` and its B-B block, never the transposed B-A block (see
:func:`_merge_first` for the algebra; about a quarter fewer multiply-adds).

Execution. Merges are grouped by height (a merge runs as soon as both halves exist), and
every merge of one group, for every (state, wavelength) block, is one padded numpy call.
Results live in two flat "arenas" that every later merge gathers its halves from, so a
TBU is never copied up the tree: a leaf's scattering entries are read straight from the
rows of its transfer matrix. Each merge fetches its cut blocks with one ``take`` (laid
out at plan time so the link scaling is one contiguous multiply) and its kept blocks with
another, and writes its products into the arena (batch-last: then adds its kept blocks
there; batch-first: one flat add of the kept blocks); its temporaries are reused from call
to call (fresh ones cost a page fault per 4 kB). During a merge numpy's ufunc buffer is
held small (:data:`_UFUNC_BUFSIZE`).

* Small merges run *batch-last*: an arena row per matrix entry, the (merge, block) pairs
  contiguous along it, so each elementwise product is one long vector loop and the cut
  inverses are closed forms (one or two links) or Gauss-Jordan on whole rows. A height is
  split into groups where padding to a common shape would cost more than a group's calls.
  Joins of two TBUs across one link are a single outer product (their ``A_cc`` is zero).
* Large merges run *batch-first*: a (block, merge, row, column) stack whose products go
  to ``np.matmul`` (about 0.5 ns per complex multiply-add on one core here), with the cut
  inverted in closed form, by Gauss-Jordan over the stack (three links) or by LAPACK,
  :data:`_FIRST_SUB` blocks at a time.

Passive networks make every ``I - B_cc A_cc`` well conditioned unless the whole circuit
is (a lossless closed loop exactly on resonance), so the inverses need no pivoting: each
pivot step is the same kind of round-trip matrix for a smaller cut. A non-finite result
sends the caller to sparse LU.

The plan's tree (``parent``, ``nodes``, :func:`run_levels` with ``only``) lets
:mod:`photonics.circuit_solver` re-merge only the path from a changed TBU to the root.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from photonics.topology import Mesh

_FIRST_MIN_NE = 17  # merged nodes with at least this many ports run batch-first (matmul wins)
_GROUP_JOIN_ENTRIES = 64  # padded entries per block that cost about one group's numpy calls
_LAPACK_MAX_COUNT = 16  # up to this many cut matrices, one LAPACK call inverts them with
# fewer numpy calls than Gauss-Jordan over the stack
_GJ_MAX_K = 3  # batch-first cuts of up to this many links are inverted by Gauss-Jordan over
# the stack (3 links, 512 matrices: 0.25 ms vs LAPACK's 0.5 ms); at 6 links the two tie
_UFUNC_BUFSIZE = 512  # numpy's ufunc buffer (elements) during a merge: with numpy's default
# (8192) its iterator copies the strided batch-last operands through buffers; at 512 a
# 128-block smartlight solve runs 16% fewer instructions (callgrind, 643k -> 538k per block)
_BUFSIZE_MIN_BATCH = 16  # below this many blocks the vectors are too short to be buffered
_FIRST_SUB = 64  # (state, wavelength) blocks per batch-first pass: its gathers, products and
# outputs then stay in a core's L2 cache (1 MB here) instead of streaming each level from L3


@dataclass(frozen=True)
class _Level:
    """Every merge of one height, padded to a common shape.

    Batch-last levels gather with ``idx_*`` of shape (rows, cols, M) from the batch-last
    arena and write (ne, ne, M) entries at ``base``; batch-first levels gather with shape
    (M, rows, cols) from the batch-first arena and write (M, ne, ne) at ``base``.
    """

    first: bool
    n_merge: int
    k: int  # cut size (links joined per merge, padded)
    ea: int  # ports kept from the first half (padded)
    ne: int  # ports of a merged node (padded)
    base: int  # arena offset of the level's output
    idx_a: np.ndarray  # half A as [cut, kept] x [cut, kept] arena positions
    idx_b: np.ndarray
    link: np.ndarray  # (k, M) link index of each cut row, -1 on padding
    shapes: np.ndarray  # (M, 3) unpadded (cut, kept from A, kept from B) of every merge
    zero: int = -1  # the arena's zero entry
    cut_idx: np.ndarray | None = None  # the cut blocks' arena positions (see _first_level)
    base_idx: np.ndarray | None = None  # batch-first: blockdiag(A_ee, B_ee) in the stored
    # layout; batch-last: A_ee's then B_ee's positions only (added in place, no zero block)
    leaves: bool = False  # every merge joins two TBUs across one link: A_cc = B_cc = 0
    scale_links: np.ndarray | None = None  # (2, ...) links whose transmissions multiply each
    # scaled cut entry (X = T B_cc T, B_t = T B_ce): indices into t_ext, ONE for "no link"

    @property
    def out_size(self) -> int:
        """Arena entries the level writes."""
        return self.n_merge * self.stored

    @property
    def stored(self) -> int:
        """Arena entries per merge: ``[A rows, all columns]`` and ``[B rows, B columns]``
        only (the matrix is symmetric, see :func:`_sym_pos`).
        """
        eb = self.ne - self.ea
        return self.ea * self.ne + eb * eb


@dataclass(frozen=True)
class MergePlan:
    """A mesh's merge tree, compiled to index arrays (cached per mesh)."""

    levels: tuple[_Level, ...]  # lowest first; the last holds one merge, the root
    n_tbus: int
    last_size: int  # batch-last arena rows: 4 n_tbus transfer entries, zero, outputs
    last_zero: int
    handoff: np.ndarray  # batch-last rows the batch-first levels read, in column order
    first_size: int  # batch-first arena columns: handoff, zero, outputs
    out_idx: np.ndarray  # (n_ports, n_ports) arena position of S[port, port]
    out_first: bool  # whether ``out_idx`` points into the batch-first arena
    n_ports: int
    parent: np.ndarray  # (n_nodes,) parent node of every node (-1 at the root)
    node_level: np.ndarray  # (n_nodes,) level of a merge node (-1 for a TBU)
    node_slot: np.ndarray  # (n_nodes,) index of a merge within its level
    leaf_node: np.ndarray  # (n_tbus,) tree node of every TBU
    nodes: tuple[tuple[bool, np.ndarray, np.ndarray], ...]  # per node: (batch-first, arena
    # positions (p, p) of its matrix, its ports as global TBU-port ids, -1 on padding)


_PLANS: weakref.WeakKeyDictionary[Mesh, dict[bool, MergePlan | None]] = weakref.WeakKeyDictionary()


def merge_plan(mesh: Mesh, all_first: bool = False) -> MergePlan | None:
    """The cached merge plan of ``mesh``, or None when the method does not apply.

    ``all_first`` runs every level batch-first: for a handful of (state, wavelength)
    blocks the batch-last vectors are too short to pay for their extra numpy calls.
    """
    cache = _PLANS.setdefault(mesh, {})
    if all_first not in cache:
        cache[all_first] = _build_plan(mesh, 0 if all_first else _FIRST_MIN_NE)
    return cache[all_first]


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
    """Plan-time view of a tree node: its ports and where its entries live."""

    ports: list[int]  # global TBU-port ids (-1 on padding)
    height: int
    children: tuple[_Node, ...] = ()
    tbu: int = -1
    first: bool = False  # output in the batch-first arena
    pos: np.ndarray | None = None  # (len(ports), len(ports)) arena positions
    cut: tuple = ()  # (a, b, ca, cb, ea, eb) once planned
    id: int = -1


def _tree(node: dict, nodes: list[_Node]) -> _Node:
    if not node["children"]:
        t = int(node["tbus"][0])
        out = _Node(ports=[4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3], height=0, tbu=t)
    else:
        kids = tuple(_tree(c, nodes) for c in node["children"])
        out = _Node(ports=[], height=1 + max(c.height for c in kids), children=kids)
    out.id = len(nodes)
    nodes.append(out)
    return out


def _sym_pos(ea: int, ne: int) -> np.ndarray:
    """Offsets (ne, ne) of a batch-first merge's entries: rows ``:ea`` in full (row-major),
    then rows and columns ``ea:`` (row-major); ``[ea:, :ea]`` reads the transposed
    ``[:ea, ea:]``. A sub-network is reciprocal (every TBU's ``S`` and every link is), so
    its scattering matrix is symmetric and the fourth block need not be computed.
    """
    eb = ne - ea
    pos = np.empty((ne, ne), dtype=np.int64)
    pos[:ea] = np.arange(ea * ne).reshape(ea, ne)
    pos[ea:, ea:] = ea * ne + np.arange(eb * eb).reshape(eb, eb)
    pos[ea:, :ea] = pos[:ea, ea:].T
    return pos


def _leaf_pos(t: int, zero: int) -> np.ndarray:
    """Arena rows of a TBU's 4x4 scattering matrix: ``b[2+i] = T[i, j] a[j]`` and
    ``b[j] = T[i, j] a[2+i]`` read row ``4 t + 2 i + j`` of the transfer entries.
    """
    pos = np.full((4, 4), zero, dtype=np.int64)
    for i in (0, 1):
        for j in (0, 1):
            pos[2 + i, j] = pos[j, 2 + i] = 4 * t + 2 * i + j
    return pos


def _split(nd: _Node, peer: np.ndarray) -> None:
    """Find the cut ports of a merge and order its halves (larger first)."""
    a, b = nd.children
    pos_b = {g: i for i, g in enumerate(b.ports) if g >= 0}
    ca, cb = [], []
    for i, g in enumerate(a.ports):
        if g >= 0 and peer[g] in pos_b:
            ca.append(i)
            cb.append(pos_b[peer[g]])
    sa, sb = set(ca), set(cb)
    ea = [i for i, g in enumerate(a.ports) if g >= 0 and i not in sa]
    eb = [i for i, g in enumerate(b.ports) if g >= 0 and i not in sb]
    if len(ea) < len(eb):  # larger half first: less padding across the level
        a, b, ca, cb, ea, eb = b, a, cb, ca, eb, ea
    nd.cut = (a, b, ca, cb, ea, eb)


def _padded(group: list[_Node]) -> int:
    """Entries a batch-last group computes and stores, every merge padded to the largest."""
    k = max(len(nd.cut[2]) for nd in group)
    ea = max(len(nd.cut[4]) for nd in group)
    eb = max(len(nd.cut[5]) for nd in group)
    return len(group) * (ea * (ea + eb) + eb * eb + k * (2 * k + ea + eb))


def _groups(merges: list[_Node]) -> list[list[_Node]]:
    """Split one height's batch-last merges into groups run as one call each.

    Batch-last levels pay elementwise for every padded entry, and each extra group costs a
    fixed set of numpy calls: start from one group per shape and join the two groups whose
    union adds the fewest padded entries while that is under :data:`_GROUP_JOIN_ENTRIES`.
    """
    by_shape: dict[tuple[int, int, int], list[_Node]] = {}
    for nd in merges:
        by_shape.setdefault((len(nd.cut[2]), len(nd.cut[4]), len(nd.cut[5])), []).append(nd)
    groups = [by_shape[key] for key in sorted(by_shape)]
    while len(groups) > 1:
        cost, i, j = min((_padded(a + b) - _padded(a) - _padded(b), i, j)
                         for i, a in enumerate(groups) for j, b in enumerate(groups) if i < j)
        if cost >= _GROUP_JOIN_ENTRIES:
            break
        groups[i] = groups[i] + groups.pop(j)
    return groups


def _gather(child: _Node, c: list[int], e: list[int], k: int, ne: int, zero: int,
            to_first: dict[int, int] | None) -> np.ndarray:
    """Arena positions of a half's [cut, kept] x [cut, kept] block, padded to k + ne.

    For a batch-first level (``to_first`` given) positions in the batch-first arena are
    returned unshifted (>= 0), the zero as -1, and rows of the batch-last arena as
    ``-2 - column`` of the handoff they are copied to (see :func:`_shift_first`).
    """
    sel = np.array(c + [-1] * (k - len(c)) + e + [-1] * (ne - len(e)), dtype=np.int64)
    idx = child.pos[np.ix_(np.maximum(sel, 0), np.maximum(sel, 0))].copy()
    pad = (sel[:, None] < 0) | (sel[None, :] < 0)
    if to_first is not None and not child.first:
        flat = idx.ravel()
        for i, r in enumerate(flat):
            flat[i] = -1 if r == zero else -2 - to_first.setdefault(int(r), len(to_first))
        idx = flat.reshape(idx.shape)
    idx[pad] = -1 if to_first is not None else zero
    return idx


def _build_plan(mesh: Mesh, first_min_ne: int) -> MergePlan | None:
    n = mesh.n_tbus
    if (mesh.links[:, 0] // 4 == mesh.links[:, 1] // 4).any():
        return None  # a TBU looped onto itself: never cut, so never joined here
    peer = np.full(4 * n, -1)
    link_of = np.full(4 * n, -1)
    peer[mesh.links[:, 0]], peer[mesh.links[:, 1]] = mesh.links[:, 1], mesh.links[:, 0]
    link_of[mesh.links[:, 0]] = link_of[mesh.links[:, 1]] = np.arange(mesh.n_links)

    nodes: list[_Node] = []
    root = _tree(_bisect(np.arange(n), mesh.tbu_centers(), mesh.links // 4), nodes)
    last_zero = 4 * n
    for nd in nodes:
        if nd.tbu >= 0:
            nd.pos = _leaf_pos(nd.tbu, last_zero)
    heights = sorted({nd.height for nd in nodes if nd.children})
    levels: list[_Level] = []
    node_level = np.full(len(nodes), -1)
    node_slot = np.full(len(nodes), -1)
    last_base, first_base = last_zero + 1, 0
    to_first: dict[int, int] | None = None
    joined = 0
    for h in heights:
        merges = [nd for nd in nodes if nd.children and nd.height == h]
        for nd in merges:
            _split(nd, peer)
            joined += len(nd.cut[2])
        ne_all = max(len(nd.cut[4]) for nd in merges) + max(len(nd.cut[5]) for nd in merges)
        first = to_first is not None or ne_all >= first_min_ne
        if first and to_first is None:
            to_first = {}
        groups = [merges] if first else _groups(merges)
        for merges in groups:  # one group of the height at a time
            k = max(len(nd.cut[2]) for nd in merges)
            ea = max(len(nd.cut[4]) for nd in merges)
            ne = ea + max(len(nd.cut[5]) for nd in merges)
            m_count = len(merges)
            shapes = np.array([[len(nd.cut[2]), len(nd.cut[4]), len(nd.cut[5])] for nd in merges])
            idx_a = np.stack([_gather(nd.cut[0], nd.cut[2], nd.cut[4], k, ea, last_zero,
                                      to_first if first else None) for nd in merges])
            idx_b = np.stack([_gather(nd.cut[1], nd.cut[3], nd.cut[5], k, ne - ea, last_zero,
                                      to_first if first else None) for nd in merges])
            link = np.full((k, m_count), -1)
            for m, nd in enumerate(merges):
                a, _, ca, _, _, _ = nd.cut
                link[: len(ca), m] = link_of[np.array(a.ports, dtype=np.int64)[ca]]
                node_level[nd.id], node_slot[nd.id] = len(levels), m
                # its ports: A's kept, padding, B's kept, padding (the layout the merge writes)
                kept_a = [a.ports[i] for i in nd.cut[4]]
                kept_b = [nd.cut[1].ports[i] for i in nd.cut[5]]
                nd.ports = kept_a + [-1] * (ea - len(kept_a)) + kept_b + [-1] * (ne - ea - len(kept_b))
                nd.first = first
                if first:
                    nd.pos = first_base + m * (ea * ne + (ne - ea) ** 2) + _sym_pos(ea, ne)
                else:
                    nd.pos = last_base + _sym_pos(ea, ne) * m_count + m
            leaves = k == 1 and all(nd.cut[0].tbu >= 0 and nd.cut[1].tbu >= 0 for nd in merges)
            if first:
                lev = _Level(True, m_count, k, ea, ne, first_base, idx_a, idx_b, link, shapes,
                             leaves=leaves)
                first_base += m_count * (ea * ne + (ne - ea) ** 2)
            else:
                lev = _last_level(m_count, k, ea, ne, last_base, idx_a, idx_b, link, shapes,
                                  last_zero, leaves)
                last_base += m_count * (ea * ne + (ne - ea) ** 2)
            levels.append(lev)
    if joined != mesh.n_links:
        return None
    slot = {g: i for i, g in enumerate(root.ports) if g >= 0}
    if any(int(g) not in slot for g in mesh.port_tbu_ports):
        return None
    slots = np.array([slot[int(g)] for g in mesh.port_tbu_ports], dtype=np.int64)
    handoff = np.zeros(0, dtype=np.int64)
    first_size = 0
    if to_first is not None:
        n_hand = len(to_first)
        handoff = np.array(sorted(to_first, key=to_first.get), dtype=np.int64)
        shift = n_hand + 1  # handed-off columns, then the zero column, then the outputs
        levels = [_shift_first(lev, shift, n_hand) if lev.first else lev for lev in levels]
        first_size = shift + first_base
        root_pos = root.pos + shift
    else:
        shift = 0
        root_pos = root.pos
    parent = np.full(len(nodes), -1)
    leaf_node = np.full(n, -1)
    for nd in nodes:
        for c in nd.children:
            parent[c.id] = nd.id
        if nd.tbu >= 0:
            leaf_node[nd.tbu] = nd.id
    return MergePlan(
        levels=tuple(levels), n_tbus=n, last_size=last_base, last_zero=last_zero,
        handoff=handoff, first_size=first_size, out_idx=root_pos[np.ix_(slots, slots)],
        out_first=root.first, n_ports=mesh.n_ports, parent=parent,
        node_level=node_level, node_slot=node_slot, leaf_node=leaf_node,
        nodes=tuple((nd.first, nd.pos + shift if nd.first else nd.pos, np.array(nd.ports, dtype=np.int64))
                    for nd in nodes),
    )


def _shift_first(lev: _Level, shift: int, zero: int) -> _Level:
    """Batch-first indices once the handoff is known (codes as in :func:`_gather`)."""

    def fix(idx: np.ndarray) -> np.ndarray:
        return np.where(idx >= 0, idx + shift, np.where(idx == -1, zero, -2 - idx))

    return _first_level(lev.n_merge, lev.k, lev.ea, lev.ne, lev.base + shift,
                        fix(lev.idx_a), fix(lev.idx_b), lev.link, lev.shapes, zero, lev.leaves)


def _first_level(n_merge: int, k: int, ea: int, ne: int, base: int, idx_a: np.ndarray,
                 idx_b: np.ndarray, link: np.ndarray, shapes: np.ndarray, zero: int,
                 leaves: bool = False) -> _Level:
    """A batch-first level with the flat gathers :func:`_merge_first` reads.

    ``cut_idx`` lists, for all merges in turn, ``B_cc`` (k, k), then ``B_ce`` (k, eb), then
    ``A_c`` = ``[A_cc, A_ce]`` (k, k + ea): one ``take`` fetches every block a merge
    multiplies, and the parts that take the link transmission are one contiguous run.
    ``base_idx`` is the merged matrix's ``blockdiag(A_ee, B_ee)`` (the zero entry
    elsewhere) in the stored layout of :func:`_sym_pos`, added to the products in one flat
    pass. No ``*_ec`` block is fetched: the mesh is reciprocal, so ``A_ec = A_ce.T``.
    """
    top = np.full((n_merge, ea, ne), zero, dtype=np.int64)
    top[:, :, :ea] = idx_a[:, k:, k:]
    base_idx = np.concatenate([top.reshape(n_merge, -1), idx_b[:, k:, k:].reshape(n_merge, -1)], axis=1)
    cut_idx = np.concatenate([idx_b[:, :k, :k].ravel(), idx_b[:, :k, k:].ravel(),
                              idx_a[:, :k, :].ravel()])
    return _Level(True, n_merge, k, ea, ne, base, idx_a, idx_b, link, shapes, zero, cut_idx,
                  base_idx.ravel(), leaves, _scale_links(link, ne - ea))


def _scale_links(link: np.ndarray, eb: int) -> np.ndarray:
    """(2, M * (k * k + k * eb)) indices into :func:`link_factors`: ``X = T B_cc T`` takes
    the transmissions of both its links, ``B_t = T B_ce`` that of its row's link only.
    """
    k, m = link.shape
    lk = np.where(link >= 0, link, _PAD).T  # (M, k)
    x_i, x_j = np.broadcast_to(lk[:, :, None], (m, k, k)), np.broadcast_to(lk[:, None, :], (m, k, k))
    b_i = np.broadcast_to(lk[:, :, None], (m, k, eb))
    return np.stack([np.concatenate([x_i.ravel(), b_i.ravel()]),
                     np.concatenate([x_j.ravel(), np.full(m * k * eb, _ONE)])])


_PAD, _ONE = -2, -1  # link_factors' last two entries: 0 for a padded cut row, 1 for no link


def link_factors(t_link: np.ndarray) -> np.ndarray:
    """Link transmissions as the merges index them: ``[t_link..., 0, 1]``."""
    return np.concatenate([t_link, [0.0, 1.0]])


def _last_level(n_merge: int, k: int, ea: int, ne: int, base: int, idx_a: np.ndarray,
                idx_b: np.ndarray, link: np.ndarray, shapes: np.ndarray, zero: int,
                leaves: bool) -> _Level:
    """A batch-last level: the flat gathers of :func:`_first_level`, one column per merge."""
    fl = _first_level(n_merge, k, ea, ne, base, idx_a, idx_b, link, shapes, zero)
    scale = fl.scale_links
    return _Level(False, n_merge, k, ea, ne, base, idx_a, idx_b, link, shapes, zero,
                  _per_merge(fl.cut_idx, n_merge, k, ea, ne),
                  np.ascontiguousarray(np.concatenate([idx_a[:, k:, k:].reshape(n_merge, -1),
                                                       idx_b[:, k:, k:].reshape(n_merge, -1)], axis=1).T),
                  leaves,
                  np.stack([_per_merge(np.concatenate([row, np.zeros(n_merge * k * (k + ea), np.int64)]),
                                       n_merge, k, ea, ne)[: k * (k + ne - ea)] for row in scale]))


def _per_merge(cut_idx: np.ndarray, n_merge: int, k: int, ea: int, ne: int) -> np.ndarray:
    """:func:`_first_level`'s flat cut gather (merge-major within each block) as
    (entries, merges): the batch-last arena keeps a merge's entries in one column.
    """
    eb = ne - ea
    sizes = [k * k, k * eb, k * (k + ea)]
    parts, lo = [], 0
    for size in sizes:
        parts.append(cut_idx[lo: lo + n_merge * size].reshape(n_merge, size).T)
        lo += n_merge * size
    return np.ascontiguousarray(np.concatenate(parts, axis=0))


@functools.cache
def _eye(k: int) -> np.ndarray:
    """The k x k identity (cached: every merge of a k-link cut subtracts from it)."""
    return np.eye(k)


def _mm(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Batch-last matrix product: x (i, l, N) @ y (l, j, N) -> (i, j, N), one broadcast
    multiply (and add) per ``l``: on long batch vectors that beats a matmul of tiny blocks.
    """
    if out is None:
        out = np.empty((x.shape[0], y.shape[1], x.shape[2]), dtype=complex)
    np.multiply(x[:, 0, None, :], y[None, 0, :, :], out=out)
    if x.shape[1] > 1:
        tmp = _scratch("mm_tmp", out.shape)
        for m in range(1, x.shape[1]):
            np.multiply(x[:, m, None, :], y[None, m, :, :], out=tmp)
            out += tmp
    return out


def _solve_last(g: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``g^-1 r`` for batch-last stacks g (k, k, N), r (k, j, N); ``g`` is overwritten.

    One link: a division; two: the closed-form inverse; more: Gauss-Jordan without
    pivoting (see the module docstring for why no pivot is needed).
    """
    k = g.shape[0]
    if k == 1:
        return r / g[0, 0]
    if k == 2:
        inv_det = 1.0 / (g[0, 0] * g[1, 1] - g[0, 1] * g[1, 0])
        out = np.empty_like(r)
        out[0] = (g[1, 1] * inv_det) * r[0] - (g[0, 1] * inv_det) * r[1]
        out[1] = (g[0, 0] * inv_det) * r[1] - (g[1, 0] * inv_det) * r[0]
        return out
    r = r.copy()
    for j in range(k):
        p = 1.0 / g[j, j]
        g[j] *= p
        r[j] *= p
        f = g[:, j].copy()
        f[j] = 0.0
        g -= f[:, None] * g[j][None]
        r -= f[:, None] * r[j][None]
    return r


def _inverse_last(g: np.ndarray) -> np.ndarray:
    """Inverses of a batch-last stack g (k, k, N) (``g`` is overwritten)."""
    k = g.shape[0]
    if k == 1:
        return np.reciprocal(g, out=g)
    eye = np.zeros_like(g)
    eye[np.arange(k), np.arange(k)] = 1.0
    return _solve_last(g, eye)


def _merge_last(lev: _Level, arena: np.ndarray, t_ext: np.ndarray, res: np.ndarray) -> None:
    """One batch-last level from ``arena`` (rows, B) into ``res`` (stored, M * B): the
    algebra of :func:`_merge_first` on entries that are whole (merge, block) rows, so every
    elementwise product is one long vector loop.
    """
    k, ea, ne, m = lev.k, lev.ea, lev.ne, lev.n_merge
    eb = ne - ea
    n = res.shape[-1]
    top = res[: ea * ne].reshape(ea, ne, n)
    bot = res[ea * ne:].reshape(eb, eb, n)
    ee = _scratch("l_ee", (ea * ea + eb * eb, n))
    np.take(arena, lev.base_idx, axis=0, out=ee.reshape(-1, m, n // m), mode="clip")
    ee_a, ee_b = ee[: ea * ea].reshape(ea, ea, n), ee[ea * ea:].reshape(eb, eb, n)
    if not k:
        _block_diag(top, bot, ee_a, ee_b, ea)
        return
    cut = _scratch("l_cut", (lev.cut_idx.shape[0], n))
    np.take(arena, lev.cut_idx, axis=0, out=cut.reshape(-1, m, n // m), mode="clip")
    n_x, n_b = k * k, k * (k + eb)
    cut3 = cut.reshape(-1, m, n // m)
    cut3[:n_b] *= (t_ext[lev.scale_links[0]] * t_ext[lev.scale_links[1]])[:, :, None]
    x = cut[:n_x].reshape(k, k, n)
    bt = cut[n_x:n_b].reshape(k, eb, n)
    a_c = cut[n_b:].reshape(k, k + ea, n)
    acc, ace = a_c[:, :k], a_c[:, k:]
    if lev.leaves:  # A_cc = B_cc = 0: the merged matrix is [[A_ee, A_ce.T B_t], [., B_ee]]
        top[:, :ea] = ee_a
        np.multiply(ace[0][:, None, :], bt[0][None, :, :], out=top[:, ea:])
        bot[...] = ee_b
        return
    g = _mm(x, acc, out=_scratch("l_g", (k, k, n)))
    np.subtract(_eye(k)[:, :, None], g, out=g)
    ginv = _inverse_last(g)
    w = _scratch("l_w", (k, ne, n))
    _mm(ginv, _mm(x, ace, out=_scratch("l_xa", (k, ea, n))), out=w[:, :ea])
    _mm(ginv, bt, out=w[:, ea:])
    _mm(np.swapaxes(ace, 0, 1), w, out=top)
    top[:, :ea] += ee_a
    _mm(np.swapaxes(bt, 0, 1), _mm(acc, w[:, ea:], out=_scratch("l_vb", (k, eb, n))), out=bot)
    bot += ee_b


def _block_diag(top: np.ndarray, bot: np.ndarray, ee_a: np.ndarray, ee_b: np.ndarray, ea: int) -> None:
    """A merge across no link: its halves side by side (a batch-last or -first layout)."""
    top[..., :ea] = ee_a
    top[..., ea:] = 0.0
    bot[...] = ee_b


def _inverse_first(g: np.ndarray) -> np.ndarray:
    """Inverses of a batch-first stack g (..., k, k), ``g`` overwritten: closed forms for
    one and two links, Gauss-Jordan over the stack for three (half LAPACK's time there,
    whose per-matrix call dominates), LAPACK above.
    """
    k = g.shape[-1]
    if k == 1:
        return np.reciprocal(g, out=g)
    if k == 2:
        out = np.empty_like(g)
        inv_det = 1.0 / (g[..., 0, 0] * g[..., 1, 1] - g[..., 0, 1] * g[..., 1, 0])
        out[..., 0, 0] = g[..., 1, 1] * inv_det
        out[..., 1, 1] = g[..., 0, 0] * inv_det
        out[..., 0, 1] = -g[..., 0, 1] * inv_det
        out[..., 1, 0] = -g[..., 1, 0] * inv_det
        return out
    a = g.reshape(-1, k, k)
    if len(a) <= _LAPACK_MAX_COUNT or k > _GJ_MAX_K:
        return np.linalg.inv(g)
    tmp = np.empty_like(a)
    for j in range(k):  # in place: column j of the identity replaces column j of g
        p = 1.0 / a[:, j, j]
        a[:, j, j] = 1.0
        a[:, j] *= p[:, None]
        f = a[:, :, j].copy()
        f[:, j] = 0.0
        a[:, :, j] -= f
        np.multiply(f[:, :, None], a[:, j, None, :], out=tmp)
        a -= tmp
    return g


def _merge_first(lev: _Level, arena: np.ndarray, t_ext: np.ndarray, res: np.ndarray) -> None:
    """One batch-first level from ``arena`` (B, cols) into ``res`` (B, M * stored).

    With ``T`` the cut's link transmissions, ``X = T B_cc T`` and ``B_t = T B_ce``, the
    waves entering A on the cut are ``W x`` with ``W = G^-1 [X A_ce, B_t]``,
    ``G = I - X A_cc``; those entering B are ``T (A_cc W + [A_ce, 0]) x``. The merged
    matrix is symmetric (the mesh is reciprocal: ``A_ec = A_ce.T``), so only its A rows,
    ``[A_ee, 0] + A_ce.T W``, and its B-B block, ``B_ee + B_t.T (A_cc W_B)`` with
    ``W_B = G^-1 B_t`` (W's last eb columns), are formed (:func:`_sym_pos`). Every product
    is one ``np.matmul`` over all (block, merge) pairs; the only elementwise passes are the
    link scaling of the small cut blocks and one flat add of the kept blocks (a strided add
    into the arena costs more numpy setup than it saves at one wavelength).
    """
    k, ea, ne, m = lev.k, lev.ea, lev.ne, lev.n_merge
    eb = ne - ea
    batch = arena.shape[0]
    base = _scratch("f_base", res.shape)
    arena.take(lev.base_idx, axis=1, out=base, mode="clip")  # in range by construction: no check
    if not k:
        res[...] = base
        return
    cut = arena.take(lev.cut_idx, axis=1, out=_scratch("f_cut", (batch, len(lev.cut_idx))), mode="clip")
    n_x, n_b = m * k * k, m * k * (k + eb)
    cut[:, :n_b] *= t_ext[lev.scale_links[0]] * t_ext[lev.scale_links[1]]
    x = cut[:, :n_x].reshape(batch, m, k, k)
    bt = cut[:, n_x:n_b].reshape(batch, m, k, eb)
    a_c = cut[:, n_b:].reshape(batch, m, k, k + ea)
    acc, ace = a_c[..., :k], a_c[..., k:]
    if lev.leaves:  # A_cc = B_cc = 0: the merged matrix is [[A_ee, A_ce.T B_t], [., B_ee]]
        res[...] = base
        top = res.reshape(batch, m, -1)[..., : ea * ne].reshape(batch, m, ea, ne)
        np.multiply(ace[:, :, 0, :, None], bt[:, :, 0, None, :], out=top[..., ea:])
        return
    xa = np.matmul(x, a_c, out=_scratch("f_xa", (batch, m, k, k + ea)))
    g = np.subtract(_eye(k), xa[..., :k], out=_scratch("f_g", (batch, m, k, k)))
    ginv = _inverse_first(g)
    w = _scratch("f_w", (batch, m, k, ne))
    np.matmul(ginv, xa[..., k:], out=w[..., :ea])
    np.matmul(ginv, bt, out=w[..., ea:])
    upd = _scratch("f_upd", (batch, m, ea * ne + eb * eb))
    np.matmul(np.swapaxes(ace, -1, -2), w, out=upd[..., : ea * ne].reshape(batch, m, ea, ne))
    vb = np.matmul(acc, w[..., ea:], out=_scratch("f_vb", (batch, m, k, eb)))
    np.matmul(np.swapaxes(bt, -1, -2), vb, out=upd[..., ea * ne:].reshape(batch, m, eb, eb))
    np.add(base, upd.reshape(batch, -1), out=res)


def run_levels(
    plan: MergePlan, last: np.ndarray, first: np.ndarray | None, t_ext: np.ndarray,
    only: dict[int, np.ndarray] | None = None,
) -> None:
    """Run the merges of ``plan`` over arenas already holding the TBU transfer entries.

    ``only`` restricts the work to some merges per level ({level: merge indices}; a
    level not listed is skipped): the incremental solver re-runs only the ancestors of
    the TBUs that changed, writing to the same arena positions as a full run.
    """
    batch = last.shape[1]
    if only is None:
        n_last = sum(1 for lev in plan.levels if not lev.first)
        for lev in plan.levels[:n_last]:
            res = last[lev.base: lev.base + lev.out_size]
            _merge_last(lev, last, t_ext, res.reshape(lev.stored, lev.n_merge * batch))
        if first is None:
            return
        for lo in range(0, batch, _FIRST_SUB):  # a few blocks at a time: see _FIRST_SUB
            sub = first[lo: lo + _FIRST_SUB]
            sub[:, : len(plan.handoff)] = last[plan.handoff, lo: lo + _FIRST_SUB].T
            for lev in plan.levels[n_last:]:
                _merge_first(lev, sub, t_ext, sub[:, lev.base: lev.base + lev.out_size])
        return
    handed = False
    for i, lev in enumerate(plan.levels):
        sel = only.get(i)
        if sel is None:
            continue
        if lev.first and not handed:
            first[:, : len(plan.handoff)] = last[plan.handoff].T
            handed = True
        sub = _subset(lev, sel)
        ij = np.arange(lev.stored)
        if lev.first:
            res = np.empty((batch, len(sel) * lev.stored), dtype=complex)
            _merge_first(sub, first, t_ext, res)
            first[:, lev.base + sel[:, None] * lev.stored + ij[None, :]] = res.reshape(batch, len(sel), -1)
        else:
            res = np.empty((lev.stored, len(sel) * batch), dtype=complex)
            _merge_last(sub, last, t_ext, res)
            rows = lev.base + ij[:, None] * lev.n_merge + sel[None, :]
            last[rows] = res.reshape(lev.stored, len(sel), batch)


def _subset(lev: _Level, sel: np.ndarray) -> _Level:
    """The same level restricted to the merges ``sel`` (output placement is the caller's).

    Cached per (level, merges): an incremental solver meets the same few paths again and
    again, and building a level's gathers costs about as much as running it at one
    wavelength.
    """
    key = (id(lev), sel.tobytes())
    hit = _SUBSETS.get(key)
    if hit is not None and hit[0] is lev:
        return hit[1]
    if lev.first:
        sub = _first_level(len(sel), lev.k, lev.ea, lev.ne, -1, lev.idx_a[sel], lev.idx_b[sel],
                           lev.link[:, sel], lev.shapes[sel], lev.zero, lev.leaves)
    else:
        sub = _last_level(len(sel), lev.k, lev.ea, lev.ne, -1, lev.idx_a[sel], lev.idx_b[sel],
                          lev.link[:, sel], lev.shapes[sel], lev.zero, lev.leaves)
    if len(_SUBSETS) >= _SUBSETS_MAX:
        _SUBSETS.clear()
    _SUBSETS[key] = (lev, sub)
    return sub


_SUBSETS: dict[tuple[int, bytes], tuple[_Level, _Level]] = {}
_SUBSETS_MAX = 4096  # restricted levels kept (a mesh's single-TBU paths need ~n_tbus x depth)


def merge_macs(plan: MergePlan) -> tuple[int, int]:
    """Complex multiply-adds per (state, wavelength) block: (as padded, unpadded).

    Per merge (:func:`_merge_first`): ``X A_cc``, ``G^-1`` (counted k^3), ``G^-1 X`` and
    ``A_cc G^-1`` (k^3 each); ``W`` (k^2 ne); ``A_cc G^-1 B_t`` (k^2 eb); and the kept
    rows, ``A_ce.T W`` (ea k ne) and ``B_t.T V_B`` (eb k eb). A join of two TBUs across
    one link is ``A_ce.T B_t`` alone (ea eb).
    """
    def macs(k: np.ndarray, ea: np.ndarray, eb: np.ndarray, leaves: bool) -> int:
        if leaves:
            return int(np.sum(ea * eb))
        ne = ea + eb
        return int(np.sum(4 * k**3 + k * k * (ne + eb) + k * (ea * ne + eb * eb)))

    padded = sum(macs(np.array(lev.k), np.array(lev.ea), np.array(lev.ne - lev.ea), lev.leaves)
                 * lev.n_merge for lev in plan.levels)
    real = sum(macs(*lev.shapes.T, lev.leaves) for lev in plan.levels)
    return padded, real


def node_matrix(plan: MergePlan, node: int, last: np.ndarray, first: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """A tree node's matrix (B, p, p) read from solved arenas, and its ports (unpadded)."""
    is_first, pos, ports = plan.nodes[node]
    keep = np.flatnonzero(ports >= 0)
    idx = pos[np.ix_(keep, keep)]
    mat = np.take(first, idx, axis=1) if is_first else np.moveaxis(last[idx], -1, 0)
    return mat, ports[keep]


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


def ancestors(plan: MergePlan, tbus: np.ndarray) -> dict[int, np.ndarray]:
    """{level: merge indices} of every merge above the TBUs ``tbus`` (their paths to the root)."""
    hit: dict[int, set[int]] = {}
    for t in np.unique(np.asarray(tbus, dtype=np.int64)):
        node = plan.leaf_node[t]
        while plan.parent[node] >= 0:
            node = plan.parent[node]
            hit.setdefault(int(plan.node_level[node]), set()).add(int(plan.node_slot[node]))
    return {lev: np.array(sorted(m), dtype=np.int64) for lev, m in sorted(hit.items())}


_SCRATCH = threading.local()  # per thread: the last arenas and the merges' temporaries
_SCRATCH_MAX_ENTRIES = 8 << 20  # a temporary larger than this (128 MB) is not kept for reuse


def _scratch(name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The calling thread's complex temporary ``name`` of ``shape``, reused from call to call.

    The merges' temporaries are 0.1-2 MB per chunk: fresh ones cost a page fault per
    4 kB on every call (about a quarter of the solve at 100 wavelengths). One buffer per
    name serves every level (each level's temporaries are dead before the next starts), so
    the memory a solve touches is the largest level's, not the sum: at one wavelength,
    after other work has evicted the caches, every line touched is a miss. Contents are
    whatever the last user left.
    """
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    size = math.prod(shape)
    buf = bufs.get(name)
    if buf is None or buf.size < size:
        if size > _SCRATCH_MAX_ENTRIES:  # one huge batch: do not keep it alive afterwards
            return np.empty(shape, dtype=complex)
        buf = bufs[name] = np.empty(size, dtype=complex)
    return buf[:size].reshape(shape)


def new_arenas(plan: MergePlan, T: np.ndarray, reuse: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Arenas for a batch, the transfer entries filled in; ``T`` is (B, n_tbus, 4).

    ``reuse`` hands out this thread's arenas from its previous call of the same shape
    (their old contents are dead once a solve has read its root): the arenas are MBs,
    and fresh ones cost a page fault per 4 kB on every chunk.
    """
    batch = T.shape[0]
    key = (plan.last_size, plan.first_size, batch)
    held = getattr(_SCRATCH, "arenas", None) if reuse else None
    if held is not None and held[0] == key:
        last, first = held[1]
    else:
        last = np.empty((plan.last_size, batch), dtype=complex)
        first = np.empty((batch, plan.first_size), dtype=complex) if plan.first_size else None
        if reuse:
            _SCRATCH.arenas = (key, (last, first))
    last[: 4 * plan.n_tbus] = T.reshape(batch, 4 * plan.n_tbus).T
    last[plan.last_zero] = 0.0
    if first is not None:
        first[:, len(plan.handoff)] = 0.0
    return last, first


def root_matrix(plan: MergePlan, last: np.ndarray, first: np.ndarray | None,
                inputs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Port matrices (B, n_ports, n_inputs) read from solved arenas (into ``out`` if given)."""
    idx = plan.out_idx[:, inputs]
    if plan.out_first:
        return np.take(first, idx, axis=1, out=out, mode="clip")
    if out is None:
        return np.moveaxis(last[idx], -1, 0)
    out[...] = np.moveaxis(last[idx], -1, 0)
    return out


def solve_merge(plan: MergePlan, T: np.ndarray, t_link: np.ndarray, inputs: np.ndarray,
                out: np.ndarray) -> bool:
    """Port matrices of a batch into ``out`` (B, n_ports, n_inputs); ``T`` is (B, n_tbus, 4).

    Returns whether every entry is finite (else the caller falls back to sparse LU).
    """
    last, first = new_arenas(plan, T, reuse=True)
    if T.shape[0] < _BUFSIZE_MIN_BATCH:  # short vectors: numpy never buffers them
        run_levels(plan, last, first, link_factors(t_link))
    else:
        held = np.setbufsize(_UFUNC_BUFSIZE)
        try:
            run_levels(plan, last, first, link_factors(t_link))
        finally:
            np.setbufsize(held)
    root_matrix(plan, last, first, inputs, out)
    return bool(np.isfinite(out.sum()))  # one pass: a NaN or inf anywhere reaches the sum
