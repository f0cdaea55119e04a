"""When a harness compacts, and where the compacted span ends.

Harnesses count the live context's tokens before every model call and compact when it crosses
a **watermark**: a share of the model's window (``reactive``). A ``preemptive`` trigger also
counts the output the next call may write (its ``max_tokens``), and compacts before a turn that
would cross. Either way, the **semantic nudge** moves the span's end to a natural point: never
between a tool call and its result (``compose.splits_tool_pair``, every supported format), and
preferably where a user-visible exchange ended, so the verbatim tail opens on a whole exchange.
``Firewall.maybe_compact`` is the one call a harness makes.

A trigger that fires is not always worth obeying: once the verbatim tail plus an earlier
summary and ledger sit near the watermark, compacting again would only re-summarize that summary,
and the trigger would fire again at every following message (re-compaction thrash). So a
compaction is **due** only when replacing the span (its *fresh* material: the turns that are not
the firewall's own summary or ledger messages) by a summary and ledger expected to cost what the
earlier ones did would bring the live context to ``Trigger.target``, the watermark less its
``headroom``. Otherwise it is **skipped**, and ``Decision.skipped`` says why
(``Firewall.compaction_due``). A firing is also skipped while the summarizer is failing: after
``n`` trigger compactions in a row without a usable summary (a vendor down, a key revoked), the
next one on that ledger waits for ``2**n`` more messages (at most 32), so a failing vendor is
not called again before every model call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from .compose import Span, splits_tool_pair
from ..tokens import turn_tokens
from ..errors import FirewallError
from ..turns import Turn

TriggerPolicy = TypingLiteral["reactive", "preemptive"]
TRIGGER_POLICIES: tuple[str, ...] = ("reactive", "preemptive")
WATERMARK = 0.8  # Anthropic's server default is 150,000 of a 200,000-token window: 0.75
# a compaction must be able to bring the live context this share under the watermark: without
# the margin, one compaction that lands just under it is followed by another a message later
HEADROOM = 0.1
SKIPPED = "too little fresh material to compact"
BACKING_OFF = "the summarizer is failing"


@dataclass(frozen=True, slots=True)
class Trigger:
    """Compact when the live context crosses ``watermark`` × ``window`` tokens.

    ``policy``: ``"reactive"`` looks at the context as it is; ``"preemptive"`` adds
    ``expected_output`` (the next call's ``max_tokens``), so a turn that would cross the
    watermark is preceded by a compaction. ``nudge``: how many turns the span's end may move
    back to reach the end of a user-visible exchange (0: only never split a tool call from its
    result, which always holds). ``headroom``: the share of the threshold a compaction must be
    able to free below it (see ``relieves``); a compaction that cannot is skipped.
    """

    window: int
    watermark: float = WATERMARK
    policy: TriggerPolicy = "reactive"
    expected_output: int = 0
    nudge: int = 4
    headroom: float = HEADROOM

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
        if not 0 <= self.headroom < 1:
            raise FirewallError(f"trigger: the headroom is a share of the threshold, in [0, 1), "
                                f"got {self.headroom!r}")

    @property
    def threshold(self) -> int:
        """The live tokens above which the trigger fires."""
        return int(self.window * self.watermark)

    @property
    def target(self) -> int:
        """The live tokens a compaction must be able to bring the context to (or under): the
        threshold less its ``headroom``."""
        return self.threshold - int(self.threshold * self.headroom)

    def fires(self, live_tokens: int, expected_output: int | None = None) -> bool:
        """Does a context of ``live_tokens`` call for a compaction before the next model call?
        ``expected_output`` overrides the trigger's own for this call (preemptive only)."""
        return self._counted(live_tokens, expected_output) > self.threshold

    def relieves(self, after_tokens: int, expected_output: int | None = None) -> bool:
        """Is a compaction expected to leave ``after_tokens`` worth doing: do they reach
        ``target``?"""
        return self._counted(after_tokens, expected_output) <= self.target

    def _counted(self, tokens: int, expected_output: int | None) -> int:
        if self.policy == "preemptive":
            tokens += self.expected_output if expected_output is None else expected_output
        return tokens

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

    def assess(self, turns: Sequence[Turn], span: Span, is_own: Callable[[Turn], bool],
               expected_output: int | None = None, cost: int = 0) -> Decision:
        """Is a compaction of ``turns`` due, with ``span`` as the span before the nudge?

        It is when the trigger fires and compacting can bring the context to ``target``: the
        span is replaced by a summary and ledger block expected to cost as much as the
        firewall's own messages already in it (``is_own``: an earlier summary and ledger, which
        are not fresh material), or ``cost`` tokens (what the last attempt's took, when it
        would not have shrunk the context), whichever is more."""
        live = live_tokens(turns)
        if not self.fires(live, expected_output):
            return Decision(fires=False, live_tokens=live)
        boundary = self.boundary(turns, span)
        compacted = turns[span.start:boundary]
        own = sum(turn_tokens(t) for t in compacted if is_own(t))
        fresh = live_tokens(compacted) - own
        after = live - fresh - own + max(own, cost)
        if not self.relieves(after, expected_output):
            output = self._counted(0, expected_output)
            return Decision(fires=True, live_tokens=live, fresh_tokens=fresh, skipped=(
                f"{SKIPPED}: the span holds {fresh:,} tokens that no compaction covered yet; "
                f"compacting it would leave at least {after + output:,} tokens (system prompt "
                f"and verbatim tail, {max(own, cost):,} for a new summary and ledger"
                + (f", {output:,} for the next call's output" if output else "")
                + f"), over the {self.target:,}-token target (the watermark less "
                f"{self.headroom:.0%} headroom)"))
        return Decision(fires=True, live_tokens=live, boundary=boundary, fresh_tokens=fresh)


@dataclass(frozen=True, slots=True)
class Decision:
    """What a trigger calls for on one live context (``Firewall.compaction_due``).

    ``fires``: the context crossed the watermark. Then either ``due``, and ``boundary`` is the
    first turn of the verbatim tail, or ``skipped`` says why no compaction is worth doing:
    ``SKIPPED``, then the figures (``fresh_tokens``: the span's turns that are not the
    firewall's own summary or ledger), or ``BACKING_OFF`` and the summarizer's last error.
    ``maybe_compact`` then returns the messages untouched
    and ``compact_if_due`` None, at every call, until new turns bring enough fresh material
    (or, when the verbatim tail alone is over the target, never: keep fewer turns).
    """

    fires: bool
    live_tokens: int
    boundary: int | None = None
    fresh_tokens: int = 0
    skipped: str | None = None

    @property
    def due(self) -> bool:
        return self.boundary is not None


def exchange_ends_before(turns: Sequence[Turn], index: int) -> bool:
    """Does a user-visible exchange end just before ``turns[index]``: the assistant answered in
    text without calling a tool, or the user speaks next?"""
    previous = turns[index - 1]
    answered = previous.role == "assistant" and not previous.tool_calls and bool(previous.text)
    return answered or index < len(turns) and turns[index].role == "user"


def live_tokens(turns: Sequence[Turn]) -> int:
    """Tokens of a live context: every turn's text and tool calls (memoized per text)."""
    return sum(turn_tokens(t) for t in turns)
