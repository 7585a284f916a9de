"""A rack: several meshes, accelerators with lanes on their ports, and fibres between meshes.

File format (``lumion.rack`` version 1, TOML; see docs/rack.md)::

    schema = "lumion.rack"
    version = 1
    name = "two-smartlight-16+2"
    transceiver = "dwdm-10g-zr"      # every lane; a profile of photonics.budget
    required_margin_db = 3.0
    baseline = "ring"                # the fixed topology compared with: ring or torus:RxC

    [[mesh]]
    name = "m0"
    spec = "smartlight"              # any mesh spec: smartlight, hex:RxC, ...

    [[accelerator]]
    name = "gpu0"
    mesh = "m0"
    tx = ["port:1", "port:3"]        # lane k = (tx[k], rx[k])
    rx = ["port:0", "port:2"]
    spare = false

    [[fibre]]
    name = "f0"
    a = "m0/port:36"                 # mesh/port at each end
    b = "m1/port:36"
    loss_db = 0.5                    # fibre + connectors, end to end
    coupling_db = 2.5                # per chip facet (each end pays it)
    gain_db = 0.0                    # an in-line amplifier, if any

A route that crosses a fibre pays, on top of the single-chip budget (two facets and one
access routing, :func:`photonics.budget.link_budget`), the fibre's loss, one more facet at
each end and a second chip's access routing, minus the fibre's gain (:func:`crossing_loss_db`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from photonics.bounded_read import SETTINGS_FILE_MAX_BYTES, read_text
from photonics.budget import TRANSCEIVER_PROFILES, Transceiver
from photonics.errors import LumionError, MeshSpecError
from photonics.physics import PhysicsDefaults
from photonics.tolerances import REQUIRED_MARGIN_DB
from photonics.topology import Mesh, mesh_from_spec

SCHEMA = "lumion.rack"
SCHEMA_VERSION = 1
DEFAULT_TRANSCEIVER = "dwdm-10g-zr"  # the C-band lane the fabric uses (docs/physics.md)
# Two mated connectors at ~0.25 dB each (low-loss LC/MPO, TIA-568 allows 0.75 dB per pair)
# plus a few metres of fibre at 0.35 dB/km (negligible): the loss of a patch between chips.
FIBRE_LOSS_DB = 0.5
# Fibre-to-chip coupling per facet: the SmartLight datasheet's 2.5 dB (1.8-3.6 dB).
COUPLING_DB = PhysicsDefaults.fiber_to_chip_loss_db
# Gain a C-band booster SOA gives well below saturation (vendors list 15-30 dB small-signal);
# the default rack's fibres use it: without gain no cross-mesh link closes (docs/rack.md).
DEFAULT_RACK_GAIN_DB = 12.0


class RackError(LumionError, ValueError):
    """A rack description is malformed, or a rack operation cannot be done."""


@dataclass(frozen=True)
class RackAccelerator:
    """One accelerator: its mesh, lanes (``tx[k]``, ``rx[k]`` are lane k) as port indices."""

    name: str
    mesh: str
    tx: tuple[int, ...]
    rx: tuple[int, ...]
    spare: bool = False

    @property
    def n_lanes(self) -> int:
        """Number of lanes (TX/RX port pairs)."""
        return len(self.tx)


@dataclass(frozen=True)
class Fibre:
    """A fibre joining port ``a_port`` of mesh ``a_mesh`` to port ``b_port`` of mesh ``b_mesh``.

    It carries one signal, in either direction. Losses in dB.
    """

    name: str
    a_mesh: str
    a_port: int
    b_mesh: str
    b_port: int
    loss_db: float = FIBRE_LOSS_DB
    coupling_db: float = COUPLING_DB
    gain_db: float = 0.0

    def ends(self, src_mesh: str) -> tuple[int, str, int]:
        """Leaving ``src_mesh``: (port on src_mesh, the other mesh, port on it)."""
        if src_mesh == self.a_mesh:
            return self.a_port, self.b_mesh, self.b_port
        return self.b_port, self.a_mesh, self.a_port


def crossing_loss_db(fibre: Fibre, defaults: PhysicsDefaults | None = None) -> float:
    """Extra loss (dB) a route pays for crossing ``fibre`` on top of a one-chip link budget.

    The fibre's loss, one facet leaving the first chip and one entering the second, and the
    second chip's access routing, less the fibre's amplifier gain.
    """
    d = defaults or PhysicsDefaults()
    return fibre.loss_db + 2 * fibre.coupling_db + d.access_routing_loss_db - fibre.gain_db


@dataclass(frozen=True, eq=False)
class Rack:
    """Meshes, the accelerators cabled to them and the fibres joining them.

    Attributes:
        name: label for reports.
        mesh_specs: ``{mesh name: spec string}`` in file order.
        accelerators: in file order (the baseline's static ring follows the workers' order).
        fibres: in file order.
        transceiver: the lane declared on every bound port.
        required_margin_db: margin every link keeps above the receiver sensitivity (dB).
        baseline: the fixed topology the fabric is compared with: ``ring`` or ``torus:RxC``
            over the workers (:mod:`photonics.rack.baseline`).
    """

    name: str
    mesh_specs: dict[str, str]
    accelerators: tuple[RackAccelerator, ...]
    fibres: tuple[Fibre, ...]
    transceiver: Transceiver = field(default_factory=lambda: TRANSCEIVER_PROFILES[DEFAULT_TRANSCEIVER])
    required_margin_db: float = REQUIRED_MARGIN_DB
    baseline: str = "ring"
    _meshes: dict[str, Mesh] = field(default_factory=dict, repr=False)
    _by_name: dict[str, RackAccelerator] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        meshes = {}
        for m, spec in self.mesh_specs.items():
            try:
                meshes[m] = mesh_from_spec(spec)
            except MeshSpecError as exc:
                raise RackError(f"mesh {m!r}: {exc}") from None
        object.__setattr__(self, "_meshes", meshes)
        object.__setattr__(self, "_by_name", _check(self, meshes))
        baseline_shape(self.baseline, len(self.workers))

    def mesh(self, name: str) -> Mesh:
        """The topology of mesh ``name``."""
        try:
            return self._meshes[name]
        except KeyError:
            raise RackError(f"unknown mesh {name!r}; the rack has {', '.join(self._meshes)}") from None

    def accelerator(self, name: str) -> RackAccelerator:
        """The accelerator called ``name``; RackError naming the known ones otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise RackError(f"unknown accelerator {name!r} in rack {self.name!r}") from None

    @property
    def names(self) -> tuple[str, ...]:
        """Accelerator names in file order."""
        return tuple(a.name for a in self.accelerators)

    @property
    def workers(self) -> tuple[str, ...]:
        """Accelerators that are not spares, in file order."""
        return tuple(a.name for a in self.accelerators if not a.spare)

    @property
    def spares(self) -> tuple[str, ...]:
        """Spare accelerators, in file order."""
        return tuple(a.name for a in self.accelerators if a.spare)

    @property
    def n_lanes(self) -> int:
        """Lanes per accelerator (the smallest, if they differ)."""
        return min(a.n_lanes for a in self.accelerators)

    def fibres_between(self, m1: str, m2: str) -> tuple[Fibre, ...]:
        """Fibres joining meshes ``m1`` and ``m2`` (either way), in file order."""
        return tuple(f for f in self.fibres if {f.a_mesh, f.b_mesh} == {m1, m2})

    def to_dict(self) -> dict[str, Any]:
        """The ``lumion.rack`` v1 description (TOML-ready: no None values)."""
        def port(m: str, p: int) -> str:
            return self.mesh(m).port_names[p]

        return {
            "schema": SCHEMA, "version": SCHEMA_VERSION, "name": self.name,
            "transceiver": self.transceiver.name, "required_margin_db": self.required_margin_db,
            "baseline": self.baseline,
            "mesh": [{"name": m, "spec": s} for m, s in self.mesh_specs.items()],
            "accelerator": [{"name": a.name, "mesh": a.mesh, "tx": [port(a.mesh, p) for p in a.tx],
                             "rx": [port(a.mesh, p) for p in a.rx], "spare": a.spare}
                            for a in self.accelerators],
            "fibre": [{"name": f.name, "a": f"{f.a_mesh}/{port(f.a_mesh, f.a_port)}",
                       "b": f"{f.b_mesh}/{port(f.b_mesh, f.b_port)}", "loss_db": f.loss_db,
                       "coupling_db": f.coupling_db, "gain_db": f.gain_db} for f in self.fibres],
        }


