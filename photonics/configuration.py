"""Routes and configurations: what the mesh should do, independent of any chip's offsets.

A :class:`Route` is a light path from one mesh port to another, a sequence of
:class:`Hop` (TBU, entry port, exit port) whose entry/exit pair fixes the TBU's state.
A :class:`Configuration` is the per-TBU split (cross fraction: 0 = bar, 1 = cross) the
mesh must realise, together with the routes that asked for it. Turning it into heater
phases needs the chip's passive offsets (:meth:`Configuration.heater_state`); turning it
into currents needs a calibration map (``calibration``).

Local TBU ports: 0 = a0, 1 = a1, 2 = b0, 3 = b1 (see ``photonics.topology``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from photonics.errors import StateError
from photonics.physics import split_phases
from photonics.state import MeshState
from photonics.topology import PORT_LABELS, Mesh

BAR_PAIRS = frozenset({(0, 2), (2, 0), (1, 3), (3, 1)})
CROSS_PAIRS = frozenset({(0, 3), (3, 0), (1, 2), (2, 1)})
# Where TBUs on no route sit; see docs/routing.md. In a hexagonal mesh all-cross parks
# send stray light along straight zigzag lines out to the chip edge, while all-bar parks
# close every unused cell into a hexagonal ring that gathers leaked light and spills it
# into nearby ports (6 dB worse worst leakage, measured); cross also needs no heater
# power with ideal couplers at zero offset.
PARK_STATE = "cross"


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
    """

    cross_fraction: np.ndarray
    routes: tuple[Route, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        r = np.asarray(self.cross_fraction, dtype=float)
        if r.ndim != 1 or np.any((r < 0) | (r > 1)) or not np.isfinite(r).all():
            raise StateError("cross_fraction must be a 1-D array of values in [0, 1]")
        object.__setattr__(self, "cross_fraction", r)

    @classmethod
    def parked(cls, mesh: Mesh) -> Configuration:
        """Every TBU in the park state."""
        return cls(np.full(mesh.n_tbus, 1.0 if PARK_STATE == "cross" else 0.0))

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
        return cls(conf, tuple(routes))

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
        """JSON-ready form (``lumion.configuration`` version 1)."""
        return {
            "schema": "lumion.configuration",
            "version": 1,
            "tbus": {name: (s if s != "split" else {"split": float(r)})
                     for name, s, r in zip(mesh.tbu_names, self.states(), self.cross_fraction,
                                           strict=True)},
            "routes": [r.to_dict(mesh) for r in self.routes],
        }

    @classmethod
    def from_dict(cls, data: Any, mesh: Mesh, source: str = "configuration") -> Configuration:
        """Parse :meth:`to_dict` output (routes are re-read when present)."""
        if not isinstance(data, dict) or data.get("schema") != "lumion.configuration":
            raise StateError(f"{source} is not a LUMION configuration "
                             "(expected schema 'lumion.configuration')")
        if type(data.get("version")) is not int or data.get("version") != 1:  # `true` is not 1
            raise StateError(f"{source}: unsupported configuration version {data.get('version')!r}")
        tbus, route_list = data.get("tbus", {}), data.get("routes", [])
        if not isinstance(tbus, dict):
            raise StateError(f"{source}: 'tbus' must map TBU names to 'bar', 'cross' or {{'split': r}}")
        if not isinstance(route_list, list):
            raise StateError(f"{source}: 'routes' must be a list of routes")
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
        return cls(conf, tuple(routes))
