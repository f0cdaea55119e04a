"""The archive in a PostgreSQL audit log (a fleet's): the SQLite tables, with ``tsvector``.

The same rows and meanings as ``archive_sqlite``; the FTS5 index is two generated ``tsvector``
columns (``parts_tsv``, ``context_tsv``, the ``simple`` configuration: no stemming, no stop
words, so a value's parts match as written) under one GIN index; a context line is split into
runs of letters and digits first, as FTS5 splits it (``CONTEXT_TSV``), so that context words
find the same lines in both logs (FTS5 also folds diacritics: ``cafe`` finds ``café`` there
only). A value may reach 8,192
characters and a B-tree entry about 2.7 kB: the exact, prefix and suffix lookups go through
indexes on the first 256 characters (``text_pattern_ops``, so ``LIKE 'prefix%'`` uses them)
and compare the whole value after. psycopg is imported by the caller (``audit_pg``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .archive import (CANDIDATES, COMPOUND_VALUES, CONTEXT_CANDIDATES, DROPPED_FIELDS,
                      ROW_FIELDS, SCORES, SWEPT_RULE, ArchiveEntry, compounds,
                      ArchiveHit, ArchiveLimits, Query, better, context_match, context_terms,
                      rank, tier_score)
from .archive_sqlite import ArchiveWrite

KEY_CHARS = 256

TABLES = (
    """CREATE TABLE archive (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            value TEXT,
            value_hash TEXT NOT NULL,
            kind TEXT NOT NULL,
            rule TEXT NOT NULL,
            role TEXT NOT NULL,
            first_turn BIGINT NOT NULL,
            last_turn BIGINT NOT NULL,
            first_compaction BIGINT NOT NULL,
            compaction BIGINT NOT NULL,
            seen BIGINT NOT NULL,
            parts TEXT,
            context TEXT,
            sensitive BOOLEAN NOT NULL,
            bytes BIGINT NOT NULL,
            parts_tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('simple', coalesce(parts, ''))) STORED,
            context_tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('simple', coalesce(context, ''))) STORED,
            UNIQUE (conversation_id, value_hash)
        )""",
    f"CREATE INDEX archive_value ON archive (left(value, {KEY_CHARS}) text_pattern_ops)",
    f"CREATE INDEX archive_rvalue ON archive (left(reverse(value), {KEY_CHARS}) "
    f"text_pattern_ops)",
    "CREATE INDEX archive_search ON archive USING gin (parts_tsv, context_tsv)",
    """CREATE TABLE archive_sizes (
            conversation_id TEXT PRIMARY KEY,
            literals BIGINT NOT NULL,
            recallable BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        )""",
    """CREATE TABLE archive_dropped (
            conversation_id TEXT NOT NULL,
            compaction BIGINT NOT NULL,
            value TEXT,
            value_hash TEXT NOT NULL,
            rule TEXT NOT NULL,
            seen BIGINT NOT NULL,
            last_turn BIGINT NOT NULL,
            reason TEXT NOT NULL
        )""",
)

# A context line split as FTS5's unicode61 splits it (runs of letters and digits): the
# ``simple`` parser alone keeps ``45/100``, ``src/app/models.py`` or a URL whole, so that a
# word of them asked alone would find the line in SQLite and not here. Migration
# ``m005_archive_context_split`` (an older log's column is made again, and its index).
CONTEXT_SPLIT = "'[[:punct:][:space:]]+'"  # the runs a context line is cut at
CONTEXT_TSV = ("to_tsvector('simple', regexp_replace(coalesce(context, ''), "
               f"{CONTEXT_SPLIT}, ' ', 'g'))")
SPLIT_CONTEXT = (
    "DROP INDEX archive_search",
    "ALTER TABLE archive DROP COLUMN context_tsv",
    f"ALTER TABLE archive ADD COLUMN context_tsv tsvector GENERATED ALWAYS AS ({CONTEXT_TSV}) "
    f"STORED",
    "CREATE INDEX archive_search ON archive USING gin (parts_tsv, context_tsv)",
)

_COLUMNS = ("value", "kind", "rule", "role", "first_turn", "last_turn", "compaction",
            "conversation_id", "context", "id")


def write(conn: Any, conversation_id: str, compaction: int, entries: Sequence[ArchiveEntry],
          limits: ArchiveLimits) -> ArchiveWrite:
    """``archive_sqlite.write`` for a psycopg connection inside the caller's transaction. The
    conversation's ``archive_sizes`` row is locked first: its writers take turns, other
    conversations' do not wait."""
    conn = _tuples(conn)
    conn.execute("INSERT INTO archive_sizes VALUES (%s, 0, 0, 0) ON CONFLICT DO NOTHING",
                 (conversation_id,))
    conn.execute("SELECT 1 FROM archive_sizes WHERE conversation_id = %s FOR UPDATE",
                 (conversation_id,))
    added = recallable = size = 0
    for e in entries:
        conn.execute(
            "INSERT INTO archive (conversation_id, value, value_hash, kind, rule, role, "
            "first_turn, last_turn, first_compaction, compaction, seen, parts, context, "
            "sensitive, bytes) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, %s) ON CONFLICT (conversation_id, value_hash) DO UPDATE SET "
            "last_turn = greatest(archive.last_turn, excluded.last_turn), "
            "seen = archive.seen + excluded.seen, "
            "compaction = greatest(archive.compaction, excluded.compaction), "
            # a token swept before that a rule extracts now becomes that rule's literal
            "kind = CASE WHEN archive.rule = %s THEN excluded.kind ELSE archive.kind END, "
            "rule = CASE WHEN archive.rule = %s THEN excluded.rule ELSE archive.rule END "
            "RETURNING (xmax = 0)",
            (conversation_id, e.value, e.value_hash, e.kind, e.rule, e.role, e.first_turn,
             e.last_turn, compaction, compaction, e.seen, e.parts, e.context, e.sensitive,
             e.size, SWEPT_RULE, SWEPT_RULE))
        if conn.fetchone()[0]:  # inserted, not updated
            added += 1
            recallable += not e.sensitive
            size += e.size
    row = conn.execute(
        "UPDATE archive_sizes SET literals = literals + %s, recallable = recallable + %s, "
        "bytes = bytes + %s WHERE conversation_id = %s RETURNING literals, bytes, recallable",
        (added, recallable, size, conversation_id)).fetchone()
    literals, total, recallable = row
    dropped = 0
    if literals > limits.max_literals or total > limits.max_bytes:
        victims = []
        for v in conn.execute(
                "SELECT id, value, value_hash, rule, seen, last_turn, sensitive, bytes "
                "FROM archive WHERE conversation_id = %s "
                "ORDER BY rule <> %s, seen, compaction, last_turn, id",  # swept tokens first
                (conversation_id, SWEPT_RULE)).fetchall():
            if literals <= limits.max_literals and total <= limits.max_bytes:
                break
            victims.append(v)
            literals -= 1
            total -= v[7]
        reason = f"archive cap ({limits.max_literals:,} literals, {limits.max_bytes:,} bytes)"
        if victims:
            conn.executemany("INSERT INTO archive_dropped VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                            [(conversation_id, compaction, v[1], v[2], v[3], v[4], v[5], reason)
                             for v in victims])
        conn.execute("DELETE FROM archive WHERE id = ANY(%s)", ([v[0] for v in victims],))
        conn.execute("UPDATE archive_sizes SET literals = %s, bytes = %s, recallable = "
                     "recallable - %s WHERE conversation_id = %s",
                     (literals, total, sum(1 for v in victims if not v[6]), conversation_id))
        dropped = len(victims)
        recallable -= sum(1 for v in victims if not v[6])
    return ArchiveWrite(added, len(entries) - added, dropped, literals, total, recallable)


