"""Coding agents' own session files: Claude Code transcripts and Codex CLI rollouts, as turns.

Read by the hooks (to pin literals as the session goes) and by the diagnostics (to find where the
agent really compacted). Shapes: a Claude Code session file is JSONL of entries with ``type``
``user`` / ``assistant`` (a ``message`` in the Messages API shape), ``system`` (among them the
``compact_boundary`` entry a compaction writes, followed by the ``isCompactSummary`` user entry
holding the summary), and records that hold no message (``summary``, ``file-history-snapshot``,
``queue-operation``, ``permission-mode``, ``custom-title``, ``progress``, ...: new ones appear
with new releases); a Codex rollout is JSONL of ``{"type", "payload"}`` lines (``session_meta``,
``response_item``, ``compacted``, ``turn_context``, ``event_msg``). A line of a type that holds
nothing to read is counted (``TranscriptChunk.ignored``), never a reason to reject the file; a
line that is not JSON is counted with its line number (``TranscriptChunk.bad``) and the rest of
the file is read.

What Claude Code writes as a ``user`` entry is not always typed by the user: the output of a
``!command`` (``<bash-stdout>``, ``<bash-stderr>``) or of a local slash command
(``<local-command-stdout>``) and a background task's notice (``<task-notification>``) are tool
output; ``isMeta`` entries and system reminders are the harness's (``system``); the summary a
compaction writes (``isCompactSummary``) is machine text (``assistant``).
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
# Claude Code records without a message (a line of any type with a session key counts too)
_CLAUDE_RECORD_TYPES = {"system", "summary", "file-history-snapshot", "queue-operation",
                        "permission-mode", "custom-title", "ai-title", "agent-name", "progress",
                        "attachment", "last-prompt", "mode", "tag"}
_CLAUDE_SESSION_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId")
# A user entry starting with one of these is output the harness recorded, not typed text:
# (tool name it is read as, or None for harness text read as ``system``).
_CLAUDE_OUTPUT_TAGS = (("<bash-stdout>", "bash"), ("<bash-stderr>", "bash"),
                       ("<local-command-stdout>", "local-command"),
                       ("<local-command-stderr>", "local-command"),
                       ("<task-notification>", "task-notification"),
                       ("<user-prompt-submit-hook>", "hook"),
                       ("<system-reminder>", None), ("<local-command-caveat>", None))
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
    # (line number from the offset read, 1-based; what is wrong): lines not JSON, or holding a
    # malformed message, skipped
    bad: list[tuple[int, str]] = field(default_factory=list)
    boundaries: list[int] = field(default_factory=list)
    agent: str | None = None  # claude-code | codex, from the first line of either shape
    ignored: dict[str, int] = field(default_factory=dict)  # lines without a turn, by type
    # per compaction: the byte offsets where its boundary line starts and where the line that
    # completes it (Claude Code's summary entry, Codex's ``compacted`` line) ends
    cuts: list[tuple[int, int]] = field(default_factory=list)
    # per turn: the byte offset where the line it was read from ends (a replay writes the
    # session file as it stood after any turn)
    ends: list[int] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return len(self.bad)

    def ignore(self, kind: str) -> None:
        self.ignored[kind] = self.ignored.get(kind, 0) + 1


def live_start(boundaries: list[int], start: int, end: int) -> int:
    """Where the context the agent compacted at ``end`` began: its previous compaction's
    boundary (the summary it left), or ``start``. The block's budget is a share of that
    context, not of every turn since the session began: a block sized by the whole session
    grew with every compaction of a small window (28 % of the context at the eighth)."""
    return max((b for b in boundaries if start < b < end), default=start)


def is_session_event(line: Any) -> bool:
    """A line of a Claude Code transcript (an entry with a ``message``, or a record of a
    session: any type Claude Code writes, or one with a session key) or of a Codex rollout. A
    conversation (an object with ``messages``) is not one."""
    if not isinstance(line, dict) or not isinstance(line.get("type"), str) or "messages" in line:
        return False
    if line["type"] in _CODEX_LINE_TYPES:
        return "payload" in line
    if line["type"] in ("user", "assistant"):
        return isinstance(line.get("message"), dict)
    return line["type"] in _CLAUDE_RECORD_TYPES or any(
        key in line for key in _CLAUDE_SESSION_KEYS)


def read_transcript(path: str | os.PathLike[str], offset: int = 0) -> TranscriptChunk:
    """Parse the complete JSONL lines of a Claude Code or Codex transcript from byte ``offset``.

    Lines of other types, partial lines (one still being written) and bad lines are skipped
    (the bad ones listed in ``bad``), so a new record type never breaks a hook. Sidechain
    entries (a subagent's turns, not in this context) are skipped, unless the file holds
    nothing else: then it is a subagent's own transcript, read as its conversation. A file
    shorter than ``offset`` is read from the start.
    """
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        offset = offset if 0 <= offset <= size else 0
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1  # only complete lines; the rest is read next time
    chunk = TranscriptChunk(offset=offset + end)
    claude: list[tuple[dict[str, Any], tuple[str, str | None] | None]] = []
    sidechain: list[tuple[dict[str, Any], tuple[str, str | None] | None]] = []
    claude_ends: list[int] = []
    sidechain_ends: list[int] = []
    start = offset
    for number, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        at, start = start, start + len(raw) + 1
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:  # includes undecodable bytes
            chunk.bad.append((number, f"invalid JSON: {_reason(exc)}"))
            continue
        if not isinstance(line, dict):
            chunk.bad.append((number, f"a JSON {type(line).__name__}, not an object"))
            continue
        kind = line.get("type") if isinstance(line.get("type"), str) else "(no type)"
        if kind == "system" and line.get("subtype") == "compact_boundary":
            if line.get("isSidechain") is not True:
                chunk.agent = chunk.agent or "claude-code"
                chunk.boundaries.append(len(chunk.turns) + len(claude))
                chunk.cuts.append((at, start))
            continue
        if kind in _CODEX_LINE_TYPES and "payload" in line:
            chunk.agent = chunk.agent or "codex"
            _codex_line(line, chunk, number, (at, start))
            chunk.ends += [start] * (len(chunk.turns) - len(chunk.ends))
            continue
        if not isinstance(line.get("message"), dict) or kind not in ("user", "assistant"):
            chunk.ignore(kind)
            continue
        chunk.agent = chunk.agent or "claude-code"
        message = _claude_message(line)
        if message is None:
            chunk.bad.append((number, f"a {kind} entry whose message is malformed"))
        elif line.get("isSidechain") is True:  # a subagent's turn, not in this context
            sidechain.append(message)
            sidechain_ends.append(start)
        else:
            if line.get("isCompactSummary") and chunk.cuts and len(chunk.boundaries) == len(
                    chunk.cuts) and chunk.boundaries[-1] == len(chunk.turns) + len(claude):
                chunk.cuts[-1] = (chunk.cuts[-1][0], start)  # the summary completes the cut
            claude.append(message)
            claude_ends.append(start)
    if sidechain and not claude and not chunk.turns:
        claude, claude_ends = sidechain, sidechain_ends  # a subagent's own transcript
    elif sidechain:
        chunk.ignored["sidechain"] = len(sidechain)
    if claude:
        chunk.turns += _claude_turns(claude)
        chunk.ends += claude_ends
    return chunk


def _reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (column {exc.colno})"
    return str(exc).split(":")[0]  # not UTF-8: the codec's message without the bytes


def _claude_message(line: dict[str, Any]
                    ) -> tuple[dict[str, Any], tuple[str, str | None] | None] | None:
    """The entry's message in the Messages API shape, and the role (and tool name) it is read
    as when that is not its own (see the module's docstring)."""
    message = line["message"]
    if message.get("role") not in ("user", "assistant"):
        return None
    shaped = {"role": message["role"], "content": message.get("content")}
    try:
        anthropic.to_turns([shaped])  # validates the line on its own
    except FirewallError:
        return None
    if line.get("isCompactSummary"):  # the compaction summary is machine text
        return shaped, ("assistant", None)
    if line.get("isMeta"):  # harness text, never user-typed
        return shaped, ("system", None)
    if shaped["role"] == "user":
        text = _leading_text(shaped["content"])
        for tag, tool in _CLAUDE_OUTPUT_TAGS:
            if text.startswith(tag):
                return shaped, ("tool", tool) if tool else ("system", None)
    return shaped, None


def _leading_text(content: Any) -> str:
    """The text a user entry starts with (its first text block), without leading blanks."""
    if isinstance(content, str):
        return content.lstrip()
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text") or "").lstrip()
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return ""
    return ""


def _claude_turns(messages: list[tuple[dict[str, Any], tuple[str, str | None] | None]]
                  ) -> list[Turn]:
    turns = anthropic.to_turns([m for m, _ in messages])  # one pass: tool names by tool_use id
    return [t if read_as is None or t.role == "tool"
            else dataclasses.replace(t, role=read_as[0], tool_name=read_as[1])
            for t, (_, read_as) in zip(turns, messages, strict=True)]


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


def _codex_line(line: dict[str, Any], chunk: TranscriptChunk, number: int,
                cut: tuple[int, int]) -> None:
    payload = line["payload"]
    if not isinstance(payload, dict):
        chunk.bad.append((number, f"a {line['type']} line whose payload is not an object"))
        return
    if line["type"] == "compacted":
        chunk.summaries.append(payload.get("message") or "")
        chunk.boundaries.append(len(chunk.turns))
        chunk.cuts.append(cut)
        return
    if line["type"] != "response_item":
        chunk.ignore(line["type"])  # session_meta, turn_context, event_msg (duplicates)
        return
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
    else:  # reasoning (often encrypted), web_search_call, ghost snapshots: nothing to pin
        chunk.ignore(f"response_item:{kind}")
