"""A rectangular (Clements) lattice of 2x2 blocks, embedded in a triangular waveguide mesh.

In a triangular mesh six TBUs meet at an inner vertex, 60 degrees apart, and each TBU port is
linked to the neighbour beside it, so light turns by 120 degrees at every vertex. Light that
leaves a horizontal TBU at its east end turns into the diagonal going up-left or down-left
from there, and at the diagonal's far end into the horizontal TBU starting there, half a
TBU further east than the first one started, one vertex row up or down. So with every
horizontal TBU ``H(x2, y)`` (west end at ``x2`` half TBU lengths, vertex row ``y`` counted
down from the top edge) a 2x2 block and every diagonal a waveguide, ``H(x2, y)`` feeds
``H(x2 + 1, y - 1)`` and ``H(x2 + 1, y + 1)``: the diagonal neighbours of a Clements lattice,
and each diagonal carries exactly one lattice path (set to whichever of bar or cross joins
its two ends; its heaters are a free phase on that path, a phase screen).

Mode ``k`` lives in the strip of triangles between vertex rows ``k`` and ``k + 1``; the block
of the pair ``(m, m + 1)`` in lattice column ``c`` is ``H(c + 1, m + 1)`` (``m`` of ``c``'s
parity), and the rows ``y = 0`` and ``y = N`` hold pass-throughs that turn an idle edge mode
back, as on the square mesh. The west edge is a zigzag of diagonals whose outer ends are
mesh ports; they feed only the horizontal TBUs starting at ``x2 = 0`` (even rows), so
lattice column -1 (pairs ``m`` odd) is a column of blocks that pass every mode on, and the
decomposition's ``N`` columns follow it. Mode ``j`` enters through the west-edge diagonal
of strip ``j`` and leaves through the east-edge one; columns past the decomposition pass
each mode on. A ``triangular:RxC`` mesh (``C`` triangles per strip: horizontal TBUs up to
``x2 = C - 1``) holds an ``N``-mode lattice for ``N <= R`` and ``N <= C - 1``. The geometry
and every port are read from the mesh's own links, never assumed.
"""

from __future__ import annotations

import math

from photonics.errors import StateError
from photonics.synthesis.square_lattice import Lattice, links_by_tbu
from photonics.topology import Mesh

ROW_HEIGHT = math.sqrt(3) / 2  # vertex row spacing of a triangular mesh, TBU lengths


def _vertex(x: float, y: float) -> tuple[int, int]:
    """(half TBU lengths east, vertex row down) of a mesh vertex."""
    return round(2 * x), round(-y / ROW_HEIGHT)


def _grid(mesh: Mesh) -> tuple[dict[tuple[int, int], int], dict[frozenset, int]]:
    """Horizontal TBUs by their west vertex, diagonals by their two vertices."""
    h: dict[tuple[int, int], int] = {}
    d: dict[frozenset, int] = {}
    for t, (a, b) in enumerate(mesh.tbu_xy):
        va, vb = _vertex(*a), _vertex(*b)
        if va[1] == vb[1]:
            h[min(va, vb)] = t
        else:
            d[frozenset((va, vb))] = t
    return h, d


def _free_end(mesh: Mesh, tbu: int, vertex: tuple[int, int]) -> tuple[int, int]:
    """(mesh port, local TBU port) of ``tbu``'s free end at ``vertex``."""
    for n, g in enumerate(mesh.port_tbu_ports):
        if int(g) // 4 == tbu and _vertex(*mesh.tbu_xy[tbu, (int(g) % 4) // 2]) == vertex:
            return n, int(g) % 4
    raise StateError(f"{mesh.tbu_names[tbu]} has no mesh port at its end {vertex}")


def _columns(h: dict[tuple[int, int], int], n: int) -> int:
    """The last lattice column whose every block (rows 0..n of its parity) is in the mesh."""
    c = -1
    while all((c + 2, y) in h for y in range(n + 1) if y % 2 == c % 2):
        c += 1
    return c


def _size_error(mesh: Mesh, n: int) -> StateError:
    return StateError(f"a {n}x{n} unitary needs a triangular mesh of at least {n}x{n + 1} (rows x triangles "
                      f"per row; triangular:{n}x{n + 1}); this one is {mesh.rows}x{mesh.cols}")


def triangular_lattice(mesh: Mesh, n: int) -> Lattice:
    """The ``n``-mode lattice on a triangular mesh (``n <= rows`` and ``n <= cols - 1``)."""
    if mesh.kind != "triangular":
        raise StateError(f"this lattice is laid out on a triangular mesh (triangular:RxC); this mesh is "
                         f"{mesh.kind}")
    if not 2 <= n <= mesh.rows:
        raise _size_error(mesh, n)
    h, diag = _grid(mesh)
    last = _columns(h, n)
    if last < n - 1 or any((0, y) not in h for y in range(0, n + 1, 2)):
        raise _size_error(mesh, n)
    link = links_by_tbu(mesh)
    blocks: dict[tuple[int, int], tuple[int, int, int]] = {}
    fixed: dict[int, tuple[int, int]] = {}

    def strip_diagonal(x2: int, y: int, k: int) -> int:
        """The diagonal of strip ``k`` with one end at vertex ``(x2, y)``, going east."""
        return diag[frozenset(((x2, y), (x2 + 1, 2 * k + 1 - y)))]

    for c in range(-1, last + 1):
        for y in range((c + 1) % 2, n + 1, 2):  # the rows of column c's parity
            t, m = h[(c + 1, y)], y - 1
            ports = {}
            for k in (m, m + 1):
                if 0 <= k < n:  # mode k in from the west end's diagonal, out by the east end's
                    ports[k] = (link[(t, strip_diagonal(c + 1, y, k))][0],
                                link[(t, strip_diagonal(c + 2, 2 * k + 1 - y, k))][0])
            if m == -1 or m == n - 1:
                fixed[t] = ports[m + 1 if m == -1 else m]  # an idle edge mode turns back
            else:
                blocks[(c, m)] = (t, *ports[m])
    inputs, outputs = [], []
    for k in range(n):
        for c in range(-1, last + 2):  # the diagonal into column c (c = last + 1: out to the east edge)
            y_w = k if k % 2 == (c + 1) % 2 else k + 1  # the row of column c's block on strip k
            y_e = 2 * k + 1 - y_w  # the row of column c - 1's block on strip k
            t = strip_diagonal(c + 1, y_w, k)  # from column c's block's west end to c - 1's east end
            if c == -1:
                port, entry = _free_end(mesh, t, (1, y_e))
                inputs.append(port)
                fixed[t] = (entry, link[(t, h[(0, y_w)])][0])
            elif c <= last:
                fixed[t] = (link[(t, h[(c, y_e)])][0], link[(t, h[(c + 1, y_w)])][0])
            else:
                port, exit_ = _free_end(mesh, t, (c + 1, y_w))
                outputs.append(port)
                fixed[t] = (link[(t, h[(c, y_e)])][0], exit_)
    return Lattice(n, tuple(inputs), tuple(outputs), blocks, fixed)
