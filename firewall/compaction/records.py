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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import PydanticSerializationError

from ..audit import (Attempt, AuditRecord, LiteralOutcome, PackRef, VerdictSummary,
                    escape_surrogates, installation_key)
from ..extraction.confusables import mixed_script
from ..errors import AuditError
from .ledger import LITERAL_MAX_CHARS, Eviction, Ledger
from .span_uses import occurring
from ..literals import Literal, SecretIndex
from ..tokens import count_tokens
from .validate import Verdict, occurs


IN_SUMMARY, IN_VERBATIM = 1, 2  # bits of ``occurring`` in ``literal_outcomes``


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
    reply: str | None = None  # the summary as the summarizer wrote it (placeholders unrestored)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems and self.verdict is not None \
            and self.verdict.ok


def audit_key(audit: Any) -> bytes:
    """The log's own hashing key when it has one, so its find_literal lookups match."""
    if audit is None:
        return b"unused"
    return getattr(audit, "key", None) or installation_key()


def present(values: Iterable[str], texts: dict[int, str]) -> dict[str, int]:
    """For each value held by one of ``texts`` as the validator's ``present`` means it (not
    glued to a letter or digit), the OR of those texts' bits (keys of ``texts``). One pass over
    each text finds the bytes for every value (a search per value costs values x text); the
    boundaries are checked only where it found them."""
    found = {}
    for value, bits in occurring(values, texts).items():
        held = sum(bit for bit, text in texts.items() if bits & bit and occurs(text, value))
        if held:
            found[value] = held
    return found


def held_values(ledger: Ledger, texts: Sequence[str]) -> set[str]:
    """The ledger's values that one of ``texts`` holds (as ``present`` means it)."""
    return set(present(ledger.values(), {1 << i: text for i, text in enumerate(texts)}))


def literal_outcomes(ledger: Ledger, evicted: Iterable[Eviction], *, key: bytes,
                     summary: str | None, verdict: Verdict | None, compacted: bool,
                     verbatim: str = "", repaired: bool = False, opaque: bool = False,
                     injected: bool | None = None,
                     unpinned: Iterable[Literal] = ()) -> list[LiteralOutcome]:
    """``verbatim``: the text the model still sees unchanged besides summary and ledger;
    ``injected``: whether the ledger block was placed in the context (default: if compacted);
    ``unpinned``: literals too long to pin (``LITERAL_MAX_CHARS``), each reported."""
    injected = compacted if injected is None else injected
    mutated: dict[str, Any] = {f.value: f for f in (verdict.mutated if verdict else ())}
    secrets = SecretIndex([e.value for e in ledger.entries if e.sensitive])
    evicted, unpinned = list(evicted), list(unpinned)
    found = present([e.value for e in ledger.entries] + [e.value for e in evicted]
                    + [lit.value for lit in unpinned],
                    {IN_SUMMARY: summary or "", IN_VERBATIM: verbatim})

    outcomes: list[dict[str, Any]] = []  # LiteralOutcome.of's arguments, validated at once
    pinned = [(e.value, e.rule, e.role, e.first_seen, e.sensitive, None) for e in ledger.entries]
    dropped = [(e.value, e.rule, e.role, e.turn or 0, e.sensitive, e.reason) for e in evicted]
    for value, rule, role, turn, sensitive, eviction in pinned + dropped:
        # a value that contains a secret, or is a piece of one, is stored hashed too
        sensitive = sensitive or secrets.touches(value)
        summarized = bool(found.get(value, 0) & IN_SUMMARY)
        tail = bool(found.get(value, 0) & IN_VERBATIM)
        finding = mutated.get(value)
        if opaque and eviction is None:
            status = "opaque"
        elif finding is not None:
            status = "mutated_repaired" if repaired else "mutated_unrepaired"
        elif summarized:
            status = "in_summary"
        elif tail or not compacted:
            status = "kept_verbatim"
        else:
            status = "reinjected" if eviction is None else "evicted"
        details = [_mutation(finding, sensitive, secrets)] if finding else []
        if eviction is not None:
            details.append(f"evicted from the ledger ({eviction})")
        outcomes.append(dict(
            value=value, rule=rule, role=role, turn=max(turn, 0), status=status,
            sensitive=sensitive, in_summary=summarized, in_ledger=injected and eviction is None,
            in_tail=tail, mixed_script=mixed_script(value), detail="; ".join(details) or None))
    for lit in unpinned:
        kept = not compacted or bool(found.get(lit.value, 0) & IN_VERBATIM)
        outcomes.append(dict(
            value=lit.value, rule=lit.rule, role=lit.role, turn=max(lit.turn, 0),
            sensitive=lit.sensitive or secrets.touches(lit.value),
            status="kept_verbatim" if kept else "missing",
            in_summary=bool(found.get(lit.value, 0) & IN_SUMMARY), in_tail=kept,
            mixed_script=mixed_script(lit.value),
            detail=f"not pinned: {len(lit.value)} characters, over the {LITERAL_MAX_CHARS}-"
                   f"character cap on literals; " + (f"turn {lit.turn} kept verbatim" if kept
                                                       else "nothing kept it")))
    return LiteralOutcome.many(outcomes, key=key)


def _mutation(finding: Any, sensitive: bool, secrets: SecretIndex) -> str:
    """What the summary wrote instead of a literal; for a secret, or a near miss holding one,
    its length and the kind of edit only: a near miss of a secret is most of the secret."""
    wrote = finding.resembles or ""
    if sensitive or secrets.touches(wrote):
        return f"summary wrote a {len(wrote)}-character near miss ({finding.reason})"
    return f"summary wrote {wrote!r} ({finding.reason})"


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
                 key: bytes | None = None, block: str | None = None,
                 unpinned: Iterable[Literal] = ()) -> AuditRecord:
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
                                  opaque=opaque, injected=injected, unpinned=unpinned),
        attempts=attempt_records(attempts, summarizer=summarizer or vendor_path, key=key,
                                 sensitive={e.value for e in ledger.entries if e.sensitive}),
        outcome="compacted" if compacted else "uncompacted", error=error,
        placeholders=bool(getattr(fw, "placeholders", False)))


def write_record(audit: Any, record: AuditRecord) -> str | None:
    """Write to ``audit``; a failed write never undoes the compaction: it is returned, to report.

    A record holding a lone surrogate (from JSON such as ``"\\ud800"`` in the conversation)
    cannot be encoded as UTF-8 by any sink: it is written again with each one escaped as the
    text ``\\udXXX`` (hashes keep the exact value, so ``find_literal`` still finds it)."""
    if audit is None:
        return None
    try:
        try:
            audit.write(record)
        except (UnicodeEncodeError, PydanticSerializationError):
            audit.write(_escaped(record))
    except AuditError as exc:
        return str(exc)
    except (UnicodeEncodeError, PydanticSerializationError) as exc:
        return f"the record cannot be encoded: {exc}"
    return None


def _escaped(record: AuditRecord) -> AuditRecord:
    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return escape_surrogates(node)
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return AuditRecord.model_validate(walk(record.model_dump()))
