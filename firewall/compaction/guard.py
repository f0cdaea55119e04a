"""The compaction guard: extract → pin → summarize → validate → re-ask → re-inject → audit.

The loop is written once, as a generator that yields each ``SummaryRequest`` and receives the
summarizer's answer (sans-IO); ``Firewall.compact`` and ``Firewall.acompact`` are the two thin
drivers that perform the calls. Whatever happens, the caller's messages are never mutated and
no pinned literal is lost: a failed compaction returns the conversation as it was.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
import re
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal as TypingLiteral

from ..audit.archive import ArchiveLimits, archive_entries
from ..audit import STATUSES, AuditRecord, open_audit_sink
from .budget import Budget, budget_tokens as resolve_budget  # not the parameter
from .compose import Span, choose_span, compose, turn_tokens, with_tool_pairs
from ..errors import AuditError, CompactionRefused, FirewallError, SummarizerError
from ..extraction.extract import Extractor, ScanMemo, Scanner
from ..json_values import scalar_leaves
from ..formats import FORMATS, parse_messages
from .ledger import LITERAL_MAX_CHARS, Eviction, Ledger, LedgerEntry, find_blocks
from .span_uses import uses
from ..literals import Literal
from ..extraction.packs import Pack, load_packs
from .placeholders import Placeholders, uncut
from .records import AttemptResult, audit_key, build_record, held_values, write_record
from ..summarizers.base import RequiredLiteral, Summary, SummaryRequest
from ..tokens import count_tokens
from .trigger import BACKING_OFF, Decision, Trigger, live_tokens
from ..turns import Conversation, Turn, call_text
from .validate import Verdict, identifier_shaped, validate

Policy = TypingLiteral["reinject", "repair", "keep_source", "raise"]
POLICIES: tuple[str, ...] = ("reinject", "repair", "keep_source", "raise")
NUMBERED_MAX = 10_000  # conversations whose last compaction number a Firewall remembers
BACK_OFF_MAX = 32  # messages a trigger waits for after a run of failed summaries, at most
# --strict: rules ranked below the default priority (money, amounts, profile words, bare numbers,
# dates) find context, not keys
STRICT_MIN_PRIORITY = 50

SUMMARY_HEADER = "Summary of the earlier conversation (turns {first}-{last}), compacted:"
_OWN_SUMMARY = re.compile(re.escape(SUMMARY_HEADER.split("{first}")[0]) + r"-?\d+--?\d+"
                          + re.escape(SUMMARY_HEADER.split("{last}")[1]))
_OWN_BLOCK = "<<<ledger "
_SUMMARY_HEADER = re.compile(r"Summary of the earlier conversation \(turns (\d+)-(\d+)\), "
                             r"compacted:\s*")
INSTRUCTIONS = (
    "Summarize the conversation above for an agent that will continue it: keep the user's "
    "goal, what was done, what was decided and what is still open.")
REQUIRED_INSTRUCTIONS = (
    "These exact strings are load-bearing: a later tool call will look them up byte-for-byte. "
    "Copy each one into the summary exactly as written (same characters, case and "
    "separators), and do not write any other string that looks like one of them:")
# a turn whose sensitive scan did not finish is kept verbatim, and never sent: fail closed
WITHHELD = "[turn {turn} withheld: it is kept verbatim after the summary]"


@dataclass
class Pinned:
    """What one extraction pass added: literals seen, rule timeouts, ledger evictions, and
    literals too long to pin (over ``LITERAL_MAX_CHARS``): their turns are kept verbatim."""

    literals: list[Literal]
    timeouts: list[Any]
    evicted: list[Eviction]
    oversize: list[Literal] = field(default_factory=list)
    held: set[str] = field(default_factory=set)  # values the texts beside the block hold


@dataclass
class CompactionResult:
    """``messages`` is the compacted conversation, or the original when ``compacted`` is false."""

    messages: list[Any]
    ledger: Ledger
    record: AuditRecord
    compacted: bool
    summary: str | None = None
    verdict: Verdict | None = None
    attempts: list[AttemptResult] = field(default_factory=list)
    conversation: Conversation | None = None
    audit_error: str | None = None
    timeouts: list[Any] = field(default_factory=list)  # rules that timed out: turns kept whole
    block: str | None = None  # the ledger block composed after the summary (None: not compacted)
    # what the archive write did (archive_sqlite.ArchiveWrite); None: the log keeps no archive
    archive: Any = None
    # the non-sensitive values this compaction extracted from its span: what an archive gains
    extracted: list[str] = field(default_factory=list)

    def report(self) -> dict[str, int]:
        """``pinned`` (ledger entries), ``reasked`` (summarizer calls after the first), then
        each literal of the audit record counted once, by its status, under the names
        ``firewall audit list`` shows (see ``firewall.audit.STATUSES``)."""
        counts = Counter(lit.status for lit in self.record.literals)
        return {"pinned": len(self.ledger), "reasked": max(0, len(self.attempts) - 1),
                **{status: counts[status] for status in STATUSES}}


@dataclass(frozen=True)
class Earlier:
    """A compaction this conversation already went through, found by its genuine ledger block:
    the summary at turn ``summary_turn`` and the block at ``block_turn`` (the same turn when
    one message holds both) stand for turns ``first``-``last`` of the original numbering, and
    ``body`` is that summary without its header and the block. Turns after the block continue
    that numbering (turns an earlier ``keep_source`` kept verbatim are counted as following it).
    """

    summary_turn: int
    block_turn: int
    first: int
    last: int
    body: str

    @property
    def shift(self) -> int:
        """Added to a conversation index after the block to give its original turn number."""
        return self.last - self.block_turn


def earlier_compaction(turns: Sequence[Turn], ledger: Ledger) -> Earlier | None:
    """The compaction whose summary and genuine ledger block head ``turns``, if any."""
    for b, turn in enumerate(turns):
        blocks = find_blocks(turn.text, ledger.nonce, ledger.key) if turn.text else []
        if blocks:
            break
    else:
        return None
    for a in (b, b - 1):
        if a < 0:
            continue
        text = turns[a].text
        if a == b:  # one message holds the summary and the block: keep the summary's text
            for start, end in reversed(blocks):
                text = text[:start] + text[end:]
        m = _SUMMARY_HEADER.match(text)
        if m:
            return Earlier(a, b, int(m.group(1)), int(m.group(2)), text[m.end():].strip())
    return None


@dataclass
class _Plan:
    """Everything the loop needs, computed before the first summarizer call."""

    conversation: Conversation
    span: Span
    pinned: Pinned
    ledger: Ledger
    required: list[Literal]
    compaction: int
    placeholders: Placeholders | None
    turn_tokens: list[int]  # counted once: budgets and the audit's before/after use them
    request_turns: list[Turn]  # the span as the summarizer sees it (an earlier summary cleaned)
    source: list[str]  # the span's texts: what the summary may copy (see validate)
    earlier: Earlier | None = None  # the compaction this one continues, at the span's start
    budget: int = 0  # the ledger's tokens, fitted when the summary is known
    salience: Callable[[LedgerEntry], tuple] | None = None
    summarizer: Any = None  # per call: concurrent compactions may use different ones
    refused: str | None = None  # why the span cannot be summarized at all: kept as it was
    must_shrink: bool = False  # fail closed when the composed context would not be smaller
    # placeholder mode: per turn, per field, where a rule found a secret (start, end, value)
    secret_spans: dict[int, dict[str, list[tuple[int, int, str]]]] = field(default_factory=dict)
    masked_turns: dict[int, Turn] = field(default_factory=dict)

    def number(self, index: int) -> int:
        """The turn number of a conversation index, in the numbering of the first compaction."""
        e = self.earlier
        return index + e.shift if e is not None and index > e.block_turn else index

    def index(self, turn: int) -> int:
        """The conversation index of a turn number (the inverse of ``number``)."""
        e = self.earlier
        return turn - e.shift if e is not None and turn > e.last else turn

    @property
    def span_tokens(self) -> int:
        return sum(self.turn_tokens[self.span.start:self.span.end])

    @functools.cached_property
    def withheld(self) -> set[int]:
        """Turns (conversation indexes) a rule timed out on: kept verbatim, never sent to the
        summarizer."""
        return {self.index(t.turn) for t in self.pinned.timeouts}

    def mask(self, text: str) -> str:
        """Text as a summarizer may see it: sensitive literals replaced by placeholders."""
        return self.placeholders.mask(text) if self.placeholders else text

    def mask_value(self, value: str) -> str:
        """A literal's value as a summarizer may see it (a secret: its placeholder)."""
        return self.placeholders.mask_value(value) if self.placeholders else value

    def sent(self, index: int) -> bool:
        """Does the span's turn at ``index`` go to the summarizer? Not an earlier compaction's
        ledger block (its summary goes, cleaned: ``request_turn``)."""
        e = self.earlier
        return e is None or not (e.summary_turn < index <= e.block_turn)

    def request_turn(self, index: int) -> Turn:
        """A turn as the summarizer gets it: ``turn``, or an earlier summary of ours without
        its header and ledger block (masked)."""
        e = self.earlier
        if e is not None and index == e.summary_turn:
            own = self.conversation.turns[index]
            return Turn(role=own.role, text=self.mask(e.body))
        return self.turn(index)

    def turn(self, index: int) -> Turn:
        """A turn as the summarizer sees it (masked once per compaction, then reused)."""
        seen = self.masked_turns.get(index)
        if seen is not None:
            return seen
        turn = self.conversation.turns[index]
        if index in self.withheld:
            seen = Turn(role=turn.role, text=WITHHELD.format(turn=index),
                        tool_name=turn.tool_name, tool_call_id=turn.tool_call_id)
        elif self.placeholders:
            seen = self.placeholders.mask_turn(turn, self.secret_spans.get(index))
        else:
            seen = turn
        self.masked_turns[index] = seen
        return seen


