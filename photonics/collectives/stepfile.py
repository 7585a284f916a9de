"""Schedules given as files (TACCL-style step lists), JSON or TOML (docs/collectives.md).

Format (``lumion.collective-steps`` version 1)::

    schema = "lumion.collective-steps"
    version = 1
    name = "ring-4"
    collective = "allreduce"      # or "alltoall"
    ranks = 4
    chunks = 4                    # allreduce: chunks per buffer; alltoall: omit (N*N blocks)
    combine = false               # alltoall only: blocks travel back (MoE combine)

    [[step]]
    op = "reduce"                 # default op of the step's sends: reduce | copy
    sends = [[0, 1, 3], [1, 2, 0], [2, 3, 1], [3, 0, 2, "reduce"]]   # src dst chunk [op]

JSON is the same object with ``"step": [{"op": ..., "sends": [...]}, ...]``. Every field is
validated with a one-line error naming the file and the step; the schedule is then
simulated and refused when it does not complete its collective.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.collectives.simulate import simulate
from photonics.collectives.steps import KINDS, OPS, Collective, CollectiveError, Send, Step, check_send

STEP_SCHEMA = "lumion.collective-steps"
STEP_VERSION = 1
_TOP = {"schema", "version", "name", "collective", "ranks", "chunks", "combine", "step"}
# A hand-written or generated schedule larger than this is almost surely a mistake (and
# would make the simulator's per-rank sets large); raise it if a real one needs more.
MAX_RANKS = 1024


def load_steps(path: str | os.PathLike[str]) -> Collective:
    """Read a step file (``.json`` or ``.toml``); CollectiveError naming the file otherwise."""
    p = Path(path)
    try:
        text = read_text(p, DATA_FILE_MAX_BYTES, "step file")
    except FileNotFoundError:
        raise CollectiveError(f"step file {p} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CollectiveError(f"step file {p} cannot be read: {exc}") from None
    if p.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CollectiveError(f"step file {p} is not valid TOML: {exc}") from None
    elif p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CollectiveError(f"step file {p} is not valid JSON: {exc}") from None
    else:
        raise CollectiveError(f"step file {p}: name it .json or .toml (the suffix picks the format)")
    return parse_steps(data, str(p))


def _int(value: Any, what: str, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise CollectiveError(f"{where}: {what} must be an integer >= {low}, not {value!r}")
    return value


def parse_steps(data: Any, source: str = "step file") -> Collective:
    """Build and check a :class:`Collective` from a parsed step file."""
    if not isinstance(data, dict) or data.get("schema") != STEP_SCHEMA:
        raise CollectiveError(f"{source} is not a LUMION step file (expected schema {STEP_SCHEMA!r})")
    if data.get("version") != STEP_VERSION:
        raise CollectiveError(f"{source}: unsupported version {data.get('version')!r} "
                              f"(this software reads version {STEP_VERSION})")
    extra = sorted(set(data) - _TOP)
    if extra:
        raise CollectiveError(f"{source}: unknown field(s) {', '.join(extra)}; "
                              f"known: {', '.join(sorted(_TOP))}")
    kind = data.get("collective")
    if kind not in KINDS:
        raise CollectiveError(f"{source}: collective must be one of {', '.join(KINDS)}, not {kind!r}")
    n = _int(data.get("ranks"), "ranks", source, 2)
    if n > MAX_RANKS:
        raise CollectiveError(f"{source}: at most {MAX_RANKS} ranks, not {n}")
    combine = data.get("combine", False)
    if not isinstance(combine, bool) or (combine and kind != "alltoall"):
        raise CollectiveError(f"{source}: combine is true or false, and only for an alltoall")
    if kind != "alltoall":
        chunks = _int(data.get("chunks"), "chunks", source, 1)
    else:
        chunks = (2 if combine else 1) * n * n
        if "chunks" in data and data["chunks"] != chunks:
            raise CollectiveError(f"{source}: an alltoall over {n} ranks has {chunks} blocks; omit chunks")
    raw = data.get("step")
    if not isinstance(raw, list) or not raw:
        raise CollectiveError(f"{source}: give at least one step ([[step]] in TOML, \"step\": [...] in JSON)")
    steps = tuple(_step(s, k, n, chunks, source) for k, s in enumerate(raw))
    name = data.get("name", Path(source).stem)
    try:
        coll = Collective(str(name), kind, n, chunks, steps, combine)
        simulate(coll)  # refuse a schedule that does not complete (one line: which rank lacks what)
    except CollectiveError as exc:
        raise CollectiveError(f"{source}: {exc}") from None
    return coll


def _step(raw: Any, k: int, n: int, chunks: int, source: str) -> Step:
    where = f"{source}: step {k + 1}"
    if not isinstance(raw, dict):
        raise CollectiveError(f"{where} must be a table with 'sends' (and optionally 'op', 'label')")
    extra = sorted(set(raw) - {"op", "sends", "label"})
    if extra:
        raise CollectiveError(f"{where}: unknown field(s) {', '.join(extra)}")
    op = raw.get("op", "copy")
    if op not in OPS:
        raise CollectiveError(f"{where}: op must be one of {', '.join(OPS)}, not {op!r}")
    sends_raw = raw.get("sends")
    if not isinstance(sends_raw, list) or not sends_raw:
        raise CollectiveError(f"{where}: sends must be a non-empty list of [src, dst, chunk]")
    sends = []
    for j, s in enumerate(sends_raw):
        if not isinstance(s, list) or len(s) not in (3, 4):
            raise CollectiveError(f"{where}, send {j + 1}: write it [src, dst, chunk] or "
                                  f"[src, dst, chunk, op], not {s!r}")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in s[:3]):
            raise CollectiveError(f"{where}, send {j + 1}: src, dst and chunk are integers, not {s[:3]!r}")
        send = Send(s[0], s[1], s[2], s[3] if len(s) == 4 else op)
        check_send(send, n, chunks, f"{where}, send {j + 1}")
        sends.append(send)
    if len(set(sends)) != len(sends):
        raise CollectiveError(f"{where}: a send is listed twice")
    return Step(tuple(sends), str(raw.get("label", f"step {k + 1}")))
