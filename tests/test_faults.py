"""Faults: concurrent and killed processes on one audit database, a full disk, a corrupt log,
and summarizers that time out, are overloaded or answer garbage.

The contract: the audit database never holds half a record and stays usable; a storage failure
never costs the caller the compaction (``CompactionResult.audit_error`` says what happened); a
summarizer failure leaves the conversation exactly as it was.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from firewall import audit
from firewall.audit import files as audit_files, keys as audit_keys, sqlite as audit_sqlite
from firewall.audit import AuditError, JSONLAuditLog, MemoryAuditLog, SQLiteAuditLog
from firewall.errors import CompactionRefused, SummarizerError
from firewall.compaction.guard import Firewall
from firewall.compaction.ledger import Ledger
from firewall.extraction.packs import load_packs
from firewall.summarizers.base import Summary
from firewall.summarizers.scripted import ScriptedSummarizer

MP = multiprocessing.get_context("fork")
PACK = """name: faults
version: "1"
rules:
  - id: invoice
    kind: regex
    pattern: '\\bINV-\\d{4}-\\d{2}-\\d{5}\\b'
  - id: order
    kind: regex
    pattern: '\\bORD-[A-Z0-9]+-\\d+\\b'
  - id: card
    kind: regex
    pattern: '\\b\\d{4}(?: \\d{4}){3}\\b'
    checksum: luhn
    sensitive: true
"""
INVOICE, CARD = "INV-2025-08-44719", "4242 4242 4242 4242"


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    path = tmp_path_factory.mktemp("packs") / "faults.yaml"
    path.write_text(PACK)
    return load_packs(str(path))


@pytest.fixture(autouse=True)
def audit_key(monkeypatch, tmp_path):
    # never touch the user's state dir; children (fork) inherit the environment
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", "test-key")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def conversation(tag: str = "A", n: int = 1) -> list[dict[str, Any]]:
    order = f"ORD-{tag}-{n}"
    return [
        {"role": "system", "content": "You are a billing agent."},
        {"role": "user", "content": f"Invoice {INVOICE} and order {order}, card {CARD}."},
        {"role": "assistant", "content": f"Looking at {order}."},
        {"role": "user", "content": "Anything else?"},
        {"role": "assistant", "content": "Checking."},
    ]


def big_conversation(tag: str = "A", n: int = 1) -> list[dict[str, Any]]:
    """A compaction with hundreds of literals: a record bigger than the free pages left."""
    messages = conversation(tag, n)  # in an assistant turn: pinned, not required in the summary
    messages[2]["content"] += " " + " ".join(f"ORD-BULK-{i}" for i in range(400))
    return messages


def literals_of(tag: str = "A", n: int = 1) -> list[str]:
    return [INVOICE, f"ORD-{tag}-{n}", CARD]


def context(messages: list[Any]) -> str:
    return json.dumps(messages, ensure_ascii=False)


class Good:
    """Writes every required literal into the summary."""

    def summarize(self, request) -> str:
        return "The user asked about " + ", ".join(r.value for r in request.required) + "."


good_summary = Good()


def row_counts(path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(path) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("records", "literals", "attempts"))


def assert_whole(path: Path) -> list[Any]:
    """Every record's literal and attempt rows are all there, and nothing else is."""
    log = SQLiteAuditLog(path)
    records = list(log.export())
    assert row_counts(path) == (len(records), sum(len(r.literals) for r in records),
                                sum(len(r.attempts) for r in records))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        per_record = dict(conn.execute(
            "SELECT record_id, count(*) FROM literals GROUP BY record_id").fetchall())
    for record in records:
        assert per_record.get(record.id, 0) == len(record.literals)
    return records


# ── concurrent and killed processes ────────────────────────────────────────────────────────

def _compact_many(path: str, packs, worker: int, count: int) -> None:
    fw = Firewall(packs, keep_last=2, audit=path)
    ledger = Ledger.new(f"worker-{worker}")  # the conversation id the records are filed under
    for n in range(1, count + 1):
        result = fw.compact(conversation(f"W{worker}", n), summarizer=good_summary,
                            ledger=ledger)
        assert result.compacted and result.audit_error is None, result.audit_error
        assert result.record.compaction == n
        ledger = result.ledger


