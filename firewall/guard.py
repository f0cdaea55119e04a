"""The compaction guard: extract → pin → summarize → validate → re-ask → re-inject → audit.

The loop is written once, as a generator that yields each ``SummaryRequest`` and receives the
summarizer's answer (sans-IO); ``Firewall.compact`` and ``Firewall.acompact`` are the two thin
drivers that perform the calls. Whatever happens, the caller's messages are never mutated and
no pinned literal is lost: a failed compaction returns the conversation as it was.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal as TypingLiteral

from .audit import AuditRecord, open_audit_log
from .compose import Span, choose_span, compose
from .errors import AuditError, CompactionRefused, FirewallError, SummarizerError
from .extract import Extractor, ScanMemo, Scanner
from .formats import parse_messages
from .ledger import Eviction, Ledger, LedgerEntry, contextual_salience, find_blocks, uses
from .literals import Literal
from .packs import Pack, load_packs
from .placeholders import Placeholders
from .records import AttemptResult, audit_key, build_record, write_record
from .summarizers.base import RequiredLiteral, Summary, SummaryRequest
from .tokens import count_tokens
from .turns import Conversation, Turn
from .validate import Verdict, validate

Policy = TypingLiteral["reinject", "repair", "keep_source", "raise"]
POLICIES: tuple[str, ...] = ("reinject", "repair", "keep_source", "raise")
NUMBERED_MAX = 10_000  # conversations whose last compaction number a Firewall remembers

SUMMARY_HEADER = "Summary of the earlier conversation (turns {first}-{last}), compacted:"
INSTRUCTIONS = (
    "Summarize the conversation above for an agent that will continue it: keep the user's "
    "goal, what was done, what was decided and what is still open.")
REQUIRED_INSTRUCTIONS = (
    "These exact strings are load-bearing: a later tool call will look them up byte-for-byte. "
    "Copy each one into the summary exactly as written (same characters, case and "
    "separators), and do not write any other string that looks like one of them:")


@dataclass
class Pinned:
    """What one extraction pass added: literals seen, rule timeouts, ledger evictions."""

    literals: list[Literal]
    timeouts: list[Any]
    evicted: list[Eviction]


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

    def report(self) -> dict[str, int]:
        statuses = [lit.status for lit in self.record.literals]
        return {
            "pinned": len(self.ledger),
            "in_summary": sum(lit.in_summary for lit in self.record.literals),
            "reasked": max(0, len(self.attempts) - 1),
            "mutated": sum(s.startswith("mutated") for s in statuses),
            "reinjected": sum(lit.in_ledger for lit in self.record.literals),
            "evicted": statuses.count("evicted"),
            "kept_verbatim": statuses.count("kept_verbatim"),
        }


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
    summarizer: Any = None  # per call: concurrent compactions may use different ones

    @property
    def span_tokens(self) -> int:
        return sum(self.turn_tokens[self.span.start:self.span.end])

    def mask(self, text: str) -> str:
        """Text as a summarizer may see it: sensitive literals replaced by placeholders."""
        return self.placeholders.mask(text) if self.placeholders else text


class Firewall:
    """Rule packs plus the compaction policy; one instance serves many conversations.

    ``required``: which literals the summary itself must carry (the rest ride in the ledger):
    ``"rules"`` (rules marked ``severity: required``), ``"user"`` (those, and every literal the
    user typed: the default), or ``"all"``.
    """

    def __init__(self, packs: Iterable[Pack | str] | None = None, *, budget_tokens: int = 2000,
                 max_retries: int = 2, policy: Policy = "reinject", keep_last: int = 8,
                 keep_tokens: int | None = None, required: str = "user",
                 placeholders: bool = False, audit: Any = None,
                 summarizer: Any = None) -> None:
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
        self._numbers_lock = threading.Lock()
        self.budget_tokens, self.max_retries, self.policy = budget_tokens, max_retries, policy
        self.keep_last, self.keep_tokens, self.required_mode = keep_last, keep_tokens, required
        self.placeholders = placeholders
        self.audit = open_audit_log(audit) if isinstance(audit, (str, bytes)) or \
            hasattr(audit, "__fspath__") else audit
        self.summarizer = summarizer

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
            count_tokens(turn.text)
        return self.extractor.scan(conversation).literals

    def check(self, messages: Any, summary: str, *, strict: bool = False) -> Verdict:
        """Validate any compactor's summary against the literals of the turns it summarized."""
        literals = self.scan(messages)
        required = literals if strict else [l for l in literals if self.is_required(l)]
        return validate(summary, [(l.value, l.rule) for l in required],
                        known=[l.value for l in literals])

    def is_required(self, lit: Literal | LedgerEntry) -> bool:
        """Must the summary itself carry this literal (or ledger entry)? See ``required``."""
        return (self.required_mode == "all" or lit.severity == "required"
                or (self.required_mode == "user" and lit.role == "user"))

    def pin(self, ledger: Ledger, turns: Sequence[Turn], *, offset: int = 0,
            compaction: int | None = None, seen: set[str] | None = None,
            budget: int | None = None) -> Pinned:
        """Extract ``turns`` into ``ledger``, drop values another entry carries, and fit the
        budget by the span's salience: the one path a compaction, the vendor wrappers and
        ``firewall eval`` share.

        Turn numbers are ``offset`` + position, so provenance survives pruning. Genuine ledger
        blocks are skipped. ``seen`` (digests of raw messages) serves wrappers that receive a
        whole history with every request: a message is never counted twice.
        """
        def skip(text: str) -> list[tuple[int, int]]:
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
        ledger.update(scan.literals)
        evicted = ledger.fit(self.budget_tokens if budget is None else budget,
                             compaction=compaction,
                             salience=contextual_salience(uses(ledger.entries, turns)))
        return Pinned(scan.literals, scan.timeouts, evicted)

    # ── the loop (sans-IO) ──────────────────────────────────────────────────────────────

    def _plan(self, messages: Any, ledger: Ledger | None, keep_last: int | None,
              compaction: int | None) -> _Plan:
        conversation = self.conversation(messages)
        ledger = ledger if ledger is not None else Ledger.new(conversation.id)
        span = choose_span(conversation.turns,
                           self.keep_last if keep_last is None else keep_last, self.keep_tokens)
        number = compaction or self.next_compaction(ledger.conversation_id)
        pinned = self.pin(ledger, conversation.turns[span.start:span.end], offset=span.start,
                          compaction=number)
        kept = set(ledger.values())
        required = [l for l in pinned.literals if self.is_required(l) and l.value in kept]
        placeholders = None
        if self.placeholders:
            placeholders = Placeholders()
            placeholders.add(e.value for e in ledger.entries if e.sensitive)
            placeholders.add(l.value for l in pinned.literals if l.sensitive)
        return _Plan(conversation, span, pinned, ledger, required, number, placeholders,
                     [count_tokens(t.text) for t in conversation.turns])

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
        with self._numbers_lock:
            number = max(number, self._numbers.get(conversation_id, 0) + 1)
            self._numbers[conversation_id] = number
            self._numbers.move_to_end(conversation_id)
            if len(self._numbers) > NUMBERED_MAX:
                self._numbers.popitem(last=False)
        return number

    def _request(self, plan: _Plan, attempt: int, previous: AttemptResult | None) -> SummaryRequest:
        mask = plan.mask
        turns = plan.conversation.turns[plan.span.start:plan.span.end]
        if plan.placeholders:
            turns = [plan.placeholders.mask_turn(t) for t in turns]
        required = tuple(RequiredLiteral(mask(l.value), l.rule, _snippet(plan, l))
                         for l in plan.required)
        instructions = INSTRUCTIONS
        if required:
            instructions += "\n" + REQUIRED_INSTRUCTIONS + "\n" + "\n".join(
                f"- {r.value}" for r in required)
        if plan.placeholders and plan.placeholders.table:
            instructions += ("\nStrings such as [[SECRET_1]] stand for secrets: copy them "
                             "exactly as they are, brackets included.")
        feedback = mask(_feedback(plan, previous)) if previous is not None else None
        return SummaryRequest(turns=tuple(turns), required=required, instructions=instructions,
                              attempt=attempt, feedback=feedback,
                              previous=mask(previous.summary) if previous and previous.summary
                              else None)

    def _loop(self, plan: _Plan) -> Generator[SummaryRequest, Any, CompactionResult]:
        if not len(plan.span):
            return self._result(plan, [], None, set(), "nothing to compact")
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
        problems = []
        if plan.placeholders:
            text, damaged = plan.placeholders.restore(text)
            problems += [f"unknown or altered placeholder {p!r}" for p in damaged]
        tokens = count_tokens(text)
        oversize = tokens > max_tokens
        if oversize:
            problems.append(f"the summary is {tokens} tokens, longer than the "
                            f"{max_tokens}-token span it replaces")
        verdict = validate(text, [(l.value, l.rule) for l in plan.required],
                           known=plan.ledger.values())
        return AttemptResult(number, text, verdict, usage=dict(usage or {}), model=model,
                             problems=problems, oversize=oversize)

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
            return self._result(plan, attempts, None, keep=set(), error=error)
        summary, keep = last.summary, {t.turn for t in plan.pinned.timeouts}
        if not last.ok and self.policy == "repair":
            summary = _repair(summary, last.verdict)
        elif not last.ok and self.policy == "keep_source":
            lost = {f.value for f in _failures(last.verdict)}
            keep |= {l.turn for l in plan.required if l.value in lost}
        return self._result(plan, attempts, summary, keep=keep, error=None)

    def _result(self, plan: _Plan, attempts: list[AttemptResult], summary: str | None,
                keep: set[int], error: str | None) -> CompactionResult:
        conversation, span, ledger = plan.conversation, plan.span, plan.ledger
        block = ledger.render()
        if summary is None:
            messages = [t.raw for t in conversation.turns if t.raw is not None]
            composed_text = None
        else:
            header = SUMMARY_HEADER.format(first=span.start, last=span.end - 1)
            composed_text = f"{header}\n\n{summary}"
            messages = compose(conversation, span, composed_text, block, keep)
        verdict = attempts[-1].verdict if attempts else None
        try:
            key, key_error = audit_key(self.audit), None
        except AuditError as exc:  # the compaction stands; secrets are still never in clear
            key = secrets.token_bytes(32)
            key_error = f"audit key unavailable, this record is hashed with a one-time key: {exc}"
        record = self._record(plan, attempts, summary, keep, error, block, key)
        result = CompactionResult(messages=messages, ledger=ledger, record=record,
                                  compacted=summary is not None, summary=composed_text,
                                  verdict=verdict, attempts=attempts, conversation=conversation,
                                  timeouts=list(plan.pinned.timeouts))
        result.audit_error = write_record(self.audit, record) or key_error
        return result

    def _record(self, plan: _Plan, attempts: list[AttemptResult], summary: str | None,
                keep: set[int], error: str | None, block: str, key: bytes) -> AuditRecord:
        span, turns = plan.span, plan.conversation.turns
        verbatim = "\n".join([turns[i].text for i in sorted(keep)] +
                              [t.text for t in turns[span.end:]])
        before = sum(plan.turn_tokens)
        after = before if summary is None else (
            before - plan.span_tokens + count_tokens(summary) + count_tokens(block))
        return build_record(
            self, plan.ledger, vendor_path=getattr(plan.summarizer, "vendor_path", "client"),
            summarizer=type(plan.summarizer).__name__ if plan.summarizer else None,
            compaction=plan.compaction, span=(span.start, span.end - 1) if len(span) else None,
            turns_compacted=len(span), tokens_before=before, tokens_after=after,
            summary=summary, verdict=attempts[-1].verdict if attempts else None,
            evicted=plan.pinned.evicted, attempts=attempts, compacted=summary is not None,
            error=error, verbatim=verbatim,
            repaired=self.policy == "repair" and bool(attempts) and not attempts[-1].ok, key=key,
            block=block)

    # ── drivers ─────────────────────────────────────────────────────────────────────────

    def compact(self, messages: Any, summarizer: Any = None, *, keep_last: int | None = None,
                ledger: Ledger | None = None, compaction: int | None = None) -> CompactionResult:
        """Compact ``messages`` (any supported format); returns the same format."""
        summarizer, loop = self._start(messages, summarizer, keep_last, ledger, compaction)
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
                       compaction: int | None = None) -> CompactionResult:
        """``compact`` for async code; a sync-only summarizer runs in a worker thread."""
        summarizer, loop = self._start(messages, summarizer, keep_last, ledger, compaction)
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
               ledger: Ledger | None, compaction: int | None) -> tuple[Any, Generator]:
        summarizer = self._summarizer(summarizer)
        plan = self._plan(messages, ledger, keep_last, compaction)
        plan.summarizer = summarizer
        return summarizer, self._loop(plan)

    def _summarizer(self, summarizer: Any) -> Any:
        summarizer = summarizer or self.summarizer
        if summarizer is None:
            from .summarizers.extractive import ExtractiveSummarizer

            summarizer = ExtractiveSummarizer()
        if callable(summarizer) and not hasattr(summarizer, "summarize"):
            summarizer = CallableSummarizer(summarizer)
        if not hasattr(summarizer, "summarize"):
            raise SummarizerError(f"{type(summarizer).__name__} has no summarize(request)")
        return summarizer


