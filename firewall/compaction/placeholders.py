"""Placeholder mode: sensitive literals never reach a summarizer in clear text.

Each compaction draws a random tag, and each sensitive value maps to a placeholder carrying it
(``[[SECRET_3f9a0c2e_3]]``: the same value, the same placeholder, within the compaction). A
placeholder cannot be guessed, so text in the conversation cannot summon a secret: restoring
puts back only placeholders this compaction issued. Text that merely looks like a placeholder
(``[[SECRET_1]]`` in a tool result) is neutralised before it leaves (``SECRET-1``), so whatever
secret-like string the summary holds afterwards came from the summarizer, and is reported.

Masking is by span: the spans where a rule found a secret (any length) and every occurrence of a
secret of at least ``SECRET_MIN_CHARS`` characters, in any spelling (plain or JSON-escaped: see
``escapes``), are merged where they overlap, and each merged
region is replaced whole, so no piece of a secret is left beside a placeholder. The summary is
restored by scanning for placeholders, never by offsets: a summarizer that moves, drops or
repeats them is handled; one it invents or alters is reported so the guard can re-ask.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from ..json_values import decoded
from .escapes import escaped_spellings
from ..literals import SECRET_MIN_CHARS
from ..spellings import encoded_spellings
from ..turns import ToolCall, Turn

Span = tuple[int, int]

_TAG_CHARS = 8  # hex: 32 random bits per compaction
_PLACEHOLDER = regex.compile(r"\[\[SECRET_([0-9a-f]{8})_(\d{1,9})\]\]")
# what a summarizer makes of a placeholder it damaged: brackets lost or changed, case changed,
# tag dropped or cut
_DAMAGED = regex.compile(
    r"(?i)(?<![\w\[])\[{0,2}\s*secret[_ ](?:[0-9a-f]{1,16}[_ ])?\d+(?!\w)\s*\]{0,2}(?!\])")
# text arriving in the input that _DAMAGED could take for a placeholder: its separator after
# "secret" is rewritten, so that the word survives and the shape does not (and nothing else is
# touched: AWS_SECRET_ACCESS_KEY goes as it is)
_LOOKALIKE = regex.compile(r"(?i)(?<=secret)[_ ](?=(?:[0-9a-f]{1,16}[_ ])?\d+(?!\w))")


def uncut(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened so that it cuts no placeholder of ``text`` in half: a cut one
    (``[[SECRET_3f9a0c``) is no placeholder, and its tag's digits may spell a secret's."""
    for m in _PLACEHOLDER.finditer(text, max(0, start - 40), min(len(text), end + 40)):
        s, e = m.span()
        if s < start < e:
            start = s
        if s < end < e:
            end = e
    return start, end


def neutralise(text: str) -> str:
    """``text`` with nothing in it that reads as a placeholder (``SECRET_1`` → ``SECRET-1``)."""
    return _LOOKALIKE.sub("-", text)