def test_concurrent_compacting_processes_leave_every_record_whole(tmp_path, packs):
    path = tmp_path / "audit.db"
    SQLiteAuditLog(path)  # migrated once: the race is on writes
    workers = [MP.Process(target=_compact_many, args=(str(path), packs, w, 15)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0] * 4

    records = assert_whole(path)
    assert len(records) == 60
    for w in range(4):
        mine = [r for r in records if r.conversation_id == f"worker-{w}"]
        assert sorted(r.compaction for r in mine) == list(range(1, 16))
        last = max(mine, key=lambda r: r.compaction)
        # the ledger carried across compactions: every order of this worker, no other worker's
        orders = {lit.value for lit in last.literals if lit.value and lit.value.startswith("ORD")}
        assert orders == {f"ORD-W{w}-{n}" for n in range(1, 16)}
    assert len(SQLiteAuditLog(path).find_literal(CARD)) == 60  # hashed, still found


class _AtOnce:
    """Waits for every process at the summarizer: all have picked a compaction number before
    any writes its record, the race of processes compacting one conversation together."""

    def __init__(self, barrier: Any) -> None:
        self.barrier = barrier

    def summarize(self, request) -> str:
        self.barrier.wait(60)
        return good_summary.summarize(request)


def _compact_at_once(path: str, packs, barrier: Any, results: Any) -> None:
    fw = Firewall(packs, keep_last=2, audit=path, budget_tokens=80)
    result = fw.compact(big_conversation(), summarizer=_AtOnce(barrier))
    assert result.compacted and result.audit_error is None, result.audit_error
    results.put((result.record.id, result.record.compaction,
                 {e.compaction for e in result.ledger.evictions}))


def test_processes_compacting_one_conversation_get_distinct_numbers(tmp_path, packs):
    path, count = tmp_path / "audit.db", 8
    SQLiteAuditLog(path)
    barrier, results = MP.Barrier(count), MP.Queue()
    workers = [MP.Process(target=_compact_at_once, args=(str(path), packs, barrier, results))
               for _ in range(count)]
    for p in workers:
        p.start()
    reported = [results.get(timeout=120) for _ in workers]
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0] * count

    logged = {r.id: r.compaction for r in assert_whole(path)}
    assert sorted(logged.values()) == list(range(1, count + 1))
    for record_id, number, evictions in reported:  # each process learned its number
        assert logged[record_id] == number and evictions == {number}


def test_a_taken_number_is_refused_by_the_log_itself(tmp_path, packs):
    path = tmp_path / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path)
    first = fw.compact(conversation(), summarizer=good_summary)
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="taken"):
        conn.execute(_COPY_RECORD, (first.record.id,))


# a second row with the same conversation and compaction number as record ?
_COPY_RECORD = (
    "INSERT INTO records SELECT NULL, substr('f' || id, 1, 32), conversation_id, compaction, "
    "created_at, policy, vendor_path, span_first, span_last, turns_compacted, tokens_before, "
    "tokens_after, ledger_tokens, outcome, error, placeholders, json FROM records WHERE id = ?")


def test_a_log_holding_duplicate_numbers_still_migrates(tmp_path, packs):
    path = tmp_path / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path)
    first = fw.compact(conversation(), summarizer=good_summary)
    fw.audit.close()
    with sqlite3.connect(path) as conn:  # as an older version left it: duplicates, no trigger
        conn.execute("DROP TRIGGER records_compaction_unique")
        conn.execute("DELETE FROM _migrations WHERE name = 'm002_unique_compaction_numbers'")
        conn.execute(_COPY_RECORD, (first.record.id,))
    result = Firewall(packs, keep_last=2, audit=path).compact(conversation(),
                                                              summarizer=good_summary)
    assert result.audit_error is None
    assert sorted(r.compaction for r in SQLiteAuditLog(path).export()) == [1, 1, 2]


