"""Where writing the archive spends its time, part by part, in CPU time: the entries of the
rules' literals, the token tier's sweep, and the SQLite write.

    python benchmarks/archive_parts.py [--data ../shared/data] [--repeat 10] [--repo PATH]

Compacts the real Claude Code sessions of the dev data once (``claude_code_cc0``, each
session's first 75 %, a scripted summarizer, the token tier on), as ``archive.py``'s write
benchmark does, keeping what each compaction handed to ``archive_entries`` and to the log's
``write_archive``; then, ``--repeat`` times in one process: builds every compaction's entries
again with the sweep and without it (``span=None``), and writes the kept entries into a fresh
SQLite log. Reported: the minimum and the median of each, in CPU time (``process_time``: less
moved by other jobs than the wall clock). ``--repo``: the tree whose ``firewall`` is imported
(another checkout, e.g. ``git archive`` of the tree before a change).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--repo", default=str(REPO), help="the tree whose firewall is imported")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve()))
    import firewall.compaction.loop as loop
    from firewall.audit import SQLiteAuditLog
    from firewall.audit.archive import archive_entries

    from archive_digest import compact_sessions  # beside this script

    built, written = [], []

    def keep_entries(literals, text_of, **options):
        literals = list(literals)
        if options.get("span") is not None:
            options["span"] = list(options["span"])
        built.append((literals, text_of, options))
        return archive_entries(literals, text_of, **options)

    loop.archive_entries = keep_entries  # the loop's own call, its own arguments
    with tempfile.TemporaryDirectory() as tmp:
        log = SQLiteAuditLog(Path(tmp) / "audit.db", key=b"bench")
        write = log.write_archive

        def keep_write(conversation, compaction, entries, limits=None):
            written.append((conversation, compaction, list(entries), limits))
            return write(conversation, compaction, entries, limits)

        log.write_archive = keep_write
        if not compact_sessions(Path(args.data), log):
            return 1
        log.close()
        times: dict[str, list[float]] = {"entries, with the sweep": [],
                                         "entries, rules' literals only": [],
                                         "SQLite write": []}
        for r in range(args.repeat):
            for name, sweep in (("entries, with the sweep", True),
                                ("entries, rules' literals only", False)):
                started = time.process_time()
                for literals, text_of, options in built:
                    archive_entries(literals, text_of,
                                    **(options if sweep else {**options, "span": None}))
                times[name].append(time.process_time() - started)
            target = SQLiteAuditLog(Path(tmp) / f"write-{r}.db", key=b"bench")
            target.archive_count("warm-up")  # opened and migrated outside the clock
            started = time.process_time()
            for conversation, compaction, entries, limits in written:
                target.write_archive(conversation, compaction, entries, limits)
            times["SQLite write"].append(time.process_time() - started)
            target.close()
    rows = sum(len(entries) for _, _, entries, _ in written)
    print(f"{len(built)} compactions, {rows:,} archive rows; CPU time per pass over all of "
          f"them, min / median of {args.repeat}:")
    for name, values in times.items():
        print(f"  {name:30} {min(values) * 1000:5.0f} / {statistics.median(values) * 1000:5.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
