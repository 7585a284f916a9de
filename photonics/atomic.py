"""Atomic file writes: every file the package writes goes through here.

A reader never sees half a file, and a crash leaves the old file whole: the data goes to
a temporary file in the target's folder, is flushed to disk (fsync), and is renamed over
the target. The temporary is created by :func:`tempfile.mkstemp` -- an unpredictable name,
opened with ``O_CREAT | O_EXCL``, so a file or symlink planted in the folder is never
followed or overwritten -- and is removed if anything fails.

Example:
    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "map.json"
    >>> atomic_write_text(target, '{"ok": true}')
    >>> target.read_text()
    '{"ok": true}'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# New files get the usual permissions of a file a user creates (mkstemp makes them 0600).
DEFAULT_MODE = 0o666


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return DEFAULT_MODE & ~mask


@contextlib.contextmanager
def _replacing(path: str | os.PathLike[str], suffix: str) -> Iterator[tuple[int, Path]]:
    """A temporary beside ``path`` (open fd, name) that replaces it when the block ends.

    On success the data is flushed to disk and the temporary renamed over the target with
    the target's permissions; on any failure the temporary is removed and the target kept.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent or ".")
    try:
        try:
            yield fd, Path(tmp)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _keep_mode(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """An open binary file whose contents replace ``path`` when the block ends without error.

    Example:
        >>> import pathlib, tempfile
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
        >>> with atomic_file(target) as f:
        ...     _ = f.write(b"abc")
        >>> target.read_bytes()
        b'abc'
    """
    with _replacing(path, ".tmp") as (fd, _tmp), os.fdopen(fd, "wb", closefd=False) as handle:
        yield handle
        handle.flush()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path (created exclusively, empty) that replaces ``path`` when the block ends.

    For writers that insist on a file name (a GDS writer); the temporary keeps the
    target's suffix so format detection by extension still works.
    """
    with _replacing(path, f".tmp{Path(path).suffix}") as (_fd, tmp):
        yield tmp


def _keep_mode(target: Path) -> int:
    """The permissions the target has now, or those of a new file (umask applied)."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return _umask_mode()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_file(path) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def save_figure(fig: object, path: str | os.PathLike[str], **kwargs: object) -> None:
    """``fig.savefig`` into ``path`` atomically (format from the suffix, PNG by default)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    with atomic_file(path) as handle:
        fig.savefig(handle, format=fmt, **kwargs)  # type: ignore[attr-defined]
