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


# A secret shorter than this is masked only where a rule found it, and makes no other literal
# sensitive by containing it: a 1-character URL password would otherwise turn every ``p`` of
# a transcript into a placeholder. Four is the shortest password ``secrets/password-assignment``
# accepts.
SECRET_MIN_CHARS = 4


def spread_sensitivity(literals: list[Literal]) -> None:
    """Sensitivity dominates within one turn: a literal that overlaps a sensitive one in the
    same field, directly or through a chain of overlapping literals, is sensitive too (an email
    cut out of a URL password, an ID-shaped fragment of a key). Changes ``literals`` in place."""
    if not any(lit.sensitive for lit in literals):
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
        self.secrets = [s for s in dict.fromkeys(secrets) if len(s) >= SECRET_MIN_CHARS]
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
