"""Audit records (which literal survived which compaction, and where) and the logs keeping them.

Every compaction leaves one ``AuditRecord``. A sink has one method, ``write(record)``; the
built-in logs also answer the questions the ``firewall audit`` command asks:

    SQLiteAuditLog(path=None)   default; FIREWALL_AUDIT_DB, else <user state dir>/audit.db
    JSONLAuditLog(path)         one JSON line per record, queried by scanning the file
    MemoryAuditLog()            a list, for tests and for callers that persist records themselves

Sensitive literals are never stored in clear: only an HMAC-SHA256 of the value under a
per-installation key (``installation_key()``), so ``find_literal("sk-...")`` still finds them.
Every storage failure is raised as ``AuditError`` naming the file and what to do about it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import json
import operator
import os
import secrets
import sqlite3
import threading
import uuid
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal as TypingLiteral, Protocol, get_args, runtime_checkable

import platformdirs
from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, field_validator,
                      model_validator)

# the schema and its migrations, shared with the PostgreSQL log
from .migrations import (LITERAL_COLUMNS, MIGRATIONS, NUMBER_TAKEN, SUMMARY_COLUMNS,
                           migrations)
from ..errors import AuditError
from .urls import redacted_url, without_passwords
from ..turns import Role

APP_NAME = "literal-firewall"
DB_ENV = "FIREWALL_AUDIT_DB"
KEY_ENV = "FIREWALL_AUDIT_KEY"
KEY_FILE_ENV = "FIREWALL_AUDIT_KEY_FILE"  # for a shared (PostgreSQL) log: see shared_key
HASH_PREFIX = "hmac:"  # how a sensitive value is written where a value would otherwise go

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


# --------------------------------------------------------------------------- hashing


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME))


def installation_key() -> bytes:
    """The HMAC key of this installation: ``FIREWALL_AUDIT_KEY``, else the ``key`` file.

    The key is the text itself (UTF-8), so copying the file's content into the env var
    reproduces the same hashes on another machine. The file is created on first use, 0600.
    """
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return env.encode()
    path = state_dir() / "key"
    try:
        if not path.exists():
            _create_key(path)
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise _os_error(path, exc, "reading the audit key") from exc
    if not key:
        raise AuditError(f"audit key {path} is empty: delete it (a new one is created) "
                         f"or set {KEY_ENV}")
    return key.encode()


def shared_key() -> bytes:
    """The HMAC key of a log shared by many machines (PostgreSQL): ``FIREWALL_AUDIT_KEY``, else
    the file named by ``FIREWALL_AUDIT_KEY_FILE``. Never created here, and never stored in the
    log: a key made up on one machine would hash the same secret differently from the others,
    and ``audit literal`` would silently miss it."""
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return env.encode()
    name = os.environ.get(KEY_FILE_ENV, "").strip()
    if not name:
        raise AuditError(
            f"a shared audit log needs the key its writers hash secrets with, the same on every "
            f"machine and kept outside the database: set {KEY_ENV} to it, or {KEY_FILE_ENV} to "
            f"a file holding it (make one with: python -c 'import secrets; "
            f"print(secrets.token_hex(32))')")
    path = Path(name).expanduser()
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AuditError(f"audit key file {path} ({KEY_FILE_ENV}) cannot be read: "
                         f"{exc.strerror or exc}") from exc
    if not key:
        raise AuditError(f"audit key file {path} ({KEY_FILE_ENV}) is empty")
    return key.encode()


def _create_key(path: Path) -> None:
    # Write a private temp file, then hard-link it into place: link fails if another process
    # got there first, so concurrent first uses agree on one key and nobody reads a half file.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links: last writer wins, still never half a key
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (from JSON such as ``"\\ud800"``) written as the
    text ``\\ud800``, which UTF-8 can encode: how a log stores such a value, and how the CLI
    prints it (inside a JSON string, the escape reads back as the same value)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=65536)  # every compaction hashes the ledger's values again
def literal_hash(value: str, key: bytes) -> str:
    """Hex HMAC-SHA256 of ``value``: lets a log find a literal without storing it. A lone
    surrogate (from JSON such as ``"\\ud800"``) is hashed as its UTF-8-style bytes rather than
    refused: one bad character must not block a conversation's compaction forever."""
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- records


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


