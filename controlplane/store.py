"""The control plane's durable state: one SQLite database in WAL mode (stdlib ``sqlite3``).

Tables (schema migrations are numbered; the database's ``PRAGMA user_version`` is the
number of the last one applied):

* ``chips``: each chip the service drives (id, mesh spec and fingerprint);
* ``calibration_maps``: the heater map in force per chip (``ideal`` or a fitted map's JSON);
* ``fabrics``: the ``lumion.fabric`` document per chip;
* ``jobs``: every job (its ``lumion`` job dict, state ``pending``/``running``/``deleted``);
* ``allocations``: accelerator -> job, **primary key (chip, accelerator)**: an accelerator,
  spare or not, can belong to one job only, whatever the code above does;
* ``failed_accelerators``: accelerators out of service until repaired;
* ``suspect_tbus``: TBUs light blamed during a repaired recovery or placement (routed
  around like failed ones, but not recorded failed: an operator clears them);
* ``heater_states``: heater states (``lumion.state``: a unitary, a filter) set on the chip
  through the service (``pending`` while their intent is open, ``applied`` once light
  checked them, ``cleared``), each with the TBUs it holds and its check by light;
* ``plans``: the chip's plan of record (``lumion.plan`` JSON, every job's links);
* ``currents``: the heater currents last committed per chip (what the chip must hold);
* ``intents``: one row per reconfiguration (previous and target currents, the new plan,
  the state change to apply); at most one open per chip (a partial unique index);
* ``events``: the append-only log (UPDATE and DELETE are refused by triggers, and so is
  an INSERT of an existing id -- ``INSERT OR REPLACE`` deletes without firing a delete
  trigger); each event carries ``hash``, a SHA-256 chained over every event before it,
  checked whenever the store opens (:func:`event_hash`).

Every write is one transaction opened with ``BEGIN IMMEDIATE`` (the write lock is taken at
the start, so two writers never interleave a read-check-write), and ``synchronous=FULL``
makes a committed intent survive a crash of the process or the host. The database and its
``-wal``, ``-shm`` and ``.lock`` files are the rack's state: made (and kept) 0600.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from photonics.errors import LumionError

# A busy database (another writer holding the lock) is waited for this long before the
# statement fails: a reconfiguration's transactions last milliseconds.
BUSY_TIMEOUT_MS = 5000
# Most events returned by one events() call: a dashboard page or a client catching up
# reads in pages of this size instead of the whole log at once.
MAX_EVENTS_PER_CALL = 5000

OPEN, DONE, ROLLED_FORWARD, ROLLED_BACK, REVERTED, ABORTED = (
    "open",
    "done",
    "rolled-forward",
    "rolled-back",
    "reverted",
    "aborted",
)

# The chain's first link: the hash "before" event 1.
GENESIS_HASH = "0" * 64
# The database and its companions hold the rack's state and job names: owner only, like the token.
FILE_MODE = 0o600
COMPANIONS = ("-wal", "-shm", ".lock")


def event_hash(
    previous: str, event_id: int, time_iso: str, t_s: float, kind: str, job: Any, body: str
) -> str:
    """SHA-256 (hex) of one event chained to the hash of the event before it.

    Every stored column is covered (``t_s`` by its exact ``repr``, the body as stored), so
    changing, inserting, removing or reordering any event breaks every hash after it.
    """
    record = json.dumps([previous, int(event_id), time_iso, repr(float(t_s)), kind, job, body])
    return hashlib.sha256(record.encode()).hexdigest()


def _chain_events(db: sqlite3.Connection) -> None:
    """Migration 2: hash every event already logged, then refuse overwrites and unhashed rows.

    The update trigger is dropped for the one UPDATE that fills the new column, and put
    back in the same transaction: nobody sees the log writable.
    """
    db.execute("ALTER TABLE events ADD COLUMN hash TEXT")
    db.execute("DROP TRIGGER events_append_only_update")
    previous = GENESIS_HASH
    rows = db.execute("SELECT id, time, t_s, kind, job, body FROM events ORDER BY id").fetchall()
    for r in rows:
        previous = event_hash(previous, *tuple(r))
        db.execute("UPDATE events SET hash=? WHERE id=?", (previous, r[0]))
    for statement in _statements(EVENT_TRIGGERS):
        db.execute(statement)


EVENT_TRIGGERS = """
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
    CREATE TRIGGER events_append_only_overwrite BEFORE INSERT ON events
        WHEN EXISTS (SELECT 1 FROM events WHERE id = NEW.id)
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only: that event id exists'); END;
    CREATE TRIGGER events_hashed BEFORE INSERT ON events WHEN NEW.hash IS NULL
        BEGIN SELECT RAISE(ABORT, 'an event needs its chained hash (Store.log_event)'); END;
