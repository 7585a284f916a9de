"""50 concurrent failure reports across several jobs, over real HTTP: no spare is given twice.

Three ring jobs share one chip and two spares. Fifty clients report failures at once
(right job, no job, wrong job, the same accelerator many times). At most two recoveries
can succeed; a repeat of a failure already recovered is answered with that recovery
(``replayed``: the same intent and spare); every other report must be refused with a
reason (404: not in that job; 409: no spare left), and afterwards every job must still be a ring over
accelerators that belong to it alone, with no failed accelerator in it.
"""

from __future__ import annotations

import random
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

CLIENTS = 50
GROUPS = [["gpu0", "gpu1", "gpu2"], ["gpu3", "gpu4", "gpu5"], ["gpu6", "gpu7"]]


def _is_ring(job: dict) -> bool:
    accs = job["job"]["accelerators"]
    n = len(accs)
    return [tuple(lk) for lk in job["job"]["links"]] == [(accs[i], accs[(i + 1) % n]) for i in range(n)]


def _storm(svc, rng: random.Random) -> list:
    c = svc.client
    jobs = [c.post("/jobs", json={"accelerators": g}).json()["id"] for g in GROUPS]
    owner = {a: jobs[k] for k, g in enumerate(GROUPS) for a in g}
    requests = []
    for _ in range(CLIENTS):
        acc = rng.choice(list(owner))
        mode = rng.choice(("job", "any", "wrong"))
        if mode == "any":
            requests.append(("/failures", acc))
        else:
            jid = owner[acc] if mode == "job" else rng.choice([j for j in jobs if j != owner[acc]])
            requests.append((f"/jobs/{jid}/failures", acc))

    def report(req):
        path, acc = req
        return req, c.post(path, json={"accelerator": acc})

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(report, requests))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_fifty_concurrent_failure_reports(service_factory, seed):
    svc = service_factory("--rate-limit-per-s", "0")
    since = svc.client.get("/events").json()["last_id"]
    results = _storm(svc, random.Random(seed))
    answered = [r.json() for _, r in results if r.status_code == 200]
    ok = [rec for rec in answered if not rec.get("replayed")]
    by_intent = {rec["intent"]: rec for rec in ok}
    for rec in answered:  # a repeat names a recovery that happened, with its spare
        assert rec["intent"] in by_intent
        first = by_intent[rec["intent"]]
        assert (rec["failed"], rec["spare"]) == (first["failed"], first["spare"])
    for (path, acc), r in results:
        assert r.status_code in (200, 404, 409), (path, acc, r.text)
        if r.status_code != 200:
            body = r.json()
            assert body["kind"] in ("not-found", "impossible")
            assert body["error"]
    assert 1 <= len(ok) <= 2
    spares = [rec["spare"] for rec in ok]
    assert len(set(spares)) == len(spares), "a spare was given twice"
    assert {rec["failed"] for rec in ok} == set(svc.client.get("/status").json()["failed_accelerators"])

    status = svc.client.get("/status").json()
    jobs = [svc.client.get(f"/jobs/{j['id']}").json() for j in status["jobs"]]
    assert len(jobs) == len(GROUPS)
    members = [a for j in jobs for a in j["accelerators"]]
    assert len(members) == len(set(members)), "an accelerator runs two jobs"
    assert not set(members) & set(status["failed_accelerators"])
    assert all(_is_ring(j) for j in jobs)
    assert all(lk["budget_ok"] for lk in status["links"])
    assert status["chips"][0]["open_intents"] == []
    events = svc.client.get("/events", params={"since": since}).json()["events"]
    assert sum(e["kind"] == "recovery" for e in events) == len(ok)

    db = sqlite3.connect(f"file:{svc.db}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT accelerator, job_id FROM allocations").fetchall()
    finally:
        db.close()
    assert sorted(a for a, _ in rows) == sorted(members)
    assert dict(rows) == {a: j["id"] for j in jobs for a in j["accelerators"]}
