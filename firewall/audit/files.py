"""Logs that keep records as a list or a JSONL file, queried by scanning them; the errors every
file-backed log raises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


# the schema and its migrations, shared with the PostgreSQL log
from ..errors import AuditError
from .keys import os_storage_error, installation_key, literal_hash
from .records import AuditRecord, LiteralOutcome, RecordSummary, redacted_record


class KeyedLog:
    key: bytes | None  # None: installation_key(), resolved on first use

    def _key(self) -> bytes:
        if self.key is None:
            self.key = installation_key()
        return self.key


class _ScanningLog(KeyedLog):
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
        return one_record(self, id_or_prefix, matches)

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


def one_record(log: Any, prefix: str, matches: list[Any]) -> Any:
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
        self.records.append(redacted_record(record, self._key()))

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
        line = (redacted_record(record, self._key()).model_dump_json() + "\n").encode("utf-8")
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
            raise os_storage_error(self.path, exc, "writing a record") from exc

    def _records(self) -> Iterator[AuditRecord]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_storage_error(self.path, exc, "reading") from exc
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
