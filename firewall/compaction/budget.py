"""The ledger's token budget: fixed, or a share of the span being compacted.

A fixed budget binds on long spans and is slack on short ones: 2,000 tokens are 13 % of a
15k-token coding span and 1.2 % of a 160k-token Claude Code compaction. The default follows
the span (``share``), with a ``floor`` and a ``cap``. The floor is what the share gives a span of
16k tokens, where compactions begin in earnest: spans that long pay exactly their share, and a
shorter span, which holds its working set in fewer tokens but not in proportionally fewer
values, keeps the same absolute block (on short coding spans, 500 tokens lost the files a
finder listed and the agent opened later). The cap keeps a huge span from buying a huge block
(4,500 tokens: under 3 % of the 150k-190k-token spans that harnesses compact at).
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Budget:
    """``tokens(span) = clamp(share * span, floor, cap)``; the cap alone when the span is
    unknown (a hook that sees a transcript, not a span)."""

    share: float = 0.045
    floor: int = 720  # share * 16,000
    cap: int = 4_500

    def __post_init__(self) -> None:
        if not (0 <= self.share <= 1 and 0 <= self.floor <= self.cap):
            raise ValueError(f"budget: need 0 <= share <= 1 and 0 <= floor <= cap, got {self}")

    def tokens(self, span_tokens: int | None) -> int:
        if span_tokens is None:
            return self.cap
        return max(self.floor, min(self.cap, int(self.share * span_tokens)))

    def __str__(self) -> str:
        return f"{self.share * 100:g}% of the span, within {self.floor}-{self.cap} tokens"


def budget_tokens(budget: int | str | Budget, span_tokens: int | None) -> int:
    """Tokens for one compaction: a fixed count, ``"P%"`` of the span (no floor or cap), or a
    ``Budget``."""
    if isinstance(budget, Budget):
        return budget.tokens(span_tokens)
    if isinstance(budget, str) and budget.endswith("%"):
        return int(float(budget[:-1]) * (span_tokens or 0) / 100)
    return int(budget)


def parse_budget(text: str) -> int | str | Budget:
    """The command line's ``--budget``: ``auto`` (the default ``Budget``), ``TOKENS`` or ``P%``.
    Raises ``ArgumentTypeError``, whose message argparse shows as it is."""
    if text == "auto":
        return Budget()
    try:
        value = float(text[:-1]) if text.endswith("%") else int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected auto, tokens or a percentage: {text!r}") from None
    if value < 0:
        raise ArgumentTypeError(f"the budget cannot be negative: {text!r}")
    return text if text.endswith("%") else int(value)
