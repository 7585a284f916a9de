"""The rack-level fabric: accelerators bound to mesh ports, and the jobs that run on them.

A :class:`Fabric` binds every accelerator's optical lanes to mesh ports: a TX lane on a
port carries the accelerator's transmitter into the chip, an RX lane on a port takes
light out of the chip to its receiver (one lane per port). Some accelerators are spares:
cabled to the mesh, idle until one of the job's accelerators fails. Every bound port
declares its transceiver lane (power, sensitivity, re-lock time) and its polarization
behaviour (see :mod:`photonics.budget`).

A :class:`Job` is a logical topology over accelerators: a list of directed logical links
``(a, b)``, each meaning "a's transmitter reaches b's receiver". A unidirectional ring
needs one TX and one RX lane per accelerator; a bidirectional pair needs two links.

File format (``lumion.fabric`` version 1, JSON; see docs/fabric.md)::

    {"schema": "lumion.fabric", "version": 1, "name": "smartlight-8+2",
     "mesh": "smartlight",
     "transceiver": "dwdm-10g-zr",
     "accelerators": [{"name": "gpu0", "tx": ["port:1"], "rx": ["port:0"]},
                      {"name": "spare0", "tx": ["port:17"], "rx": ["port:16"], "spare": true}],
     "ports": {"port:1": {"transceiver": "dwdm-10g-zr", "polarization": "drifting", "dop": 0.5},
               "port:5": {"wavelengths_nm": [1530.33], "channel_width_nm": 0.8}}}

``mesh`` is a spec string (``smartlight``, ``hex:RxC``...) or an inline ``lumion.mesh``
object. ``ports`` overrides the default lane declaration for single ports, including the
DWDM channel(s) its transceiver is tuned to (``wavelengths_nm``): every route is checked
at its TX lane's own wavelengths.

Job descriptions with phases are TOML (see :func:`parse_job_toml` and examples/).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.budget import POLARIZATIONS, TRANSCEIVER_PROFILES, Transceiver
from photonics.errors import BudgetError, LumionError, MeshSpecError
from photonics.topology import Mesh, atomic_write_text, mesh_from_spec, smartlight

SCHEMA = "lumion.fabric"
SCHEMA_VERSION = 1

DEFAULT_TRANSCEIVER = "dwdm-10g-zr"  # C band; sr-100g (850 nm) and er4lite-100g (O band) are refused
TOPOLOGIES = ("ring", "line", "links", "all-to-all")


class FabricError(LumionError, ValueError):
    """A fabric or job is malformed, or a fabric operation (e.g. failover) cannot be done."""


@dataclass(frozen=True)
class Accelerator:
    """One accelerator: its TX and RX lanes as mesh port indices, and whether it is a spare."""

    name: str
    tx: tuple[int, ...]
    rx: tuple[int, ...]
    spare: bool = False


@dataclass(frozen=True, eq=False)
class Fabric:
    """A mesh and the accelerators cabled to it.

    Attributes:
        mesh: the chip topology.
        accelerators: in file order; names are unique.
        lanes: ``{mesh port index: Transceiver}`` for every bound port (its declaration,
            polarization included).
        mesh_spec: the spec string the mesh was built from (None for an inline mesh).
        name: a label for reports.
    """

    mesh: Mesh
    accelerators: tuple[Accelerator, ...]
    lanes: dict[int, Transceiver]
    mesh_spec: str | None = "smartlight"
    name: str = "fabric"
    _by_name: dict[str, Accelerator] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Accelerator] = {}
        owner: dict[int, str] = {}
        for acc in self.accelerators:
            if not acc.name or not isinstance(acc.name, str):
                raise FabricError("every accelerator needs a non-empty name")
            if acc.name in by_name:
                raise FabricError(f"accelerator {acc.name!r} is declared twice; names must be unique")
            by_name[acc.name] = acc
            if not acc.tx and not acc.rx:
                raise FabricError(f"accelerator {acc.name} has no lanes; give it tx and rx ports")
            for kind, ports in (("tx", acc.tx), ("rx", acc.rx)):
                for p in ports:
                    if not 0 <= p < self.mesh.n_ports:
                        raise FabricError(f"{acc.name} {kind} port {p} is not a port of the mesh "
                                          f"(0..{self.mesh.n_ports - 1})")
                    name = self.mesh.port_names[p]
                    if p in owner:
                        raise FabricError(f"{name} is bound twice ({owner[p]} and {acc.name} {kind}); "
                                          "a mesh port carries one lane")
                    owner[p] = f"{acc.name} {kind}"
        missing = sorted(set(owner) - set(self.lanes))
        if missing:
            raise FabricError(f"no transceiver declared for {self.mesh.port_names[missing[0]]}")
        object.__setattr__(self, "_by_name", by_name)

    def accelerator(self, name: str) -> Accelerator:
        """The accelerator called ``name``; FabricError naming the known ones otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise FabricError(f"unknown accelerator {name!r}; the fabric has "
                              f"{', '.join(self._by_name)}") from None

    @property
    def names(self) -> tuple[str, ...]:
        """Accelerator names in file order."""
        return tuple(a.name for a in self.accelerators)

    @property
    def spares(self) -> tuple[str, ...]:
        """Names of the spare accelerators, in file order."""
        return tuple(a.name for a in self.accelerators if a.spare)

    @property
    def workers(self) -> tuple[str, ...]:
        """Names of the accelerators that are not spares, in file order."""
        return tuple(a.name for a in self.accelerators if not a.spare)

    def lane(self, port: int) -> Transceiver:
        """The transceiver lane declared on mesh port ``port``."""
        try:
            return self.lanes[port]
        except KeyError:
            raise FabricError(f"{self.mesh.port_names[port]} has no lane bound") from None

    def owner(self, port: int) -> str | None:
        """Name of the accelerator with a lane on ``port`` (None when the port is free)."""
        for acc in self.accelerators:
            if port in acc.tx or port in acc.rx:
                return acc.name
        return None

    # -- serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Versioned JSON-ready description (``lumion.fabric`` v1)."""
        names = self.mesh.port_names
        counts: dict[str, int] = {}
        for t in self.lanes.values():
            counts[t.name] = counts.get(t.name, 0) + 1
        default = max(counts, key=lambda k: counts[k]) if counts else DEFAULT_TRANSCEIVER
        base = _profile(default)
        ports = {}
        for p, t in sorted(self.lanes.items()):
            if t != base:
                ports[names[p]] = _lane_to_dict(t)
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "name": self.name,
            "mesh": self.mesh_spec if self.mesh_spec is not None else self.mesh.to_dict(),
            "transceiver": default,
            "accelerators": [
                {"name": a.name, "tx": [names[p] for p in a.tx], "rx": [names[p] for p in a.rx],
                 **({"spare": True} if a.spare else {})}
                for a in self.accelerators
            ],
            "ports": ports,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "fabric") -> Fabric:
        """Build a fabric from :meth:`to_dict` output, validating every field."""
        return _fabric_from_dict(data, source)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the fabric as JSON, atomically."""
        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Fabric:
        """Read a fabric written by :meth:`save`; FabricError naming the file when it is bad."""
        try:
            data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "fabric file"))
        except FileNotFoundError as exc:
            raise FabricError(f"fabric file {path} not found") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FabricError(f"fabric file {path} is not valid JSON: {exc}") from exc
        return _fabric_from_dict(data, str(path))


def _profile(name: str) -> Transceiver:
    try:
        return TRANSCEIVER_PROFILES[name]
    except KeyError:
        raise FabricError(f"unknown transceiver {name!r}; choose one of "
                          f"{', '.join(TRANSCEIVER_PROFILES)}") from None


def _lane_to_dict(t: Transceiver) -> dict[str, Any]:
    out: dict[str, Any] = {"transceiver": t.name}
    base = TRANSCEIVER_PROFILES.get(t.name)
    for key in ("tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "polarization", "dop",
                "channel_width_nm"):
        if base is None or getattr(base, key) != getattr(t, key):
            out[key] = getattr(t, key)
    if base is None or base.wavelengths_nm != t.wavelengths_nm:
        out["wavelengths_nm"] = list(t.wavelengths_nm)
    return out


def _lane_from_dict(data: Any, default: Transceiver, where: str) -> Transceiver:
    if not isinstance(data, dict):
        raise FabricError(f"{where}: a port declaration is an object like "
                          '{"transceiver": "dwdm-10g-zr", "polarization": "aligned"}')
    lane = _profile(str(data["transceiver"])) if "transceiver" in data else default
    known = {"transceiver", "tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "polarization", "dop",
             "wavelengths_nm", "channel_width_nm"}
    extra = set(data) - known
    if extra:
        raise FabricError(f"{where}: unknown field(s) {', '.join(sorted(extra))}; "
                          f"known: {', '.join(sorted(known))}")
    changes: dict[str, Any] = {}
    if "wavelengths_nm" in data:
        changes["wavelengths_nm"] = _wavelengths(data["wavelengths_nm"], where)
    for key in ("tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "dop", "channel_width_nm"):
        if key in data:
            try:
                changes[key] = float(data[key])
            except (TypeError, ValueError):
                raise FabricError(f"{where}: {key} must be a number, not {data[key]!r}") from None
    if "polarization" in data:
        if data["polarization"] not in POLARIZATIONS:
            raise FabricError(f"{where}: polarization must be one of {', '.join(POLARIZATIONS)}, "
                              f"not {data['polarization']!r}")
        changes["polarization"] = data["polarization"]
    try:
        return replace(lane, **changes)
    except BudgetError as exc:
        raise FabricError(f"{where}: {exc}") from None


def _wavelengths(value: Any, where: str) -> tuple[float, ...]:
    """A port's lane wavelengths: a non-empty list of numbers (nm)."""
    if isinstance(value, bool) or not isinstance(value, list | int | float):
        raise FabricError(f"{where}: wavelengths_nm must be a list of numbers in nm, e.g. [1530.33]")
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(w, bool) or not isinstance(w, int | float) for w in items):
        raise FabricError(f"{where}: wavelengths_nm must be a list of numbers in nm, e.g. [1530.33], "
                          f"not {value!r}")
    return tuple(float(w) for w in items)


