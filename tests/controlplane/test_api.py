"""The HTTP API's contract, over real HTTP on loopback against a `lumion serve` process.

The bench is the simulated one over its real transports (heater driver on a pty, SCPI on
loopback sockets, one transceiver per accelerator behind an I2C bridge on a pty).
"""

from __future__ import annotations

import os
import re
import stat
import time

import httpx
import pytest

from lab_scripts import schemas
from lab_scripts.common import output_schema
from tests.controlplane.conftest import Service


@pytest.fixture(scope="module")
def svc(tmp_path_factory, serve_zygote, fast_bench):
    s = Service(tmp_path_factory.mktemp("api") / "cp.db", "--bench", str(fast_bench), "--rate-limit-per-s",
                "0", zygote=serve_zygote)
    yield s
    assert s.stop() == 0


# A job for the tests that only need an accelerator in one: a line of two has one link, and a
# placement waits one monitor refresh more than it has links (conftest's FAST_MONITOR_PERIOD_S).
SMALL_JOB = {"count": 2, "pattern": "line"}
ENDPOINTS = [
    ("get", "/status"),
    ("post", "/jobs"),
    ("get", "/jobs/job-1"),
    ("delete", "/jobs/job-1"),
    ("post", "/jobs/job-1/failures"),
    ("get", "/events"),
    ("post", "/failures"),
    ("post", "/accelerators/gpu0/repair"),
    ("post", "/tbus/tbu:0.0.0/clear"),
    ("post", "/states"),
    ("get", "/states"),
    ("get", "/states/state-1"),
    ("delete", "/states/state-1"),
    ("post", "/sim/accelerators/gpu0/kill"),
    ("post", "/sim/accelerators/gpu0/revive"),
]


def _error(resp: httpx.Response, status: int, kind: str) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["kind"] == kind, body
    assert body["error"], body
    assert body["hint"], body
    return body


def test_announcement_and_token_file(svc):
    """The announce line (`lumion serve --json`'s output) follows its schema, and says the truth.

    (The schema check of `lumion serve`'s output is here, on this module's service, rather than
    a service started for it alone in tests/lab_scripts/test_schemas_commands.py; the TLS
    announce is checked in test_serve_security.py.)"""
    info = svc.info
    assert (info["schema"], info["version"]) == output_schema("serve") == ("lumion.serve", 1)
    schemas.validate(info, "lumion.serve")
    assert {"url", "token_file", "db", "pid"} <= set(info)
    assert info["url"].startswith("http://127.0.0.1:")
    assert info["pid"] == svc.proc.pid
    mode = stat.S_IMODE(os.stat(info["token_file"]).st_mode)
    assert mode == 0o600
    assert len(svc.token) >= 40


def test_health_needs_no_token(svc, http):
    r = http.get(f"{svc.api}/health")
    assert r.status_code == 200
    assert r.json()["ok"] is True


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_other_endpoint_needs_the_token(svc, http, method, path):
    none = http.request(method, f"{svc.api}{path}", json={})
    body = _error(none, 401, "auth")
    assert "no bearer token" in body["error"]
    assert none.headers["www-authenticate"].startswith("Bearer")
    wrong = http.request(
        method, f"{svc.api}{path}", json={}, headers={"Authorization": f"Bearer {svc.token}x"}
    )
    assert "wrong bearer token" in _error(wrong, 401, "auth")["error"]
    basic = http.request(
        method, f"{svc.api}{path}", json={}, headers={"Authorization": f"Basic {svc.token}"}
    )
    _error(basic, 401, "auth")


def test_openapi_lists_every_endpoint(svc, http):
    doc = http.get(f"{svc.info['url']}/openapi.json").json()
    paths = doc["paths"]
    for method, path in [("get", "/health"), *ENDPOINTS]:
        template = path.replace("job-1", "{job_id}").replace("gpu0", "{name}").replace("tbu:0.0.0", "{tbu}")
        template = template.replace("state-1", "{state_id}")
        assert method in paths[f"/api/v1{template}"], template
    assert "JobRequest" in doc["components"]["schemas"]
    assert "HTTPBearer" in doc["components"]["securitySchemes"]


