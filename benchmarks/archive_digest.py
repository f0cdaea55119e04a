"""What a compaction stores in the archive, as one SHA-256: the proof that a change to the write
path stores the same bytes.

    python benchmarks/archive_digest.py [--data ../shared/data] [--repo PATH] [--rows FILE]

Compacts the real Claude Code sessions of the dev data (``claude_code_cc0``: each session's
first 75 %, a scripted summarizer, the token tier on) into a fresh SQLite log, as
``archive.py``'s write benchmark does, and prints the row count and a SHA-256 over every
``archive`` row by id, every ``archive_parts`` and ``archive_context`` row, ``archive_sizes``
and both FTS indexes' terms (``fts5vocab`` instances). ``--repo``: the tree whose ``firewall``
is imported (another checkout, e.g. ``git archive`` of the tree before a change), so that both
trees are compared by the same script. ``--rows``: also write every ``archive`` row there, one
a line, by conversation and hash, without its id (a dropped row moves the ids of the rows after
it), so that ``diff`` of two trees' files shows which rows a change added, dropped or altered.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def compact_sessions(data: Path, log: object) -> bool:
    """Compact the real Claude Code sessions of ``data`` into ``log`` (each session's first
    75 %, a scripted summarizer, the token tier on), as ``archive.py``'s write benchmark does,
    with the ``firewall`` the caller put first on ``sys.path``; False when the data is absent."""
    from firewall.audit.archive import ArchiveLimits
    from firewall.compaction.guard import Firewall
    from firewall.formats import read_conversations

    sessions = data / "claude_code_cc0"
    if not sessions.is_dir():
        print(f"no dev data at {sessions} (pass --data)")
        return False
    conversations = []
    for path in sorted(sessions.glob("*.jsonl")):
        conversations += read_conversations(path, on_error=lambda error: None)
    fw = Firewall(audit=log, archive=ArchiveLimits())
    for conversation in conversations:
        keep = len(conversation.turns) - int(len(conversation.turns) * 0.75)
        result = fw.compact(conversation, lambda request: "Summary: work so far.",
                            keep_last=max(keep, 1))
        assert result.audit_error is None, result.audit_error
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--repo", default=str(REPO), help="the tree whose firewall is imported")
    parser.add_argument("--rows", metavar="FILE", help="write every archive row there, sorted")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.repo).resolve()))
    from firewall.audit import SQLiteAuditLog

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "audit.db"
        log = SQLiteAuditLog(db, key=b"bench")
        if not compact_sessions(Path(args.data), log):
            return 1
        log.close()
        digest = hashlib.sha256()
        with sqlite3.connect(db) as conn:
            (rows,) = conn.execute("SELECT count(*) FROM archive").fetchone()
            queries = ["SELECT * FROM archive ORDER BY id",
                       "SELECT rowid, * FROM archive_parts ORDER BY rowid",
                       "SELECT rowid, * FROM archive_context ORDER BY rowid",
                       "SELECT * FROM archive_sizes ORDER BY conversation_id"]
            for table in ("archive_parts", "archive_context"):
                conn.execute(f"CREATE VIRTUAL TABLE temp.v_{table} USING "
                             f"fts5vocab(main, {table}, 'instance')")
                queries.append(f"SELECT * FROM temp.v_{table} ORDER BY term, doc, col, offset")
            for query in queries:
                for row in conn.execute(query):
                    digest.update(repr(row).encode("utf-8", "surrogatepass"))
            if args.rows:
                conn.row_factory = sqlite3.Row
                lines = sorted(repr({k: row[k] for k in row.keys() if k != "id"})
                               for row in conn.execute("SELECT * FROM archive"))
                Path(args.rows).write_text("".join(line + "\n" for line in lines),
                                           encoding="utf-8", errors="surrogatepass")
    print(f"{rows:,} archive rows, sha256 {digest.hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
