"""Forgetting, in an audit log's archive, what a later compaction learnt is a secret.

A compaction archives what its scan found: a value no rule took for a secret is kept in clear,
with its context line (an id, a swept token). When a later compaction finds it sensitive
(``password: <it>``), the ledger hides it from then on, and so must the archive, in every
conversation of the log (a token pasted into two sessions is one secret): before that
compaction's entries are written, every row whose value is, holds or lies inside a secret the
conversation has not hashed yet becomes a hash-only row (no value, parts or context, out of the
FTS index), every context line holding one has it replaced by ``[secret]`` (in any spelling
``archive`` masks), and the records of the cap keep no such value.

Which rows: those of the writing conversation are all tested by the database (as before: the
cap bounds them); in the other conversations, only the rows the indexes name are read
(``_sqlite_lookups``, ``_postgres_lookups``): the value's hash (an exact value), value ranges
(a value lying inside a spelling, or ending with one) and the FTS index (a value or context
line holding one: the words of a spelling bounded inside it, or its last word as a prefix, see
``_narrowing``). What those miss elsewhere: a spelling with no inner word, glued after letters
or digits (a piece of a longer base64 run, ``xyz<secret>``), or written with ``\\uXXXX``
escapes, in a context line or inside a longer value; and a record of the cap holding one (only
an equal one is found). A compaction with no secret runs no query here; one with only secrets
its conversation has hashed, one.

Then the FTS index is merged (a deleted token stays readable in its segment until a merge),
SQLite zeroes what it frees and its log checkpoints its WAL (``SQLiteAuditLog.write_archive``:
the frames of the old pages would keep it); PostgreSQL keeps the old row versions, in the
table, its indexes and its WAL segments, until its next ``VACUUM`` (autovacuum) reuses them:
nothing here runs ``VACUUM FULL`` (it locks the table while it rewrites it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..literals import SECRET_MIN_CHARS, SecretIndex
from .archive import ArchiveEntry, _masker, spelled, terms
from .archive_postgres import CONTEXT_SPLIT, KEY_CHARS
from .archive_sqlite import TOP
from .keys import escape_surrogates


class Forgotten(NamedTuple):
    """What a write forgot: rows made hash-only, rows whose context line was masked."""

    hidden: int = 0
    masked: int = 0


def secret_entries(entries: Sequence[ArchiveEntry]) -> dict[str, str]:
    """The sensitive entries' hashes → their secrets (most compactions have none)."""
    return {e.value_hash: e.secret for e in entries if e.sensitive and e.secret}


def as_written(secrets: Iterable[str]) -> list[str]:
    """``secrets`` as the archive writes text (a lone surrogate as its ``\\udXXX`` escape)."""
    return list(dict.fromkeys(escape_surrogates(s) for s in secrets))


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


def forget_sqlite(conn: Any, conversation_id: str, entries: Sequence[ArchiveEntry]
                  ) -> Forgotten:
    """``plan`` applied to a SQLite audit log's archive inside the caller's write transaction
    (the FTS index follows)."""
    new = _new_secrets(conn, "?", "sensitive = 1", conversation_id, entries)
    if not new:
        return Forgotten()
    secrets, rows, hidden, masked = _search(conn, "sqlite", conversation_id, new)
    if hidden or masked:  # the old text is zeroed where SQLite frees it, not left in free space
        conn.execute("PRAGMA secure_delete = ON")
    conn.executemany("INSERT INTO archive_parts (archive_parts, rowid, parts) "
                     "VALUES ('delete', ?, ?)", [(k, rows[k][4]) for k in hidden])
    gone = [k for k in hidden if rows[k][3] is not None] + [k for k, _ in masked]
    conn.executemany("INSERT INTO archive_context (archive_context, rowid, context) "
                     "VALUES ('delete', ?, ?)", [(k, rows[k][3]) for k in gone])
    conn.executemany("UPDATE archive SET value = NULL, rvalue = NULL, parts = NULL, "
                     "context = NULL, sensitive = 1 WHERE id = ?", [(k,) for k in hidden])
    conn.executemany("UPDATE archive SET context = ? WHERE id = ?",
                     [(text, k) for k, text in masked])
    conn.executemany("INSERT INTO archive_context (rowid, context) VALUES (?, ?)",
                     [(k, text) for k, text in masked])
    conn.executemany("UPDATE archive_sizes SET recallable = recallable - ? "
                     "WHERE conversation_id = ?",
                     [(n, c) for c, n in Counter(rows[k][1] for k in hidden).items()])
    # an FTS5 delete only marks its tokens deleted (SQLite 3.44's secure-delete aside): their
    # segments keep them, readable, until merged; rare enough to merge all at once
    for table, changed in (("archive_parts", hidden), ("archive_context", gone)):
        if changed:
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    _forget_dropped(conn, "?", conversation_id, secrets, list(new))
    return Forgotten(len(hidden), len(masked))


