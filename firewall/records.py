"""Audit records of a compaction, built one way for every path: the guard, vendor wrappers, hooks.

Each pinned literal gets one status, by precedence: ``opaque`` (the summary cannot be read),
``mutated_repaired`` / ``mutated_unrepaired`` (the summary wrote a near miss), ``in_summary``,
``kept_verbatim`` (in text the model still sees verbatim: the tail, kept turns, or the whole
conversation when nothing was compacted), else ``reinjected`` (only the ledger carries it).
A literal the budget evicted from the ledger gets the same precedence, ending in ``evicted``
instead of ``reinjected``: only one the context no longer holds is ``evicted`` (the eviction is
in its ``detail`` either way), and it keeps the turn of its first sighting. "In" the summary or
the tail means as the validator's ``present``: ``100`` is not in ``1000``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .audit import (Attempt, AuditRecord, LiteralOutcome, PackRef, VerdictSummary,
                    installation_key)
from .confusables import mixed_script
from .errors import AuditError
from .ledger import Eviction, Ledger
from .tokens import count_tokens
from .validate import Verdict, occurs


@dataclass
class AttemptResult:
    """One summarizer call and what the validator made of it."""

    number: int
    summary: str | None
    verdict: Verdict | None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    model: str | None = None
    problems: list[str] = field(default_factory=list)  # damaged placeholders, length
    oversize: bool = False  # longer than the span it would replace: never used

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems and self.verdict is not None \
            and self.verdict.ok


def audit_key(audit: Any) -> bytes:
    """The log's own hashing key when it has one, so its find_literal lookups match."""
    if audit is None:
        return b"unused"
    return getattr(audit, "key", None) or installation_key()


def literal_outcomes(ledger: Ledger, evicted: Iterable[Eviction], *, key: bytes,
                     summary: str | None, verdict: Verdict | None, compacted: bool,
                     verbatim: str = "", repaired: bool = False, opaque: bool = False,
                     injected: bool | None = None) -> list[LiteralOutcome]:
    """``verbatim``: the text the model still sees unchanged besides summary and ledger;
    ``injected``: whether the ledger block was placed in the context (default: if compacted)."""
    injected = compacted if injected is None else injected
    mutated: dict[str, Any] = {f.value: f for f in (verdict.mutated if verdict else ())}
    secrets = [e.value for e in ledger.entries if e.sensitive]
    outcomes: list[dict[str, Any]] = []  # LiteralOutcome.of's arguments, validated at once
    pinned = [(e.value, e.rule, e.role, e.first_seen, e.sensitive, None) for e in ledger.entries]
    dropped = [(e.value, e.rule, e.role, e.turn or 0, e.sensitive, e.reason) for e in evicted]
    for value, rule, role, turn, sensitive, eviction in pinned + dropped:
        # present means as the validator means it: not glued to a letter or digit
        in_summary = summary is not None and occurs(summary, value)
        in_tail = occurs(verbatim, value)
        finding = mutated.get(value)
        if opaque and eviction is None:
            status = "opaque"
        elif finding is not None:
            status = "mutated_repaired" if repaired else "mutated_unrepaired"
        elif in_summary:
            status = "in_summary"
        elif in_tail or not compacted:
            status = "kept_verbatim"
        else:
            status = "reinjected" if eviction is None else "evicted"
        details = [f"summary wrote {finding.resembles!r} ({finding.reason})"] if finding else []
        if eviction is not None:
            details.append(f"evicted from the ledger ({eviction})")
        outcomes.append(dict(
            value=value, rule=rule, role=role, turn=max(turn, 0), status=status,
            # a value that contains a secret is stored hashed too
            sensitive=sensitive or any(s in value for s in secrets),
            in_summary=in_summary, in_ledger=injected and eviction is None, in_tail=in_tail,
            mixed_script=mixed_script(value), detail="; ".join(details) or None))
    return LiteralOutcome.many(outcomes, key=key)


def attempt_records(attempts: Iterable[AttemptResult], *, summarizer: str, key: bytes,
                    sensitive: set[str]) -> list[Attempt]:
    return [Attempt(
        number=a.number, summarizer=summarizer, model=a.model, usage=a.usage,
        duration_ms=a.duration_ms, error=a.error or ("; ".join(a.problems) or None),
        verdict=VerdictSummary.of(len(a.verdict.present), [f.value for f in a.verdict.missing],
                                  [f.value for f in a.verdict.mutated], key=key,
                                  sensitive=sensitive) if a.verdict else None)
        for a in attempts]


def build_record(fw: Any, ledger: Ledger, *, vendor_path: str, compaction: int,
                 span: tuple[int, int] | None, turns_compacted: int, tokens_before: int,
                 summary: str | None, verdict: Verdict | None, evicted: Iterable[Eviction],
                 attempts: Iterable[AttemptResult], compacted: bool, error: str | None,
                 verbatim: str = "", tokens_after: int | None = None, repaired: bool = False,
                 opaque: bool = False, summarizer: str | None = None,
                 injected: bool | None = None, audit: Any = None,
                 key: bytes | None = None, block: str | None = None) -> AuditRecord:
    """The record of one compaction; ``key`` hashes sensitive literals (default: the key of
    ``audit``, itself defaulting to ``fw.audit``); ``block``: ``ledger.render()`` if the caller
    has it already."""
    if key is None:
        key = audit_key(audit if audit is not None else fw.audit)
    if block is None:
        block = ledger.render()
    if tokens_after is None:
        tokens_after = count_tokens(block) + count_tokens(verbatim) + \
            (count_tokens(summary) if summary else 0)
    return AuditRecord(
        conversation_id=ledger.conversation_id, compaction=compaction,
        packs=[PackRef(name=p.name, version=p.version) for p in fw.packs], policy=fw.policy,
        vendor_path=vendor_path, span=span, turns_compacted=turns_compacted if compacted else 0,
        tokens_before=tokens_before, tokens_after=tokens_after if compacted else tokens_before,
        ledger_tokens=count_tokens(block),
        literals=literal_outcomes(ledger, evicted, key=key, summary=summary, verdict=verdict,
                                  compacted=compacted, verbatim=verbatim, repaired=repaired,
                                  opaque=opaque, injected=injected),
        attempts=attempt_records(attempts, summarizer=summarizer or vendor_path, key=key,
                                 sensitive={e.value for e in ledger.entries if e.sensitive}),
        outcome="compacted" if compacted else "uncompacted", error=error,
        placeholders=bool(getattr(fw, "placeholders", False)))


def write_record(audit: Any, record: AuditRecord) -> str | None:
    """Write to ``audit``; a failed write never undoes the compaction: it is returned, to report."""
    if audit is None:
        return None
    try:
        audit.write(record)
    except AuditError as exc:
        return str(exc)
    return None