class Firewall:
    """Rule packs plus the compaction policy; one instance serves many conversations.

    ``required``: which literals the summary itself must carry (the rest ride in the ledger):
    ``"rules"`` (rules marked ``severity: required``), ``"user"`` (those, and every literal the
    user typed: the default), or ``"all"``.

    ``template``: the text of the harness's instruction template (mini-swe-agent's instance
    template, a SWE-agent demonstration): what the user turn holds because the harness put it
    there is not what the user asked for. A user-typed literal that also occurs in the template
    or in the conversation's system prompt is pinned like any other but not *required* of the
    summary.

    ``salience``: what ranks the entries a budget keeps: a ``salience.Salience``, the path of a
    salience file (``firewall salience fit``), or None for the built-in one.
    """

    def __init__(self, packs: Iterable[Pack | str] | None = None, *,
                 budget_tokens: int | Budget = Budget(),
                 max_retries: int = 2, policy: Policy = "reinject", keep_last: int = 8,
                 keep_tokens: int | None = None, required: str = "user",
                 placeholders: bool = False, audit: Any = None,
                 summarizer: Any = None, template: str | None = None,
                 salience: Any = None, archive: bool | ArchiveLimits = True) -> None:
        if policy not in POLICIES:
            raise FirewallError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        if required not in ("rules", "user", "all"):
            raise FirewallError(f"required must be 'rules', 'user' or 'all', not {required!r}")
        given = list(packs or ())
        names = [p for p in given if not isinstance(p, Pack)]
        self.packs = [p for p in given if isinstance(p, Pack)]
        if names or not given:  # names to load, or nothing given: every built-in pack
            self.packs += load_packs(*names)
        self.extractor = Extractor(self.packs)
        self._scans = ScanMemo(self.extractor)  # per-conversation scan states (see pin)
        self._numbers: OrderedDict[str, int] = OrderedDict()  # last number given, per conversation
        self._memo_lock = threading.Lock()  # _numbers, _costs and _failing
        # per ledger (nonce), the tokens a summary and ledger block took when their composition
        # would have grown the context: a trigger waits for a span larger than that (see _due)
        self._costs: OrderedDict[str, int] = OrderedDict()
        # per ledger, the trigger's compactions in a row whose summarizer gave nothing usable,
        # when to try again, and why: a failing vendor is not called before every model call
        # (see _due)
        self._failing: OrderedDict[str, _Failing] = OrderedDict()
        self.budget_tokens, self.max_retries, self.policy = budget_tokens, max_retries, policy
        self.keep_last, self.keep_tokens, self.required_mode = keep_last, keep_tokens, required
        self.placeholders = placeholders
        self.template = template or ""
        # a path that cannot be opened now costs each compaction its record, reported in
        # audit_error, never the compaction
        self.audit = open_audit_sink(audit) if isinstance(audit, (str, bytes)) or \
            hasattr(audit, "__fspath__") else audit
        self.summarizer = summarizer
        # which entries a budget keeps: a Salience, a salience file, or None (the shipped one)
        from .salience import Salience, load_salience

        self.salience = salience if isinstance(salience, Salience) else load_salience(salience)
        # every literal a compaction extracts goes to the audit log's archive (when the log
        # keeps one), capped per conversation: see firewall.archive
        self.archive_limits = archive if isinstance(archive, ArchiveLimits) else \
            (ArchiveLimits() if archive else None)

    # ── one-shot calls ──────────────────────────────────────────────────────────────────

    def conversation(self, messages: Any) -> Conversation:
        return messages if isinstance(messages, Conversation) else parse_messages(messages)

    def scan(self, messages: Any) -> list[Literal]:
        return self.extractor.scan(self.conversation(messages)).literals

    def observe(self, messages: Any) -> list[Literal]:
        """Do as messages arrive the per-turn work a later compaction needs (each turn's scan
        and token count, memoized by content), so the compaction pays only for its own work.
        Pass the new messages, or the whole history: turns seen before are lookups."""
        conversation = self.conversation(messages)
        for turn in conversation.turns:
            turn_tokens(turn)
        return self.extractor.scan(conversation).literals

    def masked_turns(self, messages: Any) -> list[Turn]:
        """The turns of ``messages`` (after the system prompt) as placeholder mode would send
        them to a vendor: every secret a rule finds replaced, turns a rule timed out on
        withheld. What a vendor token counter may be calibrated on."""
        conversation = self.conversation(messages)
        plan = self._plan(conversation, None, 0, compaction=1)
        if plan.placeholders is None:
            plan.placeholders, plan.secret_spans = self._placeholders(plan)
        return [plan.turn(i) for i in range(plan.span.start, plan.span.end)]

    def check(self, messages: Any, summary: str, *, strict: bool = False,
              literals: list[Literal] | None = None) -> Verdict:
        """Validate any compactor's summary of ``messages`` (the turns it summarized).

        Not ``ok`` when a required literal is missing (``strict``: every literal
        :func:`worth_pinning`) or when the summary mutates *any* literal of those turns: a
        wrong ID is worse than a lost one. A string the turns themselves hold is never a
        mutation. ``literals``: ``scan(messages)``, when the caller has it already.
        """
        conversation = self.conversation(messages)
        if literals is None:
            literals = self.scan(conversation)
        required = [l for l in literals if worth_pinning(l)] if strict else \
            self.required_of(literals, conversation)
        return validate(summary, required, known=literals,
                        source=source_texts(conversation.turns))

    def is_required(self, lit: Literal | LedgerEntry, boilerplate: str = "") -> bool:
        """Must the summary itself carry this literal (or ledger entry)? See ``required``;
        a user-typed value found in ``boilerplate`` or the ``template`` is the harness's."""
        if self.required_mode == "all" or lit.severity == "required":
            return True
        return self.required_mode == "user" and lit.role == "user" and \
            lit.value not in boilerplate and lit.value not in self.template

    def required_of(self, literals: Iterable[Any], conversation: Conversation) -> list[Any]:
        """The literals (or entries) the summary must carry in this conversation."""
        system = "\n".join(t.text for t in conversation.turns if t.role == "system")
        return [l for l in literals if self.is_required(l, system)]

    def pin(self, ledger: Ledger, turns: Sequence[Turn], *, offset: int = 0,
            compaction: int | None = None, seen: set[str] | None = None,
            budget: int | Budget | None = None, beside: Sequence[str] = ()) -> Pinned:
        """Extract ``turns`` into ``ledger``, drop values another entry carries, and fit the
        budget by the span's salience: the one path a compaction, the vendor wrappers and
        ``firewall eval`` share.

        Turn numbers are ``offset`` + position, so provenance survives pruning. Genuine ledger
        blocks are skipped. ``seen`` (digests of raw messages) serves wrappers that receive a
        whole history with every request: a message is never counted twice. ``beside``: texts
        the model's context holds besides the block (a summary, turns kept verbatim); a value
        they hold stays pinned at no cost, and the block need not write it:
        ``ledger.render(pinned.held)``.
        """
        pinned, salience = self._extract(ledger, turns, offset=offset, seen=seen)
        if not isinstance(budget, int):  # None: the firewall's own budget
            budget = self.budget_for(turns, budget)
        pinned.held = held_values(ledger, beside)
        pinned.evicted = ledger.fit(budget, compaction=compaction, salience=salience,
                                    held=pinned.held)
        return pinned

    def _extract(self, ledger: Ledger, turns: Sequence[Turn], *, offset: int,
                 seen: set[str] | None) -> tuple[Pinned, Callable[[LedgerEntry], tuple]]:
        """``pin`` without the budget: the literals merged into ``ledger``, and the salience
        of its entries in these turns."""
        # The firewall's own messages (its summary, its ledger block) are never a source:
        # a value they echo keeps the provenance of its sighting in an original turn, never
        # the "user" role of the message that carries the summary back.
        own = {t.text for t in turns if is_own_message(t)}

        def skip(text: str) -> list[tuple[int, int]]:
            if text in own:
                return [(0, len(text))]
            return find_blocks(text, ledger.nonce, ledger.key)

        if seen is None:  # turns scanned by an earlier call are resumed, not added again
            if self._scans.extractor is not self.extractor:  # the extractor was replaced
                self._scans = ScanMemo(self.extractor)
            scan = self._scans.scan(list(turns), offset=offset, skip=skip,
                                    tag=ledger.conversation_id)
        else:
            scanner = Scanner(self.extractor, skip=skip)
            for i, turn in enumerate(turns):
                digest = json.dumps(turn.raw, sort_keys=True, ensure_ascii=False, default=str)
                if digest in seen:
                    continue
                seen.add(digest)
                scanner.add(turn, offset + i)
            scan = scanner.result()
        oversize = [lit for lit in scan.literals if len(lit.value) > LITERAL_MAX_CHARS]
        ledger.update(lit for lit in scan.literals if len(lit.value) <= LITERAL_MAX_CHARS)
        originals = [t for t in turns if not is_own_message(t)]
        return (Pinned(scan.literals, scan.timeouts, [], oversize),
                self.salience.key(ledger.entries, originals))

    def budget_for(self, turns: Sequence[Turn] | None,
                   budget: int | str | Budget | None = None) -> int:
        """The ledger's tokens for a span of ``turns`` (None: unknown, e.g. a hook's
        transcript): ``budget`` (default ``budget_tokens``) as ``budget.budget_tokens`` reads
        it; the span is counted only when the budget is a share of it."""
        budget = self.budget_tokens if budget is None else budget
        if isinstance(budget, int):
            return budget
        span = None if turns is None else sum(turn_tokens(t) for t in turns)
        return resolve_budget(budget, span)

    # ── the loop (sans-IO) ──────────────────────────────────────────────────────────────

    def _plan(self, messages: Any, ledger: Ledger | None, keep_last: int | None,
              compaction: int | None, tail_start: int | None = None) -> _Plan:
        conversation = self.conversation(messages)
        ledger = ledger if ledger is not None else Ledger.new(conversation.id)
        if tail_start is None:
            span = choose_span(conversation.turns, self.keep_last if keep_last is None
                               else keep_last, self.keep_tokens)
        else:  # the caller chose the boundary; it is still never between a call and its result
            span = choose_span(conversation.turns, len(conversation.turns) - tail_start)
        number = compaction or self.next_compaction(ledger.conversation_id)
        # Re-compaction: the earlier summary and ledger are ours, not sources; the summarizer
        # gets that summary without its header and block, and new turns keep the first
        # compaction's numbering.
        earlier = earlier_compaction(conversation.turns, ledger)
        if earlier is not None and not (span.start == earlier.summary_turn < span.end):
            earlier = None
        request_turns = conversation.turns[span.start:span.end]
        scan_from = span.start
        if earlier is not None:
            scan_from = min(earlier.block_turn + 1, span.end)
            own = conversation.turns[earlier.summary_turn]
            request_turns = [Turn(role=own.role, text=earlier.body)] + \
                conversation.turns[scan_from:span.end]
        # the budget is fitted once the summary is known: what it holds needs no room
        scanned = conversation.turns[scan_from:span.end]
        pinned, salience = self._extract(ledger, scanned, seen=None,
                                         offset=scan_from + (earlier.shift if earlier else 0))
        pinned_values = set(ledger.values())  # not a literal too long to pin: its turn stays
        plan = _Plan(conversation, span, pinned, ledger, [], number, None,
                     [turn_tokens(t) for t in conversation.turns], request_turns,
                     list(source_texts(request_turns)), earlier,
                     refused=_unserializable(conversation.turns, span),
                     budget=self.budget_for(scanned), salience=salience)
        # a withheld turn's literals stay in it, verbatim: the summary cannot be asked for them
        plan.required = [l for l in self.required_of(pinned.literals, conversation)
                         if l.value in pinned_values and plan.index(l.turn) not in plan.withheld]
        plan.required += self._carried(ledger, conversation.turns, span,
                                       {l.value for l in plan.required})
        if self.placeholders:
            plan.placeholders, plan.secret_spans = self._placeholders(plan)
            # the summary copies what it was shown: masked turns, look-alikes neutralised
            plan.source += source_texts(plan.request_turn(i)
                                        for i in range(span.start, span.end) if plan.sent(i))
        return plan

    def _carried(self, ledger: Ledger, turns: Sequence[Turn], span: Span,
                 taken: set[str]) -> list[Literal]:
        """Required ledger entries that the span holds only in an earlier summary of the
        firewall's (which is never scanned): the new summary must carry them too, and they keep
        the provenance of their original sighting."""
        summaries = []
        for i in range(span.start, span.end):
            turn = turns[i]
            if turn.role == "user" and _OWN_SUMMARY.match(turn.text):
                blocks = find_blocks(turn.text, ledger.nonce, ledger.key)  # Anthropic: one turn
                summaries.append((i, turn.text[:blocks[0][0]] if blocks else turn.text))
        wanted = [e for e in ledger.entries if e.value not in taken and self.is_required(e)]
        if not summaries or not wanted:
            return []
        found = uses(wanted, [Turn("user", text) for _, text in summaries])
        carried = []
        for entry in wanted:
            if found[entry.value]:
                i, at = next((i, at) for i, text in summaries
                             if (at := text.find(entry.value)) >= 0)
                carried.append(Literal(entry.value, entry.rule, i, entry.role, at,
                                       at + len(entry.value), tool=entry.tool,
                                       severity=entry.severity, sensitive=entry.sensitive,
                                       priority=entry.priority))
        return carried

    def _placeholders(self, plan: _Plan) -> tuple[Placeholders,
                                                  dict[int, dict[str, list[tuple[int, int, str]]]]]:
        """This compaction's placeholder table, and where each turn of the span holds a
        secret (read back from the extractor's memo of each turn's scan)."""
        ledger = plan.ledger
        placeholders = Placeholders()
        placeholders.add(e.value for e in ledger.entries if e.sensitive)
        placeholders.add(l.value for l in plan.pinned.literals if l.sensitive)
        spans: dict[int, dict[str, list[tuple[int, int, str]]]] = {}
        withheld = plan.withheld
        for index in range(plan.span.start, plan.span.end):
            if index in withheld:  # never sent: no need to scan it again
                continue
            found = self.extractor.scan_turn_shared(
                plan.conversation.turns[index], index,
                skip=lambda text: find_blocks(text, ledger.nonce, ledger.key))
            for lit in found.literals:
                if lit.sensitive:
                    spans.setdefault(index, {}).setdefault(lit.field, []).append(
                        (lit.start, lit.end, lit.value))
        return placeholders, spans

    def next_compaction(self, conversation_id: str, fallback: int = 1) -> int:
        """The number of the next compaction of a conversation: after the audit log's last one
        and after any this firewall gave, so compactions running at once get distinct numbers
        (the log learns of one only when it is written)."""
        number = fallback
        numbering = getattr(self.audit, "next_compaction_number", None)  # a sink may only write
        if numbering is not None:
            try:
                number = numbering(conversation_id)
            except AuditError:
                pass  # the write will report it
        with self._memo_lock:
            number = max(number, self._numbers.get(conversation_id, 0) + 1)
            _remember(self._numbers, conversation_id, number)
        return number

    def _request(self, plan: _Plan, attempt: int, previous: AttemptResult | None) -> SummaryRequest:
        turns = tuple(plan.request_turn(i) for i in range(plan.span.start, plan.span.end)
                      if plan.sent(i))
        required = tuple(RequiredLiteral(plan.mask_value(l.value), l.rule, _snippet(plan, l))
                         for l in plan.required)
        instructions = INSTRUCTIONS
        if required:
            instructions += "\n" + REQUIRED_INSTRUCTIONS + "\n" + "\n".join(
                f"- {r.value}" for r in required)
        if plan.placeholders and plan.placeholders.table:
            instructions += (f"\nStrings such as {plan.placeholders.example} stand for "
                             "secrets: copy them exactly as they are, brackets included.")
        feedback = _feedback(plan, previous) if previous is not None else None
        # the summarizer's own text goes back as it wrote it: placeholders not restored
        return SummaryRequest(turns=turns, required=required, instructions=instructions,
                              attempt=attempt, feedback=feedback,
                              previous=previous.reply if previous and previous.reply else None)

    def _loop(self, plan: _Plan) -> Generator[SummaryRequest, Any, CompactionResult]:
        if not len(plan.span):
            return self._result(plan, [], None, set(), "nothing to compact")
        if plan.refused:  # fail closed: no summarizer can read the span, keep it
            return self._result(plan, [], None, set(), plan.refused)
        attempts: list[AttemptResult] = []
        max_summary_tokens = max(1000, plan.span_tokens)
        previous = None
        for number in range(1, self.max_retries + 2):
            started = time.perf_counter()
            answer = yield self._request(plan, number, previous)
            attempt = self._judge(plan, number, answer, max_summary_tokens)
            attempt.duration_ms = (time.perf_counter() - started) * 1000
            attempts.append(attempt)
            if attempt.ok or attempt.error is not None and attempt.summary is None:
                break  # success, or the summarizer itself failed: no point re-asking
            previous = attempt
        return self._finish(plan, attempts)

    def _judge(self, plan: _Plan, number: int, answer: Any, max_tokens: int) -> AttemptResult:
        if isinstance(answer, BaseException):
            return AttemptResult(number, None, None, error=f"{type(answer).__name__}: {answer}")
        text, usage, model = (answer.text, answer.usage, answer.model) \
            if isinstance(answer, Summary) else (answer, {}, None)
        if not isinstance(text, str):
            return AttemptResult(number, None, None, error=f"summarizer returned "
                                 f"{type(text).__name__}, not text")
        problems, reply = [], text
        if plan.placeholders:
            text, damaged = plan.placeholders.restore(text)
            problems += [f"unknown or altered placeholder {p!r}" for p in damaged]
        tokens = count_tokens(text)
        oversize = tokens > max_tokens
        if oversize:
            problems.append(f"the summary is {tokens} tokens, longer than the "
                            f"{max_tokens}-token span it replaces")
        verdict = validate(text, [(l.value, l.rule) for l in plan.required],
                           known=[(e.value, e.rule) for e in plan.ledger.entries],
                           source=plan.source)
        return AttemptResult(number, text, verdict, usage=dict(usage or {}), model=model,
                             problems=problems, oversize=oversize, reply=reply)

    def _finish(self, plan: _Plan, attempts: list[AttemptResult]) -> CompactionResult:
        last = attempts[-1]
        usable = last.summary is not None and not last.oversize
        if not last.ok and self.policy == "raise":
            reasons = [f"{f.status} {f.value!r}" for f in _failures(last.verdict)]
            reasons += last.problems + ([last.error] if last.error else [])
            raise CompactionRefused(f"no acceptable summary after {len(attempts)} attempt(s): "
                                    + "; ".join(reasons), attempts=attempts)
        if not usable:  # the summarizer failed: leave the conversation as it was
            error = last.error or "; ".join(last.problems)
            if plan.must_shrink:
                self._back_off(plan, error)
            return self._result(plan, attempts, None, keep=set(), error=error)
        with self._memo_lock:
            self._failing.pop(plan.ledger.nonce, None)  # the summarizer answered
        # fail closed: a turn a rule could not finish, or whose literal is too long to pin
        summary = last.summary
        keep = {plan.index(t.turn) for t in plan.pinned.timeouts} | \
            {plan.index(l.turn) for l in plan.pinned.oversize}
        if not last.ok and self.policy == "repair":
            summary = _repair(summary, last.verdict)
        elif not last.ok and self.policy == "keep_source":
            lost = {f.value for f in _failures(last.verdict)}
            keep |= {plan.index(l.turn) for l in plan.required if l.value in lost}
        return self._result(plan, attempts, summary, keep=keep, error=None)

    def _result(self, plan: _Plan, attempts: list[AttemptResult], summary: str | None,
                keep: set[int], error: str | None) -> CompactionResult:
        conversation, span, ledger = plan.conversation, plan.span, plan.ledger
        turns = conversation.turns
        verbatim = "\n".join([turns[i].text for i in sorted(keep)] +
                              [t.text for t in turns[span.end:]])
        composed_text, after = None, sum(plan.turn_tokens)
        if summary is not None:
            header = SUMMARY_HEADER.format(first=_first_turn(plan), last=plan.number(span.end - 1))
            composed_text = f"{header}\n\n{summary}"
        # the block writes what the rest of the composed context does not hold
        block = self._fit(plan, [composed_text, verbatim] if composed_text else [])
        if composed_text is not None:
            composed = _composed_tokens(plan, composed_text, block, keep)
            grown = self._grown(plan, composed) if plan.must_shrink else None
            if grown is None:
                after = composed
            else:  # fail closed: the trigger's compaction never enlarges
                summary, composed_text, error = None, None, grown
                block = self._fit(plan, [])
        if composed_text is None:
            messages = [t.raw for t in conversation.turns if t.raw is not None]
        else:
            messages = compose(conversation, span, composed_text, block, keep)
        verdict = attempts[-1].verdict if attempts else None
        try:
            key, key_error = audit_key(self.audit), None
        except AuditError as exc:  # the compaction stands; secrets are still never in clear
            key = secrets.token_bytes(32)
            key_error = f"audit key unavailable, this record is hashed with a one-time key: {exc}"
        record = self._record(plan, attempts, summary, after, verbatim, error, block, key)
        result = CompactionResult(messages=messages, ledger=ledger, record=record,
                                  compacted=summary is not None, summary=composed_text,
                                  verdict=verdict, attempts=attempts, conversation=conversation,
                                  timeouts=list(plan.pinned.timeouts),
                                  block=block if composed_text is not None else None)
        result.audit_error = write_record(self.audit, record) or key_error
        if record.compaction != plan.compaction:  # the log gave it the next free number
            self._renumbered(ledger.conversation_id, plan, record.compaction)
        if result.compacted:
            result.extracted = [lit.value for lit in plan.pinned.literals if not lit.sensitive]
        if result.compacted and self.archive_limits is not None:
            archive_error = self._archive(plan, result, key)
            result.audit_error = result.audit_error or archive_error
        return result

    def _archive(self, plan: _Plan, result: CompactionResult, key: bytes) -> str | None:
        """Write every literal this compaction extracted into the log's archive (beside its
        record); a log without one (JSONL, memory, a plain sink) is skipped. A failure is
        reported like a failed record write, never undoing the compaction."""
        try:
            writer = getattr(self.audit, "write_archive", None)
        except AuditError as exc:  # a deferred log that still cannot be opened
            return str(exc)
        if writer is None:
            return None
        turns = plan.conversation.turns
        calls: dict[int, str] = {}  # a turn's tool calls as text, built once per turn

        def text_of(lit: Literal) -> str | None:
            index = plan.index(lit.turn)
            if not 0 <= index < len(turns):
                return None
            turn = turns[index]
            if lit.field == "text" or lit.value in turn.text:
                return turn.text
            if index not in calls:
                calls[index] = call_text(turn)
            return calls[index]

        entries = archive_entries(
            (lit for lit in plan.pinned.literals if len(lit.value) <= LITERAL_MAX_CHARS),
            text_of, key=key, secrets=[e.value for e in plan.ledger.entries if e.sensitive])
        try:
            result.archive = writer(result.record.conversation_id, result.record.compaction,
                                    entries, self.archive_limits)
        except AuditError as exc:
            return str(exc)
        return None

    def recall(self, query: str, *, conversation: str | None = None, kind: str | None = None,
               rule: str | None = None, limit: int = 10) -> list[Any]:
        """Literals archived by this firewall's compactions that match ``query`` (a value, any
        part of one, or words of its context), best first, as ``archive.ArchiveHit``. Needs an
        audit log that keeps an archive (SQLite, PostgreSQL); sensitive ones never come back."""
        from ..audit.archive import NO_ARCHIVE, Query

        search = getattr(self.audit, "recall", None) if self.audit is not None else None
        if search is None:
            raise AuditError(f"this firewall has no audit log with an archive to recall from "
                             f"({NO_ARCHIVE}); pass audit=PATH_OR_URL")
        return search(Query.of(query, conversation=conversation, kind=kind, rule=rule,
                               limit=limit))

    def _fit(self, plan: _Plan, beside: Sequence[str]) -> str:
        """Fit the ledger to this compaction's budget, values the texts ``beside`` the block
        hold costing nothing (see ``pin``); returns the block that writes the rest."""
        held = held_values(plan.ledger, beside)
        plan.pinned.evicted += plan.ledger.fit(plan.budget, compaction=plan.compaction,
                                               salience=plan.salience, held=held)
        return plan.ledger.render(held)

    def _grown(self, plan: _Plan, after: int) -> str | None:
        """Why a composition of ``after`` tokens would not shrink the conversation (None when
        it would). What its summary and block would cost is remembered per ledger until a
        composition shrinks it: ``compaction_due`` expects the next one to cost as much."""
        before = sum(plan.turn_tokens)
        with self._memo_lock:
            nonce = plan.ledger.nonce
            if after < before:
                self._costs.pop(nonce, None)
                return None
            _remember(self._costs, nonce, after - before + plan.span_tokens)
        return (f"not compacted: the composed context would be {after:,} tokens, not fewer than "
                f"the {before:,} it replaces (summary and ledger block cost more than the "
                f"{plan.span_tokens:,}-token span); kept as it was")

    def _back_off(self, plan: _Plan, error: str) -> None:
        """The ``n``-th trigger compaction in a row without a usable summary: this ledger's
        next one waits until the conversation has ``2**n`` more messages (at most
        ``BACK_OFF_MAX``)."""
        nonce = plan.ledger.nonce
        with self._memo_lock:
            failures = self._failing.get(nonce, _Failing()).failures + 1
            wait = min(2 ** failures, BACK_OFF_MAX)
            _remember(self._failing, nonce,
                      _Failing(failures, len(plan.conversation.turns) + wait, error))

    def _renumbered(self, conversation_id: str, plan: _Plan, number: int) -> None:
        for eviction in plan.pinned.evicted:
            eviction.compaction = number
        plan.compaction = number
        with self._memo_lock:
            self._numbers[conversation_id] = max(number, self._numbers.get(conversation_id, 0))

    def _record(self, plan: _Plan, attempts: list[AttemptResult], summary: str | None,
                after: int, verbatim: str, error: str | None, block: str,
                key: bytes) -> AuditRecord:
        """``after``: the tokens of the conversation the compaction leaves (``_composed_tokens``,
        which counts the span turns kept verbatim; ``before`` when it failed); ``verbatim``:
        the text of those turns and of the tail."""
        span = plan.span
        before = sum(plan.turn_tokens)
        return build_record(
            self, plan.ledger, vendor_path=summarizer_path(plan.summarizer),
            summarizer=type(plan.summarizer).__name__ if plan.summarizer else None,
            compaction=plan.compaction,
            span=(_first_turn(plan), plan.number(span.end - 1)) if len(span) else None,
            turns_compacted=len(span), tokens_before=before, tokens_after=after,
            summary=summary, verdict=attempts[-1].verdict if attempts else None,
            evicted=plan.pinned.evicted, unpinned=plan.pinned.oversize, attempts=attempts,
            compacted=summary is not None, error=error, verbatim=verbatim,
            repaired=self.policy == "repair" and bool(attempts) and not attempts[-1].ok, key=key,
            block=block)

    # ── drivers ─────────────────────────────────────────────────────────────────────────

    def compact(self, messages: Any, summarizer: Any = None, *, keep_last: int | None = None,
                ledger: Ledger | None = None, compaction: int | None = None,
                tail_start: int | None = None, must_shrink: bool = False) -> CompactionResult:
        """Compact ``messages`` (any supported format); returns the same format.
        ``tail_start``: the index of the first turn kept verbatim, instead of ``keep_last``.
        ``must_shrink`` (what the triggers ask): fail closed, the summary unused, when the
        composed context would not be smaller than ``messages``."""
        summarizer, loop = self._start(messages, summarizer, keep_last, ledger, compaction,
                                       tail_start, must_shrink)
        answer: Any = None
        while True:
            try:
                request = loop.send(answer)
            except StopIteration as done:
                return done.value
            try:
                answer = summarizer.summarize(request)
            except Exception as exc:  # noqa: BLE001 - any failure leaves the text intact
                answer = exc

    async def acompact(self, messages: Any, summarizer: Any = None, *,
                       keep_last: int | None = None, ledger: Ledger | None = None,
                       compaction: int | None = None, tail_start: int | None = None,
                       must_shrink: bool = False) -> CompactionResult:
        """``compact`` for async code; a sync-only summarizer runs in a worker thread."""
        summarizer, loop = self._start(messages, summarizer, keep_last, ledger, compaction,
                                       tail_start, must_shrink)
        answer: Any = None
        while True:
            try:
                request = loop.send(answer)
            except StopIteration as done:
                return done.value
            try:
                if hasattr(summarizer, "asummarize"):
                    answer = await summarizer.asummarize(request)
                else:
                    answer = await asyncio.to_thread(summarizer.summarize, request)
            except Exception as exc:  # noqa: BLE001 - any failure leaves the text intact
                answer = exc

    def _start(self, messages: Any, summarizer: Any, keep_last: int | None,
               ledger: Ledger | None, compaction: int | None,
               tail_start: int | None = None,
               must_shrink: bool = False) -> tuple[Any, Generator]:
        summarizer = self._summarizer(summarizer)
        plan = self._plan(messages, ledger, keep_last, compaction, tail_start)
        plan.summarizer, plan.must_shrink = summarizer, must_shrink
        return summarizer, self._loop(plan)

    # ── triggers: what a harness calls before every model call ─────────────────────────

    def maybe_compact(self, messages: Any, trigger: Trigger, *, ledger: Ledger | None = None,
                      summarizer: Any = None, keep_last: int | None = None,
                      expected_output: int | None = None) -> Any:
        """``messages`` itself (the same object, untouched) while the live context stays under
        the trigger's watermark, when no compaction is worth doing (the span holds too little
        fresh material, or the summarizer failed just before: ``compaction_due`` says why), or
        when the compaction failed closed;
        otherwise the compacted messages: the system prompt as it was (the very objects:
        byte-identical, the prompt cache's prefix), then the summary and the ledger block, then
        the verbatim tail. Pass the same ``ledger`` at every call: it is updated in place and
        stays cumulative across compactions. ``compact_if_due`` returns the whole
        ``CompactionResult``."""
        result = self.compact_if_due(messages, trigger, ledger=ledger, summarizer=summarizer,
                                     keep_last=keep_last, expected_output=expected_output)
        return result.messages if result is not None and result.compacted else messages

    async def amaybe_compact(self, messages: Any, trigger: Trigger, *,
                             ledger: Ledger | None = None, summarizer: Any = None,
                             keep_last: int | None = None,
                             expected_output: int | None = None) -> Any:
        """``maybe_compact`` for async code."""
        conversation = self.conversation(messages)
        due = self._due(conversation, trigger, ledger, keep_last, expected_output)
        if not due.due:
            return messages
        result = await self.acompact(conversation, summarizer, ledger=ledger,
                                     tail_start=due.boundary, must_shrink=True)
        return result.messages if result.compacted else messages

    def compact_if_due(self, messages: Any, trigger: Trigger, *, ledger: Ledger | None = None,
                       summarizer: Any = None, keep_last: int | None = None,
                       compaction: int | None = None,
                       expected_output: int | None = None) -> CompactionResult | None:
        """The compaction ``trigger`` calls for, with the span's end nudged to a natural
        point (``Trigger.boundary``); None when it does not fire, or when it fires but no
        compaction is worth doing (``compaction_due`` tells the two apart)."""
        conversation = self.conversation(messages)
        due = self._due(conversation, trigger, ledger, keep_last, expected_output)
        if not due.due:
            return None
        return self.compact(conversation, summarizer, ledger=ledger, compaction=compaction,
                            tail_start=due.boundary, must_shrink=True)

    def compaction_due(self, messages: Any, trigger: Trigger, *, ledger: Ledger | None = None,
                       keep_last: int | None = None,
                       expected_output: int | None = None) -> Decision:
        """What ``maybe_compact`` would decide on ``messages`` with this ``ledger``, without
        compacting: whether the trigger fires, and then the tail's first turn, or why the
        compaction is skipped (``Decision.skipped``). Skipped: the span holds too little fresh
        material for the compaction to bring the context back under the watermark with the
        trigger's headroom, counting what the summary and ledger will take (as much as the
        earlier ones in the span, or as the last attempt on this ledger that failed closed
        because it would not shrink the context). ``maybe_compact`` and ``compact_if_due`` skip
        it at every call until new turns bring enough; a harness that sees it at every call has
        a verbatim tail too large for the window, and should keep fewer turns. Also skipped:
        after ``n`` of the trigger's compactions in a row got no usable summary from the
        summarizer, every firing until the conversation has ``2**n`` more messages (at most
        ``BACK_OFF_MAX``). Asking changes nothing: only compactions move the back-off."""
        return self._due(self.conversation(messages), trigger, ledger, keep_last,
                         expected_output)

    def _due(self, conversation: Conversation, trigger: Trigger, ledger: Ledger | None,
             keep_last: int | None, expected_output: int | None) -> Decision:
        span = choose_span(conversation.turns, self.keep_last if keep_last is None
                           else keep_last, self.keep_tokens)
        nonce = ledger.nonce if ledger is not None else None
        with self._memo_lock:
            cost, failing = self._costs.get(nonce, 0), self._failing.get(nonce)
        decision = trigger.assess(conversation.turns, span, is_own_message, expected_output,
                                  cost=cost)
        waiting = failing.retry_at - len(conversation.turns) if failing else 0
        if not decision.due or waiting <= 0:
            return decision
        return dataclasses.replace(decision, boundary=None, skipped=(
            f"{BACKING_OFF}: no usable summary at the last {failing.failures} compaction(s) "
            f"({failing.error}); the next try waits for {waiting} more message(s)"))

    def _summarizer(self, summarizer: Any) -> Any:
        summarizer = summarizer or self.summarizer
        if summarizer is None:
            from ..summarizers.extractive import ExtractiveSummarizer

            summarizer = ExtractiveSummarizer()
        if callable(summarizer) and not hasattr(summarizer, "summarize"):
            summarizer = CallableSummarizer(summarizer)
        if not hasattr(summarizer, "summarize"):
            raise SummarizerError(f"{type(summarizer).__name__} has no summarize(request)")
        return summarizer


