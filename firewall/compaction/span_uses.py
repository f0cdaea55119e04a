"""Where the span used each ledger value (typed by the user, passed to a tool, repeated by the
agent, or one of a listing), and the hand-set salience the budget ranks entries by.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any


from ..tokens import TokenCounter, count_tokens
from .ledger import LedgerEntry, VALUE_SEP, _Occurrences, value_text

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


def contextual_salience(used: dict[str, int],
                        count: TokenCounter = count_tokens) -> Callable[[LedgerEntry], tuple]:
    """Salience with the span's uses, as value per token: a budget is a knapsack, and the
    entries that fill it best are the likely needed *and* cheap ones.

    Required entries come first. The rest are ranked by ``weight / tokens``, where the weight
    doubles for each step up the tiers *listed* (one of more than ``LISTED_MAX`` values of its
    kind in one message: a listing), *specific* (one of few in its message, a tool's value
    the user also typed, or a listed path in a folder the span used, or used a path of), *used* (first typed by the user, or passed to a tool or repeated by
    the agent: agents re-type what they typed); it is five times as large for an ID-shaped
    value (hard to rebuild from a paraphrase), grows with the square root of how often the
    span showed the value (the working set recurs: on the coding and retail dev sets, later
    tool calls use a value seen 9 times or more six to ten times as often as one seen once),
    with the rule's priority and with recency (the turn last seen). ``tokens`` is what writing
    the value costs (a block line is per role: no line prefix worth sharing out).

    Measured with ``firewall eval`` on the coding dev set (ID-like / strict), with block lines
    per turn and role: at the default budget 93.2 / 72.2 % against 93.5 / 73.0 % without the
    count and with an ID factor of 3; at 3 % of each span 84.8 / 59.2 % against 79.1 / 54.5 %.
    Lines per role took them to 94.3 / 78.0 % and 87.8 / 64.9 %. The value-per-token order itself
    replaced a lexicographic one (required, user, ID-shaped, specific, priority, recency) that
    filled budgets with listing entries: 85.3 % of the ID-like gold against 68.8 % at 5 %.

    The package ships this weighting as data (``salience.json``, applied by ``firewall.salience``
    key for key); fitted weights did not beat it held out (``benchmarks/salience_cv.py``).
    """
    listed = getattr(used, "listed", {})
    near = near_folders(used)

    def key(entry: LedgerEntry) -> tuple:
        u = used.get(entry.value, 0)
        tier = 2 if entry.role == "user" or u & (CALL | ASSISTANT) else \
            1 if u or listed.get(entry.value, 1) <= LISTED_MAX or (
                near and "/" in entry.value and folder(entry.value) in near) else 0
        weight = (2 ** tier) * (5 if id_shaped(entry.value) else 1) * (entry.priority / 50) \
            * math.sqrt(entry.count) * (1 + entry.last_seen / 100)
        tokens = count(VALUE_SEP + value_text(entry.value))
        return (entry.severity == "required", weight / tokens, entry.role == "user",
                entry.last_seen)
    return key
