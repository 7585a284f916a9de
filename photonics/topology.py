"""Mesh topologies: hexagonal, square and triangular meshes of tunable basic units (TBUs).

A TBU is one edge of a cell. Each TBU is a 2x2 Mach-Zehnder with two ends, ``a`` (at its
first vertex) and ``b`` (at its second), and two arms, ``top`` (arm 0, on the left when
walking from ``a`` to ``b``) and ``bot`` (arm 1, on the right). Its four optical ports
carry local indices::

    0 = a0 (end a, top-arm side)     2 = b0 (end b, top-arm side)
    1 = a1 (end a, bottom-arm side)  3 = b1 (end b, bottom-arm side)

Bar routes a0<->b0 and a1<->b1; cross routes a0<->b1 and a1<->b0.

At a vertex the TBUs meeting there are sorted counter-clockwise; between two neighbours
lies a gap, and one waveguide link crosses each gap, joining the port of each TBU that
faces it. A vertex with the lattice's full number of TBUs (3 hexagonal, 4 square,
6 triangular) closes every gap. Any other vertex is on the boundary: its widest gap
faces outside, is left open, and the two TBU ports facing it are mesh ports. In a
hexagonal mesh this gives the SmartLight rule: three TBUs are joined pairwise, and two
TBUs share one link and contribute one free end each.

Names (stable, human readable, shared with layouts and drivers):

* ``tbu:<row>.<col>.<side>``: the first cell in row-major order that owns the edge,
  and the side index within that cell; sides are numbered clockwise starting from the
  edge that leaves the cell's top vertex (hexagon) or top-left corner (square,
  triangle). Row 0 is the top row, column 0 the leftmost.
* ``heater:<ch>``: channel ``2*i`` heats the top arm of TBU ``i``, ``2*i+1`` the bottom.
  TBU index ``i`` is the order of ``Mesh.tbu_names``.
* ``port:<n>``: mesh ports numbered clockwise around the mesh centre, starting from the
  9 o'clock direction (west), so port 0 is the first port above the west axis on the
  left edge.

Coordinates are in units of the TBU length (one cell edge = 1).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from photonics.atomic import atomic_write_text
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.errors import MeshSpecError

SCHEMA = "lumion.mesh"
SCHEMA_VERSION = 1
PORT_LABELS = ("a0", "a1", "b0", "b1")
FULL_DEGREE = {"hexagonal": 3, "square": 4, "triangular": 6}
KINDS = tuple(FULL_DEGREE)
_MAX_CELLS = 10_000


@dataclass(frozen=True, eq=False)
class Mesh:
    """A mesh topology: TBUs, waveguide links between TBU ports, and mesh ports.

    Attributes:
        kind: "hexagonal", "square", "triangular" or "custom".
        rows, cols: cell counts (0 for custom meshes).
        tbu_names: one name per TBU; the position is the TBU index.
        tbu_xy: (n_tbus, 2, 2) coordinates of ends a and b, in TBU lengths.
        links: (n_links, 2) pairs of global TBU port indices (``4*tbu + local``).
        port_tbu_ports: (n_ports,) global TBU port index of mesh port n.
        port_names: one name per mesh port.
    """

    kind: str
    rows: int
    cols: int
    tbu_names: tuple[str, ...]
    tbu_xy: np.ndarray
    links: np.ndarray
    port_tbu_ports: np.ndarray
    port_names: tuple[str, ...]
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        _validate(self)
        index = {name: i for i, name in enumerate(self.tbu_names)}
        index.update({name: i for i, name in enumerate(self.port_names)})
        object.__setattr__(self, "_index", index)

    # -- counts ---------------------------------------------------------------------
    @property
    def n_tbus(self) -> int:
        """Number of TBUs."""
        return len(self.tbu_names)

    @property
    def n_ports(self) -> int:
        """Number of mesh (optical I/O) ports."""
        return len(self.port_names)

    @property
    def n_heaters(self) -> int:
        """Number of heaters (two per TBU)."""
        return 2 * self.n_tbus

    @property
    def n_links(self) -> int:
        """Number of internal waveguide links."""
        return len(self.links)

    # -- names ----------------------------------------------------------------------
    def tbu_index(self, name: str | int) -> int:
        """Index of a TBU given its name (``tbu:r.c.s``) or index."""
        if isinstance(name, bool | np.bool_):  # `true` in a file is no TBU 1
            raise MeshSpecError(f"TBU {name!r} is a boolean; give `tbu:<r>.<c>.<s>` or an index")
        if isinstance(name, int | np.integer):
            if not 0 <= int(name) < self.n_tbus:
                raise MeshSpecError(f"TBU index {name} out of range 0..{self.n_tbus - 1}")
            return int(name)
        if name in self._index and name.startswith("tbu:"):
            return self._index[name]
        raise MeshSpecError(f"unknown TBU {name!r}; `lumion mesh` lists the TBU names")

    def port_index(self, name: str | int) -> int:
        """Index of a mesh port given ``port:n``, ``n`` or an int."""
        if isinstance(name, str):
            text = name.strip()
            if text.isdigit():
                name = int(text)
            elif text in self._index and text.startswith("port:"):
                return self._index[text]
            else:
                raise MeshSpecError(
                    f"unknown port {name!r}; give `port:<n>` or a number 0..{self.n_ports - 1}"
                )
        # `"src": true` in a file is no port 1, and 2.7 is no port 2
        if isinstance(name, bool | np.bool_) or not isinstance(name, int | np.integer):
            raise MeshSpecError(f"port {name!r} is not a port; give `port:<n>` or a number "
                                f"0..{self.n_ports - 1}")
        if not 0 <= int(name) < self.n_ports:
            raise MeshSpecError(f"port {name} out of range 0..{self.n_ports - 1}")
        return int(name)

    def heater_names(self) -> list[str]:
        """Heater names in channel order (``heater:<ch>``)."""
        return [f"heater:{ch}" for ch in range(self.n_heaters)]

    def heater_channel(self, tbu: str | int, arm: str) -> int:
        """Driver channel of a TBU's heater; ``arm`` is "top" or "bot"."""
        if arm not in ("top", "bot"):
            raise MeshSpecError(f"arm must be 'top' or 'bot', not {arm!r}")
        return 2 * self.tbu_index(tbu) + (arm == "bot")

    def tbu_port_name(self, global_port: int) -> str:
        """Readable name of a TBU port, e.g. ``tbu:0.0.1/b0``."""
        return f"{self.tbu_names[global_port // 4]}/{PORT_LABELS[global_port % 4]}"

    # -- geometry -------------------------------------------------------------------
    def tbu_centers(self) -> np.ndarray:
        """(n_tbus, 2) midpoints of the TBUs, in TBU lengths."""
        return self.tbu_xy.mean(axis=1)

    def port_xy(self) -> np.ndarray:
        """(n_ports, 2) positions of the mesh ports (just inside the TBU end)."""
        return np.array([_tbu_port_xy(self.tbu_xy, int(g)) for g in self.port_tbu_ports])

    def peer(self) -> np.ndarray:
        """(4*n_tbus,) for each TBU port: the linked TBU port, or ``-1 - n`` for mesh port n."""
        peer = np.full(4 * self.n_tbus, -(10**9), dtype=np.int64)
        peer[self.links[:, 0]] = self.links[:, 1]
        peer[self.links[:, 1]] = self.links[:, 0]
        peer[self.port_tbu_ports] = -1 - np.arange(self.n_ports)
        return peer

    def summary(self) -> dict[str, Any]:
        """Counts and names, as printed by ``lumion mesh --json``."""
        return {
            "kind": self.kind,
            "rows": self.rows,
            "cols": self.cols,
            "n_tbus": self.n_tbus,
            "n_ports": self.n_ports,
            "n_heaters": self.n_heaters,
            "n_links": self.n_links,
            "ports": list(self.port_names),
            "tbus": list(self.tbu_names),
            "heaters": [
                {"channel": 2 * i + k, "tbu": name, "arm": ("top", "bot")[k]}
                for i, name in enumerate(self.tbu_names)
                for k in (0, 1)
            ],
        }

    # -- serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Versioned JSON-ready description of the topology."""
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "kind": self.kind,
            "rows": self.rows,
            "cols": self.cols,
            "tbus": [
                {"name": n, "a": xy[0].round(9).tolist(), "b": xy[1].round(9).tolist()}
                for n, xy in zip(self.tbu_names, self.tbu_xy, strict=True)
            ],
            "links": [[self.tbu_port_name(int(p)), self.tbu_port_name(int(q))] for p, q in self.links],
            "ports": [
                {"name": n, "tbu_port": self.tbu_port_name(int(g))}
                for n, g in zip(self.port_names, self.port_tbu_ports, strict=True)
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Mesh:
        """Build a mesh from :meth:`to_dict` output, validating every field."""
        return _mesh_from_dict(data)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the topology as JSON, atomically (the old file survives a failed write)."""
        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Mesh:
        """Read a topology written by :meth:`save`."""
        try:
            data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "mesh file"))
        except FileNotFoundError as exc:
            raise MeshSpecError(f"mesh file {path} not found") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MeshSpecError(f"mesh file {path} is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise MeshSpecError(f"mesh file {path} is nested too deeply to be a mesh") from exc
        except OSError as exc:
            raise MeshSpecError(f"mesh file {path} cannot be read: {exc.strerror or exc}") from exc
        return _mesh_from_dict(data, source=str(path))


# ---------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------
def hexagonal(rows: int, cols: int) -> Mesh:
    """Hexagonal mesh of ``rows x cols`` pointy-top cells; odd rows shift right by half.

    Example:
        >>> m = hexagonal(3, 6)
        >>> (m.n_tbus, m.n_ports, m.n_heaters)
        (71, 40, 142)
    """
    _check_size(rows, cols)
    cells = []
    for r in range(rows):
        for c in range(cols):
            cx, cy = math.sqrt(3) * (c + 0.5 * (r % 2)), -1.5 * r
            angles = [math.radians(90 - 60 * k) for k in range(6)]
            cells.append(((r, c), [(cx + math.cos(a), cy + math.sin(a)) for a in angles]))
    return _build("hexagonal", rows, cols, cells)


def square(rows: int, cols: int) -> Mesh:
    """Square mesh of ``rows x cols`` unit cells.

    Example:
        >>> square(2, 2).n_tbus
        12
    """
    _check_size(rows, cols)
    cells = [
        ((r, c), [(c, -r), (c + 1, -r), (c + 1, -r - 1), (c, -r - 1)])
        for r in range(rows)
        for c in range(cols)
    ]
    return _build("square", rows, cols, cells)


def triangular(rows: int, cols: int) -> Mesh:
    """Triangular mesh: ``rows`` strips of ``cols`` alternating triangles each.

    Example:
        >>> triangular(1, 3).n_tbus
        7
    """
    _check_size(rows, cols)
    h = math.sqrt(3) / 2
    cells = []
    for r in range(rows):
        top_off, bot_off = 0.5 * (r % 2), 0.5 * ((r + 1) % 2)
        y_top, y_bot = -r * h, -(r + 1) * h

        def top(j: int, o: float = top_off, y: float = y_top) -> tuple[float, float]:
            return (j + o, y)

        def bot(j: int, o: float = bot_off, y: float = y_bot) -> tuple[float, float]:
            return (j + o, y)

        for m in range(cols):
            k = m // 2
            if bot_off > top_off:  # bottom row shifted right: start with a down triangle
                tri = [top(k), top(k + 1), bot(k)] if m % 2 == 0 else [bot(k), top(k + 1), bot(k + 1)]
            else:
                tri = [top(k), bot(k + 1), bot(k)] if m % 2 == 0 else [top(k), top(k + 1), bot(k + 1)]
            cells.append(((r, m), _clockwise_from_top_left(tri)))
    return _build("triangular", rows, cols, cells)


def smartlight() -> Mesh:
    """The 3 x 6 hexagonal preset: 71 TBUs, 40 ports, 142 heaters (SmartLight size)."""
    return hexagonal(3, 6)


_SPEC = re.compile(r"^(hex|hexagonal|square|tri|triangular):(\d+)x(\d+)$")
_GENERATORS = {"hex": hexagonal, "hexagonal": hexagonal, "square": square,
               "tri": triangular, "triangular": triangular}


def mesh_from_spec(spec: str) -> Mesh:
    """Build a mesh from a command-line description.

    Accepts ``smartlight``, ``hex:RxC``, ``square:RxC``, ``triangular:RxC`` or the path of
    a JSON file written by :meth:`Mesh.save`.

    Example:
        >>> mesh_from_spec("square:2x3").n_tbus
        17
    """
    text = spec.strip()
    if text.lower() == "smartlight":
        return smartlight()
    match = _SPEC.match(text.lower())
    if match:
        kind, rows, cols = match.group(1), int(match.group(2)), int(match.group(3))
        try:
            return _GENERATORS[kind](rows, cols)
        except MeshSpecError as exc:  # a size out of range: say which mesh (not "cannot read mesh file")
            raise MeshSpecError(f"mesh {spec!r}: {exc}") from exc
    if text.endswith(".json") or os.path.exists(text):
        return Mesh.load(text)
    raise MeshSpecError(
        f"unknown mesh {spec!r}: use smartlight, hex:RxC, square:RxC, triangular:RxC "
        "or the path of a mesh JSON file (e.g. hex:3x6)"
    )


# ---------------------------------------------------------------------------------------
# Construction from cells
# ---------------------------------------------------------------------------------------
def _check_size(rows: int, cols: int) -> None:
    if not (isinstance(rows, int) and isinstance(cols, int)) or rows < 1 or cols < 1:
        raise MeshSpecError(f"mesh size must be positive integers, got {rows} x {cols}")
    if rows * cols > _MAX_CELLS:
        raise MeshSpecError(f"{rows} x {cols} cells is more than the {_MAX_CELLS} supported")


def _clockwise_from_top_left(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    cx = sum(p[0] for p in pts) / len(pts)
    cy = sum(p[1] for p in pts) / len(pts)
    ordered = sorted(pts, key=lambda p: -math.atan2(p[1] - cy, p[0] - cx))
    start = min(range(len(ordered)), key=lambda i: (-round(ordered[i][1], 6), ordered[i][0]))
    return ordered[start:] + ordered[:start]


def _build(kind: str, rows: int, cols: int, cells: list) -> Mesh:
    vertex_id: dict[tuple[int, int], int] = {}
    vertex_xy: list[tuple[float, float]] = []

    def vid(p: tuple[float, float]) -> int:
        key = (round(p[0] * 1e6), round(p[1] * 1e6))
        if key not in vertex_id:
            vertex_id[key] = len(vertex_xy)
            vertex_xy.append(p)
        return vertex_id[key]

    edge_tbu: dict[frozenset[int], int] = {}
    names: list[str] = []
    ends: list[tuple[int, int]] = []
    for (r, c), corners in cells:
        ids = [vid(p) for p in corners]
        for side in range(len(ids)):
            a, b = ids[side], ids[(side + 1) % len(ids)]
            key = frozenset((a, b))
            if key not in edge_tbu:
                edge_tbu[key] = len(names)
                names.append(f"tbu:{r}.{c}.{side}")
                ends.append((a, b))
    xy = np.array(vertex_xy, dtype=float)
    tbu_xy = np.array([[xy[a], xy[b]] for a, b in ends])

    incident: dict[int, list[tuple[float, int]]] = {}
    for t, (a, b) in enumerate(ends):
        for here, there, at_a in ((a, b, True), (b, a, False)):
            d = xy[there] - xy[here]
            angle = math.atan2(d[1], d[0]) % (2 * math.pi)
            # CCW-facing port: a0 when leaving end a, b1 when leaving end b; CW-facing: a1 / b0.
            incident.setdefault(here, []).append((angle, t, 4 * t + (0 if at_a else 3),
                                                  4 * t + (1 if at_a else 2)))

    links: list[tuple[int, int]] = []
    free: list[tuple[int, float]] = []  # (global port, clockwise-sort key)
    full = FULL_DEGREE[kind]
    for _v, items in incident.items():
        items.sort()
        d = len(items)
        gaps = [((items[(k + 1) % d][0] - items[k][0]) % (2 * math.pi)) or 2 * math.pi
                for k in range(d)]
        open_gap = None if d >= full else int(np.argmax(gaps))
        for k in range(d):
            ccw_port, cw_port_next = items[k][2], items[(k + 1) % d][3]
            if k == open_gap:
                free.extend([(ccw_port, 0.0), (cw_port_next, 0.0)])
            else:
                links.append((ccw_port, cw_port_next))

    centre = xy.mean(axis=0)
    keyed = []
    for g, _ in free:
        p = _tbu_port_xy(tbu_xy, g) - centre
        keyed.append(((math.pi - math.atan2(p[1], p[0])) % (2 * math.pi), g))
    keyed.sort()
    port_tbu_ports = np.array([g for _, g in keyed], dtype=np.int64)
    return Mesh(
        kind=kind,
        rows=rows,
        cols=cols,
        tbu_names=tuple(names),
        tbu_xy=tbu_xy,
        links=np.array(sorted(links), dtype=np.int64).reshape(-1, 2),
        port_tbu_ports=port_tbu_ports,
        port_names=tuple(f"port:{n}" for n in range(len(port_tbu_ports))),
    )


def _tbu_port_xy(tbu_xy: np.ndarray, g: int) -> np.ndarray:
    """Position of TBU port ``g``: a little inside the TBU end, on the arm's side."""
    t, local = divmod(g, 4)
    a, b = tbu_xy[t]
    end, other = (a, b) if local < 2 else (b, a)
    d = (b - a) / np.linalg.norm(b - a)
    left = np.array([-d[1], d[0]])
    side = left if local in (0, 2) else -left  # top arm (a0, b0) on the left of a->b
    return end + 0.2 * (other - end) + 0.08 * side


# ---------------------------------------------------------------------------------------
# Validation and loading
# ---------------------------------------------------------------------------------------
def _validate(mesh: Mesh) -> None:
    n = len(mesh.tbu_names)
    if n == 0:
        raise MeshSpecError("a mesh needs at least one TBU")
    if len(set(mesh.tbu_names)) != n:
        raise MeshSpecError("TBU names must be unique")
    if len(set(mesh.port_names)) != len(mesh.port_names):
        raise MeshSpecError("port names must be unique")
    if mesh.tbu_xy.shape != (n, 2, 2):
        raise MeshSpecError(f"tbu_xy must have shape ({n}, 2, 2), got {mesh.tbu_xy.shape}")
    if len(mesh.port_tbu_ports) != len(mesh.port_names):
        raise MeshSpecError("one TBU port per mesh port is required")
    used = np.concatenate([mesh.links.reshape(-1), mesh.port_tbu_ports])
    if used.size and (used.min() < 0 or used.max() >= 4 * n):
        raise MeshSpecError("a link or port refers to a TBU port that does not exist")
    counts = np.bincount(used, minlength=4 * n)
    if (counts > 1).any():
        bad = int(np.argmax(counts > 1))
        raise MeshSpecError(f"TBU port {bad // 4}/{PORT_LABELS[bad % 4]} is used more than once")


def _parse_tbu_port(text: Any, index: dict[str, int], where: str) -> int:
    if not isinstance(text, str) or "/" not in text:
        raise MeshSpecError(f"{where}: expected 'tbu:<name>/<a0|a1|b0|b1>', got {text!r}")
    name, label = text.rsplit("/", 1)
    if name not in index or label not in PORT_LABELS:
        raise MeshSpecError(f"{where}: unknown TBU port {text!r}")
    return 4 * index[name] + PORT_LABELS.index(label)


def _mesh_from_dict(data: Any, source: str = "mesh description") -> Mesh:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise MeshSpecError(f"{source} is not a LUMION mesh (expected schema {SCHEMA!r})")
    version = data.get("version")
    if type(version) is not int or version != SCHEMA_VERSION:  # `true` == 1 in Python, not here
        raise MeshSpecError(
            f"{source} has mesh schema version {version!r}; this software reads version "
            f"{SCHEMA_VERSION} (upgrade lumion or re-export the mesh)"
        )
    try:
        tbus = data["tbus"]
        names = [str(t["name"]) for t in tbus]
        tbu_xy = np.array([[t["a"], t["b"]] for t in tbus], dtype=float).reshape(len(tbus), 2, 2)
        index = {name: i for i, name in enumerate(names)}
        links = [
            (_parse_tbu_port(p, index, f"{source} link {k}"),
             _parse_tbu_port(q, index, f"{source} link {k}"))
            for k, (p, q) in enumerate(data["links"])
        ]
        ports = data["ports"]
        port_names = tuple(str(p["name"]) for p in ports)
        port_tbu = [_parse_tbu_port(p["tbu_port"], index, f"{source} port {p['name']}")
                    for p in ports]
        kind = str(data.get("kind", "custom"))
        rows, cols = data.get("rows", 0), data.get("cols", 0)
        if type(rows) is not int or type(cols) is not int or rows < 0 or cols < 0:
            raise ValueError(f"rows and cols must be integers >= 0, not {rows!r} x {cols!r}")
        if not np.isfinite(tbu_xy).all():
            raise ValueError("TBU end points must be finite numbers")
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MeshSpecError(f"{source} is malformed: {exc!r}") from exc
    if kind not in (*KINDS, "custom"):
        raise MeshSpecError(f"{source}: unknown mesh kind {kind!r}")
    return Mesh(
        kind=kind,
        rows=rows,
        cols=cols,
        tbu_names=tuple(names),
        tbu_xy=tbu_xy,
        links=np.array(links, dtype=np.int64).reshape(-1, 2),
        port_tbu_ports=np.array(port_tbu, dtype=np.int64),
        port_names=port_names,
    )