def _fabric_from_dict(data: Any, source: str) -> Fabric:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FabricError(f"{source} is not a LUMION fabric (expected schema {SCHEMA!r})")
    if type(data.get("version")) is not int or data["version"] != SCHEMA_VERSION:  # `true` is not 1
        raise FabricError(f"{source}: unsupported fabric version {data.get('version')!r} "
                          f"(this software reads version {SCHEMA_VERSION})")
    spec = data.get("mesh", "smartlight")
    try:
        if isinstance(spec, str):
            mesh, mesh_spec = mesh_from_spec(spec), spec
        elif isinstance(spec, dict):
            mesh, mesh_spec = Mesh.from_dict(spec), None
        else:
            raise FabricError(f"{source}: 'mesh' must be a spec string or a lumion.mesh object")
    except MeshSpecError as exc:
        raise FabricError(f"{source}: {exc}") from None
    default = _profile(str(data.get("transceiver", DEFAULT_TRANSCEIVER)))
    accs_raw = data.get("accelerators")
    if not isinstance(accs_raw, list) or not accs_raw:
        raise FabricError(f"{source}: 'accelerators' must be a non-empty list")
    accs = []
    for k, a in enumerate(accs_raw):
        if not isinstance(a, dict) or "name" not in a:
            raise FabricError(f"{source}: accelerator {k} must be an object with a 'name'")
        where = f"{source}: accelerator {a['name']!r}"
        extra = set(a) - {"name", "tx", "rx", "spare"}
        if extra:
            raise FabricError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        lanes = {}
        for kind in ("tx", "rx"):
            ports = a.get(kind, [])
            if isinstance(ports, str | int):
                ports = [ports]
            if not isinstance(ports, list):
                raise FabricError(f"{where}: {kind} must be a list of ports")
            try:
                lanes[kind] = tuple(mesh.port_index(p) for p in ports)
            except MeshSpecError as exc:
                raise FabricError(f"{where} {kind}: {exc}") from None
        spare = a.get("spare", False)
        if not isinstance(spare, bool):
            raise FabricError(f"{where}: spare must be true or false")
        accs.append(Accelerator(str(a["name"]), lanes["tx"], lanes["rx"], spare))
    overrides = data.get("ports", {}) or {}
    if not isinstance(overrides, dict):
        raise FabricError(f"{source}: 'ports' must be an object {{port: declaration}}")
    bound = {p for a in accs for p in (*a.tx, *a.rx)}
    lanes = dict.fromkeys(bound, default)
    for name, decl in overrides.items():
        try:
            p = mesh.port_index(name)
        except MeshSpecError as exc:
            raise FabricError(f"{source}: ports: {exc}") from None
        if p not in bound:
            raise FabricError(f"{source}: ports: {mesh.port_names[p]} has a declaration but no lane")
        lanes[p] = _lane_from_dict(decl, default, f"{source}: {mesh.port_names[p]}")
    return Fabric(mesh=mesh, accelerators=tuple(accs), lanes=lanes, mesh_spec=mesh_spec,
                  name=str(data.get("name", Path(source).stem)))


