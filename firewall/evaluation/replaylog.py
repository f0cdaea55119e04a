"""What ``firewall replay`` writes and ``firewall report`` reads: one JSON line per conversation.

A replay drives a recorded conversation as a harness would (compacting whenever the live context
crosses the watermark) and measures each compaction against the rest of the recording. These
models are the contract between the two commands; both validate against them.
"""

from __future__ import annotations

from typing import Literal as TypingLiteral

from pydantic import BaseModel, ConfigDict, Field

# where a load-bearing literal stands after a compaction, in the composed context
Fate = TypingLiteral["in_summary", "in_ledger", "kept_verbatim", "lost"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GoldFate(_Strict):
    """One load-bearing literal of a compaction's span (``eval``'s gold definition)."""

    value: str = Field(description="the exact literal; '[sensitive]' for a secret")
    rule: str | None = Field(None, description="the rule that pinned it, if any did")
    fate: Fate
    uses_after: int = Field(description="how often the rest of the recording uses it")
    bare: bool = Field(False, description=(
        "lost as written, but the composed context holds it without the punctuation that "
        "ends it ('L031' for the gold token 'L031:'); still counted lost"))
    archived: bool = Field(False, description=(
        "lost from the context, but one `recall` call away: a value an archive of the "
        "compactions so far holds is it or holds it"))


class ReplayCompaction(_Strict):
    compaction: int = Field(description="1-based number within the conversation")
    k: int = Field(description="index in the recording of the last message the compaction covered")
    at_message: int = Field(description="index of the recorded message whose arrival fired it")
    trigger: str = Field(description="reactive | preemptive")
    tokens_before: int = Field(description="live context tokens when it fired")
    tokens_after: int = Field(description="live context tokens of the composed context")
    span_tokens: int
    ledger_tokens: int
    compacted: bool = Field(description="False when the firewall failed closed and kept the span")
    attempts: int
    reasks: int
    pinned: int = Field(description="literals in the ledger block")
    in_summary: int = Field(description="pinned literals the summary also wrote")
    evicted: int = Field(description="literals the ledger budget left out")
    gold: int = Field(description="load-bearing literals of the span")
    lost: int = Field(description="gold literals the composed context no longer holds")
    recall_context: float | None = Field(
        description="share of gold in summary + ledger + kept turns; None when gold is 0")
    recall_ledger: float | None = Field(description="share of gold in the ledger alone")
    rereads: int | None = Field(
        None, description="tool calls after the boundary re-fetching what the span held")
    losses: list[GoldFate] = Field(default_factory=list,
                                   description="gold literals lost, worst (most used) first")
    # added by firewall replay (optional: older lines validate): the ID-like part of the gold
    gold_id_like: int | None = Field(
        None, description="ID-like gold: 4+ characters with a digit, / or @ (as eval)")
    recall_context_id_like: float | None = Field(
        None, description="share of the ID-like gold in summary + ledger + kept turns")
    recall_ledger_id_like: float | None = Field(
        None, description="share of the ID-like gold in the ledger alone")
    # a Claude Code session file replayed: what the hooks give the agent at this compaction
    recall_hooks: float | None = Field(
        None, description="share of gold in summary + the hooks' block + kept turns (the "
                          "pre-compact, post-compact and session-start handlers fired on the "
                          "session file as Claude Code would have written it); None when the "
                          "hooks were not driven")
    recall_hooks_id_like: float | None = Field(
        None, description="share of the ID-like gold in summary + the hooks' block + kept turns")
    hooks_tokens: int | None = Field(
        None, description="tokens of the block the session-start hook re-injects")
    one_call_id_like: int | None = Field(
        None, description="ID-like gold lost from the context but in the archive (one recall "
                          "call away); in context + one call away + lost = gold_id_like")
    one_call_token_id_like: int | None = Field(
        None, description="of one_call_id_like, the gold only a token the archive's token tier "
                          "swept holds (no rule's value)")


class ReplayConversation(_Strict):
    id: str
    source: str = Field(description="the file it was read from")
    messages: int
    window: int
    watermark: float
    live_tokens: list[int] = Field(
        description="live context tokens after each recorded message was appended")
    compactions: list[ReplayCompaction] = Field(default_factory=list)
    # optional: lines written before it was added validate
    skipped: int = Field(0, description="times the trigger fired but no compaction was due: "
                                        "too little fresh material (firewall.trigger.Decision)")
