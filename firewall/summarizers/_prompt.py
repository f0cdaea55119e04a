"""Shared pieces of the LLM summarizers: prompt text and the one retry loop both vendors run.

The transcript is rendered in full: the summarizer can only keep a literal it was shown, so nothing
is truncated here (budgeting the span is the caller's job, before the request is built).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any

from ..turns import Turn
from .base import Summary, SummaryRequest

SYSTEM_PROMPT = (
    "You summarize an agent conversation for context compaction: your summary replaces the "
    "transcript in the agent's context, so the agent continues its task from the summary alone. "
    "Keep the user's goal, decisions made, work done, open questions and next steps. Copy every "
    "identifier, path, number, code and other exact string the instructions list character for "
    "character: never paraphrase, shorten, reformat or re-case them. Reply with the summary only."
)


def _attr(value: str) -> str:
    return '"' + value.replace("&", "&amp;").replace('"', "&quot;") + '"'


def render_transcript(turns: Iterable[Turn]) -> str:
    """The turns as tagged plain text: role, tool names and call ids, tool-call arguments as JSON.

    Arguments are dumped with ``ensure_ascii=False`` so that non-ASCII literals reach the model as
    the same characters the validator will look for, not as ``\\u`` escapes.
    """
    parts: list[str] = []
    for n, turn in enumerate(turns, 1):
        attrs = [f"n={_attr(str(n))}", f"role={_attr(turn.role)}"]
        if turn.tool_name:
            attrs.append(f"tool={_attr(turn.tool_name)}")
        if turn.tool_call_id:
            attrs.append(f"call_id={_attr(turn.tool_call_id)}")
        body: list[str] = [turn.text] if turn.text else []
        for call in turn.tool_calls:
            head = f"<tool_call name={_attr(call.name)}"
            if call.id:
                head += f" id={_attr(call.id)}"
            args = json.dumps(call.arguments, ensure_ascii=False, default=str)
            body.append(f"{head}>\n{args}\n</tool_call>")
        parts.append(f"<turn {' '.join(attrs)}>\n" + "\n".join(body) + "\n</turn>")
    return "\n".join(parts)


def build_user_prompt(request: SummaryRequest, transcript: str | None = None) -> str:
    """Transcript, then the firewall's instructions (with the required literals), then on a re-ask
    the previous attempt and the feedback on what it lost. ``transcript`` replaces the rendered
    turns (a shortened one, after a context overflow); the instructions are never cut."""
    if transcript is None:
        transcript = render_transcript(request.turns)
    sections = [
        "Summarize this agent conversation.",
        f"<transcript>\n{transcript}\n</transcript>",
        f"<instructions>\n{request.instructions}\n</instructions>",
    ]
    if request.feedback is not None or request.previous is not None:
        if request.previous is not None:
            sections.append(f"<previous_summary>\n{request.previous}\n</previous_summary>")
        if request.feedback is not None:
            sections.append(f"<feedback>\n{request.feedback}\n</feedback>")
        sections.append(
            f"This is attempt {request.attempt}. The previous summary failed the check described "
            "in the feedback. Write a complete corrected summary (not a diff) that fixes it."
        )
    return "\n\n".join(sections)


def merge_usage(total: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """Token counts summed over the calls of one ``summarize`` (a truncated first try is billed)."""
    merged = dict(total)
    for key, value in usage.items():
        old = merged.get(key)
        if isinstance(value, int) and isinstance(old, int) and not isinstance(value, bool):
            merged[key] = old + value
        else:
            merged[key] = value
    return merged


# A summarizer's logic is a generator: it yields the keyword arguments of each API call, receives
# the SDK response, and returns the Summary. The two drivers below are the only sync/async split.
Plan = Generator[dict[str, Any], Any, Summary]


def drive(plan: Plan, call: Callable[[dict[str, Any]], Any]) -> Summary:
    try:
        kwargs = next(plan)
        while True:
            kwargs = plan.send(call(kwargs))
    except StopIteration as done:
        return done.value


async def adrive(plan: Plan, call: Callable[[dict[str, Any]], Awaitable[Any]]) -> Summary:
    try:
        kwargs = next(plan)
        while True:
            kwargs = plan.send(await call(kwargs))
    except StopIteration as done:
        return done.value