def count(conn: Any, conversation_id: str) -> int:
    conn = _tuples(conn)
    row = conn.execute("SELECT recallable FROM archive_sizes WHERE conversation_id = %s",
                       (conversation_id,)).fetchone()
    return row[0] if row else 0


def values(conn: Any, conversation_id: str) -> list[str]:
    conn = _tuples(conn)
    return [row[0] for row in conn.execute(
        "SELECT value FROM archive WHERE conversation_id = %s AND NOT sensitive ORDER BY id",
        (conversation_id,))]


def dropped(conn: Any, conversation_id: str) -> list[dict[str, object]]:
    conn = _tuples(conn)
    names = ("compaction", "value", "value_hash", "rule", "seen", "last_turn", "reason")
    return [dict(zip(names, row)) for row in conn.execute(
        f"SELECT {', '.join(names)} FROM archive_dropped WHERE conversation_id = %s "
        f"ORDER BY ctid", (conversation_id,))]


def _tuples(conn: Any) -> Any:
    """A cursor of ``conn`` giving tuples (the audit log's connections give dicts)."""
    from psycopg.rows import tuple_row

    return conn.cursor(row_factory=tuple_row)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def recall(conn: Any, query: Query) -> list[ArchiveHit]:
    """``archive_sqlite.recall`` with the same tiers, the same order of asking (the rules'
    literals, then swept tokens while hits are missing) and the same scores."""
    conn = _tuples(conn)
    where, params = query.filters("%s")
    filters = " AND ".join(["NOT a.sensitive", *where])
    select = ", ".join("a." + c for c in _COLUMNS)
    found: dict[int, tuple[str, float, tuple[int, int]]] = {}
    rows: dict[int, tuple] = {}
    text, words = query.text, query.words
    key = text[:KEY_CHARS]

    def take(tier: str, sql: str, args: Sequence[object], within: Any = None,
             cap: int = CANDIDATES, swept: bool = False) -> None:
        sql = sql.replace("{filters}", f"{filters} AND a.rule {'=' if swept else '<>'} %s")
        for row in conn.execute(sql, [*args, *params, SWEPT_RULE, cap]).fetchall():
            rows[row[9]] = row
            got = within(row) if within else 0.0
            rank_tier, score = got if isinstance(got, tuple) else (tier, got)
            better(found, row[9], rank_tier, tier_score(score, swept), (row[6], row[5]))

    def enough() -> bool:
        return len(found) >= query.limit

    def closeness(row: tuple) -> float:
        return query.closeness(row[0])

    rkey = text[::-1][:KEY_CHARS]
    affixes = (("prefix", f"SELECT {select} FROM archive a WHERE left(a.value, {KEY_CHARS}) "
                          f"LIKE %s AND a.value LIKE %s AND a.value <> %s AND {{filters}} "
                          f"LIMIT %s", [_like(key) + "%", _like(text) + "%", text]),
               ("suffix", f"SELECT {select} FROM archive a WHERE left(reverse(a.value), "
                          f"{KEY_CHARS}) LIKE %s AND a.value LIKE %s AND a.value <> %s "
                          f"AND {{filters}} LIMIT %s",
                [_like(rkey) + "%", "%" + _like(text), text]))
    for swept in (False, True):
        take("exact", f"SELECT {select} FROM archive a WHERE left(a.value, {KEY_CHARS}) = %s "
                      f"AND a.value = %s AND {{filters}} LIMIT %s", [key, text], swept=swept)
    for swept in (False, True):
        if not enough():
            for tier, sql, args in affixes:
                take(tier, sql, args, closeness, swept=swept)
    prefix = " <-> ".join(w.lower() for w in words[:-1]) + \
        (" <-> " if len(words) > 1 else "") + words[-1].lower() + ":*" if words else ""
    parts = (("part", "phraseto_tsquery('simple', %s)", " ".join(words)),
             ("part_prefix", "to_tsquery('simple', %s)", prefix))
    for tier, tsquery, match in parts:
        for swept in (False, True):
            if words and not enough():
                take(tier, f"SELECT {select} FROM archive a WHERE a.parts_tsv @@ {tsquery} "
                           f"AND {{filters}} ORDER BY a.id DESC LIMIT %s", [match], closeness,
                     swept=swept)
    # context words as in SQLite: the same words asked, the same conditions and the same score
    # within the tier (coverage, proximity to the value, line length), AND first, then OR
    asked = [w.lower() for w in context_terms(words)]
    ruled = any(rows[k][2] != SWEPT_RULE for k in found)
    if asked and (not ruled or (" " in text and not enough())):
        # each word, or a longer token holding it (a camelCase name's part: ``compounds``)
        values = f"SELECT a.value FROM archive a WHERE a.parts_tsv @@ to_tsquery('simple', %s) " \
                 f"AND {filters} ORDER BY a.id DESC LIMIT %s"
        spelled = ["(" + " | ".join([w, *compounds(w, (
            row[0] for row in conn.execute(values, [w, *params, COMPOUND_VALUES]).fetchall()))])
            + ")" for w in asked]
        joiners = ("&", "|") if len(asked) > 1 else ("&",)
        for i, joiner in enumerate(joiners):
            for swept in (False, True):
                if (i == 0 and not swept) or not enough():
                    take("context", f"SELECT {select} FROM archive a WHERE a.context_tsv @@ "
                                    f"to_tsquery('simple', %s) AND {{filters}} "
                                    f"ORDER BY a.id DESC LIMIT %s",
                         [f" {joiner} ".join(spelled)],
                         lambda row: context_match(asked, row[8], row[0]),
                         CONTEXT_CANDIDATES, swept=swept)
    return [ArchiveHit(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                       round(SCORES[found[k][0]] + found[k][1], 4), found[k][0])
            for k in rank(found, query.limit) for row in (rows[k],)]


