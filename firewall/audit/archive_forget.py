"""Forgetting, in an archive, what a later compaction learnt is a secret.

A compaction archives what its scan found: a value no rule took for a secret is kept in clear,
with its context line (an id, a swept token). When a later compaction of the conversation finds
it sensitive (``password: <it>``), the ledger hides it from then on, and so must the archive:
before that compaction's entries are written, every row of the conversation whose value holds
or is a piece of a secret it has not hashed yet becomes a hash-only row (no value, parts or
context, out of the FTS index), every context line holding one has it replaced by ``[secret]``
(in any spelling ``archive`` masks), and the records of the cap keep no such value. The rows
are read once, and only by a compaction that brings a secret the archive has not hashed yet;
then the FTS index is merged (a deleted token stays readable in its segment until a merge) and
SQLite zeroes what it frees. PostgreSQL keeps the old row versions until its next VACUUM.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..literals import SECRET_MIN_CHARS, SecretIndex
from .archive import ArchiveEntry, _masker, spelled
from .keys import escape_surrogates


def secret_entries(entries: Sequence[ArchiveEntry]) -> dict[str, str]:
    """The sensitive entries' hashes → their secrets (most compactions have none)."""
    return {e.value_hash: e.secret for e in entries if e.sensitive and e.secret}


def unknown_secrets(secrets: dict[str, str], hashed: Iterable[str]) -> list[str]:
    """The secrets (hash → secret) whose hash is not among the conversation's ``hashed``, as
    the archive writes text (a lone surrogate as its ``\\udXXX`` escape)."""
    hashed = set(hashed)
    return list(dict.fromkeys(escape_surrogates(s) for h, s in secrets.items()
                              if h not in hashed))


def plan(rows: Iterable[tuple[Any, str | None, str | None]], secrets: Sequence[str]
         ) -> tuple[list[Any], list[tuple[Any, str]]]:
    """For rows (id, value, context): the ids whose value is a secret, holds one or lies inside
    one, and (id, masked context) for the other rows whose context line holds one."""
    secrets = [*secrets, *spelled(secrets)]
    index = SecretIndex(secrets)
    mask, _ = _masker(set(secrets) | set(index.secrets))
    exact = set(secrets)
    hidden, masked = [], []
    for key, value, context in rows:
        if value is not None and (value in exact or index.touches(value) or
                                  mask(value) != value):
            hidden.append(key)
        elif context:
            clean = mask(context)
            if clean != context:
                masked.append((key, clean))
    return hidden, masked


def forget_sqlite(conn: Any, conversation_id: str, entries: Sequence[ArchiveEntry]) -> int:
    """``plan`` applied to a SQLite archive inside the caller's write transaction (the FTS
    index follows); returns how many rows became hash-only."""
    known = secret_entries(entries)
    if not known:
        return 0
    marks = ", ".join("?" * len(known))
    hashed = [h for (h,) in conn.execute(
        f"SELECT value_hash FROM archive WHERE conversation_id = ? AND sensitive = 1 "
        f"AND value_hash IN ({marks})", (conversation_id, *known))]
    secrets = unknown_secrets(known, hashed)
    if not secrets:
        return 0
    rows = {r[0]: (r[0], r[1], r[2], r[3])
            for where, args in _candidates(secrets, "?", "instr({}, {})")
            for r in conn.execute(f"SELECT id, value, context, parts FROM archive WHERE "
                                  f"conversation_id = ? AND sensitive = 0 AND ({where})",
                                  (conversation_id, *args))}
    hidden, masked = plan((r[:3] for r in rows.values()), secrets)
    if hidden or masked:  # the old text is zeroed where SQLite frees it, not left in free space
        conn.execute("PRAGMA secure_delete = ON")
    conn.executemany("INSERT INTO archive_parts (archive_parts, rowid, parts) "
                     "VALUES ('delete', ?, ?)", [(k, rows[k][3]) for k in hidden])
    gone = [k for k in hidden if rows[k][2] is not None] + [k for k, _ in masked]
    conn.executemany("INSERT INTO archive_context (archive_context, rowid, context) "
                     "VALUES ('delete', ?, ?)", [(k, rows[k][2]) for k in gone])
    conn.executemany("UPDATE archive SET value = NULL, rvalue = NULL, parts = NULL, "
                     "context = NULL, sensitive = 1 WHERE id = ?", [(k,) for k in hidden])
    conn.executemany("UPDATE archive SET context = ? WHERE id = ?",
                     [(text, k) for k, text in masked])
    conn.executemany("INSERT INTO archive_context (rowid, context) VALUES (?, ?)",
                     [(k, text) for k, text in masked])
    conn.execute("UPDATE archive_sizes SET recallable = recallable - ? "
                 "WHERE conversation_id = ?", (len(hidden), conversation_id))
    # an FTS5 delete only marks its tokens deleted (SQLite 3.44's secure-delete aside): their
    # segments keep them, readable, until merged; rare enough to merge all at once
    for table, changed in (("archive_parts", hidden), ("archive_context", gone)):
        if changed:
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    _forget_dropped(conn, "?", conversation_id, secrets)
    return len(hidden)


