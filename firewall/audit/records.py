"""What a log stores: the audit record of a compaction (its literals' outcomes, its attempts and
verdicts), a record's summary for listings, and the interface every log offers.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, Literal as TypingLiteral, Protocol, get_args, runtime_checkable

from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, field_validator,
                      model_validator)

# the schema and its migrations, shared with the PostgreSQL log
from ..turns import Role
from .keys import HASH_PREFIX, literal_hash


# What each status of a literal means; a literal of a record has exactly one. Reports and
# listings count literals by these names, in this order (``firewall compact``, ``audit list``).
STATUS_MEANINGS: dict[str, str] = {
    "in_summary": "byte-for-byte in the summary",
    "reinjected": "in neither summary nor tail: only the re-injected ledger carries it",
    "mutated_repaired": "the summary held a near miss; a retry or the ledger restored it",
    "mutated_unrepaired": "the summary holds a near miss and nothing restored the exact bytes",
    "evicted": "dropped from the ledger by the token budget, and in neither summary nor tail",
    "kept_verbatim": "in the turns kept verbatim (the tail), untouched by the compaction",
    "opaque": "a vendor summary that could not be checked; the ledger was re-injected",
    "missing": "lost: in none of summary, ledger or tail",
}
Status = TypingLiteral[
    "in_summary", "reinjected", "mutated_repaired", "mutated_unrepaired", "evicted",
    "kept_verbatim", "opaque", "missing"]
STATUSES: tuple[str, ...] = get_args(Status)
Outcome = TypingLiteral["compacted", "uncompacted", "refused"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PackRef(_Model):
    name: str
    version: str


class LiteralOutcome(_Model):
    """Where one ledger literal ended up after a compaction.

    ``value`` is ``None`` exactly when ``sensitive``; ``value_hash`` is always set. Build one with
    ``LiteralOutcome.of(value, key=..., ...)`` so a sensitive value is hashed and dropped for you.
    ``detail`` must never contain a sensitive value (``of`` masks it if it does).
    ``in_ledger``: still pinned after the compaction (the injected block writes it unless the
    summary or the tail holds it: ``in_summary``, ``in_tail``).
    """

    value: str | None
    value_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    rule: str
    role: Role
    turn: int = Field(ge=0)
    status: Status
    in_summary: bool = False
    in_ledger: bool = False
    in_tail: bool = False
    sensitive: bool = False
    detail: str | None = None
    mixed_script: bool = Field(False, description="look-alike letters beside Latin ones "
                                                  "(АBC123X with a Cyrillic А): a spoofing signal")

    @model_validator(mode="after")
    def _value_iff_not_sensitive(self) -> LiteralOutcome:
        if self.sensitive and self.value is not None:
            raise ValueError("a sensitive literal is stored hashed: value must be None")
        if not self.sensitive and self.value is None:
            raise ValueError("value is required unless the literal is sensitive")
        return self

    @classmethod
    def of(cls, value: str, *, key: bytes, sensitive: bool = False,
           **fields: Any) -> LiteralOutcome:
        return cls(**_outcome_fields(value, key=key, sensitive=sensitive, **fields))

    @classmethod
    def many(cls, outcomes: Iterable[dict[str, Any]], *, key: bytes) -> list[LiteralOutcome]:
        """``of`` for many at once: each dict holds ``value`` and ``of``'s keyword arguments.
        Validated as one list, which is about twice as fast as one model at a time (a
        compaction's record has a thousand), with the same checks and results."""
        return _OUTCOMES.validate_python([_hashed(dict(o), key) for o in outcomes])


def _outcome_fields(value: str, *, key: bytes, **fields: Any) -> dict[str, Any]:
    return _hashed({"value": value, **fields}, key)


def _hashed(fields: dict[str, Any], key: bytes) -> dict[str, Any]:
    """``fields``, completed in place with the value's hash; a sensitive value is dropped,
    and masked in ``detail``."""
    value = fields["value"]
    fields["value_hash"] = value_hash = literal_hash(value, key)
    sensitive = fields.setdefault("sensitive", False)
    detail = fields.setdefault("detail", None)
    if sensitive:
        fields["value"] = None
        if detail:
            fields["detail"] = detail.replace(value, HASH_PREFIX + value_hash)
    return fields


_OUTCOMES = TypeAdapter(list[LiteralOutcome])


class VerdictSummary(_Model):
    """An attempt's verdict: counts, and which values were missing or mutated (sensitive ones as
    ``hmac:<hash>``)."""

    present: int = Field(ge=0)
    missing: int = Field(ge=0)
    mutated: int = Field(ge=0)
    missing_values: list[str] = []
    mutated_values: list[str] = []

    @classmethod
    def of(cls, present: int, missing: Iterable[str], mutated: Iterable[str], *, key: bytes,
           sensitive: Iterable[str] = ()) -> VerdictSummary:
        secret = set(sensitive)

        def shown(values: Iterable[str]) -> list[str]:
            return [HASH_PREFIX + literal_hash(v, key) if v in secret else v for v in values]

        missing_values, mutated_values = shown(missing), shown(mutated)
        return cls(present=present, missing=len(missing_values), mutated=len(mutated_values),
                   missing_values=missing_values, mutated_values=mutated_values)


class Attempt(_Model):
    """One summarizer call. ``verdict`` is None when the call failed before it could be checked."""

    number: int = Field(ge=1)
    summarizer: str
    model: str | None = None
    verdict: VerdictSummary | None = None
    usage: dict[str, int] = {}
    error: str | None = None
    duration_ms: float = Field(ge=0)

    @field_validator("usage", mode="before")
    @classmethod
    def _token_counts(cls, usage: Any) -> Any:
        # Vendors nest counts (anthropic: cache_creation.ephemeral_5m_input_tokens) and mix in
        # non-counts (service_tier); keep the integers, flattened to dotted keys.
        if not isinstance(usage, dict):
            return usage
        flat: dict[str, int] = {}

        def walk(prefix: str, node: dict[str, Any]) -> None:
            for k, v in node.items():
                name = f"{prefix}{k}"
                if isinstance(v, dict):
                    walk(name + ".", v)
                elif isinstance(v, int) and not isinstance(v, bool):
                    flat[name] = v

        walk("", usage)
        return flat


class AuditRecord(_Model):
    """Everything one compaction did to the literals of one conversation."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex, pattern=r"^[0-9a-f]{32}$")
    conversation_id: str
    compaction: int = Field(ge=1, description="1-based number within the conversation")
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    packs: list[PackRef] = []
    policy: str
    vendor_path: str = Field(description='e.g. "extractive", "anthropic:claude-haiku-4-5", '
                                         '"openai-compatible:MODEL@HOST", "callable:NAME", '
                                         '"anthropic-server", "openai-opaque"')
    span: tuple[int, int] | None = Field(description="first and last turn index compacted")
    turns_compacted: int = Field(ge=0)
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    ledger_tokens: int = Field(ge=0)
    literals: list[LiteralOutcome] = []
    attempts: list[Attempt] = []
    outcome: Outcome
    error: str | None = None
    placeholders: bool = False

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created_at must be timezone-aware")
        return value.astimezone(timezone.utc)

    @field_validator("span")
    @classmethod
    def _ordered(cls, span: tuple[int, int] | None) -> tuple[int, int] | None:
        if span is not None and not 0 <= span[0] <= span[1]:
            raise ValueError(f"span must be (first, last) with 0 <= first <= last, got {span}")
        return span


class RecordSummary(_Model):
    """One line of ``firewall audit list``: the top-level fields and literal counts by status."""

    id: str
    conversation_id: str
    compaction: int
    created_at: datetime
    policy: str
    vendor_path: str
    outcome: Outcome
    turns_compacted: int
    tokens_before: int
    tokens_after: int
    ledger_tokens: int
    statuses: dict[str, int]

    @classmethod
    def of(cls, record: AuditRecord) -> RecordSummary:
        fields = record.model_dump(include=set(cls.model_fields) - {"statuses"})
        return cls(**fields, statuses=dict(Counter(lit.status for lit in record.literals)))


def redacted_record(record: AuditRecord, key: bytes) -> AuditRecord:
    """Belt and braces: hash any sensitive value a caller left in clear in an attempt verdict."""
    secret = {lit.value_hash for lit in record.literals if lit.sensitive}
    if not secret:
        return record

    def mask(values: list[str]) -> list[str]:
        return [HASH_PREFIX + h if (h := literal_hash(v, key)) in secret else v for v in values]

    attempts = [
        a.model_copy(update={"verdict": a.verdict.model_copy(update={
            "missing_values": mask(a.verdict.missing_values),
            "mutated_values": mask(a.verdict.mutated_values)})}) if a.verdict else a
        for a in record.attempts
    ]
    return record.model_copy(update={"attempts": attempts})


# --------------------------------------------------------------------------- sinks


@runtime_checkable
class AuditSink(Protocol):
    def write(self, record: AuditRecord) -> None: ...


@runtime_checkable
class AuditLog(AuditSink, Protocol):
    """A sink that can also be read back (what ``firewall audit`` needs)."""

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]: ...
    def get(self, id_or_prefix: str) -> AuditRecord: ...
    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]: ...
    def export(self) -> Iterator[AuditRecord]: ...
    def next_compaction_number(self, conversation_id: str) -> int: ...
