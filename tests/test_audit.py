"""Audit records and logs: round trips, queries, secrecy, concurrency and crash safety."""

from __future__ import annotations

import gc
import multiprocessing
import os
import json
import multiprocessing.synchronize
import signal
import sqlite3
import stat
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

import firewall
from firewall import audit
from firewall.audit import (
    Attempt,
    AuditRecord,
    JSONLAuditLog,
    LiteralOutcome,
    MemoryAuditLog,
    SQLiteAuditLog,
    VerdictSummary,
    installation_key,
    literal_hash,
    open_audit_log,
)
from firewall.audit.migrations import MIGRATIONS
from firewall.errors import AuditError

KEY = b"test-key"
INVOICE = "INV-2025-08-44719"
SECRET = "sk-live-9fQ2xW7mZr4TuV8kLp3N"

# spawn works everywhere and never inherits a half-open connection from the parent
MP = multiprocessing.get_context("spawn")


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    # Nothing in this file may touch the real home: key file and default db go under tmp_path.
    monkeypatch.setattr(audit.keys, "state_dir", lambda: tmp_path / "state")
    monkeypatch.delenv(audit.DB_ENV, raising=False)
    monkeypatch.delenv(audit.KEY_ENV, raising=False)


def outcome(value: str, status: str = "in_summary", *, sensitive: bool = False,
            **fields) -> LiteralOutcome:
    fields = {"rule": "billing/invoice", "role": "user", "turn": 3,
              "in_summary": status == "in_summary", "in_ledger": True, **fields}
    return LiteralOutcome.of(value, key=KEY, sensitive=sensitive, status=status, **fields)


def make_record(conversation_id: str = "conv-1", compaction: int = 1,
                literals: list[LiteralOutcome] | None = None, **fields) -> AuditRecord:
    base = dict(
        conversation_id=conversation_id, compaction=compaction, policy="reinject",
        vendor_path="extractive", span=(0, 11), turns_compacted=12, tokens_before=9000,
        tokens_after=1200, ledger_tokens=80, outcome="compacted",
        packs=[{"name": "billing", "version": "1.0"}],
        literals=([outcome(INVOICE), outcome("ORD-7731", "reinjected")]
                  if literals is None else literals),
        attempts=[Attempt(number=1, summarizer="extractive", duration_ms=12.5,
                          verdict=VerdictSummary.of(1, ["ORD-7731"], [], key=KEY),
                          usage={"input_tokens": 900, "output_tokens": 150})],
    )
    return AuditRecord(**{**base, **fields})


@pytest.fixture(params=["sqlite", "jsonl", "memory", "postgres"])
def log(request, tmp_path):
    """Every query must behave the same on every log."""
    return {
        "sqlite": lambda: SQLiteAuditLog(tmp_path / "audit.db", key=KEY),
        "jsonl": lambda: JSONLAuditLog(tmp_path / "audit.jsonl", key=KEY),
        "memory": lambda: MemoryAuditLog(key=KEY),
        "postgres": lambda: open_log(request.getfixturevalue("postgres_url")),
    }[request.param]()


