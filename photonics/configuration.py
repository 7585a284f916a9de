"""Routes and configurations: what the mesh should do, independent of any chip's offsets.

A :class:`Route` is a light path from one mesh port to another, a sequence of
:class:`Hop` (TBU, entry port, exit port) whose entry/exit pair fixes the TBU's state.
A :class:`Configuration` is the per-TBU split (cross fraction: 0 = bar, 1 = cross) the
mesh must realise, together with the routes that asked for it. Turning it into heater
phases needs the chip's passive offsets (:meth:`Configuration.heater_state`); turning it
into currents needs a calibration map (``calibration``).

Local TBU ports: 0 = a0, 1 = a1, 2 = b0, 3 = b1 (see ``photonics.topology``).

A configuration belongs to one mesh. Made by :meth:`Configuration.from_routes`,
:meth:`Configuration.parked` or :meth:`Configuration.from_dict` it carries that mesh, its
JSON form records the mesh's name and :func:`mesh_fingerprint`, and
:meth:`Configuration.check_mesh` (called by the loaders and by the mesh controller) refuses
it on any other mesh with :class:`MeshMismatchError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from photonics.errors import StateError
from photonics.physics import split_phases
from photonics.state import MeshState
from photonics.topology import PORT_LABELS, Mesh, hexagonal, square, triangular

log = logging.getLogger(__name__)

SCHEMA = "lumion.configuration"
# Version 2 records the mesh ("mesh", "mesh_fingerprint"); version 1 files are still read
# (see Configuration.from_dict for the rule that keeps them off the wrong mesh).
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
FINGERPRINT_CHARS = 16

BAR_PAIRS = frozenset({(0, 2), (2, 0), (1, 3), (3, 1)})
CROSS_PAIRS = frozenset({(0, 3), (3, 0), (1, 2), (2, 1)})
# Where TBUs on no route sit; see docs/routing.md. In a hexagonal mesh all-cross parks
# send stray light along straight zigzag lines out to the chip edge, while all-bar parks
# close every unused cell into a hexagonal ring that gathers leaked light and spills it
# into nearby ports (6 dB worse worst leakage, measured); cross also needs no heater
# power with ideal couplers at zero offset.
PARK_STATE = "cross"


class MeshMismatchError(StateError):
    """A configuration was made for another mesh than the one it is offered to."""


_FINGERPRINTS: weakref.WeakKeyDictionary[Mesh, str] = weakref.WeakKeyDictionary()
_SHORT_KIND = {"hexagonal": "hex", "square": "square", "triangular": "triangular"}
_GENERATORS = {"hexagonal": hexagonal, "square": square, "triangular": triangular}


def mesh_fingerprint(mesh: Mesh) -> str:
    """A short hash (16 hex digits) of a mesh's topology: TBU names, links and ports.

    TBU order (it fixes heater channels) and port order (it fixes ``port:<n>``) count;
    the order links are listed in and the drawing coordinates do not. Two meshes of the
    same size but different wiring or names get different fingerprints.

    Example:
        >>> mesh_fingerprint(hexagonal(3, 6)) == mesh_fingerprint(hexagonal(3, 6))
        True
        >>> mesh_fingerprint(hexagonal(1, 2)) == mesh_fingerprint(hexagonal(3, 6))
        False
    """
    cached = _FINGERPRINTS.get(mesh)
    if cached is None:
        links = sorted(tuple(sorted((int(p), int(q)))) for p, q in mesh.links)
        text = "\n".join([
            "tbus:" + ",".join(mesh.tbu_names),
            "links:" + ",".join(f"{p}-{q}" for p, q in links),
            "ports:" + ",".join(f"{n}={int(g)}" for n, g in zip(mesh.port_names, mesh.port_tbu_ports,
                                                               strict=True)),
        ])
        cached = hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]
        _FINGERPRINTS[mesh] = cached
    return cached


@lru_cache(maxsize=32)
def _generated_fingerprint(kind: str, rows: int, cols: int) -> str:
    return mesh_fingerprint(_GENERATORS[kind](rows, cols))


def spec_label(kind: str, rows: int, cols: int) -> str | None:
    """The ``--mesh`` name of the generated mesh ``kind`` ``rows`` x ``cols`` (what a calibration
    map records), or None for a kind no generator makes. Whether a recorded mesh really is the
    generated one is the fingerprint's business, not this name's.

    Example:
        >>> spec_label("hexagonal", 3, 6), spec_label("square", 4, 4), spec_label("custom", 1, 1)
        ('smartlight', 'square:4x4', None)
    """
    if kind not in _SHORT_KIND:
        return None
    return "smartlight" if (kind, rows, cols) == ("hexagonal", 3, 6) else f"{_SHORT_KIND[kind]}:{rows}x{cols}"


def mesh_label(mesh: Mesh) -> str:
    """The mesh's name as ``--mesh`` takes it: ``smartlight``, ``hex:1x2``, ... or ``custom``.

    A mesh read from a file gets the generator's name only when its topology is exactly the
    generated one; anything else is ``custom`` (the fingerprint tells customs apart).

    Example:
        >>> mesh_label(hexagonal(3, 6)), mesh_label(hexagonal(1, 2))
        ('smartlight', 'hex:1x2')
    """
    if mesh.kind not in _GENERATORS or mesh.rows < 1 or mesh.cols < 1:
        return "custom"
    if _generated_fingerprint(mesh.kind, mesh.rows, mesh.cols) != mesh_fingerprint(mesh):
        return "custom"
    return spec_label(mesh.kind, mesh.rows, mesh.cols) or "custom"


def describe_mesh(label: str, fingerprint: str, n_tbus: int | None = None) -> str:
    """``smartlight (71 TBUs, fingerprint 1a2b...)``: how error messages name a mesh."""
    size = f"{n_tbus} TBUs, " if n_tbus is not None else ""
    return f"{label} ({size}fingerprint {fingerprint})"


def _mesh_mismatch(source: str, made_for: str, offered: Mesh,
                   made_for_label: str | None = None) -> MeshMismatchError:
    """The one-line refusal: ``source`` was made for ``made_for``, not for ``offered``; when the mesh
    it was made for has a ``--mesh`` name (``made_for_label``), the refusal offers it first: a file
    used without its mesh (the default is smartlight) is the likelier mistake than a wrong file.
    """
    here = describe_mesh(mesh_label(offered), mesh_fingerprint(offered), offered.n_tbus)
    other = f"give the mesh it was made for (--mesh {made_for_label}) or " \
        if made_for_label not in (None, "custom", mesh_label(offered)) else ""
    return MeshMismatchError(f"{source} was made for {made_for} and cannot be used on mesh {here}; {other}"
                             f"plan it again for {mesh_label(offered)} (e.g. lumion route --mesh ... --json)")


def _is_fraction(value: Any) -> bool:
    """A JSON number in [0, 1] (not a bool, a string or NaN): a TBU's cross fraction."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def hop_state(entry: int, exit_: int) -> str:
    """"bar" or "cross" for light entering local port ``entry`` and leaving at ``exit_``."""
    if (entry, exit_) in BAR_PAIRS:
        return "bar"
    if (entry, exit_) in CROSS_PAIRS:
        return "cross"
    raise StateError(
        f"no TBU state takes light from {PORT_LABELS[entry]} to {PORT_LABELS[exit_]} "
        "(a route must go from one end of a TBU to the other)"
    )


