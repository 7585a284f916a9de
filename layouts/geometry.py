"""Placement of a hexagonal mesh as a Manhattan brick wall (pure geometry, no gdsfactory).

A hexagonal mesh of pointy-top cells is topologically a brick wall: every slanted
hexagon side becomes a horizontal TBU and every vertical side stays vertical. The
vertices of the mesh map to an integer lattice ``(u, k)``: ``u`` counts half cell widths
from the left and ``k`` is the zig-zag line (line 0 holds the top vertices of row 0).
Drawn with a horizontal vertex pitch ``Lx`` and a vertical pitch ``Ly`` (µm), each
horizontal TBU spans ``(u, k) -> (u+1, k)`` and each vertical one ``(u, k) -> (u, k+1)``.

This is the one place that decides where TBUs go: a future hexagonal (0/±60°) drawing
replaces :func:`place_mesh` and keeps everything else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from layouts.errors import LayoutError
from photonics.topology import Mesh

SQRT3_2 = math.sqrt(3) / 2


@dataclass(frozen=True)
class TbuPlacement:
    """Where one TBU cell goes: origin (end a, µm) and rotation (degrees, CCW)."""

    x: float
    y: float
    rotation: int
    vertical: bool


@dataclass(frozen=True)
class PortExit:
    """How a mesh port leaves the mesh: its TBU port and the compass direction it heads."""

    name: str
    tbu: int
    label: str  # a0 | a1 | b0 | b1
    vertex: tuple[int, int]
    direction: str  # N | S | W | E


@dataclass(frozen=True)
class Placement:
    """The whole mesh placed on the brick-wall lattice (lengths in µm)."""

    pitch_x: float
    pitch_y: float
    tbus: tuple[TbuPlacement, ...]
    vertices: tuple[tuple[tuple[int, int], tuple[int, int]], ...]  # (u, k) of ends a, b
    exits: tuple[PortExit, ...]
    n_lines: int  # zig-zag lines 0..n_lines-1

    def line_y(self, k: int) -> float:
        """The y of zig-zag line k (µm); line 0 is at y = 0, lines go down."""
        return -k * self.pitch_y


def lattice(mesh: Mesh) -> np.ndarray:
    """(n_tbus, 2, 2) integer lattice coordinates ``(u, k)`` of each TBU's ends a and b.

    Raises:
        LayoutError: the mesh is not hexagonal, or its coordinates are not on the
            hexagonal lattice of :func:`photonics.topology.hexagonal`.
    """
    if mesh.kind != "hexagonal":
        raise LayoutError(
            f"the layout draws hexagonal meshes only, not {mesh.kind!r}; use smartlight or "
            "hex:RxC (square and triangular meshes have no brick-wall drawing yet)")
    xy = mesh.tbu_xy
    u = xy[..., 0] / SQRT3_2
    k = np.floor((1.0 - xy[..., 1]) / 1.5 + 1e-6)
    ui = np.rint(u)
    if np.abs(u - ui).max() > 1e-6:
        raise LayoutError("mesh coordinates are not on the hexagonal lattice; regenerate it with hex:RxC")
    uk = np.stack([ui, k], axis=-1).astype(int)
    d = np.abs(uk[:, 1] - uk[:, 0])
    ok = ((d[:, 0] == 1) & (d[:, 1] == 0)) | ((d[:, 0] == 0) & (d[:, 1] == 1))
    if not ok.all():
        bad = mesh.tbu_names[int(np.argmin(ok))]
        raise LayoutError(f"TBU {bad} is neither horizontal nor vertical in the brick wall; "
                          "the mesh is not a regular hexagonal mesh")
    return uk


def place_mesh(mesh: Mesh, tbu_length: float, half_gap_x: float, half_gap_y: float) -> Placement:
    """Place every TBU of a hexagonal mesh on the brick wall.

    Args:
        mesh: a hexagonal topology.
        tbu_length: port-to-port length of the TBU cell (µm).
        half_gap_x: distance from a vertex to the ends of its horizontal TBUs (µm).
        half_gap_y: distance from a vertex to the ends of its vertical TBUs (µm).
    """
    uk = lattice(mesh)
    pitch_x = tbu_length + 2 * half_gap_x
    pitch_y = tbu_length + 2 * half_gap_y
    u0 = int(uk[..., 0].min())
    uk = uk - np.array([u0, 0])
    tbus = []
    for (ua, ka), (ub, kb) in uk:
        xa, ya = ua * pitch_x, -ka * pitch_y
        if ka == kb:  # horizontal: end a sits half_gap_x from its vertex towards b
            step = 1 if ub > ua else -1
            tbus.append(TbuPlacement(float(xa + step * half_gap_x), float(ya), 0 if step > 0 else 180, False))
        else:
            step = 1 if kb > ka else -1  # +1: a above b, the TBU points down (south)
            tbus.append(TbuPlacement(float(xa), float(ya - step * half_gap_y), 270 if step > 0 else 90, True))
    n_lines = int(uk[..., 1].max()) + 1
    exits = _port_exits(mesh, uk, n_lines)
    vertices = tuple((tuple(map(int, a)), tuple(map(int, b))) for a, b in uk)
    return Placement(pitch_x, pitch_y, tuple(tbus), vertices, exits, n_lines)


def _port_exits(mesh: Mesh, uk: np.ndarray, n_lines: int) -> tuple[PortExit, ...]:
    """Direction each mesh port leaves in: N/S on the top/bottom line, else W/E.

    Ports on the first and last zig-zag line go straight up or down (nothing lies
    beyond them); a boundary vertex on an inner line is always the leftmost or rightmost
    vertex of its line in a hexagonal mesh, so its ports leave sideways.
    """
    by_line: dict[int, list[int]] = {}
    for ends in uk:
        for u, k in ends:
            by_line.setdefault(int(k), []).append(int(u))
    exits = []
    for name, g in zip(mesh.port_names, mesh.port_tbu_ports, strict=True):
        tbu, local = divmod(int(g), 4)
        u, k = (int(v) for v in uk[tbu, 0 if local < 2 else 1])
        if k == 0:
            direction = "N"
        elif k == n_lines - 1:
            direction = "S"
        elif u == min(by_line[k]):
            direction = "W"
        elif u == max(by_line[k]):
            direction = "E"
        else:
            raise LayoutError(f"{name} is on an inner vertex ({u}, {k}) the brick wall cannot reach")
        exits.append(PortExit(name, tbu, ("a0", "a1", "b0", "b1")[local], (u, k), direction))
    return tuple(exits)
