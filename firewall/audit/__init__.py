"""Audit records (which literal survived which compaction, and where) and the logs keeping them.

Every compaction leaves one ``AuditRecord``. A sink has one method, ``write(record)``; the
built-in logs also answer the questions the ``firewall audit`` command asks:

    SQLiteAuditLog(path=None)   default; FIREWALL_AUDIT_DB, else <user state dir>/audit.db
    JSONLAuditLog(path)         one JSON line per record, queried by scanning the file
    MemoryAuditLog()            a list, for tests and for callers that persist records themselves

Sensitive literals are never stored in clear: only an HMAC-SHA256 of the value under a
per-installation key (``installation_key()``), so ``find_literal("sk-...")`` still finds them.
Every storage failure is raised as ``AuditError`` naming the file and what to do about it.

The package by concept: ``keys`` (state dir, keys, hashing), ``records`` (what a log stores),
``files`` (memory and JSONL logs), ``sqlite``, ``postgres`` (each a log), ``migrations``,
``archive`` (every extracted literal, for ``recall``) with one module per database; this module
opens a log from a path or URL and re-exports the public names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import AuditError
from .files import JSONLAuditLog, MemoryAuditLog
from .keys import (APP_NAME, DB_ENV, HASH_PREFIX, KEY_ENV, KEY_FILE_ENV, escape_surrogates,
                   installation_key, literal_hash, shared_key, state_dir)
from .records import (STATUS_MEANINGS, STATUSES, Attempt, AuditLog, AuditRecord, AuditSink,
                      LiteralOutcome, Outcome, PackRef, RecordSummary, Status, VerdictSummary)
from .sqlite import SQLiteAuditLog, default_db_path
from .urls import redacted_url, without_passwords


DATABASE_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(spec: object) -> bool:
    """Is ``spec`` a database server's URL (a shared log) rather than a file?"""
    return isinstance(spec, str) and spec.lower().startswith(DATABASE_SCHEMES)


def audit_db_spec(spec: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """The log ``spec`` names: itself, else ``FIREWALL_AUDIT_DB``, else None (the default)."""
    return spec if spec is not None else (os.environ.get(DB_ENV) or None)


def open_audit_log(spec: str | os.PathLike[str] | None = None) -> AuditLog:
    """The one place a log is chosen. ``None`` → ``FIREWALL_AUDIT_DB``, else the default SQLite
    log; ``postgresql://...`` → ``PostgresAuditLog`` (the ``postgres`` extra, imported only
    then); ``":memory:"`` → ``MemoryAuditLog``; a path ending in ``.jsonl`` →
    ``JSONLAuditLog``; any other path → ``SQLiteAuditLog``. Raises ``AuditError`` when the log
    cannot be opened: to read a log, that is the answer; to write compactions to one, use
    ``open_audit_sink``."""
    spec = audit_db_spec(spec)
    if spec is None:
        return SQLiteAuditLog()
    if is_database_url(spec):
        try:
            from .postgres import PostgresAuditLog
        except ImportError as exc:
            raise AuditError(f"a PostgreSQL audit log needs psycopg 3: pip install "
                             f"'literal-firewall[postgres]' ({exc})") from exc
        return PostgresAuditLog(str(spec))
    if str(spec) == ":memory:":
        return MemoryAuditLog()
    path = Path(spec).expanduser()
    return JSONLAuditLog(path) if path.suffix.lower() == ".jsonl" else SQLiteAuditLog(path)


def open_audit_sink(spec: str | os.PathLike[str] | None = None) -> AuditLog:
    """``open_audit_log`` for a writer of compactions: a log that cannot be opened now
    (corrupt, unwritable location, full disk) never blocks a compaction; it is opened again
    at each call, and its error is raised there, where a failed write is reported."""
    try:
        return open_audit_log(spec)
    except AuditError as exc:
        return DeferredAuditLog(spec, exc)


class DeferredAuditLog:
    """A log that could not be opened yet. Every call opens it again (so it works once the
    cause is fixed) or raises the ``AuditError`` that says why not: a compaction still
    returns its context and reports the failure in ``audit_error``, as for a failed write."""

    def __init__(self, spec: str | os.PathLike[str] | None, error: AuditError) -> None:
        self.spec, self.error = spec, error
        self._log: AuditLog | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # a repr lands in logs and tracebacks: never with the database's password
        spec = None if self.spec is None else redacted_url(os.fspath(self.spec))
        error = redacted_url(str(self.error))
        if is_database_url(spec):
            error = without_passwords(error, os.fspath(self.spec))
        return f"DeferredAuditLog({spec!r}, not open: {error})"

    @property
    def key(self) -> bytes | None:
        """The key the log hashes with once open (``None``: the installation key), so records
        hashed before it opens are found in it: a shared log's is known without opening it."""
        if self._log is not None:
            return getattr(self._log, "key", None)
        return shared_key() if is_database_url(audit_db_spec(self.spec)) else None

    def opened(self) -> AuditLog:
        with self._lock:
            if self._log is None:
                try:
                    self._log = open_audit_log(self.spec)
                except AuditError as exc:
                    self.error = exc
                    raise
            return self._log

    def write(self, record: AuditRecord) -> None:
        self.opened().write(record)

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        return self.opened().list(limit, conversation_id)

    def get(self, id_or_prefix: str) -> AuditRecord:
        return self.opened().get(id_or_prefix)

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        return self.opened().find_literal(value)

    def export(self) -> Iterator[AuditRecord]:
        return self.opened().export()

    def next_compaction_number(self, conversation_id: str) -> int:
        return self.opened().next_compaction_number(conversation_id)

    def __getattr__(self, name: str) -> Any:  # the archive's methods, where the log has them
        if name in ("write_archive", "recall", "archive_count", "archived_values",
                    "archive_dropped"):
            return getattr(self.opened(), name)
        raise AttributeError(name)


__all__ = [
    "APP_NAME", "DB_ENV", "HASH_PREFIX", "KEY_ENV", "KEY_FILE_ENV", "STATUSES", "STATUS_MEANINGS",
    "Attempt", "AuditError", "AuditLog", "AuditRecord", "AuditSink", "DeferredAuditLog",
    "JSONLAuditLog", "LiteralOutcome", "MemoryAuditLog", "Outcome", "PackRef", "RecordSummary",
    "SQLiteAuditLog", "Status", "VerdictSummary", "audit_db_spec", "default_db_path",
    "escape_surrogates", "installation_key", "is_database_url", "literal_hash", "open_audit_log",
    "open_audit_sink", "shared_key", "state_dir",
]
