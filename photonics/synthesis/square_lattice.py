"""A rectangular (Clements) lattice of 2x2 blocks, embedded in a square waveguide mesh.

In a square mesh every vertex joins four TBUs pairwise, so light leaving a horizontal TBU
turns into the vertical TBU above or below, and from there into the next horizontal TBU
to the east. Take the horizontal TBUs ``H(c, y)`` (column ``c``, row ``y`` counted down
from the top edge) of one checkerboard parity as the lattice's 2x2 blocks and the vertical
TBUs ``V(x, r)`` (between rows ``r`` and ``r + 1`` at vertex column ``x``) as the waveguides
between them: ``H(c, y)`` feeds ``H(c + 1, y - 1)`` through ``V(c + 1, y - 1)`` and
``H(c + 1, y + 1)`` through ``V(c + 1, y)``, the diagonal neighbours of a Clements
lattice. Each vertical TBU carries one lattice path (set to whichever of bar or cross
joins its two ends), so its heaters are a free phase on that path.

For ``N`` modes the block of pair ``(m, m + 1)`` in lattice column ``c`` is ``H(c, m + 1)``
(``m`` of ``c``'s parity); the rows ``y = 0`` and ``y = N`` hold pass-throughs that turn
an idle edge mode back into the lattice. Mode ``j`` enters through ``V(0, j)`` from the
west edge (vertex row ``j`` for even ``j``, ``j + 1`` for odd) and leaves through
``V(C, j)`` on the east edge, so a square mesh of ``R`` rows and ``C`` columns holds an
``N``-mode lattice for ``N <= R`` and ``N <= C`` (columns past ``N`` are set to pass each
mode on). The geometry and every port are read from the mesh's own links, never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photonics.configuration import hop_state
from photonics.errors import StateError
from photonics.topology import Mesh


@dataclass(frozen=True)
class Lattice:
    """An ``n``-mode lattice on a square mesh.

    Attributes:
        n: modes.
        inputs, outputs: mesh ports of modes 0..n-1 (west, east).
        blocks: ``{(column, m): (tbu, top_in, top_out)}``: the TBU of the pair ``(m, m+1)``
            in that lattice column, the local port where mode ``m`` enters and the one where
            it leaves (the rest follows: the other two ports carry ``m + 1``).
        fixed: ``{tbu: (entry, exit)}``: pass-throughs and the vertical waveguides.
    """

    n: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    blocks: dict[tuple[int, int], tuple[int, int, int]]
    fixed: dict[int, tuple[int, int]]

    @property
    def tbus(self) -> np.ndarray:
        """Every TBU the lattice uses, sorted."""
        return np.array(sorted({t for t, _, _ in self.blocks.values()} | set(self.fixed)), dtype=np.int64)

    def stays_fraction_is_bar(self, block: tuple[int, int]) -> bool:
        """Whether mode ``m`` stays on ``m`` through the block's TBU in its bar state."""
        _, top_in, top_out = self.blocks[block]
        return hop_state(top_in, top_out) == "bar"


def _grid(mesh: Mesh) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Horizontal TBUs by (column, row) and vertical ones by (vertex column, upper row)."""
    h, v = {}, {}
    for t, ((xa, ya), (xb, yb)) in enumerate(mesh.tbu_xy):
        if abs(ya - yb) < 1e-9:
            h[(round(min(xa, xb)), round(-ya))] = t
        else:
            v[(round(xa), round(min(-ya, -yb)))] = t
    return h, v


def links_by_tbu(mesh: Mesh) -> dict[tuple[int, int], tuple[int, int]]:
    """``{(tbu_a, tbu_b): (local port on a, local port on b)}`` for every link, both ways."""
    out = {}
    for p, q in mesh.links:
        out[(int(p) // 4, int(q) // 4)] = (int(p) % 4, int(q) % 4)
        out[(int(q) // 4, int(p) // 4)] = (int(q) % 4, int(p) % 4)
    return out


def _edge_port(mesh: Mesh, tbu: int, row: int) -> tuple[int, int]:
    """(mesh port, local TBU port) of ``tbu``'s free end at vertex row ``row``."""
    for n, g in enumerate(mesh.port_tbu_ports):
        if int(g) // 4 == tbu and round(-mesh.tbu_xy[tbu, (int(g) % 4) // 2, 1]) == row:
            return n, int(g) % 4
    raise StateError(f"{mesh.tbu_names[tbu]} has no mesh port at row {row}")


def square_lattice(mesh: Mesh, n: int) -> Lattice:
    """The ``n``-mode lattice on a square mesh (``n <= rows`` and ``n <= cols``)."""
    if mesh.kind != "square":
        raise StateError(f"a unitary is laid out on a square mesh (square:RxC); this mesh is {mesh.kind}")
    if not 2 <= n <= min(mesh.rows, mesh.cols):
        raise StateError(f"a {n}x{n} unitary needs a square mesh of at least {n}x{n} cells; "
                         f"this one is {mesh.rows}x{mesh.cols}")
    h, v = _grid(mesh)
    link = links_by_tbu(mesh)
    cols = mesh.cols
    blocks: dict[tuple[int, int], tuple[int, int, int]] = {}
    fixed: dict[int, tuple[int, int]] = {}
    for c in range(cols):
        for m in range(-1 if c % 2 else 0, n, 2):  # m of c's parity, -1 .. n-1
            t = h[(c, m + 1)]
            top_in, bot_in = link[(t, v[(c, m)])][0] if m >= 0 else -1, link[(t, v[(c, m + 1)])][0] \
                if m + 1 < n else -1
            top_out = link[(t, v[(c + 1, m)])][0] if m >= 0 else -1
            bot_out = link[(t, v[(c + 1, m + 1)])][0] if m + 1 < n else -1
            if m == -1:
                fixed[t] = (bot_in, bot_out)  # idle mode 0 turns back down
            elif m == n - 1:
                fixed[t] = (top_in, top_out)  # idle mode n-1 turns back up
            else:
                blocks[(c, m)] = (t, top_in, top_out)
    for x in range(cols + 1):
        for r in range(n):
            t = v[(x, r)]
            down = (r % 2) == (x % 2)  # the active H west of V is at row r: the path goes down
            west_row, east_row = (r, r + 1) if down else (r + 1, r)
            # on the west and east edges the path starts or ends at the free end of V
            west = link[(t, h[(x - 1, west_row)])][0] if x > 0 else _edge_port(mesh, t, west_row)[1]
            east = link[(t, h[(x, east_row)])][0] if x < cols else _edge_port(mesh, t, east_row)[1]
            fixed[t] = (west, east)
    inputs = tuple(_edge_port(mesh, v[(0, j)], j if j % 2 == 0 else j + 1)[0] for j in range(n))
    outputs = tuple(_edge_port(mesh, v[(cols, j)], j if (j % 2) == ((cols - 1) % 2) else j + 1)[0]
                    for j in range(n))
    return Lattice(n, inputs, outputs, blocks, fixed)
