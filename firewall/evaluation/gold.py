"""The gold of an evaluation (DESIGN.md): which strings of a conversation a later tool call
needs, where they were seen, which of them are ID-like, strict or addressing, and where a cut
falls. ``evaluate`` scores contexts against it; replay, suggest and lint read it too.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import regex

from ..compaction.ledger import Ledger
from ..compaction.validate import occurs as _bounded_in
from ..json_values import scalar_leaves
from ..literals import SENTENCE_PUNCTUATION, literal_kind
from ..turns import Conversation, Turn

FRACTIONS = (0.25, 0.5, 0.75)
MIN_VALUE, MIN_TOKEN = 3, 4
FREE_TEXT_WORDS, FREE_TEXT_CHARS = 3, 40

_SPLIT = regex.compile(r"""[\s"'`()\[\]{}<>]+""")
FREE_TEXT_ARGUMENTS = frozenset({"command"})  # a shell command is free text at any length
# Arguments that *name* something (a file, a command, a search, a record): gold passed in one of
# them is "addressing" gold. Text the agent writes (a file body, an edit's strings, a plan, a
# todo, a prompt, a description) names nothing: its tokens are not.
ADDRESSING_ARGUMENTS = frozenset({
    "command", "cmd", "file_path", "filepath", "file", "files", "filename", "path", "paths",
    "notebook_path", "pattern", "glob", "include", "url", "uri", "urls", "cwd", "directory",
    "dir", "target", "ref", "branch", "name", "email", "node", "workflow", "id", "ids", "key"})
_ADDRESSING_SUFFIX = regex.compile(r"(?:_|(?<=[a-z])(?=[A-Z]))(?i:ids?|path|paths|url|uri|"
                                   r"name|key|file|dir|ref)$")


# ── gold ─────────────────────────────────────────────────────────────────────────────────────

def id_like(text: str) -> bool:
    return len(text) >= MIN_TOKEN and any(c.isdigit() or c in "/@" for c in text)


@dataclass(frozen=True, slots=True)
class Gold:
    """One load-bearing string: where the future needs it and where the past showed it."""

    literal: str
    mode: str  # "value" (a whole argument value) or "token" (of a free-text argument)
    kind: str
    used_in: int  # index of the first later message whose tool call uses it
    tool: str
    arg: str
    first_seen: int  # first message at or before k where it occurs
    role: str
    addressing: bool = False  # some later call passes it in an argument that names something

    @property
    def strict(self) -> bool:
        return self.mode == "value" or self.kind != "other"

    @property
    def id_like(self) -> bool:
        return self.strict and id_like(self.literal)

    @property
    def addresses(self) -> bool:
        """ID-like gold that a later call passes to name something (DESIGN.md's subset)."""
        return self.addressing and self.id_like


def is_addressing(arg: str) -> bool:
    """``arg`` (a tool call's argument key) names a target: a path, a command, a search
    pattern, a URL, an id (``order_id``, ``tabId``, ``item_ids``), a name; not a text the agent
    writes (``content``, ``new_string``, ``prompt``, ``description``)."""
    leaf = arg.rsplit(".", 1)[-1]
    return leaf.lower() in ADDRESSING_ARGUMENTS or _ADDRESSING_SUFFIX.search(leaf) is not None


def is_free_text(value: str, arg: str = "") -> bool:
    return (arg.rsplit(".", 1)[-1] in FREE_TEXT_ARGUMENTS or "\n" in value
            or len(value.split()) > FREE_TEXT_WORDS
            or (len(value) > FREE_TEXT_CHARS and any(c.isspace() for c in value)))