def _check(rack: Rack, meshes: dict[str, Mesh]) -> dict[str, RackAccelerator]:
    """Validate names, ports and fibres; the name index of the accelerators."""
    if not meshes:
        raise RackError("a rack needs at least one [[mesh]]")
    if not rack.accelerators:
        raise RackError("a rack needs at least one [[accelerator]]")
    by_name: dict[str, RackAccelerator] = {}
    owner: dict[tuple[str, int], str] = {}

    def bind(m: str, p: int, who: str) -> None:
        mesh = meshes.get(m)
        if mesh is None:
            raise RackError(f"{who}: unknown mesh {m!r}; the rack has {', '.join(meshes)}")
        if not 0 <= p < mesh.n_ports:
            raise RackError(f"{who}: port {p} is not a port of mesh {m} (0..{mesh.n_ports - 1})")
        if (m, p) in owner:
            raise RackError(f"{m}/{mesh.port_names[p]} is bound twice ({owner[(m, p)]} and {who}); "
                            "a mesh port carries one lane or one fibre")
        owner[(m, p)] = who

    for a in rack.accelerators:
        if a.name in by_name:
            raise RackError(f"accelerator {a.name!r} is declared twice; names must be unique")
        by_name[a.name] = a
        if not a.tx or len(a.tx) != len(a.rx):
            raise RackError(f"accelerator {a.name}: give as many tx as rx ports (lane k is tx[k], rx[k]), "
                            f"at least one; got {len(a.tx)} tx and {len(a.rx)} rx")
        for kind, ports in (("tx", a.tx), ("rx", a.rx)):
            for p in ports:
                bind(a.mesh, p, f"accelerator {a.name} {kind}")
    seen: set[str] = set()
    for f in rack.fibres:
        if f.name in seen:
            raise RackError(f"fibre {f.name!r} is declared twice; names must be unique")
        seen.add(f.name)
        if f.a_mesh == f.b_mesh:
            raise RackError(f"fibre {f.name} joins mesh {f.a_mesh} to itself; a fibre joins two meshes")
        bind(f.a_mesh, f.a_port, f"fibre {f.name}")
        bind(f.b_mesh, f.b_port, f"fibre {f.name}")
        for key in ("loss_db", "coupling_db", "gain_db"):
            if not getattr(f, key) >= 0:
                raise RackError(f"fibre {f.name}: {key} must be a number >= 0, not {getattr(f, key)!r}")
    if not any(not a.spare for a in rack.accelerators):
        raise RackError("a rack needs at least one accelerator that is not a spare")
    if not rack.required_margin_db >= 0:
        raise RackError(f"required_margin_db must be >= 0, not {rack.required_margin_db!r}")
    return by_name


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------
_TOP = {"schema", "version", "name", "transceiver", "required_margin_db", "baseline", "mesh", "accelerator",
        "fibre"}