class CallableSummarizer:
    """Any ``(messages) -> str`` function as a summarizer: it receives the span's raw
    messages, with the firewall's instructions appended as a final user message."""

    vendor_path = "callable"

    def __init__(self, func: Any) -> None:
        self.func = func

    def summarize(self, request: SummaryRequest) -> str:
        # copies: a function that edits its input must not change the caller's conversation
        messages = [copy.deepcopy(t.raw) if t.raw is not None
                    else {"role": t.role, "content": t.text} for t in request.turns]
        prompt = request.instructions + (f"\n\n{request.feedback}" if request.feedback else "")
        return self.func(messages + [{"role": "user", "content": prompt}])


def ledger_blocks(text: str, ledger: Ledger) -> list[tuple[int, int]]:
    return find_blocks(text, ledger.nonce, ledger.key)


def _failures(verdict: Verdict | None) -> list[Any]:
    return [] if verdict is None else list(verdict.missing) + list(verdict.mutated)


def _snippet(plan: _Plan, lit: Literal, width: int = 60) -> str:
    """Source text around a literal, masked before it is cut: a secret cut in half by the
    window would no longer be recognised, and would leak."""
    turn = plan.conversation.turns[lit.turn]
    text = plan.mask(turn.text) if lit.field == "text" else ""
    at = text.find(plan.mask(lit.value))
    if at < 0:
        return f"{lit.field} of turn {lit.turn}"
    end = at + len(plan.mask(lit.value))
    start, end = max(0, at - width), min(len(text), end + width)
    return ("…" if start else "") + text[start:end].replace("\n", " ") + \
        ("…" if end < len(text) else "")


def _feedback(plan: _Plan, previous: AttemptResult) -> str:
    lines = ["Your previous summary cannot be used yet:"]
    if previous.error:
        lines.append(f"- it failed: {previous.error}")
    lines += [f"- {p}" for p in previous.problems]
    by_value = {l.value: l for l in plan.required}
    for finding in _failures(previous.verdict):
        lit = by_value.get(finding.value)
        source = f" (rule {finding.rule}; source: {_snippet(plan, lit)})" if lit else ""
        if finding.status == "mutated":
            lines.append(f"- you wrote {finding.resembles!r} where the exact literal is "
                         f"{finding.value!r} ({finding.reason}){source}")
        else:
            lines.append(f"- missing: {finding.value!r}{source}")
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
