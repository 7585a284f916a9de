"""The calibration checkpoint: a JSON file, written atomically after every TBU, to resume a run."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from calibration.map import HEATER_FAULT_STATES, CalibrationError, mesh_signature
from calibration.records import CrosstalkRecord, TBURecord
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text
from photonics.topology import Mesh, atomic_write_text

CHECKPOINT_SCHEMA = "lumion.calibration-checkpoint"
CHECKPOINT_VERSION = 1


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
    # One line, no indent: json's C encoder only runs without indent. The file is rewritten
    # after every TBU (223 times in a SmartLight run), and the indented pure-Python encoding
    # cost ~1 s of CPU per run; the records' values are written identically.
    atomic_write_text(path, json.dumps(data, separators=(",", ":")))


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