def open_log(spec: str):
    """A shared-store log (what several processes write at once): a SQLite file or a
    PostgreSQL URL."""
    if spec.startswith("postgresql://"):
        from firewall.audit.postgres import PostgresAuditLog

        return PostgresAuditLog(spec, key=KEY)
    return SQLiteAuditLog(spec, key=KEY)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_log(request, tmp_path) -> str:
    """Where several processes write one log: a SQLite file, a PostgreSQL database."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return str(tmp_path / "audit.db")


# --------------------------------------------------------------------------- queries (all logs)


def test_round_trip(log):
    record = make_record()
    log.write(record)
    assert log.get(record.id) == record
    assert log.get(record.id[:6]) == record
    assert list(log.export()) == [record]


def test_list_is_newest_first_with_status_counts(log):
    old = make_record(compaction=1, created_at=datetime.now(timezone.utc) - timedelta(hours=1))
    new = make_record(compaction=2)
    other = make_record(conversation_id="conv-2")
    for record in (old, new, other):
        log.write(record)
    assert [s.id for s in log.list()] == [other.id, new.id, old.id]
    assert [s.id for s in log.list(limit=1)] == [other.id]
    listed = log.list(conversation_id="conv-1")
    assert [s.compaction for s in listed] == [2, 1]
    assert listed[0].statuses == {"in_summary": 1, "reinjected": 1}
    assert listed[0].tokens_before == 9000 and listed[0].vendor_path == "extractive"


def test_find_literal_across_records(log):
    first = make_record(compaction=1, literals=[outcome(INVOICE), outcome("ORD-1")])
    second = make_record(compaction=2, literals=[
        outcome(INVOICE, "mutated_repaired", detail="summary said INV-2025-08-44791")])
    unrelated = make_record(conversation_id="conv-2", literals=[outcome("ORD-2")])
    for record in (first, second, unrelated):
        log.write(record)

    found = log.find_literal(INVOICE)
    assert [(s.id, s.compaction, lit.status) for s, lit in found] == [
        (first.id, 1, "in_summary"), (second.id, 2, "mutated_repaired")]
    assert found[1][1] == second.literals[0]
    assert found[1][0].statuses == {"mutated_repaired": 1}
    assert log.find_literal("INV-2025-08-4471") == []  # exact bytes only, no prefix match


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_literal_hashed_under_another_key_is_found_by_its_stored_value(tmp_path, kind):
    """A log copied from another machine (another installation key): a non-sensitive literal
    is still found by the value stored in clear; a sensitive one, stored only as a hash under
    the other key, is not (nor is it anywhere in clear)."""
    def opened(key):
        return {"sqlite": lambda: SQLiteAuditLog(tmp_path / "audit.db", key=key),
                "jsonl": lambda: JSONLAuditLog(tmp_path / "audit.jsonl", key=key)}[kind]()

    record = make_record(literals=[outcome(INVOICE), outcome(SECRET, sensitive=True)])
    opened(KEY).write(record)
    other = opened(b"another-installation-key")
    (summary, lit), = other.find_literal(INVOICE)
    assert summary.id == record.id and lit.value == INVOICE
    assert other.find_literal(SECRET) == []
    assert [lit.value for _, lit in opened(KEY).find_literal(SECRET)] == [None]


def test_next_compaction_number(log):
    assert log.next_compaction_number("conv-1") == 1
    log.write(make_record(compaction=1))
    log.write(make_record(compaction=2))
    log.write(make_record(conversation_id="conv-2", compaction=7))
    assert log.next_compaction_number("conv-1") == 3
    assert log.next_compaction_number("conv-2") == 8


def test_get_unknown_or_ambiguous_id(log):
    log.write(make_record(id="ab" + "0" * 30))
    log.write(make_record(id="ab" + "1" * 30))
    with pytest.raises(AuditError, match="several records"):
        log.get("ab")
    with pytest.raises(AuditError, match="no record with id 'ff'"):
        log.get("ff")


def test_get_matches_the_start_of_an_id_only(log):
    record = make_record(id="ab" + "0" * 30)
    log.write(record)
    assert log.get("ab0") == record
    for piece in ("b0", "0" * 30, "ab1"):
        with pytest.raises(AuditError, match="no record with id"):
            log.get(piece)


def test_sensitive_literal_found_by_hash_never_stored_in_clear(log, tmp_path, request):
    careless = Attempt(number=1, summarizer="anthropic", duration_ms=1.0,
                       # a caller that forgot to hash the secret in the verdict lists
                       verdict=VerdictSummary(present=0, missing=1, mutated=0,
                                              missing_values=[SECRET]))
    record = make_record(literals=[outcome(SECRET, "reinjected", sensitive=True, role="tool"),
                                   outcome(INVOICE)], attempts=[careless])
    log.write(record)

    (summary, lit), = log.find_literal(SECRET)
    assert summary.id == record.id
    assert lit.value is None and lit.sensitive and lit.value_hash == literal_hash(SECRET, KEY)
    stored = log.get(record.id)
    assert stored.attempts[0].verdict.missing_values == ["hmac:" + literal_hash(SECRET, KEY)]
    assert SECRET not in stored.model_dump_json()
    on_disk = [tmp_path]  # the db, its WAL, the JSONL file, the server's files: every byte
    if "postgres_server" in request.fixturenames:
        on_disk.append(Path(request.getfixturevalue("postgres_server")[1]))
    for path in (p for folder in on_disk for p in folder.rglob("*")):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path.name


# --------------------------------------------------------------------------- models


def test_sensitive_value_cannot_be_stored_in_clear():
    with pytest.raises(ValidationError, match="value must be None"):
        LiteralOutcome(value=SECRET, value_hash=literal_hash(SECRET, KEY), rule="r", role="user",
                       turn=0, status="reinjected", sensitive=True)
    lit = outcome(SECRET, "mutated_unrepaired", sensitive=True, detail=f"near miss of {SECRET}")
    assert lit.value is None and SECRET not in lit.detail


def test_verdict_summary_hashes_sensitive_values():
    verdict = VerdictSummary.of(3, [SECRET, "ORD-1"], [INVOICE], key=KEY, sensitive=[SECRET])
    assert (verdict.present, verdict.missing, verdict.mutated) == (3, 2, 1)
    assert verdict.missing_values == ["hmac:" + literal_hash(SECRET, KEY), "ORD-1"]


def test_attempt_usage_keeps_flattened_token_counts():
    usage = {"input_tokens": 10, "service_tier": "standard",
             "cache_creation": {"ephemeral_5m_input_tokens": 4}}
    attempt = Attempt(number=1, summarizer="anthropic", duration_ms=0, usage=usage)
    assert attempt.usage == {"input_tokens": 10, "cache_creation.ephemeral_5m_input_tokens": 4}


def test_record_schema_is_closed_and_times_are_utc():
    schema = AuditRecord.model_json_schema()
    assert schema["additionalProperties"] is False
    assert {"conversation_id", "span", "outcome", "policy"} <= set(schema["required"])
    with pytest.raises(ValidationError, match="extra"):
        make_record(surprise=1)
    with pytest.raises(ValidationError, match="timezone-aware"):
        make_record(created_at=datetime(2026, 1, 1))
    local = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert make_record(created_at=local).created_at == datetime(2026, 1, 1, 10, tzinfo=timezone.utc)
    with pytest.raises(ValidationError, match="first <= last"):
        make_record(span=(5, 2))


# --------------------------------------------------------------------------- key


def test_installation_key_created_private_and_stable(tmp_path):
    key = installation_key()
    path = tmp_path / "state" / "key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key.decode())) == 32
    assert installation_key() == key
    assert literal_hash(INVOICE, key) != literal_hash(INVOICE, KEY)


def test_key_env_var_overrides_file(monkeypatch, tmp_path):
    monkeypatch.setenv(audit.KEY_ENV, "shared-team-key")
    assert installation_key() == b"shared-team-key"
    assert not (tmp_path / "state" / "key").exists()


def test_default_log_hashes_with_installation_key(monkeypatch, tmp_path):
    monkeypatch.setenv(audit.DB_ENV, str(tmp_path / "env.db"))
    log = SQLiteAuditLog()
    key = installation_key()
    log.write(make_record(literals=[LiteralOutcome.of(SECRET, key=key, sensitive=True, rule="r",
                                                      role="tool", turn=1, status="reinjected")]))
    assert len(log.find_literal(SECRET)) == 1


# --------------------------------------------------------------------------- open_audit_log


def test_open_audit_log_picks_the_sink(monkeypatch, tmp_path):
    default = open_audit_log(None)
    assert isinstance(default, SQLiteAuditLog) and default.path == tmp_path / "state" / "audit.db"
    monkeypatch.setenv(audit.DB_ENV, str(tmp_path / "from-env.db"))
    assert open_audit_log(None).path == tmp_path / "from-env.db"
    assert isinstance(open_audit_log(tmp_path / "a.jsonl"), JSONLAuditLog)
    assert isinstance(open_audit_log(str(tmp_path / "a.sqlite")), SQLiteAuditLog)
    assert isinstance(open_audit_log(":memory:"), MemoryAuditLog)
    # the env var names a log as --audit-db does: a .jsonl path is a JSON-lines log
    monkeypatch.setenv(audit.DB_ENV, str(tmp_path / "from-env.jsonl"))
    assert isinstance(open_audit_log(None), JSONLAuditLog)


# --------------------------------------------------------------------------- SQLite storage


def test_migrations_idempotent_on_reopen(tmp_path):
    path = tmp_path / "audit.db"
    record = make_record()
    SQLiteAuditLog(path, key=KEY).write(record)
    reopened = SQLiteAuditLog(path, key=KEY)
    assert reopened.get(record.id) == record
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
        assert names == [name for name, _ in audit.migrations.MIGRATIONS]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_log_written_before_the_mixed_script_column_is_upgraded_in_place(tmp_path):
    path = tmp_path / "audit.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for statement in dict(audit.migrations.migrations("sqlite"))["m001_initial"]:
            conn.execute(statement)
        conn.execute("INSERT INTO _migrations VALUES ('m001_initial', 'x')")
    log = SQLiteAuditLog(path, key=KEY)
    record = make_record()
    log.write(record)
    assert log.get(record.id) == record
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM literals WHERE mixed_script = 0").fetchone()[0]


def test_database_from_newer_version_refused(tmp_path):
    path = tmp_path / "audit.db"
    SQLiteAuditLog(path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('m999_future', 'x')")
    with pytest.raises(AuditError, match="newer literal-firewall") as err:
        SQLiteAuditLog(path)
    message = str(err.value)
    # where, what it holds, and what this version knows: enough to pick the version to install
    assert str(path) in message and "m999_future" in message
    assert firewall.__version__ in message and MIGRATIONS[-1][0] in message


def test_a_deferred_log_repr_never_shows_the_database_password():
    url = "postgresql://fw:Hunter2-pass@db.internal:5432/audit"
    deferred = audit.DeferredAuditLog(url, AuditError(f"audit log {url}: connection refused"))
    shown = repr(deferred)
    assert "Hunter2-pass" not in shown and "Hunter2" not in shown
    assert "postgresql://fw:***@db.internal:5432/audit" in shown and "connection refused" in shown
    path = audit.DeferredAuditLog(Path("/tmp/x/audit.db"), AuditError("corrupt"))
    assert repr(path) == "DeferredAuditLog('/tmp/x/audit.db', not open: corrupt)"


def test_literal_rows_are_queryable(tmp_path):
    path = tmp_path / "audit.db"
    record = make_record(literals=[outcome(INVOICE), outcome(SECRET, "evicted", sensitive=True)])
    SQLiteAuditLog(path, key=KEY).write(record)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT value, value_hash, status, in_summary, sensitive FROM literals "
                            "ORDER BY position").fetchall()
        attempts = conn.execute("SELECT number, missing, usage FROM attempts").fetchall()
    assert rows == [(INVOICE, literal_hash(INVOICE, KEY), "in_summary", 1, 0),
                    (None, literal_hash(SECRET, KEY), "evicted", 0, 1)]
    assert attempts == [(1, 1, '{"input_tokens": 900, "output_tokens": 150}')]


def test_literals_are_stored_once_and_older_records_still_read(tmp_path):
    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY)
    new, old = make_record(), make_record(compaction=2)
    log.write(new)
    log.write(old)
    with sqlite3.connect(path) as conn:  # the rows hold the literals, the JSON does not
        assert "literals" not in json.loads(conn.execute(
            "SELECT json FROM records WHERE id = ?", (new.id,)).fetchone()[0])
        # a record written before: its literals were in its JSON as well as in its rows
        conn.execute("UPDATE records SET json = ? WHERE id = ?",
                     (old.model_dump_json(), old.id))
        conn.execute("DELETE FROM literals WHERE record_id = ?", (old.id,))
    assert log.get(new.id) == new and log.get(old.id) == old
    assert list(log.export()) == [new, old]


def test_corrupt_database_file(tmp_path):
    path = tmp_path / "audit.db"
    path.write_bytes(b"definitely not sqlite\n" * 200)
    with pytest.raises(AuditError, match="corrupt or not a literal-firewall audit database") as err:
        SQLiteAuditLog(path)
    assert str(path) in str(err.value)


def test_unwritable_location(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    path = blocker / "audit.db"  # its "folder" is a regular file
    with pytest.raises(AuditError) as err:
        SQLiteAuditLog(path)
    assert str(path) in str(err.value)


def test_locked_beyond_busy_timeout(tmp_path):
    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY, busy_timeout=0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(AuditError, match="locked for more than 0.05 s") as err:
            log.write(make_record())
        assert str(path) in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    log.write(make_record())  # the lock is gone, so is the error
    assert len(log.list()) == 1


@pytest.mark.parametrize("message, expected", [
    ("database or disk is full", "the disk is full"),
    ("attempt to write a readonly database", "read-only"),
    ("unable to open database file", "cannot be opened"),
])
def test_storage_errors_say_what_to_do(tmp_path, message, expected):
    log = SQLiteAuditLog(tmp_path / "audit.db")
    error = log._error(sqlite3.OperationalError(message), "writing a record")
    assert isinstance(error, AuditError)
    assert str(tmp_path / "audit.db") in str(error) and expected in str(error)


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    log = SQLiteAuditLog(tmp_path / "audit.db", key=KEY)

    def boom(conn, record):
        raise RuntimeError("summarizer blew up mid-write")

    monkeypatch.setattr(audit.sqlite, "_insert_attempts", boom)
    with pytest.raises(RuntimeError):
        log.write(make_record())
    assert _row_counts(tmp_path / "audit.db") == (0, 0, 0)


def _row_counts(spec: str | Path) -> tuple[int, int, int]:
    """Rows in each table, read with the database's own client (not through the log)."""
    tables = ("records", "literals", "attempts")
    if str(spec).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(spec)) as conn:
            return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
    with sqlite3.connect(spec) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)


