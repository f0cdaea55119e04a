"""A fleet of writers on one audit log: N processes x M compactions, PostgreSQL beside SQLite.

Each process writes what the guard writes after a compaction: it asks the log for the
conversation's next number (``next_compaction_number``), then writes the record (``write``),
which may renumber it if another process took that number meanwhile. The record is a real one:
the audit record of compacting ``examples/support_invoice.json`` (36 literals), copied with a
fresh id. Every process writes into the same few conversations, so writers race for numbers.
Afterwards the log is read back with the database's own client: every record present and
whole, numbers unique and contiguous per conversation, and every failed write counted (a lock
timeout would be one).

    python benchmarks/audit_fleet.py --url postgresql://USER@/DB?host=SOCKET_DIR \\
        [--sqlite /tmp/fleet.db] [--processes 8] [--compactions 1000]

Both logs run in the same invocation, one after the other (PostgreSQL first), on fresh tables:
the PostgreSQL log's tables go into a new schema of that database, dropped at the end. The key
is a throwaway one (``FIREWALL_AUDIT_KEY`` is set for the run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEY = b"audit-fleet-benchmark-key"


def template_record() -> str:
    """The audit record of one real compaction, as JSON."""
    from firewall.audit import MemoryAuditLog
    from firewall.compaction.guard import Firewall
    from firewall.summarizers.extractive import ExtractiveSummarizer

    conversation = json.loads((ROOT / "examples" / "support_invoice.json").read_text())
    fw = Firewall(keep_last=4, audit=MemoryAuditLog(key=KEY))
    return fw.compact(conversation, summarizer=ExtractiveSummarizer()).record.model_dump_json()


def open_log(spec: str) -> Any:
    from firewall.audit import SQLiteAuditLog

    if spec.startswith("postgresql://"):
        from firewall.audit.postgres import PostgresAuditLog

        return PostgresAuditLog(spec, key=KEY)
    return SQLiteAuditLog(spec, key=KEY)


def writer(spec: str, worker: int, count: int, conversations: int, template: str,
           start: Any, results: Any) -> None:
    from firewall.audit import AuditRecord
    from firewall.errors import AuditError

    log = open_log(spec)
    base = AuditRecord.model_validate_json(template)
    errors: list[str] = []
    latencies: list[float] = []
    start.wait()
    for n in range(count):
        conversation = f"conv-{(worker + n) % conversations}"
        t0 = time.perf_counter()
        try:
            number = log.next_compaction_number(conversation)
            log.write(base.model_copy(update={"id": uuid.uuid4().hex, "compaction": number,
                                              "conversation_id": conversation}))
        except AuditError as exc:
            errors.append(str(exc))
        latencies.append(time.perf_counter() - t0)
    results.put((worker, errors, latencies))


def check(spec: str) -> dict[str, Any]:
    """Read the log back with the database's own client, not through the log."""
    tables = ("records", "literals", "attempts")
    if spec.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(spec) as conn:
            counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]
            numbers = conn.execute("SELECT conversation_id, compaction FROM records").fetchall()
    else:
        import sqlite3

        with sqlite3.connect(spec) as conn:
            counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]
            numbers = conn.execute("SELECT conversation_id, compaction FROM records").fetchall()
    per_conversation: dict[str, list[int]] = {}
    for conversation, number in numbers:
        per_conversation.setdefault(conversation, []).append(number)
    contiguous = all(sorted(ns) == list(range(1, len(ns) + 1))
                     for ns in per_conversation.values())
    return {"records": counts[0], "literals": counts[1], "attempts": counts[2],
            "conversations": len(per_conversation), "numbers_unique_and_contiguous": contiguous}


def run(spec: str, args: argparse.Namespace, template: str) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    open_log(spec)  # migrate once: the race measured is on writes
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=writer, args=(spec, w, args.compactions,
                                                    args.conversations, template, start,
                                                    results))
               for w in range(args.processes)]
    for p in workers:
        p.start()
    time.sleep(2)  # let every process import and connect before the clock starts
    t0 = time.perf_counter()
    start.set()
    gathered = [results.get(timeout=3600) for _ in workers]
    wall = time.perf_counter() - t0
    for p in workers:
        p.join()
    errors = [e for _, errs, _ in gathered for e in errs]
    latencies = sorted(x for _, _, lat in gathered for x in lat)
    literals, attempts = (len(json.loads(template)[k]) for k in ("literals", "attempts"))
    expected = args.processes * args.compactions
    found = check(spec)
    return {
        "log": "postgresql" if spec.startswith("postgresql://") else "sqlite",
        "compactions": expected, "wall_s": round(wall, 2),
        "compactions_per_s": round(expected / wall, 1),
        "write_ms_p50": round(1000 * statistics.median(latencies), 2),
        "write_ms_p99": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2),
        "failed_writes": len(errors), "error_kinds": dict(Counter(e.split(": ", 2)[-1][:80]
                                                                 for e in errors)),
        **found,
        "every_record_whole": (found["records"], found["literals"], found["attempts"]) == (
            expected, expected * literals, expected * attempts),
        "exit_codes": [p.exitcode for p in workers],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL database to write into")
    parser.add_argument("--sqlite", help="the SQLite file to compare (default: a temp file)")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--compactions", type=int, default=1000, help="per process")
    parser.add_argument("--conversations", type=int, default=16,
                        help="conversations shared by all processes (they race for numbers)")
    args = parser.parse_args()
    os.environ["FIREWALL_AUDIT_KEY"] = KEY.decode()

    import psycopg

    template = template_record()
    schema = f"fleet_{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in args.url else "?"
    url = f"{args.url}{separator}options=-csearch_path%3D{schema}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    out = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for spec in (url, args.sqlite or str(Path(folder) / "fleet.db")):
                out.append(run(spec, args, template))
                print(json.dumps(out[-1]), flush=True)
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    print(f"# {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()}, "
          f"psycopg {psycopg.__version__}", file=sys.stderr)
    return 0 if all(r["failed_writes"] == 0 and r["every_record_whole"] and
                    r["numbers_unique_and_contiguous"] for r in out) else 1


if __name__ == "__main__":
    raise SystemExit(main())
