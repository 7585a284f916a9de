"""Job traces: arrivals, sizes, communication patterns, durations (simulated hours).

A trace file is CSV with a header or JSON lines, one job per row/line, fields:

* ``arrival_h``: arrival time, hours from the start of the trace (>= 0);
* ``size``: number of accelerators (>= 2);
* ``pattern``: ``ring``, ``line`` or ``all-to-all``;
* ``duration_h``: work the job needs, hours on a healthy slice (> 0);
* ``name`` (optional): a label (default ``job<k>``).

Jobs are returned sorted by arrival (stable: ties keep file order).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from photonics.bounded_read import TRACE_FILE_MAX_BYTES, read_text
from photonics.rack.model import RackError

PATTERNS = ("ring", "line", "all-to-all")
FIELDS = ("arrival_h", "size", "pattern", "duration_h")
MIN_SIZE = 2  # a pattern needs two accelerators to have a link at all

# Synthetic trace defaults: a busy rack (mean load about 1.3x the 16 workers of the default
# rack: 4 h x 5.3 accelerators every 1.0 h), so queues form and placement policy matters.
SYNTH_INTERARRIVAL_H = 1.0
SYNTH_DURATION_H = 4.0
SYNTH_SIZES = (2, 4, 4, 6, 8, 8)  # drawn uniformly; mostly power-of-two slices as in ML practice
SYNTH_PATTERNS = ("ring", "ring", "ring", "line", "all-to-all")  # rings dominate (all-reduce)


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace (hours)."""

    name: str
    arrival_h: float
    size: int
    pattern: str
    duration_h: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the JSON-lines trace format)."""
        return asdict(self)


def check_job(job: TraceJob, where: str = "trace") -> TraceJob:
    """``job`` when its fields are valid; RackError naming ``where`` and the field otherwise."""
    if job.pattern not in PATTERNS:
        raise RackError(f"{where}: pattern must be one of {', '.join(PATTERNS)}, not {job.pattern!r}")
    if job.size < MIN_SIZE:
        raise RackError(f"{where}: size must be an integer >= {MIN_SIZE}, not {job.size!r}")
    if not (np.isfinite(job.arrival_h) and job.arrival_h >= 0):
        raise RackError(f"{where}: arrival_h must be a number >= 0, not {job.arrival_h!r}")
    if not (np.isfinite(job.duration_h) and job.duration_h > 0):
        raise RackError(f"{where}: duration_h must be a number > 0, not {job.duration_h!r}")
    return job


def _job(row: dict[str, Any], k: int, where: str) -> TraceJob:
    missing = [f for f in FIELDS if f not in row or row[f] in (None, "")]
    if missing:
        raise RackError(f"{where}: missing field(s) {', '.join(missing)}; every job needs "
                        f"{', '.join(FIELDS)}")
    extra = set(row) - {*FIELDS, "name"}
    if extra:
        raise RackError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}")
    try:
        size_f = float(row["size"])
        arrival, duration = float(row["arrival_h"]), float(row["duration_h"])
    except (TypeError, ValueError):
        raise RackError(f"{where}: arrival_h, size and duration_h must be numbers") from None
    if not size_f.is_integer():
        raise RackError(f"{where}: size must be an integer, not {row['size']!r}")
    name = str(row.get("name") or f"job{k}")
    return check_job(TraceJob(name, arrival, int(size_f), str(row["pattern"]), duration), where)


def parse_trace(text: str, source: str = "trace", fmt: str | None = None) -> tuple[TraceJob, ...]:
    """Parse a CSV (header row) or JSON-lines trace; ``fmt`` "csv"/"jsonl" or guessed from the text."""
    stripped = text.lstrip()
    if fmt is None:
        fmt = "jsonl" if stripped.startswith("{") else "csv"
    rows: list[dict[str, Any]] = []
    if fmt == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RackError(f"{source} line {n}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise RackError(f"{source} line {n}: each line must be a JSON object")
            rows.append(obj)
        wheres = [f"{source} line {n}" for n in range(1, len(rows) + 1)]
    elif fmt == "csv":
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None:
            raise RackError(f"{source} is empty; give a header row {','.join(FIELDS)} and one job per row")
        rows = [dict(r) for r in reader]
        if any(None in r for r in rows):
            raise RackError(f"{source}: a row has more values than the header has columns")
        wheres = [f"{source} row {k + 2}" for k in range(len(rows))]
    else:
        raise RackError(f"trace format must be csv or jsonl, not {fmt!r}")
    jobs = [_job(r, k, w) for k, (r, w) in enumerate(zip(rows, wheres, strict=True))]
    if not jobs:
        raise RackError(f"{source} holds no jobs")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise RackError(f"{source}: job name {dup!r} is used twice")
    return tuple(sorted(jobs, key=lambda j: j.arrival_h))


def load_trace(path: str | Path) -> tuple[TraceJob, ...]:
    """Read a trace file (``.csv``, or ``.jsonl``/``.json`` JSON lines)."""
    p = Path(path)
    try:
        text = read_text(p, TRACE_FILE_MAX_BYTES, "trace file")
    except FileNotFoundError:
        raise RackError(f"trace file {p} not found") from None
    except UnicodeDecodeError:
        raise RackError(f"trace file {p} is not UTF-8 text") from None
    fmt = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}.get(p.suffix.lower())
    return parse_trace(text, str(p), fmt)


def trace_to_jsonl(jobs: tuple[TraceJob, ...]) -> str:
    """The JSON-lines text of ``jobs`` (what :func:`parse_trace` reads back)."""
    return "".join(json.dumps(j.to_dict()) + "\n" for j in jobs)


def synthetic_trace(
    n_jobs: int,
    *,
    seed: int,
    mean_interarrival_h: float = SYNTH_INTERARRIVAL_H,
    mean_duration_h: float = SYNTH_DURATION_H,
    sizes: tuple[int, ...] = SYNTH_SIZES,
    patterns: tuple[str, ...] = SYNTH_PATTERNS,
) -> tuple[TraceJob, ...]:
    """A seeded trace: Poisson arrivals, exponential durations, sizes and patterns drawn uniformly.

    Same ``seed`` and arguments, same trace (numpy's PCG64 stream).
    """
    if n_jobs < 1:
        raise RackError(f"a synthetic trace needs at least one job, not {n_jobs}")
    if not mean_interarrival_h > 0 or not mean_duration_h > 0:
        raise RackError("mean_interarrival_h and mean_duration_h must be > 0 hours")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(mean_interarrival_h, n_jobs)
    arrivals = np.cumsum(gaps) - gaps[0]  # the first job arrives at t = 0
    durations = rng.exponential(mean_duration_h, n_jobs)
    size = rng.choice(np.asarray(sizes), n_jobs)
    pattern = rng.choice(np.asarray(patterns), n_jobs)
    jobs = tuple(TraceJob(f"job{k}", round(float(arrivals[k]), 6), int(size[k]), str(pattern[k]),
                          round(max(float(durations[k]), 1e-3), 6)) for k in range(n_jobs))
    for j in jobs:
        check_job(j, "synthetic trace")
    return jobs
