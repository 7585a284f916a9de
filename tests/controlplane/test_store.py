"""The store on a real SQLite file: migrations, WAL, append-only log, reservations, intents."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading

import pytest

from controlplane.store import MIGRATIONS, Store, StoreError


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "cp.db")
    s.ensure_chip("chip-a", "smartlight", "fp-a")
    yield s
    s.close()


def _job(store: Store, job_id: str, accs: list[str]) -> int:
    job = {"name": job_id, "topology": "ring", "accelerators": accs, "links": []}
    return store.open_intent(
        "chip-a",
        "place",
        job_id,
        [0.0],
        [1.0],
        {"plan": 1},
        {"create_jobs": [{"id": job_id, "job": job}], "allocate": dict.fromkeys(accs, job_id)},
    )


def test_fresh_database_is_migrated_and_in_wal_mode(tmp_path):
    s = Store(tmp_path / "cp.db")
    assert s.schema_version == len(MIGRATIONS)
    assert s.query("PRAGMA journal_mode")[0][0] == "wal"
    s.close()
    again = Store(tmp_path / "cp.db")  # reopening applies nothing twice
    assert again.schema_version == len(MIGRATIONS)
    again.close()


def test_a_newer_database_is_refused(tmp_path):
    db = sqlite3.connect(tmp_path / "cp.db")
    db.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this release"):
        Store(tmp_path / "cp.db")


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    (tmp_path / "cp.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a LUMION control-plane database"):
        Store(tmp_path / "cp.db")


def test_one_service_per_database(tmp_path):
    first = Store(tmp_path / "cp.db", exclusive=True)
    with pytest.raises(StoreError, match="another lumion serve"):
        Store(tmp_path / "cp.db", exclusive=True)
    first.close()
    Store(tmp_path / "cp.db", exclusive=True).close()  # released on close


def test_event_log_is_append_only(store):
    first = store.log_event("a", {"job": "job-1", "x": 1})
    second = store.log_event("b", {})
    assert second > first
    events = store.events()
    assert [e["kind"] for e in events] == ["a", "b"]
    assert events[0]["job"] == "job-1"
    assert {"id", "time", "t_s", "kind"} <= set(events[0])
    assert store.events(since_id=first) == events[1:]
    with pytest.raises(sqlite3.DatabaseError, match="append-only"), store.transaction() as db:
        db.execute("UPDATE events SET kind='forged'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"), store.transaction() as db:
        db.execute("DELETE FROM events")
    assert [e["kind"] for e in store.events()] == ["a", "b"]


def test_an_accelerator_is_never_reserved_twice(store):
    intent = _job(store, "job-1", ["gpu0", "spare0"])
    store.commit_intent(intent)
    with pytest.raises(sqlite3.IntegrityError):
        _job(store, "job-2", ["gpu1", "spare0"])
    # nothing of the refused intent was left behind
    assert store.allocations("chip-a") == {"gpu0": ("job-1", False), "spare0": ("job-1", False)}
    assert [j["id"] for j in store.jobs("chip-a", ("pending", "running"))] == ["job-1"]


def test_racing_reservations_of_one_spare_give_it_to_one_job(tmp_path):
    path = tmp_path / "cp.db"
    Store(path).ensure_chip("chip-a", "smartlight", "fp-a")
    won, lost = [], []
    barrier = threading.Barrier(8)

    def reserve(k: int) -> None:
        s = Store(path)  # one connection each: the database, not a Python lock, decides
        barrier.wait()
        try:
            intent = _job(s, f"job-{k}", ["spare0"])
            s.commit_intent(intent)
            won.append(k)
        except sqlite3.IntegrityError:
            lost.append(k)
        finally:
            s.close()

    threads = [threading.Thread(target=reserve, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert len(lost) == 7
    check = Store(path)
    assert check.allocations("chip-a") == {"spare0": (f"job-{won[0]}", False)}
    check.close()


def test_one_open_intent_per_chip_and_rollback_frees_its_reservations(store):
    intent = _job(store, "job-1", ["gpu0"])
    with pytest.raises(sqlite3.IntegrityError):
        store.open_intent("chip-a", "tbu", None, [0.0], [0.0], {}, {})
    assert [it["id"] for it in store.open_intents("chip-a")] == [intent]
    store.close_intent(intent, "rolled-back")
    assert store.allocations("chip-a") == {}
    assert store.jobs("chip-a", ("pending", "running")) == []
    assert store.intent(intent)["status"] == "rolled-back"
    with pytest.raises(StoreError, match="not open"):
        store.commit_intent(intent)


def test_commit_applies_plan_currents_and_state_change(store):
    intent = _job(store, "job-1", ["gpu0", "gpu1"])
    store.commit_intent(intent, currents=[0.9999])
    assert store.committed("chip-a") == ([0.9999], {"plan": 1})
    replace = store.open_intent(
        "chip-a",
        "failover",
        "job-1",
        [0.9999],
        [2.0],
        {"plan": 2},
        {
            "allocate": {"spare0": "job-1"},
            "release": ["gpu1"],
            "fail": ["gpu1"],
            "update_jobs": {"job-1": {"name": "job-1", "accelerators": ["gpu0", "spare0"], "links": []}},
        },
    )
    assert store.allocations("chip-a")["spare0"] == ("job-1", True)  # reserved before the write
    store.commit_intent(replace)
    assert store.allocations("chip-a") == {"gpu0": ("job-1", False), "spare0": ("job-1", False)}
    assert store.failed_accelerators("chip-a") == ["gpu1"]
    assert store.jobs("chip-a")[0]["job"]["accelerators"] == ["gpu0", "spare0"]
    assert store.committed("chip-a") == ([2.0], {"plan": 2})


def test_a_chip_id_with_another_mesh_is_refused(store):
    with pytest.raises(StoreError, match="another mesh"):
        store.ensure_chip("chip-a", "hex:2x2", "fp-other")


def test_an_event_cannot_be_overwritten_by_insert_or_replace(store):
    store.log_event("a", {"x": 1})
    store.log_event("b", {})
    before = store.events()
    for verb in ("INSERT OR REPLACE", "REPLACE", "INSERT"):
        # REPLACE deletes the old row without firing a delete trigger: refused before that
        with pytest.raises(sqlite3.DatabaseError, match="append-only"), store.transaction() as db:
            db.execute(
                f"{verb} INTO events (id, time, t_s, kind, job, body, hash) "
                "VALUES (1, 'x', 0, 'forged', NULL, '{}', 'h')"
            )
    with pytest.raises(sqlite3.DatabaseError, match="chained hash"), store.transaction() as db:
        db.execute("INSERT INTO events (time, t_s, kind, body) VALUES ('x', 0, 'forged', '{}')")
    assert store.events() == before


def _tamper(path, sql: str) -> None:
    """What someone with write access to the file can do: drop the guards, rewrite a row."""
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER events_append_only_update")
    db.execute("DROP TRIGGER events_append_only_delete")
    db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET body='{\"accelerator\":\"gpu9\"}' WHERE id=2",
        "DELETE FROM events WHERE id=2",
        "UPDATE events SET t_s=t_s+1 WHERE id=3",
        "UPDATE events SET kind='forged' WHERE id=1",
    ],
    ids=["body", "deleted", "time", "kind"],
)
def test_a_tampered_event_log_is_refused_at_start(tmp_path, sql):
    s = Store(tmp_path / "cp.db")
    for k in range(4):
        s.log_event("failure-reported", {"accelerator": f"gpu{k}"})
    head = s.event_head
    assert head["last_id"] == 4
    s.close()
    assert Store(tmp_path / "cp.db").event_head == head  # untouched: opens, same head
    _tamper(tmp_path / "cp.db", sql)
    with pytest.raises(StoreError, match=r"event log was altered at event [123]"):
        Store(tmp_path / "cp.db")


def test_a_version_1_database_is_migrated_with_its_events_chained(tmp_path):
    from controlplane.store import _statements

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for statement in _statements(MIGRATIONS[0]):
        db.execute(statement)
    db.execute("PRAGMA user_version=1")
    for k in range(3):  # as release 1 wrote them: no hash column
        db.execute(
            "INSERT INTO events (time, t_s, kind, job, body) VALUES (?, ?, ?, ?, ?)",
            (f"2026-01-01T00:00:0{k}.000Z", 1.7e9 + k + 0.1, "service-started", None, "{}"),
        )
    db.close()
    os.chmod(path, 0o644)
    s = Store(path)
    assert s.schema_version == len(MIGRATIONS)
    assert [e["kind"] for e in s.events()] == ["service-started"] * 3
    assert s.event_head["last_id"] == 3
    assert s.log_event("service-started", {}) == 4
    with pytest.raises(sqlite3.DatabaseError, match="append-only"), s.transaction() as tx:
        tx.execute("UPDATE events SET kind='forged'")
    s.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Store(path).event_head["last_id"] == 4  # the chain verifies across the migration


def test_the_database_and_its_companions_are_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        s = Store(tmp_path / "cp.db", exclusive=True)
        s.log_event("a", {})
        files = [tmp_path / n for n in ("cp.db", "cp.db-wal", "cp.db-shm", "cp.db.lock")]
        assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in files} == {f.name: 0o600 for f in files}
        s.close()
    finally:
        os.umask(old)


def test_a_refused_database_releases_its_lock(tmp_path):
    s = Store(tmp_path / "cp.db", exclusive=True)
    s.log_event("a", {})
    s.close()
    _tamper(tmp_path / "cp.db", "UPDATE events SET kind='forged' WHERE id=1")
    refusals = []  # kept, as a caller that logs the error keeps it (and its traceback) alive
    for _ in range(2):  # the second attempt is refused for the log again, not for a held lock
        with pytest.raises(StoreError, match="event log was altered") as refused:
            Store(tmp_path / "cp.db", exclusive=True)
        refusals.append(refused)
