"""Message-level decisions of a compaction: which turns to compact, and the composed result.

The compacted conversation is: leading system turns, the summary and the ledger block (in the
conversation's own format), any source turns kept verbatim, then the verbatim tail. Every kept
message is the caller's original object, untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .formats import FORMATS
from .tokens import count_tokens
from .turns import Conversation, Turn


@dataclass(frozen=True, slots=True)
class Span:
    """Turns ``start`` (inclusive) to ``end`` (exclusive) are compacted."""

    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self.start <= index < self.end


def turn_tokens(turn: Turn) -> int:
    """Tokens the model reads for a turn: its text and its tool calls' arguments."""
    return count_tokens(turn.text) + sum(count_tokens(c.arguments_json() or "")
                                         for c in turn.tool_calls)


def choose_span(turns: list[Turn], keep_last: int, keep_tokens: int | None = None) -> Span:
    """Everything after the leading system turns but a verbatim tail of ``keep_last`` turns
    (and at least ``keep_tokens`` tokens); a tool result never leaves its call behind."""
    start = 0
    while start < len(turns) and turns[start].role == "system":
        start += 1
    end = max(start, len(turns) - max(keep_last, 0))
    if keep_tokens:
        tail = 0
        while end > start and tail < keep_tokens:
            end -= 1
            tail += turn_tokens(turns[end])
    while start < end < len(turns) and splits_tool_pair(turns, end, start):
        end -= 1  # move the call into the tail with its result
    return Span(start, end)


def splits_tool_pair(turns: list[Turn], boundary: int, start: int = 0) -> bool:
    """Would a tail starting at ``boundary`` separate a tool call from its result? It does when
    the tail opens with a tool result (every format makes a result a ``tool`` turn; an Anthropic
    message of several ``tool_result`` blocks is one turn), or when a call of
    ``turns[start:boundary]`` is answered, by id, only at ``boundary`` or later (the Responses
    API's parallel ``function_call`` items precede all their outputs)."""
    if not start < boundary < len(turns):
        return False
    if turns[boundary].role == "tool":
        return True
    answered = {t.tool_call_id for t in turns[start:boundary] if t.role == "tool"}
    open_calls = {c.id for t in turns[start:boundary] for c in t.tool_calls
                  if c.id is not None and c.id not in answered}
    return bool(open_calls) and any(t.role == "tool" and t.tool_call_id in open_calls
                                    for t in turns[boundary:])


def with_tool_pairs(turns: list[Turn], indices: Iterable[int], span: Span) -> list[int]:
    """``indices`` plus the calls of kept tool results and the results of kept calls."""
    keep = set(indices)
    for i in list(keep):
        j = i
        while turns[j].role == "tool" and j - 1 in span:  # back to the call
            j -= 1
            keep.add(j)
        if turns[i].tool_calls:
            j = i + 1
            while j in span and turns[j].role == "tool":
                keep.add(j)
                j += 1
    return sorted(k for k in keep if k in span)


def compose(conversation: Conversation, span: Span, summary: str, ledger_block: str,
            keep: Iterable[int] = ()) -> list[Any]:
    turns = conversation.turns
    fmt = FORMATS[conversation.format]
    head = [t.raw for t in turns[:span.start] if t.raw is not None]
    kept = [turns[i].raw for i in with_tool_pairs(turns, keep, span)]
    tail = [t.raw for t in turns[span.end:]]
    return head + fmt.summary_messages(summary, ledger_block) + kept + tail
