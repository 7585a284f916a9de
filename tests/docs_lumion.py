"""`lumion` for the docs' shell examples: forked from a parent with the libraries imported (tests only).

A docs shell block runs ``.venv/bin/lumion ...`` as a user types it; each such process spent
0.3-2.5 s of CPU importing numpy, scipy, matplotlib and lumion before its work (the README's
first block starts eleven; issue 29). In the docs test's folder ``.venv/bin/lumion`` is
:data:`CLIENT`: a stdlib-only script that hands its arguments, working folder, environment and
its own stdin, stdout and stderr (the file descriptors themselves, so ``> route.json`` and pipes
work as written) to a parent that imported those libraries once (:func:`serve_forever`); the
parent forks a child that runs ``lab_scripts.cli.main()`` as the console script does, in that
folder with that environment and those descriptors, and the client exits with the child's
status (killed by a signal: by the same signal). A signal sent to the client (``kill``, the
block's EXIT trap) is passed on to the child; a client that dies takes its child with it.

`lumion bench serve` is not forked: a block waits for the pid the server writes
(``bench.toml``'s ``[server] pid``) to be the one it started, so the client becomes the real
console script for it (``exec``), a process as fresh as a user's. `lumion serve` is forked
like the rest (its block waits for the announce line, not a pid; its start to the announce
took 0.7-1.0 s of CPU forked against 1.8-2.2 s fresh, docs/testing.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
from typing import NoReturn

try:  # imported by the docs test as tests.docs_lumion, or run as a script beside lumion_zygote.py
    from tests.lumion_zygote import popen_status, run_lumion
    from tests.lumion_zygote import preload as import_preloaded
except ModuleNotFoundError:
    from lumion_zygote import popen_status, run_lumion
    from lumion_zygote import preload as import_preloaded

REAL_PROCESS = (("bench", "serve"),)  # commands run as the console script itself
MAX_REQUEST_BYTES = 1 << 20  # argv, folder and environment of one command, as JSON

# The client: run as ``python -I -S`` (no site, no environment), so it starts in ~20 ms.
CLIENT = """#!{python} -IS
import json, os, signal, socket, sys
argv = sys.argv[1:]
if any(argv[:len(c)] == list(c) for c in {real}):
    os.execv({console!r}, [{console!r}, *argv])
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect({socket!r})
request = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(s, [request], [0, 1, 2])
pid = int(s.recv(64))
def forward(sig, _frame):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, forward)
status = int(s.recv(64))
if status < 0:
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
"""


def client_script(python: str, console: str, socket_path: str) -> str:
    """The text of ``.venv/bin/lumion`` that forks from the parent listening on ``socket_path``."""
    return CLIENT.format(python=python, console=console, socket=socket_path,
                         real=[list(c) for c in REAL_PROCESS])


def _become_lumion(request: dict, fds: list[int]) -> NoReturn:
    """In the forked child: ``lumion ARGV`` in the client's folder, environment and streams."""
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except BaseException:  # the client's folder or streams are gone: say why, exit 70
        import traceback

        traceback.print_exc()
        os._exit(70)
    run_lumion(request["argv"])


def _wait_for_child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked waiter: fork the child, send its pid, then its status; never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # it waits for its child itself
    child = os.fork()
    if child == 0:
        conn.close()
        _become_lumion(request, fds)
    for fd in fds:
        os.close(fd)
    conn.send(str(child).encode())
    done = os.pidfd_open(child)
    while True:
        ready, _, _ = select.select([conn, done], [], [])
        if done in ready:
            break
        if not conn.recv(64):  # the client is gone: so is its command
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            break
    _, wait_status = os.waitpid(child, 0)
    with contextlib.suppress(OSError):
        conn.send(str(popen_status(wait_status)).encode())
    os._exit(0)


def serve_forever(socket_path: str, preload: list[str]) -> None:
    """Import ``preload`` (``module:function`` also calls it), say ready, fork per request."""
    import_preloaded(preload)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(socket_path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the waiters
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 3)
        if os.fork() == 0:
            server.close()
            _wait_for_child(conn, json.loads(message), fds)
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    serve_forever(sys.argv[1], sys.argv[2:])
