"""The commands that read the audit log: ``audit list|show|literal|export|copy`` and ``recall``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..options import add_audit_options, missing_log_file, non_negative
from .common import (EXIT_FAIL, EXIT_OK, EXIT_USAGE, _cell, audit_log_of, render_table,
                     status_counts, statuses_help, write_line)


# ── audit ───────────────────────────────────────────────────────────────────────────────

def cmd_audit(args: argparse.Namespace) -> int:
    missing = missing_log_file(args.audit_db)
    if missing is not None:  # reading must not create the log (nor its folder)
        sys.stderr.write(f"firewall: no audit log at {missing} yet: nothing was recorded "
                         f"there (--audit-db or $FIREWALL_AUDIT_DB picks another)\n")
        return EXIT_OK if args.audit_command in ("list", "export") else EXIT_FAIL
    log = audit_log_of(args)
    if args.audit_command == "list":
        rows = [(s.id[:12], s.conversation_id, s.compaction, s.created_at.isoformat(
            timespec="seconds"), s.outcome, s.turns_compacted,
            f"{s.tokens_before}->{s.tokens_after}", status_counts(s.statuses))
            for s in log.list(limit=args.limit, conversation_id=args.conversation)]
        write_line(render_table(rows, ("id", "conversation", "#", "created", "outcome", "turns",
                                       "tokens", "literals")))
    elif args.audit_command == "show":
        record = log.get(args.id)
        write_line(record.model_dump_json(indent=2) if args.json else _render_record(record))
    elif args.audit_command == "literal":
        hits = log.find_literal(args.value)
        if not hits:
            write_line(f"{args.value!r} appears in no recorded compaction")
            return EXIT_FAIL
        rows = [(s.id[:12], s.conversation_id, s.compaction, o.status,
                 "yes" if o.in_summary else "", "yes" if o.in_ledger else "",
                 "yes" if o.in_tail else "", o.detail or "") for s, o in hits]
        write_line(render_table(rows, ("record", "conversation", "#", "status", "summary",
                                       "ledger", "tail", "detail")))
    else:  # export
        for record in log.export():
            write_line(record.model_dump_json())
    return EXIT_OK


def cmd_audit_copy(args: argparse.Namespace) -> int:
    """``audit copy SRC DST``: every record of a log, and its archive of literals (SQLite or
    PostgreSQL; a JSONL log has none), into a PostgreSQL one (see
    ``PostgresAuditLog.copy_from``: idempotent, hashes carried only under the same key)."""
    from ..audit import is_database_url, open_audit_log

    if not is_database_url(args.dst):
        sys.stderr.write(f"firewall: audit copy: {args.dst!r} is not a postgresql:// URL; "
                         f"copy into a PostgreSQL log (a file log is copied with cp)\n")
        return EXIT_USAGE
    missing = missing_log_file(args.src)
    if missing is not None:
        sys.stderr.write(f"firewall: audit copy: no audit log at {missing}\n")
        return EXIT_USAGE
    report = open_audit_log(args.dst).copy_from(open_audit_log(args.src), rekey=args.rekey)
    write_line(f"audit copy: {report}")
    return EXIT_OK


def _render_record(record: Any) -> str:
    """``audit show``: one compaction, readable (``--json`` gives the record as stored)."""
    from collections import Counter

    span = f"turns {record.span[0]}-{record.span[1]}" if record.span else "no turns"
    lines = [f"record        {record.id}",
             f"conversation  {record.conversation_id}, compaction {record.compaction}, "
             f"{record.created_at.isoformat(timespec='seconds')}",
             f"outcome       {record.outcome}" + (f": {record.error}" if record.error else ""),
             f"compacted     {span} ({record.turns_compacted}); tokens {record.tokens_before} "
             f"-> {record.tokens_after}, ledger {record.ledger_tokens}",
             f"how           {record.vendor_path}, policy {record.policy}"
             + (", placeholders" if record.placeholders else ""),
             "packs         " + (", ".join(f"{p.name} {p.version}" for p in record.packs)
                                 or "-")]
    counts = Counter(o.status for o in record.literals)
    lines.append("literals      " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                                     or "none"))
    # the conversation id and the error come from the input and the vendor, as a table's
    # cells do: escaped like them
    lines = [_cell(line) for line in lines]
    if record.attempts:
        lines += ["", render_table([(a.number, a.summarizer, a.model, a.verdict and
                               f"{a.verdict.present} present, {a.verdict.missing} missing, "
                               f"{a.verdict.mutated} mutated", a.error,
                               f"{a.duration_ms:.0f} ms") for a in record.attempts],
                             ("attempt", "summarizer", "model", "verdict", "error", "took"))]
    if record.literals:
        lines += ["", render_table([(o.status, o.value if o.value is not None else "(sensitive: "
                               "hashed)", o.rule, o.turn, o.role, o.detail)
                              for o in record.literals],
                             ("status", "literal", "rule", "turn", "role", "detail"))]
    return "\n".join(lines)


def add_audit_commands(sub: Any) -> None:
    audit = sub.add_parser("audit", help="read the audit log of compactions")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    listing = audit_sub.add_parser("list", help="recent compactions",
                                   description="Recent compactions, newest first; the literals "
                                               "column counts them by status, as compact's "
                                               "report does. " + statuses_help())
    listing.add_argument("--limit", type=non_negative, default=20, metavar="N",
                         help="the N most recent records (default 20)")
    listing.add_argument("--conversation", help="only this conversation id")
    show = audit_sub.add_parser("show", help="one record in full (id or prefix)")
    show.add_argument("id", help="the record id, or a unique prefix of it (audit list)")
    show.add_argument("--json", action="store_true", help="the record as stored, in JSON")
    literal = audit_sub.add_parser("literal", help="where did this literal survive?")
    literal.add_argument("value", help="the exact literal (a sensitive one is matched by its "
                                       "keyed hash)")
    export = audit_sub.add_parser("export", help="every record, one JSON object per line")
    for command in (listing, show, literal, export):
        add_audit_options(command)
        command.set_defaults(func=cmd_audit)
    copy = audit_sub.add_parser(
        "copy", help="copy every record of a log, and its archive of literals, into a "
                     "PostgreSQL log (run again: it skips what is there)")
    copy.add_argument("src", metavar="SRC", help="the log to read: SQLite file, .jsonl or URL")
    copy.add_argument("dst", metavar="DST", help="the PostgreSQL log: postgresql://...")
    copy.add_argument("--rekey", action="store_true",
                      help="SRC was hashed under another key: hash kept values again under "
                           "DST's; sensitive ones (stored only as hashes) keep SRC's")
    copy.set_defaults(func=cmd_audit_copy)