"""

# Each migration is SQL, or a function of the connection (inside the migration's transaction).
MIGRATIONS: tuple[str | Callable[[sqlite3.Connection], None], ...] = (
    # 1: the first schema
    """
    CREATE TABLE chips (
        chip_id TEXT PRIMARY KEY,
        mesh_spec TEXT,
        mesh_fingerprint TEXT NOT NULL,
        first_seen TEXT NOT NULL
    );
    CREATE TABLE calibration_maps (
        chip_id TEXT PRIMARY KEY REFERENCES chips(chip_id),
        kind TEXT NOT NULL CHECK (kind IN ('ideal', 'fitted')),
        body TEXT,
        installed TEXT NOT NULL
    );
    CREATE TABLE fabrics (
        chip_id TEXT PRIMARY KEY REFERENCES chips(chip_id),
        name TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'deleted')),
        intent_id INTEGER,
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    );
    CREATE TABLE allocations (
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        accelerator TEXT NOT NULL,
        job_id TEXT NOT NULL REFERENCES jobs(id),
        pending INTEGER NOT NULL DEFAULT 0,
        intent_id INTEGER,
        PRIMARY KEY (chip_id, accelerator)
    );
    CREATE TABLE failed_accelerators (
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        accelerator TEXT NOT NULL,
        since TEXT NOT NULL,
        PRIMARY KEY (chip_id, accelerator)
    );
    CREATE TABLE plans (
        chip_id TEXT PRIMARY KEY REFERENCES chips(chip_id),
        intent_id INTEGER,
        body TEXT NOT NULL
    );
    CREATE TABLE currents (
        chip_id TEXT PRIMARY KEY REFERENCES chips(chip_id),
        intent_id INTEGER,
        unit TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE TABLE intents (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        kind TEXT NOT NULL,
        job_id TEXT,
        previous TEXT NOT NULL,
        target TEXT NOT NULL,
        plan TEXT,
        change TEXT NOT NULL,
        status TEXT NOT NULL,
        created TEXT NOT NULL,
        finished TEXT,
        outcome TEXT
    );
    CREATE UNIQUE INDEX one_open_intent_per_chip ON intents(chip_id) WHERE status = 'open';
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time TEXT NOT NULL,
        t_s REAL NOT NULL,
        kind TEXT NOT NULL,
        job TEXT,
        body TEXT NOT NULL
    );
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
    """,
    # 2: the hash chain over the event log, and no INSERT over an existing event
    _chain_events,
    # 3: suspects (light blamed them; avoided until cleared, never recorded dead)
    """
    CREATE TABLE suspect_tbus (
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        tbu TEXT NOT NULL,
        since TEXT NOT NULL,
        intent_id INTEGER,
        PRIMARY KEY (chip_id, tbu)
    );
    """,
    # 4: heater states set through the service (POST /api/v1/states)
    """
    CREATE TABLE heater_states (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        chip_id TEXT NOT NULL REFERENCES chips(chip_id),
        body TEXT NOT NULL,
        tbus TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'cleared')),
        verification TEXT,
        intent_id INTEGER,
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    );
    """,
)


class StoreError(LumionError):
    """The database cannot be opened, is from a newer release, or refused a write."""


def now_iso(t_s: float | None = None) -> str:
    """ISO 8601 UTC time (ms resolution) of epoch seconds ``t_s`` (default: now)."""
    t = time.time() if t_s is None else t_s
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


class Store:
    """The service's database. Thread-safe: one connection, one lock around every use.

    Args:
        path: the database file (created with its directory when missing).
    """

    def __init__(self, path: str | Path, *, exclusive: bool = False) -> None:
        self.path = Path(path)
        self._lockfile: Any = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _owner_only(self.path)  # before SQLite makes -wal and -shm: they copy its mode
            if exclusive:
                self._lockfile = _exclusive(self.path)
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1e3
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the database {self.path}: {exc}; check the path and its permissions"
            ) from exc
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        try:
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(
                f"{self.path} is not a LUMION control-plane database ({exc}); give another --db file"
            ) from exc
        if mode.lower() != "wal":
            raise StoreError(
                f"{self.path}: the file system refused WAL mode ({mode}); put the database on a local disk"
            )
        try:
            self.migrate()
            self.event_head = self.verify_events()
        except BaseException:
            self.close()  # a refused database keeps no connection and no lock
            raise

    # -- schema ---------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        """The number of migrations applied (``PRAGMA user_version``)."""
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> int:
        """Apply every migration not yet applied, each in its own transaction; the new version."""
        with self._lock:
            have = self.schema_version
            if have > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} has schema version {have}, newer than this release "
                    f"understands ({len(MIGRATIONS)}); upgrade lumion or use another --db"
                )
            for number in range(have + 1, len(MIGRATIONS) + 1):
                step = MIGRATIONS[number - 1]
                with self.transaction() as db:
                    if callable(step):
                        step(db)
                    else:
                        for statement in _statements(step):
                            db.execute(statement)
                    db.execute(f"PRAGMA user_version={number}")
            return self.schema_version

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Rows of a read-only statement."""
        with self._lock:
            return self._db.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        """Close the connection and release the exclusive lock (idempotent)."""
        with self._lock:
            self._db.close()
            if self._lockfile is not None:
                self._lockfile.close()
                self._lockfile = None

    # -- chips, maps, fabrics ---------------------------------------------------------
    def ensure_chip(self, chip_id: str, mesh_spec: str | None, fingerprint: str) -> None:
        """Record the chip on first sight; StoreError when the id is known with another mesh."""
        with self.transaction() as db:
            row = db.execute("SELECT mesh_fingerprint FROM chips WHERE chip_id=?", (chip_id,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO chips VALUES (?, ?, ?, ?)", (chip_id, mesh_spec, fingerprint, now_iso())
                )
            elif row[0] != fingerprint:
                raise StoreError(
                    f"chip {chip_id} is recorded in {self.path} with another mesh; the bench "
                    "does not match this database (give the right --bench or another --db)"
                )

    def set_map(self, chip_id: str, kind: str, body: Mapping[str, Any] | None) -> None:
        """Install the heater map of ``chip_id`` (``ideal`` has no body)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO calibration_maps VALUES (?, ?, ?, ?)",
                (chip_id, kind, None if body is None else _dumps(body), now_iso()),
            )

    def get_map(self, chip_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """(kind, body) of the chip's heater map, or None before one is installed."""
        rows = self.query("SELECT kind, body FROM calibration_maps WHERE chip_id=?", (chip_id,))
        if not rows:
            return None
        return rows[0]["kind"], (json.loads(rows[0]["body"]) if rows[0]["body"] else None)

    def set_fabric(self, chip_id: str, fabric: Mapping[str, Any]) -> None:
        """Record the fabric cabled to ``chip_id`` (a ``lumion.fabric`` document)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO fabrics VALUES (?, ?, ?)",
                (chip_id, str(fabric.get("name", "fabric")), _dumps(fabric)),
            )

    def fabrics(self) -> list[dict[str, Any]]:
        """Every recorded fabric document (one per chip)."""
        return [json.loads(r["body"]) for r in self.query("SELECT body FROM fabrics ORDER BY chip_id")]

    def get_fabric(self, chip_id: str) -> dict[str, Any] | None:
        """The fabric document of ``chip_id`` (None before one is recorded)."""
        rows = self.query("SELECT body FROM fabrics WHERE chip_id=?", (chip_id,))
        return json.loads(rows[0]["body"]) if rows else None

    # -- committed state ------------------------------------------------------------
    def committed(self, chip_id: str) -> tuple[list[float] | None, dict[str, Any] | None]:
        """(currents, plan document) last committed for ``chip_id`` (None, None on a new chip)."""
        cur = self.query("SELECT body FROM currents WHERE chip_id=?", (chip_id,))
        plan = self.query("SELECT body FROM plans WHERE chip_id=?", (chip_id,))
        return (json.loads(cur[0]["body"]) if cur else None, json.loads(plan[0]["body"]) if plan else None)

    def jobs(self, chip_id: str, states: Sequence[str] = ("running",)) -> list[dict[str, Any]]:
        """Jobs of ``chip_id`` in ``states``, oldest first, as dicts (id, name, state, job, ...)."""
        marks = ",".join("?" * len(states))
        rows = self.query(
            f"SELECT * FROM jobs WHERE chip_id=? AND state IN ({marks}) ORDER BY seq", (chip_id, *states)
        )
        return [
            {
                "id": r["id"],
                "seq": r["seq"],
                "name": r["name"],
                "state": r["state"],
                "job": json.loads(r["body"]),
                "created": r["created"],
                "updated": r["updated"],
            }
            for r in rows
        ]

    def allocations(self, chip_id: str) -> dict[str, tuple[str, bool]]:
        """{accelerator: (job id, pending)} for ``chip_id``."""
        rows = self.query("SELECT accelerator, job_id, pending FROM allocations WHERE chip_id=?", (chip_id,))
        return {r["accelerator"]: (r["job_id"], bool(r["pending"])) for r in rows}

    def failed_accelerators(self, chip_id: str) -> list[str]:
        """Accelerators of ``chip_id`` out of service, in the order they failed."""
        rows = self.query(
            "SELECT accelerator FROM failed_accelerators WHERE chip_id=? ORDER BY rowid", (chip_id,)
        )
        return [r["accelerator"] for r in rows]

    def suspect_tbus(self, chip_id: str) -> list[dict[str, Any]]:
        """Suspect TBUs of ``chip_id`` (``{"tbu", "since", "intent"}``), in the order light blamed them."""
        rows = self.query(
            "SELECT tbu, since, intent_id FROM suspect_tbus WHERE chip_id=? ORDER BY rowid", (chip_id,)
        )
        return [{"tbu": r["tbu"], "since": r["since"], "intent": r["intent_id"]} for r in rows]

    def clear_suspect(self, chip_id: str, tbu: str) -> bool:
        """Clear a suspect TBU (routing may use it again); False if it was not a suspect."""
        with self.transaction() as db:
            gone = db.execute("DELETE FROM suspect_tbus WHERE chip_id=? AND tbu=?", (chip_id, tbu)).rowcount
        return bool(gone)

    def heater_states(self, chip_id: str) -> list[dict[str, Any]]:
        """The heater states applied on ``chip_id``, oldest first: ``{"id", "body", "tbus",
        "verification", "intent", "created", "updated"}``.
        """
        rows = self.query("SELECT * FROM heater_states WHERE chip_id=? AND state='applied' ORDER BY seq",
                          (chip_id,))
        return [{"id": r["id"], "body": json.loads(r["body"]), "tbus": json.loads(r["tbus"]),
                 "verification": json.loads(r["verification"]) if r["verification"] else None,
                 "intent": r["intent_id"], "created": r["created"], "updated": r["updated"]} for r in rows]

    def next_state_id(self) -> str:
        """An id no heater state has had (``state-<n>``)."""
        rows = self.query("SELECT COALESCE(MAX(seq), 0) FROM heater_states")
        return f"state-{int(rows[0][0]) + 1}"

    def next_job_id(self) -> str:
        """An id no job has had (``job-<n>``)."""
        rows = self.query("SELECT COALESCE(MAX(seq), 0) FROM jobs")
        return f"job-{int(rows[0][0]) + 1}"

    # -- intents ----------------------------------------------------------------------
    def open_intent(
        self,
        chip_id: str,
        kind: str,
        job_id: str | None,
        previous: Sequence[float],
        target: Sequence[float],
        plan: Mapping[str, Any],
        change: Mapping[str, Any],
    ) -> int:
        """Write and commit a reconfiguration's intent, reserving what it allocates; its id.

        In the same ``BEGIN IMMEDIATE`` transaction: new jobs are inserted ``pending`` and
        ``change["allocate"]`` ({accelerator: job id}) is inserted into ``allocations``
        (``pending``); the primary key refuses an accelerator that already belongs to a job,
        and the partial unique index a second open intent on the chip.
        """
        t = now_iso()
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO intents (chip_id, kind, job_id, previous, target, plan, change, status, created)"
                " "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    chip_id,
                    kind,
                    job_id,
                    _dumps(list(previous)),
                    _dumps(list(target)),
                    _dumps(plan),
                    _dumps(change),
                    OPEN,
                    t,
                ),
            )
            intent = int(cur.lastrowid)
            for job in change.get("create_jobs", []):
                db.execute(
                    "INSERT INTO jobs (id, chip_id, name, body, state, intent_id, created, updated) "
                    "VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
                    (job["id"], chip_id, job["job"]["name"], _dumps(job["job"]), intent, t, t),
                )
            for acc, job_id_ in change.get("allocate", {}).items():
                db.execute("INSERT INTO allocations VALUES (?, ?, ?, 1, ?)", (chip_id, acc, job_id_, intent))
            for hs in change.get("create_states", []):
                db.execute(
                    "INSERT INTO heater_states (id, chip_id, body, tbus, state, intent_id, created, updated) "
                    "VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
                    (hs["id"], chip_id, _dumps(hs["body"]), _dumps(hs["tbus"]), intent, t, t),
                )
        return intent

    def open_intents(self, chip_id: str) -> list[dict[str, Any]]:
        """The open intent(s) of ``chip_id`` (at most one), decoded."""
        rows = self.query("SELECT * FROM intents WHERE chip_id=? AND status=?", (chip_id, OPEN))
        return [_intent(r) for r in rows]

    def intent(self, intent_id: int) -> dict[str, Any]:
        """One intent, decoded."""
        rows = self.query("SELECT * FROM intents WHERE id=?", (intent_id,))
        if not rows:
            raise StoreError(f"no intent {intent_id}")
        return _intent(rows[0])

    def commit_intent(
        self, intent_id: int, status: str = DONE, outcome: str = "", currents: Sequence[float] | None = None,
        verification: Mapping[str, Any] | None = None,
    ) -> None:
        """Apply a verified intent: its plan, currents and state change become the truth.

        ``currents`` is what the chip read back (the driver quantises a setting to its DAC
        step, so the read-back, within tolerance of the target, is what the chip holds);
        default: the intent's target. ``verification``: the check by light of the heater
        state the intent applies, recorded with it in the same transaction.
        """
        it = self.intent(intent_id)
        held = list(currents) if currents is not None else it["target"]
        chip, change, t = it["chip_id"], it["change"], now_iso()
        with self.transaction() as db:
            _require_open(db, intent_id)
            db.execute(
                "INSERT OR REPLACE INTO currents VALUES (?, ?, ?, ?)",
                (chip, intent_id, change.get("unit", "mA"), _dumps([float(x) for x in held])),
            )
            db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, ?)", (chip, intent_id, _dumps(it["plan"])))
            db.execute(
                "UPDATE jobs SET state='running', updated=? WHERE intent_id=? AND state='pending'",
                (t, intent_id),
            )
            db.execute("UPDATE allocations SET pending=0 WHERE intent_id=?", (intent_id,))
            for job_id, body in change.get("update_jobs", {}).items():
                db.execute("UPDATE jobs SET body=?, updated=? WHERE id=?", (_dumps(body), t, job_id))
            for job_id in change.get("delete_jobs", []):
                db.execute("UPDATE jobs SET state='deleted', updated=? WHERE id=?", (t, job_id))
                db.execute("DELETE FROM allocations WHERE job_id=?", (job_id,))
            for acc in change.get("release", []):
                db.execute("DELETE FROM allocations WHERE chip_id=? AND accelerator=?", (chip, acc))
            for acc in change.get("fail", []):
                db.execute("INSERT OR IGNORE INTO failed_accelerators VALUES (?, ?, ?)", (chip, acc, t))
            for tbu in change.get("suspect", []):
                db.execute("INSERT OR IGNORE INTO suspect_tbus VALUES (?, ?, ?, ?)",
                           (chip, tbu, t, intent_id))
            for tbu in change.get("unsuspect", []):  # reported failed: a failure now, no longer a suspect
                db.execute("DELETE FROM suspect_tbus WHERE chip_id=? AND tbu=?", (chip, tbu))
            db.execute(
                "UPDATE heater_states SET state='applied', verification=?, updated=? "
                "WHERE intent_id=? AND state='pending'",
                (None if verification is None else _dumps(verification), t, intent_id),
            )
            for state_id in change.get("clear_states", []):
                db.execute("UPDATE heater_states SET state='cleared', updated=? WHERE id=?", (t, state_id))
            db.execute(
                "UPDATE intents SET status=?, finished=?, outcome=? WHERE id=?",
                (status, t, outcome, intent_id),
            )

    def close_intent(self, intent_id: int, status: str, outcome: str = "") -> None:
        """Give up an intent (the chip holds the previous currents): free what it reserved."""
        with self.transaction() as db:
            _require_open(db, intent_id)
            db.execute("DELETE FROM allocations WHERE intent_id=? AND pending=1", (intent_id,))
            db.execute("DELETE FROM jobs WHERE intent_id=? AND state='pending'", (intent_id,))
            db.execute("DELETE FROM heater_states WHERE intent_id=? AND state='pending'", (intent_id,))
            db.execute(
                "UPDATE intents SET status=?, finished=?, outcome=? WHERE id=?",
                (status, now_iso(), outcome, intent_id),
            )

    def recovery_of(self, chip_id: str, failure: Mapping[str, Any]) -> dict[str, Any] | None:
        """The latest committed recovery intent of ``failure`` (``{"accelerators": [...]}`` or
        ``{"tbu", "state"}``, controlplane.reports.identity), decoded; None when there is none.

        An accelerator's recovery is the last committed intent that put it out of service
        (its ``change.fail`` lists it: a failover, or a TBU failure that cut it off).
        """
        done = (DONE, ROLLED_FORWARD)
        if failure.get("accelerators"):
            names = list(failure["accelerators"])
            rows = self.query(
                "SELECT intents.* FROM intents, json_each(intents.change, '$.fail') AS f "
                "WHERE chip_id=? AND status IN (?, ?) AND f.value=? ORDER BY intents.id DESC LIMIT 1",
                (chip_id, *done, names[0]),
            )
            found = [_intent(r) for r in rows]
            return next((it for it in found if set(names) <= set(it["change"].get("fail", []))), None)
        rows = self.query(
            "SELECT * FROM intents WHERE chip_id=? AND status IN (?, ?) AND kind='tbu' "
            "AND json_extract(change, '$.identity.tbu')=? AND json_extract(change, '$.identity.state')=? "
            "ORDER BY id DESC LIMIT 1",
            (chip_id, *done, failure.get("tbu"), failure.get("state")),
        )
        return _intent(rows[0]) if rows else None

    def event_of_intent(self, kind: str, intent_id: int) -> dict[str, Any] | None:
        """The last event of ``kind`` written for ``intent_id`` (None: the service died before it)."""
        rows = self.query(
            "SELECT * FROM events WHERE kind=? AND json_extract(body, '$.intent')=? ORDER BY id DESC LIMIT 1",
            (kind, intent_id),
        )
        return _event(rows[0]) if rows else None

    def repair(self, chip_id: str, accelerator: str, plan: Mapping[str, Any]) -> bool:
        """Put a failed accelerator back in service (and the plan without it); False if it was not failed."""
        with self.transaction() as db:
            gone = db.execute(
                "DELETE FROM failed_accelerators WHERE chip_id=? AND accelerator=?", (chip_id, accelerator)
            ).rowcount
            if gone:
                db.execute("UPDATE plans SET body=? WHERE chip_id=?", (_dumps(plan), chip_id))
        return bool(gone)

    # -- events -----------------------------------------------------------------------
    def log_event(self, kind: str, fields: Mapping[str, Any], t_s: float | None = None) -> int:
        """Append an event, chained to the last one's hash; its id."""
        t = float(time.time() if t_s is None else t_s)
        body = {k: v for k, v in fields.items() if k not in ("id", "time", "t_s", "kind")}
        row = (now_iso(t), t, kind, body.get("job"), _dumps(body))
        with self.transaction() as db:
            last = db.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
            seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name='events'").fetchone()
            event_id = max(last[0] if last else 0, seq[0] if seq else 0) + 1
            digest = event_hash(last[1] if last else GENESIS_HASH, event_id, *row)
            db.execute(
                "INSERT INTO events (id, time, t_s, kind, job, body, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (event_id, *row, digest),
            )
        self.event_head = {"last_id": event_id, "hash": digest}
        return event_id

    def verify_events(self) -> dict[str, Any]:
        """Check the event log's hash chain from the first event; ``{"last_id", "hash"}`` of its head.

        StoreError naming the first event whose hash does not follow from the ones before
        it (an event changed, inserted, removed or reordered outside :meth:`log_event`).
        """
        previous, last_id = GENESIS_HASH, 0
        with self._lock:
            cursor = self._db.execute("SELECT id, time, t_s, kind, job, body, hash FROM events ORDER BY id")
            for r in cursor:
                if event_hash(previous, *tuple(r)[:6]) != r[6]:
                    raise StoreError(
                        f"{self.path}: the event log was altered at event {r[0]} (its hash does not "
                        f"follow from the events before it); keep this file for investigation, and "
                        "restore a backup or start a new --db"
                    )
                previous, last_id = r[6], r[0]
        return {"last_id": last_id, "hash": previous}

    def events(self, since_id: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        """Events with id > ``since_id``, oldest first, at most ``limit`` (<= MAX_EVENTS_PER_CALL)."""
        limit = max(0, min(int(limit), MAX_EVENTS_PER_CALL))
        rows = self.query("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (int(since_id), limit))
        return [_event(r) for r in rows]


def _exclusive(path: Path) -> Any:
    """Hold an exclusive ``flock`` on ``<db>.lock``: one service per database (released on any exit)."""
    import fcntl

    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_APPEND, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # a lock file left 0644 by an earlier release
    handle = os.fdopen(fd, "a+")  # held open for the store's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreError(f"another lumion serve already uses {path}; stop it or give another --db") from None
    return handle


def _owner_only(path: Path) -> None:
    """Create the database file 0600 (SQLite gives -wal and -shm its mode), or make an existing
    one and its companions 0600 (files left readable by an earlier release).
    """
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))
    for p in (path, *(Path(f"{path}{suffix}") for suffix in COMPANIONS)):
        with contextlib.suppress(FileNotFoundError):
            if p.stat().st_mode & 0o777 != FILE_MODE:
                os.chmod(p, FILE_MODE)


def _statements(script: str) -> list[str]:
    """Split a migration into statements (triggers' bodies keep their inner semicolons)."""
    out, buf = [], ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    return out


def _require_open(db: sqlite3.Connection, intent_id: int) -> None:
    row = db.execute("SELECT status FROM intents WHERE id=?", (intent_id,)).fetchone()
    if row is None or row[0] != OPEN:
        raise StoreError(f"intent {intent_id} is not open ({row[0] if row else 'missing'})")


def _intent(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "chip_id": row["chip_id"],
        "kind": row["kind"],
        "job_id": row["job_id"],
        "previous": json.loads(row["previous"]),
        "target": json.loads(row["target"]),
        "plan": json.loads(row["plan"]) if row["plan"] else None,
        "change": json.loads(row["change"]),
        "status": row["status"],
        "created": row["created"],
        "finished": row["finished"],
        "outcome": row["outcome"],
    }


def _event(row: sqlite3.Row) -> dict[str, Any]:
    body = json.loads(row["body"])
    return {**body, "id": row["id"], "time": row["time"], "t_s": row["t_s"], "kind": row["kind"]}