def summarizer_path(summarizer: Any) -> str:
    """The audit's ``vendor_path`` of a client-side summarizer: its own (vendor and model, for
    the built-in ones), else ``custom:`` and its class name."""
    path = getattr(summarizer, "vendor_path", None)
    return path if isinstance(path, str) and path else f"custom:{type(summarizer).__name__}"


class CallableSummarizer:
    """Any ``(messages) -> str`` function as a summarizer: it receives the span's raw
    messages, with the firewall's instructions appended as a final user message."""

    def __init__(self, func: Any) -> None:
        self.func = func

    @property
    def vendor_path(self) -> str:
        """``callable:`` and the function's name."""
        name = getattr(self.func, "__qualname__", None) or type(self.func).__name__
        return f"callable:{name}"

    def summarize(self, request: SummaryRequest) -> str:
        # copies: a function that edits its input must not change the caller's conversation
        messages = [copy.deepcopy(t.raw) if t.raw is not None
                    else {"role": t.role, "content": t.text} for t in request.turns]
        prompt = request.instructions + (f"\n\n{request.feedback}" if request.feedback else "")
        return self.func(messages + [{"role": "user", "content": prompt}])


def worth_pinning(lit: Literal | LedgerEntry) -> bool:
    """What ``check --strict`` requires: every literal worth pinning. One its rule marks
    ``required``; or one from a rule of at least the default priority (50) that is shaped like
    an identifier: 4+ characters with a digit, a separator (``-_./\\:#@``) or a lower-upper case
    change, or a code of 5+ capitals (see ``validate.identifier_shaped``). Not ``CO``, ``USA``,
    ``100``, ``$60.00`` or ``Phoenix``."""
    return lit.severity == "required" or (lit.priority >= STRICT_MIN_PRIORITY
                                          and identifier_shaped(lit.value))