def _redacted(record: AuditRecord, key: bytes) -> AuditRecord:
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


def _hint(path: Path, action: str, reason: str, cause: object) -> AuditError:
    return AuditError(f"audit log {path}: {action} failed: {reason} ({cause})")


def _os_error(path: Path, exc: OSError, action: str) -> AuditError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "the disk is full; free some space or point the log at another disk"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        reason = "it is read-only; fix its permissions or point the log at a writable file"
    else:
        reason = "check the path and that its folder can be created"
    return _hint(path, action, reason, exc.strerror or exc)


class _Keyed:
    key: bytes | None  # None: installation_key(), resolved on first use

    def _key(self) -> bytes:
        if self.key is None:
            self.key = installation_key()
        return self.key


class _ScanningLog(_Keyed):
    """Queries answered by reading every record in write order; subclasses provide ``_records``."""

    def _records(self) -> Iterator[AuditRecord]:
        raise NotImplementedError

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        found = [RecordSummary.of(r) for r in self._records()
                 if conversation_id is None or r.conversation_id == conversation_id]
        found.reverse()  # newest first, as the SQLite log
        return found if limit is None else found[:limit]

    def get(self, id_or_prefix: str) -> AuditRecord:
        matches = [r for r in self._records() if r.id.startswith(id_or_prefix)]
        return _one(self, id_or_prefix, matches)

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        value_hash = literal_hash(value, self._key())
        return [(RecordSummary.of(r), lit) for r in self._records() for lit in r.literals
                if lit.value_hash == value_hash or (lit.value is not None and lit.value == value)]

    def export(self) -> Iterator[AuditRecord]:
        return self._records()

    def next_compaction_number(self, conversation_id: str) -> int:
        return 1 + max((r.compaction for r in self._records()
                        if r.conversation_id == conversation_id), default=0)

    def recall(self, query: Any) -> list[Any]:
        from .archive import NO_ARCHIVE

        raise AuditError(f"audit log {self.path}: {NO_ARCHIVE}")


def _one(log: Any, prefix: str, matches: list[Any]) -> Any:
    if not prefix or len(matches) > 1:
        raise AuditError(f"audit log {log.path}: id prefix {prefix!r} matches several records; "
                         f"give more characters")
    if not matches:
        raise AuditError(f"audit log {log.path}: no record with id {prefix!r}")
    return matches[0]


class MemoryAuditLog(_ScanningLog):
    """Keeps records in ``self.records``; nothing touches the disk."""

    path = ":memory:"

    def __init__(self, *, key: bytes | None = None) -> None:
        self.records: list[AuditRecord] = []
        self.key = key

    def write(self, record: AuditRecord) -> None:
        self.records.append(_redacted(record, self._key()))

    def _records(self) -> Iterator[AuditRecord]:
        return iter(list(self.records))