# --------------------------------------------------------------------------- multiple processes
# Child targets live at module level so that spawn can import them.


def _write_many(spec: str, worker: int, count: int) -> None:
    log = open_log(spec)
    for n in range(1, count + 1):
        log.write(make_record(conversation_id=f"worker-{worker}", compaction=n,
                              literals=[outcome(f"INV-{worker}-{n}"), outcome(f"ORD-{worker}-{n}"),
                                        outcome(SECRET, "reinjected", sensitive=True)]))
        # one conversation every worker compacts at once: each picks the next number it
        # sees, as the guard does, and several pick the same one
        log.write(make_record(conversation_id="shared", literals=[outcome(f"INV-{worker}-{n}")],
                              compaction=log.next_compaction_number("shared")))


def _die_mid_write(spec: str, inside: multiprocessing.synchronize.Event) -> None:
    # A stream of records: at the third, its row and literal rows are sent and the writer is
    # killed (-9) before COMMIT.
    module = audit.sqlite
    if spec.startswith("postgresql://"):
        from firewall.audit import postgres as module
    insert_attempts = module._insert_attempts

    def stall(conn, record):
        if record.compaction < 4:
            return insert_attempts(conn, record)
        inside.set()
        time.sleep(120)

    module._insert_attempts = stall
    log = open_log(spec)
    for number in (2, 3, 4):
        log.write(make_record(compaction=number))