def test_validation_errors_are_one_json_object(svc):
    c = svc.client
    body = _error(c.post("/jobs", json={"count": 4, "colour": "red"}), 422, "input")
    assert "colour" in body["error"]
    _error(c.post("/jobs", json={"count": 1}), 422, "input")
    _error(c.post("/jobs", json={"count": 4, "pattern": "torus"}), 422, "input")
    _error(c.post("/jobs", content=b"{not json", headers={"content-type": "application/json"}), 422, "input")
    _error(c.post("/jobs", json={}), 422, "input")  # neither accelerators nor count
    _error(c.post("/jobs", json={"accelerators": ["gpu0", "nosuch"]}), 422, "input")
    _error(c.post("/jobs/job-999/failures", json={"accelerator": "gpu0"}), 404, "not-found")
    _error(c.post("/failures", json={"accelerator": "gpu0", "tbu": "tbu:0.0.0"}), 422, "input")
    _error(c.post("/failures", json={"tbu": "tbu:0.0.0", "state": "melted"}), 422, "input")
    _error(c.get("/events", params={"since": -1}), 422, "input")
    _error(c.get("/nosuch"), 404, "not-found")
    _error(c.post("/tbus/tbu:99.0.0/clear"), 404, "not-found")
    cleared = c.post("/tbus/tbu:0.0.0/clear")  # not a suspect: nothing to clear, said so
    assert cleared.status_code == 200, cleared.text
    assert cleared.json() == {"tbu": "tbu:0.0.0", "suspect": False, "changed": False}


def test_a_method_the_path_does_not_accept_is_405_naming_the_allowed_ones(svc):
    reply = svc.client.put("/jobs", json={})
    body = _error(reply, 405, "method")
    assert "Allow header" in body["hint"]
    assert "POST" in reply.headers["allow"]


def test_body_over_the_limit_is_413(svc):
    big = b'{"name": "' + b"x" * (70 * 1024) + b'"}'
    _error(
        svc.client.post("/jobs", content=big, headers={"content-type": "application/json"}), 413, "too-large"
    )

    def chunks():
        for _ in range(70):
            yield b" " * 1024

    _error(
        svc.client.post("/jobs", content=chunks(), headers={"content-type": "application/json"}),
        413,
        "too-large",
    )


def test_job_lifecycle_failover_and_events(svc):
    c = svc.client
    since = c.get("/events").json()["last_id"]
    r = c.post("/jobs", json={"accelerators": ["gpu0", "gpu1", "gpu2", "gpu3"], "name": "train"})
    assert r.status_code == 201, r.text
    job = r.json()
    jid = job["id"]
    assert job["accelerators"] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert len(job["links"]) == 4
    assert all(lk["margin_db"] > 0 and lk["budget_ok"] for lk in job["links"])
    assert c.get(f"/jobs/{jid}").json()["links"] == job["links"]
    # gpu0 is busy now: a second job asking for it does not fit
    _error(c.post("/jobs", json={"accelerators": ["gpu0", "gpu4"]}), 409, "impossible")
    _error(c.post("/jobs", json={"accelerators": ["spare0", "gpu4"]}), 409, "impossible")
    status = c.get("/status").json()
    assert [j["id"] for j in status["jobs"]] == [jid]
    assert {lk["job"] for lk in status["links"]} == {jid}
    assert len(status["links"]) == 4
    assert status["chips"][0]["open_intents"] == []

    rec = c.post(f"/jobs/{jid}/failures", json={"accelerator": "gpu2"})
    assert rec.status_code == 200, rec.text
    rec = rec.json()
    cli_keys = {
        "failed",
        "spare",
        "job",
        "rerouted_links",
        "changed_tbus",
        "changed_heaters",
        "heater_unit",
        "unaffected_routes_unchanged",
        "held_heater_drift",
        "links",
        "timing_ms",
        "candidates",
    }
    assert cli_keys <= set(rec)
    assert rec["failed"] == "gpu2"
    assert rec["spare"] in ("spare0", "spare1")
    assert rec["unaffected_routes_unchanged"] is True
    assert "gpu2" not in rec["job"]["accelerators"]
    assert rec["spare"] in rec["job"]["accelerators"]
    stages = {"reference", "compute", "write", "settle", "verify", "light"}  # reference, light: by light
    assert {s["stage"] for s in rec["stages"]} == stages
    assert all(s["end_s"] >= s["start_s"] for s in rec["stages"])
    # the failed accelerator is out; the spare is taken
    status = c.get("/status").json()
    assert "gpu2" in status["failed_accelerators"]
    assert rec["spare"] not in status["spares_free"]
    again = c.post(f"/jobs/{jid}/failures", json={"accelerator": "gpu2"})  # a retry: the same recovery
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True
    assert (again.json()["intent"], again.json()["spare"]) == (rec["intent"], rec["spare"])

    events = c.get("/events", params={"since": since}).json()["events"]
    kinds = [e["kind"] for e in events]
    assert kinds == [
        "job-placed", "job-refused", "job-refused", "failure-reported", "recovery", "failure-reported"
    ]
    assert events[-1]["repeat_of"] == rec["intent"]
    assert all({"id", "time", "t_s", "kind"} <= set(e) for e in events)
    recovery = events[-2]
    assert recovery["job"] == jid
    order = ["reference", "compute", "write", "settle", "verify", "light"]
    assert [s["stage"] for s in recovery["stages"]] == order
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)

    gone = c.delete(f"/jobs/{jid}")
    assert gone.status_code == 200
    assert set(gone.json()["freed"]) == {"gpu0", "gpu1", "gpu3", rec["spare"]}
    _error(c.get(f"/jobs/{jid}"), 404, "not-found")
    _error(c.delete(f"/jobs/{jid}"), 404, "not-found")
    repaired = {"accelerator": "gpu2", "failed": False}
    assert c.post("/accelerators/gpu2/repair").json() == {**repaired, "changed": True}
    assert c.post("/accelerators/gpu2/repair").json() == {**repaired, "changed": False}  # idempotent
    _error(c.post("/accelerators/gpu99/repair"), 404, "not-found")
    status = c.get("/status").json()
    assert status["jobs"] == []
    assert status["failed_accelerators"] == []
    assert set(status["spares_free"]) == {"spare0", "spare1"}


