"""Jobs: logical topologies over a fabric's accelerators, and phased job descriptions (TOML).

See :mod:`photonics.fabric.model` for the fabric they run on and docs/fabric.md for the formats.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.fabric.model import Fabric, FabricError


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


JOB_SCHEMA = "lumion.job"
JOB_SCHEMA_VERSION = 1


def _check_job_version(data: dict[str, Any], source: str) -> None:
    """A job file may name its schema and version; if it does, they must be ours."""
    if "schema" in data and data["schema"] != JOB_SCHEMA:
        raise FabricError(f"{source}: schema must be {JOB_SCHEMA!r}, not {data['schema']!r}")
    version = data.get("version", JOB_SCHEMA_VERSION)
    if type(version) is not int or version != JOB_SCHEMA_VERSION:  # `true` is not 1
        raise FabricError(f"{source}: unsupported job version {version!r}; this software reads "
                          f"version {JOB_SCHEMA_VERSION}")


def parse_job_toml(text: str, source: str = "job") -> PhasedJob:
    """Parse a phased job description (TOML); FabricError naming the file and the field.

    Format (``schema``/``version`` optional; when given they must be these)::

        schema = "lumion.job"
        version = 1

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
    _check_job_version(data, source)
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
        text = read_text(path, DATA_FILE_MAX_BYTES, "job file")
    except FileNotFoundError:
        raise FabricError(f"job file {path} not found") from None
    job = parse_job_toml(text, str(path))
    if job.fabric is not None and not os.path.isabs(job.fabric):
        job = replace(job, fabric=str(Path(path).parent / job.fabric))
    return job


