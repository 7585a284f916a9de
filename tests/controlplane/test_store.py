"""The store on a real SQLite file: migrations, WAL, append-only log, reservations, intents."""

from __future__ import annotations

import sqlite3
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