def source_texts(turns: Iterable[Turn]) -> Iterable[str]:
    """The texts a summary of ``turns`` copies from: each turn's text, and its tool calls'
    names, arguments (as JSON, keys included) and argument values."""
    for turn in turns:
        yield turn.text
        for call in turn.tool_calls:
            yield call.name
            yield call.arguments_json() or ""  # None: nested too deep (the span is refused)
            yield from (text for _, text in scalar_leaves(call.arguments))


def ledger_blocks(text: str, ledger: Ledger) -> list[tuple[int, int]]:
    return find_blocks(text, ledger.nonce, ledger.key)


def is_own_message(turn: Turn) -> bool:
    """A message the firewall composed: a user turn that starts with its summary header or
    with a ledger block. Only the user and the firewall write user turns, so text shaped like
    these in tool output stays tool output; a block is recognised here even when it is not
    genuine for this ledger (a conversation compacted before without its ledger persisted)."""
    return turn.role == "user" and (turn.text.startswith(_OWN_BLOCK)
                                    or _OWN_SUMMARY.match(turn.text) is not None)


def _unserializable(turns: Sequence[Turn], span: Span) -> str | None:
    """Why the span cannot go to a summarizer: a tool call whose arguments do not serialize
    (a Python object nested beyond the recursion limit, or circular)."""
    for i in range(span.start, span.end):
        for call in turns[i].tool_calls:
            if call.arguments_json() is None:
                return (f"turn {i}: the arguments of tool call {call.name!r} cannot be "
                        f"serialized (nested too deep or circular); the conversation is kept "
                        f"as it was")
    return None