@dataclass
class Placeholders:
    """One compaction's value ↔ placeholder table (``tag`` is drawn at random)."""

    table: dict[str, str] = field(default_factory=dict)  # value → placeholder
    tag: str = field(default_factory=lambda: secrets.token_hex(_TAG_CHARS // 2))

    def add(self, values: Iterable[str]) -> None:
        for value in values:
            self.placeholder(value)

    def placeholder(self, value: str) -> str:
        """The placeholder of ``value``, issued now if it has none."""
        issued = self.table.get(value)
        if issued is None and value:
            issued = self.table[value] = f"[[SECRET_{self.tag}_{len(self.table) + 1}]]"
        return issued or value

    @property
    def example(self) -> str:
        return next(iter(self.table.values()), f"[[SECRET_{self.tag}_1]]")

    def regions(self, text: str, spans: Iterable[Span] = ()) -> list[Span]:
        """The merged spans to mask in ``text``: ``spans`` (where a rule found a secret) and
        every occurrence of a secret of at least ``SECRET_MIN_CHARS`` characters, in any
        spelling: plain, JSON-escaped (``\\/`` for ``/``, ``\\u00e4``), decoded, URL-encoded or in
        base64 (``spellings``)."""
        found = [(s, e) for s, e in spans if 0 <= s < e <= len(text)]
        for value in self.table:
            if len(value) < SECRET_MIN_CHARS:
                continue
            # a value a rule read with its JSON escapes is also looked for decoded, and each
            # is looked for URL-encoded and in base64 too
            for spelling in dict.fromkeys((value, decoded(value), *encoded_spellings(value),
                                           *encoded_spellings(decoded(value)))):
                at = text.find(spelling)
                while at >= 0:
                    found.append((at, at + len(spelling)))
                    at = text.find(spelling, at + 1)
                found.extend(escaped_spellings(spelling, text))
        found.sort()
        merged: list[Span] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def mask(self, text: str, spans: Iterable[Span] = ()) -> str:
        """``text`` as a summarizer may see it: each merged secret region replaced whole by a
        placeholder (a region that is no known value gets its own), the rest neutralised."""
        pieces, at = [], 0
        for start, end in self.regions(text, spans):
            pieces.append(neutralise(text[at:start]))
            pieces.append(self.placeholder(text[start:end]))
            at = end
        pieces.append(neutralise(text[at:]))
        return "".join(pieces)

    def mask_value(self, value: str) -> str:
        """A literal's value as the summarizer sees it: a known secret is its placeholder,
        whatever its length."""
        return self.table.get(value) or self.mask(value)

    def mask_turn(self, turn: Turn, spans: dict[str, Sequence[tuple[int, int, str]]]
                  | None = None) -> Turn:
        """``turn`` masked; ``spans`` maps a field (``text``, a JSON path) to where a rule found
        a secret in it: (start, end, value), offsets into that field's text."""
        spans = spans or {}
        calls = tuple(ToolCall(c.name, self._mask_json(c.arguments, "arguments", spans), c.id)
                      for c in turn.tool_calls)
        return Turn(role=turn.role, text=self._mask_field(turn.text, "text", spans),
                    tool_calls=calls, tool_name=turn.tool_name,
                    tool_call_id=turn.tool_call_id, raw=None)

    def _mask_field(self, text: str, where: str,
                    spans: dict[str, Sequence[tuple[int, int, str]]]) -> str:
        # JSON paths may repeat across a turn's tool calls: a span counts where it slices its value
        return self.mask(text, [(s, e) for s, e, value in spans.get(where, ())
                                if text[s:e] == value])

    def _mask_json(self, node: Any, where: str,
                   spans: dict[str, Sequence[tuple[int, int, str]]]) -> Any:
        # an explicit stack: arguments may nest deeper than recursion allows
        root: list[Any] = [None]
        stack: list[tuple[Any, str, Any, Any]] = [(node, where, root, 0)]
        while stack:
            value, path, parent, slot = stack.pop()
            if isinstance(value, dict):
                copy: Any = {}
                for k, v in value.items():
                    child = f"{path}.{k}"
                    name = self._mask_field(k, child + "#key", spans) \
                        if isinstance(k, str) else k
                    copy[name] = None
                    stack.append((v, child, copy, name))
            elif isinstance(value, list):
                copy = [None] * len(value)
                stack.extend((v, f"{path}[{i}]", copy, i) for i, v in enumerate(value))
            elif isinstance(value, str):
                copy = self._mask_field(value, path, spans)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                text = json.dumps(value)  # the spelling the extractor scanned
                masked = self._mask_field(text, path, spans)
                copy = value if masked == text else masked  # a masked number goes as text
            else:
                copy = value
            parent[slot] = copy
        return root[0]

    def restore(self, text: str) -> tuple[str, list[str]]:
        """The text with every placeholder this table issued restored, and the unknown or
        damaged ones (anything else shaped like a placeholder)."""
        by_placeholder = {p: v for v, p in self.table.items()}
        problems = [m.group(0) for m in _DAMAGED.finditer(text)
                    if m.group(0) not in by_placeholder]

        def put_back(match: regex.Match[str]) -> str:
            value = by_placeholder.get(match.group(0))
            if value is None:
                if match.group(0) not in problems:
                    problems.append(match.group(0))
                return match.group(0)
            return value

        return _PLACEHOLDER.sub(put_back, text), problems
