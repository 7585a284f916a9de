"""A pre-imported parent that forks `lumion serve` processes on request (crash tests only).

Importing numpy, scipy, fastapi and the routing stack costs seconds on a loaded machine;
a hundred crash trials would spend most of their time there. This process imports them
once (it starts no thread, so forking it is safe) and, per line on stdin
``{"argv": [...], "env": {...}, "out": PATH}``, forks a child that runs ``lumion`` with
that command line, its stdout in PATH and stderr in PATH.err, and answers the child's pid.
Each child is a separate process (its own sockets, pty, SQLite connection and locks), so
a SIGKILL is as real as against a fresh interpreter. Children are reaped automatically.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pyvisa  # noqa: F401 -- the bench's SCPI transport, 0.4 s to import
import pyvisa_py  # noqa: F401
import uvicorn  # noqa: F401

import controlplane.app
import controlplane.service  # noqa: F401
import instruments.config  # noqa: F401
import lab_scripts.cmd_serve  # noqa: F401
from lab_scripts.cli import main


def serve_forever() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.environ.update(request.get("env", {}))
                out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                err = os.open(request["out"] + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(out, 1)
                os.dup2(err, 2)
                sys.stdin.close()
                code = main(request["argv"])
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                code = 70
            os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    serve_forever()
