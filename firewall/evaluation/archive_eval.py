"""What the archive is worth, measured by ``firewall eval`` at each cut: three shares of the
ID-like gold, and how well a partial memory of a value finds it again.

* **in context**: the composed context holds it (the summary when the agent made one, the
  ledger block, the kept tail);
* **one call away**: not in the context, but an archived (non-sensitive) value is it or holds
  it, so a ``recall`` returns it (a token with its sentence's punctuation, ``1809,``, by a
  rule's literal holding its bare form: the sweep archives no such token, see ``archive.bare``);
* **lost**: neither.

Of the gold one call away, ``one_call_token`` is what only the token tier holds (a swept token,
no rule's literal, is it or holds it: see ``archive``): what the archive owes to the sweep, not
to the packs. The same three shares are counted for the addressing subset (``addr_*``: gold a
later call passes to name something). Recall quality is also counted over the gold a rule's
literal holds (``*_rule_*``): the queries a swept token could crowd out.

Recall quality, for each gold string one call away, queried as an agent that remembers only
part of it would, against the cut's archive in SQLite (the real FTS5 index and ranking):
(a) a **fragment**: the base name of a path, else one name part (the longest) of a
snake_case/camelCase/dotted name, else an id's first 6 characters; (b) **three words of its
context line** (words of 4+ letters that are not parts of the value). Found: a top-5 hit is the
gold or holds it (its bare form, when only that is archived). Words: the three longest of 4+
letters, in the line's order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..audit.archive import (SWEPT_KIND, SWEPT_RULE, ArchiveEntry, ArchiveLimits, Query,
                             archive_entries, bare, terms)
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
    one_call_token: int = 0  # of one_call: held by a swept token only (the token tier)
    addr_gold: int = 0  # the addressing subset of gold
    addr_in_context: int = 0
    addr_one_call: int = 0
    addr_one_call_token: int = 0
    addr_lost: int = 0
    # recall quality over the gold a rule's literal holds: what a swept token could crowd out
    fragment_rule_queries: int = 0
    fragment_rule_top5: int = 0
    context_rule_queries: int = 0
    context_rule_top5: int = 0

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
                "share_one_call_token": share(self.one_call_token, self.gold),
                "addr_share_in_context": share(self.addr_in_context, self.addr_gold),
                "addr_share_one_call": share(self.addr_one_call, self.addr_gold),
                "addr_share_one_call_token": share(self.addr_one_call_token, self.addr_gold),
                "addr_share_lost": share(self.addr_lost, self.addr_gold),
                "fragment_top5_share": share(self.fragment_top5, self.fragment_queries),
                "context_top5_share": share(self.context_top5, self.context_queries),
                "fragment_rule_top5_share": share(self.fragment_rule_top5,
                                                  self.fragment_rule_queries),
                "context_rule_top5_share": share(self.context_rule_top5,
                                                 self.context_rule_queries)}


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
                context: str, conversation_id: str = "eval",
                span: Sequence[int] | None = None) -> tuple[ArchiveShares, list[str]]:
    """The shares of one cut's ID-like ``gold`` (``gold.Gold``), the literals its span's
    scan extracted (``Firewall.pin(...).literals``, turn numbers indexing ``turns``) and the
    composed ``context`` text; returns them with the archived non-sensitive values. ``span``:
    the indexes of the compacted turns, swept for the token tier (None: the tier is off)."""

    def text_of(lit: Literal) -> str | None:
        if not 0 <= lit.turn < len(turns):
            return None
        turn = turns[lit.turn]
        return turn.text if lit.field == "text" or lit.value in turn.text else call_text(turn)

    entries = archive_entries([lit for lit in literals if len(lit.value) <= LITERAL_MAX_CHARS],
                              text_of, key=EVAL_KEY,
                              span=None if span is None else [(i, turns[i]) for i in span])
    kept = [e for e in entries if not e.sensitive]
    values = [e.value for e in kept if e.value is not None]
    ruled = "\n".join(e.value for e in kept if e.value is not None and e.rule != SWEPT_RULE)
    swept = "\n".join(e.value for e in kept if e.value is not None and e.rule == SWEPT_RULE)
    shares = ArchiveShares()
    away: list[Any] = []
    for g in gold:
        if not g.id_like:
            continue
        addressing = g.addresses
        shares.gold += 1
        shares.addr_gold += addressing
        if occurs(g.literal, context):
            shares.in_context += 1
            shares.addr_in_context += addressing
        elif (holder := archived_by(g.literal, ruled, swept)) is not None:
            token = holder == SWEPT_KIND
            shares.one_call += 1
            shares.one_call_token += token
            shares.addr_one_call += addressing
            shares.addr_one_call_token += addressing and token
            away.append(g)
        else:
            shares.lost += 1
            shares.addr_lost += addressing
    if away:
        _quality(shares, away, kept, conversation_id)
    return shares, values


def archived_by(literal: str, ruled: str, swept: str) -> str | None:
    """Whether a gold string is one call away, and by which tier: ``"rule"`` when a rule's
    archived value is it or holds it (``ruled``: those values, one a line), else ``"token"``
    (``SWEPT_KIND``) when only a swept token does (``swept``), else None (lost). ``eval`` and
    ``firewall replay`` count their shares with it."""
    if occurs(literal, ruled):
        return "rule"
    if occurs(literal, swept):
        return SWEPT_KIND
    # a token of free text with its sentence's punctuation (``1809,``): the sweep archives none
    # where a rule's literal is its bare form, which a recall finds by its parts
    return "rule" if occurs(bare(literal) or "", ruled) else None


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
            # held only bare (``archived_by``): what a hit must be or hold is the bare form
            gold = g.literal if any(e.value and occurs(g.literal, e.value) for e in kept) \
                else bare(g.literal) or g.literal
            # the rules' literal first, as recall ranks them
            holder = next((e for e in kept if e.value == gold), None) or \
                next((e for e in kept if e.value and e.rule != SWEPT_RULE
                      and occurs(gold, e.value)), None) or \
                next((e for e in kept if e.value and occurs(gold, e.value)), None)
            ruled = holder is not None and holder.rule != SWEPT_RULE
            hit = found(fragment(g.literal), gold)
            shares.fragment_queries += 1
            shares.fragment_top5 += hit
            shares.fragment_rule_queries += ruled
            shares.fragment_rule_top5 += ruled and hit
            words = context_words(holder) if holder is not None else []
            if words:
                hit = found(" ".join(words), gold)
                shares.context_queries += 1
                shares.context_top5 += hit
                shares.context_rule_queries += ruled
                shares.context_rule_top5 += ruled and hit
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
             "`recall` call away (of which: held only by a token the sweep archived, no rule's "
             "literal: the token tier), lost; the same for the addressing gold; and recall "
             "quality, top-5 hits, for the gold one call away queried by a fragment (base name, "
             "name part, an id's first 6 characters) and by three words of its context line "
             "(in brackets: the queries; then the same over the gold a rule's literal holds):",
             "| source | frac | gold | in context | one call away | of which token tier | lost "
             "| address gold | addr in context | addr one call away | addr lost "
             "| fragment top-5 | context words top-5 | rules' gold: fragment | context words |",
             "|" + "---|" * 15]
    last = {"all": "~"}  # the "all" rows after the others, as in the main table
    for row in sorted(rows, key=lambda r: (last.get(r["source"], r["source"]),
                                           last.get(r["frac"], r["frac"]))):
        s = row["shares"]
        lines.append(f"| {row['source']} | {row['frac']} | {s['gold']} | "
                     f"{pct(s['share_in_context'])} | {pct(s['share_one_call'])} | "
                     f"{pct(s.get('share_one_call_token'))} | {pct(s['share_lost'])} | "
                     f"{s.get('addr_gold', 0)} | {pct(s.get('addr_share_in_context'))} | "
                     f"{pct(s.get('addr_share_one_call'))} | {pct(s.get('addr_share_lost'))} | "
                     f"{pct(s['fragment_top5_share'])} ({s['fragment_queries']}) | "
                     f"{pct(s['context_top5_share'])} ({s['context_queries']}) | "
                     f"{pct(s.get('fragment_rule_top5_share'))} "
                     f"({s.get('fragment_rule_queries', 0)}) | "
                     f"{pct(s.get('context_rule_top5_share'))} "
                     f"({s.get('context_rule_queries', 0)}) |")
    return "\n".join(lines)
