"""Replay recorded conversations as a harness would run them, compacting at a watermark.

Each recorded message is appended to a **live context** that starts as the recording's first
message. Whenever the trigger fires (``reactive``: the live context, the new message included,
crosses the watermark; ``preemptive``: before an assistant message, the live context plus the
expected output would cross it), the live context is compacted as ``Firewall.compact_if_due``
does for a harness (its two steps, ``compaction_due`` then ``compact``), with the
conversation's cumulative ledger, so that a later compaction re-compacts the previous summary
and ledger. The following recorded messages are appended to the *compacted* context. When the
trigger fires but no compaction is worth doing (too little fresh material, or a summarizer
that failed just before), nothing is recorded
but the count of such skips (``skipped``); a compaction that failed closed is recorded, the
context unchanged.

After each compaction the composed context (summary + ledger + kept turns) is measured against
the rest of the recording with ``firewall eval``'s gold (``gold.gold_set``): the strict gold
(``gold``, ``lost``, ``recall_*``) and its ID-like part (``*_id_like``), in the composed context
and in the ledger alone (every value it pins: the block writes those that the summary and the
kept turns do not hold; ``ledger_tokens`` is the block's). ``k`` is the index, in the
recording, of the last message the compaction covered (failed closed: would have covered); it
never goes back, since a span opens on the earlier summary, which stands for every message up
to the earlier ``k``. What is written follows ``replaylog``; a sensitive literal is written
``[sensitive]``, in every output.

On a Claude Code session file, each compaction is also made through the agent's hooks
(``hook_eval.ReplayedSession``): the session file as Claude Code would have written it had it
compacted there (its lines up to ``k``, a ``compact_boundary`` record, the summary, the kept
messages), the ``pre-compact``, ``post-compact`` and ``session-start`` handlers fired on it,
and the gold scored in summary + the block they re-inject + kept turns (``recall_hooks*``,
``hooks_tokens``), beside summary + ledger + kept turns.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from ..compaction.budget import Budget, parse_budget
from ..tokens import turn_tokens
from .evaluate import source_of
from .gold import SENTENCE_PUNCTUATION, gold_set, id_like, occurs, uses_after
from .archive_eval import archived_by
from ..audit.archive import SWEPT_KIND
from ..formats import parse_messages
from ..literals import SENSITIVE
from ..compaction.ledger import Ledger, visible_line
from .replaylog import GoldFate, ReplayCompaction, ReplayConversation
from ..tokens import count_tokens
from ..compaction.trigger import BACKING_OFF, SKIPPED, TRIGGER_POLICIES, WATERMARK, Trigger
from ..turns import Conversation, Turn, turn_text

RECALL_TARGET = 0.97  # issue 14: composed-context ID-like recall after every compaction
MAX_TOKENS = 4_096  # preemptive: the output a harness reserves for the next call


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every secret written ``[sensitive]``."""
    secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not secrets:
        return value

    def clean(node: Any) -> Any:
        if isinstance(node, str):
            for secret in secrets:
                node = node.replace(secret, SENSITIVE)
            return node
        if isinstance(node, dict):
            return {clean(k): clean(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [clean(v) for v in node]
        return node

    return clean(value)


@dataclass
class _Live:
    """The composed context of one replay: its turns, and for each the index in the recording
    of the message it is (None for the firewall's summary and ledger messages); ``covered``:
    the last recorded message an earlier compaction covered, which its summary stands for."""

    turns: list[Turn] = field(default_factory=list)
    origin: list[int | None] = field(default_factory=list)
    tokens: int = 0
    covered: int = -1

    def append(self, turn: Turn, index: int) -> None:
        self.turns.append(turn)
        self.origin.append(index)
        self.tokens += turn_tokens(turn)


def replay_conversation(conversation: Conversation, *, firewall: Any, trigger: Trigger,
                        summarizer: Any = None, keep_last: int = 8, source: str = "",
                        contexts: Callable[[dict[str, Any]], None] | None = None,
                        hooks: bool = True) -> ReplayConversation:
    """Replay one recorded conversation; ``contexts`` receives one record per compaction
    (the ``--contexts`` line), already redacted. ``hooks``: on a Claude Code session file,
    also fire the hook handlers at each compaction (``hook_eval.ReplayedSession``)."""
    # secrets (never written in clear) and each literal's rule, from the messages a compaction
    # has seen; scanned as compactions come (most are memo hits: the compaction pinned them),
    # so the part of a recording no compaction reaches is never scanned
    secrets: set[str] = set()
    rules: dict[str, str] = {}
    scanned = 0

    def scan_until(index: int) -> None:
        nonlocal scanned
        if index < scanned:
            return
        turns = conversation.turns[scanned:index + 1]
        for lit in firewall.scan(Conversation(turns, conversation.id, conversation.format)):
            rules.setdefault(lit.value, lit.rule)
            if lit.sensitive:
                secrets.add(lit.value)
        scanned = index + 1

    ledger = Ledger.new(conversation.id)
    session = _replayed_session(conversation, firewall) if hooks else None
    live = _Live()
    # what an archive of the compactions so far holds: the rules' values, and the tokens the
    # token tier swept from the spans (None: the firewall's archive has the tier off)
    archived: set[str] = set()
    limits = getattr(firewall, "archive_limits", None)
    swept: set[str] | None = None if limits is not None and not limits.tokens else set()
    out = ReplayConversation(id=conversation.id, source=source,
                             messages=len(conversation.turns), window=trigger.window,
                             watermark=trigger.watermark, live_tokens=[])

    def compact(at: int) -> None:
        number = len(out.compactions) + 1
        before = live.tokens
        context = Conversation(live.turns, conversation.id, conversation.format)
        # compact_if_due's two steps, so that a skip is counted and the span's end is known
        due = firewall.compaction_due(context, trigger, ledger=ledger, keep_last=keep_last)
        if not due.due:  # the trigger fired (the caller checked); due.skipped says why not
            out.skipped += 1
            return
        result = firewall.compact(context, summarizer, ledger=ledger, compaction=number,
                                  tail_start=due.boundary, must_shrink=True)
        scan_until(at)
        archived.update(result.extracted)
        compaction = _measure(conversation, live, result, ledger, at=at, number=number,
                              boundary=due.boundary, trigger=trigger, before=before,
                              secrets=secrets, rules=rules, session=session,
                              archived=archived, swept=swept)
        out.compactions.append(compaction)
        if contexts is not None:
            contexts(redact({"id": conversation.id, "compaction": number, "k": compaction.k,
                             "context": result.messages, "ledger": ledger.values(),
                             "ledger_tokens": compaction.ledger_tokens,
                             "span_tokens": compaction.span_tokens}, secrets))

    for index, turn in enumerate(conversation.turns):
        if trigger.policy == "preemptive" and turn.role == "assistant" and \
                trigger.fires(live.tokens):
            compact(index)  # before the model call that writes this message
        live.append(turn, index)
        if trigger.policy == "reactive" and trigger.fires(live.tokens):
            compact(index)
        out.live_tokens.append(live.tokens)
    if session is not None:
        session.close()
    _count_rereads(conversation, out.compactions)
    return out


def _count_rereads(conversation: Conversation, compactions: list[ReplayCompaction]) -> None:
    """Each compaction's ``rereads``: the recorded tool calls after it that fetch again what a
    compacted span held, each call counted once, by the last compaction before it. The
    recording's calls are not re-generated: this counts what the agent went on to need from
    compacted text, the re-reads a lossy compaction invites."""
    from .diagnostics import rereads_in_turns

    done = [c for c in compactions if c.compacted]

    def owner(index: int) -> ReplayCompaction:
        return [c for c in done if c.k + 1 <= index][-1]

    for c in done:
        found = rereads_in_turns(conversation.turns, c.k + 1)
        c.rereads = sum(owner(r.index) is c for r in found)


def _measure(conversation: Conversation, live: _Live, result: Any, ledger: Ledger, *, at: int,
             number: int, boundary: int, trigger: Trigger, before: int, secrets: set[str],
             rules: dict[str, str], session: Any = None,
             archived: set[str] | None = None,
             swept: set[str] | None = None) -> ReplayCompaction:
    """Replace the live context by the compacted one and measure the compaction, whose span
    ended before the live context's turn ``boundary``. ``archived``/``swept``: the rules'
    values and the swept tokens archived so far, the compacted turns' tokens added here."""
    old_turns, old_origin = live.turns, live.origin
    if result.compacted:
        by_raw = {id(t.raw): o for t, o in zip(old_turns, old_origin) if t.raw is not None}
        # an Anthropic system prompt read apart from the messages has no raw message
        head = [t for t in old_turns[:1] if t.raw is None and t.role == "system"]
        turns = head + parse_messages(result.messages, format=conversation.format,
                                      id=conversation.id).turns
        origin = [old_origin[0] if head and i == 0 else by_raw.get(id(t.raw))
                  for i, t in enumerate(turns)]
        kept = {id(t.raw) for t in turns if t.raw is not None}
        dropped = [(t, o) for t, o in zip(old_turns, old_origin)
                   if t.raw is not None and id(t.raw) not in kept]
        live.turns, live.origin = turns, origin
        live.tokens = sum(turn_tokens(t) for t in turns)
        covered = [o for _, o in dropped if o is not None]
    else:  # failed closed: the context stays as it was; measured over the span it would cover
        dropped = []
        covered = [o for o in old_origin[:boundary] if o is not None]
    # k: the span's last recorded message; the span opens on the earlier summary, which stands
    # for every message up to the earlier k, so k never goes back
    k = live.covered = max([live.covered, *covered])
    span_tokens = sum(turn_tokens(t) for t, _ in dropped)
    if swept is not None and dropped:  # the token tier sweeps the compacted turns
        from ..audit.archive import swept_values

        swept.update(swept_values([(-1 if o is None else o, t) for t, o in dropped],
                                  set(result.extracted), secrets))

    # the ledger alone: every pinned value, whether the block writes it or the summary or the
    # kept turns hold it; its cost is the block's (none: not compacted)
    block = result.block or ""
    ledger_text = "\n".join(ledger.values())
    summary = result.summary or ""
    kept_text = "\n".join(turn_text(t) for t, o in zip(live.turns, live.origin)
                          if o is not None and t.role != "system")
    gold = [g for g in gold_set(conversation, k) if g.strict]
    uses = uses_after(conversation, k)
    fates = [_fate(g.literal, summary, ledger_text, kept_text) for g in gold]
    in_ledger = [occurs(g.literal, ledger_text) for g in gold]
    id_like_at = [i for i, g in enumerate(gold) if g.id_like]
    composed = "\n".join((summary, ledger_text, kept_text))
    ruled_text = "\n".join(sorted(archived or ()))
    swept_text = "\n".join(sorted(swept or ()))
    holders = {g.literal: None if g.literal in secrets else
               archived_by(g.literal, ruled_text, swept_text)
               for g, fate in zip(gold, fates) if fate == "lost"}
    lost = [GoldFate(value=SENSITIVE if g.literal in secrets else g.literal,
                     rule=rules.get(g.literal), fate="lost", uses_after=uses[g.literal],
                     bare=_held_bare(g.literal, composed),
                     archived=holders[g.literal] is not None)
            for g, fate in zip(gold, fates) if fate == "lost"]
    lost.sort(key=lambda f: -f.uses_after)
    report = result.report()
    attempts = len(result.attempts)
    last = max((o for o in live.origin if o is not None), default=k)
    hooked = _through_hooks(session, result, k, last, summary, before, gold, kept_text)
    return ReplayCompaction(
        compaction=number, k=k, at_message=at, trigger=trigger.policy, tokens_before=before,
        tokens_after=live.tokens, span_tokens=span_tokens,
        ledger_tokens=count_tokens(block) if block else 0,
        compacted=result.compacted, attempts=attempts, reasks=max(0, attempts - 1),
        pinned=len(ledger), in_summary=sum(o.in_summary and o.in_ledger
                                           for o in result.record.literals),
        evicted=report["evicted"], gold=len(gold), lost=len(lost),
        recall_context=_share(sum(f != "lost" for f in fates), len(gold)),
        recall_ledger=_share(sum(in_ledger), len(gold)), losses=lost,
        gold_id_like=len(id_like_at),
        recall_context_id_like=_share(sum(fates[i] != "lost" for i in id_like_at),
                                      len(id_like_at)),
        recall_ledger_id_like=_share(sum(in_ledger[i] for i in id_like_at), len(id_like_at)),
        one_call_id_like=sum(f.archived and id_like(f.value) for f in lost),
        one_call_token_id_like=sum(holders[g.literal] == SWEPT_KIND and id_like(g.literal)
                                   for g, fate in zip(gold, fates) if fate == "lost"),
        **hooked)


# ── the hooks at a replayed compaction ───────────────────────────────────────────────────────

def _replayed_session(conversation: Conversation, firewall: Any) -> Any:
    from .hook_eval import ReplayedSession

    return ReplayedSession.of(conversation, firewall)


def _through_hooks(session: Any, result: Any, k: int, last: int, summary: str, before: int,
                   gold: list[Any], kept_text: str) -> dict[str, Any]:
    """The ``*_hooks*`` fields of a compaction of a Claude Code session file: the handlers
    fired at it (``ReplayedSession.compacted``: the summary as the agent's, the recorded
    messages after ``k`` up to ``last`` kept after it), and the gold the agent then has in
    the summary, the hooks' block and the kept turns, scored as the composed context is. None
    of them when the hooks were not driven (not a session file; failed closed: Claude Code
    fires PostCompact only after a compaction succeeded)."""
    if session is None or not result.compacted:
        return {}
    text, _, block = session.compacted(k, summary, last=last, tokens_before=before)
    held = [occurs(g.literal, text) or occurs(g.literal, kept_text) for g in gold]
    ids = [h for g, h in zip(gold, held) if g.id_like]
    return {"recall_hooks": _share(sum(held), len(gold)),
            "recall_hooks_id_like": _share(sum(ids), len(ids)),
            "hooks_tokens": count_tokens(block) if block else 0}


def _fate(value: str, summary: str, ledger_text: str, kept_text: str) -> str:
    if occurs(value, summary):
        return "in_summary"
    if occurs(value, ledger_text):
        return "in_ledger"
    return "kept_verbatim" if occurs(value, kept_text) else "lost"


def _held_bare(value: str, composed: str) -> bool:
    """Is ``value`` a gold token whose end is punctuation (``L031:``, ``110,``, ``0.4.0.``)
    that the composed context holds without it? Gold tokens of free text keep the
    punctuation that followed them; a value-level ledger writes the value alone."""
    bare = value.rstrip(SENTENCE_PUNCTUATION)
    return bare != value and len(bare) >= 2 and occurs(bare, composed)


def _share(hits: int, n: int) -> float | None:
    return hits / n if n else None


# ── totals and the table ─────────────────────────────────────────────────────────────────────

@dataclass
class Totals:
    """Sums over every compaction of a run (scalars only: memory stays flat)."""

    conversations: int = 0
    compactions: int = 0
    failed: int = 0
    skipped: int = 0  # the trigger fired, but no compaction was worth trying (Decision.skipped)
    reasks: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    span_tokens: int = 0
    ledger_tokens: int = 0
    gold: int = 0
    kept: int = 0
    in_ledger: int = 0
    gold_id_like: int = 0
    kept_id_like: int = 0
    below_target: int = 0  # compactions whose composed ID-like recall is under RECALL_TARGET
    lost_id_like_bare: int = 0  # ID-like gold lost as written but held without its end mark
    one_call_id_like: int = 0  # ID-like gold lost from the context but in the archive
    one_call_token_id_like: int = 0  # of those, held by a swept token only (the token tier)
    min_recall_id_like: float | None = None
    max_share: float | None = None
    hooks: HookTotals = field(default_factory=lambda: HookTotals())

    def add(self, replay: ReplayConversation) -> None:
        self.conversations += 1
        self.skipped += replay.skipped
        for c in replay.compactions:
            self.hooks.add(c)
            self.compactions += 1
            self.failed += not c.compacted
            self.reasks += c.reasks
            self.tokens_before += c.tokens_before
            self.tokens_after += c.tokens_after
            self.span_tokens += c.span_tokens
            self.ledger_tokens += c.ledger_tokens
            self.gold += c.gold
            self.kept += c.gold - c.lost
            self.in_ledger += round((c.recall_ledger or 0) * c.gold)
            self.gold_id_like += c.gold_id_like or 0
            self.kept_id_like += round((c.recall_context_id_like or 0) * (c.gold_id_like or 0))
            self.lost_id_like_bare += sum(f.bare and id_like(f.value) for f in c.losses)
            self.one_call_id_like += c.one_call_id_like or 0
            self.one_call_token_id_like += c.one_call_token_id_like or 0
            if c.recall_context_id_like is not None:
                self.below_target += c.recall_context_id_like < RECALL_TARGET
                self.min_recall_id_like = min(c.recall_context_id_like,
                                              self.min_recall_id_like
                                              if self.min_recall_id_like is not None else 1.0)
            if c.span_tokens:
                share = c.ledger_tokens / c.span_tokens
                self.max_share = max(share, self.max_share or 0.0)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}"


def _kept(recall: float | None, n: int | None) -> int:
    return round((recall or 0) * (n or 0))


@dataclass
class HookTotals:
    """The compactions where the hooks were driven (a Claude Code session file): the gold held
    by summary + ledger + kept turns and by summary + the hooks' block + kept turns, the
    block's tokens and the live tokens before those compactions."""

    compactions: int = 0
    gold: int = 0
    ledger: int = 0
    hooks: int = 0
    gold_id_like: int = 0
    ledger_id_like: int = 0
    hooks_id_like: int = 0
    short: int = 0  # compactions where the hooks hold less gold (ID-like or strict)
    tokens: int = 0
    tokens_before: int = 0

    def add(self, c: ReplayCompaction) -> None:
        if c.hooks_tokens is None:
            return
        self.compactions += 1
        self.gold += c.gold
        self.ledger += c.gold - c.lost
        hooks = _kept(c.recall_hooks, c.gold)
        self.hooks += hooks
        self.gold_id_like += c.gold_id_like or 0
        ledger_id = _kept(c.recall_context_id_like, c.gold_id_like)
        hooks_id = _kept(c.recall_hooks_id_like, c.gold_id_like)
        self.ledger_id_like += ledger_id
        self.hooks_id_like += hooks_id
        self.short += hooks_id < ledger_id or hooks < c.gold - c.lost
        self.tokens += c.hooks_tokens
        self.tokens_before += c.tokens_before

    def line(self) -> str:
        return (f"through the hooks ({self.compactions} compaction(s) of Claude Code session "
                f"files): summary + hooks' block + kept turns holds ID-like "
                f"{_pct(_share(self.hooks_id_like, self.gold_id_like))} % (summary + ledger: "
                f"{_pct(_share(self.ledger_id_like, self.gold_id_like))} %), strict "
                f"{_pct(_share(self.hooks, self.gold))} % ("
                f"{_pct(_share(self.ledger, self.gold))} %); {self.short} compaction(s) where "
                f"the hooks hold less gold (ID-like or strict); block {self.tokens:,} tokens = "
                f"{_pct(_share(self.tokens, self.tokens_before))} % of the "
                f"{self.tokens_before:,} live tokens before those compactions")


ROW = "{:<48} {:>5} {:>5} {:>8} {:>6} {:>7} {:>7} {:>7} {:>8} {:>6}"
HEADER = ROW.format("conversation", "msgs", "comp", "peak tok", "ID", "ctx ID", "min ID",
                    "ctx str", "ledger", "share")


def table_row(replay: ReplayConversation) -> str:
    """One conversation: its compactions, peak live tokens, ID-like gold and recall (over its
    compactions, and the worst one), strict recall, ledger tokens and share of the spans."""
    cs = replay.compactions
    n_id = sum(c.gold_id_like or 0 for c in cs)
    kept_id = sum(round((c.recall_context_id_like or 0) * (c.gold_id_like or 0)) for c in cs)
    worst = min((c.recall_context_id_like for c in cs if c.recall_context_id_like is not None),
                default=None)
    n = sum(c.gold for c in cs)
    ledger, span = sum(c.ledger_tokens for c in cs), sum(c.span_tokens for c in cs)
    name = visible_line(replay.id)  # the input's: it may hold terminal escapes
    name = name if len(name) <= 48 else "…" + name[-47:]
    return ROW.format(name, replay.messages, len(cs), max(replay.live_tokens, default=0), n_id,
                      _pct(_share(kept_id, n_id)), _pct(worst),
                      _pct(_share(sum(c.gold - c.lost for c in cs), n)), ledger,
                      _pct(ledger / span if span else None)) + _hooks_row(replay)


def _hooks_row(replay: ReplayConversation) -> str:
    """The hooks' figures of a replayed Claude Code session file: a line after its row."""
    hooks = HookTotals()
    for c in replay.compactions:
        hooks.add(c)
    if not hooks.compactions:
        return ""
    return (f"\n{'':<24}+ hooks' block: ctx ID "
            f"{_pct(_share(hooks.hooks_id_like, hooks.gold_id_like))}, ctx str "
            f"{_pct(_share(hooks.hooks, hooks.gold))}, block {hooks.tokens} tokens "
            f"({_pct(_share(hooks.tokens, hooks.tokens_before))} % of the context before)")


def format_totals(t: Totals, trigger: Trigger) -> str:
    return "\n".join([
        f"\n{t.conversations} conversation(s), {t.compactions} compaction(s)"
        f" ({t.failed} failed closed), {t.reasks} re-ask(s); window {trigger.window:,} tokens,"
        f" watermark {trigger.watermark:g} ({trigger.threshold:,} tokens), {trigger.policy}",
        f"compactions skipped ({SKIPPED}, or {BACKING_OFF}): {t.skipped}",
        f"live tokens before -> after compaction: {t.tokens_before:,} -> {t.tokens_after:,}",
        f"composed-context ID-like recall {_pct(_share(t.kept_id_like, t.gold_id_like))} % of "
        f"{t.gold_id_like} gold; worst compaction {_pct(t.min_recall_id_like)} %; "
        f"{t.below_target} compaction(s) under {RECALL_TARGET * 100:g} %",
        f"ID-like gold lost: {t.gold_id_like - t.kept_id_like}, of which {t.lost_id_like_bare}"
        f" held without the punctuation that ends the gold token ('L031' for 'L031:')",
        f"the archive: ID-like gold in the context {_pct(_share(t.kept_id_like, t.gold_id_like))}"
        f" %, one recall call away {_pct(_share(t.one_call_id_like, t.gold_id_like))} % (of "
        f"which held by a swept token only, the token tier: "
        f"{_pct(_share(t.one_call_token_id_like, t.gold_id_like))} %), lost "
        f"{_pct(_share(t.gold_id_like - t.kept_id_like - t.one_call_id_like, t.gold_id_like))}"
        f" %",
        f"composed-context strict recall {_pct(_share(t.kept, t.gold))} % of {t.gold} gold; "
        f"ledger alone {_pct(_share(t.in_ledger, t.gold))} %",
        f"ledger {t.ledger_tokens:,} tokens = {_pct(_share(t.ledger_tokens, t.span_tokens))} % "
        f"of {t.span_tokens:,} span tokens in total; largest share of one span "
        f"{_pct(t.max_share)} %",
        *([t.hooks.line()] if t.hooks.compactions else []),
        "columns: msgs recorded, comp compactions, peak live tokens, ID-like gold over the "
        "compactions, its recall in the composed context (summary + ledger + kept turns) and "
        "the worst compaction's, strict recall, ledger tokens, ledger share of the spans (%)"])


# ── the command ──────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ReplayTask:
    """One recorded conversation replayed, with its ``--contexts`` records: the map of
    ``replay`` (``distributed`` runs it on Dask workers). ``setup`` builds the ``Firewall`` and
    the summarizer (from ``summarizer``, the options naming it) once per process, so a vendor
    client is never pickled; a worker needs the vendor's key in its own environment."""

    packs: Any
    budget: Any
    keep_last: int
    trigger: Trigger
    summarizer: argparse.Namespace  # summarizer, model, base_url: see summarizer_from_args
    contexts: bool
    placeholders: bool = False  # secrets go to the summarizer as placeholders, as compact's
    salience: Any = None  # a Salience; None: the built-in one
    archive_tokens: bool = True  # count the archive's token tier one call away too

    def setup(self) -> tuple[Any, Any]:
        from ..audit.archive import ArchiveLimits
        from ..compaction.guard import Firewall
        from ..options import summarizer_from_args

        return (Firewall(self.packs, budget_tokens=self.budget, keep_last=self.keep_last,
                         placeholders=self.placeholders, salience=self.salience,
                         archive=ArchiveLimits(tokens=self.archive_tokens)),
                summarizer_from_args(self.summarizer))

    def __call__(self, state: tuple[Any, Any], path: str, conversation: Conversation
                 ) -> tuple[ReplayConversation, list[dict[str, Any]]]:
        firewall, summarizer = state
        records: list[dict[str, Any]] = []
        replay = replay_conversation(
            conversation, firewall=firewall, trigger=self.trigger, summarizer=summarizer,
            keep_last=self.keep_last, source=source_of(path),
            contexts=records.append if self.contexts else None)
        return replay, records


def cmd_replay(args: argparse.Namespace) -> int:
    from ..audit import escape_surrogates
    from .distributed import open_mapper
    from ..options import packs_from_args, salience_from_args

    trigger = Trigger(window=args.window, watermark=args.watermark, policy=args.trigger,
                      expected_output=args.max_tokens)
    summarizer = argparse.Namespace(summarizer=args.summarizer, model=args.model,
                                    base_url=args.base_url)
    task = ReplayTask(packs_from_args(args), args.budget, args.keep_last, trigger, summarizer,
                      contexts=bool(args.contexts), placeholders=args.placeholders,
                      salience=salience_from_args(args),
                      archive_tokens=getattr(args, "archive_tokens", True))
    out: IO[str] | None = open(args.contexts, "w", encoding="utf-8") if args.contexts else None
    totals = Totals()
    try:
        with open_mapper(args.dask, args.dask_partition) as mapper, \
                mapper.files(args.files, fail_fast=args.fail_fast, label="replay") as files:
            if not args.json:
                files.out(HEADER)
            for _, (replay, records) in mapper.map(task, files):
                for record in records:  # a lone surrogate of the input as its JSON escape
                    out.write(escape_surrogates(json.dumps(record, ensure_ascii=False)) + "\n")
                totals.add(replay)
                files.out(replay.model_dump_json() if args.json else table_row(replay))
            bad = files.report()
    finally:
        if out is not None:
            out.close()
    if not args.json:
        sys.stdout.write(format_totals(totals, trigger) + "\n")
    return 1 if bad else 0


def _watermark(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share of the window: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"the watermark is in (0, 1], got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


REPLAY_DESCRIPTION = """\
Replay each recorded conversation message by message as a harness would: whenever the live
context crosses the watermark, compact it (summary + ledger + the last --keep-last messages,
never splitting a tool call from its result) with the conversation's cumulative ledger, then
append the following recorded messages to the compacted context. Each compaction is measured
against the rest of the recording, with the gold of `firewall eval`."""

REPLAY_EPILOG = f"""\
The table: one row per conversation, written as it is replayed, then the totals.
  msgs, comp            recorded messages; compactions
  peak tok              the largest live context, in tokens
  ID                    ID-like gold over its compactions: strings a tool call after the
                        compaction passed verbatim, already in the covered messages, 4+
                        characters holding a digit, / or @ (as eval)
  ctx ID, min ID        their recall (%) in the composed context (summary + ledger + kept
                        messages), over the conversation and at its worst compaction
  ctx str               recall of the strict gold (eval's strict) in the composed context
  ledger, share         ledger tokens, and their share (%) of the compacted spans' tokens
The totals also count the compactions skipped: the trigger fired, but the span held too little
fresh material for a compaction to bring the context back under the watermark (the kept tail,
with the earlier summary and ledger, is near it: keep fewer messages), or the summarizer failed
at the compactions just before (after n failures in a row, the next try waits for 2**n more
messages).
On a Claude Code session file, a second line: the same recall (ctx ID, ctx str) with the block
the Claude Code hooks re-inject in place of the ledger (pre-compact, post-compact and
session-start fired at each compaction on the session file as Claude Code would have written
it), the block's tokens and their share of the live context before those compactions.
--json prints one line per conversation instead (firewall.replaylog.ReplayConversation; a
secret is written {SENSITIVE}). Exit 1 when a bad input line was skipped, 2 on a usage error."""


def add_replay_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``firewall replay`` on the CLI's subparsers."""
    from ..options import (add_archive_tokens_option, add_dask_option, add_fail_fast_option,
                          add_keep_last_option,
                          add_placeholders_option, add_rules_option, add_salience_option,
                          add_summarizer_options,
                          add_tokens_option, non_negative)

    parser = subparsers.add_parser(
        "replay", help="replay recorded conversations as a harness would, compacting at a "
                       "watermark, and measure each compaction",
        description=REPLAY_DESCRIPTION, epilog=REPLAY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="recorded conversations (JSONL, or one JSON conversation)")
    parser.add_argument("--window", type=_positive, required=True, metavar="TOKENS",
                        help="the model's context window")
    parser.add_argument("--watermark", type=_watermark, default=WATERMARK, metavar="SHARE",
                        help=f"compact when the live context crosses this share of the window "
                             f"(default {WATERMARK})")
    parser.add_argument("--trigger", choices=TRIGGER_POLICIES, default="reactive",
                        help="reactive: when the live context crosses the watermark; "
                             "preemptive: before an assistant message, when the live context "
                             "plus --max-tokens would cross it (default reactive)")
    parser.add_argument("--max-tokens", type=non_negative, default=MAX_TOKENS, metavar="N",
                        help=f"preemptive: the output reserved for each model call "
                             f"(default {MAX_TOKENS})")
    add_summarizer_options(parser)
    add_placeholders_option(parser)
    add_keep_last_option(parser, " of each compaction")
    add_rules_option(parser)
    parser.add_argument("--budget", type=parse_budget, default=Budget(), metavar="auto|TOKENS|P%",
                        help=f"ledger budget: auto (the default, as compact: "
                             f"{str(Budget()).replace('%', '%%')}), tokens, or a share of each "
                             f"compacted span, e.g. 5%%")
    add_salience_option(parser)
    add_archive_tokens_option(parser)
    parser.add_argument("--json", action="store_true",
                        help="one JSON line per conversation (firewall.replaylog) instead of "
                             "the table")
    parser.add_argument("--contexts", metavar="OUT.jsonl",
                        help="write one JSON line per compaction: id, compaction, k, the "
                             "composed context's messages, the ledger's literals, "
                             "ledger_tokens, span_tokens (secrets written [sensitive])")
    add_fail_fast_option(parser)
    add_tokens_option(parser, "estimate")
    add_dask_option(parser)
    parser.set_defaults(func=cmd_replay)
    return parser
