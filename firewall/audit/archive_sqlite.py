"""The archive in a SQLite audit log: an ``archive`` table, an FTS5 index over it, and its cap.

``archive`` holds one row per (conversation, literal); ``value`` and ``rvalue`` (the value
reversed) are indexed, so an exact value, a prefix and a suffix are B-tree lookups; ``parts``
(the value's terms, see ``archive.value_parts``) and ``context`` are indexed by
``archive_parts`` and ``archive_context``, external-content FTS5 tables (the text is stored
once, in ``archive``).
A sensitive literal's row has only its hash: no value, parts or context, and no FTS row.
``archive_sizes`` keeps each conversation's totals, so the cap is checked without a scan;
``archive_dropped`` records what the cap evicted. The tables are created by the audit log's
migration ``m004_archive`` (``audit_schema``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from .archive import (CANDIDATES, COMPOUND_VALUES, CONTEXT_CANDIDATES, DROPPED_FIELDS,
                      ROW_FIELDS, SCORES, SWEPT_RULE, ArchiveEntry, compounds,
                      ArchiveHit, ArchiveLimits, Query, better, context_match, context_terms,
                      phrase, rank, tier_score)

TOP = "\U0010ffff"  # above every character: ``value < prefix || TOP`` bounds a prefix range

TABLES = (
    """CREATE TABLE archive (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            value TEXT,                         -- NULL when sensitive
            rvalue TEXT,                        -- value reversed: suffix lookups on an index
            value_hash TEXT NOT NULL,
            kind TEXT NOT NULL,
            rule TEXT NOT NULL,
            role TEXT NOT NULL,
            first_turn INTEGER NOT NULL,
            last_turn INTEGER NOT NULL,
            first_compaction INTEGER NOT NULL,
            compaction INTEGER NOT NULL,        -- the last compaction that saw it
            seen INTEGER NOT NULL,
            parts TEXT,                         -- the FTS terms of value; NULL when sensitive
            context TEXT,                       -- secrets masked; NULL when sensitive
            sensitive INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            UNIQUE (conversation_id, value_hash)
        )""",
    "CREATE INDEX archive_value ON archive (value)",
    "CREATE INDEX archive_rvalue ON archive (rvalue)",
    # no index for the cap's order (seen, compaction, last turn): eviction is rare, and reads
    # one conversation's rows by the UNIQUE index; every write would pay for one
    # two indexes, not two columns of one: a column filter still reads the whole doclist of
    # a word, and the words of context lines would be read for every query of a value's parts.
    # columnsize=0: no row of token counts per document, which only bm25() reads (a recall
    # ranks its candidates itself); a log made before keeps them, read and written alike
    "CREATE VIRTUAL TABLE archive_parts USING fts5(parts, content='archive', "
    "content_rowid='id', columnsize=0, tokenize='unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE archive_context USING fts5(context, content='archive', "
    "content_rowid='id', columnsize=0, tokenize='unicode61 remove_diacritics 2')",
    """CREATE TABLE archive_sizes (
            conversation_id TEXT PRIMARY KEY,
            literals INTEGER NOT NULL,
            recallable INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        )""",
    """CREATE TABLE archive_dropped (
            conversation_id TEXT NOT NULL,
            compaction INTEGER NOT NULL,        -- the compaction whose write dropped it
            value TEXT,                         -- NULL when sensitive
            value_hash TEXT NOT NULL,
            rule TEXT NOT NULL,
            seen INTEGER NOT NULL,
            last_turn INTEGER NOT NULL,
            reason TEXT NOT NULL
        )""",
)

_COLUMNS = ("value", "kind", "rule", "role", "first_turn", "last_turn", "compaction",
            "conversation_id", "context")
_SELECT = ", ".join("a." + c for c in _COLUMNS) + ", a.id"


@dataclass(frozen=True, slots=True)
class ArchiveWrite:
    """What one compaction's write did to its conversation's archive."""

    added: int
    updated: int
    dropped: int
    literals: int  # in the archive after the write
    bytes: int
    recallable: int = 0  # of those, the non-sensitive: what a recall can return


def write(conn: sqlite3.Connection, conversation_id: str, compaction: int,
          entries: Sequence[ArchiveEntry], limits: ArchiveLimits) -> ArchiveWrite:
    """Add ``entries`` to the conversation's archive inside the caller's write transaction:
    new values get a row (and an FTS row unless sensitive), known ones their last turn, count
    and compaction; then the cap (see ``ArchiveLimits``)."""
    (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM archive").fetchone()
    first_new = top + 1
    # ids are given here, above every existing one: the rows at or above first_new after the
    # upsert are exactly the new ones, found by a primary-key range
    conn.executemany(
        "INSERT INTO archive (id, conversation_id, value, rvalue, value_hash, kind, rule, role, "
        "first_turn, last_turn, first_compaction, compaction, seen, parts, context, sensitive, "
        "bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (conversation_id, value_hash) DO UPDATE SET "
        "last_turn = max(last_turn, excluded.last_turn), seen = seen + excluded.seen, "
        "compaction = max(compaction, excluded.compaction), "
        # a token swept before that a rule extracts now becomes that rule's literal
        "kind = iif(rule = ?, excluded.kind, kind), rule = iif(rule = ?, excluded.rule, rule)",
        [(first_new + i, conversation_id, e.value, e.value[::-1] if e.value is not None else None,
          e.value_hash, e.kind, e.rule, e.role, e.first_turn, e.last_turn, compaction, compaction,
          e.seen, e.parts, e.context, e.sensitive, e.size, SWEPT_RULE, SWEPT_RULE)
         for i, e in enumerate(entries)])
    conn.execute("INSERT INTO archive_parts (rowid, parts) SELECT id, parts FROM archive "
                 "WHERE id >= ? AND sensitive = 0", (first_new,))
    conn.execute("INSERT INTO archive_context (rowid, context) SELECT id, context FROM archive "
                 "WHERE id >= ? AND sensitive = 0 AND context IS NOT NULL", (first_new,))
    added, recallable, size = conn.execute(
        "SELECT count(*), coalesce(sum(1 - sensitive), 0), coalesce(sum(bytes), 0) "
        "FROM archive WHERE id >= ?", (first_new,)).fetchone()
    conn.execute(
        "INSERT INTO archive_sizes VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE "
        "SET literals = literals + excluded.literals, recallable = recallable + "
        "excluded.recallable, bytes = bytes + excluded.bytes",
        (conversation_id, added, recallable, size))
    literals, recallable, total = _size(conn, conversation_id)
    dropped = 0
    if literals > limits.max_literals or total > limits.max_bytes:
        dropped = _evict(conn, conversation_id, compaction, limits, literals, total)
        literals, recallable, total = _size(conn, conversation_id)
    return ArchiveWrite(added, len(entries) - added, dropped, literals, total, recallable)


def _size(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, int, int]:
    row = conn.execute("SELECT literals, recallable, bytes FROM archive_sizes "
                       "WHERE conversation_id = ?", (conversation_id,)).fetchone()
    return (row[0], row[1], row[2]) if row else (0, 0, 0)


def _evict(conn: sqlite3.Connection, conversation_id: str, compaction: int,
           limits: ArchiveLimits, literals: int, total: int) -> int:
    """Drop the literals seen least, and longest ago, until the archive fits its cap: swept
    tokens first, then the rules' literals."""
    victims = []
    for row in conn.execute(
            "SELECT id, value, value_hash, rule, seen, last_turn, parts, context, sensitive, "
            "bytes FROM archive WHERE conversation_id = ? "
            "ORDER BY rule <> ?, seen, compaction, last_turn, id",
            (conversation_id, SWEPT_RULE)):
        if literals <= limits.max_literals and total <= limits.max_bytes:
            break
        victims.append(row)
        literals -= 1
        total -= row[9]
    reason = f"archive cap ({limits.max_literals:,} literals, {limits.max_bytes:,} bytes)"
    conn.executemany("INSERT INTO archive_dropped VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(conversation_id, compaction, v[1], v[2], v[3], v[4], v[5], reason)
                      for v in victims])
    conn.executemany("INSERT INTO archive_parts (archive_parts, rowid, parts) "
                     "VALUES ('delete', ?, ?)", [(v[0], v[6]) for v in victims if not v[8]])
    conn.executemany("INSERT INTO archive_context (archive_context, rowid, context) "
                     "VALUES ('delete', ?, ?)",
                     [(v[0], v[7]) for v in victims if not v[8] and v[7] is not None])
    conn.executemany("DELETE FROM archive WHERE id = ?", [(v[0],) for v in victims])
    conn.execute("UPDATE archive_sizes SET literals = literals - ?, recallable = recallable - ?, "
                 "bytes = bytes - ? WHERE conversation_id = ?",
                 (len(victims), sum(1 for v in victims if not v[8]),
                  sum(v[9] for v in victims), conversation_id))
    return len(victims)