class JSONLAuditLog(_ScanningLog):
    """One JSON object per line, appended with a single write + fsync (O_APPEND keeps concurrent
    writers' lines whole). A torn last line from a crash is ignored on read."""

    def __init__(self, path: str | os.PathLike[str], *, key: bytes | None = None) -> None:
        self.path = Path(path).expanduser()
        self.key = key

    def __repr__(self) -> str:
        return f"JSONLAuditLog({str(self.path)!r})"

    def write(self, record: AuditRecord) -> None:
        line = (_redacted(record, self._key()).model_dump_json() + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                # A crash may have left a line without its newline; never glue onto it.
                if os.fstat(fd).st_size and _last_byte(self.path) != b"\n":
                    line = b"\n" + line
                while line:  # os.write may write less than asked
                    line = line[os.write(fd, line):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _os_error(self.path, exc, "writing a record") from exc

    def _records(self) -> Iterator[AuditRecord]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _os_error(self.path, exc, "reading") from exc
        for number, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                # A record that starts right but does not parse is the torn line of an
                # interrupted write (later writers start a new line after it): skip it.
                # Anything else is damage the user must see.
                if raw.startswith(_RECORD_START):
                    continue
                raise self._corrupt(number, exc) from exc
            try:
                yield AuditRecord.model_validate(obj)
            except ValueError as exc:
                raise self._corrupt(number, exc) from exc

    def _corrupt(self, number: int, exc: Exception) -> AuditError:
        return AuditError(f"audit log {self.path}:{number}: not an audit record; the file is "
                          f"corrupt or not a literal-firewall log: fix or delete that line "
                          f"({str(exc).splitlines()[0]})")


_RECORD_START = b'{"id":"'  # every line model_dump_json writes begins so: id is the first field


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


# --------------------------------------------------------------------------- SQLite

# Logs holding an idle connection. Every one is closed before os.fork: a child must not inherit
# an open SQLite connection (SQLite's per-process lock bookkeeping would be wrong there, and a
# child's own connections to the file would skip locks it does not hold).
_IDLE_LOGS: weakref.WeakSet[SQLiteAuditLog] = weakref.WeakSet()
_INHERITED: list[sqlite3.Connection] = []  # inherited despite that: kept, never closed


def _close_before_fork() -> None:
    for log in list(_IDLE_LOGS):
        log.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_close_before_fork)


def default_db_path() -> Path:
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else state_dir() / "audit.db"


class SQLiteAuditLog(_Keyed):
    """The default audit log: one SQLite file shared by every process on the machine.

    WAL mode and a busy timeout let several processes write at once; each record (row, literal
    rows, attempt rows) is one ``BEGIN IMMEDIATE`` transaction, so a crash never leaves half of
    one. A connection is opened per call, which makes the object safe across threads and forks;
    one more, idle, is kept open while the log is in use (see ``_keep_open``), so that closing
    the per-call connection does not checkpoint and delete the WAL every time. ``close()``
    drops it; it is also dropped before ``os.fork``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, key: bytes | None = None,
                 busy_timeout: float = 10.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.key = key
        self.busy_timeout = busy_timeout
        self._idle: sqlite3.Connection | None = None  # see _keep_open
        self._reader_conn: sqlite3.Connection | None = None  # see recall
        self._reader_pid = 0
        self._read_only = False  # opened for reading only: see _open_read_only
        self._idle_pid = 0
        self._idle_lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _os_error(self.path, exc, "creating the folder") from exc
        self._migrate()
        self._keep_open()

    def _keep_open(self) -> None:
        """Hold one idle connection to the file while this log is in use.

        When the last connection to a WAL database closes, SQLite checkpoints the WAL into the
        database and deletes it: with a connection per call, every record paid for that (about
        6 ms of a ~100k-token compaction's 15 ms write). An idle connection that has read the
        file keeps the per-call ones from being the last; the WAL is then checkpointed by
        SQLite's automatic checkpoint (every 1,000 pages) instead, and when this log is closed
        or collected. It never runs a statement again, so the per-call connections keep all
        their behaviour (a replaced, corrupt, locked or full file is seen by the next call), and
        it holds no transaction, so it never stops a checkpoint. Best effort: if it cannot be
        opened, the log works as before, a little slower.
        """
        pid = os.getpid()
        if self._idle is not None and self._idle_pid == pid:
            return
        with self._idle_lock:
            if self._idle is not None and self._idle_pid == pid:
                return
            if self._idle is not None:  # inherited through a fork that bypassed the hook:
                _INHERITED.append(self._idle)  # never close it here; it is the parent's
                self._idle = None
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout,
                                       isolation_level=None, check_same_thread=False)
                conn.execute("SELECT count(*) FROM _migrations").fetchall()  # opens the WAL
            except (sqlite3.Error, OSError):
                if conn is not None:
                    conn.close()
                return
            self._idle, self._idle_pid = conn, pid
            _IDLE_LOGS.add(self)

    def __del__(self) -> None:
        # at once, not when the cycle collector gets to the connection (sqlite3's statement
        # cache refers back to it): the last close is what checkpoints and removes the WAL
        with contextlib.suppress(Exception):
            self.close()

    def __getstate__(self) -> dict[str, Any]:  # pickled or copied: the idle connection stays
        state = self.__dict__.copy()
        state.update(_idle=None, _idle_pid=0, _idle_lock=None, _reader_conn=None,
                     _reader_pid=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _idle_lock=threading.Lock())

    def close(self) -> None:
        """Close the idle connection (the WAL is checkpointed if no other is open) and the
        recall one; the log stays usable and keeps them open again when next needed."""
        with self._idle_lock:
            reader, self._reader_conn = self._reader_conn, None
            if reader is not None:
                if self._reader_pid == os.getpid():
                    reader.close()
                else:
                    _INHERITED.append(reader)
            conn, self._idle = self._idle, None
            if conn is not None:
                if self._idle_pid == os.getpid():
                    conn.close()
                else:
                    _INHERITED.append(conn)

    def __repr__(self) -> str:
        return f"SQLiteAuditLog({str(self.path)!r})"

    @contextlib.contextmanager
    def _connect(self, action: str, *, read: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection for one call; ``read``: the call only reads, so a log that could only
        be opened read-only (see ``_open_read_only``) serves it."""
        conn = None
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so nothing commits behind
            # our back.
            if read and self._read_only:
                conn = sqlite3.connect(self._read_only_uri, uri=True, timeout=self.busy_timeout,
                                       isolation_level=None)
            else:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout,
                                       isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a committed record
            # survives the application crashing; a power loss or OS crash may lose the last
            # records (never half of one: the WAL stays atomic). FULL fsynced every record.
            conn.execute("PRAGMA synchronous = NORMAL")
            yield conn
        except sqlite3.Error as exc:
            raise self._error(exc, action) from exc
        except OSError as exc:
            raise _os_error(self.path, exc, action) from exc
        finally:
            if conn is not None:
                conn.close()

    def _error(self, exc: sqlite3.Error, action: str) -> AuditError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in text:
            reason = (f"it is corrupt or not a literal-firewall audit database; move it aside "
                      f"(a new one is created) or set {DB_ENV} to another file")
        elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            reason = (f"another process kept it locked for more than {self.busy_timeout:g} s; "
                      f"retry, or raise busy_timeout")
        elif name.startswith("SQLITE_READONLY") or "readonly" in text:
            reason = (f"it is read-only; fix the permissions of the file and its folder or set "
                      f"{DB_ENV} to a writable file")
        elif name.startswith("SQLITE_FULL") or "disk is full" in text:
            reason = f"the disk is full; free some space or set {DB_ENV} to a file on another disk"
        elif name.startswith("SQLITE_CANTOPEN") or "unable to open" in text:
            reason = (f"it cannot be opened; check that its folder exists and is writable, or "
                      f"set {DB_ENV} to another file")
        elif isinstance(exc, sqlite3.IntegrityError):
            reason = "a record with this id is already in the log"
        else:
            reason = "unexpected SQLite error"
        return _hint(self.path, action, reason, text)

    def _migrate(self) -> None:
        try:
            self._apply_migrations()
        except AuditError as exc:
            if not (_cannot_write(exc) and self.path.is_file() and self._open_read_only()):
                raise

    def _open_read_only(self) -> bool:
        """Open a log this process cannot write (read-only file, folder or mount), for reading:
        ``audit list`` must still work there, and a compaction still reports each failed write.
        SQLite cannot open a WAL database read-only unless its -shm file exists or can be
        created, or the file is declared immutable: without a -wal file next to it (which a
        writer would need to create there), the database file holds every committed record,
        so reading it as immutable is exact. True when the log is complete and readable."""
        target = Path(os.path.abspath(self.path)).as_uri()
        for uri in (f"{target}?mode=ro", f"{target}?mode=ro&immutable=1"):
            if uri.endswith("immutable=1") and Path(f"{self.path}-wal").exists():
                break
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout)
                try:
                    applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
                finally:
                    conn.close()
            except sqlite3.Error:
                continue
            if "m001_initial" not in applied:
                return False  # not ours: the first error stands
            unknown = applied - {name for name, _ in MIGRATIONS}
            if unknown:  # its tables may mean what this version cannot read
                raise _newer_schema(self.path, unknown)
            self._read_only, self._read_only_uri = True, uri
            return True
        return False

    def _apply_migrations(self) -> None:
        with self._connect("opening") as conn:
            # Persistent for the file; lets readers and one writer proceed together.
            conn.execute("PRAGMA journal_mode = WAL")
            # IMMEDIATE: two processes opening a fresh file must not both run m001.
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS _migrations "
                             "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
                applied = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
                unknown = applied - {name for name, _ in MIGRATIONS}
                if unknown:
                    raise _newer_schema(self.path, unknown)
                for name, statements in migrations("sqlite"):
                    if name in applied:
                        continue
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO _migrations VALUES (?, ?)",
                                 (name, datetime.now(timezone.utc).isoformat()))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a failed COMMIT (disk full) has already rolled back
                    conn.execute("ROLLBACK")
                raise

    # -- writing

    def write(self, record: AuditRecord) -> None:
        """Write one record. Its compaction number is unique in its conversation: if another
        process took it meanwhile, the record (and ``record``) gets the next free one."""
        written = _redacted(record, self._key())
        self._keep_open()
        with self._connect("writing a record") as conn:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now, so busy_timeout applies
            try:
                try:
                    _insert_record(conn, written)
                except sqlite3.IntegrityError as exc:
                    if NUMBER_TAKEN not in str(exc):
                        raise
                    # the write lock is held: the next number stays free until COMMIT
                    (last,) = conn.execute(
                        "SELECT max(compaction) FROM records WHERE conversation_id = ?",
                        (written.conversation_id,)).fetchone()
                    written = written.model_copy(update={"compaction": last + 1})
                    _insert_record(conn, written)
                _insert_literals(conn, written)
                _insert_attempts(conn, written)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        record.compaction = written.compaction

    # -- reading

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        where, params = ("", [])
        if conversation_id is not None:
            where, params = "WHERE conversation_id = ?", [conversation_id]
        with self._connect("listing records", read=True) as conn:
            rows = conn.execute(
                f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM records {where} "
                f"ORDER BY seq DESC LIMIT ?", [*params, -1 if limit is None else limit]).fetchall()
            return self._summaries(conn, rows)

    def get(self, id_or_prefix: str) -> AuditRecord:
        with self._connect("reading a record", read=True) as conn:
            rows = conn.execute("SELECT json FROM records WHERE substr(id, 1, ?) = ? LIMIT 2",
                                (len(id_or_prefix), id_or_prefix)).fetchall()
            return _record(conn, _one(self, id_or_prefix, rows)["json"])

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        # By hash, so sensitive literals are found without being stored; by value too, so
        # records written under another key are still found for non-sensitive literals.
        value_hash = literal_hash(value, self._key())
        with self._connect("searching literals", read=True) as conn:
            rows = conn.execute(
                f"SELECT {', '.join('l.' + c for c in LITERAL_COLUMNS)}, "
                f"{', '.join('r.' + c for c in SUMMARY_COLUMNS)} "
                "FROM literals l JOIN records r ON r.id = l.record_id "
                "WHERE l.value_hash = ? OR l.value = ? ORDER BY r.seq, l.position",
                (value_hash, escape_surrogates(value))).fetchall()
            summaries = {s.id: s for s in self._summaries(conn, rows)}
        return [(summaries[row["id"]], LiteralOutcome(**{c: row[c] for c in LITERAL_COLUMNS}))
                for row in rows]

    def export(self) -> Iterator[AuditRecord]:
        with self._connect("exporting", read=True) as conn:
            for row in conn.execute("SELECT json FROM records ORDER BY seq"):
                yield _record(conn, row["json"])

    def next_compaction_number(self, conversation_id: str) -> int:
        self._keep_open()
        with self._connect("reading", read=True) as conn:
            row = conn.execute("SELECT max(compaction) FROM records WHERE conversation_id = ?",
                               (conversation_id,)).fetchone()
        return (row[0] or 0) + 1

    # -- the archive (firewall.archive): every literal a compaction extracted

    def write_archive(self, conversation_id: str, compaction: int, entries: list[Any],
                      limits: Any = None) -> Any:
        """Add a compaction's ``ArchiveEntry`` list to its conversation's archive (one
        transaction); returns ``archive_sqlite.ArchiveWrite``."""
        from . import archive_sqlite
        from .archive import ArchiveLimits

        self._keep_open()
        with self._connect("writing the archive") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = archive_sqlite.write(conn, conversation_id, compaction, entries,
                                            limits or ArchiveLimits())
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return done

    def recall(self, query: Any) -> list[Any]:
        """The archive's best ``ArchiveHit`` list for an ``archive.Query``. Recalls share one
        read connection, kept open: its page cache holds the index pages a recall reads (a
        fresh connection per call read them again each time: most of a recall's time). Each
        recall is its own read transaction, so it sees every record committed before it."""
        from . import archive_sqlite

        with self._idle_lock:
            conn = self._reader_conn
            if conn is None or self._reader_pid != os.getpid():
                try:
                    uri = self._read_only_uri if self._read_only else None
                    conn = sqlite3.connect(uri or self.path, uri=bool(uri),
                                           timeout=self.busy_timeout, isolation_level=None,
                                           check_same_thread=False)
                    conn.row_factory = sqlite3.Row
                    conn.execute("PRAGMA query_only = ON")
                except sqlite3.Error as exc:
                    raise self._error(exc, "searching the archive") from exc
                self._reader_conn, self._reader_pid = conn, os.getpid()
                _IDLE_LOGS.add(self)
            try:
                return archive_sqlite.recall(conn, query)
            except sqlite3.Error as exc:
                self._reader_conn = None
                conn.close()
                raise self._error(exc, "searching the archive") from exc

    def archive_count(self, conversation_id: str) -> int:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.count(conn, conversation_id)

    def archived_values(self, conversation_id: str) -> list[str]:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.values(conn, conversation_id)

    def archive_dropped(self, conversation_id: str) -> list[dict[str, Any]]:
        from . import archive_sqlite

        with self._connect("reading the archive", read=True) as conn:
            return archive_sqlite.dropped(conn, conversation_id)

    def _summaries(self, conn: sqlite3.Connection,
                   rows: list[sqlite3.Row]) -> list[RecordSummary]:
        ids = list(dict.fromkeys(row["id"] for row in rows))
        counts: dict[str, dict[str, int]] = {i: {} for i in ids}
        if ids:
            marks = ", ".join("?" * len(ids))
            for rid, status, n in conn.execute(
                    f"SELECT record_id, status, count(*) FROM literals "
                    f"WHERE record_id IN ({marks}) GROUP BY record_id, status", ids):
                counts[rid][status] = n
        first = {row["id"]: row for row in reversed(rows)}
        return [RecordSummary(**{c: first[i][c] for c in SUMMARY_COLUMNS}, statuses=counts[i])
                for i in ids]


