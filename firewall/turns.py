"""The normalized conversation model every other module works on.

A vendor message list (Anthropic content blocks, OpenAI chat, the dev-set JSONL) becomes a
``Conversation`` of ``Turn``s. Each turn keeps the vendor's original message in ``raw`` so that a
compacted conversation can hand untouched turns back byte-for-byte in their own format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by the assistant; ``arguments`` is a parsed JSON object."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None

    def arguments_json(self) -> str | None:
        """The arguments as JSON text (what a model reads), or None when they cannot be
        serialized: a Python object nested beyond the recursion limit, or circular."""
        try:
            return json.dumps(self.arguments, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            return None


@dataclass(frozen=True, slots=True)
class Turn:
    """One message. ``text`` is all of its visible text (for a tool result: the result)."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_name: str | None = None  # for role == "tool": the tool that produced the result
    tool_call_id: str | None = None
    raw: Any = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class Conversation:
    """An ordered list of turns with an id; ``format`` names the vendor format it was read from."""

    turns: list[Turn]
    id: str = "conversation"
    format: str = "native"
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.turns)