class _Sleepy:
    """Writes ``marker`` once the summarizer is called, then sleeps: a slow vendor call."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def summarize(self, request):
        Path(self.marker).touch()
        time.sleep(60)
        return good_summary.summarize(request)


def _compact_then_hang(path: str, packs, marker: str) -> None:
    fw = Firewall(packs, keep_last=2, audit=path)
    fw.compact(conversation("K", 1), summarizer=good_summary)
    fw.compact(conversation("K", 2), summarizer=_Sleepy(marker))


def _hang_inside_transaction(path: str, packs, marker: str) -> None:
    def stall(conn, record):  # record and literal rows are in, the transaction is open
        Path(marker).touch()
        time.sleep(60)

    audit_sqlite._insert_attempts = stall
    Firewall(packs, keep_last=2, audit=path).compact(conversation("K", 2),
                                                    summarizer=good_summary)


def _wait_for(marker: Path, child) -> None:
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert child.is_alive() and time.monotonic() < deadline, "child never got there"
        time.sleep(0.01)


@pytest.mark.parametrize("where", ["summarizing", "writing the record"])
def test_process_killed_mid_compaction_leaves_no_half_record(tmp_path, packs, where):
    path, marker = tmp_path / "audit.db", tmp_path / "inside"
    if where == "summarizing":
        child = MP.Process(target=_compact_then_hang, args=(str(path), packs, str(marker)))
    else:
        Firewall(packs, keep_last=2, audit=path).compact(conversation("K", 1),
                                                        summarizer=good_summary)
        child = MP.Process(target=_hang_inside_transaction, args=(str(path), packs, str(marker)))
    child.start()
    _wait_for(marker, child)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert child.exitcode == -signal.SIGKILL

    records = assert_whole(path)
    assert [r.compaction for r in records] == [1]  # the killed compaction left nothing
    # still usable: the dead writer's lock did not outlive it, numbering continues
    result = Firewall(packs, keep_last=2, audit=SQLiteAuditLog(path, busy_timeout=2)).compact(
        conversation("K", 3), summarizer=good_summary)
    assert result.audit_error is None and result.record.compaction == 2
    assert len(assert_whole(path)) == 2


# ── full disk and corrupt logs ─────────────────────────────────────────────────────────────

def assert_composed_with_every_literal(result, original, tag="A", n=1) -> None:
    assert result.compacted and result.messages != original
    text = context(result.messages)
    for value in literals_of(tag, n):
        assert value in text
    assert set(literals_of(tag, n)) <= set(result.ledger.values())


def test_sqlite_disk_full_keeps_the_compaction_and_reports_it(tmp_path, packs, monkeypatch):
    path = tmp_path / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path, budget_tokens=100_000)
    fw.compact(conversation(), summarizer=good_summary)
    before = row_counts(path)

    real_connect = sqlite3.connect

    def full_connect(*args, **kwargs):  # the database may not grow by a single page
        conn = real_connect(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(audit_sqlite.sqlite3, "connect", full_connect)
    original = big_conversation("A", 2)
    result = fw.compact(original, summarizer=good_summary)
    assert result.audit_error and "disk is full" in result.audit_error
    assert str(path) in result.audit_error
    assert_composed_with_every_literal(result, original, "A", 2)
    monkeypatch.undo()
    assert row_counts(path) == before  # nothing half-written
    assert len(assert_whole(path)) == 1


def test_jsonl_disk_full_keeps_the_compaction_and_reports_it(tmp_path, packs, monkeypatch):
    path = tmp_path / "audit.jsonl"

    def enospc(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_files.os, "write", enospc)
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=path).compact(original, summarizer=good_summary)
    assert result.audit_error and "disk is full" in result.audit_error
    assert_composed_with_every_literal(result, original)


class _FullSink:
    """A sink whose storage is out of space."""

    def next_compaction_number(self, conversation_id: str) -> int:
        return 1

    def write(self, record):
        raise audit_keys.os_storage_error(Path("/audit/sink"),
                                          OSError(errno.ENOSPC, "No space left"),
                                          "writing a record")


def test_any_sink_raising_audit_error_keeps_the_compaction(packs):
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=_FullSink()).compact(
        original, summarizer=good_summary)
    assert "disk is full" in result.audit_error
    assert_composed_with_every_literal(result, original)


class _WriteOnlySink:
    """The documented minimum: ``AuditSink`` has one method, ``write(record)``."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def write(self, record):
        self.records.append(record)