_ACC = {"name", "mesh", "tx", "rx", "spare"}
_FIBRE = {"name", "a", "b", "loss_db", "coupling_db", "gain_db"}


def load_rack(path: str | Path) -> Rack:
    """Read a ``lumion.rack`` TOML file; RackError naming the file and the field when it is bad."""
    p = Path(path)
    try:
        text = read_text(p, SETTINGS_FILE_MAX_BYTES, "rack file")
    except FileNotFoundError:
        raise RackError(f"rack file {p} not found") from None
    except UnicodeDecodeError:
        raise RackError(f"rack file {p} is not UTF-8 text") from None
    return parse_rack(text, str(p))


def parse_rack(text: str, source: str = "rack") -> Rack:
    """Parse a ``lumion.rack`` TOML text (see the module docstring for the format)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RackError(f"{source} is not valid TOML: {exc}") from None
    return rack_from_dict(data, source)


def rack_from_dict(data: Any, source: str = "rack") -> Rack:
    """Build a rack from :meth:`Rack.to_dict` output, validating every field."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise RackError(f"{source} is not a LUMION rack (expected schema = {SCHEMA!r})")
    if data.get("version") != SCHEMA_VERSION:
        raise RackError(f"{source}: unsupported rack version {data.get('version')!r} "
                        f"(this software reads version {SCHEMA_VERSION})")
    _no_extra(data, _TOP, source)
    tname = data.get("transceiver", DEFAULT_TRANSCEIVER)
    if tname not in TRANSCEIVER_PROFILES:
        raise RackError(f"{source}: unknown transceiver {tname!r}; choose one of "
                        f"{', '.join(TRANSCEIVER_PROFILES)}")
    meshes: dict[str, str] = {}
    for k, m in enumerate(_tables(data, "mesh", source)):
        where = f"{source}: mesh {k + 1}"
        _no_extra(m, {"name", "spec"}, where)
        name, spec = _text(m, "name", where), _text(m, "spec", where)
        if name in meshes:
            raise RackError(f"{where}: mesh {name!r} is declared twice")
        meshes[name] = spec
    try:
        topo = {m: mesh_from_spec(s) for m, s in meshes.items()}
    except MeshSpecError as exc:
        raise RackError(f"{source}: {exc}") from None
    accs = [_accelerator(a, k, topo, source) for k, a in enumerate(_tables(data, "accelerator", source))]
    fibres = [_fibre(f, k, topo, source) for k, f in enumerate(_tables(data, "fibre", source, False))]
    margin = _number(data, "required_margin_db", source, REQUIRED_MARGIN_DB)
    baseline = data.get("baseline", "ring")
    if not isinstance(baseline, str):
        raise RackError(f"{source}: baseline must be \"ring\" or \"torus:RxC\", not {baseline!r}")
    try:
        return Rack(str(data.get("name", Path(source).stem)), meshes, tuple(accs), tuple(fibres),
                    TRANSCEIVER_PROFILES[tname], margin, baseline)
    except RackError as exc:
        raise RackError(f"{source}: {exc}") from None


