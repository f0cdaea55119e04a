"""The audit log's schema: one list of numbered migrations for SQLite and PostgreSQL.

Both dialects hold the same tables, columns and meanings, so a log moves from one to the other
(``firewall audit copy``) record for record. A statement both read alike is written once; where
they differ (types, how a compaction number is kept unique) it is a ``Dialects`` pair. Each log
records the names it has applied in ``_migrations`` (as simonw/llm does). Never edit a migration
that has shipped: append a new one, for both dialects.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from . import (archive_forget as _archive_forget, archive_postgres as _archive_pg,
               archive_sqlite as _archive_sqlite)
from ..errors import AuditError

Dialect = Literal["sqlite", "postgresql"]

NUMBER_TAKEN = "compaction number already taken in this conversation"


class Dialects(NamedTuple):
    """One step written per dialect; ``None``: nothing to do there."""

    sqlite: str | None
    postgresql: str | None


Statement = str | Dialects


def _records(seq: str, created_at: str, integer: str, flag: str) -> str:
    return f"""CREATE TABLE records (
            seq {seq},                          -- write order; stable across VACUUM
            id TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL,
            compaction INTEGER NOT NULL,
            created_at {created_at},          -- UTC (ISO 8601 text in SQLite)
            policy TEXT NOT NULL,
            vendor_path TEXT NOT NULL,
            span_first {integer},
            span_last {integer},
            turns_compacted {integer} NOT NULL,
            tokens_before {integer} NOT NULL,
            tokens_after {integer} NOT NULL,
            ledger_tokens {integer} NOT NULL,
            outcome TEXT NOT NULL,
            error TEXT,
            placeholders {flag} NOT NULL,
            json TEXT NOT NULL                  -- the AuditRecord but its literals (their rows
                                                -- hold them; older SQLite records: both)
        )"""


def _literals(integer: str, flag: str) -> str:
    return f"""CREATE TABLE literals (
            record_id TEXT NOT NULL REFERENCES records (id) ON DELETE CASCADE,
            position {integer} NOT NULL,
            value TEXT,                         -- NULL when sensitive
            value_hash TEXT NOT NULL,
            rule TEXT NOT NULL,
            role TEXT NOT NULL,
            turn {integer} NOT NULL,
            status TEXT NOT NULL,
            in_summary {flag} NOT NULL,
            in_ledger {flag} NOT NULL,
            in_tail {flag} NOT NULL,
            sensitive {flag} NOT NULL,
            detail TEXT,
            PRIMARY KEY (record_id, position)
        )"""


def _attempts(integer: str, real: str) -> str:
    return f"""CREATE TABLE attempts (
            record_id TEXT NOT NULL REFERENCES records (id) ON DELETE CASCADE,
            position {integer} NOT NULL,
            number {integer} NOT NULL,
            summarizer TEXT NOT NULL,
            model TEXT,
            present {integer},
            missing {integer},
            mutated {integer},
            usage TEXT NOT NULL,                -- JSON object of token counts
            error TEXT,
            duration_ms {real} NOT NULL,
            PRIMARY KEY (record_id, position)
        )"""


# SQLite's INTEGER is 64-bit and its REAL a double: PostgreSQL's BIGINT and DOUBLE PRECISION.
# Flags are 0/1 integers in SQLite (which has no boolean type) and BOOLEAN in PostgreSQL.
MIGRATIONS: list[tuple[str, tuple[Statement, ...]]] = [
    ("m001_initial", (
        Dialects(_records("INTEGER PRIMARY KEY", "TEXT NOT NULL", "INTEGER", "INTEGER"),
                 _records("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                          "TIMESTAMPTZ NOT NULL", "BIGINT", "BOOLEAN")),
        "CREATE INDEX records_conversation ON records (conversation_id, compaction)",
        Dialects(_literals("INTEGER", "INTEGER"), _literals("BIGINT", "BOOLEAN")),
        "CREATE INDEX literals_value_hash ON literals (value_hash)",
        # a B-tree entry is limited to about 2.7 kB in PostgreSQL, and a literal may reach
        # 8,192 characters; find_literal only asks for equality, which a hash index serves
        Dialects("CREATE INDEX literals_value ON literals (value)",
                 "CREATE INDEX literals_value ON literals USING hash (value)"),
        Dialects(_attempts("INTEGER", "REAL"), _attempts("BIGINT", "DOUBLE PRECISION")),
        # PostgreSQL logs are shared by many machines, which must hash under one key: this
        # holds a fingerprint of it (an HMAC of a fixed text, never the key), to refuse a
        # writer configured with another. A SQLite log uses its installation's key.
        Dialects(None, """CREATE TABLE key_check (
            only_row BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
            fingerprint TEXT NOT NULL
        )"""),
    )),
    # A compaction number is unique within its conversation. Numbers are chosen before the
    # summarizer runs, so processes compacting one conversation at once could pick the same one.
    # SQLite (one writer at a time): a trigger refuses a taken number and ``write`` renumbers
    # inside its transaction; a trigger rather than a UNIQUE index, since logs written before it
    # may hold duplicates, which stay as recorded. PostgreSQL (many writers at once): a counter
    # row per conversation, claimed and advanced inside the write transaction (its row lock
    # orders the writers of one conversation only), and a UNIQUE index to hold the invariant.
    ("m002_unique_compaction_numbers", (
        Dialects(f"""CREATE TRIGGER records_compaction_unique BEFORE INSERT ON records
        WHEN EXISTS (SELECT 1 FROM records WHERE conversation_id = NEW.conversation_id
                     AND compaction = NEW.compaction)
        BEGIN SELECT RAISE(ABORT, '{NUMBER_TAKEN}'); END""",
                 "CREATE UNIQUE INDEX records_compaction_unique "
                 "ON records (conversation_id, compaction)"),
        Dialects(None, """CREATE TABLE compaction_counters (
            conversation_id TEXT PRIMARY KEY,
            last_compaction INTEGER NOT NULL
        )"""),
    )),
    ("m003_literal_mixed_script", (
        Dialects("ALTER TABLE literals ADD COLUMN mixed_script INTEGER NOT NULL DEFAULT 0",
                 "ALTER TABLE literals ADD COLUMN mixed_script BOOLEAN NOT NULL DEFAULT false"),
    )),
    # The archive: every literal a compaction extracted, pinned or not (firewall.archive);
    # FTS5 in SQLite, tsvector columns with GIN indexes in PostgreSQL
    ("m004_archive", tuple(Dialects(sqlite, None) for sqlite in _archive_sqlite.TABLES)
     + tuple(Dialects(None, postgresql) for postgresql in _archive_pg.TABLES)),
    # PostgreSQL's context words split as SQLite's FTS5 splits them (``45/100``: 45, 100)
    ("m005_archive_context_split",
     tuple(Dialects(None, postgresql) for postgresql in _archive_pg.SPLIT_CONTEXT)),
    # A secret a compaction learns is forgotten in every conversation of the log
    # (``archive_forget``): the rows holding it exactly are found by its hash. A log written
    # before kept such a row in clear where another conversation learnt the value was a
    # secret: made hash-only now, as the rows forgotten since are.
    ("m006_archive_value_hash", (
        "CREATE INDEX archive_value_hash ON archive (value_hash)",
        "CREATE INDEX archive_dropped_value_hash ON archive_dropped (value_hash)",
        *(Dialects(sqlite, postgresql) for sqlite, postgresql in _archive_forget.KNOWN_ELSEWHERE),
    )),
]


def migrations(dialect: Dialect) -> list[tuple[str, list[str]]]:
    """Each migration's name and the statements ``dialect`` runs for it, in order."""
    return [(name, [s if isinstance(s, str) else getattr(s, dialect) for s in statements
                    if isinstance(s, str) or getattr(s, dialect) is not None])
            for name, statements in MIGRATIONS]


def newer_schema(where: str, unknown: set[str], elsewhere: str) -> AuditError:
    """A log holding migrations this version does not know: refused, read or write, naming
    both ends so the user knows which version to install."""
    from .. import __version__

    return AuditError(
        f"audit log {where}: written by a newer literal-firewall (schema migrations "
        f"{', '.join(sorted(unknown))}); this is literal-firewall {__version__}, whose schema "
        f"ends at {MIGRATIONS[-1][0]}; upgrade literal-firewall or {elsewhere}")


LITERAL_COLUMNS = ("value", "value_hash", "rule", "role", "turn", "status", "in_summary",
                   "in_ledger", "in_tail", "sensitive", "detail", "mixed_script")
SUMMARY_COLUMNS = ("id", "conversation_id", "compaction", "created_at", "policy", "vendor_path",
                   "outcome", "turns_compacted", "tokens_before", "tokens_after", "ledger_tokens")