def test_write_only_sink_is_enough(packs):
    sink = _WriteOnlySink()
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=sink).compact(original, summarizer=good_summary)
    assert_composed_with_every_literal(result, original)
    assert [r.compaction for r in sink.records] == [1]


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)`` mounts a tmpfs of that size (root only); skipped where not allowed."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"tmpfs-{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in mounted:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _fill(directory: Path) -> None:
    try:
        with open(directory / "filler", "wb", buffering=0) as handle:
            while True:
                handle.write(b"\0" * 512)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC


@pytest.mark.parametrize("name", ["audit.db", "audit.jsonl"])
def test_real_full_tmpfs_keeps_the_compaction(tmpfs, packs, name):
    tiny_fs = tmpfs("1m")
    path = tiny_fs / name
    fw = Firewall(packs, keep_last=2, audit=path, budget_tokens=100_000)
    fw.compact(conversation(), summarizer=good_summary)
    _fill(tiny_fs)
    original = big_conversation("A", 2)  # more than the WAL already allocated can take
    result = fw.compact(original, summarizer=good_summary)
    # usually "the disk is full"; SQLite may also report the WAL's failure as an I/O error
    assert result.audit_error and f"audit log {path}: writing a record failed" in \
        result.audit_error
    assert_composed_with_every_literal(result, original, "A", 2)
    (tiny_fs / "filler").unlink()
    if name == "audit.db":
        assert len(assert_whole(path)) == 1
    else:
        assert len(list(JSONLAuditLog(path).export())) == 1


def test_opening_a_log_on_a_full_disk_says_the_disk_is_full(tmpfs):
    tiny_fs = tmpfs("64k")  # room for the database file, not for its WAL: COMMIT fails
    with pytest.raises(AuditError, match="disk is full"):
        SQLiteAuditLog(tiny_fs / "audit.db")


def test_corrupt_database_is_a_clear_error_and_the_compaction_stands(tmp_path, packs):
    path = tmp_path / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path)
    fw.compact(conversation(), summarizer=good_summary)
    for leftover in tmp_path.glob("audit.db-*"):
        leftover.unlink()
    path.write_bytes(b"this is not a database" * 500)

    original = conversation("A", 2)
    result = fw.compact(original, summarizer=good_summary)
    assert result.audit_error and "corrupt" in result.audit_error and str(path) in \
        result.audit_error
    assert_composed_with_every_literal(result, original, "A", 2)
    with pytest.raises(AuditError, match="corrupt or not a literal-firewall audit database"):
        SQLiteAuditLog(path)  # opening it to read says so up front


def test_opening_a_log_on_a_full_disk_does_not_block_the_compaction(tmpfs, packs):
    tiny_fs = tmpfs("64k")
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=tiny_fs / "audit.db").compact(
        original, summarizer=good_summary)
    assert result.audit_error and "disk is full" in result.audit_error
    assert_composed_with_every_literal(result, original)


@pytest.fixture
def read_only():
    """``read_only(folder)`` makes a folder unwritable for this process: a read-only bind
    mount as root (root ignores permissions; skipped where mounting is not allowed), else
    permissions."""
    undo: list[Any] = []

    def make(folder: Path) -> None:
        if os.geteuid() != 0:
            for path in [folder, *folder.iterdir()]:
                mode = path.stat().st_mode
                path.chmod(mode & 0o555)
                undo.append(lambda path=path, mode=mode: path.chmod(mode))
            return
        for step in (["mount", "--bind", str(folder), str(folder)],
                     ["mount", "-o", "remount,ro,bind", str(folder)]):
            done = subprocess.run(step, capture_output=True)
            if done.returncode != 0:
                pytest.skip(f"cannot mount read-only: {done.stderr.decode().strip()}")
            if step[1] == "--bind":
                undo.append(lambda: subprocess.run(["umount", "-l", str(folder)],
                                                   capture_output=True))

    try:
        yield make
    finally:
        for step in reversed(undo):
            step()


@pytest.mark.parametrize("fault", ["corrupt header", "folder is a file", "read-only folder"])
def test_a_log_that_cannot_be_opened_does_not_block_the_compaction(tmp_path, packs, fault,
                                                                   read_only):
    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "audit.db"
    if fault == "corrupt header":
        path.write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    elif fault == "folder is a file":
        folder.rmdir()
        folder.write_text("")
    else:
        read_only(folder)
    fw = Firewall(packs, keep_last=2, audit=path)  # does not raise
    for n in (1, 2):  # tried again at each compaction, reported each time
        original = conversation("A", n)
        result = fw.compact(original, summarizer=good_summary)
        assert result.audit_error and str(path) in result.audit_error
        assert_composed_with_every_literal(result, original, "A", n)


