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
keeps every dense block small (the largest is cut-size x port-count). All merges at the
same depth of the tree, for every (state, wavelength) block, run as one padded numpy call,
so the Python cost does not grow with the batch. The root of the tree is the port-to-port
matrix itself: no internal wave is ever solved for.

Passive networks make every ``I - B_cc A_cc`` well conditioned unless the whole circuit
is (a lossless closed loop exactly on resonance), so many small systems are inverted by a
batched Gauss-Jordan without pivoting; a few systems, or large ones, go to LAPACK.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from photonics.topology import Mesh

_LAST_MAX_NE = 16  # levels with merged matrices up to this size run batch-last...
_LAST_MIN_BATCH = 16  # ... when the batch is at least this long
_GJ_MAX = 24  # cuts up to this size are inverted inline, larger ones go to LAPACK
_LAPACK_MAX_COUNT = 64  # ... unless there are this few systems (LAPACK's per-call cost wins)


@dataclass(frozen=True)
class _Level:
    """One depth of the tree: its merges and the single TBUs carried up unchanged.

    A level's nodes live in one flat buffer per block: ``n_merge`` padded (ne, ne)
    matrices, then 4x4 TBU matrices, then one zero used for every padding slot.
    """

    n_merge: int
    k: int  # cut size (links joined per merge, padded)
    ea: int  # ports kept from the first half (padded)
    ne: int  # ports of a merged node (padded)
    size: int  # flat buffer length, zero slot last
    idx_a: np.ndarray  # (n_merge, k+ea, k+ea) flat positions of [c, e] x [c, e] of half A
    idx_b: np.ndarray  # (n_merge, k+eb, k+eb) same for half B
    link: np.ndarray  # (n_merge, k, 1) link index, -1 on padding
    leaf_dest: np.ndarray  # flat positions of the nonzero TBU S entries
    leaf_tbu: np.ndarray
    leaf_elem: np.ndarray


@dataclass(frozen=True)
class MergePlan:
    levels: tuple[_Level, ...]  # deepest first; the last has one node, the root
    root: int  # flat offset of the root matrix
    stride: int  # its row stride
    slots: np.ndarray  # (n_ports,) slot of mesh port n in the root
    n_ports: int


_PLANS: weakref.WeakKeyDictionary[Mesh, MergePlan | None] = weakref.WeakKeyDictionary()


def merge_plan(mesh: Mesh) -> MergePlan | None:
    """The cached merge plan of ``mesh``, or None when the method does not apply."""
    try:
        return _PLANS[mesh]
    except KeyError:
        plan = _build_plan(mesh)
        _PLANS[mesh] = plan
        return plan


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


