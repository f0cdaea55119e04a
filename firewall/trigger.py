"""When a harness compacts, and where the compacted span ends.

Harnesses count the live context's tokens before every model call and compact when it crosses
a **watermark**: a share of the model's window (``reactive``). A ``preemptive`` trigger also
counts the output the next call may write (its ``max_tokens``), and compacts before a turn that
would cross. Either way, the **semantic nudge** moves the span's end to a natural point: never
between a tool call and its result (``compose.splits_tool_pair``, every supported format), and
preferably where a user-visible exchange ended, so the verbatim tail opens on a whole exchange.
``Firewall.maybe_compact`` is the one call a harness makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from .compose import Span, splits_tool_pair, turn_tokens
from .errors import FirewallError
from .turns import Turn

TriggerPolicy = TypingLiteral["reactive", "preemptive"]
TRIGGER_POLICIES: tuple[str, ...] = ("reactive", "preemptive")
WATERMARK = 0.8  # Anthropic's server default is 150,000 of a 200,000-token window: 0.75


@dataclass(frozen=True, slots=True)
class Trigger:
    """Compact when the live context crosses ``watermark`` × ``window`` tokens.

    ``policy``: ``"reactive"`` looks at the context as it is; ``"preemptive"`` adds
    ``expected_output`` (the next call's ``max_tokens``), so a turn that would cross the
    watermark is preceded by a compaction. ``nudge``: how many turns the span's end may move
    back to reach the end of a user-visible exchange (0: only never split a tool call from its
    result, which always holds).
    """

    window: int
    watermark: float = WATERMARK
    policy: TriggerPolicy = "reactive"
    expected_output: int = 0
    nudge: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.window, int) or self.window <= 0:
            raise FirewallError(f"trigger: the window must be a positive number of tokens, "
                                f"got {self.window!r}")
        if not 0 < self.watermark <= 1:
            raise FirewallError(f"trigger: the watermark is a share of the window, in (0, 1], "
                                f"got {self.watermark!r}")
        if self.policy not in TRIGGER_POLICIES:
            raise FirewallError(f"trigger: unknown policy {self.policy!r}; one of "
                                f"{', '.join(TRIGGER_POLICIES)}")
        if self.expected_output < 0 or self.nudge < 0:
            raise FirewallError("trigger: expected_output and nudge cannot be negative")

    @property
    def threshold(self) -> int:
        """The live tokens above which the trigger fires."""
        return int(self.window * self.watermark)

    def fires(self, live_tokens: int, expected_output: int | None = None) -> bool:
        """Does a context of ``live_tokens`` call for a compaction before the next model call?
        ``expected_output`` overrides the trigger's own for this call (preemptive only)."""
        if self.policy == "preemptive":
            live_tokens += self.expected_output if expected_output is None else expected_output
        return live_tokens > self.threshold

    def boundary(self, turns: Sequence[Turn], span: Span) -> int:
        """Where the verbatim tail starts: the span's end, moved back (at most ``nudge`` turns,
        never before the span's start) to the end of a user-visible exchange; never between a
        tool call and its result."""
        turns = list(turns)
        end = span.end
        while span.start < end < len(turns) and splits_tool_pair(turns, end, span.start):
            end -= 1
        for b in range(end, max(span.start, end - self.nudge) - 1, -1):
            if b <= span.start:
                break
            if exchange_ends_before(turns, b) and not splits_tool_pair(turns, b, span.start):
                return b
        return end


def exchange_ends_before(turns: Sequence[Turn], index: int) -> bool:
    """Does a user-visible exchange end just before ``turns[index]``: the assistant answered in
    text without calling a tool, or the user speaks next?"""
    previous = turns[index - 1]
    answered = previous.role == "assistant" and not previous.tool_calls and bool(previous.text)
    return answered or index < len(turns) and turns[index].role == "user"


def live_tokens(turns: Sequence[Turn]) -> int:
    """Tokens of a live context: every turn's text and tool calls (memoized per text)."""
    return sum(turn_tokens(t) for t in turns)
