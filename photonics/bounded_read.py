"""Reading input files with a size cap: a file named on a command line is read with a bounded read.

``--configuration /dev/zero`` (or a runaway file) must end in one line saying the file is
too large, not in all of memory. Every input file is read through :func:`read_text`,
which reads at most ``cap + 1`` bytes and refuses a file longer than ``cap``. The caps
are documented in docs/cli.md ("File size limits").

Example:
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write("{}")
    >>> read_text(f.name, 10, "configuration")
    '{}'
    >>> os.remove(f.name)
"""

from __future__ import annotations

import os

from photonics.errors import LumionError

MIB = 1 << 20
# JSON data files (configurations, plans, calibration maps and checkpoints, meshes,
# fabrics, jobs, states, collective step files, rack models): a smartlight calibration map
# is 137 kB and the largest generated mesh's map about 20x that; 32 MiB is 10x more and
# keeps the parsed objects (several times the text) well inside a lab PC's memory.
DATA_FILE_MAX_BYTES = 32 * MIB
# Rack traces (one job per line): a year of arrivals at one a minute is ~50 MB of CSV.
TRACE_FILE_MAX_BYTES = 256 * MIB
# Hand-written settings (a bench config, a rack TOML, a token file): a few kB in practice.
SETTINGS_FILE_MAX_BYTES = 1 * MIB


class FileTooLargeError(LumionError, ValueError):
    """An input file is longer than its documented cap."""


def read_bytes(path: str | os.PathLike[str], cap: int, what: str) -> bytes:
    """At most ``cap`` bytes of ``path``; :class:`FileTooLargeError` when it holds more.

    Reads ``cap + 1`` bytes at most, so a device (``/dev/zero``) or a growing file stops.
    """
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise FileTooLargeError(f"{what} {os.fspath(path)} is larger than the {cap // MIB} MiB a {what} "
                                "may be (docs/cli.md, file size limits); give the right file")
    return data


def read_text(path: str | os.PathLike[str], cap: int, what: str, encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded (``UnicodeDecodeError`` on bytes that are not ``encoding``)."""
    return read_bytes(path, cap, what).decode(encoding)
