"""Where the span used each ledger value (typed by the user, passed to a tool, repeated by the
agent, or one of a listing): the facts ``salience`` ranks the budget's entries by.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .ledger import LedgerEntry, _Occurrences

# the design requires telling the model to copy values byte-for-byte; every token here is paid
# at every compaction, so it says exactly that and no more (the note on quoting only when a
# value is quoted)


# -- the compaction's path into the ledger --------------------------------------------------

USER, CALL, ASSISTANT = 4, 2, 1  # bits of ``uses``: where a value was used, not just shown
LISTED_MAX = 3  # more values of one kind from one message: a listing, not a choice


class SpanUses(dict):
    """``value -> USER | CALL | ASSISTANT`` bits; ``listed``: for each value, how many values
    of its kind its first source (one message) showed: 1 for a lone ID, 30 for an item id in a
    catalog listing."""

    listed: dict[str, int]


def occurring(values: Iterable[str], texts: dict[int, str]) -> dict[str, int]:
    """For each value, the OR of the bits (keys of ``texts``) of the texts it occurs in (0:
    absent, or left out): one linear pass per text instead of a substring search per value
    and text, which costs values x text."""
    listed = list(dict.fromkeys(values))
    occurrences = _Occurrences(listed)
    found: dict[str, int] = {}
    for bit, text in texts.items():
        for _, i in occurrences.find(text):
            found[listed[i]] = found.get(listed[i], 0) | bit
    return found


def uses(entries: Iterable[LedgerEntry], turns: Sequence[Any]) -> SpanUses:
    """For each value, where the span *used* it: typed by the user, passed to a tool in a
    call's arguments, or repeated in the assistant's text (bits ``USER | CALL | ASSISTANT``)."""
    entries = list(entries)
    texts = {USER: [], CALL: [], ASSISTANT: []}
    for turn in turns:
        if turn.role == "user":
            texts[USER].append(turn.text)
        elif turn.role == "assistant":
            texts[ASSISTANT].append(turn.text)
            texts[CALL] += [c.arguments_json() or "" for c in turn.tool_calls]
    found = occurring({e.value for e in entries},
                       {bit: "\n".join(parts) for bit, parts in texts.items()})
    out = SpanUses((e.value, found.get(e.value, 0)) for e in entries)
    listings = Counter((e.first_seen, e.role, e.kind) for e in entries)
    out.listed = {e.value: listings[(e.first_seen, e.role, e.kind)] for e in entries}
    return out


def id_shaped(value: str) -> bool:
    """Hard to reconstruct from a paraphrase: 4+ characters with a digit, '/' or '@'."""
    return len(value) >= 4 and any(c.isdigit() or c in "/@" for c in value)


def folder(value: str) -> str:
    """The directory part of a path-like value (``src/api/x.py`` -> ``src/api``); empty
    without one."""
    return value.rstrip("/").rpartition("/")[0]


def near_folders(used: dict[str, int]) -> set[str]:
    """Folders the span worked in: a used path's folder, or a used folder itself. A listing's
    entries there rank with one of few: the agent opens its next file there, not among the 30
    siblings of another folder."""
    near = {f for v, bits in used.items() if bits and "/" in v
            for f in (folder(v), v.rstrip("/"))}
    near.discard("")
    return near
