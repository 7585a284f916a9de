"""Helpers: a real `lumion serve` process on loopback, and a simulated bench that outlives it.

``service_factory``'s processes are forked from a parent with the service's modules imported
(``tests/lumion_zygote.py``: numpy, scipy, fastapi, pydantic and the API's models, the
routing stack; about 2 s of CPU per start, 20 s of wall at load ~14, issue 29), as the kill -9
test's processes are; each is still its own process with its own pid, sockets, bench,
database connection and signal handlers. The test whose subject is a fresh interpreter's
start (a signal inside uvicorn's import) runs ``lumion serve`` with :mod:`subprocess` instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.lumion_zygote import Forked, Zygote

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0  # a cold start imports numpy/scipy/fastapi on a loaded 2-core machine
# What a `lumion serve` start imports (no module reads the environment at import: the
# crash-step variables are read when the service starts), and the work every start repeats
# that leaves no thread behind (``module:function``, tests/lumion_zygote.py): every
# subcommand's parser, and the circuit kernels' machine code (the simulated bench and the
# first route check load it: 0.3-0.6 s per start). uvicorn's protocol modules and
# pydantic.v1 (fastapi asks it of every route) are imported when the server starts.
SERVE_PRELOAD = ["numpy", "scipy.linalg", "scipy.optimize", "scipy.sparse", "fastapi", "uvicorn",
                 "pydantic", "pydantic.v1", "serial", "pyvisa", "pyvisa_py", "photonics.fabric",
                 "controlplane.app", "controlplane.service", "instruments.config", "instruments.sim.bench",
                 "lab_scripts.cmd_serve", "lab_scripts.cli:build_parser", "photonics.kernel_loader:kernels",
                 "uvicorn.loops.auto", "uvicorn.protocols.http.auto", "uvicorn.protocols.websockets.auto",
                 "uvicorn.lifespan.on"]
ANNOUNCE_POLL_S = 0.01  # how often the announce line of a forked service is looked for
# The simulated bench the services serve: `lumion serve --bench sim`'s, written as a bench file
# whose modules declare that they sample their monitors every 10 ms (a fast module's datasheet,
# ``[[transceivers]] monitor_period_s``), and the simulated modules then do sample that often.
# The service's light meter waits that declared period after each lane change instead of the
# 0.1 s it assumes for a module that does not say (each new link waits about two; issue 29),
# and a dark read taken without the wait still gets the lit sample. Undeclared modules and
# their 0.1 s are tested in tests/instruments/test_light_meter.py; `lumion serve` with no
# --bench (the default sim) is started by test_serve_security.py's TLS and SIGTERM tests.
FAST_MONITOR_PERIOD_S = 0.01


def fast_sim_bench(path: Path, seed: int | None = None) -> Path:
    """Write `lumion serve --bench sim`'s bench (the default fabric, chip ``seed``) to ``path`` with
    every module declaring :data:`FAST_MONITOR_PERIOD_S`; the path, for ``--bench``."""
    import tomli_w

    from lab_scripts.cmd_serve import sim_bench_config
    from photonics.fabric import default_fabric

    cfg = sim_bench_config(default_fabric(), seed)
    for module in cfg["transceivers"]:
        module["monitor_period_s"] = FAST_MONITOR_PERIOD_S
    path.write_text(tomli_w.dumps(cfg))
    return path


def loopback_client(**kwargs) -> httpx.Client:
    """An httpx client for a service's plain HTTP on loopback (``kwargs``: httpx.Client's).

    ``verify=False``: http://127.0.0.1 has no certificate to verify, and otherwise httpx loads
    the CA bundle for every client it makes, ~60 ms of CPU each, and ``httpx.get`` makes one
    per call (issue 29). The TLS test verifies its server's certificate with its own client.
    """
    return httpx.Client(verify=False, **kwargs)


def forked_announce(proc: Forked) -> dict:
    """The announce line of a `lumion serve --json` forked by a :class:`Zygote` (killed if none)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(FileNotFoundError), open(proc.out, encoding="utf-8") as out:
            line = out.readline()
            if line.endswith("\n"):
                return json.loads(line)
        time.sleep(ANNOUNCE_POLL_S)
    proc.kill()
    err = Path(proc.out + ".err")
    said = err.read_text()[-2000:] if err.exists() else ""
    raise AssertionError(f"lumion serve did not announce itself: {said}")