def argument_strings(arguments: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(arg, string, mode) candidates of one tool call, by the DESIGN.md definition."""
    for arg, text in scalar_leaves(arguments):
        arg = arg or ""
        if is_free_text(text, arg):
            for token in _SPLIT.split(text):
                if len(token) >= MIN_TOKEN:
                    yield arg, token, "token"
        elif len(text) >= MIN_VALUE:
            yield arg, text, "value"


def occurs(needle: str, haystack: str) -> bool:
    """``needle`` is in ``haystack`` somewhere not glued to a letter or digit: an end of the
    needle that is a letter or digit must not touch another (``100`` is not in ``1000``; an end
    that is punctuation, as in ``.format`` or ``data=``, joins anything). The validator's test,
    with every letter as glue, as DESIGN.md's metric reads it (CJK letters included)."""
    return _bounded_in(haystack, needle, glue=str.isalnum)


def _seen_texts(turn: Turn) -> list[str]:
    # argument values one by one: a JSON dump would escape quotes the model wrote plainly
    return [turn.text] + [s for c in turn.tool_calls for _, s in scalar_leaves(c.arguments)]


def gold_set(conversation: Conversation, k: int,
             sys_only: list[str] | None = None) -> list[Gold]:
    """``G_k``: unique strings, in order of first use after ``k``.

    A string found only in the system prompt is not gold (it is appended to ``sys_only``). A
    token found nowhere as written is tried without its sentence punctuation (``4579334072,``
    in "ID: 4579334072, ..." is the ID ``4579334072``).
    """
    turns = conversation.turns
    past = [(i, t.role, "\n".join(_seen_texts(t))) for i, t in enumerate(turns[:k + 1])
            if t.role != "system"]
    system = "\n".join(t.text for t in turns[:k + 1] if t.role == "system")

    def first_seen(text: str) -> tuple[int, str] | None:
        return next(((i, role) for i, role, body in past if occurs(text, body)), None)

    gold: dict[str, Gold] = {}
    excluded: dict[str, None] = {}
    for used_in in range(k + 1, len(turns)):
        for call in turns[used_in].tool_calls:
            for arg, text, mode in argument_strings(call.arguments):
                addressing = is_addressing(arg)
                if text in gold or text in excluded:
                    if addressing and text in gold and not gold[text].addressing:
                        gold[text] = replace(gold[text], addressing=True)
                    continue
                seen = first_seen(text)
                if seen is None and not occurs(text, system) and mode == "token":
                    stripped = text.strip(SENTENCE_PUNCTUATION)
                    if len(stripped) >= MIN_TOKEN and stripped != text:
                        text = stripped
                        if text in gold or text in excluded:
                            if addressing and text in gold and not gold[text].addressing:
                                gold[text] = replace(gold[text], addressing=True)
                            continue
                        seen = first_seen(text)
                if seen is not None:
                    gold[text] = Gold(text, mode, literal_kind(text), used_in, call.name, arg,
                                      seen[0], seen[1], addressing)
                elif occurs(text, system):
                    excluded[text] = None
    if sys_only is not None:
        sys_only.extend(excluded)
    return list(gold.values())


def uses_after(conversation: Conversation, k: int) -> Counter[str]:
    """How often each candidate string of ``gold_set`` is passed to a tool call after ``k``
    (a token also under its form without sentence punctuation, as the gold takes it)."""
    counts: Counter[str] = Counter()
    for turn in conversation.turns[k + 1:]:
        for call in turn.tool_calls:
            for _, text, _ in argument_strings(call.arguments):
                counts[text] += 1
                if text.strip(SENTENCE_PUNCTUATION) != text:
                    counts[text.strip(SENTENCE_PUNCTUATION)] += 1
    return counts


def naive_tokens(turns: Sequence[Turn]) -> dict[str, list[int]]:
    """The naive ledger's tokens: every distinct token of ``turns`` (4+ characters, split like
    the gold) that holds a digit, ``/`` or ``@``, in order of first appearance, each with the
    signals the ranked floor orders by: [typed by the user, passed in one of the agent's calls,
    sightings, latest turn]."""
    seen: dict[str, list[int]] = {}
    for i, turn in enumerate(turns):
        for j, text in enumerate(_seen_texts(turn)):
            for token in _SPLIT.split(text):
                if id_like(token):
                    signals = seen.setdefault(token, [0, 0, 0, i])
                    signals[0] |= turn.role == "user"
                    signals[1] |= j > 0  # a call's argument
                    signals[2] += 1
                    signals[3] = i
    return seen


def naive_ledger(turns: Sequence[Turn]) -> str:
    """The floor to beat: the naive tokens of ``turns``, space-separated."""
    return " ".join(naive_tokens(turns))


def ranked_naive_ledger(tokens: dict[str, list[int]], budget: int,
                        count: Callable[[str], int]) -> str:
    """The naive ``tokens`` (``naive_tokens``) ranked by their four signals and cut at
    ``budget`` tokens: the floor a *budgeted* ledger must beat at the same cost. Best first:
    typed by the user, then passed in one of the agent's calls, then seen most often, then
    seen last."""
    kept, cost = [], 0
    for token in sorted(tokens, key=tokens.__getitem__, reverse=True):
        cost += count(" " + token)
        if cost > budget:
            break
        kept.append(token)
    return " ".join(kept)


def agent_cuts(conversation: Conversation) -> list[tuple[str, int, str]]:
    """``(AGENT, k, summary)`` at each compaction the agent made itself (a session file's
    ``meta["boundaries"]`` and ``meta["summaries"]``): ``k`` is the last message before it."""
    meta = conversation.meta
    return [(AGENT, b - 1, summary) for b, summary in zip(meta.get("boundaries", ()),
                                                           meta.get("summaries", ()))
            if 1 <= b - 1 < len(conversation.turns) - 1]


def cut_points(n_messages: int, fractions: Iterable[float]) -> list[tuple[float, int]]:
    """``(f, k)`` with ``k = floor(f * n)``; cuts that compact nothing or everything are skipped."""
    return [(f, k) for f in fractions
            if 1 <= (k := math.floor(f * n_messages)) < n_messages - 1]


# the frac label of a cut at a compaction the agent made itself (a session file's boundary),
# where two more contexts are measured: its own summary ("agent"), and that summary with the
# ledger re-injected after it ("agent+ledger"), as a wrapped harness would have it
AGENT = "agent"


def decoded_values(ledger: Ledger) -> str:
    """Values the block shows JSON-escaped, as the model decodes them."""
    from ..compaction.ledger import is_plain

    return "\n".join(v for v in ledger.values() if not is_plain(v))
