"""The one extension point every summarizer implements: ``summarize(request) -> Summary``.

Built-in summarizers (offline extractive, Anthropic, OpenAI) are written against this protocol,
exactly as a user's own would be. ``asummarize`` is optional: the async driver runs a sync-only
summarizer in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..turns import Turn


@dataclass(frozen=True, slots=True)
class RequiredLiteral:
    """A literal the summary must contain byte-for-byte, with where it came from."""

    value: str
    rule: str
    snippet: str = ""  # a short piece of source text around the literal, for re-ask feedback


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What a summarizer is asked: summarize ``turns``, keeping ``required`` literals verbatim.

    ``instructions`` is the full text instruction the firewall built (required list included);
    ``feedback`` is set on a re-ask and says exactly what the previous attempt lost or mutated.
    """

    turns: tuple[Turn, ...]
    required: tuple[RequiredLiteral, ...]
    instructions: str
    attempt: int = 1
    feedback: str | None = None
    previous: str | None = None  # the previous attempt's summary, on a re-ask


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    usage: dict[str, Any] = field(default_factory=dict)  # vendor token counts, as reported
    model: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    def summarize(self, request: SummaryRequest) -> Summary | str: ...
