"""Small helpers shared by the ``lumion`` subcommands: output, tables, argument types."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from lab_scripts.errors import UsageError, reading  # UsageError lives with the other failures
from photonics.bounded_read import DATA_FILE_MAX_BYTES, read_text

if TYPE_CHECKING:  # numpy is imported by the commands that run, not by `lumion --help`
    import numpy as np


def seed(text: str) -> int:
    """Argument type of chip seeds: an integer >= 0 (numpy's generators refuse negatives)."""
    return _int_at_least(text, 0, "a seed: an integer >= 0")


def count(text: str) -> int:
    """Argument type of counts that may be zero (0 skips the step)."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive(text: str) -> int:
    """Argument type of counts that must be at least one."""
    return _int_at_least(text, 1, "an integer >= 1")


def non_negative_float(text: str) -> float:
    """Argument type of a finite number >= 0 (a time, a size, a cost)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, not {text!r}")
    return value


def fraction(text: str) -> float:
    """Argument type of a fraction in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value < 1):
        raise argparse.ArgumentTypeError(f"expected a fraction 0 <= f < 1, not {text!r}")
    return value


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}")
    return value


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add the ``--json`` flag every subcommand has."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays (recursively) to plain JSON types; NaN and infinities to None."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    numpy = sys.modules.get("numpy")  # a numpy value exists only once numpy is imported
    if numpy is not None and isinstance(value, numpy.ndarray):
        return to_jsonable(value.tolist())
    if numpy is not None and isinstance(value, numpy.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# A command's output is schema "lumion.<command>" version 1 unless named here: `mesh` and
# `bench` print something else than the data files called lumion.mesh and lumion.bench;
# `rack` is named for its action.
OUTPUT_SCHEMA_NAMES = {"mesh": "lumion.mesh-info", "bench": "lumion.bench-serve",
                       "rack": "lumion.rack.simulate"}
# Raised for a command when its output changes incompatibly (a key renamed or removed).
OUTPUT_VERSIONS: dict[str, int] = {
    "mesh": 2,  # v2: the per-TBU lists, links and geometry only with --full (issue 29)
}
ROUTE_SCHEMA = "lumion.route"
_RUNNING: ContextVar[str | None] = ContextVar("lumion_command", default=None)


def output_schema(command: str) -> tuple[str, int]:
    """The ``schema`` name and ``version`` of ``lumion COMMAND --json`` output."""
    return OUTPUT_SCHEMA_NAMES.get(command, f"lumion.{command}"), OUTPUT_VERSIONS.get(command, 1)


@contextlib.contextmanager
def running(command: str) -> Iterator[None]:
    """Within the block, :func:`print_json` stamps objects with ``command``'s schema and version."""
    token = _RUNNING.set(command)
    try:
        yield
    finally:
        _RUNNING.reset(token)


def print_json(payload: dict[str, Any], one_line: bool = False) -> None:
    """Print one JSON object on stdout, led by its ``schema`` and ``version`` (docs/schemas.md).

    ``one_line`` for commands that keep running after they report (``bench serve``): a
    reader takes the first line.
    """
    command = _RUNNING.get()
    if command is not None and "schema" not in payload:
        name, version = output_schema(command)
        payload = {"schema": name, "version": version, **payload}
    print(json.dumps(to_jsonable(payload), indent=None if one_line else 1), flush=True)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain-text table with right-aligned numeric columns."""
    body = [[_fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def recovery_changes(n_tbus: int, n_heaters: int, heater_unit: str, map_name: str) -> str:
    """How much one recovery re-set, in the words ``demo`` and ``failover`` both print.

    ``n_heaters`` is the number of heater channels the recovery writes: those whose drive
    value changes by more than the driver resolves, outside the TBUs that other routes hold
    and the failed ones (``Recovery.program``). Through a calibrated map that compensates
    thermal crosstalk, re-setting a TBU also re-trims its neighbours' currents, so the count
    can exceed the two heaters of each re-set TBU; through the ideal map it cannot
    (``heater_unit`` "mA" for currents through a map, "rad" for phases of a plan made without one).
    """
    if heater_unit == "rad":
        basis = "heater phases, no map"
    elif map_name == "calibrated":
        basis = "heater currents, calibrated map: its crosstalk compensation re-trims neighbours too"
    else:
        basis = f"heater currents, {map_name} map"
    return f"{n_tbus} TBUs and {n_heaters} heaters changed ({basis})"


def _fmt(value: Any) -> str:
    numpy = sys.modules.get("numpy")
    if isinstance(value, float) or (numpy is not None and isinstance(value, numpy.floating)):
        return f"{value:.2f}"
    return str(value)


def wavelength_range(text: str, max_points: int) -> np.ndarray:
    """Parse ``START:STOP:N`` (nm) or a single wavelength into an array of at most ``max_points``."""
    import numpy as np

    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        parts = []
    if not all(math.isfinite(p) for p in parts):
        parts = []
    if len(parts) == 1 and parts[0] > 0:
        return np.array(parts)
    if len(parts) == 3 and 0 < parts[0] <= parts[1] and parts[2] >= 1 and parts[2] == int(parts[2]):
        if parts[2] > max_points:
            raise UsageError(f"at most {max_points} wavelengths per run, not {int(parts[2])}")
        return np.linspace(parts[0], parts[1], int(parts[2]))
    raise UsageError(f"wavelengths must be START:STOP:N in nm (e.g. 1549:1551:201), not {text!r}")


def load_mesh(spec: str) -> Any:
    """The mesh ``--mesh`` names; a bad spec or mesh file is an ``input`` error naming it."""
    from photonics.topology import mesh_from_spec

    with reading("mesh file", spec):
        return mesh_from_spec(spec)


def mesh_spec(mesh: Any, given: str) -> str:
    """How outputs name a mesh: its ``--mesh`` name (``smartlight``, ``hex:1x2``) or, for a
    mesh file that is no generated mesh, the file as given (so the value works as ``--mesh``).
    """
    from photonics.configuration import mesh_label

    label = mesh_label(mesh)
    return given if label == "custom" else label


def load_configuration(path: str, mesh: Any) -> Any:
    """A ``lumion.configuration`` file (or ``lumion route --json`` output) for ``mesh``.

    A configuration made for another mesh, or a malformed file, is an ``input`` error
    naming the file, the mesh it was made for and the mesh it was offered to.
    """
    from photonics.configuration import Configuration

    with reading("configuration", path):
        data = json.loads(read_text(path, DATA_FILE_MAX_BYTES, "configuration"))
        # accept `lumion route --json` output (before version 1 of it: no schema key)
        wrapped = isinstance(data, dict) and data.get("schema", ROUTE_SCHEMA) == ROUTE_SCHEMA
        if wrapped and "configuration" in data:
            data = data["configuration"]
        return Configuration.from_dict(data, mesh, source=path)
