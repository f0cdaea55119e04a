"""One compaction's plan and result: the span and what is withheld from the summarizer, the
summary header and instructions, the pinned ledger, and the text helpers the loop judges
answers with.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..audit import STATUSES, AuditRecord
from .compose import Span, with_tool_pairs
from ..json_values import scalar_leaves
from ..formats import FORMATS
from .ledger import Eviction, Ledger, LedgerEntry, find_blocks
from ..literals import Literal
from .placeholders import Placeholders, uncut
from .records import AttemptResult
from .trigger import live_tokens
from ..turns import Conversation, Turn
from .validate import Verdict, identifier_shaped
from ..turns import turn_text


NUMBERED_MAX = 10_000  # conversations whose last compaction number a Firewall remembers
BACK_OFF_MAX = 32  # messages a trigger waits for after a run of failed summaries, at most
STRICT_MIN_PRIORITY = 50

SUMMARY_HEADER = "Summary of the earlier conversation (turns {first}-{last}), compacted:"
OWN_SUMMARY = re.compile(re.escape(SUMMARY_HEADER.split("{first}")[0]) + r"-?\d+--?\d+"
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
class CompactionPlan:
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
        yield turn_text(turn)  # the one reading of a turn (its calls' arguments as JSON)
        for call in turn.tool_calls:  # and their values decoded, as a summary would copy them
            yield from (text for _, text in scalar_leaves(call.arguments))


def ledger_blocks(text: str, ledger: Ledger) -> list[tuple[int, int]]:
    return find_blocks(text, ledger.nonce, ledger.key)


def is_own_message(turn: Turn) -> bool:
    """A message the firewall composed: a user turn that starts with its summary header or
    with a ledger block. Only the user and the firewall write user turns, so text shaped like
    these in tool output stays tool output; a block is recognised here even when it is not
    genuine for this ledger (a conversation compacted before without its ledger persisted)."""
    return turn.role == "user" and (turn.text.startswith(_OWN_BLOCK)
                                    or OWN_SUMMARY.match(turn.text) is not None)


def unserializable_turn(turns: Sequence[Turn], span: Span) -> str | None:
    """Why the span cannot go to a summarizer: a tool call whose arguments do not serialize
    (a Python object nested beyond the recursion limit, or circular)."""
    for i in range(span.start, span.end):
        for call in turns[i].tool_calls:
            if call.arguments_json() is None:
                return (f"turn {i}: the arguments of tool call {call.name!r} cannot be "
                        f"serialized (nested too deep or circular); the conversation is kept "
                        f"as it was")
    return None


@dataclass(frozen=True, slots=True)
class BackOff:
    failures: int = 0  # trigger compactions in a row without a usable summary
    retry_at: int = 0  # the next is tried once the conversation has this many messages
    error: str = ""  # the last one's


def composed_tokens(plan: CompactionPlan, summary: str, block: str, keep: set[int]) -> int:
    """The tokens of the conversation once ``summary`` and ``block`` replace the span (turns
    in ``keep`` stay), counted as the live context is: turn by turn."""
    conversation, span = plan.conversation, plan.span
    fmt = FORMATS[conversation.format]
    own = fmt.to_turns(fmt.summary_messages(summary, block))
    kept = with_tool_pairs(conversation.turns, keep, span)
    return sum(plan.turn_tokens) - plan.span_tokens + live_tokens(own) + \
        sum(plan.turn_tokens[i] for i in kept)


def first_span_turn(plan: CompactionPlan) -> int:
    """The first turn a summary covers: an earlier summary's first, when it continues one."""
    return plan.earlier.first if plan.earlier is not None else plan.span.start


def verdict_failures(verdict: Verdict | None) -> list[Any]:
    return [] if verdict is None else list(verdict.missing) + list(verdict.mutated)


def snippet_around(plan: CompactionPlan, lit: Literal, width: int = 60) -> str:
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


def reask_feedback(plan: CompactionPlan, previous: AttemptResult) -> str:
    """What the previous attempt lost, masked piece by piece: the problems quote the
    summarizer's own text; values and sources are masked; a near miss of a secret is described,
    never quoted (its characters are the secret's)."""
    lines = ["Your previous summary cannot be used yet:"]
    if previous.error:
        lines.append(f"- it failed: {plan.mask(previous.error)}")
    lines += [f"- {p}" for p in previous.problems]
    by_value = {l.value: l for l in plan.required}
    for finding in verdict_failures(previous.verdict):
        lit = by_value.get(finding.value)
        value = plan.mask_value(finding.value)
        source = f" (rule {finding.rule}; source: {snippet_around(plan, lit)})" if lit else ""
        if finding.status == "mutated" and plan.placeholders and lit and lit.sensitive:
            lines.append(f"- you altered {value} ({finding.reason}): copy it exactly{source}")
        elif finding.status == "mutated":
            lines.append(f"- you wrote {plan.mask(finding.resembles or '')!r} where the exact "
                         f"literal is {value!r} ({finding.reason}){source}")
        else:
            lines.append(f"- missing: {value!r}{source}")
    lines.append("Rewrite the summary so that every one of these appears byte-for-byte.")
    return "\n".join(lines)


def repaired_summary(summary: str, verdict: Verdict | None) -> str:
    """Strip mutated spans (right to left, so offsets hold) and append the lost literals."""
    failures = verdict_failures(verdict)
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


def summarizer_path(summarizer: Any) -> str:
    """The audit's ``vendor_path`` of a client-side summarizer: its own (vendor and model, for
    the built-in ones), else ``custom:`` and its class name."""
    path = getattr(summarizer, "vendor_path", None)
    return path if isinstance(path, str) and path else f"custom:{type(summarizer).__name__}"


def remember_number(memo: OrderedDict[str, Any], key: str, value: Any) -> None:
    """``memo[key] = value`` as the newest entry, the oldest dropped past ``NUMBERED_MAX``
    (the caller holds ``_memo_lock``)."""
    memo[key] = value
    memo.move_to_end(key)
    if len(memo) > NUMBERED_MAX:
        memo.popitem(last=False)
