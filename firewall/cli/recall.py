"""``firewall recall QUERY``: a literal a compaction extracted, pinned or not, found again.

Reads the archive of the audit log (``firewall.archive``): by the exact value, a prefix or
suffix, a whole part (a base name, a path segment, a snake_case/camelCase/dotted part), or
words of the line it was first seen in. Exit 1 when nothing matches. Sensitive literals are
never returned.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..audit.archive import DEFAULT_LIMIT, MAX_LIMIT, Query
from ..options import add_audit_options, missing_log_file

EXIT_OK, EXIT_NONE = 0, 1


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"a number from 1 to {MAX_LIMIT}, not {text!r}")
    return value


def cmd_recall(args: argparse.Namespace) -> int:
    from ..audit import open_audit_log
    from ..integrations.recall_text import hit_json, render

    missing = missing_log_file(args.audit_db)
    if missing is not None:  # reading must not create the log
        sys.stderr.write(f"firewall: no audit log at {missing} yet: nothing was archived there "
                         f"(--audit-db or $FIREWALL_AUDIT_DB picks another)\n")
        return EXIT_NONE
    log = open_audit_log(args.audit_db)
    query = Query.of(args.query, conversation=args.conversation, kind=args.kind, rule=args.rule,
                     limit=args.limit)
    search = getattr(log, "recall", None)
    if search is None:
        from .archive import NO_ARCHIVE
        from ..errors import AuditError

        raise AuditError(f"audit log {getattr(log, 'path', log)}: {NO_ARCHIVE}")
    hits = search(query)
    if not hits:
        sys.stderr.write(f"firewall: nothing archived matches {args.query!r}\n")
        return EXIT_NONE
    # hits hold tool output: written as data (no escape sequence, no ledger delimiter)
    out = sys.stdout
    for hit in hits:
        out.write((hit_json(hit.to_dict()) if args.json else render(hit)) + "\n")
    return EXIT_OK


def add_recall_command(sub: Any) -> argparse.ArgumentParser:
    recall = sub.add_parser(
        "recall", help="find a literal the compactions archived, by any part of it",
        description="Search the archive of every literal the compactions extracted, pinned "
                    "or not: the exact value, then values it begins or ends (an id's first "
                    "characters, a base name), then a whole part (path segment, snake_case / "
                    "camelCase / dotted part), then words of the line it was first seen in "
                    "(lines holding more of them first, the value nearest them first); "
                    "recency breaks ties. Exit 1 when nothing matches. Sensitive "
                    "literals are kept as hashes only and never returned. JSONL logs keep no "
                    "archive.")
    recall.add_argument("query", metavar="QUERY", help="a value, a part of one, or words")
    recall.add_argument("--conversation", metavar="ID", help="only this conversation")
    recall.add_argument("--kind", metavar="K",
                        help="only this kind (path, identifier, alnum_code, uuid_hex, numeric, "
                             "email, other, or token: the swept tokens)")
    recall.add_argument("--rule", metavar="R", help="only literals of this rule (pack/rule-id)")
    recall.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N",
                        help=f"at most N hits (default {DEFAULT_LIMIT})")
    add_audit_options(recall)
    recall.add_argument("--json", action="store_true",
                        help="one JSON object per hit: value, kind, rule, role, first_turn, "
                             "last_turn, compaction, conversation, context, score")
    recall.set_defaults(func=cmd_recall)
    return recall
