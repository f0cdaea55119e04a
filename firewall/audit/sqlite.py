"""The default log: SQLite (WAL, one transaction per record, migrations), with the archive's
tables beside the records.
"""

from __future__ import annotations

import contextlib
import errno
import json
import operator
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


# the schema and its migrations, shared with the PostgreSQL log
from .migrations import (LITERAL_COLUMNS, MIGRATIONS, NUMBER_TAKEN, SUMMARY_COLUMNS, newer_schema,
                           migrations)
from ..errors import AuditError
from .files import KeyedLog, one_record
from . import keys
from .keys import DB_ENV, storage_error, os_storage_error, escape_surrogates, literal_hash
from .crafted import NOT_A_LOG, READ_MAX_CHARS, checked_hits
from .records import AuditRecord, LiteralOutcome, RecordSummary, redacted_record


# --------------------------------------------------------------------------- SQLite

# Logs holding an idle connection. Every one is closed before os.fork: a child must not inherit
# an open SQLite connection (SQLite's per-process lock bookkeeping would be wrong there, and a
# child's own connections to the file would skip locks it does not hold).
_IDLE_LOGS: weakref.WeakSet[SQLiteAuditLog] = weakref.WeakSet()
_INHERITED: list[sqlite3.Connection] = []  # inherited despite that: kept, never closed


def _close_before_fork() -> None:
    for log in list(_IDLE_LOGS):
        log.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_close_before_fork)