@dataclass(frozen=True)
class Hop:
    """One TBU on a route: light enters at local port ``entry`` and leaves at ``exit``."""

    tbu: int
    entry: int
    exit: int

    @property
    def state(self) -> str:
        """"bar" or "cross"."""
        return hop_state(self.entry, self.exit)

    @property
    def path(self) -> int:
        """Which of the TBU's two light paths this hop uses, named by its end-a port (0 or 1).

        In bar the paths are a0-b0 and a1-b1; in cross a0-b1 and a1-b0. Two routes may
        share a TBU only in the same state and on different paths.
        """
        return self.entry if self.entry < 2 else self.exit


@dataclass(frozen=True)
class Route:
    """A path from mesh port ``src`` to mesh port ``dst`` (indices) through ``hops``."""

    src: int
    dst: int
    hops: tuple[Hop, ...]

    @property
    def tbus(self) -> tuple[int, ...]:
        """TBU indices in path order."""
        return tuple(h.tbu for h in self.hops)

    def states(self) -> dict[int, str]:
        """{TBU index: "bar"|"cross"} that this route needs."""
        return {h.tbu: h.state for h in self.hops}

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form with names."""
        return {
            "src": mesh.port_names[self.src],
            "dst": mesh.port_names[self.dst],
            "tbus": [
                {"tbu": mesh.tbu_names[h.tbu], "state": h.state,
                 "entry": PORT_LABELS[h.entry], "exit": PORT_LABELS[h.exit]}
                for h in self.hops
            ],
        }


@dataclass(frozen=True, eq=False)
class Configuration:
    """Per-TBU cross fraction (n_tbus,) and the routes it realises.

    ``cross_fraction[i]`` is 0 for bar, 1 for cross, anything between for a splitter.
    ``mesh`` is the mesh it was made for (None for a bare array: then only the TBU count
    can be checked); :meth:`check_mesh` refuses it on another mesh.
    """

    cross_fraction: np.ndarray
    routes: tuple[Route, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    mesh: Mesh | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        r = np.asarray(self.cross_fraction, dtype=float)
        if r.ndim != 1 or np.any((r < 0) | (r > 1)) or not np.isfinite(r).all():
            raise StateError("cross_fraction must be a 1-D array of values in [0, 1]")
        if self.mesh is not None and len(r) != self.mesh.n_tbus:
            raise StateError(f"cross_fraction has {len(r)} values; mesh {mesh_label(self.mesh)} has "
                             f"{self.mesh.n_tbus} TBUs")
        object.__setattr__(self, "cross_fraction", r)

    @classmethod
    def parked(cls, mesh: Mesh) -> Configuration:
        """Every TBU in the park state."""
        return cls(np.full(mesh.n_tbus, 1.0 if PARK_STATE == "cross" else 0.0), mesh=mesh)

    def for_mesh(self, mesh: Mesh) -> Configuration:
        """A copy tagged with the mesh it was made for (an already tagged one is checked)."""
        self.check_mesh(mesh)
        return self if self.mesh is mesh else dataclasses.replace(self, mesh=mesh)

    def check_mesh(self, mesh: Mesh, source: str = "the configuration") -> None:
        """Refuse (:class:`MeshMismatchError`) to be used on a mesh it was not made for.

        A configuration that carries its mesh must be on a mesh with the same
        :func:`mesh_fingerprint`; one that does not must at least have one split per TBU.
        """
        if self.mesh is not None:
            if self.mesh is mesh or mesh_fingerprint(self.mesh) == mesh_fingerprint(mesh):
                return
            label = mesh_label(self.mesh)
            made_for = describe_mesh(label, mesh_fingerprint(self.mesh), self.mesh.n_tbus)
            raise _mesh_mismatch(source, f"mesh {made_for}", mesh, label)
        if len(self.cross_fraction) != mesh.n_tbus:
            raise _mesh_mismatch(source, f"a mesh of {len(self.cross_fraction)} TBUs", mesh)

    @classmethod
    def from_routes(cls, mesh: Mesh, routes: list[Route] | tuple[Route, ...]) -> Configuration:
        """Configuration realising ``routes``; TBUs on no route are parked.

        Raises StateError when two routes ask one TBU for different states.
        """
        conf = cls.parked(mesh).cross_fraction.copy()
        wanted: dict[int, str] = {}
        for route in routes:
            for tbu, state in route.states().items():
                if wanted.setdefault(tbu, state) != state:
                    raise StateError(
                        f"routes disagree on {mesh.tbu_names[tbu]}: one needs {wanted[tbu]}, "
                        f"another {state}"
                    )
                conf[tbu] = 1.0 if state == "cross" else 0.0
        return cls(conf, tuple(routes), mesh=mesh)

    def states(self) -> list[str]:
        """"bar", "cross" or "split" per TBU."""
        return ["bar" if r == 0 else "cross" if r == 1 else "split" for r in self.cross_fraction]

    def heater_state(
        self, offset_top: np.ndarray | float = 0.0, offset_bot: np.ndarray | float = 0.0
    ) -> MeshState:
        """Heater phases realising this configuration on arms with the given passive offsets."""
        top, bot = split_phases(self.cross_fraction, offset_top, offset_bot)
        return MeshState(np.asarray(top, float), np.asarray(bot, float))

    def changed_tbus(self, other: Configuration) -> np.ndarray:
        """Indices of TBUs whose split differs from ``other``."""
        return np.flatnonzero(~np.isclose(self.cross_fraction, other.cross_fraction, atol=1e-12))

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form (``lumion.configuration`` version 2), recording ``mesh``.

        Raises MeshMismatchError when the configuration was made for another mesh.
        """
        self.check_mesh(mesh)
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "mesh": mesh_label(mesh),
            "mesh_fingerprint": mesh_fingerprint(mesh),
            "tbus": {name: (s if s != "split" else {"split": float(r)})
                     for name, s, r in zip(mesh.tbu_names, self.states(), self.cross_fraction,
                                           strict=True)},
            "routes": [r.to_dict(mesh) for r in self.routes],
        }

    @classmethod
    def from_dict(cls, data: Any, mesh: Mesh, source: str = "configuration") -> Configuration:
        """Parse :meth:`to_dict` output for ``mesh`` (routes are re-read when present).

        Version 2 must name the mesh it was made for; a fingerprint other than ``mesh``'s
        raises :class:`MeshMismatchError` before anything else is read. Version 1 files
        (written before configurations recorded their mesh) are read only when they list
        exactly the TBUs of ``mesh`` -- as every version-1 writer did -- with a warning; a
        partial one, or one listing another mesh's TBUs, is refused.
        """
        if isinstance(data, dict) and data.get("schema") == "lumion.state":
            raise StateError(f"{source} is a heater state (lumion.state: `lumion synthesize` writes one for "
                             "a unitary or a filter, whose phases a configuration cannot hold), not a "
                             f"configuration ({SCHEMA!r}); set it through a phase-calibrated map "
                             "(calibration.phase_drive.currents_for_state) or run it with `lumion simulate "
                             "--state`")
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise StateError(f"{source} is not a LUMION configuration (expected schema {SCHEMA!r})")
        version = data.get("version")
        if type(version) is not int or version not in READABLE_VERSIONS:  # `true` is not 1
            raise StateError(f"{source}: unsupported configuration version {version!r}; this software "
                             f"reads versions {', '.join(map(str, READABLE_VERSIONS))}")
        tbus, route_list = data.get("tbus", {}), data.get("routes", [])
        if not isinstance(tbus, dict):
            raise StateError(f"{source}: 'tbus' must map TBU names to 'bar', 'cross' or {{'split': r}}")
        if not isinstance(route_list, list):
            raise StateError(f"{source}: 'routes' must be a list of routes")
        if version == 1:
            _check_legacy_mesh(tbus, mesh, source)
        else:
            _check_recorded_mesh(data, mesh, source)
        conf = cls.parked(mesh).cross_fraction.copy()
        for name, setting in tbus.items():
            i = mesh.tbu_index(name)
            if setting in ("bar", "cross"):
                conf[i] = 1.0 if setting == "cross" else 0.0
            elif isinstance(setting, dict) and _is_fraction(setting.get("split")):
                conf[i] = float(setting["split"])
            else:
                raise StateError(f"{source}: TBU {name}: give 'bar', 'cross' or {{'split': r}} "
                                 f"with 0 <= r <= 1, not {setting!r}"[:300])
        routes = []
        for k, r in enumerate(route_list):
            try:
                hops = tuple(Hop(mesh.tbu_index(h["tbu"]), PORT_LABELS.index(h["entry"]),
                                 PORT_LABELS.index(h["exit"])) for h in r["tbus"])
                routes.append(Route(mesh.port_index(r["src"]), mesh.port_index(r["dst"]), hops))
            except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
                raise StateError(f"{source}: route {k} is malformed: {exc!r}"[:300]) from exc
        return cls(conf, tuple(routes), mesh=mesh)


