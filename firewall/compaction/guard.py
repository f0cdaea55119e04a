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
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Literal as TypingLiteral

from ..audit.archive import ArchiveLimits
from ..audit import open_audit_sink
from .budget import Budget, budget_tokens as resolve_budget  # not the parameter
from .compose import choose_span
from ..tokens import turn_tokens
from ..errors import AuditError, FirewallError, SummarizerError
from ..extraction.extract import Extractor, ScanMemo, Scanner
from ..formats import parse_messages
from .ledger import LITERAL_MAX_CHARS, Ledger, LedgerEntry, find_blocks
from ..literals import Literal
from ..extraction.packs import Pack, load_packs
from .records import held_values
from ..summarizers.base import SummaryRequest
from .trigger import BACKING_OFF, Decision, Trigger
from ..turns import Conversation, Turn
from .validate import Verdict, validate
from .loop import CompactionLoop
from .plan import (BackOff, CompactionResult, is_own_message, Pinned, remember_number,
                   source_texts, worth_pinning)

Policy = TypingLiteral["reinject", "repair", "keep_source", "raise"]
POLICIES: tuple[str, ...] = ("reinject", "repair", "keep_source", "raise")
# --strict: rules ranked below the default priority (money, amounts, profile words, bare numbers,
# dates) find context, not keys
class Firewall(CompactionLoop):
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
        self._failing: OrderedDict[str, BackOff] = OrderedDict()
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
            remember_number(self._numbers, conversation_id, number)
        return number

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
