"""Reading back a log that may be crafted: a log is a file anyone can hand over
(``--audit-db``), and a shared one has writers other than compactions. What recall reads
must be of the types and sizes a compaction writes, or it is an error naming the log."""

from __future__ import annotations

from typing import Any

NOT_A_LOG = "it is corrupt or not a literal-firewall audit log: a row no compaction writes"
# the longest string a recall reads: a value is at most the ledger's LITERAL_MAX_CHARS, its line
# about archive.CONTEXT_CHARS around it; a crafted row of a gigabyte is an error, not an answer
READ_MAX_CHARS = 8192 + 1024


def checked_hits(hits: list[Any]) -> list[Any]:
    """``hits``, each field of the type and size a compaction writes; raises ``TypeError``
    otherwise. SQLite keeps any value in any column (a crafted file puts text where a turn
    goes), and in either store a writer that is not a compaction may put a megabyte in a value
    that would reach the agent's context whole."""
    for hit in hits:
        numbers = (hit.first_turn, hit.last_turn, hit.compaction)
        texts = (hit.value, hit.kind, hit.rule, hit.role, hit.conversation,
                 "" if hit.context is None else hit.context)
        if not (all(type(n) is int for n in numbers) and all(type(t) is str for t in texts)):
            raise TypeError(f"an archive row of types {[type(f).__name__ for f in numbers]}")
        longest = max(len(t) for t in texts)
        if longest > READ_MAX_CHARS:
            raise TypeError(f"an archive row holding {longest:,} characters")
    return hits


__all__ = ["NOT_A_LOG", "READ_MAX_CHARS", "checked_hits"]
