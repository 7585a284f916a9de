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
     "ports": {"port:1": {"transceiver": "dwdm-10g-zr", "polarization": "drifting", "dop": 0.5}}}

``mesh`` is a spec string (``smartlight``, ``hex:RxC``...) or an inline ``lumion.mesh``
object. ``ports`` overrides the default lane declaration for single ports.

Job descriptions with phases are TOML (see :func:`parse_job_toml` and examples/).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from photonics.budget import POLARIZATIONS, TRANSCEIVER_PROFILES, Transceiver
from photonics.errors import BudgetError, LumionError, MeshSpecError
from photonics.topology import Mesh, atomic_write_text, mesh_from_spec, smartlight

SCHEMA = "lumion.fabric"
SCHEMA_VERSION = 1
JOB_SCHEMA = "lumion.job"
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
            data = json.loads(Path(path).read_text(encoding="utf-8"))
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
    for key in ("tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "polarization", "dop"):
        if base is None or getattr(base, key) != getattr(t, key):
            out[key] = getattr(t, key)
    return out


def _lane_from_dict(data: Any, default: Transceiver, where: str) -> Transceiver:
    if not isinstance(data, dict):
        raise FabricError(f"{where}: a port declaration is an object like "
                          '{"transceiver": "dwdm-10g-zr", "polarization": "aligned"}')
    lane = _profile(str(data["transceiver"])) if "transceiver" in data else default
    known = {"transceiver", "tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "polarization", "dop"}
    extra = set(data) - known
    if extra:
        raise FabricError(f"{where}: unknown field(s) {', '.join(sorted(extra))}; "
                          f"known: {', '.join(sorted(known))}")
    changes: dict[str, Any] = {}
    for key in ("tx_power_dbm", "rx_sensitivity_dbm", "relock_ms", "dop"):
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


def _fabric_from_dict(data: Any, source: str) -> Fabric:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FabricError(f"{source} is not a LUMION fabric (expected schema {SCHEMA!r})")
    if data.get("version") != SCHEMA_VERSION:
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


# ---------------------------------------------------------------------------------------
# Jobs
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """A logical topology over accelerators.

    Attributes:
        name: label.
        accelerators: the job's accelerators (order matters for ring and line).
        links: directed logical links ``(a, b)``: a's transmitter to b's receiver.
        topology: "ring", "line", "links" (explicit) or "all-to-all".
    """

    name: str
    accelerators: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    topology: str = "links"

    def substitute(self, old: str, new: str) -> Job:
        """The same job with accelerator ``old`` replaced by ``new`` everywhere."""
        def sub(x: str) -> str:
            return new if x == old else x

        return Job(self.name, tuple(sub(a) for a in self.accelerators),
                   tuple((sub(a), sub(b)) for a, b in self.links), self.topology)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"name": self.name, "topology": self.topology, "accelerators": list(self.accelerators),
                "links": [list(link) for link in self.links]}


def _check_members(names: Sequence[str], minimum: int, what: str) -> tuple[str, ...]:
    names = tuple(str(n) for n in names)
    if len(names) < minimum:
        raise FabricError(f"a {what} needs at least {minimum} accelerators, got {len(names)}")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise FabricError(f"a {what} lists {', '.join(dup)} more than once")
    return names


def ring_job(accelerators: Sequence[str], name: str = "ring") -> Job:
    """Unidirectional ring a0 -> a1 -> ... -> a(n-1) -> a0 (n links; n = 2 gives a pair both ways)."""
    acc = _check_members(accelerators, 2, "ring")
    return Job(name, acc, tuple((acc[i], acc[(i + 1) % len(acc)]) for i in range(len(acc))), "ring")


def line_job(accelerators: Sequence[str], name: str = "line") -> Job:
    """Unidirectional line a0 -> a1 -> ... -> a(n-1) (n - 1 links)."""
    acc = _check_members(accelerators, 2, "line")
    return Job(name, acc, tuple((acc[i], acc[i + 1]) for i in range(len(acc) - 1)), "line")


def links_job(links: Iterable[Sequence[str]], name: str = "links") -> Job:
    """An explicit list of directed links ``[a, b]``."""
    out = []
    for k, link in enumerate(links):
        if not isinstance(link, list | tuple) or len(link) != 2 or link[0] == link[1]:
            raise FabricError(f"link {k} must be two different accelerators [a, b], not {link!r}")
        out.append((str(link[0]), str(link[1])))
    if not out:
        raise FabricError("an explicit job needs at least one link")
    if len(set(out)) != len(out):
        raise FabricError("an explicit job lists a link twice")
    acc = tuple(dict.fromkeys(a for link in out for a in link))
    return Job(name, acc, tuple(out), "links")


def check_job(fabric: Fabric, job: Job) -> None:
    """FabricError when the job names unknown accelerators or needs more lanes than they have."""
    for a in job.accelerators:
        fabric.accelerator(a)
    out_deg: dict[str, int] = {}
    in_deg: dict[str, int] = {}
    for a, b in job.links:
        out_deg[a] = out_deg.get(a, 0) + 1
        in_deg[b] = in_deg.get(b, 0) + 1
    for a, n in out_deg.items():
        if n > len(fabric.accelerator(a).tx):
            raise FabricError(f"job {job.name!r}: {a} transmits on {n} links but has "
                              f"{len(fabric.accelerator(a).tx)} TX lane(s)")
    for a, n in in_deg.items():
        if n > len(fabric.accelerator(a).rx):
            raise FabricError(f"job {job.name!r}: {a} receives on {n} links but has "
                              f"{len(fabric.accelerator(a).rx)} RX lane(s)")


def link_ports(fabric: Fabric, links: Sequence[tuple[str, str]]) -> list[tuple[int, int]]:
    """(TX port, RX port) per logical link: each accelerator's lanes are used in order."""
    used_tx: dict[str, int] = {}
    used_rx: dict[str, int] = {}
    out = []
    for a, b in links:
        ta, tb = fabric.accelerator(a), fabric.accelerator(b)
        i, j = used_tx.get(a, 0), used_rx.get(b, 0)
        if i >= len(ta.tx):
            raise FabricError(f"{a} has no TX lane left for {a}->{b} ({len(ta.tx)} lane(s))")
        if j >= len(tb.rx):
            raise FabricError(f"{b} has no RX lane left for {a}->{b} ({len(tb.rx)} lane(s))")
        used_tx[a], used_rx[b] = i + 1, j + 1
        out.append((ta.tx[i], tb.rx[j]))
    return out


# ---------------------------------------------------------------------------------------
# Phased job descriptions (TOML)
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Phase:
    """One phase of a job: its circuits, as logical links or as an all-to-all group."""

    name: str
    kind: str  # "rings", "lines", "links" or "all-to-all"
    groups: tuple[tuple[str, ...], ...]
    links: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PhasedJob:
    """A job description with phases (e.g. tensor-parallel, then data-parallel all-reduce)."""

    name: str
    fabric: str | None  # path of a fabric file, relative to the TOML file; None = default
    accelerators: tuple[str, ...]
    phases: tuple[Phase, ...]


_PHASE_KINDS = ("rings", "ring", "lines", "line", "links", "all-to-all")


def _phase_links(kind: str, groups: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, str], ...]:
    links: list[tuple[str, str]] = []
    for g in groups:
        if kind in ("rings", "ring"):
            links += ring_job(g).links
        elif kind in ("lines", "line"):
            links += line_job(g).links
    return tuple(links)