def test_concurrent_writers(shared_log):
    open_log(shared_log)  # migrate once, so the race is on writes, not on m001
    workers = [MP.Process(target=_write_many, args=(shared_log, w, 50)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]

    log = open_log(shared_log)
    records = list(log.export())
    assert len(records) == 400
    assert _row_counts(shared_log) == (400, 800, 400)  # every record is whole
    for w in range(4):
        assert log.next_compaction_number(f"worker-{w}") == 51
    # unique and contiguous where the writers raced for numbers
    assert sorted(r.compaction for r in records if r.conversation_id == "shared") == \
        list(range(1, 201))
    assert len(log.find_literal(SECRET)) == 200


def test_process_killed_mid_write_leaves_no_half_record(shared_log):
    log = open_log(shared_log)
    kept = make_record()
    log.write(kept)

    inside = MP.Event()
    child = MP.Process(target=_die_mid_write, args=(shared_log, inside))
    child.start()
    assert inside.wait(120), "the writer never reached its transaction"
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL

    assert [r.compaction for r in log.export()] == [1, 2, 3]  # the third record: no trace
    assert _row_counts(shared_log) == (3, 6, 3)
    if not shared_log.startswith("postgresql://"):
        with sqlite3.connect(shared_log) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the dead writer's lock did not outlive it, nor did the number it had claimed
    log.write(make_record(compaction=log.next_compaction_number("conv-1")))
    assert [r.compaction for r in log.export()] == [1, 2, 3, 4]
    assert log.next_compaction_number("conv-1") == 5


# --------------------------------------------------------------------------- the idle connection


def test_idle_connection_keeps_the_wal_between_writes_and_every_record_lands(tmp_path):
    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY)
    records = [make_record(compaction=n) for n in range(1, 31)]
    for record in records:
        log.write(record)
        # the per-call connection was not the last one: its close did not delete the WAL
        assert (tmp_path / "audit.db-wal").exists()
    assert _row_counts(path) == (30, 60, 30)  # a fresh reader sees every record, whole
    assert [r.id for r in log.export()] == [r.id for r in records]
    assert log.next_compaction_number("conv-1") == 31
    gc.collect()  # _row_counts' connections are closed by the cycle collector (3.11's sqlite3)
    log.close()
    assert not (tmp_path / "audit.db-wal").exists()  # the last close checkpointed it
    assert _row_counts(path) == (30, 60, 30)
    log.write(make_record(compaction=31))  # still usable after close()
    assert _row_counts(path) == (31, 62, 31)


