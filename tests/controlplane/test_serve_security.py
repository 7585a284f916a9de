"""Security defaults of `lumion serve`: loopback, token file, one server per db, rate limit (429)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from controlplane.security import is_loopback, load_or_create_token, token_matches
from tests.controlplane.conftest import ROOT


def _lumion(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lab_scripts.cli", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_non_loopback_host_needs_an_explicit_token_file(tmp_path):
    out = _lumion("serve", "--db", str(tmp_path / "cp.db"), "--host", "0.0.0.0", "--port", "0", "--json")
    assert out.returncode == 64
    err = json.loads(out.stdout)
    assert err["kind"] == "usage"
    assert "--token-file" in err["error"]
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cp.db").exists()  # refused before anything was created


def test_a_readable_token_file_is_refused(tmp_path):
    token = tmp_path / "token"
    token.write_text("x" * 43 + "\n")
    os.chmod(token, 0o644)
    out = _lumion(
        "serve", "--db", str(tmp_path / "cp.db"), "--token-file", str(token), "--port", "0", "--json"
    )
    assert out.returncode == 2
    assert "chmod 600" in json.loads(out.stdout)["error"]


def test_token_file_made_once_0600_and_compared_in_constant_time(tmp_path):
    token, created = load_or_create_token(tmp_path / "t")
    assert created
    assert oct(os.stat(tmp_path / "t").st_mode & 0o777) == "0o600"
    again, created_again = load_or_create_token(tmp_path / "t")
    assert (again, created_again) == (token, False)
    assert token_matches(token, token)
    assert not token_matches(token[:-1], token)
    assert not token_matches(None, token)
    assert not token_matches("é" + token, token)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.2", False),
        ("example.org", False),
    ],
)
def test_loopback_rule(host, loopback):
    assert is_loopback(host) is loopback


def test_a_second_server_on_the_same_database_is_refused(service_factory, tmp_path):
    first = service_factory()
    out = _lumion("serve", "--db", str(first.db), "--port", "0", "--json", "--telemetry-period-s", "0")
    assert out.returncode == 2
    assert "another lumion serve" in json.loads(out.stdout)["error"]
    assert httpx.get(f"{first.api}/health").status_code == 200  # the first one is untouched


def test_restart_keeps_jobs_and_token(service_factory):
    first = service_factory()
    job = first.client.post("/jobs", json={"count": 4}).json()
    assert first.stop() == 0
    second = service_factory()
    assert second.token == first.token
    assert second.info["token_created"] is False
    assert second.client.get(f"/jobs/{job['id']}").json()["links"] == job["links"]
    kinds = [e["kind"] for e in second.client.get("/events").json()["events"]]
    assert kinds.count("service-started") == 2
    assert kinds.count("service-stopped") == 1


def test_rate_limit_answers_429_with_retry_after(tmp_path):
    """create_app over an in-process control plane, served by uvicorn on loopback in a thread."""
    import uvicorn

    from controlplane.app import create_app
    from controlplane.service import ControlPlane
    from controlplane.store import Store
    from instruments.config import open_bench
    from photonics.fabric import default_fabric

    bench = open_bench(None)
    cp = ControlPlane(Store(tmp_path / "cp.db"), bench, default_fabric())
    app = create_app(cp, token="t" * 43, rate_per_s=0.01, rate_burst=3.0)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        codes = [httpx.get(f"http://127.0.0.1:{port}/api/v1/health").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200]
        assert codes[3:] == [429, 429]
        r = httpx.get(f"http://127.0.0.1:{port}/api/v1/health")
        assert r.json()["kind"] == "rate-limited"
        assert int(r.headers["retry-after"]) >= 1
    finally:
        server.should_exit = True
        thread.join(10)
        cp.close()
        bench.close()


def test_a_map_of_another_chip_is_refused(tmp_path):
    from instruments.sim.chip import Chip
    from photonics.topology import smartlight
    from tests.controlplane.rack import oracle_map

    oracle_map(Chip(smartlight(), 0)).save(tmp_path / "map.json")  # the map of chip seed 0
    out = _lumion(
        "serve",
        "--db",
        str(tmp_path / "cp.db"),
        "--map",
        str(tmp_path / "map.json"),
        "--seed",
        "1",
        "--port",
        "0",
        "--json",
        "--telemetry-period-s",
        "0",
    )
    assert out.returncode == 2, out.stderr
    assert "was made for chip" in json.loads(out.stdout)["error"]


def test_rate_limiter_buckets_per_client_and_bounded_memory(monkeypatch):
    from controlplane import security

    limiter = security.RateLimiter(rate_per_s=0.01, burst=2.0)
    assert limiter.allow("a") == 0.0
    assert limiter.allow("a") == 0.0
    assert limiter.allow("a") > 0.0  # a's bucket is empty ...
    assert limiter.allow("b") == 0.0  # ... b's is not
    monkeypatch.setattr(security, "MAX_TRACKED_CLIENTS", 50)
    limiter = security.RateLimiter(rate_per_s=1000.0, burst=2.0)
    for k in range(200):
        limiter.allow(f"10.0.0.{k}")
        time.sleep(0.003)  # > burst / rate: earlier buckets refill and can be forgotten
    assert len(limiter._buckets) <= 51


def test_a_database_of_another_chip_is_refused(tmp_path):
    from controlplane.store import Store

    store = Store(tmp_path / "cp.db")
    store.ensure_chip("sim-hexagonal-3x6-seed1", "smartlight", "recorded-elsewhere")
    store.close()
    out = _lumion(
        "serve", "--db", str(tmp_path / "cp.db"), "--port", "0", "--json", "--telemetry-period-s", "0"
    )
    assert out.returncode == 2
    assert "is the record of chip sim-hexagonal-3x6-seed1" in json.loads(out.stdout)["error"]
