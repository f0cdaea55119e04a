"""A recall's hits as text a terminal, a program or a model reads: data, never markup.

A hit's value and context line come from the conversation, tool output included, which an
attacker may write: a context line holding ANSI escapes would drive the terminal of whoever
runs ``firewall recall``, and one holding ``<<<ledger ...>>>`` or a bidi override would read,
to a model, as a ledger block or as other text. So every answer is written as the ledger writes
its values (``ledger.visible_json``, ``ledger.value_text``): in JSON, every unsafe character and
every ``<``/``>`` is a ``\\uXXXX`` escape (the same data once decoded); on a terminal, a value
is verbatim only when it is plain, and a context line has its unsafe characters and any
``<<<``/``>>>`` escaped. An answer to a model is bounded too (``ANSWER_CHARS``): a tool output
crafted to match a common query with huge values cannot flood the agent's context.
"""

from __future__ import annotations

import json
from typing import Any

from ..compaction.ledger import value_text, visible_json, visible_line

# the JSON text of an answer to a model, at most (its best hit is always kept, whatever its size:
# a value is at most LITERAL_MAX_CHARS, a context line about CONTEXT_CHARS)
ANSWER_CHARS = 16_000


def hit_json(data: Any) -> str:
    """``data`` (a hit's ``to_dict``, or an answer holding hits) as visible JSON text."""
    return visible_json(json.dumps(data, ensure_ascii=False))


def bounded(hits: list[dict[str, Any]],
            limit: int = ANSWER_CHARS) -> tuple[list[dict[str, Any]], int]:
    """The first ``hits`` whose JSON fits in ``limit`` characters (the first always), and how
    many were left off."""
    kept, size = [], 0
    for hit in hits:
        size += len(hit_json(hit)) + 2
        if kept and size > limit:
            break
        kept.append(hit)
    return kept, len(hits) - len(kept)


def answer(hits: list[dict[str, Any]], **fields: Any) -> tuple[dict[str, Any], str]:
    """An answer to a model (``fields`` then ``hits``, bounded; ``left_off`` when some were
    left off): as data, and as its visible JSON text."""
    kept, left_off = bounded(hits)
    data = {**fields, "hits": kept}
    if left_off:
        data["left_off"] = left_off
        data["note"] = (f"{left_off} more hits left off to keep this answer short: ask with more "
                        f"of the value")
    return data, hit_json(data)


def render(hit: Any) -> str:
    """A hit on a terminal: its value (verbatim when plain, else a JSON string, as in the
    ledger block), where it was seen, and its context line."""
    turns = f"turn {hit.first_turn}" if hit.first_turn == hit.last_turn else \
        f"turns {hit.first_turn}-{hit.last_turn}"
    head = (f"{value_text(hit.value)}\n    {visible_line(hit.kind)}, {visible_line(hit.rule)}, "
            f"{visible_line(hit.role)} {turns}, compaction {hit.compaction} of "
            f"{visible_line(hit.conversation)} ({hit.match}, score {hit.score:g})")
    return head + (f"\n    | {visible_line(hit.context)}" if hit.context else "")


__all__ = ["ANSWER_CHARS", "answer", "bounded", "hit_json", "render"]