def test_a_dropped_log_closes_its_idle_connection_at_once(tmp_path):
    log = SQLiteAuditLog(tmp_path / "audit.db", key=KEY)
    log.write(make_record())
    assert (tmp_path / "audit.db-wal").exists()
    del log  # no gc.collect(): reference counting alone
    assert not (tmp_path / "audit.db-wal").exists()
    assert _row_counts(tmp_path / "audit.db") == (1, 2, 1)


def test_a_log_still_pickles_and_copies(tmp_path):
    import copy
    import pickle

    log = SQLiteAuditLog(tmp_path / "audit.db", key=KEY)
    log.write(make_record(compaction=1))
    for other in (pickle.loads(pickle.dumps(log)), copy.deepcopy(log), copy.copy(log)):
        assert other.path == log.path and other.key == KEY
        other.write(make_record(compaction=other.next_compaction_number("conv-1")))
    assert log._idle is not None  # the original's connection is its own
    assert sorted(r.compaction for r in log.export()) == [1, 2, 3, 4]


def test_per_call_connection_still_sees_a_replaced_file(tmp_path):
    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY)
    log.write(make_record())
    for leftover in tmp_path.glob("audit.db-*"):
        leftover.unlink()
    path.write_bytes(b"not a database" * 500)  # the idle connection still has the old file
    with pytest.raises(AuditError, match="corrupt or not a literal-firewall audit database"):
        log.write(make_record(compaction=2))


