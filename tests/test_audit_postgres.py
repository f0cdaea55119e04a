"""What only the PostgreSQL audit log does: the fleet key, its schema beside SQLite's, the URL
factory, `audit copy`, and its errors. The queries every log answers, concurrent writers and
a writer killed mid-record are in test_audit.py, run against this log too.

Every test runs against a real server the session starts (see conftest.postgres_server); where
none can be started they are skipped with the way to run them.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from conftest import POSTGRES_HOWTO

pytest.importorskip("psycopg", reason=f"psycopg is not installed: {POSTGRES_HOWTO}")

import firewall
from firewall import audit
from firewall.audit import (DeferredAuditLog, SQLiteAuditLog, literal_hash, open_audit_log,
                            open_audit_sink)
from firewall.audit.postgres import PostgresAuditLog
from firewall.audit.migrations import MIGRATIONS
from firewall.cli import main
from firewall.errors import AuditError
from firewall.compaction.records import write_record
from test_audit import INVOICE, KEY, SECRET, make_record, outcome

FLEET_KEY = "fleet-key-0123456789abcdef"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setattr(audit.keys, "state_dir", lambda: tmp_path / "state")
    for name in (audit.DB_ENV, audit.KEY_ENV, audit.KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)


def _rows(url: str, query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


# --------------------------------------------------------------------------- choosing the log


def test_import_firewall_does_not_import_psycopg():
    code = ("import sys, firewall, firewall.audit; firewall.open_audit_log; "
            "print('psycopg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_url_in_the_option_or_the_env_var_opens_the_postgres_log(postgres_url, monkeypatch):
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)
    assert isinstance(open_audit_log(postgres_url), PostgresAuditLog)
    monkeypatch.setenv(audit.DB_ENV, postgres_url)
    log = open_audit_log(None)
    assert isinstance(log, PostgresAuditLog) and log.key == FLEET_KEY.encode()


def test_without_psycopg_a_url_says_which_extra_to_install():
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from firewall.audit import open_audit_log\n"
            "try:\n    open_audit_log('postgresql://fw@/db')\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("AuditError") and "literal-firewall[postgres]" in out.stdout


# --------------------------------------------------------------------------- the fleet key


def test_without_a_fleet_key_the_log_says_how_to_give_one(postgres_url):
    with pytest.raises(AuditError, match="FIREWALL_AUDIT_KEY.*FIREWALL_AUDIT_KEY_FILE"):
        open_audit_log(postgres_url)


def test_the_key_file_gives_the_same_hashes_as_the_env_var(postgres_url, monkeypatch, tmp_path):
    key_file = tmp_path / "fleet.key"
    key_file.write_text(FLEET_KEY + "\n")
    monkeypatch.setenv(audit.KEY_FILE_ENV, str(key_file))
    writer = open_audit_log(postgres_url)
    record = make_record(literals=[audit.LiteralOutcome.of(  # as the guard hashes: log's key
        SECRET, key=writer.key, sensitive=True, rule="r", role="tool", turn=1,
        status="reinjected")])
    writer.write(record)
    monkeypatch.delenv(audit.KEY_FILE_ENV)
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)
    assert [s.id for s, _ in open_audit_log(postgres_url).find_literal(SECRET)] == [record.id]
    monkeypatch.delenv(audit.KEY_ENV)
    monkeypatch.setenv(audit.KEY_FILE_ENV, str(tmp_path / "absent.key"))
    with pytest.raises(AuditError, match="absent.key.*cannot be read"):
        open_audit_log(postgres_url)


def test_the_key_is_never_in_the_database_and_another_key_is_refused(postgres_url):
    key = b"the-fleet-key-nobody-stores"
    PostgresAuditLog(postgres_url, key=key).write(
        make_record(literals=[outcome(SECRET, "reinjected", sensitive=True)]))
    tables = [r[0] for r in _rows(postgres_url, "SELECT table_name FROM information_schema.tables"
                                                " WHERE table_schema = current_schema()")]
    assert {"records", "literals", "attempts", "key_check"} <= set(tables)
    dump = " ".join(str(row) for table in tables
                    for row in _rows(postgres_url, f"SELECT t::text FROM {table} t"))
    assert key.decode() not in dump and SECRET not in dump
    with pytest.raises(AuditError, match="hashed under another key") as err:
        PostgresAuditLog(postgres_url, key=b"a-laptop-s-own-key")
    assert "FIREWALL_AUDIT_KEY" in str(err.value)


def test_a_log_not_open_yet_still_hashes_with_the_fleet_key(monkeypatch, tmp_path):
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)
    down = f"postgresql://fw@/postgres?host={tmp_path}/no-server&connect_timeout=1"
    sink = open_audit_sink(down)
    assert isinstance(sink, DeferredAuditLog)
    assert sink.key == FLEET_KEY.encode()  # what the guard hashes this compaction's secrets with


# --------------------------------------------------------------------------- schema


def test_same_tables_and_columns_as_sqlite_and_migrations_recorded(postgres_url, tmp_path):
    PostgresAuditLog(postgres_url, key=KEY)
    PostgresAuditLog(postgres_url, key=KEY)  # reopening applies nothing twice
    names = [name for name, _ in MIGRATIONS]
    assert [r[0] for r in _rows(postgres_url, "SELECT name FROM _migrations ORDER BY name")] \
        == names
    sqlite_path = tmp_path / "audit.db"
    SQLiteAuditLog(sqlite_path, key=KEY)
    with sqlite3.connect(sqlite_path) as conn:
        for table in ("records", "literals", "attempts"):
            in_sqlite = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            in_postgres = [r[0] for r in _rows(
                postgres_url, "SELECT column_name FROM information_schema.columns WHERE "
                f"table_name = '{table}' AND table_schema = current_schema() "
                "ORDER BY ordinal_position")]
            assert in_postgres == in_sqlite, table


def test_a_database_from_a_newer_version_is_refused(postgres_url):
    import psycopg

    PostgresAuditLog(postgres_url, key=KEY)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('m999_future', now())")
    with pytest.raises(AuditError, match="newer literal-firewall.*m999_future") as err:
        PostgresAuditLog(postgres_url, key=KEY)
    assert firewall.__version__ in str(err.value) and MIGRATIONS[-1][0] in str(err.value)
    assert "FIREWALL_AUDIT_DB" in str(err.value)


# --------------------------------------------------------------------------- what text can hold


def test_nul_and_lone_surrogates_are_written_and_still_found(postgres_url):
    log = PostgresAuditLog(postgres_url, key=KEY)
    nul, surrogate = "ORD\x00-1", "INV-\ud800-2"
    record = make_record(literals=[outcome(nul), outcome(surrogate)])
    assert write_record(log, record) is None
    assert [s.id for s, _ in log.find_literal(nul)] == [record.id]
    assert [s.id for s, _ in log.find_literal(surrogate)] == [record.id]
    assert [lit.value for lit in log.get(record.id).literals] == ["ORD\\u0000-1", "INV-\\ud800-2"]


# --------------------------------------------------------------------------- errors


def test_an_unreachable_server_is_named_without_its_password(tmp_path):
    url = f"postgresql://fw:hunter2@/postgres?host={tmp_path}/none&connect_timeout=1"
    with pytest.raises(AuditError, match="cannot reach the server") as err:
        PostgresAuditLog(url, key=KEY)
    assert "hunter2" not in str(err.value) and "fw:***@" in str(err.value)


# A password written as meant, reserved characters and all: libpq may fail to decode it (and
# quote it), or read it as another part of the URL (and name that part in its message).
PASSWORD_SHAPES = {
    "stray-percent": ("postgresql://fw:Zq9%zzXw7@/db?host={dir}", "Zq9%zzXw7"),
    "raw-slash": ("postgresql://fw:Zq9/Xw7@/db?host={dir}", "Zq9/Xw7"),  # port "Zq9"
    "raw-at": ("postgresql://fw:Zq9@Xw7@/db?host={dir}", "Zq9@Xw7"),
    "slash-and-at": ("postgres://fw:Zq9/Xw7@Kp5@localhost:1/db", "Zq9/Xw7@Kp5"),
    "query-stray-percent": ("postgresql://fw@/db?host={dir}&password=Zq9%zzXw7", "Zq9%zzXw7"),
    "query-raw-ampersand": ("postgresql://fw@/db?host={dir}&password=Zq9&Xw7", "Zq9&Xw7"),
    "quoted-whole-url": ("postgresql://fw:Zq9Xw7@[::1]x/db", "Zq9Xw7"),
    "encoded": ("postgresql://fw:Zq9%2FXw7@/db?host={dir}&connect_timeout=1", "Zq9/Xw7"),
}


@pytest.mark.parametrize("shape", PASSWORD_SHAPES)
def test_no_error_from_opening_the_log_holds_a_piece_of_its_password(tmp_path, shape):
    url, password = PASSWORD_SHAPES[shape]
    with pytest.raises(AuditError) as err:
        PostgresAuditLog(url.format(dir=tmp_path / "none"), key=KEY)
    message = str(err.value)
    pieces = {password[i:i + 3] for i in range(len(password) - 2)}
    assert not [piece for piece in pieces if piece in message], message
    assert "***" in message


def test_a_connection_the_server_dropped_is_replaced_without_losing_the_record(postgres_url):
    log = PostgresAuditLog(postgres_url, key=KEY)
    log.write(make_record(compaction=1))
    # what a server restart, a failover or an idle timeout does to the connection a worker keeps
    (terminated,), = _rows(postgres_url, "SELECT count(pg_terminate_backend(pid, 10000)) FROM "
                                         "pg_stat_activity WHERE application_name = "
                                         "'literal-firewall' AND pid <> pg_backend_pid()")
    assert terminated >= 1
    log.write(make_record(compaction=2))
    assert [r.compaction for r in log.export()] == [1, 2]


def test_a_malformed_url_is_named_as_such(tmp_path):
    with pytest.raises(AuditError, match="not a valid PostgreSQL URL") as err:
        PostgresAuditLog("postgresql://fw:hunter2@/db?hots=x", key=KEY)
    assert "hunter2" not in str(err.value)


def test_a_duplicate_record_id_is_named(postgres_url):
    log = PostgresAuditLog(postgres_url, key=KEY)
    record = make_record()
    log.write(record)
    with pytest.raises(AuditError, match="already in the log"):
        log.write(make_record(id=record.id, compaction=2))
    assert len(log.list()) == 1


# --------------------------------------------------------------------------- audit copy


def _sqlite_log(tmp_path, key: bytes) -> tuple[str, list]:
    """A SQLite log of three records hashed under ``key`` (the first with a secret)."""
    def lit(value: str, **fields):
        return audit.LiteralOutcome.of(value, key=key, rule="r", role="tool", turn=1,
                                       status="reinjected", **fields)

    path = tmp_path / "old.db"
    log = SQLiteAuditLog(path, key=key)
    records = [make_record(compaction=1, literals=[lit(INVOICE), lit(SECRET, sensitive=True)]),
               make_record(compaction=2, literals=[lit("ORD-7731")]),
               make_record(conversation_id="conv-2", literals=[lit("ORD-1")])]
    for record in records:
        log.write(record)
    return str(path), records


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_copy_moves_every_record_once_and_renumbers_taken_numbers(postgres_url, tmp_path,
                                                                  capsys, monkeypatch):
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)
    src, records = _sqlite_log(tmp_path, FLEET_KEY.encode())
    fleet = open_audit_log(postgres_url)
    already = make_record(conversation_id="conv-2", compaction=1)  # a worker got there first
    fleet.write(already)

    code, out, _ = run(capsys, "audit", "copy", src, postgres_url)
    assert code == 0
    assert out.strip() == "audit copy: copied 3 record(s); 0 already there; 1 renumbered"
    code, out, _ = run(capsys, "audit", "copy", src, postgres_url)  # again: nothing twice
    assert out.strip() == "audit copy: copied 0 record(s); 3 already there; 0 renumbered"

    copied = {r.id: r for r in fleet.export()}
    assert len(copied) == 4
    for record in records[:2]:
        assert copied[record.id] == record
    assert copied[records[2].id].compaction == 2  # conv-2's 1 was taken
    (hit, lit), = fleet.find_literal(SECRET)  # the carried hash is found under the fleet key
    assert hit.id == records[0].id and lit.value is None
    code, out, _ = run(capsys, "audit", "literal", SECRET, "--audit-db", postgres_url)
    assert code == 0 and records[0].id[:12] in out


@pytest.mark.parametrize("batch", [4, 100])  # the repeat in a later batch, in the same one
def test_copy_from_a_jsonl_log_that_repeats_a_record_writes_it_once(postgres_url, tmp_path,
                                                                    monkeypatch, batch):
    import firewall.audit.postgres as audit_pg

    source = audit.JSONLAuditLog(tmp_path / "old.jsonl", key=KEY)
    records = [make_record(compaction=n) for n in range(1, 6)]
    for record in [*records, records[1]]:  # a line appended twice
        source.write(record)
    fleet = PostgresAuditLog(postgres_url, key=KEY)
    monkeypatch.setattr(audit_pg, "_COPY_BATCH", batch)
    assert str(fleet.copy_from(source)) == "copied 5 record(s); 1 already there; 0 renumbered"
    assert [r.id for r in fleet.export()] == [r.id for r in records]


def test_copy_refuses_hashes_under_another_key_unless_rekeyed(postgres_url, tmp_path, capsys,
                                                              monkeypatch):
    laptop = b"the-laptop-installation-key"
    src, records = _sqlite_log(tmp_path, laptop)
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)

    code, _, err = run(capsys, "audit", "copy", src, postgres_url)
    assert code != 0 and "3 record(s)" in err and "another key" in err and "--rekey" in err
    fleet = open_audit_log(postgres_url)
    assert fleet.list() == []  # refused before anything was written

    code, out, _ = run(capsys, "audit", "copy", src, postgres_url, "--rekey")
    assert code == 0 and "1 sensitive literal(s) keep the source key's hashes" in out
    (hit, lit), = fleet.find_literal(INVOICE)[:1]
    assert lit.value_hash == literal_hash(INVOICE, FLEET_KEY.encode())  # hashed again
    assert fleet.find_literal(SECRET) == []  # its hash is the laptop's: found only with it
    assert [s.id for s, _ in PostgresAuditLog.find_literal(
        _with_key(fleet, laptop), SECRET)] == [records[0].id]


def _with_key(log: PostgresAuditLog, key: bytes) -> PostgresAuditLog:
    import copy

    other = copy.copy(log)
    other.key = key
    return other


def test_copy_needs_a_postgres_destination_and_an_existing_source(tmp_path, capsys,
                                                                  postgres_url, monkeypatch):
    monkeypatch.setenv(audit.KEY_ENV, FLEET_KEY)
    code, _, err = run(capsys, "audit", "copy", str(tmp_path / "a.db"), str(tmp_path / "b.db"))
    assert code == 2 and "not a postgresql:// URL" in err
    code, _, err = run(capsys, "audit", "copy", str(tmp_path / "nothing.db"), postgres_url)
    assert code == 2 and "no audit log at" in err
    assert not (tmp_path / "nothing.db").exists()