def _private_to_group(path: Path) -> None:
    """A log of this user's (a log, once migrations have opened it) that every local user can
    read, as logs were created before they were made 0600: its and its WAL's permissions for
    others are taken away; the group's stay (a log shared on purpose). Best effort."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(OSError):
            info = file.stat()
            if info.st_uid == os.geteuid() and info.st_mode & 0o007:
                file.chmod(info.st_mode & 0o770)

def default_db_path() -> Path:
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else keys.state_dir() / "audit.db"


class SQLiteAuditLog(KeyedLog):
    """The default audit log: one SQLite file shared by every process on the machine.

    WAL mode and a busy timeout let several processes write at once; each record (row, literal
    rows, attempt rows) is one ``BEGIN IMMEDIATE`` transaction, so a crash never leaves half of
    one. A connection is opened per call, which makes the object safe across threads and forks;
    one more, idle, is kept open while the log is in use (see ``_keep_open``), so that closing
    the per-call connection does not checkpoint and delete the WAL every time. ``close()``
    drops it; it is also dropped before ``os.fork``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, key: bytes | None = None,
                 busy_timeout: float = 10.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.key = key
        self.busy_timeout = busy_timeout
        self._idle: sqlite3.Connection | None = None  # see _keep_open
        self._reader_conn: sqlite3.Connection | None = None  # see recall
        self._reader_pid = 0
        self._read_only = False  # opened for reading only: see _open_read_only
        self._idle_pid = 0
        self._idle_lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_storage_error(self.path, exc, "creating the folder") from exc
        # the archive holds every literal of every conversation and the lines around them:
        # a new log is the user's alone (SQLite gives its -wal and -shm files its mode)
        with contextlib.suppress(OSError):  # there already, or not creatable: opening says
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._migrate()
        _private_to_group(self.path)
        self._keep_open()

    def _keep_open(self) -> None:
        """Hold one idle connection to the file while this log is in use.

        When the last connection to a WAL database closes, SQLite checkpoints the WAL into the
        database and deletes it: with a connection per call, every record paid for that (about
        6 ms of a ~100k-token compaction's 15 ms write). An idle connection that has read the
        file keeps the per-call ones from being the last; the WAL is then checkpointed by
        SQLite's automatic checkpoint (every 1,000 pages) instead, and when this log is closed
        or collected. It never runs a statement again, so the per-call connections keep all
        their behaviour (a replaced, corrupt, locked or full file is seen by the next call), and
        it holds no transaction, so it never stops a checkpoint. Best effort: if it cannot be
        opened, the log works as before, a little slower.
        """
        pid = os.getpid()
        if self._idle is not None and self._idle_pid == pid:
            return
        with self._idle_lock:
            if self._idle is not None and self._idle_pid == pid:
                return
            if self._idle is not None:  # inherited through a fork that bypassed the hook:
                _INHERITED.append(self._idle)  # never close it here; it is the parent's
                self._idle = None
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout,
                                       isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA trusted_schema = OFF")  # see _connect
                conn.execute("SELECT count(*) FROM _migrations").fetchall()  # opens the WAL
            except (sqlite3.Error, OSError):
                if conn is not None:
                    conn.close()
                return
            self._idle, self._idle_pid = conn, pid
            _IDLE_LOGS.add(self)

    def __del__(self) -> None:
        # at once, not when the cycle collector gets to the connection (sqlite3's statement
        # cache refers back to it): the last close is what checkpoints and removes the WAL
        with contextlib.suppress(Exception):
            self.close()

    def __getstate__(self) -> dict[str, Any]:  # pickled or copied: the idle connection stays
        state = self.__dict__.copy()
        state.update(_idle=None, _idle_pid=0, _idle_lock=None, _reader_conn=None,
                     _reader_pid=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _idle_lock=threading.Lock())

    def close(self) -> None:
        """Close the idle connection (the WAL is checkpointed if no other is open) and the
        recall one; the log stays usable and keeps them open again when next needed."""
        with self._idle_lock:
            reader, self._reader_conn = self._reader_conn, None
            if reader is not None:
                if self._reader_pid == os.getpid():
                    reader.close()
                else:
                    _INHERITED.append(reader)
            conn, self._idle = self._idle, None
            if conn is not None:
                if self._idle_pid == os.getpid():
                    conn.close()
                else:
                    _INHERITED.append(conn)

    def __repr__(self) -> str:
        return f"SQLiteAuditLog({str(self.path)!r})"

    @contextlib.contextmanager
    def _connect(self, action: str, *, read: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection for one call; ``read``: the call only reads, so a log that could only
        be opened read-only (see ``_open_read_only``) serves it."""
        conn = None
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so nothing commits behind
            # our back.
            if read and self._read_only:
                conn = sqlite3.connect(self._read_only_uri, uri=True, timeout=self.busy_timeout,
                                       isolation_level=None)
            else:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout,
                                       isolation_level=None)
            conn.row_factory = sqlite3.Row
            # a log is a file anyone can hand over: SQL in its schema (a view, a trigger) may
            # use no function or virtual table that has side effects or reads the connection
            conn.execute("PRAGMA trusted_schema = OFF")
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a committed record
            # survives the application crashing; a power loss or OS crash may lose the last
            # records (never half of one: the WAL stays atomic). FULL fsynced every record.
            conn.execute("PRAGMA synchronous = NORMAL")
            yield conn
        except sqlite3.Error as exc:
            raise self._error(exc, action) from exc
        except OSError as exc:
            raise os_storage_error(self.path, exc, action) from exc
        finally:
            if conn is not None:
                conn.close()

    def _error(self, exc: sqlite3.Error, action: str) -> AuditError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in text:
            reason = (f"it is corrupt or not a literal-firewall audit database; move it aside "
                      f"(a new one is created) or set {DB_ENV} to another file")
        elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            reason = (f"another process kept it locked for more than {self.busy_timeout:g} s; "
                      f"retry, or raise busy_timeout")
        elif name.startswith("SQLITE_READONLY") or "readonly" in text:
            reason = (f"it is read-only; fix the permissions of the file and its folder or set "
                      f"{DB_ENV} to a writable file")
        elif name.startswith("SQLITE_FULL") or "disk is full" in text:
            reason = f"the disk is full; free some space or set {DB_ENV} to a file on another disk"
        elif name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
            reason = (f"it cannot be opened; check that its folder exists and is writable, or "
                      f"set {DB_ENV} to another file")
        elif isinstance(exc, sqlite3.IntegrityError):
            reason = "a record with this id is already in the log"
        else:
            reason = "unexpected SQLite error"
        return storage_error(self.path, action, reason, text)

    def _migrate(self) -> None:
        try:
            self._apply_migrations()
        except AuditError as exc:
            if not (_cannot_write(exc) and self.path.is_file() and self._open_read_only()):
                raise

    def _open_read_only(self) -> bool:
        """Open a log this process cannot write (read-only file, folder or mount), for reading:
        ``audit list`` must still work there, and a compaction still reports each failed write.
        SQLite cannot open a WAL database read-only unless its -shm file exists or can be
        created, or the file is declared immutable: without a -wal file next to it (which a
        writer would need to create there), the database file holds every committed record,
        so reading it as immutable is exact. True when the log is complete and readable."""
        target = Path(os.path.abspath(self.path)).as_uri()
        for uri in (f"{target}?mode=ro", f"{target}?mode=ro&immutable=1"):
            if uri.endswith("immutable=1") and Path(f"{self.path}-wal").exists():
                break
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout)
                try:
                    conn.execute("PRAGMA trusted_schema = OFF")  # see _connect
                    applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
                finally:
                    conn.close()
            except sqlite3.Error:
                continue
            if "m001_initial" not in applied:
                return False  # not ours: the first error stands
            unknown = applied - {name for name, _ in MIGRATIONS}
            if unknown:  # its tables may mean what this version cannot read
                raise newer_schema(str(self.path), unknown, f"set {DB_ENV} to another file")
            self._read_only, self._read_only_uri = True, uri
            return True
        return False

    def _apply_migrations(self) -> None:
        with self._connect("opening") as conn:
            # another program's database (a wrong --audit-db) is not made a log: every change
            # below, the journal mode included, would stay in it
            names = [row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY name")]
            if names and "_migrations" not in names:
                raise storage_error(self.path, "opening", "it is not a literal-firewall audit "
                                    f"log; set {DB_ENV} or --audit-db to another file",
                                    f"it holds {', '.join(map(repr, names[:5]))}")
            # Persistent for the file; lets readers and one writer proceed together.
            conn.execute("PRAGMA journal_mode = WAL")
            # IMMEDIATE: two processes opening a fresh file must not both run m001.
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS _migrations "
                             "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
                unknown = applied - {name for name, _ in MIGRATIONS}
                if unknown:
                    raise newer_schema(str(self.path), unknown, f"set {DB_ENV} to another file")
                for name, statements in migrations("sqlite"):
                    if name in applied:
                        continue
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO _migrations VALUES (?, ?)",
                                 (name, datetime.now(timezone.utc).isoformat()))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a failed COMMIT (disk full) has already rolled back
                    conn.execute("ROLLBACK")
                raise

    # -- writing

    def write(self, record: AuditRecord) -> None:
        """Write one record. Its compaction number is unique in its conversation: if another
        process took it meanwhile, the record (and ``record``) gets the next free one."""
        written = redacted_record(record, self._key())
        self._keep_open()
        with self._connect("writing a record") as conn:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now, so busy_timeout applies
            try:
                try:
                    _insert_record(conn, written)
                except sqlite3.IntegrityError as exc:
                    if NUMBER_TAKEN not in str(exc):
                        raise
                    # the write lock is held: the next number stays free until COMMIT
                    (last,) = conn.execute(
                        "SELECT max(compaction) FROM records WHERE conversation_id = ?",
                        (written.conversation_id,)).fetchone()
                    written = written.model_copy(update={"compaction": last + 1})
                    _insert_record(conn, written)
                _insert_literals(conn, written)
                _insert_attempts(conn, written)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        record.compaction = written.compaction

    # -- reading

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        where, params = ("", [])
        if conversation_id is not None:
            where, params = "WHERE conversation_id = ?", [conversation_id]
        with self._connect("listing records", read=True) as conn:
            rows = conn.execute(
                f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM records {where} "
                f"ORDER BY seq DESC LIMIT ?", [*params, -1 if limit is None else limit]).fetchall()
            return self._summaries(conn, rows)

    def get(self, id_or_prefix: str) -> AuditRecord:
        with self._connect("reading a record", read=True) as conn:
            rows = conn.execute("SELECT json FROM records WHERE substr(id, 1, ?) = ? LIMIT 2",
                                (len(id_or_prefix), id_or_prefix)).fetchall()
            return _record(conn, one_record(self, id_or_prefix, rows)["json"])

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        # By hash, so sensitive literals are found without being stored; by value too, so
        # records written under another key are still found for non-sensitive literals.
        value_hash = literal_hash(value, self._key())
        with self._connect("searching literals", read=True) as conn:
            rows = conn.execute(
                f"SELECT {', '.join('l.' + c for c in LITERAL_COLUMNS)}, "
                f"{', '.join('r.' + c for c in SUMMARY_COLUMNS)} "
                "FROM literals l JOIN records r ON r.id = l.record_id "
                "WHERE l.value_hash = ? OR l.value = ? ORDER BY r.seq, l.position",
                (value_hash, escape_surrogates(value))).fetchall()
            summaries = {s.id: s for s in self._summaries(conn, rows)}
        return [(summaries[row["id"]], LiteralOutcome(**{c: row[c] for c in LITERAL_COLUMNS}))
                for row in rows]

    def export(self) -> Iterator[AuditRecord]:
        with self._connect("exporting", read=True) as conn:
            for row in conn.execute("SELECT json FROM records ORDER BY seq"):
                yield _record(conn, row["json"])

    def next_compaction_number(self, conversation_id: str) -> int:
        self._keep_open()
        with self._connect("reading", read=True) as conn:
            row = conn.execute("SELECT max(compaction) FROM records WHERE conversation_id = ?",
                               (conversation_id,)).fetchone()
        return (row[0] or 0) + 1

    # -- the archive (firewall.archive): every literal a compaction extracted

    def write_archive(self, conversation_id: str, compaction: int, entries: list[Any],
                      limits: Any = None) -> Any:
        """Add a compaction's ``ArchiveEntry`` list to its conversation's archive (one
        transaction); returns ``archive_sqlite.ArchiveWrite``."""
        from . import archive_forget, archive_sqlite
        from .archive import ArchiveLimits

        self._keep_open()
        with self._connect("writing the archive") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # what this compaction learnt is a secret, archived in clear before: forgotten
                forgot = archive_forget.forget_sqlite(conn, conversation_id, entries)
                done = archive_sqlite.write(conn, conversation_id, compaction, entries,
                                            limits or ArchiveLimits())
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if any(forgot):  # the WAL's frames of the old pages hold it: into the file, gone
                with contextlib.suppress(sqlite3.Error):  # committed: the next checkpoint will
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return done

    def recall(self, query: Any) -> list[Any]:
        """The archive's best ``ArchiveHit`` list for an ``archive.Query``. Recalls share one
        read connection, kept open: its page cache holds the index pages a recall reads (a
        fresh connection per call read them again each time: most of a recall's time). Each
        recall is its own read transaction, so it sees every record committed before it."""
        from . import archive_sqlite

        with self._idle_lock:
            conn = self._reader_conn
            if conn is None or self._reader_pid != os.getpid():
                try:
                    uri = self._read_only_uri if self._read_only else None
                    conn = sqlite3.connect(uri or self.path, uri=bool(uri),
                                           timeout=self.busy_timeout, isolation_level=None,
                                           check_same_thread=False)
                    conn.row_factory = sqlite3.Row
                    conn.execute("PRAGMA query_only = ON")
                    conn.execute("PRAGMA trusted_schema = OFF")  # see _connect
                    # no string a recall reads is longer (crafted.checked_hits): a crafted row
                    # of a gigabyte is refused by SQLite before it is held in memory
                    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 16 * READ_MAX_CHARS)
                except sqlite3.Error as exc:
                    raise self._error(exc, "searching the archive") from exc
                self._reader_conn, self._reader_pid = conn, os.getpid()
                _IDLE_LOGS.add(self)
            try:
                return checked_hits(archive_sqlite.recall(conn, query))
            except sqlite3.Error as exc:
                self._reader_conn = None
                conn.close()
                raise self._error(exc, "searching the archive") from exc
            except TypeError as exc:  # a row a compaction never wrote: the file is crafted
                raise storage_error(self.path, "searching the archive", NOT_A_LOG,
                                    exc) from exc

    def archive_count(self, conversation_id: str) -> int:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.count(conn, conversation_id)

    def archived_values(self, conversation_id: str) -> list[str]:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.values(conn, conversation_id)

    def archive_dropped(self, conversation_id: str) -> list[dict[str, Any]]:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.dropped(conn, conversation_id)

    def export_archive(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every archive row and every drop record, as stored (``audit copy`` reads them)."""
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.export(conn)

    def import_archive(self, rows: list[dict[str, Any]],
                       dropped: list[dict[str, Any]] = ()) -> int:
        """Add exported archive rows (one transaction; a row here already is kept): the rows
        added."""
        from . import archive_sqlite

        self._keep_open()
        with self._connect("writing the archive") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                added = archive_sqlite.insert(conn, rows, dropped)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return added

    def _summaries(self, conn: sqlite3.Connection,
                   rows: list[sqlite3.Row]) -> list[RecordSummary]:
        ids = list(dict.fromkeys(row["id"] for row in rows))
        counts: dict[str, dict[str, int]] = {i: {} for i in ids}
        if ids:
            marks = ", ".join("?" * len(ids))
            for rid, status, n in conn.execute(
                    f"SELECT record_id, status, count(*) FROM literals "
                    f"WHERE record_id IN ({marks}) GROUP BY record_id, status", ids):
                counts[rid][status] = n
        first = {row["id"]: row for row in reversed(rows)}
        try:
            return [RecordSummary(**{c: first[i][c] for c in SUMMARY_COLUMNS},
                                  statuses=counts[i]) for i in ids]
        except ValueError as exc:  # pydantic's: a record no compaction writes (a crafted file)
            fields = sorted({str(e["loc"][0]) for e in getattr(exc, "errors", list)()
                             if e.get("loc")})
            raise storage_error(self.path, "listing records", NOT_A_LOG, ValueError(
                f"a record whose {', '.join(fields) or 'fields'} no compaction writes")) from exc


def _cannot_write(exc: AuditError) -> bool:
    """Did opening fail because this process may not write the file or its folder?"""
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    name = getattr(cause, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM",
                            "SQLITE_AUTH")) or "readonly" in str(cause)


def _insert_record(conn: sqlite3.Connection, record: AuditRecord) -> None:
    first, last = record.span or (None, None)
    created_at = record.model_dump(mode="json", include={"created_at"})["created_at"]
    conn.execute(
        "INSERT INTO records (id, conversation_id, compaction, created_at, policy, vendor_path, "
        "span_first, span_last, turns_compacted, tokens_before, tokens_after, ledger_tokens, "
        f"outcome, error, placeholders, json) VALUES ({', '.join('?' * 16)})",
        (record.id, record.conversation_id, record.compaction, created_at, record.policy,
         record.vendor_path, first, last, record.turns_compacted, record.tokens_before,
         record.tokens_after, record.ledger_tokens, record.outcome, record.error,
         record.placeholders, record.model_dump_json(exclude={"literals"})))


def _record(conn: sqlite3.Connection, text: str) -> AuditRecord:
    """A record from its ``json`` column. Records hold their literals in the ``literals`` rows
    only (written once: they are most of a record's bytes); records written before that
    carry them in the JSON too."""
    data = json.loads(text)
    if "literals" not in data:
        data["literals"] = [
            {c: row[c] for c in LITERAL_COLUMNS} for row in conn.execute(
                f"SELECT {', '.join(LITERAL_COLUMNS)} FROM literals WHERE record_id = ? "
                "ORDER BY position", (data["id"],))]
    return AuditRecord.model_validate(data)


_literal_row = operator.attrgetter(*LITERAL_COLUMNS)  # one C call per row, not 11 getattrs


def _insert_literals(conn: sqlite3.Connection, record: AuditRecord) -> None:
    conn.executemany(
        f"INSERT INTO literals (record_id, position, {', '.join(LITERAL_COLUMNS)}) "
        f"VALUES (?, ?{', ?' * len(LITERAL_COLUMNS)})",
        [(record.id, i, *_literal_row(lit)) for i, lit in enumerate(record.literals)])


def _insert_attempts(conn: sqlite3.Connection, record: AuditRecord) -> None:
    conn.executemany(
        "INSERT INTO attempts (record_id, position, number, summarizer, model, present, missing, "
        "mutated, usage, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(record.id, i, a.number, a.summarizer, a.model,
          *((v.present, v.missing, v.mutated) if (v := a.verdict) else (None, None, None)),
          json.dumps(a.usage), a.error, a.duration_ms)
         for i, a in enumerate(record.attempts)])