def test_a_read_only_log_is_readable_and_still_reports_writes(tmp_path, packs, read_only,
                                                              capsys):
    from firewall.cli import main

    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path)
    first = fw.compact(conversation(), summarizer=good_summary)
    fw.audit.close()  # the last connection: the WAL is checkpointed into the file and removed
    read_only(folder)

    assert main(["audit", "list", "--audit-db", str(path)]) == 0
    assert first.record.id[:12] in capsys.readouterr().out
    assert [r.id for r in SQLiteAuditLog(path).export()] == [first.record.id]
    original = conversation("A", 2)
    result = Firewall(packs, keep_last=2, audit=path).compact(original,
                                                              summarizer=good_summary)
    assert result.audit_error and str(path) in result.audit_error
    assert_composed_with_every_literal(result, original, "A", 2)


def test_a_read_only_log_of_a_newer_schema_is_refused_naming_the_versions(tmp_path, packs,
                                                                          read_only, capsys):
    """A log this version cannot write and whose schema is newer: reading it as if it were
    this version's could misread its records; it is refused, naming both schema versions."""
    from firewall import __version__
    from firewall.audit.migrations import MIGRATIONS
    from firewall.cli import main

    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "audit.db"
    fw = Firewall(packs, keep_last=2, audit=path)
    fw.compact(conversation(), summarizer=good_summary)
    fw.audit.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('m999_future', 'x')")
    conn.close()
    read_only(folder)
    with pytest.raises(AuditError) as err:
        SQLiteAuditLog(path)
    message = str(err.value)
    assert "newer literal-firewall" in message and "m999_future" in message
    assert f"literal-firewall {__version__}" in message and MIGRATIONS[-1][0] in message
    assert str(path) in message
    assert main(["audit", "list", "--audit-db", str(path)]) == 2
    assert "m999_future" in capsys.readouterr().err


def test_the_cli_prints_the_compaction_when_the_log_cannot_be_opened(tmp_path, capsys):
    from firewall.cli import main

    path = tmp_path / "audit.db"
    path.write_bytes(b"this is not a database" * 500)
    conversation_file = tmp_path / "conversation.json"
    conversation_file.write_text(json.dumps(conversation()))
    code = main(["compact", str(conversation_file), "--keep-last", "2", "--audit-db",
                 str(path), "--tokens", "estimate", "--json"])
    out, err = capsys.readouterr()
    assert code == 1  # the output is there; the missing record is a failure to report
    document = json.loads(out)
    assert "<<<ledger " in json.dumps(document["messages"])
    assert "corrupt" in document["report"]["audit_error"]
    assert document["report"]["audit_id"] is None  # no record was written
    assert str(path) in err


def test_corrupt_jsonl_line_is_named_and_the_compaction_stands(tmp_path, packs):
    path = tmp_path / "audit.jsonl"
    path.write_text("garbage that is not a record\n")
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=path).compact(original, summarizer=good_summary)
    assert_composed_with_every_literal(result, original)
    with pytest.raises(AuditError, match=r"audit\.jsonl:1: not an audit record"):
        JSONLAuditLog(path).list()


def test_unavailable_installation_key_does_not_cost_the_compaction(tmp_path, packs,
                                                                   monkeypatch):
    monkeypatch.delenv("FIREWALL_AUDIT_KEY")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # the key file cannot be created
    original = conversation()
    result = Firewall(packs, keep_last=2, audit=MemoryAuditLog()).compact(
        original, summarizer=good_summary)
    assert_composed_with_every_literal(result, original)
    assert "audit key" in result.audit_error


def test_sensitive_literal_is_found_in_a_log_with_its_own_key(tmp_path, packs):
    log = SQLiteAuditLog(tmp_path / "audit.db", key=b"own key")
    Firewall(packs, keep_last=2, audit=log).compact(conversation(), summarizer=good_summary)
    assert len(log.find_literal(CARD)) == 1


# ── summarizer failures ────────────────────────────────────────────────────────────────────

def _sdk_error(name: str) -> BaseException:
    """The error the Anthropic SDK itself raises, built as the SDK builds it from a response."""
    anthropic = pytest.importorskip("anthropic")
    import httpx2

    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    if name == "read-timeout":
        return anthropic.APITimeoutError(request=request)
    status, cls, kind = {"429": (429, anthropic.RateLimitError, "rate_limit_error"),
                         "529": (529, anthropic.OverloadedError, "overloaded_error")}[name]
    body = {"type": "error", "error": {"type": kind, "message": "Overloaded"}}
    return cls(f"Error code: {status} - {body}",
               response=httpx2.Response(status, request=request, json=body), body=body)


