"""Helpers shared by the format modules."""

from __future__ import annotations

from typing import Any

from ..errors import ConversationError
from ..turns import ROLES


def field_error(index: int, field: str, message: str) -> ConversationError:
    return ConversationError(message, field=f"messages[{index}].{field}")


def check_role(message: Any, index: int, allowed: tuple[str, ...] = ROLES) -> str:
    if not isinstance(message, dict):
        raise ConversationError(f"expected an object, got {type(message).__name__}",
                                field=f"messages[{index}]")
    role = message.get("role")
    if role not in allowed:
        raise field_error(index, "role", f"expected one of {', '.join(allowed)}, got {role!r}")
    return role


def string_id(value: Any, index: int, field: str) -> str | None:
    """A call / tool-use id: a string or absent (ids are used as lookup keys)."""
    if value is None or isinstance(value, str):
        return value
    raise field_error(index, field, f"expected a string id, got {type(value).__name__}")


def text_of(content: Any, index: int, field: str = "content") -> str:
    """Visible text of a string, ``None`` or a list of ``{"type": "text", "text"}`` blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for n, block in enumerate(content):
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif not isinstance(block, dict):
                raise field_error(index, f"{field}[{n}]", "expected a content block object")
        return "\n".join(parts)
    raise field_error(index, field, f"expected text or a list of blocks, got {type(content).__name__}")


# Fields of hosted-tool results (web search, code execution, shell, MCP, ...) that hold text an
# agent can read; every other field (ids, signatures, ``encrypted_*`` blobs, file ids, status
# codes) is opaque or not text. A ``source`` is read only when it is plain text, not base64.
HOSTED_TEXT_KEYS = frozenset({
    "text", "content", "output", "outputs", "result", "results", "stdout", "stderr", "logs",
    "lines", "url", "title", "filename", "error", "error_message", "query", "queries",
    "pattern", "sources", "action", "message"})


def hosted_text(node: Any) -> str:
    """The readable text of a hosted tool's result, in document order (walked without
    recursion: tool output is untrusted and may be deep)."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item:
                parts.append(item)
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            children = [value for key, value in item.items() if key in HOSTED_TEXT_KEYS]
            source = item.get("source")
            if isinstance(source, dict) and source.get("type") == "text":
                children.append(source.get("data"))
            stack.extend(reversed(children))
    return "\n".join(parts)