def forget_postgres(conn: Any, conversation_id: str, entries: Sequence[ArchiveEntry]
                    ) -> Forgotten:
    """``forget_sqlite`` for a psycopg connection (its ``tsvector`` columns are generated: they
    follow the rows)."""
    from psycopg.rows import tuple_row

    conn = conn.cursor(row_factory=tuple_row)
    new = _new_secrets(conn, "%s", "sensitive", conversation_id, entries)
    if not new:
        return Forgotten()
    secrets, rows, hidden, masked = _search(conn, "postgresql", conversation_id, new)
    if hidden or masked:
        # writers of many conversations at once: each locks the conversations it changes in one
        # order (its own too, which ``archive_postgres.write`` locks again), before any row,
        # so two compactions forgetting in each other's conversations never deadlock
        touched = {rows[k][1] for k in [*hidden, *(k for k, _ in masked)]} | {conversation_id}
        conn.execute("SELECT 1 FROM archive_sizes WHERE conversation_id = ANY(%s) "
                     "ORDER BY conversation_id FOR UPDATE", (sorted(touched),))
    # the rows read before the locks: a row a cap has evicted since is not counted
    gone = Counter(c for (c,) in conn.execute(
        "UPDATE archive SET value = NULL, parts = NULL, context = NULL, sensitive = true "
        "WHERE id = ANY(%s) AND NOT sensitive RETURNING conversation_id", (hidden,)).fetchall()) \
        if hidden else Counter()
    for key, text in masked:
        conn.execute("UPDATE archive SET context = %s WHERE id = %s", (text, key))
    for conversation, n in gone.items():
        conn.execute("UPDATE archive_sizes SET recallable = recallable - %s "
                     "WHERE conversation_id = %s", (n, conversation))
    _forget_dropped(conn, "%s", conversation_id, secrets, list(new))
    return Forgotten(sum(gone.values()), len(masked))


def _search(conn: Any, dialect: str, conversation_id: str, new: dict[str, str]
            ) -> tuple[list[str], dict[Any, tuple[Any, ...]], list[Any], list[tuple[Any, str]]]:
    """The secrets (as the archive writes text), the rows ``plan`` may change by id (id,
    conversation, value, context, and in SQLite parts): the learning conversation's, each
    tested by the database, and the others' the indexes name; and ``plan``'s answer."""
    secrets = as_written(new.values())
    if dialect == "sqlite":
        mark, select, clear, find = "?", _SQLITE_ROW, "a.sensitive = 0", "instr({}, {})"
        lookups = _sqlite_lookups(list(new), _spellings(secrets))
    else:
        mark, select, clear, find = "%s", _POSTGRES_ROW, "NOT a.sensitive", "strpos({}, {})"
        lookups = _postgres_lookups(list(new), _spellings(secrets))
    rows: dict[Any, tuple[Any, ...]] = {}
    for sql, args in [*((f"{select} WHERE a.conversation_id = {mark} AND {clear} AND ({where})",
                         [conversation_id, *args])
                        for where, args in _candidates(secrets, mark, find)), *lookups]:
        rows.update((r[0], tuple(r)) for r in conn.execute(sql, args).fetchall())
    hidden, masked = plan(((r[0], r[2], r[3]) for r in rows.values()), secrets)
    return secrets, rows, hidden, masked