# ── copying (``firewall audit copy``): ``archive_sqlite.export``/``insert`` for PostgreSQL ─────

def export(conn: Any) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    conn = _tuples(conn)
    rows = [dict(zip(ROW_FIELDS, row)) for row in conn.execute(
        f"SELECT {', '.join(ROW_FIELDS)} FROM archive ORDER BY id").fetchall()]
    dropped_rows = [dict(zip(DROPPED_FIELDS, row)) for row in conn.execute(
        f"SELECT {', '.join(DROPPED_FIELDS)} FROM archive_dropped ORDER BY ctid").fetchall()]
    return rows, dropped_rows


def insert(conn: Any, rows: Sequence[dict[str, object]],
           dropped_rows: Sequence[dict[str, object]] = ()) -> int:
    """``archive_sqlite.insert`` inside the caller's transaction."""
    conn = _tuples(conn)
    added = 0
    touched: set[object] = set()
    for r in rows:
        conn.execute(
            f"INSERT INTO archive ({', '.join(ROW_FIELDS)}) VALUES "
            f"({', '.join(['%s'] * len(ROW_FIELDS))}) "
            f"ON CONFLICT (conversation_id, value_hash) DO NOTHING RETURNING id",
            [bool(r[f]) if f == "sensitive" else r[f] for f in ROW_FIELDS])
        if conn.fetchone() is not None:
            added += 1
            touched.add(r["conversation_id"])
    for d in dropped_rows:
        conn.execute(
            f"INSERT INTO archive_dropped SELECT {', '.join(['%s'] * len(DROPPED_FIELDS))} "
            f"WHERE NOT EXISTS (SELECT 1 FROM archive_dropped WHERE conversation_id = %s AND "
            f"compaction = %s AND value_hash = %s)",
            [*(d[f] for f in DROPPED_FIELDS), d["conversation_id"], d["compaction"],
             d["value_hash"]])
    if touched:
        conn.execute(
            "INSERT INTO archive_sizes SELECT conversation_id, count(*), "
            "count(*) FILTER (WHERE NOT sensitive), sum(bytes) FROM archive "
            "WHERE conversation_id = ANY(%s) GROUP BY conversation_id "
            "ON CONFLICT (conversation_id) DO UPDATE SET literals = excluded.literals, "
            "recallable = excluded.recallable, bytes = excluded.bytes", (list(touched),))
    return added
