"""A parent with libraries imported that forks `lumion` processes (tests only).

A `lumion program` process spends about 1 s of CPU importing numpy, scipy and pyvisa
before it does anything (3 s of wall at load ~10; issue 29), and the process tests start
dozens. This parent imports those libraries once -- the modules named on its command line (for
`lumion program` no module of lumion's own, so every child still imports lumion as a fresh
process does and an interrupt can still land inside those imports) -- and, per line on stdin ``{"argv": [...],
"env": {...}, "out": PATH}``, forks a child that runs ``lumion ARGV`` as the console script
does (``lab_scripts.cli.main()`` with ``sys.argv``), stdout in PATH and stderr in PATH.err,
and answers the child's pid. Each child is a separate process (its own pid, file locks,
ports and signal handlers), so signals and locks are as real as against a fresh
interpreter. A waiter process between this parent and each child collects the child's exit
status (as :class:`subprocess.Popen` would: negative for a signal) into PATH.status once the
child is gone; this parent starts no thread, so forking it is safe.

Run ``python tests/lumion_zygote.py numpy scipy.optimize ...``; :class:`Zygote` does that
(``module:function`` also calls the function, :func:`serve_forever`).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0  # importing scipy on a loaded 2-core machine
POLL_S = 0.002  # how often a waiting test looks for a child's status file


def _run_child(request: dict) -> NoReturn:
    """In the forked child: become ``lumion ARGV`` with its output in files; never returns."""
    try:
        os.environ.update(request.get("env", {}))
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["out"] + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 -- the process's own stdin, kept open
    except BaseException:  # the streams could not be set up: say why, exit 70
        import traceback

        traceback.print_exc()
        os._exit(70)
    run_lumion(request["argv"])


def run_lumion(argv: list[str]) -> NoReturn:
    """In a forked child: ``lumion ARGV`` as the console script runs it, then exit with its code.

    Also used by ``tests/docs_lumion.py``. The exit code is what the interpreter would give:
    ``main()``'s return, a ``SystemExit``'s code (None is 0, a message is 1), 70 for a bug
    that escaped lumion's own handler; the exit functions run and the streams are flushed
    as at interpreter shutdown, then ``os._exit`` (the parent's state is not the child's).
    """
    code = 70
    try:
        sys.argv = ["lumion", *argv]
        from lab_scripts.cli import main  # imported here: a fresh process imports lumion too

        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a bug in lumion: exit 70, as its own handler would
        import traceback

        traceback.print_exc()
    atexit._run_exitfuncs()  # what interpreter shutdown runs (temporary folders, files)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def popen_status(wait_status: int) -> int:
    """Popen's returncode for a ``waitpid`` status: the exit code, or minus the signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def preload(names: list[str]) -> None:
    """Import each module named; ``module:function`` also calls ``function()`` once."""
    for name in names:
        module, _, call = name.partition(":")
        loaded = importlib.import_module(module)
        if call:
            getattr(loaded, call)()


def _fork_waited(request: dict) -> int:
    """Fork a waiter that forks the child, sends its pid back, and records its exit status."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:  # the waiter
        os.close(read_end)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # it waits for its child itself
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # the parent's request pipes stay the parent's
        os.dup2(null, 1)
        child = os.fork()
        if child == 0:
            os.close(write_end)
            _run_child(request)
        os.write(write_end, f"{child}\n".encode())
        os.close(write_end)
        _, wait_status = os.waitpid(child, 0)
        status = request["out"] + ".status"
        Path(status + ".tmp").write_text(str(popen_status(wait_status)))
        os.replace(status + ".tmp", status)  # whole or absent: a reader never sees half of it
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        return int(pipe.readline())


def serve_forever(names: list[str]) -> None:
    """Import ``names``, say ready, then fork one `lumion` per request line on stdin.

    An entry ``module:function`` also calls ``function()`` once imported, for work every
    child would otherwise repeat and that leaves no thread behind (loading the compiled
    circuit kernels, building the argument parser, which imports every subcommand).
    """
    preload(names)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the waiters
    print("ready", flush=True)
    for line in sys.stdin:
        print(_fork_waited(json.loads(line)), flush=True)


class Forked:
    """One `lumion` forked by a :class:`Zygote`: the parts of :class:`subprocess.Popen` tests use."""

    def __init__(self, pid: int, out: str) -> None:
        self.pid = pid
        self.out = out
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once the process has ended and its files are complete, else None."""
        if self.returncode is None:
            with contextlib.suppress(FileNotFoundError):
                self.returncode = int(Path(self.out + ".status").read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"lumion (pid {self.pid})", timeout)
            time.sleep(POLL_S)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended a moment ago
                os.kill(self.pid, sig)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the end; its whole stdout and stderr."""
        self.wait(timeout)
        return Path(self.out).read_text(), Path(self.out + ".err").read_text()

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The forking parent in a subprocess, with ``preload`` imported."""

    def __init__(self, preload: list[str], folder: Path, env: dict[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self._count = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), *preload],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        assert self.proc.stdout.readline().strip() == "ready", "the forking parent did not start"

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> Forked:
        """``lumion ARGV`` in a new process (``env`` added to the parent's environment)."""
        self._count += 1
        out = str(self.folder / f"lumion-{self._count}.out")
        self.proc.stdin.write(json.dumps({"argv": argv, "env": env or {}, "out": out}) + "\n")
        self.proc.stdin.flush()
        return Forked(int(self.proc.stdout.readline()), out)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


if __name__ == "__main__":
    serve_forever(sys.argv[1:])