def make_fabric(
    mesh: Mesh,
    accelerators: Sequence[Accelerator],
    transceiver: Transceiver | str = DEFAULT_TRANSCEIVER,
    mesh_spec: str | None = None,
    name: str = "fabric",
) -> Fabric:
    """A fabric with the same lane declaration on every bound port."""
    t = _profile(transceiver) if isinstance(transceiver, str) else transceiver
    lanes = {p: t for a in accelerators for p in (*a.tx, *a.rx)}
    return Fabric(mesh, tuple(accelerators), lanes, mesh_spec, name)


def default_fabric(transceiver: Transceiver | str = DEFAULT_TRANSCEIVER) -> Fabric:
    """8 accelerators and 2 spares on the SmartLight-size mesh, one TX and one RX lane each.

    Placement: ten slots of four ports around the mesh edge, slot k using ``port:4k+1``
    (TX) and ``port:4k`` (RX), clockwise from the west edge. gpu0..gpu3 take slots 0..3,
    spare0 slot 4 (the east end), gpu4..gpu7 slots 5..8 and spare1 slot 9 (the west end).
    A ring gpu0 -> gpu1 -> ... -> gpu7 -> gpu0 then joins neighbouring slots only, each
    spare sits between two ring neighbours, and every link keeps >= 6 dB of margin with
    ``dwdm-10g-zr`` lanes (``tests/photonics/test_fabric.py`` checks the ring and every
    single failover). The TX/RX order matters: with TX on ``4k`` and RX on ``4k+1`` the
    same ring is provably unroutable (the integer program says so), because each ring
    link would leave a slot's TX on the TBU its own RX needs.
    """
    order = ["gpu0", "gpu1", "gpu2", "gpu3", "spare0", "gpu4", "gpu5", "gpu6", "gpu7", "spare1"]
    accs = [Accelerator(n, (4 * k + 1,), (4 * k,), n.startswith("spare")) for k, n in enumerate(order)]
    return make_fabric(smartlight(), accs, transceiver, "smartlight", "smartlight-8+2")




def lanes_summary(fabric: Fabric) -> list[Mapping[str, Any]]:
    """One row per accelerator: name, spare, TX and RX port names (for tables and JSON)."""
    names = fabric.mesh.port_names
    return [{"name": a.name, "spare": a.spare, "tx": [names[p] for p in a.tx],
             "rx": [names[p] for p in a.rx]} for a in fabric.accelerators]