def test_threads_share_one_log(tmp_path):
    import threading

    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY)
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for n in range(1, 11):
                log.write(make_record(conversation_id=f"thread-{w}", compaction=n,
                                      literals=[outcome(f"INV-{w}-{n}")]))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert _row_counts(path) == (60, 60, 60)
    for w in range(6):
        assert log.next_compaction_number(f"thread-{w}") == 11


def test_fork_drops_the_idle_connection_first(tmp_path):
    path = tmp_path / "audit.db"
    log = SQLiteAuditLog(path, key=KEY)
    log.write(make_record(compaction=1))
    assert log._idle is not None
    fork = multiprocessing.get_context("fork")

    def child_writes() -> None:  # through the very object the parent holds (inherited by fork)
        if log._idle is not None:  # the parent's connection must not cross the fork
            os._exit(3)
        log.write(make_record(compaction=2))

    child = fork.Process(target=child_writes)
    child.start()
    child.join(30)
    assert child.exitcode == 0
    log.write(make_record(compaction=3))  # the parent reopens its idle connection
    assert log._idle is not None
    assert sorted(r.compaction for r in SQLiteAuditLog(path, key=KEY).export()) == [1, 2, 3]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --------------------------------------------------------------------------- JSONL storage


def test_jsonl_one_line_per_record(tmp_path):
    path = tmp_path / "logs" / "audit.jsonl"
    log = JSONLAuditLog(path, key=KEY)
    records = [make_record(compaction=n) for n in (1, 2)]
    for record in records:
        log.write(record)
    lines = path.read_text().splitlines()
    assert [AuditRecord.model_validate_json(line) for line in lines] == records