def _check_recorded_mesh(data: dict[str, Any], mesh: Mesh, source: str) -> None:
    """Version 2: the recorded mesh fingerprint must be ``mesh``'s."""
    label, fingerprint = data.get("mesh"), data.get("mesh_fingerprint")
    if not (isinstance(label, str) and isinstance(fingerprint, str)):
        raise StateError(f"{source}: a version-{SCHEMA_VERSION} configuration names its mesh in 'mesh' and "
                         "'mesh_fingerprint' (strings; `lumion mesh --json` prints them)")
    if fingerprint != mesh_fingerprint(mesh):
        raise _mesh_mismatch(source, f"mesh {describe_mesh(label[:60], fingerprint[:40])}", mesh, label[:60])


def _check_legacy_mesh(tbus: dict[str, Any], mesh: Mesh, source: str) -> None:
    """Version 1 (no mesh recorded): accept only a file listing exactly ``mesh``'s TBUs."""
    if set(tbus) != set(mesh.tbu_names):
        missing = len(set(mesh.tbu_names) - set(tbus))
        foreign = len(set(tbus) - set(mesh.tbu_names))
        raise _mesh_mismatch(
            f"{source} (version 1: no mesh recorded; it lists {len(tbus)} TBUs, {missing} of this mesh's "
            f"missing and {foreign} unknown)", "another mesh or is incomplete", mesh)
    log.warning("%s is a version-1 configuration that does not record its mesh; accepted because it lists "
                "exactly the TBUs of %s. Write it again with this version to record the mesh.",
                source, mesh_label(mesh))
