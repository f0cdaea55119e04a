"""Exceptions raised by literal-firewall.

    FirewallError                 base class: catch this to catch everything below
    ├── PackError                 a rule pack failed to load, validate or compile
    │                             (message names the pack, the rule id and the field)
    ├── ConversationError         an input conversation is malformed (names the line and field)
    ├── SummarizerError           a summarizer failed, timed out or returned something unusable
    ├── IntegrationError          a vendor call made by a wrapper failed (``.status_code``);
    │                             the caller's conversation is unchanged
    ├── CompactionRefused         policy="raise": required literals were still lost after every
    │                             retry; ``.attempts`` holds every attempt with its verdict
    └── AuditError                the audit log could not be opened or written

A failing firewall fails closed: where any of these stops a compaction, the caller's
conversation is returned or kept as it was, never with literals silently dropped.
"""

from __future__ import annotations

from typing import Any


class FirewallError(Exception):
    """Base class of every error raised by literal-firewall."""


class PackError(FirewallError):
    """A rule pack is invalid: ``path:line: pack 'p', rule 'r', field 'f': what is wrong``."""

    def __init__(self, message: str, *, pack: str | None = None, rule: str | None = None,
                 field: str | None = None, path: str | None = None,
                 line: int | None = None) -> None:
        where = ", ".join(
            f"{name} {value!r}" for name, value in (("pack", pack), ("rule", rule), ("field", field))
            if value is not None
        )
        location = f"{path}:{line}" if path and line else path
        text = f"{where}: {message}" if where else message
        super().__init__(f"{location}: {text}" if location else text)
        self.pack, self.rule, self.field, self.path, self.line = pack, rule, field, path, line


class ConversationError(FirewallError):
    """An input conversation is malformed. ``line`` (1-based) and ``field`` say where."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        where = ":".join(str(p) for p in (source, line) if p is not None)
        if field:
            where = f"{where} {field}" if where else field
        super().__init__(f"{where}: {message}" if where else message)
        self.source, self.line, self.field = source, line, field


class SummarizerError(FirewallError):
    """The summarizer raised, timed out, or returned something that is not text."""


class IntegrationError(FirewallError):
    """A vendor call made by an integration failed (HTTP status, rate limit, connection).

    ``status_code`` is the HTTP status when there was one. The conversation passed in is
    unchanged; the literals already extracted stay in the guard's ledger.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class CompactionRefused(FirewallError):
    """Required literals were lost after every retry and the policy is ``raise``."""

    def __init__(self, message: str, *, attempts: list[Any] | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts or []


class AuditError(FirewallError):
    """The audit log could not be opened, migrated or written."""