def forget_postgres(conn: Any, conversation_id: str, entries: Sequence[ArchiveEntry]) -> int:
    """``forget_sqlite`` for a psycopg connection (its ``tsvector`` columns are generated: they
    follow the rows)."""
    from psycopg.rows import tuple_row

    conn = conn.cursor(row_factory=tuple_row)
    known = secret_entries(entries)
    if not known:
        return 0
    hashed = [h for (h,) in conn.execute(
        "SELECT value_hash FROM archive WHERE conversation_id = %s AND sensitive "
        "AND value_hash = ANY(%s)", (conversation_id, list(known))).fetchall()]
    secrets = unknown_secrets(known, hashed)
    if not secrets:
        return 0
    rows = {r[0]: r for where, args in _candidates(secrets, "%s", "strpos({}, {})")
            for r in conn.execute(f"SELECT id, value, context FROM archive WHERE "
                                  f"conversation_id = %s AND NOT sensitive AND ({where})",
                                  (conversation_id, *args)).fetchall()}
    hidden, masked = plan(rows.values(), secrets)
    for key in hidden:
        conn.execute("UPDATE archive SET value = NULL, parts = NULL, context = NULL, "
                     "sensitive = true WHERE id = %s", (key,))
    for key, text in masked:
        conn.execute("UPDATE archive SET context = %s WHERE id = %s", (text, key))
    conn.execute("UPDATE archive_sizes SET recallable = recallable - %s "
                 "WHERE conversation_id = %s", (len(hidden), conversation_id))
    _forget_dropped(conn, "%s", conversation_id, secrets)
    return len(hidden)


CONDITIONS = 150  # per query: SQLite parses a chain of ORs 1,000 deep at most
BACKSLASH = "'" + chr(92) + "'"  # an SQL string of one backslash (in both databases)


def _candidates(secrets: Sequence[str], mark: str, find: str) -> list[tuple[str, list[str]]]:
    """The SQL conditions (and their arguments), a query's worth each, of the rows ``plan``
    may change: a value or a context line holding a spelling of a secret, a value inside one,
    or any backslash (a JSON escape ``plan`` reads): the database tests them, cheaper than
    Python row by row."""
    conditions: list[tuple[str, list[str]]] = [
        (f"{find.format(column, BACKSLASH)} > 0", []) for column in ("value", "context")]
    for secret in [*secrets, *spelled(secrets)]:
        conditions += [(f"{find.format(column, mark)} > 0", [secret])
                       for column in ("value", "context")]
        if len(secret) >= SECRET_MIN_CHARS:  # a value lying inside it
            conditions.append((f"(length(value) >= {SECRET_MIN_CHARS} AND "
                               f"{find.format(mark, 'value')} > 0)", [secret]))
    return [(" OR ".join(c for c, _ in chunk), [a for _, args in chunk for a in args])
            for chunk in (conditions[i:i + CONDITIONS]
                          for i in range(0, len(conditions), CONDITIONS))]


def _forget_dropped(conn: Any, mark: str, conversation_id: str, secrets: Sequence[str]) -> None:
    """The records of the cap keep a dropped value: none that ``plan`` would hide."""
    rows = conn.execute(f"SELECT value FROM archive_dropped WHERE conversation_id = {mark} "
                        f"AND value IS NOT NULL", (conversation_id,)).fetchall()
    values = {r[0] for r in rows}
    hidden, _ = plan(((v, v, None) for v in values), secrets)
    for value in hidden:
        conn.execute(f"UPDATE archive_dropped SET value = NULL WHERE conversation_id = {mark} "
                     f"AND value = {mark}", (conversation_id, value))


__all__ = ["forget_postgres", "forget_sqlite", "plan", "secret_entries", "unknown_secrets"]