def _new_secrets(conn: Any, mark: str, sensitive: str, conversation_id: str,
                 entries: Sequence[ArchiveEntry]) -> dict[str, str]:
    """The secrets of ``entries`` (hash → secret) the conversation has not hashed yet: none
    (and no query) for a compaction that found no secret. One it hashed already was forgotten
    across the log then; a conversation that archived it in clear since keeps it until a
    compaction of a conversation that has not hashed it learns it."""
    known = secret_entries(entries)
    if not known:
        return {}
    marks = ", ".join([mark] * len(known))
    hashed = {row[0] for row in conn.execute(
        f"SELECT value_hash FROM archive WHERE conversation_id = {mark} AND {sensitive} "
        f"AND value_hash IN ({marks})", (conversation_id, *known)).fetchall()}
    return {h: s for h, s in known.items() if h not in hashed}


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


def _forget_dropped(conn: Any, mark: str, conversation_id: str, secrets: Sequence[str],
                    hashes: Sequence[str]) -> None:
    """The records of the cap keep a dropped value: none that ``plan`` would hide in the
    writing conversation, none equal to a secret in the others (their ``value_hash``)."""
    rows = conn.execute(f"SELECT value FROM archive_dropped WHERE conversation_id = {mark} "
                        f"AND value IS NOT NULL", (conversation_id,)).fetchall()
    values = {r[0] for r in rows}
    hidden, _ = plan(((v, v, None) for v in values), secrets)
    for value in hidden:
        conn.execute(f"UPDATE archive_dropped SET value = NULL WHERE conversation_id = {mark} "
                     f"AND value = {mark}", (conversation_id, value))
    for chunk in _chunks(list(hashes), 500):
        conn.execute(f"UPDATE archive_dropped SET value = NULL WHERE value IS NOT NULL AND "
                     f"value_hash IN ({', '.join([mark] * len(chunk))})", chunk)


# ── a log written before forgetting reached every conversation (migration m006) ──────────────

# a clear row whose hash a hash-only row of the log has: the same value, which another
# conversation learnt is a secret (the hash says nothing of a row holding it, or of a context
# line: those need the secret, which no log keeps)
_KNOWN = ("sensitive = 0 AND value_hash IN (SELECT value_hash FROM archive "
          "WHERE sensitive = 1)")
_KNOWN_PG = "NOT sensitive AND value_hash IN (SELECT value_hash FROM archive WHERE sensitive)"
KNOWN_ELSEWHERE = (
    ("PRAGMA secure_delete = ON", None),
    (f"INSERT INTO archive_parts (archive_parts, rowid, parts) SELECT 'delete', id, parts "
     f"FROM archive WHERE {_KNOWN}", None),
    (f"INSERT INTO archive_context (archive_context, rowid, context) SELECT 'delete', id, "
     f"context FROM archive WHERE {_KNOWN} AND context IS NOT NULL", None),
    *((f"INSERT INTO {table} ({table}) SELECT 'optimize' WHERE EXISTS (SELECT 1 FROM archive "
       f"WHERE {_KNOWN})", None) for table in ("archive_parts", "archive_context")),
    (f"UPDATE archive_sizes SET recallable = recallable - (SELECT count(*) FROM archive "
     f"WHERE conversation_id = archive_sizes.conversation_id AND {_KNOWN}) WHERE "
     f"conversation_id IN (SELECT conversation_id FROM archive WHERE {_KNOWN})",
     f"UPDATE archive_sizes s SET recallable = s.recallable - k.n FROM (SELECT "
     f"conversation_id, count(*) AS n FROM archive WHERE {_KNOWN_PG} GROUP BY "
     f"conversation_id) k WHERE s.conversation_id = k.conversation_id"),
    (f"UPDATE archive SET value = NULL, rvalue = NULL, parts = NULL, context = NULL, "
     f"sensitive = 1 WHERE {_KNOWN}",
     f"UPDATE archive SET value = NULL, parts = NULL, context = NULL, sensitive = true "
     f"WHERE {_KNOWN_PG}"),
    tuple(f"UPDATE archive_dropped SET value = NULL WHERE value IS NOT NULL AND value_hash IN "
          f"(SELECT value_hash FROM archive WHERE {flag})" for flag in ("sensitive = 1",
                                                                         "sensitive")),
)


