"""The calibration checkpoint: a JSON file, written atomically as TBUs are fitted, to resume a run.

The run offers its state after every TBU (:class:`CheckpointWriter`); the file is rewritten
when :data:`CHECKPOINT_EVERY_S` has passed since its last write, and once more with the last
state offered when the run returns or raises (Ctrl-C, SIGTERM, a refusal, a bug). So the file
on disk always holds a state the run reached, whole (atomic write), and at worst -- ``kill -9``
or a power cut -- misses the TBUs of the last :data:`CHECKPOINT_EVERY_S` seconds, which a
resume measures again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from calibration.map import HEATER_FAULT_STATES, CalibrationError, mesh_signature
from calibration.records import CrosstalkRecord, TBURecord
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.topology import Mesh, atomic_write_text

CHECKPOINT_SCHEMA = "lumion.calibration-checkpoint"
CHECKPOINT_VERSION = 1
# What a resume after ``kill -9`` (or a power cut) may measure again, at most: the seconds of
# measuring since the checkpoint was last written. Written after every TBU, a simulated
# SmartLight run rewrote it 227 times, each fsynced (~1.8 s of waiting and ~0.5 s of JSON of a
# ~12 s CPU run, session 38-39); on a real bench a TBU's sweeps take seconds, so nearly every
# TBU is still written there. Any other end of the run writes its last state (CheckpointWriter).
CHECKPOINT_EVERY_S = 2.0


def _fields(record: TBURecord | CrosstalkRecord) -> dict[str, object]:
    """The record's fields as they are: json encodes them at once, so no deep copy is needed
    (``dataclasses.asdict`` deep-copied every list of every record on every save).
    """
    return {f.name: getattr(record, f.name) for f in fields(record)}


def save_checkpoint(path: Path, chip_id: str, mesh: Mesh, records: dict[int, TBURecord],
                    operations: int, duration_s: float,
                    crosstalk: dict[int, CrosstalkRecord] | None = None,
                    failed: dict[int, str] | None = None) -> None:
    """Write the checkpoint atomically (``failed``: TBUs found broken, index -> how)."""
    data = {"schema": CHECKPOINT_SCHEMA, "version": CHECKPOINT_VERSION, "chip_id": chip_id,
            "mesh": mesh_signature(mesh), "operations": operations, "duration_s": duration_s,
            "tbus": {str(t): _fields(r) for t, r in sorted(records.items())},
            "crosstalk": {str(t): _fields(r) for t, r in sorted((crosstalk or {}).items())},
            "failed": {str(t): how for t, how in sorted((failed or {}).items())}}
    # One line, no indent: json's C encoder only runs without indent. When the file was
    # rewritten after every TBU (223 times in a SmartLight run), the indented pure-Python
    # encoding cost ~1 s of CPU per run; the records' values are written identically.
    atomic_write_text(path, json.dumps(data, separators=(",", ":")))


@dataclass
class CheckpointWriter:
    """Writes a run's checkpoint at most every ``every_s`` seconds, and its last state on :meth:`flush`.

    :meth:`offer` keeps the state it is given (shallow copies: a record is never changed once
    stored in a run) and writes it when nothing was written yet or ``every_s`` (s, on
    ``clock``) passed since the last write; :meth:`flush` writes the last state offered if it
    is not on disk yet. The file then always holds a state :meth:`offer` was given.
    """

    path: Path
    chip_id: str
    mesh: Mesh
    every_s: float | None = None  # None: CHECKPOINT_EVERY_S (read when the writer is made)
    clock: Callable[[], float] = time.monotonic
    written_at: float | None = None
    pending: tuple | None = None
    writes: int = 0

    def __post_init__(self) -> None:
        if self.every_s is None:
            self.every_s = CHECKPOINT_EVERY_S

    def offer(self, records: dict[int, TBURecord], operations: int, duration_s: float,
              crosstalk: dict[int, CrosstalkRecord], failed: dict[int, str]) -> None:
        """The run's state now; written at once when the last write is ``every_s`` old."""
        self.pending = (dict(records), operations, duration_s, dict(crosstalk), dict(failed))
        if self.written_at is None or self.clock() - self.written_at >= self.every_s:
            self.flush()

    def flush(self) -> None:
        """Write the last state offered, if it is not written yet."""
        if self.pending is None:
            return
        records, operations, duration_s, crosstalk, failed = self.pending
        save_checkpoint(self.path, self.chip_id, self.mesh, records, operations, duration_s,
                        crosstalk, failed)
        self.pending = None
        self.written_at = self.clock()
        self.writes += 1


def load_checkpoint_crosstalk(path: Path) -> dict[int, CrosstalkRecord]:
    """Crosstalk victims already measured in a checkpoint (call after :func:`load_checkpoint`)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "calibration checkpoint"))
        return {int(t): CrosstalkRecord(**r) for t, r in data.get("crosstalk", {}).items()}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"checkpoint {path} is corrupt ({exc}); delete it to start over") from exc


def load_checkpoint(path: Path, chip_id: str, mesh: Mesh) -> tuple[dict[int, TBURecord], int, float]:
    """Records, operations and duration of an earlier run on this chip (empty if no file)."""
    if not path.exists():
        return {}, 0, 0.0
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "calibration checkpoint"))
        if data.get("schema") != CHECKPOINT_SCHEMA or data.get("version") != CHECKPOINT_VERSION:
            raise CalibrationError(f"{path} is not a version-{CHECKPOINT_VERSION} calibration checkpoint")
        records = {int(t): TBURecord(**r) for t, r in data["tbus"].items()}
        ops, dur = int(data["operations"]), float(data["duration_s"])
        chip, sig = data["chip_id"], data["mesh"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"checkpoint {path} is corrupt ({exc}); delete it to start over") from exc
    if chip != chip_id or sig != mesh_signature(mesh):
        raise CalibrationError(f"checkpoint {path} belongs to chip {chip!r}, not {chip_id!r}; "
                               "delete it or give another --checkpoint")
    if any(not 0 <= t < mesh.n_tbus for t in records):
        raise CalibrationError(f"checkpoint {path} names TBUs outside this mesh")
    return records, ops, dur



def load_checkpoint_failed(path: Path) -> dict[int, str]:
    """TBUs an earlier run found broken (call after :func:`load_checkpoint`)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "calibration checkpoint"))
        failed = {int(t): str(how) for t, how in data.get("failed", {}).items()}
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, TypeError, ValueError) as exc:
        raise CalibrationError(f"checkpoint {path} is corrupt ({exc}); delete it to start over") from exc
    if any(how not in ("dead", "bar", "cross", *HEATER_FAULT_STATES) for how in failed.values()):
        raise CalibrationError(f"checkpoint {path} records an unknown failure; delete it to start over")
    return failed
