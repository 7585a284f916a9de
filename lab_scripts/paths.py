"""The one policy for every output path of ``lumion`` (docs/cli.md, "Output paths").

* The folder a file goes into must exist: ``lumion`` never creates parent folders and
  refuses with the folder's name (nothing is computed or written first).
* An output file is named by a file name, never a folder: ``.``, ``dir/`` or an existing
  folder is refused, and so is a name that is only a suffix (``.png``).
* A name without a suffix gets the expected one (``--plot spectrum`` writes
  ``spectrum.png``) and the command reports the real name; a name with another suffix is
  refused (plots: ``.png``, ``.svg`` or ``.pdf``, the format follows the suffix).
* An output *folder* (``demo --out``, ``calibrate --plot``) is created when the command
  writes into it, but its parent must exist, as for files.

Checks run before any work, so a refused path leaves the disk as it was.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> output_file(f"{folder}/spectrum", "--plot", PLOT_SUFFIXES).name
    'spectrum.png'
"""

from __future__ import annotations

import os
from pathlib import Path

from lab_scripts.errors import CliError

# Formats matplotlib's Agg backend writes that every viewer opens; the first is the default.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
JSON_SUFFIXES = (".json",)
TOML_SUFFIXES = (".toml",)
GDS_SUFFIXES = (".gds",)
PNG_SUFFIXES = (".png",)


class PathError(CliError):
    """An output path breaks the path policy; the message names the path and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "input", "PathError")


def _check_parent(path: Path, option: str, value: str) -> None:
    parent = path.parent
    if parent.is_dir():
        return
    if parent.exists():
        raise PathError(f"{option} {value}: {parent} is not a folder")
    raise PathError(f"{option} {value}: folder {parent} does not exist; create it first "
                    f"(mkdir -p {parent})")


def output_file(value: str, option: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """The file ``option`` (e.g. ``--plot``) should write, after the path policy.

    ``suffixes``: the accepted suffixes, the first appended to a bare name; None accepts
    any name as given.
    """
    if not value or not value.strip():
        raise PathError(f"{option} needs a file name")
    path = Path(value)
    example = f"name{suffixes[0] if suffixes else ''}"
    if value.endswith(("/", os.sep)) or path.name in ("", ".", "..") or path.is_dir():
        raise PathError(f"{option} {value}: is a folder; give a file name such as "
                        f"{Path(value) / example}")
    if path.name.startswith(".") and path.suffix == "" and suffixes:
        raise PathError(f"{option} {value}: give a file name before the suffix, such as "
                        f"{path.with_name(example)}")
    if suffixes:
        if path.suffix == "":
            path = path.with_name(path.name + suffixes[0])
        elif path.suffix.lower() not in suffixes:
            raise PathError(f"{option} {value}: this file is written as {' or '.join(suffixes)}; "
                            f"name it {path.with_suffix(suffixes[0])}")
    _check_parent(path, option, value)
    return path


def output_folder(value: str, option: str) -> Path:
    """The folder ``option`` should write into (created later by the command, not its parents)."""
    if not value or not value.strip():
        raise PathError(f"{option} needs a folder name")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise PathError(f"{option} {value}: is a file; give a folder")
    if not path.exists():
        _check_parent(path, option, value)
    return path


def sibling(path: Path, tag: str) -> Path:
    """A file next to ``path`` with ``-tag`` added to its stem (``m.png`` -> ``m-timeline.png``)."""
    return path.with_name(f"{path.stem}-{tag}{path.suffix}")


EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


def example(name: str) -> Path:
    """The shipped example file ``name`` (``tp4-dp2.toml``): ``examples/`` of a checkout,
    ``lab_scripts/examples/`` of an installed wheel (the same files).

    Example:
        >>> example("tp4-dp2.toml").is_file()
        True
    """
    path = EXAMPLES_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in EXAMPLES_DIR.glob("*") if p.is_file()))
        raise CliError(f"no example {name!r}; the examples are {known}", "input")
    return path