# ── the rows of other conversations, found by the indexes ────────────────────────────────────

_SQLITE_ROW = "SELECT a.id, a.conversation_id, a.value, a.context, a.parts FROM archive a"
_POSTGRES_ROW = "SELECT a.id, a.conversation_id, a.value, a.context FROM archive a"
# the separators of every index's words (FTS5's unicode61, PostgreSQL's split context and
# ``terms``): ASCII punctuation and spaces; any other character is taken for part of a word,
# which at worst makes a spelling's bounded words fewer
_WORDS = re.compile(r"[^\t\n\v\f\r !-/:-@\[-`{-~]+")
_LETTER = re.compile(r"[^\W_]")
RANGE_CHARS = 64  # a range's upper bound: this much of a spelling, then TOP
BATCH = 400  # ranges or hashes per query


def _spellings(secrets: Sequence[str]) -> list[str]:
    """Every spelling ``plan`` looks for (URL-encoded, base64, JSON-decoded) of at least
    ``SECRET_MIN_CHARS`` characters, as the archive writes text (a decoded lone surrogate as
    its escape)."""
    spelled_too = [*secrets, *spelled(secrets)]
    return list(dict.fromkeys(escape_surrogates(s) for s in [*spelled_too,
                                                            *SecretIndex(spelled_too).secrets]
                              if len(s) >= SECRET_MIN_CHARS))


def _narrowing(spelling: str) -> tuple[str, bool] | None:
    """The piece of ``spelling`` whose words an index finds in any text holding it, and
    whether its last word is to be matched as a prefix: its words bounded by separators inside
    it (whatever touches it there, they are words of the text); else its last word, bounded on
    its left (the text's word may go on); else, one word, the spelling itself as a prefix,
    which misses it glued after letters or digits. None: no word to look for."""
    words = list(_WORDS.finditer(spelling))
    inner = [w for w in words if w.start() > 0 and w.end() < len(spelling)]
    found: list[tuple[str, bool]] = []
    if inner and _LETTER.search(spelling[inner[0].start():inner[-1].end()]):
        found.append((spelling[inner[0].start():inner[-1].end()], False))
    if len(words) >= 2 and len(words[-1].group()) >= 3 and _LETTER.search(words[-1].group()):
        found.append((words[-1].group(), True))
    if found:  # both are sound: the one with the longest word names the fewest lines
        # (``sk_test_EXAMPLE123``: "test" names thousands, EXAMPLE123* a few)
        return max(found, key=lambda f: max(len(w) for w in _WORDS.findall(f[0])))
    return (spelling, True) if _LETTER.search(spelling) else None


def _part_words(text: str, prefix: bool) -> str:
    """``text``'s terms as ``value_parts`` writes them; as a prefix, the last one a character
    short (a camelCase split may move its last boundary when the value goes on: ABC, ABCd)."""
    words = terms(text)
    if prefix and words and len(words[-1]) > 1:
        words[-1] = words[-1][:-1]
    return " ".join(words)


