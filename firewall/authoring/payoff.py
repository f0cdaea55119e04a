"""What a rule pays in recorded conversations: the strings it pins that a later tool call
uses (``firewall eval``'s gold), per rule, as precision; ``suggest`` proposes only rules that
pay (``MIN_PRECISION``), and reports each one's payoff.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..evaluation.gold import FRACTIONS, cut_points, gold_set
from ..extraction.extract import Extractor
from ..extraction.packs import Pack
from ..turns import Conversation


MIN_PRECISION = 0.5  # a rule is proposed only if more than this share of what it pins is gold


@dataclass(slots=True)
class Payoff:
    """What a rule pins in the mined conversations, compacted as ``firewall eval`` compacts
    them: each distinct string it extracts counts once per conversation if it appears at or
    before one of the compaction points, and is *gold* when, at such a point, a later tool
    call uses it (``gold.gold_set``)."""

    gold: int = 0
    pinned: int = 0
    conversations: set[str] = field(default_factory=set)  # those where it pins gold

    @property
    def precision(self) -> float:
        return self.gold / self.pinned if self.pinned else 0.0

    def __str__(self) -> str:
        return (f"precision {self.precision:.0%}: {self.gold} of the {self.pinned} strings it "
                f"pins are used by a tool call after a compaction")


def payoffs(conversations: Iterable[Conversation], pack: Pack,
            fractions: Iterable[float] = FRACTIONS) -> dict[str, Payoff]:
    """Each rule of ``pack`` (by qualified id), with compaction after message
    ``floor(f * n)`` for each fraction ``f`` (``firewall eval``'s cut points)."""
    task = PayoffTask(pack, tuple(fractions))
    extractor = task.setup()
    return add_payoffs(pack, (task(extractor, "", c) for c in conversations))


def add_payoffs(pack: Pack, per_conversation: Iterable[tuple[str, dict[str, list[int]]]]
                ) -> dict[str, Payoff]:
    """The rules' payoffs summed over ``PayoffTask``'s per-conversation counts."""
    out = {qid: Payoff() for qid in pack.qualified_ids()}
    for conversation_id, counts in per_conversation:
        for qid, (pinned, gold) in counts.items():
            out[qid].pinned += pinned
            out[qid].gold += gold
            if gold:
                out[qid].conversations.add(conversation_id)
    return out


@dataclass(frozen=True)
class PayoffTask:
    """One conversation's ``[pinned, gold]`` per rule of ``pack``: the map of ``payoffs``
    (``distributed`` runs it on Dask workers)."""

    pack: Pack
    fractions: tuple[float, ...]

    def setup(self) -> Extractor:
        return Extractor([self.pack])

    def __call__(self, extractor: Extractor, source: str, conversation: Conversation
                 ) -> tuple[str, dict[str, list[int]]]:
        counts: dict[str, list[int]] = {}
        first: dict[str, dict[str, int]] = {}  # rule -> value -> turn it is first pinned at
        for index, turn in enumerate(conversation.turns):
            for lit in extractor.scan_turn(turn, index).literals:
                first.setdefault(lit.rule, {}).setdefault(lit.value, index)
        if not first:
            return conversation.id, counts
        cuts = [(k, {g.literal for g in gold_set(conversation, k)})
                for _f, k in cut_points(len(conversation.turns), self.fractions)]
        for qid, values in first.items():
            for value, turn in values.items():
                after = [gold for k, gold in cuts if turn <= k]
                if after:
                    count = counts.setdefault(qid, [0, 0])
                    count[0] += 1
                    count[1] += any(value in gold for gold in after)
        return conversation.id, counts
