"""``Literal``: one lexical-contract string found in a conversation, with its provenance."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal as TypingLiteral

from .turns import Role

Severity = TypingLiteral["required", "pin"]


@dataclass(slots=True)
class Literal:
    """The exact bytes of a string the conversation depends on, and where they were first seen.

    ``field`` is ``"text"`` for a turn's text (``start``/``end`` are character offsets into it),
    or the path of a JSON value: ``"arguments.order_id"`` in a tool call's arguments,
    ``"content.orders[0].id"`` in a JSON tool result (offsets are then within that value).
    ``count`` is how many times the value was seen in the conversation so far.
    """

    value: str
    rule: str  # qualified rule id: "pack/rule-id"
    turn: int
    role: Role
    start: int
    end: int
    field: str = "text"
    tool: str | None = None
    severity: Severity = "pin"
    sensitive: bool = False
    priority: int = 50
    count: int = 1
    mixed_script: bool = False  # look-alike letters beside Latin ones (see firewall.confusables)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