def _ranges(spellings: Sequence[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Index ranges (low, high, inclusive) of the values lying inside a spelling (from each of
    its characters: a value starting there, of ``SECRET_MIN_CHARS`` or more), and of the
    reversed values starting with a reversed spelling (a value ending with one)."""
    inside, ending = {}, {}
    for s in spellings:
        for i in range(len(s) - SECRET_MIN_CHARS + 1):
            inside[(s[i:i + SECRET_MIN_CHARS], s[i:i + RANGE_CHARS] + TOP)] = None
        reverse = s[::-1][:RANGE_CHARS]
        ending[(reverse, reverse + TOP)] = None
    return list(inside), list(ending)


def _sqlite_lookups(hashes: Sequence[str], spellings: Sequence[str]
                    ) -> list[tuple[str, list[str]]]:
    """The queries (and arguments) of the rows of any conversation ``plan`` may change, each
    served by an index: ``archive_value_hash``, ``archive_value``, ``archive_rvalue`` and the
    FTS tables."""
    queries = [(f"{_SQLITE_ROW} WHERE a.value_hash IN ({', '.join('?' * len(chunk))}) "
                f"AND a.sensitive = 0", chunk) for chunk in _chunks(list(hashes), BATCH)]
    for column, ranges in zip(("value", "rvalue"), _ranges(spellings)):
        for chunk in _chunks(ranges, BATCH):
            # each range one walk of the column's index: left to itself, the planner built an
            # automatic index of the whole archive per query (0.1 s each on 10k rows)
            table = f"FROM r CROSS JOIN archive a INDEXED BY archive_{column}"
            queries.append((f"WITH r (lo, hi) AS (VALUES {', '.join(['(?, ?)'] * len(chunk))}) "
                            f"{_SQLITE_ROW.replace('FROM archive a', table)} "
                            f"ON a.{column} BETWEEN r.lo AND r.hi WHERE a.sensitive = 0",
                            [x for pair in chunk for x in pair]))
    parts, contexts = [], []
    for text, prefix in filter(None, map(_narrowing, spellings)):
        star = " *" if prefix else ""
        parts.append(f'("{_part_words(text, prefix)}"{star})')
        contexts.append('("' + text.replace('"', '""') + f'"{star})')
    for table, matches in (("archive_parts", parts), ("archive_context", contexts)):
        for chunk in _chunks(matches, CONDITIONS):
            queries.append((f"{_SQLITE_ROW} WHERE a.sensitive = 0 AND a.id IN (SELECT rowid "
                            f"FROM {table} WHERE {table} MATCH ?)", [" OR ".join(chunk)]))
    return queries


def _postgres_lookups(hashes: Sequence[str], spellings: Sequence[str]
                      ) -> list[tuple[str, list[Any]]]:
    """``_sqlite_lookups`` for PostgreSQL: the value indexes hold the first ``KEY_CHARS``
    characters (compared bytewise, as ``text_pattern_ops`` does), the ``tsvector`` columns
    split as SQLite's FTS does."""
    queries: list[tuple[str, list[Any]]] = [
        (f"{_POSTGRES_ROW} WHERE a.value_hash = ANY(%s) AND NOT a.sensitive", [list(hashes)])]
    for column, ranges in zip(("a.value", "reverse(a.value)"), _ranges(spellings)):
        key = f"left({column}, {KEY_CHARS})"
        for chunk in _chunks(ranges, BATCH):
            queries.append((f"{_POSTGRES_ROW} JOIN unnest(%s::text[], %s::text[]) AS r (lo, hi) "
                            f"ON {key} ~>=~ r.lo AND {key} ~<=~ r.hi WHERE NOT a.sensitive",
                            [[lo for lo, _ in chunk], [hi for _, hi in chunk]]))
    split = f"regexp_replace(%s, {CONTEXT_SPLIT}, ' ', 'g')"
    parts, contexts = [], []
    for text, prefix in filter(None, map(_narrowing, spellings)):
        if prefix:  # one word (a prefix) for a context line; terms (the last a prefix) for parts
            words = [f"'{w}'" for w in _part_words(text, prefix).split()]  # letters, digits
            parts.append(("to_tsquery('simple', %s)", " <-> ".join(words) + ":*"))
            contexts.append((f"to_tsquery('simple', quote_literal({split}) || ':*')", text))
        else:
            parts.append(("phraseto_tsquery('simple', %s)", _part_words(text, prefix)))
            contexts.append((f"phraseto_tsquery('simple', {split})", text))
    for column, matches in (("parts_tsv", parts), ("context_tsv", contexts)):
        for chunk in _chunks(matches, CONDITIONS):
            queries.append((f"{_POSTGRES_ROW} WHERE NOT a.sensitive AND a.{column} @@ "
                            f"({' || '.join(q for q, _ in chunk)})", [a for _, a in chunk]))
    return queries


def _chunks(items: Sequence[Any], size: int) -> list[Any]:
    return [items[i:i + size] for i in range(0, len(items), size)]


__all__ = ["Forgotten", "as_written", "forget_postgres", "forget_sqlite", "plan",
           "secret_entries"]
