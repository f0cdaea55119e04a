"""Coding agents' own session files: Claude Code transcripts and Codex CLI rollouts, as turns.

Read by the hooks (to pin literals as the session goes) and by the diagnostics (to find where the
agent really compacted). Shapes: a Claude Code session file is JSONL of entries with ``type``
``user`` / ``assistant`` (a ``message`` in the Messages API shape), ``system`` (among them the
``compact_boundary`` entry a compaction writes, followed by the ``isCompactSummary`` user entry
holding the summary), ``summary`` and ``file-history-snapshot``; a Codex rollout is JSONL of
``{"type", "payload"}`` lines (``session_meta``, ``response_item``, ``compacted``,
``turn_context``, ``event_msg``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import FirewallError
from ..turns import ToolCall, Turn
from . import anthropic

_CODEX_LINE_TYPES = {"session_meta", "response_item", "compacted", "turn_context", "event_msg"}
_CLAUDE_EVENT_TYPES = {"system", "summary", "file-history-snapshot"}
# Harness text Codex sends as user messages: context, not something the user typed.
_CODEX_HARNESS = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                  "<permissions instructions>")



@dataclass
class TranscriptChunk:
    """The turns of the complete lines read, the offset after them, compaction summaries seen
    (Codex ``compacted`` items, ``""`` for an opaque remote one), lines skipped, and where the
    agent compacted: ``boundaries`` holds, per compaction, the index in ``turns`` of the first
    turn after it (Claude Code's ``compact_boundary`` entry, Codex's ``compacted`` item)."""

    turns: list[Turn] = field(default_factory=list)
    offset: int = 0
    summaries: list[str] = field(default_factory=list)
    skipped: int = 0
    boundaries: list[int] = field(default_factory=list)
    agent: str | None = None  # claude-code | codex, from the first line of either shape


def is_session_event(line: Any) -> bool:
    """A line of a Claude Code transcript (an entry with a ``message``, or a ``system``,
    ``summary`` or ``file-history-snapshot`` entry of a session) or of a Codex rollout."""
    if not isinstance(line, dict) or not isinstance(line.get("type"), str):
        return False
    if line["type"] in _CODEX_LINE_TYPES:
        return "payload" in line
    if line["type"] in ("user", "assistant"):
        return isinstance(line.get("message"), dict) and "messages" not in line
    return line["type"] in _CLAUDE_EVENT_TYPES and any(
        key in line for key in ("sessionId", "uuid", "leafUuid", "messageId"))


def read_transcript(path: str | os.PathLike[str], offset: int = 0) -> TranscriptChunk:
    """Parse the complete JSONL lines of a Claude Code or Codex transcript from byte ``offset``.

    Unknown, partial (a line still being written), non-JSON and sidechain lines are skipped, so
    a new event type never breaks a hook. A file shorter than ``offset`` is read from the start.
    """
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        offset = offset if 0 <= offset <= size else 0
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1  # only complete lines; the rest is read next time
    chunk = TranscriptChunk(offset=offset + end)
    claude: list[tuple[dict[str, Any], str | None]] = []
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:  # includes undecodable bytes
            chunk.skipped += raw.strip() != b""
            continue
        if not isinstance(line, dict):
            chunk.skipped += 1
        elif line.get("type") == "system" and line.get("subtype") == "compact_boundary":
            if line.get("isSidechain") is not True:
                chunk.agent = chunk.agent or "claude-code"
                chunk.boundaries.append(len(chunk.turns) + len(claude))
        elif isinstance(line.get("type"), str) and line["type"] in _CODEX_LINE_TYPES \
                and "payload" in line:
            chunk.agent = chunk.agent or "codex"
            _codex_line(line, chunk)
        elif isinstance(line.get("message"), dict):
            chunk.agent = chunk.agent or "claude-code"
            if line.get("isSidechain") is True:  # a subagent's turn, not in this context
                continue
            message = _claude_message(line)
            if message is None:
                chunk.skipped += 1
            else:
                claude.append(message)
    if claude:
        chunk.turns += _claude_turns(claude)
    return chunk


def _claude_message(line: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    message = line["message"]
    if line.get("type") not in ("user", "assistant") or message.get("role") not in (
            "user", "assistant"):
        return None
    shaped = {"role": message["role"], "content": message.get("content")}
    try:
        anthropic.to_turns([shaped])  # validates the line on its own
    except FirewallError:
        return None
    # The compaction summary is machine text; meta lines are harness text, never user-typed.
    role = "assistant" if line.get("isCompactSummary") else "system" if line.get("isMeta") \
        else None
    return shaped, role


def _claude_turns(messages: list[tuple[dict[str, Any], str | None]]) -> list[Turn]:
    turns = anthropic.to_turns([m for m, _ in messages])  # one pass: tool names by tool_use id
    return [t if role is None or t.role == "tool" else dataclasses.replace(t, role=role)
            for t, (_, role) in zip(turns, messages, strict=True)]


def _codex_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):  # FunctionCallOutputPayload {"content": ..., "success": ...}
        return _codex_text(content.get("content"))
    if isinstance(content, list):
        return "\n".join(item.get("text") or "" for item in content
                         if isinstance(item, dict) and isinstance(item.get("text"), str))
    return ""


def _codex_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {"arguments": raw}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def _codex_line(line: dict[str, Any], chunk: TranscriptChunk) -> None:
    payload = line["payload"]
    if not isinstance(payload, dict):
        chunk.skipped += 1
        return
    if line["type"] == "compacted":
        chunk.summaries.append(payload.get("message") or "")
        chunk.boundaries.append(len(chunk.turns))
        return
    if line["type"] != "response_item":
        return  # session_meta, turn_context, event_msg (duplicates of response items)
    kind, turns = payload.get("type"), chunk.turns
    if kind == "message":
        role, text = payload.get("role"), _codex_text(payload.get("content"))
        if role in ("developer", "system") or (role == "user" and text.lstrip().startswith(
                _CODEX_HARNESS)):
            role = "system"
        if role in ("user", "assistant", "system"):
            turns.append(Turn(role=role, text=text, raw=payload))
    elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
        name = payload.get("name") or ("local_shell" if kind == "local_shell_call" else "tool")
        arguments = (_codex_arguments(payload.get("arguments")) if kind == "function_call"
                     else {"input": payload.get("input")} if kind == "custom_tool_call"
                     else _codex_arguments(payload.get("action")))
        call_id = payload.get("call_id") or payload.get("id")
        turns.append(Turn(role="assistant", tool_calls=(ToolCall(str(name), arguments, call_id),),
                          raw=payload))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        call_id = payload.get("call_id")
        name = next((c.name for t in reversed(turns) for c in t.tool_calls if c.id == call_id),
                    None)
        turns.append(Turn(role="tool", text=_codex_text(payload.get("output")), tool_name=name,
                          tool_call_id=call_id, raw=payload))
    # reasoning (often encrypted), web_search_call, ghost snapshots: nothing to pin