FAILURES = {  # factories: an SDK's error needs the SDK
    "timeout": lambda: TimeoutError("the summarizer took longer than 30 s"),
    "asyncio-timeout": asyncio.TimeoutError,
    "read-timeout": lambda: _sdk_error("read-timeout"),
    "429": lambda: _sdk_error("429"),
    "529": lambda: _sdk_error("529"),
    "summarizer-error": lambda: SummarizerError("vendor returned an empty completion"),
}
MALFORMED = {
    "none": None, "dict": {"text": "a summary"}, "int": 42, "list": ["a", "summary"],
    "bytes": b"a summary", "summary-of-none": Summary(text=None),  # type: ignore[arg-type]
    "summary-of-dict": Summary(text={"content": "x"}),  # type: ignore[arg-type]
}


class Raw:
    """Answers whatever it is given, unchecked (ScriptedSummarizer refuses non-text)."""

    def __init__(self, *answers: Any) -> None:
        self.answers, self.calls = list(answers), 0

    def _next(self):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def summarize(self, request):
        return self._next()


class AsyncRaw(Raw):
    async def asummarize(self, request):
        await asyncio.sleep(0)
        return self._next()


def assert_intact(result, original, snapshot) -> None:
    assert not result.compacted and result.summary is None
    assert result.messages == original == snapshot  # equal, and the input unmodified
    assert all(a is b for a, b in zip(result.messages, original))
    assert result.record.outcome == "uncompacted" and result.record.error
    assert set(literals_of()) <= set(result.ledger.values())  # still pinned for next time


def _run(fw: Firewall, original, summarizer, driver: str):
    if driver == "sync":
        return fw.compact(original, summarizer=summarizer)
    return asyncio.run(fw.acompact(original, summarizer=summarizer))


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(FAILURES))
def test_summarizer_exception_leaves_the_conversation_intact(packs, name, driver):
    original = conversation()
    snapshot = copy.deepcopy(original)
    failure = FAILURES[name]()
    summarizer = (Raw if driver == "sync" else AsyncRaw)(failure)
    result = _run(Firewall(packs, keep_last=2), original, summarizer, driver)
    assert_intact(result, original, snapshot)
    assert summarizer.calls == 1  # a failed call is not re-asked
    assert type(failure).__name__ in result.record.attempts[0].error


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_summary_leaves_the_conversation_intact(packs, name, driver):
    original = conversation()
    snapshot = copy.deepcopy(original)
    summarizer = (Raw if driver == "sync" else AsyncRaw)(MALFORMED[name])
    result = _run(Firewall(packs, keep_last=2), original, summarizer, driver)
    assert_intact(result, original, snapshot)
    assert "not text" in result.record.error


@pytest.mark.parametrize("policy", ["reinject", "repair", "keep_source"])
def test_overload_on_the_reask_leaves_the_conversation_intact(packs, policy):
    original = conversation()
    snapshot = copy.deepcopy(original)
    scripted = ScriptedSummarizer(["The user asked about INV-2025-08-44791.",  # a mutation
                                   _sdk_error("529")])
    result = Firewall(packs, keep_last=2, policy=policy).compact(original, summarizer=scripted)
    assert len(scripted.calls) == 2 and scripted.calls[1].feedback
    assert_intact(result, original, snapshot)


def test_raise_policy_refuses_and_leaves_the_input_untouched(packs):
    original = conversation()
    snapshot = copy.deepcopy(original)
    with pytest.raises(CompactionRefused) as refused:
        Firewall(packs, keep_last=2, policy="raise").compact(
            original, summarizer=Raw(_sdk_error("429")))
    assert "429" in str(refused.value) and len(refused.value.attempts) == 1
    assert original == snapshot


def test_callable_summarizer_returning_none_leaves_the_conversation_intact(packs):
    original = conversation()
    snapshot = copy.deepcopy(original)
    result = Firewall(packs, keep_last=2).compact(original, summarizer=lambda messages: None)
    assert_intact(result, original, snapshot)


def test_summarizer_editing_its_input_cannot_modify_the_callers_messages(packs):
    original = conversation()
    snapshot = copy.deepcopy(original)

    def sloppy(messages):
        for message in messages:
            message["content"] = "[redacted]"
        raise _sdk_error("529")

    result = Firewall(packs, keep_last=2).compact(original, summarizer=sloppy)
    assert_intact(result, original, snapshot)
    assert result.record.attempts[0].error.startswith("OverloadedError: Error code: 529")
