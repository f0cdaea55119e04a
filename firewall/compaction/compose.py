"""Message-level decisions of a compaction: which turns to compact, and the composed result.

The compacted conversation is: leading system turns, the summary and the ledger block (in the
conversation's own format), any source turns kept verbatim, then the verbatim tail. Every kept
message is the caller's original object, untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..formats import FORMATS
from ..tokens import turn_tokens
from ..turns import Conversation, Turn


@dataclass(frozen=True, slots=True)
class Span:
    """Turns ``start`` (inclusive) to ``end`` (exclusive) are compacted."""

    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self.start <= index < self.end


def choose_span(turns: list[Turn], keep_last: int, keep_tokens: int | None = None) -> Span:
    """Everything after the leading system turns but a verbatim tail of ``keep_last`` turns
    (and at least ``keep_tokens`` tokens); a tool result never leaves its call behind."""
    start = 0
    while start < len(turns) and turns[start].role == "system":
        start += 1
    end = max(start, len(turns) - max(keep_last, 0))
    if keep_tokens:  # the keep_last turns count toward it
        tail = sum(turn_tokens(t) for t in turns[end:])
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
    """``indices`` plus the calls of kept tool results and every result of kept calls, until
    nothing more is added: with parallel calls, a kept result brings its call and the call
    brings all its results (by id, and the tool turns right after it, for results without
    one); a Responses API call item is paired with its output by id across the other calls."""
    keep = {i for i in indices if i in span}
    todo = list(keep)
    while todo:
        i = todo.pop()
        for j in _tool_partners(turns, i, span):
            if j not in keep:
                keep.add(j)
                todo.append(j)
    return sorted(keep)


def _tool_partners(turns: list[Turn], i: int, span: Span) -> list[int]:
    """The turns of ``span`` that must stay with ``turns[i]``: a result's call, a call's
    results."""
    partners = []
    turn = turns[i]
    if turn.role == "tool":
        owner = next((j for j in range(i - 1, span.start - 1, -1) if turn.tool_call_id
                      is not None and any(c.id == turn.tool_call_id
                                          for c in turns[j].tool_calls)), None)
        if owner is None:  # no id: the call is the turn before the run of results
            j = i - 1
            while j in span and turns[j].role == "tool":
                j -= 1
            owner = j if j in span and turns[j].tool_calls else None
        if owner is not None:
            partners.append(owner)
    if turn.tool_calls:
        ids = {c.id for c in turn.tool_calls if c.id is not None}
        j = i + 1
        while j in span and turns[j].role == "tool":  # the run of results right after it
            if turns[j].tool_call_id is None or not ids or turns[j].tool_call_id in ids:
                partners.append(j)
            j += 1
        partners += [j for j in range(i + 1, span.end)
                     if turns[j].role == "tool" and turns[j].tool_call_id in ids]
    return partners


def compose(conversation: Conversation, span: Span, summary: str, ledger_block: str,
            keep: Iterable[int] = ()) -> list[Any]:
    turns = conversation.turns
    fmt = FORMATS[conversation.format]
    head = [t.raw for t in turns[:span.start] if t.raw is not None]
    kept = [turns[i].raw for i in with_tool_pairs(turns, keep, span)]
    tail = [t.raw for t in turns[span.end:]]
    return head + fmt.summary_messages(summary, ledger_block) + kept + tail