def _remember(memo: OrderedDict[str, Any], key: str, value: Any) -> None:
    """``memo[key] = value`` as the newest entry, the oldest dropped past ``NUMBERED_MAX``
    (the caller holds ``_memo_lock``)."""
    memo[key] = value
    memo.move_to_end(key)
    if len(memo) > NUMBERED_MAX:
        memo.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Failing:
    failures: int = 0  # trigger compactions in a row without a usable summary
    retry_at: int = 0  # the next is tried once the conversation has this many messages
    error: str = ""  # the last one's


def _composed_tokens(plan: _Plan, summary: str, block: str, keep: set[int]) -> int:
    """The tokens of the conversation once ``summary`` and ``block`` replace the span (turns
    in ``keep`` stay), counted as the live context is: turn by turn."""
    conversation, span = plan.conversation, plan.span
    fmt = FORMATS[conversation.format]
    own = fmt.to_turns(fmt.summary_messages(summary, block))
    kept = with_tool_pairs(conversation.turns, keep, span)
    return sum(plan.turn_tokens) - plan.span_tokens + live_tokens(own) + \
        sum(plan.turn_tokens[i] for i in kept)


def _first_turn(plan: _Plan) -> int:
    """The first turn a summary covers: an earlier summary's first, when it continues one."""
    return plan.earlier.first if plan.earlier is not None else plan.span.start


