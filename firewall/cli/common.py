"""What the commands share: exit codes, help texts, tables, the packs and the audit log a
command line names."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import FirewallError
from ..options import packs_from_args


MIXED_SCRIPT_NOTE = "mixed script: look-alike letters, a spoofing signal"
# documented in the README and in `firewall --help`
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_NOT_COMPACTED = 0, 1, 2, 3
EXIT_CODES = """exit codes:
  0  done
  1  done, but something failed: a bad input line was skipped, a rule timed out (scan), a
     check failed, the audit log could not be written, audit literal found nothing
  2  usage or input error (with --fail-fast: stopped at the first bad line)
  3  compact: a conversation was not compacted (the summarizer failed or never ran, or there
     was nothing to compact); the report says why"""
COMPACT_EXITS = ("exit 3 when a conversation was not compacted (summarizer unreachable, "
                 "missing credentials, nothing to compact), 1 when a bad line was skipped or "
                 "the audit log failed, 0 otherwise")
FILE_HELP = ("conversations: JSONL (one per line), or one JSON conversation (a list of "
             "messages, or an object with messages)")


def packs_of(args: argparse.Namespace, *, strict: bool = True):
    """The packs selected by --rules / --only (see ``options``), plus a pack derived from the
    tool definitions given with --tools: their identifier parameters are pinned wherever they
    occur."""
    packs = packs_from_args(args, strict=strict)
    if getattr(args, "tools", None):
        from ..authoring.toolschema import pack_from_tools

        try:
            with open(args.tools, encoding="utf-8") as handle:
                tools = json.load(handle)
        except (OSError, ValueError) as exc:
            raise FirewallError(f"cannot read tool definitions {args.tools}: {exc}") from None
        packs.append(pack_from_tools(tools))
    return packs


def _cell(value: Any) -> str:
    """A table cell: control and other unprintable characters escaped (recorded tool output can
    hold terminal escape sequences)."""
    text = "" if value is None else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def render_table(rows: list[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(c) for c in headers]] + [[_cell(c) for c in r] for r in rows]
    widths = [min(max(len(r[i]) for r in cells), 60) for i in range(len(headers))]
    lines = ["  ".join(c[:60].ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_line(line: str = "") -> None:
    from ..audit import escape_surrogates  # a lone surrogate in the input is no crash here

    sys.stdout.write(escape_surrogates(line) + "\n")


def audit_log_of(args: argparse.Namespace):
    """The log to read (an unopenable one is an error), or for ``compact`` to write to (an
    unopenable one is reported after the output, like a failed write)."""
    from ..audit import open_audit_log, open_audit_sink

    if args.command == "compact":
        return None if args.no_audit else open_audit_sink(args.audit_db)
    return open_audit_log(args.audit_db)


def status_counts(counts: dict[str, int]) -> str:
    """``in_summary 13, kept_verbatim 8``: the literals of one record counted by status, the
    same names and order in ``compact``'s report and in ``audit list``."""
    from ..audit import STATUSES

    return ", ".join(f"{status} {counts[status]}" for status in STATUSES
                     if counts.get(status)) or "none"


def statuses_help() -> str:
    from ..audit import STATUS_MEANINGS

    return ("Each literal of a compaction (pinned, or evicted by the budget) is counted once, "
            "by status: " + "; ".join(f"{k}: {v}" for k, v in STATUS_MEANINGS.items()) + ".")