class Service:
    """One `lumion serve --json` subprocess: its announced URL, token, and process."""

    def __init__(self, db: Path, *args: str, env: dict[str, str] | None = None,
                 zygote: Zygote | None = None) -> None:
        self.db = Path(db)
        argv = [
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            "--json",
            "--telemetry-period-s",
            "0",
            *args,
        ]
        if zygote is not None:
            self.proc: subprocess.Popen | Forked = zygote.start(argv, env)
            self.info = self._announce_forked()
        else:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lab_scripts.cli", *argv],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **(env or {})},
            )
            self.info = self._announce()
        assert "api" in self.info, self.info
        self.api = self.info["api"]
        self.token = Path(self.info["token_file"]).read_text().strip()
        self.client = loopback_client(
            base_url=self.api, headers={"Authorization": f"Bearer {self.token}"}, timeout=60.0
        )
        self._wait_healthy()

    def _announce(self) -> dict:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not line or not line[0].strip():
            self.proc.kill()
            raise AssertionError(f"lumion serve did not announce itself: {self.proc.stderr.read()[-2000:]}")
        return json.loads(line[0])

    def _announce_forked(self) -> dict:
        return forked_announce(self.proc)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.client.get("/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("lumion serve never answered /health")

    def kill9(self) -> None:
        """SIGKILL (idempotent) and reap."""
        if self.proc.poll() is None:
            self.proc.kill()  # a forked one that just killed itself is not an error
        self.proc.wait(30)
        self.client.close()

    def stop(self) -> int:
        """SIGTERM, wait; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(30)
        self.client.close()
        for stream in (getattr(self.proc, "stdout", None), getattr(self.proc, "stderr", None)):
            if stream is not None:
                stream.close()
        return code


@pytest.fixture(scope="session")
def http():
    """One :func:`loopback_client` per worker for the tests' own requests (httpx's default 5 s
    timeout), instead of a new client per ``httpx.get``."""
    with loopback_client() as client:
        yield client


@pytest.fixture(scope="session")
def serve_zygote(tmp_path_factory):
    """The forking parent of this worker's `lumion serve` processes."""
    z = Zygote(SERVE_PRELOAD, tmp_path_factory.mktemp("serve-zygote"))
    yield z
    z.close()


@pytest.fixture(scope="session")
def fast_bench(tmp_path_factory) -> Path:
    """The bench file of :func:`fast_sim_bench` (chip seed 0), for ``--bench``."""
    return fast_sim_bench(tmp_path_factory.mktemp("fast-bench") / "bench.toml")


@pytest.fixture
def service_factory(tmp_path, serve_zygote, fast_bench):
    """Start `lumion serve` processes (on ``fast_bench`` unless given a ``--bench``); every one
    still running is stopped at the end."""
    started: list[Service] = []

    def start(*args: str, db: Path | None = None, env: dict[str, str] | None = None) -> Service:
        bench = () if "--bench" in args else ("--bench", str(fast_bench))
        s = Service(db or tmp_path / "cp.db", *bench, *args, env=env, zygote=serve_zygote)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.stop()


@pytest.fixture(scope="module")
def bench():
    """The simulated bench over its real transports (heater driver on a pty), one per module; its
    light meter waits on the chip's clock (``tests.controlplane.rack.on_chip_time``)."""
    from instruments.config import open_bench
    from tests.controlplane.rack import on_chip_time

    b = open_bench(None)
    on_chip_time(b, b.sim.chip)
    yield b
    b.close()


@pytest.fixture
def cp(bench, tmp_path):
    """A control plane on a fresh database in ``tmp_path``, the default fabric, ``bench``."""
    from controlplane.service import ControlPlane
    from controlplane.store import Store
    from photonics.fabric import default_fabric

    c = ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric())
    yield c
    c.close()


@pytest.fixture(scope="module")
def placed_rack(tmp_path_factory):
    """One in-process simulated rack per module with a ring placed, and the record of that state.

    Placing the ring verifies its eight links by light: 0.9 s of waiting for the modules'
    monitors (``instruments.light_meter.DOM_REFRESH_WAIT_S``) of the 1.2-2 s a rack took to
    set up, which every test paid again (issue 29).
    """
    from tests.controlplane.rack import Rack

    where = tmp_path_factory.mktemp("rack")
    r = Rack(where / "placed.db")
    try:
        r.place_ring()
        record = r.record(where / "record.db")
        yield r, record
    finally:
        r.close()


@pytest.fixture
def rack(placed_rack, tmp_path):
    """The module's simulated rack (``tests.controlplane.rack.Rack``) as it was with the ring
    just placed: faults undone, the recorded currents on the chip, and a new service on a copy
    of the recorded database in ``tmp_path`` (``Rack.restart_from``)."""
    r, record = placed_rack
    r.restart_from(record, tmp_path / "cp.db")
    return r
