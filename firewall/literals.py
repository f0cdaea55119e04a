"""``Literal``: one lexical-contract string found in a conversation, with its provenance."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal as TypingLiteral

import regex

from .json_values import decoded
from .turns import Role

Severity = TypingLiteral["required", "pin"]


@dataclass(slots=True)
class Literal:
    """The exact bytes of a string the conversation depends on, and where they were first seen.

    ``field`` is ``"text"`` for a turn's text (``start``/``end`` are character offsets into it),
    or the path of a JSON value: ``"arguments.order_id"`` in a tool call's arguments,
    ``"content.orders[0].id"`` in a JSON tool result (offsets are then within that value).
    ``count`` is how many times the value was seen in the conversation so far, and
    ``last_turn`` the turn of the latest of those sightings (None: only ``turn`` is known).
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
    last_turn: int | None = None

    @property
    def latest(self) -> int:
        """The turn of the latest sighting known."""
        return self.turn if self.last_turn is None else self.last_turn

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# A secret shorter than this is masked only where a rule found it, and makes no other literal
# sensitive by containing it: a 1-character URL password would otherwise turn every ``p`` of
# a transcript into a placeholder. Four is the shortest password ``secrets/password-assignment``
# accepts.
SECRET_MIN_CHARS = 4

# what a token of free text may carry from its sentence (``1809,``, ``/dev/null;``): the gold
# tries a token without it, and the archive's sweep keeps no such token beside a rule's literal
SENTENCE_PUNCTUATION = ".,;:!?"


SENSITIVE = "[sensitive]"  # a secret wherever one is shown: a value, a field path, a report


def public_field(field: str, secrets: Iterable[str]) -> str:
    """A literal's field path as it may be shown: every secret in it written ``[sensitive]``.
    A JSON path names its object keys, and a key may be a secret (a token used as a key:
    ``arguments.tokens.ghp_….path``). A secret of ``SECRET_MIN_CHARS`` or more is replaced
    wherever it stands; a shorter one only as a whole key (``.k.``, ``.k#key``, ``.k[0]``)."""
    if field == "text":
        return field
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if secret not in field:
            continue
        if len(secret) >= SECRET_MIN_CHARS:
            field = field.replace(secret, SENSITIVE)
        else:
            field = re.sub(rf"(?<=\.){re.escape(secret)}(?=$|[.#\[])", SENSITIVE,
                           field)
    return field


def spread_sensitivity(literals: list[Literal]) -> None:
    """Sensitivity dominates within one turn: a literal that overlaps a sensitive one in the
    same field, directly or through a chain of overlapping literals, is sensitive too (an email
    cut out of a URL password, an ID-shaped fragment of a key). Changes ``literals`` in place."""
    for lit in literals:  # a loop, not any(): a turn holds a hundred literals, rarely a secret
        if lit.sensitive:
            break
    else:
        return
    by_field: dict[str, list[Literal]] = {}
    for lit in literals:
        by_field.setdefault(lit.field, []).append(lit)
    for group in by_field.values():
        group.sort(key=lambda lit: lit.start)
        run: list[Literal] = []  # a run of literals chained by overlaps
        end = -1
        for lit in group:
            if lit.start >= end:
                _taint(run)
                run, end = [], -1
            run.append(lit)
            end = max(end, lit.end)
        _taint(run)


def _taint(run: list[Literal]) -> None:
    if any(lit.sensitive for lit in run):
        for lit in run:
            lit.sensitive = True


class SecretIndex:
    """Sensitive values of at least ``SECRET_MIN_CHARS`` characters, to answer "does this value
    contain one, or lie inside one?" in one pass over a joined string, not one per secret."""

    _SEP = "\x00"

    def __init__(self, secrets: list[str]) -> None:
        # a secret a rule read with its JSON escapes (``a\\/b``) is the decoded value too (``a/b``):
        # a rule reading the decoded JSON finds it spelled so
        spellings = (spelling for s in secrets for spelling in (s, decoded(s)))
        self.secrets = [s for s in dict.fromkeys(spellings) if len(s) >= SECRET_MIN_CHARS]
        self._joined = self._SEP + self._SEP.join(self.secrets) + self._SEP
        self._automaton = None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def touches(self, value: str) -> bool:
        """``value`` contains a secret, or is a piece of one (both of at least
        ``SECRET_MIN_CHARS`` characters)."""
        if not self.secrets or len(value) < SECRET_MIN_CHARS:
            return False
        if self._SEP not in value and value in self._joined:
            return True
        if len(self.secrets) < 8:
            return any(s in value for s in self.secrets)
        if self._automaton is None:  # many secrets: one pass over the value finds any of them
            import ahocorasick

            automaton = ahocorasick.Automaton()
            for secret in self.secrets:
                automaton.add_word(secret, len(secret))
            automaton.make_automaton()
            self._automaton = automaton
        return next(self._automaton.iter(value), None) is not None


# ── the kind of a literal string (the kinds an eval reports its gold by) ──────────────────────

# Kinds of a literal string, first match wins; only "other" tokens are outside the strict set.
_FILE_EXTENSIONS = ("py|pyi|pyc|txt|md|rst|cfg|ini|toml|json|jsonl|yaml|yml|xml|html|csv|log|sh|js|"
                    "ts|go|rs|java|c|h|cpp|sql|patch|diff|lock|dcm|ipynb")
_KINDS = (
    ("email", regex.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("uuid_hex", regex.compile(r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}"
                               r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")),
    # amounts, negative flags' numbers, dates, clock times, dotted numbers (1.2.840.10008)
    ("numeric", regex.compile(r"(?:[-+]?|-?\$)\d[\d,]*(?:\.\d+)*(?:[-:.,]\d+)*[.,:]{0,2}")),
    ("path", regex.compile(rf"[^\s/]*/\S*|[\w.-]*\w\.(?:{_FILE_EXTENSIONS})")),
    ("alnum_code", regex.compile(r"[-#]?[A-Za-z0-9](?:[\w\-.:]*[\w.:])?")),
    # snake_case (dunders and edge underscores too), camelCase, dotted names (fields.String)
    ("identifier", regex.compile(r"_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*|_+[A-Za-z0-9]+_*"
                                 r"|[A-Za-z][A-Za-z0-9]*_+|[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*"
                                 r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")),
)


LITERAL_KINDS = (*(kind for kind, _ in _KINDS), "other")  # what ``literal_kind`` answers


def literal_kind(text: str) -> str:
    """``email``, ``uuid_hex``, ``numeric``, ``path``, ``alnum_code`` (a code with a digit, or
    one capitalized word: ``SELECT``, not ``PASSED:``), ``identifier`` or ``other``."""
    for kind, pattern in _KINDS:
        if pattern.fullmatch(text):
            if kind == "alnum_code" and not any(c.isdigit() for c in text) and (
                    not text.isupper() or text.endswith(":") or "_" in text):
                continue
            return kind
    return "other"