def _newer_schema(path: Path, unknown: set[str]) -> AuditError:
    """A log whose schema has migrations this version does not know: refused, read or write."""
    from .. import __version__

    return AuditError(
        f"audit log {path}: written by a newer literal-firewall (schema migrations "
        f"{', '.join(sorted(unknown))}); this is literal-firewall {__version__}, whose schema "
        f"ends at {MIGRATIONS[-1][0]}; upgrade literal-firewall or set {DB_ENV} to another file")


def _cannot_write(exc: AuditError) -> bool:
    """Did opening fail because this process may not write the file or its folder?"""
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    name = getattr(cause, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM",
                            "SQLITE_AUTH")) or "readonly" in str(cause)


def _insert_record(conn: sqlite3.Connection, record: AuditRecord) -> None:
    first, last = record.span or (None, None)
    created_at = record.model_dump(mode="json", include={"created_at"})["created_at"]
    conn.execute(
        "INSERT INTO records (id, conversation_id, compaction, created_at, policy, vendor_path, "
        "span_first, span_last, turns_compacted, tokens_before, tokens_after, ledger_tokens, "
        f"outcome, error, placeholders, json) VALUES ({', '.join('?' * 16)})",
        (record.id, record.conversation_id, record.compaction, created_at, record.policy,
         record.vendor_path, first, last, record.turns_compacted, record.tokens_before,
         record.tokens_after, record.ledger_tokens, record.outcome, record.error,
         record.placeholders, record.model_dump_json(exclude={"literals"})))


