"""Atomic file writes: every file the package writes goes through here.

A reader never sees half a file, and a crash leaves the old file whole: the data goes to
a temporary file in the target's folder, is flushed to disk (fsync), and is renamed over
the target.

What a writer killed without warning (``kill -9`` of ``calibrate --out``) can leave:

* the target, whole: its old contents or its new ones, never a mixture;
* at most one temporary per target, always named ``.<name>.<pid>.<random>.tmp`` (plus the
  target's suffix for :func:`atomic_path`): hidden, never a name any command is given or
  reads, with the pid of the writer that owns it;
* and only for a moment: the next atomic write into the same folder, of any file (every
  ``lumion`` command that writes goes through here), first removes every temporary there
  whose writer is gone.

Where Linux ``O_TMPFILE`` is available the data goes to an unnamed file, invisible until
it is complete: a new target gets its name directly (``linkat``, no window at all); an
existing one is replaced through a temporary name held only between two system calls
(``linkat`` then ``rename``; Linux has no "link over"). Elsewhere the temporary is a named
file for the whole write, opened with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a file or symlink
planted in the folder is never followed or overwritten) and removed if anything fails.

Example:
    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "map.json"
    >>> atomic_write_text(target, '{"ok": true}')
    >>> target.read_text()
    '{"ok": true}'
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# New files get the usual permissions of a file a user creates (mkstemp makes them 0600).
DEFAULT_MODE = 0o666


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return DEFAULT_MODE & ~mask


def _temporary_name(target: Path, suffix: str) -> Path:
    """``.<name>.<pid>.<random><suffix>`` beside ``target``: the pid tells a stray's owner."""
    return target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}{suffix}"


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


# ``.<name>.<pid>.<12 hex digits>.tmp`` and, for atomic_path, the target's suffix after it
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.tmp(\.[^./]+)?$")


def sweep_strays(path: str | os.PathLike[str], suffix: str = ".tmp") -> list[Path]:  # noqa: ARG001
    """Remove the temporaries in ``path``'s folder left by writers that died (SIGKILL) before renaming.

    Every temporary of this module's form in that folder whose writer is gone goes, for
    whatever target it was meant (``suffix`` is kept for callers of the old signature);
    a live writer's is kept. Returns the removed paths.
    """
    folder = Path(path).parent or Path(".")
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _TEMPORARY.match(entry.name)
            if not m or int(m["pid"]) == os.getpid() or _owner_alive(int(m["pid"])):
                continue
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _anonymous(folder: Path) -> int | None:
    """An unnamed file in ``folder`` (Linux ``O_TMPFILE``), or None where there is none.

    Nothing of it is visible until it is linked: a process killed while writing (SIGKILL,
    which no handler sees) leaves no stray file.
    """
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_RDWR, 0o600)
    except OSError:  # a file system without O_TMPFILE
        return None


AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400  # <fcntl.h> (Linux)


def _linkat(fd: int, name: Path) -> bool:
    """Give the unnamed file ``fd`` the name ``name`` (``linkat`` through ``/proc/self/fd``).

    ``os.link`` cannot: it links the ``/proc`` entry itself (EXDEV). False where the
    name exists or ``linkat`` is refused.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, os.fsencode(name),
                       AT_SYMLINK_FOLLOW) == 0


def _link_unnamed(fd: int, name: Path) -> None:
    """Give the unnamed file ``fd`` the (new, temporary) name ``name``.

    Where ``linkat`` is refused, the data is copied into a new file of that name instead.
    """
    if _linkat(fd, name):
        return
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 20):
            os.write(out, chunk)
        os.fchmod(out, os.fstat(fd).st_mode & 0o7777)
        os.fsync(out)
    finally:
        os.close(out)


@contextlib.contextmanager
def _replacing(path: str | os.PathLike[str], suffix: str, named: bool = False) -> Iterator[tuple[int, Path]]:
    """A temporary beside ``path`` (open fd, name) that replaces it when the block ends.

    On success the data is flushed to disk and the temporary renamed over the target with
    the target's permissions; on any failure the temporary is removed and the target kept.
    Unless ``named``, the data goes to an unnamed file, which takes the target's name
    directly when there is none yet, else is linked under a temporary name only for the
    rename. Temporaries of dead writers in the folder are swept first.
    """
    target = Path(path)
    folder = target.parent or Path(".")
    sweep_strays(target, suffix)
    tmp = _temporary_name(target, suffix)
    fd = None if named else _anonymous(folder)
    if fd is None:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        linked = True
    else:
        linked = False
    try:
        try:
            yield fd, tmp
            os.fsync(fd)
            os.fchmod(fd, _keep_mode(target))
            if not linked and not target.exists() and _linkat(fd, target):
                return  # a new file: named in one step, nothing temporary was ever visible
            if not linked:
                _link_unnamed(fd, tmp)
                linked = True
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        if linked:
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
    with _replacing(path, f".tmp{Path(path).suffix}", named=True) as (_fd, tmp):
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
