"""Mesh states: the heater-induced phase of every TBU arm, single or batched.

A :class:`MeshState` holds heater phases only; passive offsets belong to the chip
(:class:`photonics.physics.TBUParams`). JSON form (``lumion.state``, version 1)::

    {"schema": "lumion.state", "version": 1, "default": "bar",
     "tbus": {"tbu:0.0.1": "cross", "tbu:0.0.2": {"split": 0.5},
              "tbu:0.1.0": {"top": 1.2, "bot": 0.0}}}

``default`` applies to every TBU not listed ("bar", "cross", or omitted = "bar").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.errors import StateError
from photonics.physics import split_phases, state_phases
from photonics.topology import Mesh

SCHEMA = "lumion.state"
SCHEMA_VERSION = 1


@dataclass(frozen=True, eq=False)
class MeshState:
    """Heater phases (rad) of every TBU arm; shape (n_tbus,) or (n_states, n_tbus)."""

    phi_top: np.ndarray
    phi_bot: np.ndarray

    def __post_init__(self) -> None:
        top = np.asarray(self.phi_top, dtype=float)
        bot = np.asarray(self.phi_bot, dtype=float)
        if top.shape != bot.shape or top.ndim not in (1, 2):
            raise StateError(
                f"phi_top and phi_bot must share a shape (n_tbus,) or (n_states, n_tbus); "
                f"got {top.shape} and {bot.shape}"
            )
        if not (np.isfinite(top).all() and np.isfinite(bot).all()):
            raise StateError("heater phases must be finite numbers (rad)")
        object.__setattr__(self, "phi_top", top)
        object.__setattr__(self, "phi_bot", bot)

    @property
    def n_tbus(self) -> int:
        """Number of TBUs the state describes."""
        return self.phi_top.shape[-1]

    @property
    def batched(self) -> np.ndarray:
        """(top, bot) stacked as (n_states, n_tbus, 2)."""
        return np.stack([np.atleast_2d(self.phi_top), np.atleast_2d(self.phi_bot)], -1)

    @classmethod
    def uniform(cls, mesh: Mesh, state: str) -> MeshState:
        """Every TBU in "bar" or "cross" (for ideal, offset-free TBUs)."""
        top, bot = state_phases(np.full(mesh.n_tbus, state))
        return cls(top, bot)

    @classmethod
    def random(cls, mesh: Mesh, rng: np.random.Generator, n_states: int | None = None) -> MeshState:
        """Uniformly random heater phases in [0, 2 pi)."""
        shape = (mesh.n_tbus,) if n_states is None else (n_states, mesh.n_tbus)
        return cls(rng.uniform(0, 2 * np.pi, shape), rng.uniform(0, 2 * np.pi, shape))

    @classmethod
    def from_states(cls, states: dict[int, str], mesh: Mesh, default: str = "bar") -> MeshState:
        """Heater phases from a {TBU index: "bar"|"cross"} map; others take ``default``."""
        names = np.full(mesh.n_tbus, default, dtype=object)
        for i, s in states.items():
            names[mesh.tbu_index(i)] = s
        top, bot = state_phases(names.astype(str))
        return cls(top, bot)

    def to_dict(self, mesh: Mesh) -> dict[str, Any]:
        """JSON-ready form with explicit heater phases per TBU."""
        if self.phi_top.ndim != 1:
            raise StateError("only a single state (not a batch) can be written to JSON")
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "tbus": {
                name: {"top": float(t), "bot": float(b)}
                for name, t, b in zip(mesh.tbu_names, self.phi_top, self.phi_bot, strict=True)
            },
        }

    @classmethod
    def from_dict(cls, data: Any, mesh: Mesh, source: str = "state") -> MeshState:
        """Parse the JSON form (see module docstring), validating names and values."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise StateError(f"{source} is not a LUMION state (expected schema {SCHEMA!r})")
        if type(data.get("version")) is not int or data["version"] != SCHEMA_VERSION:  # `true` is not 1
            raise StateError(f"{source}: unsupported state version {data.get('version')!r}; "
                             f"this software reads version {SCHEMA_VERSION}")
        default = data.get("default", "bar")
        if default not in ("bar", "cross"):
            raise StateError(f"{source}: 'default' must be 'bar' or 'cross', not {default!r}")
        top, bot = state_phases(np.full(mesh.n_tbus, default))
        tbus = data.get("tbus", {})
        if not isinstance(tbus, dict):
            raise StateError(f"{source}: 'tbus' must map TBU names to settings")
        for name, setting in tbus.items():
            i = mesh.tbu_index(name)
            if setting in ("bar", "cross"):
                top[i], bot[i] = (float(x) for x in state_phases(setting))
            elif isinstance(setting, dict) and "split" in setting:
                top[i], bot[i] = (float(x) for x in split_phases(float(setting["split"])))
            elif isinstance(setting, dict) and {"top", "bot"} <= setting.keys():
                top[i], bot[i] = float(setting["top"]), float(setting["bot"])
            else:
                raise StateError(
                    f"{source}: TBU {name}: give 'bar', 'cross', {{'split': r}} or "
                    f"{{'top': rad, 'bot': rad}}, not {setting!r}"
                )
        return cls(top, bot)

    @classmethod
    def load(cls, path: str | Path, mesh: Mesh) -> MeshState:
        """Read a state JSON file for ``mesh``."""
        try:
            data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "state file"))
        except FileNotFoundError as exc:
            raise StateError(f"state file {path} not found") from exc
        except json.JSONDecodeError as exc:
            raise StateError(f"state file {path} is not valid JSON: {exc}") from exc
        return cls.from_dict(data, mesh, source=str(path))