def count(conn: sqlite3.Connection, conversation_id: str) -> int:
    """The literals of a conversation that a recall can return (its non-sensitive ones)."""
    return _size(conn, conversation_id)[1]


def dropped(conn: sqlite3.Connection, conversation_id: str) -> list[dict[str, object]]:
    """What the cap dropped from a conversation's archive (sensitive ones by hash only)."""
    return [dict(row) for row in conn.execute(
        "SELECT compaction, value, value_hash, rule, seen, last_turn, reason "
        "FROM archive_dropped WHERE conversation_id = ? ORDER BY rowid", (conversation_id,))]


def values(conn: sqlite3.Connection, conversation_id: str) -> list[str]:
    """Every non-sensitive value archived for a conversation, in the order they were added."""
    return [row[0] for row in conn.execute(
        "SELECT value FROM archive WHERE conversation_id = ? AND sensitive = 0 ORDER BY id",
        (conversation_id,))]


def recall(conn: sqlite3.Connection, query: Query) -> list[ArchiveHit]:
    """The best hits for ``query``, best first (see ``archive`` for the tiers). Each value tier
    runs only while the better ones have found fewer than ``limit``, the context tier only when
    they found no rule's literal; an FTS tier ranks at most ``CANDIDATES`` matches, the newest.
    Each tier asks for the rules' literals first and for swept tokens only while hits are
    missing: they rank below, and so never take a rule's literal's place among the candidates."""
    where, params = query.filters("?")
    filters = " AND ".join(["a.sensitive = 0", *where])
    found: dict[int, tuple[str, float, tuple[int, int]]] = {}
    rows: dict[int, sqlite3.Row] = {}
    text, words = query.text, query.words

    def take(tier: str, sql: str, args: Sequence[object], within: object = None,
             cap: int = CANDIDATES, swept: bool = False) -> None:
        sql = sql.replace("{filters}", f"{filters} AND a.rule {'=' if swept else '<>'} ?")
        for row in conn.execute(sql, [*args, *params, SWEPT_RULE, cap]):
            got = within(row) if callable(within) else 0.0
            rank_tier, score = got if isinstance(got, tuple) else (tier, got)
            rows[row["id"]] = row
            better(found, row["id"], rank_tier, tier_score(score, swept),
                   (row["compaction"], row["last_turn"]))

    def enough() -> bool:
        return len(found) >= query.limit

    def closeness(row: sqlite3.Row) -> float:
        return query.closeness(row["value"])

    reverse = text[::-1]
    affixes = (("prefix", f"SELECT {_SELECT} FROM archive a WHERE a.value > ? AND a.value < ? "
                          f"AND {{filters}} LIMIT ?", [text, text + TOP]),
               ("suffix", f"SELECT {_SELECT} FROM archive a WHERE a.rvalue > ? AND a.rvalue < ? "
                          f"AND {{filters}} LIMIT ?", [reverse, reverse + TOP]))
    for swept in (False, True):
        take("exact", f"SELECT {_SELECT} FROM archive a WHERE a.value = ? AND {{filters}} "
                      f"LIMIT ?", [text], swept=swept)
    for swept in (False, True):
        if not enough():
            for tier, sql, args in affixes:
                take(tier, sql, args, closeness, swept=swept)

    def fts(table: str) -> str:
        return (f"SELECT {_SELECT} FROM {table} f JOIN archive a ON a.id = f.rowid "
                f"WHERE {table} MATCH ? AND {{filters}} ORDER BY f.rowid DESC LIMIT ?")

    for tier, match in (("part", phrase(words)), ("part_prefix", phrase(words) + " *")):
        for swept in (False, True):
            if words and not enough():
                take(tier, fts("archive_parts"), [match], closeness, swept=swept)
    # context words: when no rule's literal matched (they are the fallback of a query that
    # names no part of a value), or for words (a query with a space) while hits are missing;
    # without the words every line holds
    asked = context_terms(words)
    ruled = any(rows[k]["rule"] != SWEPT_RULE for k in found)
    if asked and (not ruled or (" " in text and not enough())):
        def relevance(row: sqlite3.Row) -> tuple[str, float]:
            return context_match(asked, row["context"], row["value"])

        # each word, or a longer token holding it (a camelCase name's part: ``compounds``)
        values = f"SELECT a.value FROM archive_parts f JOIN archive a ON a.id = f.rowid " \
                 f"WHERE archive_parts MATCH ? AND {filters} ORDER BY f.rowid DESC LIMIT ?"
        spelled = ["(" + " OR ".join(phrase([t]) for t in [w, *compounds(w, (
            row[0] for row in conn.execute(values, [phrase([w]), *params, COMPOUND_VALUES])))])
            + ")" for w in asked]
        # lines holding every word (the rules' literals, then swept tokens), then some of them
        joiners = (" AND ", " OR ") if len(asked) > 1 else (" AND ",)
        for i, joiner in enumerate(joiners):
            for swept in (False, True):
                if (i == 0 and not swept) or not enough():
                    take("context", fts("archive_context"), [joiner.join(spelled)], relevance,
                         CONTEXT_CANDIDATES, swept=swept)
    hits = []
    for key in rank(found, query.limit):
        row, (tier, within, _) = rows[key], found[key]
        hits.append(ArchiveHit(row["value"], row["kind"], row["rule"], row["role"],
                               row["first_turn"], row["last_turn"], row["compaction"],
                               row["conversation_id"], row["context"],
                               round(SCORES[tier] + within, 4), tier))
    return hits


