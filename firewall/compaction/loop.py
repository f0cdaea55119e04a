"""The compaction loop, sans-IO: plan a compaction (span, ledger, placeholders), build each
``SummaryRequest``, judge each answer against the ledger, finish (compose, audit, archive) or
back off. ``Firewall`` drives it, synchronously or not; nothing here does I/O but the audit.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Generator, Sequence
from typing import Any

from ..audit.archive import archive_entries
from ..audit import AuditRecord
from .compose import Span, choose_span, compose
from ..tokens import turn_tokens
from ..errors import AuditError, CompactionRefused
from .ledger import LITERAL_MAX_CHARS, Ledger, find_blocks
from .span_uses import uses
from ..literals import Literal
from .placeholders import Placeholders
from .records import AttemptResult, audit_key, build_record, held_values, write_record
from ..summarizers.base import RequiredLiteral, Summary, SummaryRequest
from ..tokens import count_tokens
from ..turns import Turn, call_text
from .validate import validate
from .plan import (BACK_OFF_MAX, INSTRUCTIONS, OWN_SUMMARY, REQUIRED_INSTRUCTIONS, SUMMARY_HEADER,
                   BackOff, CompactionPlan, CompactionResult, composed_tokens, earlier_compaction,
                   first_span_turn, reask_feedback, remember_number, repaired_summary,
                   snippet_around, source_texts, summarizer_path, unserializable_turn,
                   verdict_failures)


class CompactionLoop:
    """The loop's steps; mixed into ``Firewall``, which owns the packs, budget and audit log
    they read (``self``)."""

    # ── the loop (sans-IO) ──────────────────────────────────────────────────────────────

    def _plan(self, messages: Any, ledger: Ledger | None, keep_last: int | None,
              compaction: int | None, tail_start: int | None = None) -> CompactionPlan:
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
        plan = CompactionPlan(conversation, span, pinned, ledger, [], number, None,
                     [turn_tokens(t) for t in conversation.turns], request_turns,
                     list(source_texts(request_turns)), earlier,
                     refused=unserializable_turn(conversation.turns, span),
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
            if turn.role == "user" and OWN_SUMMARY.match(turn.text):
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

    def _placeholders(self, plan: CompactionPlan
                      ) -> tuple[Placeholders, dict[int, dict[str, list[tuple[int, int, str]]]]]:
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

    def _request(self, plan: CompactionPlan, attempt: int,
                 previous: AttemptResult | None) -> SummaryRequest:
        turns = tuple(plan.request_turn(i) for i in range(plan.span.start, plan.span.end)
                      if plan.sent(i))
        required = tuple(RequiredLiteral(plan.mask_value(l.value), l.rule, snippet_around(plan, l))
                         for l in plan.required)
        instructions = INSTRUCTIONS
        if required:
            instructions += "\n" + REQUIRED_INSTRUCTIONS + "\n" + "\n".join(
                f"- {r.value}" for r in required)
        if plan.placeholders and plan.placeholders.table:
            instructions += (f"\nStrings such as {plan.placeholders.example} stand for "
                             "secrets: copy them exactly as they are, brackets included.")
        feedback = reask_feedback(plan, previous) if previous is not None else None
        # the summarizer's own text goes back as it wrote it: placeholders not restored
        return SummaryRequest(turns=turns, required=required, instructions=instructions,
                              attempt=attempt, feedback=feedback,
                              previous=previous.reply if previous and previous.reply else None)

    def _loop(self, plan: CompactionPlan) -> Generator[SummaryRequest, Any, CompactionResult]:
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

    def _judge(self, plan: CompactionPlan, number: int, answer: Any,
               max_tokens: int) -> AttemptResult:
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

    def _finish(self, plan: CompactionPlan, attempts: list[AttemptResult]) -> CompactionResult:
        last = attempts[-1]
        usable = last.summary is not None and not last.oversize
        if not last.ok and self.policy == "raise":
            reasons = [f"{f.status} {f.value!r}" for f in verdict_failures(last.verdict)]
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
            summary = repaired_summary(summary, last.verdict)
        elif not last.ok and self.policy == "keep_source":
            lost = {f.value for f in verdict_failures(last.verdict)}
            keep |= {plan.index(l.turn) for l in plan.required if l.value in lost}
        return self._result(plan, attempts, summary, keep=keep, error=None)

    def _result(self, plan: CompactionPlan, attempts: list[AttemptResult], summary: str | None,
                keep: set[int], error: str | None) -> CompactionResult:
        conversation, span, ledger = plan.conversation, plan.span, plan.ledger
        turns = conversation.turns
        verbatim = "\n".join([turns[i].text for i in sorted(keep)] +
                              [t.text for t in turns[span.end:]])
        composed_text, after = None, sum(plan.turn_tokens)
        if summary is not None:
            header = SUMMARY_HEADER.format(first=first_span_turn(plan),
                                           last=plan.number(span.end - 1))
            composed_text = f"{header}\n\n{summary}"
        # the block writes what the rest of the composed context does not hold
        block = self._fit(plan, [composed_text, verbatim] if composed_text else [])
        if composed_text is not None:
            composed = composed_tokens(plan, composed_text, block, keep)
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

    def _archive(self, plan: CompactionPlan, result: CompactionResult, key: bytes) -> str | None:
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

        # the token tier sweeps the span's turns, numbered as its literals are
        span = [(plan.number(i), turns[i]) for i in range(plan.span.start, plan.span.end)] \
            if self.archive_limits.tokens else None
        entries = archive_entries(
            (lit for lit in plan.pinned.literals if len(lit.value) <= LITERAL_MAX_CHARS),
            text_of, key=key, secrets=[e.value for e in plan.ledger.entries if e.sensitive],
            span=span)
        try:
            result.archive = writer(result.record.conversation_id, result.record.compaction,
                                    entries, self.archive_limits)
        except AuditError as exc:
            return str(exc)
        return None

    def _fit(self, plan: CompactionPlan, beside: Sequence[str]) -> str:
        """Fit the ledger to this compaction's budget, values the texts ``beside`` the block
        hold costing nothing (see ``pin``); returns the block that writes the rest."""
        held = held_values(plan.ledger, beside)
        plan.pinned.evicted += plan.ledger.fit(plan.budget, compaction=plan.compaction,
                                               salience=plan.salience, held=held)
        return plan.ledger.render(held)

    def _grown(self, plan: CompactionPlan, after: int) -> str | None:
        """Why a composition of ``after`` tokens would not shrink the conversation (None when
        it would). What its summary and block would cost is remembered per ledger until a
        composition shrinks it: ``compaction_due`` expects the next one to cost as much."""
        before = sum(plan.turn_tokens)
        with self._memo_lock:
            nonce = plan.ledger.nonce
            if after < before:
                self._costs.pop(nonce, None)
                return None
            remember_number(self._costs, nonce, after - before + plan.span_tokens)
        return (f"not compacted: the composed context would be {after:,} tokens, not fewer than "
                f"the {before:,} it replaces (summary and ledger block cost more than the "
                f"{plan.span_tokens:,}-token span); kept as it was")

    def _back_off(self, plan: CompactionPlan, error: str) -> None:
        """The ``n``-th trigger compaction in a row without a usable summary: this ledger's
        next one waits until the conversation has ``2**n`` more messages (at most
        ``BACK_OFF_MAX``)."""
        nonce = plan.ledger.nonce
        with self._memo_lock:
            failures = self._failing.get(nonce, BackOff()).failures + 1
            wait = min(2 ** failures, BACK_OFF_MAX)
            remember_number(self._failing, nonce,
                      BackOff(failures, len(plan.conversation.turns) + wait, error))

    def _renumbered(self, conversation_id: str, plan: CompactionPlan, number: int) -> None:
        for eviction in plan.pinned.evicted:
            eviction.compaction = number
        plan.compaction = number
        with self._memo_lock:
            self._numbers[conversation_id] = max(number, self._numbers.get(conversation_id, 0))

    def _record(self, plan: CompactionPlan, attempts: list[AttemptResult], summary: str | None,
                after: int, verbatim: str, error: str | None, block: str,
                key: bytes) -> AuditRecord:
        """``after``: the tokens of the conversation the compaction leaves (``composed_tokens``,
        which counts the span turns kept verbatim; ``before`` when it failed); ``verbatim``:
        the text of those turns and of the tail."""
        span = plan.span
        before = sum(plan.turn_tokens)
        return build_record(
            self, plan.ledger, vendor_path=summarizer_path(plan.summarizer),
            summarizer=type(plan.summarizer).__name__ if plan.summarizer else None,
            compaction=plan.compaction,
            span=(first_span_turn(plan), plan.number(span.end - 1)) if len(span) else None,
            turns_compacted=len(span), tokens_before=before, tokens_after=after,
            summary=summary, verdict=attempts[-1].verdict if attempts else None,
            evicted=plan.pinned.evicted, unpinned=plan.pinned.oversize, attempts=attempts,
            compacted=summary is not None, error=error, verbatim=verbatim,
            repaired=self.policy == "repair" and bool(attempts) and not attempts[-1].ok, key=key,
            block=block)
