"""Placeholder mode: sensitive literals never reach a summarizer in clear text.

Each sensitive value maps to a stable placeholder (``[[SECRET_3]]``: the same value, the same
placeholder, for the life of the conversation's ledger). Text is masked before it leaves for a
summarizer; the summary is restored by scanning for placeholders, never by offsets, so a
summarizer that moves, drops or repeats them is handled. A placeholder the summary invents or
alters is reported so the guard can re-ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import regex

from .turns import ToolCall, Turn

_PLACEHOLDER = regex.compile(r"\[\[SECRET_(\d+)\]\]")
# what a summarizer makes of a placeholder it damaged: brackets lost or changed, case changed
_DAMAGED = regex.compile(r"(?i)(?<![\w\[])\[{0,2}\s*secret[_ ]\d+\s*\]{0,2}(?!\])")


@dataclass
class Placeholders:
    """A value ↔ placeholder table. Persist ``table`` with the ledger to keep it stable."""

    table: dict[str, str] = field(default_factory=dict)  # value → placeholder

    def add(self, values: Iterable[str]) -> None:
        for value in values:
            if value and value not in self.table:
                self.table[value] = f"[[SECRET_{len(self.table) + 1}]]"

    def mask(self, text: str) -> str:
        # longest first: a secret that contains another is replaced whole
        for value in sorted(self.table, key=len, reverse=True):
            if value in text:
                text = text.replace(value, self.table[value])
        return text

    def mask_turn(self, turn: Turn) -> Turn:
        if not self.table:
            return turn
        calls = tuple(ToolCall(c.name, self._mask_json(c.arguments), c.id)
                      for c in turn.tool_calls)
        return Turn(role=turn.role, text=self.mask(turn.text), tool_calls=calls,
                    tool_name=turn.tool_name, tool_call_id=turn.tool_call_id, raw=None)

    def _mask_json(self, node: Any) -> Any:
        if isinstance(node, str):
            return self.mask(node)
        if isinstance(node, dict):
            return {k: self._mask_json(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self._mask_json(v) for v in node]
        return node

    def restore(self, text: str) -> tuple[str, list[str]]:
        """The text with every known placeholder restored, and the unknown or damaged ones."""
        by_placeholder = {p: v for v, p in self.table.items()}
        problems: list[str] = []

        def put_back(match: regex.Match[str]) -> str:
            value = by_placeholder.get(match.group(0))
            if value is None:
                problems.append(match.group(0))
                return match.group(0)
            return value

        restored = _PLACEHOLDER.sub(put_back, text)
        # unknown well-formed placeholders are already reported; anything else secret-like is
        # a placeholder the summarizer damaged (brackets lost, case changed)
        problems.extend(m.group(0) for m in _DAMAGED.finditer(restored)
                        if not _PLACEHOLDER.fullmatch(m.group(0)))
        return restored, problems
