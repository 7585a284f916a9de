"""One bench, one writer: an OS-level lock per instrument address, naming its holder.

Two ``lumion program`` processes writing one chip at once leave it in neither
configuration; so opening a bench takes, for every instrument address it drives, an
exclusive ``flock`` on a lock file derived from the address (a serial device by its real
path, so ``/dev/serial/by-id/...`` and ``/dev/ttyUSB0`` are one lock; a VISA or TCP
resource by its text), and writes the holder's pid and command into it. A second process
fails at once with one line naming the holder. The kernel drops the lock when its holder
exits, however it exits (``kill -9`` too), so a stale lock file never blocks anyone. Serial
ports are also opened with pyserial's ``exclusive=True`` (a ``flock`` on the device), which
keeps out programs that know nothing of these files.

Lock files live in ``$LUMION_LOCK_DIR``, by default ``<tmp>/lumion-locks``.

A serial port held only by such an exclusive open (a vendor's tool, no lock file) is named
by :func:`device_holder`, from the kernel's table of ``flock`` locks (``/proc/locks``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from instruments.errors import InstrumentError

LOCK_DIR_ENV = "LUMION_LOCK_DIR"
# What a holder writes into its lock file (and a refusal quotes): bounded, one line.
HOLDER_MAX_CHARS = 200


class BenchBusyError(InstrumentError):
    """Another process holds an instrument of this bench."""


def lock_dir() -> Path:
    """Where lock files live (``$LUMION_LOCK_DIR`` or ``<tmp>/lumion-locks``)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "lumion-locks")


def resource_key(address: str) -> str:
    """One name per instrument, whatever path or spelling reaches it.

    A device path is resolved (symlinks, ``..``); anything else (``TCPIP::10.0.0.5::5025::SOCKET``,
    ``GPIB0::20::INSTR``) is taken as written, without case.

        >>> resource_key("TCPIP::10.0.0.5::5025::SOCKET") == resource_key("tcpip::10.0.0.5::5025::socket")
        True
    """
    if address.startswith(("/", ".")):
        return "path:" + os.path.realpath(address)
    return "resource:" + address.strip().lower()


def lock_path(address: str) -> Path:
    """The lock file of ``address``: readable prefix plus a digest of its key."""
    key = resource_key(address)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[-40:]
    return lock_dir() / f"{readable}.{hashlib.sha256(key.encode()).hexdigest()[:16]}.lock"


def _flock_pids(path: str) -> list[int]:
    """Pids holding an exclusive ``flock`` on ``path``'s inode (Linux ``/proc/locks``; [] elsewhere).

    A line reads ``1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`` (major and
    minor in hex); a waiter's line has ``->`` after the number and is not a holder.
    """
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            lines = table.read(1 << 20).splitlines()
    except OSError:
        return []
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1:4] == ["FLOCK", "ADVISORY", "WRITE"] and fields[5] == key \
                and fields[4].isdigit():
            pids.append(int(fields[4]))
    return pids


def _command_of(pid: int) -> str:
    """The command line of ``pid`` (program name without its folder), or '' if unknown."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(4096).split(b"\0")
    except OSError:
        return ""
    words = [a.decode("utf-8", "replace") for a in argv if a]
    if words:
        words[0] = os.path.basename(words[0])
    return " ".join(words)[:120]


def device_holder(path: str) -> str | None:
    """Who holds the serial device ``path`` exclusively: ``pid N (command)``, or None if unknown."""
    pids = [p for p in _flock_pids(os.path.realpath(path)) if p != os.getpid()]
    if not pids:
        return None
    command = _command_of(pids[0])
    return f"pid {pids[0]} ({command})" if command else f"pid {pids[0]}"


def _holder_line() -> str:
    command = " ".join(os.path.basename(a) if k == 0 else a for k, a in enumerate(sys.argv))
    since = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"pid {os.getpid()} ({command[:120]}) since {since}"[:HOLDER_MAX_CHARS]


class BenchLock:
    """Exclusive locks on a bench's instrument addresses; release with :meth:`release` (or ``with``).

    Raises:
        BenchBusyError: another process holds one of them (nothing is kept locked then).
    """

    def __init__(self, addresses: list[str]) -> None:
        self._fds: list[int] = []
        try:
            for address in dict.fromkeys(addresses):  # each once, in order
                self._fds.append(self._take(address))
        except BaseException:
            self.release()
            raise

    @staticmethod
    def _take(address: str) -> int:
        path = lock_path(address)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, HOLDER_MAX_CHARS, 0).decode("utf-8", "replace").strip()
            holder = holder or "another process"
            os.close(fd)
            raise BenchBusyError(
                f"the bench's instrument {address} is in use by {holder}: one bench has one writer; "
                "wait for that process to end (or stop it), then run this again") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, (_holder_line() + "\n").encode("utf-8"), 0)
        return fd

    def release(self) -> None:
        """Give every lock back (closing the file releases the flock)."""
        while self._fds:
            fd = self._fds.pop()
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    close = release  # a bench closes its closers

    def __enter__(self) -> BenchLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