def test_several_accelerators_fail_together_in_one_recovery(svc):
    c = svc.client
    a = c.post("/jobs", json={"accelerators": ["gpu0", "gpu1", "gpu2"]}).json()
    b = c.post("/jobs", json={"accelerators": ["gpu4", "gpu5", "gpu6"]}).json()
    _error(c.post("/failures", json={"accelerator": "gpu0", "accelerators": ["gpu1"]}), 422, "input")
    _error(c.post("/failures", json={"accelerators": ["gpu0", "gpu0"]}), 422, "input")
    _error(c.post("/failures", json={"accelerators": ["gpu0"], "policy": "reckless"}), 422, "input")
    r = c.post("/failures", json={"accelerators": ["gpu1", "gpu5"], "policy": "hitless"})
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["job_id"] is None  # two jobs: one reconfiguration for both
    assert sorted(rec["jobs_rerouted"]) == sorted([a["id"], b["id"]])
    assert rec["unaffected_routes_unchanged"] is True
    jobs = {j: c.get(f"/jobs/{j}").json()["accelerators"] for j in (a["id"], b["id"])}
    assert "gpu1" not in jobs[a["id"]]
    assert "gpu5" not in jobs[b["id"]]
    taken = [x for accs in jobs.values() for x in accs if x.startswith("spare")]
    assert sorted(taken) == ["spare0", "spare1"]
    for j in jobs:
        assert c.delete(f"/jobs/{j}").status_code == 200
    for acc in ("gpu1", "gpu5"):
        assert c.post(f"/accelerators/{acc}/repair").status_code == 200


def test_job_by_count_patterns_and_tbu_failure(svc):
    c = svc.client
    line = c.post("/jobs", json={"count": 3, "pattern": "line"}).json()
    assert line["pattern"] == "line"
    assert len(line["links"]) == 2
    explicit = c.post("/jobs", json={"pattern": "links", "links": [["gpu4", "gpu5"], ["gpu5", "gpu4"]]})
    assert explicit.status_code == 201, explicit.text
    # one TX lane each: an all-to-all over 3 accelerators needs 2 per accelerator
    body = _error(
        c.post("/jobs", json={"accelerators": ["gpu6", "gpu7", "gpu3"], "pattern": "all-to-all"}),
        409,
        "impossible",
    )
    assert "lane" in body["error"]
    tbu = c.get(f"/jobs/{line['id']}").json()["links"][0]
    route_tbus = _route_tbus(svc, line["id"])
    r = c.post("/failures", json={"tbu": route_tbus[0], "state": "dead"})
    assert r.status_code in (200, 409), r.text
    if r.status_code == 200:
        assert r.json()["failed"] == route_tbus[0]
        assert route_tbus[0] in c.get("/status").json()["chips"][0]["failed_tbus"]
    assert tbu["link"]
    for jid in (line["id"], explicit.json()["id"]):
        assert c.delete(f"/jobs/{jid}").status_code == 200


