"""Helpers: a real `lumion serve` process on loopback, and a simulated bench that outlives it."""

from __future__ import annotations

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

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0  # a cold start imports numpy/scipy/fastapi on a loaded 2-core machine


class Service:
    """One `lumion serve --json` subprocess: its announced URL, token, and process."""

    def __init__(self, db: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.db = Path(db)
        cmd = [
            sys.executable,
            "-m",
            "lab_scripts.cli",
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
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.info = self._announce()
        self.api = self.info["api"]
        self.token = Path(self.info["token_file"]).read_text().strip()
        self.client = httpx.Client(
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

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("lumion serve never answered /health")

    def kill9(self) -> None:
        """SIGKILL (idempotent) and reap."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
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
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        return code


@pytest.fixture
def service_factory(tmp_path):
    """Start `lumion serve` processes; every one still running is stopped at the end."""
    started: list[Service] = []

    def start(*args: str, db: Path | None = None, env: dict[str, str] | None = None) -> Service:
        s = Service(db or tmp_path / "cp.db", *args, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.stop()


@pytest.fixture(scope="module")
def bench():
    """The simulated bench over its real transports (heater driver on a pty), one per module."""
    from instruments.config import open_bench

    b = open_bench(None)
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


@pytest.fixture
def rack(tmp_path):
    """An in-process simulated rack (``tests.controlplane.rack.Rack``) with a ring placed; closed after."""
    from tests.controlplane.rack import Rack

    r = Rack(tmp_path / "cp.db")
    r.place_ring()
    yield r
    r.close()