def _build_plan(mesh: Mesh) -> MergePlan | None:
    n = mesh.n_tbus
    if (mesh.links[:, 0] // 4 == mesh.links[:, 1] // 4).any():
        return None  # a TBU looped onto itself: never cut, so never joined here
    peer = np.full(4 * n, -1)
    link_of = np.full(4 * n, -1)
    peer[mesh.links[:, 0]], peer[mesh.links[:, 1]] = mesh.links[:, 1], mesh.links[:, 0]
    link_of[mesh.links[:, 0]] = link_of[mesh.links[:, 1]] = np.arange(mesh.n_links)

    root = _bisect(np.arange(n), mesh.tbu_centers(), mesh.links // 4)
    # Depth of each node, counted from the root; a TBU above the deepest level is carried
    # up level by level as a leaf (a 4x4 copy) until its merge.
    by_depth: list[list[dict]] = []
    stack = [(root, 0)]
    while stack:
        node, d = stack.pop()
        while len(by_depth) <= d:
            by_depth.append([])
        by_depth[d].append(node)
        stack.extend((c, d + 1) for c in node["children"])
    for d in range(len(by_depth) - 1):
        for node in by_depth[d]:
            if not node["children"]:  # carry: the same leaf one level down
                by_depth[d + 1].append(node)

    levels: list[_Level] = []
    joined = 0
    prev: dict[int, tuple[int, int, list[int]]] = {}  # id(node) -> (offset, stride, ports)
    prev_zero = 0
    for depth in range(len(by_depth) - 1, -1, -1):
        merges = [nd for nd in by_depth[depth] if nd["children"]]
        leaves = [nd for nd in by_depth[depth] if not nd["children"]]
        info = []
        for nd in merges:
            a, b = (prev[id(c)] for c in nd["children"])
            pa, pb = a[2], b[2]
            pos_b = {g: i for i, g in enumerate(pb) if g >= 0}
            ca, cb = [], []
            for i, g in enumerate(pa):
                if g >= 0 and peer[g] in pos_b:
                    ca.append(i)
                    cb.append(pos_b[peer[g]])
            sa, sb = set(ca), set(cb)
            ea = [i for i, g in enumerate(pa) if g >= 0 and i not in sa]
            eb = [i for i, g in enumerate(pb) if g >= 0 and i not in sb]
            if len(ea) < len(eb):  # larger half first: less padding across the level
                a, b, ca, cb, ea, eb = b, a, cb, ca, eb, ea
            info.append((nd, a, b, ca, cb, ea, eb))
            joined += len(ca)
        k = max((len(x[3]) for x in info), default=0)
        ea_max = max((len(x[5]) for x in info), default=0)
        eb_max = max((len(x[6]) for x in info), default=0)
        ne = ea_max + eb_max
        n_m = len(merges)
        size = n_m * ne * ne + 16 * len(leaves) + 1
        zero = size - 1

        def block(
            child: tuple[int, int, list[int]], c: list[int], e: list[int],
            m: tuple[int, int], zero: int = prev_zero,
        ) -> np.ndarray:
            off, stride, _ = child
            sel = np.array(c + [-1] * (m[0] - len(c)) + e + [-1] * (m[1] - len(e)))
            flat = off + sel[:, None] * stride + sel[None, :]
            flat[(sel[:, None] < 0) | (sel[None, :] < 0)] = zero
            return flat

        cur: dict[int, tuple[int, int, list[int]]] = {}
        idx_a = np.zeros((n_m, k + ea_max, k + ea_max), dtype=np.int64)
        idx_b = np.zeros((n_m, k + eb_max, k + eb_max), dtype=np.int64)
        link = np.full((n_m, k, 1), -1)
        for m, (nd, a, b, ca, cb, ea, eb) in enumerate(info):
            idx_a[m] = block(a, ca, ea, (k, ea_max))
            idx_b[m] = block(b, cb, eb, (k, eb_max))
            link[m, : len(ca), 0] = link_of[np.array(a[2], dtype=np.int64)[ca]]
            ports = [a[2][i] for i in ea] + [-1] * (ea_max - len(ea))
            ports += [b[2][i] for i in eb] + [-1] * (eb_max - len(eb))
            cur[id(nd)] = (m * ne * ne, ne, ports)
        dest, ltbu, lelem = [], [], []
        for j, nd in enumerate(leaves):
            t = int(nd["tbus"][0])
            off = n_m * ne * ne + 16 * j
            cur[id(nd)] = (off, 4, [4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3])
            # b[2+i] = T[i, j] a[j] and b[j] = T[i, j] a[2+i], elem = 2i + j
            for i in (0, 1):
                for jj in (0, 1):
                    dest += [off + (2 + i) * 4 + jj, off + jj * 4 + 2 + i]
                    ltbu += [t, t]
                    lelem += [2 * i + jj, 2 * i + jj]
        levels.append(_Level(
            n_merge=n_m, k=k, ea=ea_max, ne=ne, size=size, idx_a=idx_a, idx_b=idx_b,
            link=link, leaf_dest=np.array(dest, dtype=np.int64),
            leaf_tbu=np.array(ltbu, dtype=np.int64), leaf_elem=np.array(lelem, dtype=np.int64),
        ))
        prev, prev_zero = cur, zero
    if joined != mesh.n_links:
        return None
    off, stride, ports = prev[id(root)]
    slot = {g: i for i, g in enumerate(ports) if g >= 0}
    if any(int(g) not in slot for g in mesh.port_tbu_ports):
        return None
    slots = np.array([slot[int(g)] for g in mesh.port_tbu_ports], dtype=np.int64)
    return MergePlan(levels=tuple(levels), root=off, stride=stride, slots=slots,
                     n_ports=mesh.n_ports)


def _inverse_last(g: np.ndarray) -> np.ndarray:
    """Inverses of a batch-last stack ``g`` (k, k, ...), Gauss-Jordan without pivoting.

    Every ``g`` here is ``I - X`` with ``X`` the round trip through two passive halves,
    and each pivot step is the same kind of matrix for a smaller cut, so the pivots are
    as far from zero as the circuit itself is from a lossless resonance.
    """
    k = g.shape[0]
    g = g.copy()
    inv = np.zeros_like(g)
    inv[np.arange(k), np.arange(k)] = 1.0
    for j in range(k):
        p = 1.0 / g[j, j]
        g[j] *= p
        inv[j] *= p
        f = g[:, j].copy()
        f[j] = 0.0
        g -= f[:, None] * g[j][None]
        inv -= f[:, None] * inv[j][None]
    return inv


def _mm_last(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Batch-last matrix product: x (..., i, l, B) @ y (..., l, j, B) -> (..., i, j, B)."""
    if out is None:
        out = x[..., :, 0, None, :] * y[..., None, 0, :, :]
    else:
        np.multiply(x[..., :, 0, None, :], y[..., None, 0, :, :], out=out)
    for m in range(1, x.shape[-2]):
        out += x[..., :, m, None, :] * y[..., None, m, :, :]
    return out


def _merge_last(lev: _Level, prev: np.ndarray, t_ext: np.ndarray, res: np.ndarray) -> None:
    """One level's merges on batch-last data: prev (size, B), res (M, ne, ne, B)."""
    k, ea, ne = lev.k, lev.ea, lev.ne
    A = prev[lev.idx_a]  # (M, k+ea, k+ea, B): rows and columns [cut ports, kept ports]
    B = prev[lev.idx_b]
    t = t_ext[lev.link][..., None]
    A[:, :k] *= t  # waves leaving on a cut link arrive through it
    B[:, :k] *= t
    acc, ace, aec, aee = A[:, :k, :k], A[:, :k, k:], A[:, k:, :k], A[:, k:, k:]
    bcc, bce, bec, bee = B[:, :k, :k], B[:, :k, k:], B[:, k:, :k], B[:, k:, k:]
    if not k:
        res[...] = 0.0
    else:
        G = -_mm_last(bcc, acc)
        G[:, np.arange(k), np.arange(k)] += 1.0
        R = np.empty((*acc.shape[:2], ne, acc.shape[-1]), dtype=complex)
        _mm_last(bcc, ace, out=R[:, :, :ea])
        R[:, :, ea:] = bce
        if k == 1:
            W = R / G
        elif G.shape[0] * G.shape[-1] <= _LAPACK_MAX_COUNT:
            W = np.linalg.solve(G.transpose(0, 3, 1, 2), R.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        else:
            W = _mm_last(_inverse_last(G.transpose(1, 2, 0, 3)).transpose(2, 0, 1, 3), R)
        ib = _mm_last(acc, W)
        ib[:, :, :ea] += ace
        _mm_last(aec, W, out=res[:, :ea])
        _mm_last(bec, ib, out=res[:, ea:])
    res[:, :ea, :ea] += aee
    res[:, ea:, ea:] += bee


def _merge_first(lev: _Level, prev: np.ndarray, t_ext: np.ndarray, res: np.ndarray) -> None:
    """One level's merges on batch-first data: prev (B, size), res (B, M, ne, ne)."""
    k, ea = lev.k, lev.ea
    A = prev.take(lev.idx_a, axis=1)  # (B, M, k+ea, k+ea)
    B = prev.take(lev.idx_b, axis=1)
    t = t_ext[lev.link]
    A[:, :, :k] *= t
    B[:, :, :k] *= t
    acc, ace, aec, aee = A[..., :k, :k], A[..., :k, k:], A[..., k:, :k], A[..., k:, k:]
    bcc, bce, bec, bee = B[..., :k, :k], B[..., :k, k:], B[..., k:, :k], B[..., k:, k:]
    if not k:
        res[...] = 0.0
    else:
        G = -(bcc @ acc)
        G[..., np.arange(k), np.arange(k)] += 1.0
        R = np.empty((*G.shape[:-1], lev.ne), dtype=complex)
        np.matmul(bcc, ace, out=R[..., :ea])
        R[..., ea:] = bce
        if k == 1:
            W = R / G
        elif k > _GJ_MAX or G.shape[0] * G.shape[1] <= _LAPACK_MAX_COUNT:
            W = np.linalg.solve(G, R)
        else:
            W = _inverse_last(G.transpose(2, 3, 0, 1)).transpose(2, 3, 0, 1) @ R
        ib = acc @ W
        ib[..., :ea] += ace
        np.matmul(aec, W, out=res[..., :ea, :])
        np.matmul(bec, ib, out=res[..., ea:, :])
    res[..., :ea, :ea] += aee
    res[..., ea:, ea:] += bee


def solve_merge(plan: MergePlan, T: np.ndarray, t_link: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Port matrices of a batch; ``T`` is (B, n_tbus, 4); returns (B, n_ports, n_inputs).

    Small levels run batch-last (long vector loops, contiguous gathers); levels with
    large port matrices run batch-first so their products go to BLAS.
    """
    batch = T.shape[0]
    t_ext = np.append(t_link, 0.0)
    prev = None
    last = batch >= _LAST_MIN_BATCH
    for lev in plan.levels:
        m_end = lev.n_merge * lev.ne * lev.ne
        if last and lev.ne > _LAST_MAX_NE:
            last = False
            if prev is not None:
                prev = np.ascontiguousarray(prev.T)
        if last:
            buf = np.empty((lev.size, batch), dtype=complex)
            buf[m_end:] = 0.0
            if lev.leaf_dest.size:
                buf[lev.leaf_dest] = T[:, lev.leaf_tbu, lev.leaf_elem].T
            if lev.n_merge:
                res = buf[:m_end].reshape(lev.n_merge, lev.ne, lev.ne, batch)
                _merge_last(lev, prev, t_ext, res)
        else:
            buf = np.empty((batch, lev.size), dtype=complex)
            buf[:, m_end:] = 0.0
            if lev.leaf_dest.size:
                buf[:, lev.leaf_dest] = T[:, lev.leaf_tbu, lev.leaf_elem]
            if lev.n_merge:
                res = buf[:, :m_end].reshape(batch, lev.n_merge, lev.ne, lev.ne)
                _merge_first(lev, prev, t_ext, res)
        prev = buf
    rows = plan.root + plan.slots * plan.stride
    idx = rows[:, None] + plan.slots[inputs][None, :]
    if last:
        return np.moveaxis(prev[idx], -1, 0)
    return np.take(prev, idx, axis=1)
