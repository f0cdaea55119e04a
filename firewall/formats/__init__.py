"""Reading conversations in any supported format, detected from the content, not the file name.

Formats: ``native`` (the dev-set JSONL: ``tool_calls`` with parsed ``arguments``), ``anthropic``
(Messages API content blocks, ``tool_use`` / ``tool_result``), ``openai`` (chat completions,
``tool_calls`` with JSON-string arguments) and ``openai_responses`` (Responses API input items).
A file is either JSONL, one conversation object per line, or one JSON document: a list of
messages, or an object with ``messages``. A coding agent's own session file (a Claude Code
transcript, a Codex CLI rollout: JSONL of events, ``transcripts``) is one conversation, read
whole; ``meta["boundaries"]`` holds where the agent compacted it (the index of the first message
after each compaction), ``meta["summaries"]`` what it wrote there, ``meta["cuts"]`` the byte
range of the file each compaction wrote, ``meta["ignored"]`` the lines of other types passed
over (by type) and ``meta["bad_lines"]`` the lines that could not be read (each also reported
as a bad line: the rest of the session is read).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import ConversationError
from ..turns import Conversation
from . import anthropic, langchain, native, openai_chat, openai_responses

FORMATS = {"native": native, "anthropic": anthropic, "openai": openai_chat,
           "openai_responses": openai_responses, "langchain": langchain}
_RESPONSES_ITEMS = frozenset({"function_call", "function_call_output", "compaction", "reasoning",
                              "custom_tool_call", "custom_tool_call_output",
                              *openai_responses.HOSTED_ITEMS})
_RESPONSES_PARTS = frozenset({"input_text", "output_text"})


def _type(node: Any) -> str | None:
    """A block's or item's ``type`` when it is a string (hostile input may put anything there)."""
    kind = node.get("type") if isinstance(node, dict) else None
    return kind if isinstance(kind, str) else None


def detect_format(messages: list[Any]) -> str:
    """Name the format of a message list by its shape."""
    for message in messages:
        if langchain.is_message(message):
            return "langchain"
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = {_type(b) for b in content} if isinstance(content, list) else set()
        if _type(message) in _RESPONSES_ITEMS or blocks & _RESPONSES_PARTS:
            return "openai_responses"
        if blocks & {"tool_use", "tool_result", *anthropic.SERVER_TOOL_CALLS} or any(
                anthropic.is_hosted_result(b) for b in blocks):
            return "anthropic"
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                return "openai" if "function" in call else "native"
        if message.get("role") == "tool" and "name" in message:
            return "native"
    return "openai"  # plain chat: the OpenAI shape is the common denominator


def parse_messages(messages: Any, *, format: str | None = None, id: str = "conversation",
                   meta: dict[str, Any] | None = None, system: Any = None) -> Conversation:
    """Normalize a vendor message list into a ``Conversation`` (``system`` as Anthropic's)."""
    if not isinstance(messages, list):
        raise ConversationError(f"expected a list of messages, got {type(messages).__name__}",
                                field="messages")
    fmt = format or detect_format(messages)
    if fmt not in FORMATS:
        raise ConversationError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    turns = FORMATS[fmt].to_turns(messages)
    if system is not None:
        turns.insert(0, anthropic.system_turn(system))
    return Conversation(turns=turns, id=id, format=fmt, meta=meta or {})


def _from_document(doc: Any, *, source: str, line: int | None, default_id: str) -> Conversation:
    try:
        if isinstance(doc, list):
            return parse_messages(doc, id=default_id)
        if isinstance(doc, dict) and "messages" in doc:
            return parse_messages(doc["messages"], id=str(doc.get("id", default_id)),
                                  meta=doc.get("meta") or {}, system=doc.get("system"))
        raise ConversationError("expected a list of messages or an object with 'messages'")
    except ConversationError as exc:
        raise ConversationError(str(exc), source=source, line=line) from None


def read_conversations(path: str | Path, *,
                       on_error: Callable[[ConversationError], None] | None = None,
                       on_progress: Callable[[int], None] | None = None,
                       name: str | None = None) -> Iterator[Conversation]:
    """Yield the conversations of a file, one JSONL line at a time (memory stays bounded).

    ``on_error``: given, a bad line is handed to it as a ``ConversationError`` naming the file
    and line, and reading goes on with the next line; without it the first one is raised.
    ``on_progress``: called with the number of bytes read since its last call. ``name``: what
    errors call the file (default: ``path``; a Dask worker opens it by its absolute path).
    """
    path = Path(path)
    name = name or str(path)
    handle, jsonl = _open(path, name)
    with handle:
        if jsonl and _is_session_file(handle):
            yield _session(path, name, handle, on_error, on_progress)
            return
        if not jsonl:
            data = handle.read()  # one JSON document: one conversation, read whole
            if on_progress is not None:
                on_progress(len(data))
            try:
                doc = _load_json(data, source=name, line=None)
                conversation = _from_document(doc, source=name, line=None, default_id=path.stem)
            except ConversationError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                return
            yield conversation
            return
        yield from _read_jsonl(handle, name, path.stem, on_error, on_progress)


def is_jsonl(path: str | Path) -> bool:
    """True for a JSONL file of conversations (one per line: it can be read by byte ranges),
    False for one JSON document or an agent's session file (one conversation); a file that
    cannot be opened or is empty is a ``ConversationError``, as ``read_conversations`` raises
    it."""
    handle, jsonl = _open(Path(path), str(path))
    with handle:
        return jsonl and not _is_session_file(handle)


_SESSION_PROBE_LINES = 64  # lines read to tell a session file from a JSONL of conversations


def _is_session_file(handle: Any) -> bool:
    """Is this JSONL file a coding agent's session file (Claude Code transcript, Codex
    rollout) rather than conversations? Decided by the first line that is either (a
    conversation, or an event of a session); lines that are neither (a record type not known
    yet, a line left invalid by hand editing) are passed over."""
    from .transcripts import is_session_event

    try:
        for number, line in enumerate(handle):
            if number == _SESSION_PROBE_LINES:
                break
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(doc, list) or (isinstance(doc, dict) and "messages" in doc):
                return False
            if is_session_event(doc):
                return True
        return False
    finally:
        handle.seek(0)


def _session(path: Path, name: str, handle: Any,
              on_error: Callable[[ConversationError], None] | None,
              on_progress: Callable[[int], None] | None) -> Conversation:
    from .transcripts import read_transcript

    chunk = read_transcript(path)
    if on_progress is not None:
        on_progress(handle.seek(0, 2))
    if not chunk.turns:
        raise ConversationError("a session file without a message", source=name)
    for line, what in chunk.bad:  # each said where it is; the rest of the session is read
        bad = ConversationError(f"{what}: line skipped, the rest of the session read",
                                source=name, line=line)
        if on_error is None:
            raise bad
        on_error(bad)
    if chunk.agent == "codex":
        fmt, summaries = "openai_responses", chunk.summaries
    else:  # Claude Code writes its summary as the message after the boundary (read as the
        fmt = "anthropic"  # assistant's: machine text), if it wrote one
        summaries = [chunk.turns[b].text if b < len(chunk.turns)
                     and chunk.turns[b].role == "assistant" else "" for b in chunk.boundaries]
    return Conversation(turns=chunk.turns, id=path.stem, format=fmt,
                        meta={"agent": chunk.agent, "boundaries": chunk.boundaries,
                              "summaries": summaries, "cuts": chunk.cuts,
                              "ignored": chunk.ignored, "bad_lines": len(chunk.bad),
                              "path": str(path)})


def read_jsonl_range(path: str | Path, start: int, end: int, *, first_line: int,
                     on_error: Callable[[ConversationError], None] | None = None,
                     name: str | None = None) -> Iterator[Conversation]:
    """The conversations of the lines in bytes ``start..end`` of a JSONL file (both on line
    starts), numbered from ``first_line``: a bad line and a conversation without an id are
    named by their line in the whole file, exactly as ``read_conversations`` names them."""
    path = Path(path)
    with path.open("rb") as handle:
        handle.seek(start)

        def lines() -> Iterator[bytes]:
            left = end - start
            while left > 0:
                raw = handle.readline()
                if not raw:
                    return
                left -= len(raw)
                yield raw

        yield from _read_jsonl(lines(), name or str(path), path.stem, on_error,
                               first_line=first_line)


def _open(path: Path, name: str) -> tuple[Any, bool]:
    """The file opened in binary (the caller closes it) and whether it is JSONL."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ConversationError(f"cannot open: {exc.strerror}", source=name) from None
    head = handle.read(1 << 16).lstrip()
    handle.seek(0)
    if not head:
        handle.close()
        raise ConversationError("the file is empty", source=name)
    jsonl = head[:1] != b"[" and _looks_like_jsonl(handle)
    handle.seek(0)
    return handle, jsonl


def _looks_like_jsonl(handle: Any) -> bool:
    """JSONL when one of the first two non-blank lines is a JSON object on its own: a truncated
    or corrupt first line must not turn a JSONL log into one broken JSON document."""
    tried = 0
    for line in handle:
        if not line.strip():
            continue
        try:
            if isinstance(json.loads(line), dict):
                return True
        except (ValueError, RecursionError):
            pass
        tried += 1
        if tried == 2:
            break
    return False


def _read_jsonl(lines: Iterable[bytes], source: str, stem: str,
                on_error: Callable[[ConversationError], None] | None = None,
                on_progress: Callable[[int], None] | None = None, *,
                first_line: int = 1) -> Iterator[Conversation]:
    for number, raw in enumerate(lines, start=first_line):
        if on_progress is not None:
            on_progress(len(raw))
        if not raw.strip():
            continue
        try:
            doc = _load_json(raw, source=source, line=number)
            conversation = _from_document(doc, source=source, line=number,
                                          default_id=f"{stem}/{number}")
        except ConversationError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        yield conversation


def _load_json(data: bytes, *, source: str, line: int | None) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversationError(f"not UTF-8 (byte {exc.start})", source=source, line=line) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise ConversationError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                source=source, line=where) from None
    except (ValueError, RecursionError) as exc:  # nesting or an integer beyond the limits
        raise ConversationError(f"invalid JSON: {exc}", source=source, line=line) from None