def _failures(verdict: Verdict | None) -> list[Any]:
    return [] if verdict is None else list(verdict.missing) + list(verdict.mutated)


def _snippet(plan: _Plan, lit: Literal, width: int = 60) -> str:
    """Source text around a literal, masked before it is cut: a secret cut in half by the
    window would no longer be recognised, and would leak."""
    index = plan.index(lit.turn)
    text = plan.turn(index).text if lit.field == "text" else ""
    value = plan.mask_value(lit.value)
    at = text.find(value) if index not in plan.withheld else -1
    if at < 0:  # a JSON path names its keys, and a key may be a secret
        return f"{plan.mask(lit.field)} of turn {lit.turn}"
    end = at + len(value)
    start, end = uncut(text, max(0, at - width), min(len(text), end + width))
    return ("…" if start else "") + text[start:end].replace("\n", " ") + \
        ("…" if end < len(text) else "")


def _feedback(plan: _Plan, previous: AttemptResult) -> str:
    """What the previous attempt lost, masked piece by piece: the problems quote the
    summarizer's own text; values and sources are masked; a near miss of a secret is described,
    never quoted (its characters are the secret's)."""
    lines = ["Your previous summary cannot be used yet:"]
    if previous.error:
        lines.append(f"- it failed: {plan.mask(previous.error)}")
    lines += [f"- {p}" for p in previous.problems]
    by_value = {l.value: l for l in plan.required}
    for finding in _failures(previous.verdict):
        lit = by_value.get(finding.value)
        value = plan.mask_value(finding.value)
        source = f" (rule {finding.rule}; source: {_snippet(plan, lit)})" if lit else ""
        if finding.status == "mutated" and plan.placeholders and lit and lit.sensitive:
            lines.append(f"- you altered {value} ({finding.reason}): copy it exactly{source}")
        elif finding.status == "mutated":
            lines.append(f"- you wrote {plan.mask(finding.resembles or '')!r} where the exact "
                         f"literal is {value!r} ({finding.reason}){source}")
        else:
            lines.append(f"- missing: {value!r}{source}")
    lines.append("Rewrite the summary so that every one of these appears byte-for-byte.")
    return "\n".join(lines)


def _repair(summary: str, verdict: Verdict | None) -> str:
    """Strip mutated spans (right to left, so offsets hold) and append the lost literals."""
    failures = _failures(verdict)
    spans = sorted({f.span for f in failures if f.status == "mutated" and f.span}, reverse=True)
    limit = len(summary)
    for start, end in spans:
        if end <= limit:  # overlapping spans: the rightmost one already covers this text
            summary = summary[:start] + "[see pinned literals]" + summary[end:]
            limit = start
    lost = list(dict.fromkeys(f.value for f in failures))
    if lost:
        summary += "\nLiterals kept verbatim: " + ", ".join(lost)
    return summary
