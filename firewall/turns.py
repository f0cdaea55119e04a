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


def call_text(turn: Turn) -> str:
    """The tool calls of a turn as the model sees them: name and JSON arguments (arguments
    too deep to serialize count as their leaves, never as nothing)."""
    parts = []
    for c in turn.tool_calls:
        arguments = c.arguments_json()
        if arguments is None:
            from .json_values import scalar_leaves  # walks iteratively

            arguments = " ".join(text for _, text in scalar_leaves(c.arguments))
        parts.append(f"{c.name} {arguments}")
    return "\n".join(parts)


def turn_text(turn: Turn) -> str:
    """Everything a message puts in the context: its text and its tool calls."""
    calls = call_text(turn)
    return f"{turn.text}\n{calls}" if calls else turn.text
