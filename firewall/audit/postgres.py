"""The PostgreSQL audit log: one log for a fleet of agent workers on many machines.

``open_audit_log("postgresql://...")`` opens it (``--audit-db`` or ``FIREWALL_AUDIT_DB``). It
holds the same tables as the SQLite log (``audit_schema``), answers the same queries, and:

- many processes write at once: each record (its row, literal rows and attempt rows) is one
  transaction, so a writer killed mid-record leaves nothing of it;
- compaction numbers are unique per conversation: the number is claimed inside that
  transaction from a per-conversation counter row (``INSERT ... ON CONFLICT DO UPDATE ...
  RETURNING``), whose row lock orders only the writers of one conversation; a record whose
  number was taken meanwhile gets the next one, as in SQLite;
- secrets are hashed under the fleet's key (``shared_key``: ``FIREWALL_AUDIT_KEY`` or
  ``FIREWALL_AUDIT_KEY_FILE``), never stored in the database; the log keeps a fingerprint of it
  and refuses a process configured with another key.

Needs psycopg 3 (the ``postgres`` extra); ``import firewall`` never imports it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from .files import one_record
from .crafted import NOT_A_LOG, checked_hits
from .keys import (DB_ENV, KEY_ENV, KEY_FILE_ENV, escape_surrogates, literal_hash, shared_key,
                   storage_error)
from .records import Attempt, AuditLog, AuditRecord, LiteralOutcome, RecordSummary, redacted_record
from .migrations import LITERAL_COLUMNS, MIGRATIONS, SUMMARY_COLUMNS, migrations, newer_schema
from ..errors import AuditError
from .urls import redacted_url, url_passwords, without_passwords

# any constant: serializes processes migrating one database at once
_MIGRATION_LOCK = 0x6C66_6175_6469_74  # "lfaudit"
_KEY_CHECK_TEXT = "literal-firewall audit key check"
_PAGE = 500  # records read per query by export
_COPY_BATCH = 100  # records copied per transaction: one commit (one WAL sync) for many
_ARCHIVE_BATCH = 5000  # archive rows copied per transaction
T = TypeVar("T")


# Connections are closed before os.fork: a child must never use (nor, when it is collected,
# terminate) the session of its parent. A connection busy in another thread at the fork stays
# in the child untouched (_INHERITED), never closed there.
_OPEN_LOGS: weakref.WeakSet[PostgresAuditLog] = weakref.WeakSet()
_INHERITED: list[Any] = []


def _close_before_fork() -> None:
    for log in list(_OPEN_LOGS):
        log._close_if_idle()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_close_before_fork)


class PostgresAuditLog:
    """An audit log in a PostgreSQL database, shared by every writer that has its URL and key.

    One connection per process, opened on first use and again after a fork or a lost
    connection; calls from several threads take turns on it.
    """

    def __init__(self, url: str, *, key: bytes | None = None,
                 connect_timeout: float = 10.0) -> None:
        self.url = url
        self.path = redacted_url(url)  # how errors and listings name this log
        self.key = key if key is not None else shared_key()
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = 0
        self._lock = threading.Lock()
        _OPEN_LOGS.add(self)
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresAuditLog({self.path!r})"

    def __getstate__(self) -> dict[str, Any]:  # pickled for another process: no connection
        state = self.__dict__.copy()
        state.update(_conn=None, _pid=0, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())
        _OPEN_LOGS.add(self)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _close_if_idle(self) -> None:
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._pid == os.getpid():
                conn.close()
            else:
                _INHERITED.append(conn)

    # -- connections and errors

    def _run(self, action: str, body: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``body`` in one transaction on this process's connection: committed when it
        returns, rolled back (nothing of it kept) if it raises or the process dies. A kept
        connection the server has dropped meanwhile (a restart, a failover, an idle timeout)
        is replaced and ``body`` run once more: it was rolled back with the connection."""
        with self._lock:
            for retry in (True, False):
                reused = self._connected()
                try:
                    conn = self._connection()
                    with conn.transaction():
                        return body(conn)
                except psycopg.Error as exc:
                    lost = self._conn is not None and (self._conn.closed or self._conn.broken)
                    if lost:
                        self._drop()  # the next call connects again
                    if not (retry and reused and lost and
                            isinstance(exc, psycopg.OperationalError)):
                        raise self._error(exc, action) from exc
            raise AssertionError("unreachable")

    def _connected(self) -> bool:
        return self._conn is not None and self._pid == os.getpid() and not self._conn.closed

    def _connection(self) -> psycopg.Connection[Any]:
        if self._connected():
            assert self._conn is not None
            return self._conn
        self._drop()
        # defaults only: what the URL says (its own connect_timeout...) stands
        given = conninfo_to_dict(self.url)
        defaults = {k: v for k, v in (("connect_timeout", max(1, round(self.connect_timeout))),
                                      ("application_name", "literal-firewall"))
                    if k not in given}
        conn = psycopg.connect(self.url, autocommit=True, row_factory=dict_row, **defaults)
        conn.execute("SET TIME ZONE 'UTC'")  # created_at reads back as UTC, as written
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _error(self, exc: psycopg.Error, action: str) -> AuditError:
        state = getattr(exc, "sqlstate", None) or ""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        text = without_passwords(text, self.url)  # libpq and psycopg quote parts of the URL
        hint = ""
        if not state and self._password_misread():
            # read otherwise, a piece of the password may be in any part of libpq's message
            text = type(exc).__name__
            hint = ("; if the password holds '/', '@' or '%', percent-encode them (%2F, %40, "
                    "%25)")
        if isinstance(exc, psycopg.OperationalError) and not state:
            reason = (f"cannot reach the server; check the URL ({DB_ENV} or --audit-db), that "
                      f"the server runs and that it accepts this user")
        elif isinstance(exc, psycopg.ProgrammingError) and not state:
            reason = "the URL is not a valid PostgreSQL URL (postgresql://USER@HOST/DATABASE)"
        elif isinstance(exc, pg_errors.UniqueViolation) and \
                exc.diag.constraint_name == "records_id_key":
            reason = "a record with this id is already in the log"
        elif isinstance(exc, pg_errors.InsufficientPrivilege):
            reason = ("this user may not do that; grant it the rights on the log's tables "
                      "(or on its schema, to create them)")
        elif isinstance(exc, pg_errors.DiskFull | pg_errors.OutOfMemory):
            reason = "the server is out of space; free some, or point the log at another server"
        elif isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            reason = "the server is read-only (a standby?); point the log at the primary"
        elif isinstance(exc, pg_errors.InvalidCatalogName):
            reason = "no such database; create it (createdb NAME) or fix the URL"
        else:
            reason = "unexpected PostgreSQL error"
        where = f" [{state}]" if state else ""
        return AuditError(f"audit log {self.path}: {action} failed: {reason}{hint} "
                          f"({text}{where})")

    def _password_misread(self) -> bool:
        """Whether libpq reads the URL's password otherwise than it is written (a raw ``/``,
        ``@`` or stray ``%`` in it): then the host, port or database it names may be pieces of
        the password."""
        written = url_passwords(self.url)
        if not written:
            return False
        try:
            return conninfo_to_dict(self.url).get("password") not in written
        except psycopg.Error:
            return any(re.search(r"[/@]|%(?![0-9A-Fa-f]{2})", p) for p in written)

    # -- schema

    def _migrate(self) -> None:
        known = {name for name, _ in MIGRATIONS}
        fingerprint = literal_hash(_KEY_CHECK_TEXT, self.key)

        def body(conn: psycopg.Connection[Any]) -> str:
            # Held until COMMIT: processes opening a fresh database at once run m001 once.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS _migrations "
                         "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)")
            applied = {row["name"] for row in conn.execute("SELECT name FROM _migrations")}
            if applied - known:
                raise newer_schema(self.path, applied - known,
                                   f"point {DB_ENV} at another database")
            for name, statements in migrations("postgresql"):
                if name not in applied:
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO _migrations VALUES (%s, now())", (name,))
            conn.execute("INSERT INTO key_check (fingerprint) VALUES (%s) "
                         "ON CONFLICT DO NOTHING", (fingerprint,))
            (row,) = conn.execute("SELECT fingerprint FROM key_check").fetchall()
            return row["fingerprint"]

        if self._run("opening", body) != fingerprint:
            raise AuditError(
                f"audit log {self.path}: its secrets are hashed under another key than this "
                f"process's ({KEY_ENV} / {KEY_FILE_ENV}): give every writer the fleet's key, or "
                f"`audit literal` would miss what this one writes")

    # -- writing

    def write(self, record: AuditRecord) -> None:
        """Write one record in one transaction. Its compaction number is unique in its
        conversation: if another writer took it meanwhile, the record (and ``record``) gets
        the next free one."""
        (written,) = self._insert([redacted_record(record, self.key)], skip_present=False)
        assert written is not None
        record.compaction = written.compaction

    def _insert(self, records: list[AuditRecord], *,
                skip_present: bool) -> list[AuditRecord | None]:
        """Write ``records`` in one transaction: each as written (with its number), or
        ``None`` if ``skip_present`` and a record with its id is there already."""
        def body(conn: psycopg.Connection[Any]) -> list[AuditRecord | None]:
            present = {row["id"] for row in conn.execute(
                "SELECT id FROM records WHERE id = ANY(%s)",
                ([r.id for r in records],))} if skip_present else set()
            out: list[AuditRecord | None] = []
            for record in records:
                if record.id in present:
                    out.append(None)
                    continue
                number = _claim_number(conn, record.conversation_id, record.compaction)
                written = record.model_copy(update={"compaction": number}) \
                    if number != record.compaction else record
                _insert_record(conn, written)
                _insert_literals(conn, written)
                _insert_attempts(conn, written)
                present.add(record.id)  # a source may repeat a record (a JSONL log can)
                out.append(written)
            return out

        return self._run("writing a record" if len(records) == 1 else "copying records", body)

    # -- reading

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        where, params = ("", [])
        if conversation_id is not None:
            where, params = "WHERE conversation_id = %s", [conversation_id]
        def body(conn: psycopg.Connection[Any]) -> list[RecordSummary]:
            rows = conn.execute(f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM records {where} "
                                f"ORDER BY seq DESC LIMIT %s", [*params, limit]).fetchall()
            return _summaries(conn, rows)

        return self._run("listing records", body)

    def get(self, id_or_prefix: str) -> AuditRecord:
        def body(conn: psycopg.Connection[Any]) -> AuditRecord:
            rows = conn.execute("SELECT id, json FROM records WHERE left(id, %s) = %s LIMIT 2",
                                (len(id_or_prefix), id_or_prefix)).fetchall()
            return _records(conn, [one_record(self, id_or_prefix, rows)])[0]

        return self._run("reading a record", body)

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        # By hash, so sensitive literals are found without being stored; by value too, so
        # records hashed under another key are still found for non-sensitive literals.
        def body(conn: psycopg.Connection[Any]) -> tuple[list[Any], list[RecordSummary]]:
            rows = conn.execute(
                f"SELECT {', '.join('l.' + c for c in LITERAL_COLUMNS)}, "
                f"{', '.join('r.' + c for c in SUMMARY_COLUMNS)} "
                "FROM literals l JOIN records r ON r.id = l.record_id "
                "WHERE l.value_hash = %s OR l.value = %s ORDER BY r.seq, l.position",
                (literal_hash(value, self.key), _text(escape_surrogates(value)))).fetchall()
            return rows, _summaries(conn, rows)

        rows, found = self._run("searching literals", body)
        summaries = {s.id: s for s in found}
        return [(summaries[row["id"]], LiteralOutcome(**{c: row[c] for c in LITERAL_COLUMNS}))
                for row in rows]

    def export(self) -> Iterator[AuditRecord]:
        """Every record in write order, read a page at a time (no connection is held between
        pages, so a slow reader never blocks this process's writers)."""
        def page(after: int) -> Callable[[psycopg.Connection[Any]], list[Any]]:
            def body(conn: psycopg.Connection[Any]) -> list[Any]:
                rows = conn.execute("SELECT seq, id, json FROM records WHERE seq > %s "
                                    "ORDER BY seq LIMIT %s", (after, _PAGE)).fetchall()
                return list(zip(rows, _records(conn, rows)))
            return body

        after = 0
        while True:
            batch = self._run("exporting", page(after))
            yield from (record for _, record in batch)
            if len(batch) < _PAGE:
                return
            after = batch[-1][0]["seq"]

    def next_compaction_number(self, conversation_id: str) -> int:
        row = self._run("reading", lambda conn: conn.execute(
            "SELECT last_compaction FROM compaction_counters WHERE conversation_id = %s",
            (conversation_id,)).fetchone())
        return (row["last_compaction"] if row else 0) + 1

    # -- the archive (firewall.archive; its tables and queries: archive_pg)

    def write_archive(self, conversation_id: str, compaction: int, entries: list[Any],
                      limits: Any = None) -> Any:
        from . import archive_forget, archive_postgres as archive_pg
        from .archive import ArchiveLimits

        def write(conn: Any) -> Any:
            # what this compaction learnt is a secret, archived in clear before: forgotten
            archive_forget.forget_postgres(conn, conversation_id, entries)
            return archive_pg.write(conn, conversation_id, compaction, entries,
                                    limits or ArchiveLimits())

        return self._run("writing the archive", write)

    def recall(self, query: Any) -> list[Any]:
        from . import archive_postgres as archive_pg

        hits = self._run("searching the archive", lambda conn: archive_pg.recall(conn, query))
        try:  # a row longer than any a compaction writes came from another writer
            return checked_hits(hits)
        except TypeError as exc:
            raise storage_error(self.path, "searching the archive", NOT_A_LOG, exc) from exc

    def archive_count(self, conversation_id: str) -> int:
        from . import archive_postgres as archive_pg

        return self._run("reading the archive",
                         lambda conn: archive_pg.count(conn, conversation_id))

    def archived_values(self, conversation_id: str) -> list[str]:
        from . import archive_postgres as archive_pg

        return self._run("reading the archive",
                         lambda conn: archive_pg.values(conn, conversation_id))

    def archive_dropped(self, conversation_id: str) -> list[dict[str, Any]]:
        from . import archive_postgres as archive_pg

        return self._run("reading the archive",
                         lambda conn: archive_pg.dropped(conn, conversation_id))

    def export_archive(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        from . import archive_postgres as archive_pg

        return self._run("reading the archive", archive_pg.export)

    def import_archive(self, rows: list[dict[str, Any]],
                       dropped: list[dict[str, Any]] = ()) -> int:
        from . import archive_postgres as archive_pg

        return self._run("writing the archive",
                         lambda conn: archive_pg.insert(conn, rows, dropped))

    # -- copying another log in

    def copy_from(self, source: AuditLog, *, rekey: bool = False) -> CopyReport:
        """Copy every record of ``source`` (any log: SQLite, JSONL, another database) here.

        Idempotent: a record whose id is here already is skipped, so an interrupted copy is
        simply run again. A record whose compaction number is taken here gets the next free one.
        Records go in by transactions of ``_COPY_BATCH``: a batch is written whole or not at all.

        Hashes: a sensitive literal is stored only as its keyed hash, which cannot be re-keyed
        (its value is gone). So hashes are carried as they are, which is right only if the
        source was written under this log's key; that is checked on the literals whose value is
        kept (their hash must be reproduced by this key). If it was not, the copy is refused
        before anything is written, unless ``rekey``: then kept values are hashed again under
        this key and sensitive ones keep the source's hashes (counted in ``foreign_secrets``:
        ``audit literal`` here finds them only with the source's key).
        """
        report = CopyReport()
        if not rekey:
            foreign = sum(1 for r in source.export() if _hashed_elsewhere(r, self.key))
            if foreign:
                raise AuditError(
                    f"audit copy: {foreign} record(s) of {getattr(source, 'path', source)} were "
                    f"hashed under another key than {self.path}'s: their sensitive literals, "
                    f"stored only as hashes, would never be found there. Run the copy with "
                    f"{KEY_ENV} set to the source's key (a SQLite log's is its installation's "
                    f"`key` file) if it is, or will be, the fleet's key; else pass --rekey "
                    f"(kept values are hashed again; secrets stay findable only with the old key)")
        batch: list[AuditRecord] = []
        numbers: dict[tuple[str, int], int] = {}  # renumbered: the archive rows follow

        def flush() -> None:
            for record, written in zip(batch, self._insert(batch, skip_present=True)):
                report.present += written is None
                report.copied += written is not None
                report.renumbered += written is not None and \
                    written.compaction != record.compaction
                if written is not None and written.compaction != record.compaction:
                    numbers[(record.conversation_id, record.compaction)] = written.compaction
            batch.clear()

        for record in source.export():
            if rekey and _hashed_elsewhere(record, self.key):
                record, secrets = _rekeyed(record, self.key)
                report.foreign_secrets += secrets
            batch.append(record)
            if len(batch) == _COPY_BATCH:
                flush()
        if batch:
            flush()
        self._copy_archive(source, report, numbers, rekey)
        return report

    def _copy_archive(self, source: AuditLog, report: CopyReport,
                      numbers: dict[tuple[str, int], int], rekey: bool) -> None:
        """The source's archive after its records (a log without one, JSONL, has none): each
        row as stored, numbered as its records now are; a value here already is kept. Under
        ``rekey`` kept values are hashed again, as the records' are."""
        from .archive import copied_row

        exporting = getattr(source, "export_archive", None)
        if exporting is None:
            return
        rows, dropped = exporting()
        key = self.key if rekey else None
        rows = [copied_row(r, numbers=numbers, key=key) for r in rows]
        dropped = [copied_row(d, numbers=numbers, key=key) for d in dropped]
        for start in range(0, len(rows) or 1, _ARCHIVE_BATCH):
            added = self.import_archive(rows[start:start + _ARCHIVE_BATCH],
                                        dropped if start == 0 else [])
            report.archived += added
            report.archive_present += len(rows[start:start + _ARCHIVE_BATCH]) - added


@dataclass
class CopyReport:
    copied: int = 0
    present: int = 0  # already here (same id): skipped
    renumbered: int = 0  # their number was taken here: given the next free one
    foreign_secrets: int = 0  # sensitive literals whose hash is under the source's key
    archived: int = 0  # archive rows (firewall.archive) copied
    archive_present: int = 0  # already here: skipped

    def __str__(self) -> str:
        text = (f"copied {self.copied} record(s); {self.present} already there; "
                f"{self.renumbered} renumbered")
        if self.archived or self.archive_present:
            text += (f"; archive: {self.archived} literal(s) copied, {self.archive_present} "
                     f"already there")
        if self.foreign_secrets:
            text += (f"; {self.foreign_secrets} sensitive literal(s) keep the source key's "
                     f"hashes")
        return text


def _hashed_elsewhere(record: AuditRecord, key: bytes) -> bool:
    """Were ``record``'s hashes made under another key? Judged on its literals kept in clear
    (one reproduced hash is enough: a value escaped for storage no longer hashes as itself)."""
    kept = [lit for lit in record.literals if lit.value is not None]
    return bool(kept) and not any(literal_hash(lit.value, key) == lit.value_hash
                                  for lit in kept if lit.value is not None)


def _rekeyed(record: AuditRecord, key: bytes) -> tuple[AuditRecord, int]:
    literals = [lit.model_copy(update={"value_hash": literal_hash(lit.value, key)})
                if lit.value is not None else lit for lit in record.literals]
    return (record.model_copy(update={"literals": literals}),
            sum(lit.value is None for lit in literals))


# --------------------------------------------------------------------------- statements


def _claim_number(conn: psycopg.Connection[Any], conversation_id: str, wanted: int) -> int:
    """The number this record gets: ``wanted``, or the next after the last one taken. The
    counter row stays locked until COMMIT, so two writers never get the same number, and a
    rolled-back (or killed) writer leaves no gap."""
    row = conn.execute(
        "INSERT INTO compaction_counters AS c (conversation_id, last_compaction) "
        "VALUES (%s, %s) ON CONFLICT (conversation_id) DO UPDATE "
        "SET last_compaction = greatest(c.last_compaction + 1, excluded.last_compaction) "
        "RETURNING last_compaction", (_text(conversation_id), wanted)).fetchone()
    return row["last_compaction"]


def _text(value: Any) -> Any:
    """PostgreSQL text cannot hold NUL: stored as the text ``\\u0000`` (as JSON writes it);
    hashes keep the exact value, so ``find_literal`` still finds it."""
    return value.replace("\x00", "\\u0000") if isinstance(value, str) and "\x00" in value \
        else value


def _insert_record(conn: psycopg.Connection[Any], record: AuditRecord) -> None:
    first, last = record.span or (None, None)
    conn.execute(
        "INSERT INTO records (id, conversation_id, compaction, created_at, policy, vendor_path, "
        "span_first, span_last, turns_compacted, tokens_before, tokens_after, ledger_tokens, "
        f"outcome, error, placeholders, json) VALUES ({', '.join(['%s'] * 16)})",
        [_text(v) for v in (
            record.id, record.conversation_id, record.compaction, record.created_at,
            record.policy, record.vendor_path, first, last, record.turns_compacted,
            record.tokens_before, record.tokens_after, record.ledger_tokens, record.outcome,
            record.error, record.placeholders, record.model_dump_json(exclude={"literals"}))])


def _insert_literals(conn: psycopg.Connection[Any], record: AuditRecord) -> None:
    # COPY: a record may hold a thousand literals; one round trip for all of them
    with conn.cursor().copy(f"COPY literals (record_id, position, {', '.join(LITERAL_COLUMNS)}) "
                            "FROM STDIN") as copy:
        for i, lit in enumerate(record.literals):
            copy.write_row([record.id, i, *(_text(getattr(lit, c)) for c in LITERAL_COLUMNS)])


def _insert_attempts(conn: psycopg.Connection[Any], record: AuditRecord) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO attempts (record_id, position, number, summarizer, model, present, "
            "missing, mutated, usage, error, duration_ms) "
            f"VALUES ({', '.join(['%s'] * 11)})",
            [_attempt_row(record.id, i, a) for i, a in enumerate(record.attempts)])


def _attempt_row(record_id: str, position: int, a: Attempt) -> list[Any]:
    v = a.verdict
    counts = (v.present, v.missing, v.mutated) if v else (None, None, None)
    return [_text(field) for field in (record_id, position, a.number, a.summarizer, a.model,
                                       *counts, json.dumps(a.usage), a.error, a.duration_ms)]


def _records(conn: psycopg.Connection[Any], rows: Iterable[dict[str, Any]]) -> list[AuditRecord]:
    """Records from their ``json`` column, each with its literal rows (fetched in one query)."""
    rows = list(rows)
    literals: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if rows:
        for row in conn.execute(
                f"SELECT record_id, {', '.join(LITERAL_COLUMNS)} FROM literals "
                "WHERE record_id = ANY(%s) ORDER BY record_id, position",
                ([row["id"] for row in rows],)):
            literals[row.pop("record_id")].append(row)
    return [AuditRecord.model_validate({**json.loads(row["json"]), "literals": literals[row["id"]]})
            for row in rows]


def _summaries(conn: psycopg.Connection[Any],
               rows: list[dict[str, Any]]) -> list[RecordSummary]:
    ids = list(dict.fromkeys(row["id"] for row in rows))
    counts: dict[str, dict[str, int]] = {i: {} for i in ids}
    if ids:
        for row in conn.execute("SELECT record_id, status, count(*) AS n FROM literals "
                                "WHERE record_id = ANY(%s) GROUP BY record_id, status", (ids,)):
            counts[row["record_id"]][row["status"]] = row["n"]
    first = {row["id"]: row for row in reversed(rows)}
    return [RecordSummary(**{c: first[i][c] for c in SUMMARY_COLUMNS}, statuses=counts[i])
            for i in ids]


__all__ = ["CopyReport", "PostgresAuditLog", "redacted_url"]
