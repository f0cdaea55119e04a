"""The `firewall` command: a thin layer over the library's public calls."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .compaction.budget import Budget, parse_budget
from .errors import FirewallError
from .options import (add_audit_options, add_dask_option, add_fail_fast_option,
                      add_keep_last_option, add_placeholders_option, add_rules_option,
                      add_salience_option, add_summarizer_options, add_tokens_option,
                      missing_log_file, non_negative, packs_from_args, salience_from_args,
                      summarizer_from_args)

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


def _packs(args: argparse.Namespace, *, strict: bool = True):
    """The packs selected by --rules / --only (see ``options``), plus a pack derived from the
    tool definitions given with --tools: their identifier parameters are pinned wherever they
    occur."""
    packs = packs_from_args(args, strict=strict)
    if getattr(args, "tools", None):
        from .authoring.toolschema import pack_from_tools

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


def _table(rows: list[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(c) for c in headers]] + [[_cell(c) for c in r] for r in rows]
    widths = [min(max(len(r[i]) for r in cells), 60) for i in range(len(headers))]
    lines = ["  ".join(c[:60].ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _out(line: str = "") -> None:
    from .audit import escape_surrogates  # a lone surrogate in the input is no crash here

    sys.stdout.write(escape_surrogates(line) + "\n")


# ── scan ────────────────────────────────────────────────────────────────────────────────

class ScanTask:
    """One conversation's scan output, as (stream, line) pairs in the order written: the map of
    ``scan`` (``distributed`` runs it on Dask workers); ``setup`` compiles the packs once per
    process."""

    def __init__(self, packs: list[Any], json_lines: bool) -> None:
        self.packs, self.json_lines = packs, json_lines

    def setup(self) -> Any:
        from .extraction.extract import Extractor

        return Extractor(self.packs)

    def __call__(self, extractor: Any, source: str, conversation: Any
                 ) -> tuple[list[tuple[str, str]], int, bool]:
        """(lines, literals found, a rule timed out)."""
        result = extractor.scan(conversation)
        lines = [("note", _timed_out(t, conversation.id, "must be kept verbatim"))
                 for t in result.timeouts]
        rows = []
        for lit in result.literals:
            # the conversation id is always there: a streamed file's length is not known
            record = {"id": conversation.id, "literal": lit.value, "rule": lit.rule,
                      "turn": lit.turn, "role": lit.role, "tool": lit.tool,
                      "field": lit.field, "start": lit.start, "end": lit.end,
                      "sensitive": lit.sensitive, "count": lit.count,
                      "mixed_script": lit.mixed_script}
            if self.json_lines:
                lines.append(("out", json.dumps(record, ensure_ascii=False)))
            else:
                rows.append((conversation.id, lit.value, lit.rule, lit.turn, lit.role,
                             lit.tool, MIXED_SCRIPT_NOTE if lit.mixed_script else ""))
        if rows:  # one table per conversation: the output is written as the file is read
            lines.append(("out", _table(rows, ("conversation", "literal", "rule", "turn",
                                               "role", "tool", "note")) + "\n"))
        return lines, len(result.literals), bool(result.timeouts)


def cmd_scan(args: argparse.Namespace) -> int:
    from .evaluation.distributed import open_mapper

    task = ScanTask(_packs(args), args.json)
    total, failed = 0, False
    with open_mapper(args.dask, args.dask_partition) as mapper, \
            mapper.files([args.file], fail_fast=args.fail_fast, label="scan") as files:
        for _, (lines, found, timed_out) in mapper.map(task, files):
            for stream, line in lines:
                (files.note if stream == "note" else files.out)(line)
            total += found
            failed = failed or timed_out
        bad = files.report()
    if not args.json:
        _out(f"{total} literal(s)")
    return EXIT_FAIL if failed or bad else EXIT_OK


def _timed_out(timeout: Any, conversation_id: str, consequence: str) -> str:
    return (f"firewall: rule {timeout.rule} timed out on turn {timeout.turn} ({timeout.field}) "
            f"of {conversation_id}: that turn {consequence}")


def _files(args: argparse.Namespace, paths: Sequence[str], label: str):
    from .inputs import ConversationFiles

    return ConversationFiles(paths, fail_fast=getattr(args, "fail_fast", False), label=label)


# ── rules ───────────────────────────────────────────────────────────────────────────────

def _named_packs(args: argparse.Namespace):
    """``rules test | lint | list PACK...`` look at the packs named, not at the built-ins too."""
    from .extraction.packs import load_packs

    return load_packs(*args.rules, strict=False)


def cmd_rules_test(args: argparse.Namespace) -> int:
    from .extraction.examples import noise_reports, run_examples
    from .extraction.extract import Extractor

    packs = _named_packs(args)
    extractor = Extractor(packs)
    reports = run_examples(packs, extractor) + noise_reports(packs, extractor)
    failures = 0
    for report in reports:
        status = "ok" if not report.failures else "FAIL"
        _out(f"{status:4}  {report.rule}  ({report.examples} example(s))")
        for failure in report.failures:
            failures += 1
            _out(f"      {failure.describe()}")
    _out(f"\n{len(reports)} rule(s), {failures} failing example(s)")
    return EXIT_FAIL if failures else EXIT_OK


def cmd_rules_lint(args: argparse.Namespace) -> int:
    from .authoring.lint import lint

    findings = lint(_named_packs(args))
    for finding in findings:
        _out(str(finding))
    errors = sum(f.severity == "error" for f in findings)
    _out(f"{errors} error(s), {len(findings) - errors} warning(s)")
    return EXIT_FAIL if errors else EXIT_OK


def cmd_rules_list(args: argparse.Namespace) -> int:
    for pack in _named_packs(args):
        _out(f"{pack.name} {pack.version}: {pack.description}")
        for qid, rule in zip(pack.qualified_ids(), pack.rules):
            _out(f"  {qid:40} {rule.kind:9} {rule.description}")
    return EXIT_OK


# ── compact / check ─────────────────────────────────────────────────────────────────────

def _audit_log(args: argparse.Namespace):
    """The log to read (an unopenable one is an error), or for ``compact`` to write to (an
    unopenable one is reported after the output, like a failed write)."""
    from .audit import open_audit_log, open_audit_sink

    if args.command == "compact":
        return None if args.no_audit else open_audit_sink(args.audit_db)
    return open_audit_log(args.audit_db)


def _render_messages(messages: list[Any], ledger: Any = None) -> str:
    """The compacted conversation for a reader (``--json`` and ``--out`` give it exactly)."""
    lines = []
    for message in messages:
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else message
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=1)
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        lines.append(f"── {role} " + "─" * max(0, 70 - len(role)))
        lines.append(_readable_blocks(content or "", ledger))
        if calls:
            lines.append(f"[tool calls] {json.dumps(calls, ensure_ascii=False)}")
    return "\n".join(lines)


def _template(args: argparse.Namespace) -> str | None:
    """The text of ``--template FILE``: the harness's instruction template."""
    if not args.template:
        return None
    try:
        with open(args.template, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise FirewallError(f"cannot read template {args.template}: {exc}") from None


# a \u003c or \u003e escape in JSON text (not an escaped backslash followed by "u003c")
_ANGLE_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u003([ce])")


def _readable_blocks(text: str, ledger: Any) -> str:
    """``text`` with ``<`` and ``>`` shown as themselves inside the ledger's blocks. The block
    itself escapes them in quoted values (so that no value can forge a block delimiter); a
    reader wants ``2>&1``, not ``2\\u003e&1``. Display only: the messages are unchanged."""
    if ledger is None or "\\u003" not in text:
        return text
    from .compaction.ledger import find_blocks

    spans = find_blocks(text, ledger.nonce, ledger.key)
    for start, end in reversed(spans):
        block = _ANGLE_ESCAPE.sub(lambda m: m.group(1) + ("<" if m.group(2) == "c" else ">"),
                                  text[start:end])
        text = text[:start] + block + text[end:]
    return text


def cmd_compact(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .audit import escape_surrogates
    from .compaction.guard import Firewall
    from .compaction.ledger import Ledger

    fw = Firewall(_packs(args), budget_tokens=args.budget, max_retries=args.max_retries,
                  policy=args.policy, keep_last=args.keep_last, placeholders=args.placeholders,
                  required=args.required, audit=_audit_log(args),
                  summarizer=summarizer_from_args(args),
                  template=_template(args), salience=salience_from_args(args))
    ledger_path = Path(args.ledger) if args.ledger else None
    ledger = Ledger.from_json(ledger_path.read_text("utf-8")) \
        if ledger_path and ledger_path.exists() else None
    status, not_compacted = EXIT_OK, False
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    try:
        with _files(args, [args.file], "compact") as files:
            for _, conversation in files:
                result = fw.compact(conversation, ledger=ledger)
                if ledger_path:
                    ledger = result.ledger
                report = _compaction_report(result, audited=fw.audit is not None)
                for timeout in result.timeouts:
                    files.note(_timed_out(timeout, conversation.id, "is kept verbatim"))
                not_compacted = not_compacted or not result.compacted
                if result.audit_error:
                    status = EXIT_FAIL
                    files.note(f"firewall: audit log: {result.audit_error}")
                document = _document(conversation, result.messages)
                if out is not None:  # written as it goes: memory holds one conversation
                    out.write(escape_surrogates(json.dumps(document, ensure_ascii=False)) + "\n")
                    out.flush()
                if args.json:
                    files.out(json.dumps({"messages": document, "report": report},
                                         ensure_ascii=False))
                elif not args.out:
                    files.out(_render_messages(result.messages, result.ledger))
                if not args.json:
                    files.out(_report_line(report))
            if files.report():
                status = EXIT_FAIL
    finally:
        if out is not None:
            out.close()
    if ledger_path and ledger is not None:  # it holds secrets and the HMAC key: 0600
        from .integrations.hooks import write_atomic

        write_atomic(ledger_path, ledger.to_json())
    # a script must tell "the summarizer never ran" from success: its own exit code
    return EXIT_NOT_COMPACTED if not_compacted else status


def _compaction_report(result: Any, *, audited: bool) -> dict[str, Any]:
    report = {"id": result.conversation.id, "compacted": result.compacted, **result.report(),
              "tokens_before": result.record.tokens_before,
              "tokens_after": result.record.tokens_after,
              "audit_id": result.record.id if audited and not result.audit_error else None}
    if result.record.error:
        report["error"] = result.record.error
    if result.audit_error:
        report["audit_error"] = result.audit_error
    return report


def _document(conversation, messages: list[Any]) -> Any:
    """The compacted conversation in the shape it was read: Anthropic keeps ``system`` apart."""
    system = [t for t in conversation.turns if t.role == "system" and t.raw is None]
    if conversation.format == "anthropic" and system:
        return {"id": conversation.id, "system": system[0].text, "messages": messages}
    return {"id": conversation.id, "messages": messages}


def _report_line(report: dict[str, Any]) -> str:
    if not report["compacted"]:
        return f"\n[{report['id']}] not compacted: {report.get('error', 'unknown reason')}; " \
               f"the conversation is unchanged ({report['pinned']} literal(s) pinned)"
    text = (f"\n[{report['id']}] {report['pinned']} literal(s) pinned, {report['reasked']} "
            f"re-ask(s); literals by status: {status_counts(report)}; "
            f"{report['tokens_before']} -> {report['tokens_after']} tokens")
    if report.get("audit_id"):
        text += f"; audit record {report['audit_id'][:12]}"
    return text


def status_counts(counts: dict[str, int]) -> str:
    """``in_summary 13, kept_verbatim 8``: the literals of one record counted by status, the
    same names and order in ``compact``'s report and in ``audit list``."""
    from .audit import STATUSES

    return ", ".join(f"{status} {counts[status]}" for status in STATUSES
                     if counts.get(status)) or "none"


def _statuses_help() -> str:
    from .audit import STATUS_MEANINGS

    return ("Each literal of a compaction (pinned, or evicted by the budget) is counted once, "
            "by status: " + "; ".join(f"{k}: {v}" for k, v in STATUS_MEANINGS.items()) + ".")


def cmd_check(args: argparse.Namespace) -> int:
    from .compaction.guard import Firewall
    from .compaction.validate import Finding, occurs

    conversations = []
    with _files(args, [args.file], "check") as files:
        for _, conversation in files:
            if args.id in (None, conversation.id):
                conversations.append(conversation)
                if len(conversations) > 1:
                    break  # ambiguous already: no need to read on
        bad = files.report()
    if len(conversations) != 1:
        how_many = "more than one" if conversations else "no"
        sys.stderr.write(f"firewall: {args.file} holds {how_many} matching conversation; "
                         f"pick one with --id\n")
        return EXIT_USAGE
    try:
        with open(args.summary, encoding="utf-8") as handle:
            summary = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"firewall: cannot read summary {args.summary}: {exc}\n")
        return EXIT_USAGE
    fw = Firewall(_packs(args), required=args.required, template=_template(args))
    literals = fw.scan(conversations[0])
    verdict = fw.check(conversations[0], summary, strict=args.strict, literals=literals)
    # the verdict's findings, then every other literal: present, or just not in the summary
    findings = list(verdict.findings)
    judged = {f.value for f in findings}
    for lit in literals:
        if lit.value not in judged:
            judged.add(lit.value)
            findings.append(Finding(lit.value, lit.rule,
                                    "present" if occurs(summary, lit.value) else "missing",
                                    required=False))
    rows = []
    for finding in findings:
        if args.json:
            record = {"literal": finding.value, "status": finding.status, "rule": finding.rule,
                      "required": finding.required}
            if finding.status == "mutated":
                record.update(span=list(finding.span), resembles=finding.resembles,
                              reason=finding.reason)
            _out(json.dumps(record, ensure_ascii=False))
        else:
            note = f"{finding.resembles!r} ({finding.reason})" if finding.status == "mutated" \
                else ""
            rows.append((finding.status, finding.value, finding.rule,
                         "yes" if finding.required else "", note))
    if not args.json:
        _out(_table(rows, ("status", "literal", "rule", "required", "summary wrote")))
        counts = {s: sum(f.status == s for f in findings) for s in ("present", "missing",
                                                                    "mutated")}
        _out(f"\n{counts['present']} present, {counts['missing']} missing, {counts['mutated']} "
             f"mutated; {_check_outcome(verdict)}")
    return EXIT_OK if verdict.ok and not bad else EXIT_FAIL


def _check_outcome(verdict) -> str:
    """What ``check`` fails on, naming each literal: any mutation, any missing required one."""
    if verdict.ok:
        return "ok"
    reasons = [f"{f.value!r} mutated into {f.resembles!r} ({f.reason})" for f in verdict.mutated]
    reasons += [f"required {f.value!r} missing" for f in verdict.missing]
    return "FAIL: " + "; ".join(reasons)


# ── audit ───────────────────────────────────────────────────────────────────────────────

def cmd_audit(args: argparse.Namespace) -> int:
    missing = missing_log_file(args.audit_db)
    if missing is not None:  # reading must not create the log (nor its folder)
        sys.stderr.write(f"firewall: no audit log at {missing} yet: nothing was recorded "
                         f"there (--audit-db or $FIREWALL_AUDIT_DB picks another)\n")
        return EXIT_OK if args.audit_command in ("list", "export") else EXIT_FAIL
    log = _audit_log(args)
    if args.audit_command == "list":
        rows = [(s.id[:12], s.conversation_id, s.compaction, s.created_at.isoformat(
            timespec="seconds"), s.outcome, s.turns_compacted,
            f"{s.tokens_before}->{s.tokens_after}", status_counts(s.statuses))
            for s in log.list(limit=args.limit, conversation_id=args.conversation)]
        _out(_table(rows, ("id", "conversation", "#", "created", "outcome", "turns", "tokens",
                           "literals")))
    elif args.audit_command == "show":
        record = log.get(args.id)
        _out(record.model_dump_json(indent=2) if args.json else _render_record(record))
    elif args.audit_command == "literal":
        hits = log.find_literal(args.value)
        if not hits:
            _out(f"{args.value!r} appears in no recorded compaction")
            return EXIT_FAIL
        rows = [(s.id[:12], s.conversation_id, s.compaction, o.status,
                 "yes" if o.in_summary else "", "yes" if o.in_ledger else "",
                 "yes" if o.in_tail else "", o.detail or "") for s, o in hits]
        _out(_table(rows, ("record", "conversation", "#", "status", "summary", "ledger", "tail",
                           "detail")))
    else:  # export
        for record in log.export():
            _out(record.model_dump_json())
    return EXIT_OK


def cmd_audit_copy(args: argparse.Namespace) -> int:
    """``audit copy SRC DST``: every record of a log into a PostgreSQL one (see
    ``PostgresAuditLog.copy_from``: idempotent, hashes carried only under the same key)."""
    from .audit import is_database_url, open_audit_log

    if not is_database_url(args.dst):
        sys.stderr.write(f"firewall: audit copy: {args.dst!r} is not a postgresql:// URL; "
                         f"copy into a PostgreSQL log (a file log is copied with cp)\n")
        return EXIT_USAGE
    missing = missing_log_file(args.src)
    if missing is not None:
        sys.stderr.write(f"firewall: audit copy: no audit log at {missing}\n")
        return EXIT_USAGE
    report = open_audit_log(args.dst).copy_from(open_audit_log(args.src), rekey=args.rekey)
    _out(f"audit copy: {report}")
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
    if record.attempts:
        lines += ["", _table([(a.number, a.summarizer, a.model, a.verdict and
                               f"{a.verdict.present} present, {a.verdict.missing} missing, "
                               f"{a.verdict.mutated} mutated", a.error,
                               f"{a.duration_ms:.0f} ms") for a in record.attempts],
                             ("attempt", "summarizer", "model", "verdict", "error", "took"))]
    if record.literals:
        lines += ["", _table([(o.status, o.value if o.value is not None else "(sensitive: "
                               "hashed)", o.rule, o.turn, o.role, o.detail)
                              for o in record.literals],
                             ("status", "literal", "rule", "turn", "role", "detail"))]
    return "\n".join(lines)


# ── wiring ──────────────────────────────────────────────────────────────────────────────

def _add_pack_options(parser: argparse.ArgumentParser) -> None:
    add_rules_option(parser)
    parser.add_argument("--tools", metavar="TOOLS.json",
                        help="the agent's tool definitions (Anthropic or OpenAI): pin the "
                             "values of their identifier parameters")


def _install_token_counter(args: argparse.Namespace) -> None:
    from .tokens import counter_named, is_vendor_counter, set_token_counter

    sample = _counter_sample(args) if is_vendor_counter(args.tokens) else ""
    set_token_counter(counter_named(args.tokens, sample))


def _counter_sample(args: argparse.Namespace, limit: int = 100_000) -> str:
    """What a vendor counter is calibrated on: the input's turns as placeholder mode sends
    them (every secret a rule finds masked), up to ``limit`` characters."""
    from pathlib import Path

    from .formats import read_conversations
    from .compaction.guard import Firewall

    path = getattr(args, "file", None) or (getattr(args, "files", None) or [None])[0]
    if not path or not Path(path).is_file():
        return ""
    fw = Firewall(_packs(args) if hasattr(args, "rules") else None, placeholders=True)
    pieces, size = [], 0
    for conversation in read_conversations(path):
        for turn in fw.masked_turns(conversation):
            pieces.append(turn.text)
            size += len(turn.text)
            if size >= limit:
                return "\n".join(pieces)[:limit]
    return "\n".join(pieces)


def build_parser(running: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the command ``running`` (about to run), the subcommands defined in
    other modules (eval, rules suggest, hooks: they import the ledger, YAML...) are left as
    empty stubs unless it is theirs, which keeps every start-up short (a hook runs at every
    compaction event)."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="firewall", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keep the exact strings an agent depends on through context compaction.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="list the literals found in a conversation file")
    scan.add_argument("file", help=FILE_HELP)
    _add_pack_options(scan)
    scan.add_argument("--json", action="store_true", help="one JSON object per line")
    add_fail_fast_option(scan)
    add_dask_option(scan)
    scan.set_defaults(func=cmd_scan)

    compact = sub.add_parser(
        "compact", help="compact a conversation with pinned literals", epilog=COMPACT_EXITS,
        description="Compact each conversation of FILE: summary + ledger block + verbatim "
                    "tail. The human view shows < and > unescaped inside the ledger block; "
                    "--json and --out give the messages byte for byte. The report line counts "
                    "literals by status, as `audit list` does. " + _statuses_help())
    compact.add_argument("file", help=FILE_HELP)
    _add_pack_options(compact)
    add_tokens_option(compact, "estimate")
    add_keep_last_option(compact, "")
    add_summarizer_options(compact)
    compact.add_argument("--max-retries", type=non_negative, default=2, metavar="N",
                         help="times the summarizer is asked again, with feedback, when its "
                              "summary lost or mutated a required literal (default 2)")
    compact.add_argument("--policy", choices=("reinject", "repair", "keep_source", "raise"),
                         default="reinject", help="when required literals are still lost")
    compact.add_argument("--budget", type=parse_budget, default=Budget(), metavar="auto|TOKENS|P%",
                         help="token budget of the re-injected ledger: auto (the default: "
                              f"{str(Budget()).replace('%', '%%')}), tokens, or a share of the "
                              "compacted span, e.g. 5%%")
    compact.add_argument("--required", choices=("rules", "user", "all"), default="user",
                         help="literals the summary itself must carry (default: user-typed "
                              "and rules marked required)")
    add_placeholders_option(compact)
    compact.add_argument("--ledger", metavar="PATH",
                         help="ledger JSON to continue from and to save (cumulative)")
    add_audit_options(compact)
    add_salience_option(compact)
    compact.add_argument("--out", metavar="PATH", help="write the compacted conversation(s)")
    compact.add_argument("--json", action="store_true", help="JSON output with a report")
    add_fail_fast_option(compact)
    compact.set_defaults(func=cmd_compact)

    check = sub.add_parser("check", help="validate any compactor's summary of a conversation",
                           description="Exit 1 when the summary mutates any literal of the "
                                       "conversation (a near miss of a real value that the "
                                       "conversation does not itself hold) or lacks a required "
                                       "one; the last line names each.")
    check.add_argument("file", help=FILE_HELP)
    check.add_argument("--summary", required=True, metavar="SUMMARY_FILE",
                       help="the summary to check, as a text file")
    check.add_argument("--id", help="the conversation to check, in a multi-conversation file")
    _add_pack_options(check)
    add_tokens_option(check, "estimate")
    check.add_argument("--required", choices=("rules", "user", "all"), default="user",
                       help="literals the summary itself must carry (default: user-typed "
                            "and rules marked required)")
    check.add_argument("--strict", action="store_true",
                       help="require every literal worth pinning: rule-required ones, and "
                            "identifier-shaped ones (4+ characters with a digit, separator or "
                            "case change, or a code of 5+ capitals) from rules of priority 50+")
    for command in (compact, check):
        command.add_argument("--template", metavar="FILE",
                             help="the agent harness's instruction template: user-typed "
                                  "literals found in it (or in the system prompt) are not "
                                  "required of the summary")
    check.add_argument("--json", action="store_true", help="one JSON object per literal")
    add_fail_fast_option(check)
    check.set_defaults(func=cmd_check)

    audit = sub.add_parser("audit", help="read the audit log of compactions")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    listing = audit_sub.add_parser("list", help="recent compactions",
                                   description="Recent compactions, newest first; the literals "
                                               "column counts them by status, as compact's "
                                               "report does. " + _statuses_help())
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
        "copy", help="copy every record of a log into a PostgreSQL log (run again: it "
                     "skips what is there)")
    copy.add_argument("src", metavar="SRC", help="the log to read: SQLite file, .jsonl or URL")
    copy.add_argument("dst", metavar="DST", help="the PostgreSQL log: postgresql://...")
    copy.add_argument("--rekey", action="store_true",
                      help="SRC was hashed under another key: hash kept values again under "
                           "DST's; sensitive ones (stored only as hashes) keep SRC's")
    copy.set_defaults(func=cmd_audit_copy)

    rules = sub.add_parser("rules", help="test, lint, list and import rule packs")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    for name, func, text in (("test", cmd_rules_test, "run every rule's examples"),
                             ("lint", cmd_rules_lint, "find risky or incomplete rules"),
                             ("list", cmd_rules_list, "list packs and rules")):
        command = rules_sub.add_parser(name, help=text)
        command.add_argument("rules", nargs="*", metavar="PACK_OR_PATH",
                             help="packs to use (default: all built-in)")
        command.set_defaults(func=func)
    def lazy(name: str, register: Callable[[], Any], stubs: Any = sub) -> None:
        if running in (None, name.split()[0]):
            register()
        else:  # never shown: only the command about to run parses its arguments
            stubs.add_parser(name.split()[-1])

    lazy("rules suggest", lambda: _import("authoring.suggest").add_suggest_command(rules_sub), rules_sub)
    lazy("rules import", lambda: _import("authoring.gitleaks").add_import_command(rules_sub), rules_sub)
    lazy("eval", lambda: _import("evaluation.evaluate").add_eval_command(sub))
    lazy("replay", lambda: _import("evaluation.replay").add_replay_command(sub))
    lazy("hooks", lambda: _import("integrations.hooks").add_hooks_commands(sub))
    lazy("diagnose", lambda: _import("evaluation.diagnostics").add_diagnose_command(sub))
    lazy("report", lambda: _import("evaluation.report").add_report_command(sub))
    lazy("mcp", lambda: _import("integrations.mcp_server").add_mcp_command(sub))
    lazy("salience", lambda: _import("evaluation.salience_fit").add_salience_command(sub))
    lazy("recall", lambda: _import("audit.recall_cli").add_recall_command(sub))
    return parser


def _import(module: str) -> Any:
    import importlib

    return importlib.import_module(f".{module}", __package__)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hooks"]:  # runs at every agent event: no need for the rest of the CLI
        from .integrations.hooks import main as hooks_main

        return hooks_main(argv[1:])
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        if getattr(args, "tokens", None):
            _install_token_counter(args)
        return func(args)
    except FirewallError as exc:
        sys.stderr.write(f"firewall: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `firewall scan ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