def parse_job_toml(text: str, source: str = "job") -> PhasedJob:
    """Parse a phased job description (TOML); FabricError naming the file and the field.

    Format::

        [job]
        name = "tp4-dp2"
        fabric = "fabric.json"          # optional, relative to this file
        accelerators = ["gpu0", ...]    # optional: checked to cover every phase

        [[phase]]
        name = "tensor-parallel all-reduce"
        kind = "rings"                  # rings | lines | links | all-to-all
        groups = [["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu4", "gpu5", "gpu6", "gpu7"]]

        [[phase]]
        name = "pipeline"
        kind = "links"
        links = [["gpu3", "gpu4"]]
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FabricError(f"{source} is not valid TOML: {exc}") from None
    job = data.get("job", {})
    if not isinstance(job, dict):
        raise FabricError(f"{source}: [job] must be a table")
    raw = data.get("phase")
    if not isinstance(raw, list) or not raw:
        raise FabricError(f"{source}: give at least one [[phase]] table")
    phases = []
    for k, ph in enumerate(raw):
        where = f"{source}: phase {k + 1}"
        if not isinstance(ph, dict):
            raise FabricError(f"{where} must be a table")
        kind = str(ph.get("kind", "links"))
        if kind not in _PHASE_KINDS:
            raise FabricError(f"{where}: kind must be one of rings, lines, links, all-to-all, not {kind!r}")
        name = str(ph.get("name", f"phase {k + 1}"))
        try:
            if kind == "links":
                links = links_job(ph.get("links", []), name).links
                groups: tuple[tuple[str, ...], ...] = ()
            else:
                g = ph.get("groups")
                if g is None and "accelerators" in ph:
                    g = [ph["accelerators"]]
                if not isinstance(g, list) or not g or not all(isinstance(x, list) for x in g):
                    raise FabricError("give groups = [[a, b, ...], ...]")
                groups = tuple(_check_members(x, 2, kind) for x in g)
                seen = [a for x in groups for a in x]
                if len(set(seen)) != len(seen):
                    raise FabricError("an accelerator appears in two groups of one phase")
                links = _phase_links(kind, groups)
        except FabricError as exc:
            raise FabricError(f"{where} ({name}): {exc}") from None
        kind = {"ring": "rings", "line": "lines"}.get(kind, kind)
        phases.append(Phase(name, kind, groups, links))
    members = tuple(dict.fromkeys(a for ph in phases for a in (*[x for g in ph.groups for x in g],
                                                                   *[x for link in ph.links for x in link])))
    declared = job.get("accelerators")
    if declared is not None:
        declared = tuple(str(a) for a in declared)
        stray = [a for a in members if a not in declared]
        if stray:
            raise FabricError(f"{source}: phases use {', '.join(stray)}, not in [job] accelerators")
        members = declared
    fabric = job.get("fabric")
    return PhasedJob(str(job.get("name", Path(source).stem)), None if fabric is None else str(fabric),
                     members, tuple(phases))


def load_job_toml(path: str | os.PathLike[str]) -> PhasedJob:
    """Read a phased job description from a TOML file (see :func:`parse_job_toml`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FabricError(f"job file {path} not found") from None
    job = parse_job_toml(text, str(path))
    if job.fabric is not None and not os.path.isabs(job.fabric):
        job = replace(job, fabric=str(Path(path).parent / job.fabric))
    return job


def lanes_summary(fabric: Fabric) -> list[Mapping[str, Any]]:
    """One row per accelerator: name, spare, TX and RX port names (for tables and JSON)."""
    names = fabric.mesh.port_names
    return [{"name": a.name, "spare": a.spare, "tx": [names[p] for p in a.tx],
             "rx": [names[p] for p in a.rx]} for a in fabric.accelerators]
