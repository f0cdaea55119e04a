"""The archive (issue 27): recall latency over a million literals, and what writing it costs.

    python benchmarks/archive.py [--literals 1000000] [--queries 2000] [--data ../shared/data]
                                 [--repeat 9] [--swept 0.42]

1. **Recall**: a SQLite audit log whose archive holds ``--literals`` literals (paths, ids,
   snake_case and camelCase names, error codes, with their context lines: synthetic, shaped
   like what the coding packs extract, in 200 conversations of 25 compactions each) answers
   ``--queries`` recalls: exact values, base names, an id's first 6 characters, one name part,
   three context words, and words found nowhere. Reported: p50/p99 in ms, beside a plain
   ``SELECT`` by exact value on the indexed column, measured in the same run (the ratio), and
   the archive's bytes per literal. ``--swept SHARE`` makes that share of them swept tokens
   (the token tier: each tier asks for the rules' literals first, then for swept tokens).
2. **Write overhead**: ``Firewall.compact`` of the real Claude Code sessions of the dev data
   (``claude_code_cc0``: each session's first 75 % compacted, a scripted summarizer answering
   at once), into a SQLite log, with the archive off, on with the rules' literals only, and on
   with the token tier too, interleaved ``--repeat`` times; medians and their ratios, the
   archive's own share timed inside the runs (wall and CPU time), and its size per literal.
   Skipped, and said, when the dev data is absent.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firewall.audit import archive_sqlite  # noqa: E402
from firewall.audit.archive import (SWEPT_RULE, ArchiveEntry, ArchiveLimits, Query,  # noqa: E402
                                    value_parts)
from firewall.audit import SQLiteAuditLog, literal_hash  # noqa: E402

WORDS = ("cache user order invoice refund payment session token worker queue retry model view "
         "handler client server config build test deploy migration schema index record batch "
         "stream parser render account billing export import report metric health status").split()
VERBS = "read edited failed created opened deleted moved renamed checked fixed found".split()
KEY = b"bench"


def synthetic(rng: random.Random, n: int) -> tuple[str, str, str]:
    """(value, kind, context line) of the n-th literal."""
    a, b, c = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
    shape = n % 5
    if shape == 0:
        value, kind = f"src/{a}/{b}_{c}_{n}.py", "path"
    elif shape == 1:
        value, kind = f"{rng.getrandbits(64):016x}{n:08x}", "uuid_hex"
    elif shape == 2:
        value, kind = f"{a}_{b}_{c}{n}", "identifier"
    elif shape == 3:
        value, kind = f"{a}{b.title()}{c.title()}{n}", "identifier"
    else:
        value, kind = f"E{n:07d}", "alnum_code"
    context = (f"{rng.choice(VERBS)} {value} while the {rng.choice(WORDS)} {rng.choice(WORDS)} "
               f"{rng.choice(VERBS)} the {rng.choice(WORDS)}")
    return value, kind, context


def build(path: Path, literals: int, rng: random.Random,
          swept: float = 0.0) -> list[tuple[str, str]]:
    """An archive of ``literals`` literals, a ``swept`` share of them swept tokens (the token
    tier's rule, ranked and evicted after the rules' literals); returns a sample of (value,
    context)."""
    log = SQLiteAuditLog(path, key=KEY)
    per_compaction = 200
    conversations = 200
    sample = []
    n = 0
    started = time.perf_counter()
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA synchronous = OFF")
        while n < literals:
            conn.execute("BEGIN")
            for _ in range(50):  # compactions per transaction: building, not what is measured
                if n >= literals:
                    break
                entries = []
                for _ in range(min(per_compaction, literals - n)):
                    value, kind, context = synthetic(rng, n)
                    rule = SWEPT_RULE if rng.random() < swept else "bench/rule"
                    entries.append(ArchiveEntry(value, literal_hash(value, KEY), kind,
                                                rule, "tool", n % 997, n % 997, 1,
                                                context, False, value_parts(value)))
                    if rng.random() < 0.002:
                        sample.append((value, context))
                    n += 1
                conversation = f"conversation-{(n // per_compaction) % conversations}"
                archive_sqlite.write(conn, conversation, n // per_compaction // conversations + 1,
                                     entries, ArchiveLimits(max_literals=10 ** 9,
                                                            max_bytes=10 ** 12))
            conn.execute("COMMIT")
    log.close()
    print(f"built {n:,} literals in {time.perf_counter() - started:.0f} s")
    return sample


KINDS = ("exact value", "base name / fragment", "6-char prefix", "one name part",
         "3 context words", "absent")


def queries(sample: list[tuple[str, str]], count: int, rng: random.Random) -> list[str]:
    from firewall.audit.archive import terms
    from firewall.evaluation.archive_eval import fragment

    out = []
    for i in range(count):
        value, context = rng.choice(sample)
        kind = i % 6
        if kind == 0:
            out.append(value)
        elif kind == 1:
            out.append(fragment(value))
        elif kind == 2:
            out.append(value[:6])
        elif kind == 3:
            out.append(rng.choice(terms(value)))
        elif kind == 4:
            out.append(" ".join(context.split()[-3:]))
        else:
            out.append(f"nothing{rng.getrandbits(32):08x}")
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def recall_bench(literals: int, count: int, rng: random.Random, keep: str | None,
                 swept: float = 0.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(keep) if keep else Path(tmp) / "audit.db"
        if keep and path.exists():  # a kept archive: its sample is read back
            with sqlite3.connect(path) as conn:
                sample = conn.execute("SELECT value, context FROM archive WHERE id % 500 = 0"
                                      ).fetchall()
                swept = conn.execute("SELECT avg(rule = ?) FROM archive",
                                     (SWEPT_RULE,)).fetchone()[0] or 0.0
        else:
            sample = build(path, literals, rng, swept)
        asked = queries(sample, count, rng)
        exact = [rng.choice(sample)[0] for _ in range(count)]
        log = SQLiteAuditLog(path, key=KEY)
        conn = sqlite3.connect(path)
        recall_ms, select_ms, found = [], [], 0
        for query in asked[:50]:  # warm-up: the first reads of the index pages
            log.recall(Query.of(query, limit=10))
        for query, value in zip(asked, exact):  # interleaved: the same cache state for both
            t = time.perf_counter()
            hits = log.recall(Query.of(query, limit=10))
            recall_ms.append((time.perf_counter() - t) * 1000)
            found += bool(hits)
            t = time.perf_counter()
            conn.execute("SELECT * FROM archive WHERE value = ?", (value,)).fetchall()
            select_ms.append((time.perf_counter() - t) * 1000)
        conn.close()
        log.close()
        size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))
    print(f"recall over {literals:,} literals ({swept:.0%} swept tokens), {count:,} queries (exact, base name, 6-char "
          f"prefix, name part, 3 context words, absent; {found:,} answered):")
    print(f"  recall (SQLiteAuditLog.recall, limit 10): "
          f"p50 {pct(recall_ms, .5):.2f} ms, p99 {pct(recall_ms, .99):.2f} ms")
    print(f"  plain SELECT by exact value:              "
          f"p50 {pct(select_ms, .5):.3f} ms, p99 {pct(select_ms, .99):.3f} ms")
    for i, kind in enumerate(KINDS):
        mine = recall_ms[i::len(KINDS)]
        print(f"    {kind:22} p50 {pct(mine, .5):6.2f} ms, p99 {pct(mine, .99):6.2f} ms")
    print(f"  ratio p99 recall / SELECT: {pct(recall_ms, .99) / pct(select_ms, .99):.0f}x")
    print(f"  log size {size / 2 ** 20:.0f} MiB: {size / literals:.0f} bytes per literal")


MODES = {"off": False, "rules": ArchiveLimits(tokens=False), "rules+tokens": ArchiveLimits()}


def write_bench(data: Path, repeat: int) -> None:
    from firewall.formats import read_conversations
    from firewall.compaction.guard import Firewall

    sessions = data / "claude_code_cc0"
    if not sessions.is_dir():
        print(f"write overhead: no dev data at {sessions}: skipped (pass --data)")
        return
    conversations = []
    for path in sorted(sessions.glob("*.jsonl")):
        # a bad line is skipped, as `firewall eval` does (the CC0 files hold a few)
        conversations += read_conversations(path, on_error=lambda error: None)
    names = list(MODES)
    timings: dict[str, list[float]] = {name: [] for name in names}
    inside: dict[str, list[float]] = {name: [] for name in names[1:]}  # archive's own share
    inside_cpu: dict[str, list[float]] = {name: [] for name in names[1:]}  # the same, CPU time
    sizes: dict[str, tuple[int, int, int, int]] = {}  # rows, swept rows, bytes stored, file
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            for name in names[r % 3:] + names[:r % 3]:  # interleaved, each order in turn
                path = Path(tmp) / f"audit-{name}-{r}.db"
                log = SQLiteAuditLog(path, key=KEY)
                fw = Firewall(audit=log, archive=MODES[name])
                fw.observe(conversations[0])  # import and warm-up outside the clock
                spent = [0.0, 0.0]  # wall, CPU
                if MODES[name]:  # time the archive's own part of each compaction, same run
                    write = fw._archive

                    def timed(*a, write=write, spent=spent):
                        t, c = time.perf_counter(), time.process_time()
                        try:
                            return write(*a)
                        finally:
                            spent[0] += time.perf_counter() - t
                            spent[1] += time.process_time() - c

                    fw._archive = timed
                started, cpu = time.perf_counter(), time.process_time()
                for conversation in conversations:
                    keep = len(conversation.turns) - int(len(conversation.turns) * 0.75)
                    result = fw.compact(conversation, lambda request: "Summary: work so far.",
                                        keep_last=max(keep, 1))
                    assert result.audit_error is None, result.audit_error
                timings[name].append(time.perf_counter() - started)
                cpu = time.process_time() - cpu
                if MODES[name]:
                    inside[name].append(spent[0] / (timings[name][-1] - spent[0]))
                    inside_cpu[name].append(spent[1] / (cpu - spent[1]))
                log.close()
                if MODES[name] and r == 0:
                    with sqlite3.connect(path) as conn:
                        rows, swept, stored = conn.execute(
                            "SELECT count(*), coalesce(sum(rule = ?), 0), coalesce(sum("
                            "length(CAST(coalesce(value, '') AS BLOB)) + length(CAST("
                            "coalesce(context, '') AS BLOB)) + length(CAST(coalesce(parts, '') "
                            "AS BLOB)) + length(value_hash)), 0) FROM archive",
                            (SWEPT_RULE,)).fetchone()
                        conn.execute("VACUUM")
                    sizes[name] = (rows, swept, stored, path.stat().st_size)
                    path.unlink()
    median = {name: statistics.median(t) for name, t in timings.items()}
    print(f"write overhead: {len(conversations)} CC0 sessions compacted at 75 %, {repeat} "
          f"interleaved runs (medians):")
    for name in names:
        line = f"  archive {name:13} {median[name] * 1000:6.0f} ms"
        if MODES[name]:
            line += (f"  {(median[name] / median['off'] - 1) * 100:+5.1f} % vs off; writing "
                     f"the archive took {statistics.median(inside[name]) * 100:.1f} % of the "
                     f"rest of the compaction time (min {min(inside[name]) * 100:.1f} %, max "
                     f"{max(inside[name]) * 100:.1f} %); in CPU time (less moved by other "
                     f"jobs) {statistics.median(inside_cpu[name]) * 100:.1f} % (min "
                     f"{min(inside_cpu[name]) * 100:.1f} %, max "
                     f"{max(inside_cpu[name]) * 100:.1f} %)")
        print(line)
    for name, (rows, swept, stored, size) in sizes.items():
        print(f"  archive {name:13} {rows:,} literals ({swept:,} swept tokens): "
              f"{stored / max(rows, 1):.0f} bytes of value+context+parts+hash per literal, "
              f"{size / max(rows, 1):.0f} bytes of the log file (records, FTS) per literal")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--literals", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--swept", type=float, default=0.0, metavar="SHARE",
                        help="share of the synthetic literals that are swept tokens (the token "
                             "tier: 0.42 on the CC0 sessions)")
    parser.add_argument("--skip-recall", action="store_true")
    parser.add_argument("--skip-write", action="store_true")
    parser.add_argument("--keep", metavar="PATH", help="build the archive there and keep it "
                                                       "(reused when it exists)")
    args = parser.parse_args()
    print(f"$ python benchmarks/archive.py --literals {args.literals} --queries {args.queries} "
          f"--repeat {args.repeat} --swept {args.swept}   (SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs)")
    rng = random.Random(27)
    if not args.skip_write:
        write_bench(Path(args.data), args.repeat)
    if not args.skip_recall:
        recall_bench(args.literals, args.queries, rng, args.keep, args.swept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