def _no_extra(table: dict[str, Any], known: set[str], where: str) -> None:
    extra = set(table) - known
    if extra:
        raise RackError(f"{where}: unknown field(s) {', '.join(sorted(extra))}; "
                        f"known: {', '.join(sorted(known))}")


def _tables(data: dict[str, Any], key: str, source: str, required: bool = True) -> list[dict[str, Any]]:
    raw = data.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise RackError(f"{source}: {key} must be an array of tables ([[{key}]])")
    if required and not raw:
        raise RackError(f"{source}: give at least one [[{key}]] table")
    return raw


def _text(table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise RackError(f"{where}: {key} must be a non-empty string")
    return value


def _number(table: dict[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RackError(f"{where}: {key} must be a number, not {value!r}")
    return float(value)


def _ports(mesh: Mesh, raw: Any, where: str) -> tuple[int, ...]:
    if isinstance(raw, str | int):
        raw = [raw]
    if not isinstance(raw, list):
        raise RackError(f"{where} must be a list of ports like [\"port:1\"]")
    try:
        return tuple(mesh.port_index(p) for p in raw)
    except MeshSpecError as exc:
        raise RackError(f"{where}: {exc}") from None


def _accelerator(a: dict[str, Any], k: int, topo: dict[str, Mesh], source: str) -> RackAccelerator:
    where = f"{source}: accelerator {a.get('name', k + 1)!r}"
    _no_extra(a, _ACC, where)
    name, mesh = _text(a, "name", where), _text(a, "mesh", where)
    if mesh not in topo:
        raise RackError(f"{where}: unknown mesh {mesh!r}; the rack has {', '.join(topo)}")
    spare = a.get("spare", False)
    if not isinstance(spare, bool):
        raise RackError(f"{where}: spare must be true or false")
    return RackAccelerator(name, mesh, _ports(topo[mesh], a.get("tx", []), f"{where} tx"),
                           _ports(topo[mesh], a.get("rx", []), f"{where} rx"), spare)


def _end(text: Any, topo: dict[str, Mesh], where: str) -> tuple[str, int]:
    if not isinstance(text, str) or "/" not in text:
        raise RackError(f"{where} must be \"mesh/port\", e.g. \"m0/port:36\", not {text!r}")
    mesh, port = text.split("/", 1)
    if mesh not in topo:
        raise RackError(f"{where}: unknown mesh {mesh!r}; the rack has {', '.join(topo)}")
    return mesh, _ports(topo[mesh], port, where)[0]


def _fibre(f: dict[str, Any], k: int, topo: dict[str, Mesh], source: str) -> Fibre:
    where = f"{source}: fibre {f.get('name', k + 1)!r}"
    _no_extra(f, _FIBRE, where)
    a_mesh, a_port = _end(f.get("a"), topo, f"{where} a")
    b_mesh, b_port = _end(f.get("b"), topo, f"{where} b")
    return Fibre(str(f.get("name", f"f{k}")), a_mesh, a_port, b_mesh, b_port,
                 _number(f, "loss_db", where, FIBRE_LOSS_DB), _number(f, "coupling_db", where, COUPLING_DB),
                 _number(f, "gain_db", where, 0.0))


# ---------------------------------------------------------------------------------------
# The default rack
# ---------------------------------------------------------------------------------------
SLOTS_PER_MESH = 10  # a SmartLight's 40 ports as ten slots of four, as in the default fabric
FIBRE_SLOT = 9  # the west-end slot (next to slots 0 and 8) carries the fibres


def default_rack(gain_db: float = DEFAULT_RACK_GAIN_DB) -> Rack:
    """Two SmartLight meshes, 16 accelerators + 2 spares with two lanes each, four fibres.

    On each mesh the 40 ports form ten slots of four (clockwise from the west edge, as in
    :func:`photonics.fabric.default_fabric`): slot k has lane 0 = (TX ``port:4k+1``, RX
    ``port:4k``) and lane 1 = (TX ``port:4k+3``, RX ``port:4k+2``). Slots 0-3 and 5-8 hold
    eight accelerators, slot 4 (the east end) a spare, slot 9 (the west end) the four
    fibre ends; fibre j joins ``m0/port:36+j`` to ``m1/port:36+j``, each with an in-line
    amplifier of ``gain_db`` (without one no cross-mesh link closes its budget).
    """
    accs = []
    for m in range(2):
        slots = [0, 1, 2, 3, 5, 6, 7, 8]
        for i, s in enumerate(slots):
            accs.append(RackAccelerator(f"gpu{8 * m + i}", f"m{m}", (4 * s + 1, 4 * s + 3),
                                        (4 * s, 4 * s + 2)))
        accs.append(RackAccelerator(f"spare{m}", f"m{m}", (17, 19), (16, 18), spare=True))
    fibres = tuple(Fibre(f"f{j}", "m0", 4 * FIBRE_SLOT + j, "m1", 4 * FIBRE_SLOT + j, gain_db=gain_db)
                   for j in range(4))
    return Rack("two-smartlight-16+2", {"m0": "smartlight", "m1": "smartlight"}, tuple(accs), fibres)


def slot_rack(spec: str, gain_db: float = DEFAULT_RACK_GAIN_DB) -> Rack:
    """The default rack's layout on two meshes of ``spec`` (``smartlight``: the default rack itself).

    Each mesh's ports (P of them, clockwise) hold ten slots of four consecutive ports, slot k
    starting at port ``floor(k P / 10)``, so a larger mesh spreads the same sixteen workers,
    two spares and four fibres around a longer edge with more TBUs between them (the
    capacity campaign's mesh axis, docs/rack.md). RackError for a mesh with fewer than 40
    ports.
    """
    if spec == "smartlight":
        return default_rack(gain_db)
    try:
        n_ports = mesh_from_spec(spec).n_ports
    except MeshSpecError as exc:
        raise RackError(f"mesh {spec!r}: {exc}") from None
    if n_ports < 4 * SLOTS_PER_MESH:
        raise RackError(f"mesh {spec} has {n_ports} ports; a slot rack needs {4 * SLOTS_PER_MESH}")
    base = [k * n_ports // SLOTS_PER_MESH for k in range(SLOTS_PER_MESH)]
    accs = []
    for m in range(2):
        for i, s in enumerate([0, 1, 2, 3, 5, 6, 7, 8]):
            accs.append(RackAccelerator(f"gpu{8 * m + i}", f"m{m}", (base[s] + 1, base[s] + 3),
                                        (base[s], base[s] + 2)))
        accs.append(RackAccelerator(f"spare{m}", f"m{m}", (base[4] + 1, base[4] + 3), (base[4], base[4] + 2),
                                    spare=True))
    fibres = tuple(Fibre(f"f{j}", "m0", base[FIBRE_SLOT] + j, "m1", base[FIBRE_SLOT] + j, gain_db=gain_db)
                   for j in range(4))
    return Rack(f"two-{spec}-16+2", {"m0": spec, "m1": spec}, tuple(accs), fibres)


# A static-torus baseline of the rack file ("ring" or "torus:RxC"), checked on load; the
# baseline allocator (photonics.rack.baseline) uses the same shape.
_TORUS = re.compile(r"^torus:(\d+)x(\d+)$")


def baseline_shape(spec: str, n_workers: int) -> tuple[int, int]:
    """``(rows, cols)`` of a baseline spec over ``n_workers``; RackError naming the fix otherwise.

    Example:
        >>> baseline_shape("ring", 16), baseline_shape("torus:4x4", 16)
        ((1, 16), (4, 4))
    """
    if spec == "ring":
        return 1, n_workers
    m = _TORUS.match(spec)
    if not m:
        raise RackError(f"baseline must be 'ring' or 'torus:RxC' (e.g. torus:4x4), not {spec!r}")
    rows, cols = int(m.group(1)), int(m.group(2))
    if rows * cols != n_workers:
        raise RackError(f"baseline {spec}: {rows} x {cols} = {rows * cols} positions for {n_workers} "
                        f"workers; choose R x C = {n_workers}")
    return rows, cols