def test_jsonl_torn_last_line_is_skipped_and_not_glued(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = JSONLAuditLog(path, key=KEY)
    first, second = make_record(compaction=1), make_record(compaction=2)
    log.write(first)
    with open(path, "ab") as f:  # a writer that died halfway through its line
        f.write(make_record(compaction=9).model_dump_json().encode()[:70])
    assert [r.id for r in log.export()] == [first.id]
    log.write(second)
    assert [r.id for r in log.export()] == [first.id, second.id]


def test_jsonl_corrupt_line_names_file_and_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = JSONLAuditLog(path, key=KEY)
    log.write(make_record())
    with open(path, "a") as f:
        f.write("garbage that is not a record\n")
    log.write(make_record(compaction=2))
    with pytest.raises(AuditError, match=f"{path}:2: not an audit record"):
        list(log.export())


def test_jsonl_missing_file_is_an_empty_log(tmp_path):
    log = JSONLAuditLog(tmp_path / "none.jsonl", key=KEY)
    assert log.list() == [] and log.next_compaction_number("c") == 1


def test_many_outcomes_are_the_outcomes_of_one_at_a_time():
    arguments = [
        dict(value=INVOICE, rule="billing/invoice", role="user", turn=3, status="in_summary",
             in_summary=True, in_ledger=True),
        dict(value=SECRET, sensitive=True, rule="core/api-key", role="tool", turn=0,
             status="mutated_unrepaired", in_ledger=True, detail=f"summary wrote {SECRET}x"),
        dict(value="ORD-7731", rule="shop/order", role="assistant", turn=0, status="evicted",
             detail="over budget"),
    ]
    given = [dict(a) for a in arguments]
    many = LiteralOutcome.many(arguments, key=KEY)
    assert arguments == given  # the caller's dicts are left as they were
    one_at_a_time = [LiteralOutcome.of(key=KEY, **dict(a)) for a in arguments]
    assert many == one_at_a_time
    assert [o.model_dump_json() for o in many] == [o.model_dump_json() for o in one_at_a_time]
    assert many[1].value is None and SECRET not in many[1].model_dump_json()
    for bad in (dict(arguments[0], role="robot"), dict(arguments[0], turn=-1),
                dict(arguments[0], status="lost")):
        with pytest.raises(ValidationError):
            LiteralOutcome.of(key=KEY, **dict(bad))
        with pytest.raises(ValidationError):
            LiteralOutcome.many([arguments[2], bad], key=KEY)