def _record(conn: sqlite3.Connection, text: str) -> AuditRecord:
    """A record from its ``json`` column. Records hold their literals in the ``literals`` rows
    only (written once: they are most of a record's bytes); records written before that
    carry them in the JSON too."""
    data = json.loads(text)
    if "literals" not in data:
        data["literals"] = [
            {c: row[c] for c in LITERAL_COLUMNS} for row in conn.execute(
                f"SELECT {', '.join(LITERAL_COLUMNS)} FROM literals WHERE record_id = ? "
                "ORDER BY position", (data["id"],))]
    return AuditRecord.model_validate(data)


_literal_row = operator.attrgetter(*LITERAL_COLUMNS)  # one C call per row, not 11 getattrs


def _insert_literals(conn: sqlite3.Connection, record: AuditRecord) -> None:
    conn.executemany(
        f"INSERT INTO literals (record_id, position, {', '.join(LITERAL_COLUMNS)}) "
        f"VALUES (?, ?{', ?' * len(LITERAL_COLUMNS)})",
        [(record.id, i, *_literal_row(lit)) for i, lit in enumerate(record.literals)])


def _insert_attempts(conn: sqlite3.Connection, record: AuditRecord) -> None:
    conn.executemany(
        "INSERT INTO attempts (record_id, position, number, summarizer, model, present, missing, "
        "mutated, usage, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(record.id, i, a.number, a.summarizer, a.model,
          *((v.present, v.missing, v.mutated) if (v := a.verdict) else (None, None, None)),
          json.dumps(a.usage), a.error, a.duration_ms)
         for i, a in enumerate(record.attempts)])