# ── copying (``firewall audit copy``): the rows as they are, idempotent ────────────────────────

def export(conn: sqlite3.Connection) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Every archive row (``archive.ROW_FIELDS``; sensitive ones by hash only, as stored) and
    every record of what the cap dropped, oldest first."""
    rows = [dict(zip(ROW_FIELDS, row)) for row in conn.execute(
        f"SELECT {', '.join(ROW_FIELDS)} FROM archive ORDER BY id")]
    for row in rows:
        row["sensitive"] = bool(row["sensitive"])
    dropped_rows = [dict(zip(DROPPED_FIELDS, row)) for row in conn.execute(
        f"SELECT {', '.join(DROPPED_FIELDS)} FROM archive_dropped ORDER BY rowid")]
    return rows, dropped_rows


def insert(conn: sqlite3.Connection, rows: Sequence[dict[str, object]],
           dropped_rows: Sequence[dict[str, object]] = ()) -> int:
    """Add exported rows inside the caller's write transaction: a (conversation, value) here
    already is kept as it is (a copy run again adds nothing); the FTS index and the sizes
    follow. Returns how many rows were added."""
    (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM archive").fetchone()
    first_new = top + 1
    conn.executemany(
        f"INSERT INTO archive (id, rvalue, {', '.join(ROW_FIELDS)}) VALUES "
        f"(?, ?, {', '.join('?' * len(ROW_FIELDS))}) "
        f"ON CONFLICT (conversation_id, value_hash) DO NOTHING",
        [(first_new + i, None if r["value"] is None else str(r["value"])[::-1],
          *(r[f] for f in ROW_FIELDS)) for i, r in enumerate(rows)])
    conn.execute("INSERT INTO archive_parts (rowid, parts) SELECT id, parts FROM archive "
                 "WHERE id >= ? AND sensitive = 0", (first_new,))
    conn.execute("INSERT INTO archive_context (rowid, context) SELECT id, context FROM archive "
                 "WHERE id >= ? AND sensitive = 0 AND context IS NOT NULL", (first_new,))
    (added,) = conn.execute("SELECT count(*) FROM archive WHERE id >= ?",
                            (first_new,)).fetchone()
    marks = ", ".join("?" * len(DROPPED_FIELDS))
    conn.executemany(
        f"INSERT INTO archive_dropped SELECT {marks} WHERE NOT EXISTS (SELECT 1 FROM "
        f"archive_dropped WHERE conversation_id = ? AND compaction = ? AND value_hash = ?)",
        [(*(d[f] for f in DROPPED_FIELDS), d["conversation_id"], d["compaction"],
          d["value_hash"]) for d in dropped_rows])
    conn.execute(
        "INSERT OR REPLACE INTO archive_sizes SELECT conversation_id, count(*), "
        "sum(1 - sensitive), sum(bytes) FROM archive WHERE conversation_id IN (SELECT "
        "conversation_id FROM archive WHERE id >= ?) GROUP BY conversation_id", (first_new,))
    return added
