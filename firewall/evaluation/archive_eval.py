"""What the archive is worth, measured by ``firewall eval`` at each cut: three shares of the
ID-like gold, and how well a partial memory of a value finds it again.

* **in context**: the composed context holds it (the summary when the agent made one, the
  ledger block, the kept tail);
* **one call away**: not in the context, but an archived (non-sensitive) value is it or holds
  it, so a ``recall`` returns it;
* **lost**: neither.

Recall quality, for each gold string one call away, queried as an agent that remembers only
part of it would, against the cut's archive in SQLite (the real FTS5 index and ranking):
(a) a **fragment**: the base name of a path, else one name part (the longest) of a
snake_case/camelCase/dotted name, else an id's first 6 characters; (b) **three words of its
context line** (words of 4+ letters that are not parts of the value). Found: a top-5 hit is the
gold or holds it. Words: the three longest of 4+ letters, in the line's order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..audit.archive import ArchiveEntry, ArchiveLimits, Query, archive_entries, terms
from ..compaction.ledger import LITERAL_MAX_CHARS
from ..literals import Literal
from ..turns import Turn, call_text
from .gold import occurs  # the gold's own test: shares agree with eval's recall

TOP = 5
EVAL_KEY = b"archive-eval"  # hashes only: the eval's archive lives in memory for one cut


@dataclass
class ArchiveShares:
    """Counts over the ID-like gold of one or many cuts."""

    gold: int = 0
    in_context: int = 0
    one_call: int = 0
    lost: int = 0
    fragment_queries: int = 0
    fragment_top5: int = 0
    context_queries: int = 0
    context_top5: int = 0

    def add(self, other: ArchiveShares | dict[str, int]) -> None:
        for f in fields(self):
            value = other[f.name] if isinstance(other, dict) else getattr(other, f.name)
            setattr(self, f.name, getattr(self, f.name) + value)

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> dict[str, Any]:
        def share(n: int, of: int) -> float | None:
            return n / of if of else None

        return {**self.counts(),
                "share_in_context": share(self.in_context, self.gold),
                "share_one_call": share(self.one_call, self.gold),
                "share_lost": share(self.lost, self.gold),
                "fragment_top5_share": share(self.fragment_top5, self.fragment_queries),
                "context_top5_share": share(self.context_top5, self.context_queries)}


def fragment(value: str) -> str:
    """What an agent that half-remembers ``value`` would ask for (see the module)."""
    trimmed = value.rstrip("/")
    if "/" in trimmed:
        base = trimmed.rsplit("/", 1)[1]
        if len(base) >= 3:
            return base
    parts = terms(value)
    if len(parts) >= 2 and any(c.isalpha() for c in value):
        return max(parts, key=len)
    return value[:6]


def context_words(entry: ArchiveEntry, count: int = 3) -> list[str]:
    """``count`` words of ``entry``'s context line that are not parts of its value: the
    longest (what one remembers of a line is its distinctive words, not ``File`` or
    ``line``), in the order the line has them."""
    own = {t.lower() for t in terms(entry.value or "")}
    candidates: list[str] = []
    for word in terms(entry.context or ""):
        if len(word) >= 4 and word.isalpha() and word.lower() not in own and \
                word not in candidates:
            candidates.append(word)
    longest = set(sorted(candidates, key=len, reverse=True)[:count])
    return [w for w in candidates if w in longest][:count]


def measure_cut(turns: Sequence[Turn], literals: Sequence[Literal], gold: Sequence[Any],
                context: str, conversation_id: str = "eval") -> tuple[ArchiveShares, list[str]]:
    """The shares of one cut's ID-like ``gold`` (``gold.Gold``), the literals its span's
    scan extracted (``Firewall.pin(...).literals``, turn numbers indexing ``turns``) and the
    composed ``context`` text; returns them with the archived non-sensitive values."""

    def text_of(lit: Literal) -> str | None:
        if not 0 <= lit.turn < len(turns):
            return None
        turn = turns[lit.turn]
        return turn.text if lit.field == "text" or lit.value in turn.text else call_text(turn)

    entries = archive_entries([lit for lit in literals if len(lit.value) <= LITERAL_MAX_CHARS],
                              text_of, key=EVAL_KEY)
    kept = [e for e in entries if not e.sensitive]
    values = [e.value for e in kept if e.value is not None]
    joined = "\n".join(values)
    shares = ArchiveShares()
    away: list[Any] = []
    for g in gold:
        if not g.id_like:
            continue
        shares.gold += 1
        if occurs(g.literal, context):
            shares.in_context += 1
        elif occurs(g.literal, joined):
            shares.one_call += 1
            away.append(g)
        else:
            shares.lost += 1
    if away:
        _quality(shares, away, kept, conversation_id)
    return shares, values


def _quality(shares: ArchiveShares, away: Sequence[Any], kept: Sequence[ArchiveEntry],
             conversation_id: str) -> None:
    from ..audit import archive_sqlite

    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    try:
        for statement in archive_sqlite.TABLES:
            conn.execute(statement)
        archive_sqlite.write(conn, conversation_id, 1, list(kept), ArchiveLimits())

        def found(query: str, gold: str) -> bool:
            hits = archive_sqlite.recall(conn, Query.of(query, limit=TOP))
            return any(h.value == gold or occurs(gold, h.value) for h in hits)

        for g in away:
            shares.fragment_queries += 1
            shares.fragment_top5 += found(fragment(g.literal), g.literal)
            holder = next((e for e in kept if e.value == g.literal), None) or \
                next((e for e in kept if e.value and occurs(g.literal, e.value)), None)
            words = context_words(holder) if holder is not None else []
            if words:
                shares.context_queries += 1
                shares.context_top5 += found(" ".join(words), g.literal)
    finally:
        conn.close()


def format_shares(result: dict[str, Any]) -> str:
    """The report's archive table: per source and fraction, then in total."""
    rows = result.get("archive") or []
    if not rows:
        return ""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:.1f}"

    lines = ["\nThe archive (ID-like gold): in the context (summary, block, kept tail), one "
             "`recall` call away, lost; and recall quality, top-5 hits, for the gold one call "
             "away queried by a fragment (base name, name part, an id's first 6 characters) "
             "and by three words of its context line:",
             "| source | frac | gold | in context | one call away | lost | fragment top-5 | "
             "context words top-5 |", "|" + "---|" * 8]
    last = {"all": "~"}  # the "all" rows after the others, as in the main table
    for row in sorted(rows, key=lambda r: (last.get(r["source"], r["source"]),
                                           last.get(r["frac"], r["frac"]))):
        s = row["shares"]
        lines.append(f"| {row['source']} | {row['frac']} | {s['gold']} | "
                     f"{pct(s['share_in_context'])} | {pct(s['share_one_call'])} | "
                     f"{pct(s['share_lost'])} | {pct(s['fragment_top5_share'])} "
                     f"({s['fragment_queries']}) | {pct(s['context_top5_share'])} "
                     f"({s['context_queries']}) |")
    return "\n".join(lines)