DATABASE_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(spec: object) -> bool:
    """Is ``spec`` a database server's URL (a shared log) rather than a file?"""
    return isinstance(spec, str) and spec.lower().startswith(DATABASE_SCHEMES)


def audit_db_spec(spec: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """The log ``spec`` names: itself, else ``FIREWALL_AUDIT_DB``, else None (the default)."""
    return spec if spec is not None else (os.environ.get(DB_ENV) or None)


def open_audit_log(spec: str | os.PathLike[str] | None = None) -> AuditLog:
    """The one place a log is chosen. ``None`` → ``FIREWALL_AUDIT_DB``, else the default SQLite
    log; ``postgresql://...`` → ``PostgresAuditLog`` (the ``postgres`` extra, imported only
    then); ``":memory:"`` → ``MemoryAuditLog``; a path ending in ``.jsonl`` →
    ``JSONLAuditLog``; any other path → ``SQLiteAuditLog``. Raises ``AuditError`` when the log
    cannot be opened: to read a log, that is the answer; to write compactions to one, use
    ``open_audit_sink``."""
    spec = audit_db_spec(spec)
    if spec is None:
        return SQLiteAuditLog()
    if is_database_url(spec):
        try:
            from .postgres import PostgresAuditLog
        except ImportError as exc:
            raise AuditError(f"a PostgreSQL audit log needs psycopg 3: pip install "
                             f"'literal-firewall[postgres]' ({exc})") from exc
        return PostgresAuditLog(str(spec))
    if str(spec) == ":memory:":
        return MemoryAuditLog()
    path = Path(spec).expanduser()
    return JSONLAuditLog(path) if path.suffix.lower() == ".jsonl" else SQLiteAuditLog(path)


def open_audit_sink(spec: str | os.PathLike[str] | None = None) -> AuditLog:
    """``open_audit_log`` for a writer of compactions: a log that cannot be opened now
    (corrupt, unwritable location, full disk) never blocks a compaction; it is opened again
    at each call, and its error is raised there, where a failed write is reported."""
    try:
        return open_audit_log(spec)
    except AuditError as exc:
        return DeferredAuditLog(spec, exc)


class DeferredAuditLog:
    """A log that could not be opened yet. Every call opens it again (so it works once the
    cause is fixed) or raises the ``AuditError`` that says why not: a compaction still
    returns its context and reports the failure in ``audit_error``, as for a failed write."""

    def __init__(self, spec: str | os.PathLike[str] | None, error: AuditError) -> None:
        self.spec, self.error = spec, error
        self._log: AuditLog | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # a repr lands in logs and tracebacks: never with the database's password
        spec = None if self.spec is None else redacted_url(os.fspath(self.spec))
        error = redacted_url(str(self.error))
        if is_database_url(spec):
            error = without_passwords(error, os.fspath(self.spec))
        return f"DeferredAuditLog({spec!r}, not open: {error})"

    @property
    def key(self) -> bytes | None:
        """The key the log hashes with once open (``None``: the installation key), so records
        hashed before it opens are found in it: a shared log's is known without opening it."""
        if self._log is not None:
            return getattr(self._log, "key", None)
        return shared_key() if is_database_url(audit_db_spec(self.spec)) else None

    def opened(self) -> AuditLog:
        with self._lock:
            if self._log is None:
                try:
                    self._log = open_audit_log(self.spec)
                except AuditError as exc:
                    self.error = exc
                    raise
            return self._log

    def write(self, record: AuditRecord) -> None:
        self.opened().write(record)

    def list(self, limit: int | None = 20,
             conversation_id: str | None = None) -> list[RecordSummary]:
        return self.opened().list(limit, conversation_id)

    def get(self, id_or_prefix: str) -> AuditRecord:
        return self.opened().get(id_or_prefix)

    def find_literal(self, value: str) -> list[tuple[RecordSummary, LiteralOutcome]]:
        return self.opened().find_literal(value)

    def export(self) -> Iterator[AuditRecord]:
        return self.opened().export()

    def next_compaction_number(self, conversation_id: str) -> int:
        return self.opened().next_compaction_number(conversation_id)

    def __getattr__(self, name: str) -> Any:  # the archive's methods, where the log has them
        if name in ("write_archive", "recall", "archive_count", "archived_values",
                    "archive_dropped"):
            return getattr(self.opened(), name)
        raise AttributeError(name)


__all__ = [
    "Attempt", "AuditLog", "AuditRecord", "AuditSink", "DeferredAuditLog", "JSONLAuditLog",
    "LiteralOutcome", "MemoryAuditLog", "Outcome", "PackRef", "RecordSummary", "SQLiteAuditLog",
    "Status", "VerdictSummary", "default_db_path", "installation_key", "is_database_url",
    "literal_hash", "open_audit_log", "open_audit_sink", "shared_key",
]