def _route_tbus(svc, job_id: str) -> list[str]:
    """TBU names on a job's first link, read from the plan of record in the database."""
    import json
    import sqlite3

    db = sqlite3.connect(f"file:{svc.db}?mode=ro", uri=True)
    try:
        plan = json.loads(db.execute("SELECT body FROM plans").fetchone()[0])
    finally:
        db.close()
    job = svc.client.get(f"/jobs/{job_id}").json()
    first = job["links"][0]["link"]
    row = next(lk for lk in plan["links"] if lk["link"] == first)
    return [h["tbu"] for h in row["route"]["tbus"]]


def test_simulated_bench_kills_and_revives_a_transmitter(svc, http):
    h = {"Authorization": f"Bearer {svc.token}"}
    r = http.post(f"{svc.api}/sim/accelerators/gpu5/kill", headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["action"] == "kill"
    assert body["ports"] == ["port:25"]  # gpu5 transmits into port:25 in the default smartlight fabric
    events = http.get(f"{svc.api}/events", headers=h).json()["events"]
    assert any(e["kind"] == "sim-kill" and e["accelerator"] == "gpu5" for e in events)
    assert http.post(f"{svc.api}/sim/accelerators/gpu5/revive", headers=h).json()["action"] == "revive"
    _error(http.post(f"{svc.api}/sim/accelerators/gpu99/kill", headers=h), 404, "not-found")
    # the simulator also takes ports and module lanes; the API names accelerators only
    _error(http.post(f"{svc.api}/sim/accelerators/port:9/kill", headers=h), 404, "not-found")
    _error(http.post(f"{svc.api}/sim/accelerators/gpu0:0/kill", headers=h), 404, "not-found")


@pytest.mark.parametrize("detected", ["NaN", "Infinity", "-Infinity", "1e309", "1.8e12"])
def test_a_bad_detection_time_is_one_json_422_and_recovers_nothing(svc, detected):
    c = svc.client
    job = c.post("/jobs", json=SMALL_JOB).json()
    failed = c.get("/status").json()["failed_accelerators"]
    since = c.get("/events").json()["last_id"]
    body = b'{"accelerator": "%s", "detected_s": %s}' % (job["accelerators"][1].encode(), detected.encode())
    r = c.post("/failures", content=body, headers={"content-type": "application/json"})
    assert "detected_s" in _error(r, 422, "input")["error"]
    assert c.get("/events", params={"since": since}).json()["events"] == []
    assert c.get("/status").json()["failed_accelerators"] == failed
    assert c.delete(f"/jobs/{job['id']}").status_code == 200


def test_an_event_id_past_sqlites_integers_is_422(svc):
    _error(svc.client.get("/events", params={"since": 2**63}), 422, "input")
    assert svc.client.get("/events", params={"since": 2**63 - 1}).json()["events"] == []


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",  # no request line
        b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",  # a header without a colon
        b"POST /api/v1/failures HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ZZ\r\nab\r\n0\r\n\r\n",
    ],
    ids=["request-line", "header", "chunk-size"],
)
def test_requests_the_http_parser_refuses_get_one_json_error(svc, raw):
    import json
    import socket

    host, port = svc.info["bind"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(raw)
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)
    assert error["kind"] == "input"
    assert error["error"].startswith("malformed HTTP request")
    assert error["hint"]


def test_the_api_reference_is_served_without_a_cdn(svc, http):
    base = svc.info["url"]
    page = http.get(f"{base}/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in page.text
    assert "https://" not in page.text  # FastAPI's default page loads Swagger UI from a CDN
    assert "http://" not in page.text
    links = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', page.text)
    assert links == ["/openapi.json"]  # no script or style sheet from anywhere
    assert "innerHTML" not in page.text
    _error(http.get(f"{base}/redoc"), 404, "not-found")  # ReDoc would load its script from a CDN too


@pytest.mark.parametrize("detected", ["true", "now-as-a-string"])
def test_a_detection_time_that_is_not_a_number_is_named_as_such(svc, detected):
    # pydantic's lax mode read true as 1.0 (refused as "not within an hour": an odd message) and
    # "1796..." as a time (accepted): neither is a number of seconds
    c = svc.client
    job = c.post("/jobs", json=SMALL_JOB).json()
    since = c.get("/events").json()["last_id"]
    value = f'"{time.time():.0f}"' if detected == "now-as-a-string" else detected
    body = b'{"accelerator": "%s", "detected_s": %s}' % (job["accelerators"][1].encode(), value.encode())
    r = c.post("/failures", content=body, headers={"content-type": "application/json"})
    assert _error(r, 422, "input")["error"] == "detected_s: Input should be a valid number"
    assert c.get("/events", params={"since": since}).json()["events"] == []
    assert c.delete(f"/jobs/{job['id']}").status_code == 200
