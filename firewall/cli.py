"""The `firewall` command: a thin layer over the library's public calls."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .budget import Budget, parse_budget
from .errors import FirewallError
from .evaluate import add_eval_command
from .hooks import add_hooks_commands, write_atomic
from .suggest import add_suggest_command

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MIXED_SCRIPT_NOTE = "mixed script: look-alike letters, a spoofing signal"


def _packs(args: argparse.Namespace, *, strict: bool = True):
    """The packs named by --rules (default: every built-in), plus a pack derived from the tool
    definitions given with --tools: their identifier parameters are pinned wherever they occur."""
    from .packs import load_packs

    packs = load_packs(*(args.rules or ()), strict=strict)
    if getattr(args, "tools", None):
        from .toolschema import pack_from_tools

        try:
            with open(args.tools, encoding="utf-8") as handle:
                tools = json.load(handle)
        except (OSError, ValueError) as exc:
            raise FirewallError(f"cannot read tool definitions {args.tools}: {exc}") from None
        packs.append(pack_from_tools(tools))
    return packs


def _table(rows: list[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [min(max(len(r[i]) for r in cells), 60) for i in range(len(headers))]
    lines = ["  ".join(c[:60].ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _out(line: str = "") -> None:
    from .audit import escape_surrogates  # a lone surrogate in the input is no crash here

    sys.stdout.write(escape_surrogates(line) + "\n")


# ── scan ────────────────────────────────────────────────────────────────────────────────

def cmd_scan(args: argparse.Namespace) -> int:
    from .extract import Extractor
    from .formats import read_conversations

    extractor = Extractor(_packs(args))
    rows, failed = [], False
    for conversation in read_conversations(args.file):
        result = extractor.scan(conversation)
        for timeout in result.timeouts:
            failed = True
            sys.stderr.write(f"firewall: rule {timeout.rule} timed out on turn {timeout.turn} "
                             f"({timeout.field}) of {conversation.id}: that turn must be kept "
                             f"verbatim\n")
        for lit in result.literals:
            # the conversation id is always there: a streamed file's length is not known upfront
            record = {"id": conversation.id, "literal": lit.value, "rule": lit.rule, "turn": lit.turn, "role": lit.role,
                      "tool": lit.tool, "field": lit.field, "start": lit.start, "end": lit.end,
                      "sensitive": lit.sensitive, "count": lit.count,
                      "mixed_script": lit.mixed_script}
            if args.json:
                _out(json.dumps(record, ensure_ascii=False))
            else:
                rows.append((conversation.id, lit.value, lit.rule, lit.turn, lit.role, lit.tool,
                             MIXED_SCRIPT_NOTE if lit.mixed_script else ""))
    if not args.json:
        _out(_table(rows, ("conversation", "literal", "rule", "turn", "role", "tool", "note")))
        _out(f"\n{len(rows)} literal(s)")
    return EXIT_FAIL if failed else EXIT_OK


# ── rules ───────────────────────────────────────────────────────────────────────────────

def cmd_rules_test(args: argparse.Namespace) -> int:
    from .examples import noise_reports, run_examples
    from .extract import Extractor

    packs = _packs(args, strict=False)
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
    from .lint import lint

    findings = lint(_packs(args, strict=False))
    for finding in findings:
        _out(str(finding))
    errors = sum(f.severity == "error" for f in findings)
    _out(f"{errors} error(s), {len(findings) - errors} warning(s)")
    return EXIT_FAIL if errors else EXIT_OK


def cmd_rules_list(args: argparse.Namespace) -> int:
    for pack in _packs(args, strict=False):
        _out(f"{pack.name} {pack.version}: {pack.description}")
        for qid, rule in zip(pack.qualified_ids(), pack.rules):
            _out(f"  {qid:40} {rule.kind:9} {rule.description}")
    return EXIT_OK


# ── compact / check ─────────────────────────────────────────────────────────────────────

def _summarizer(args: argparse.Namespace):
    name = args.summarizer
    if name == "extractive":
        from .summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "anthropic":
        from .summarizers.anthropic import AnthropicSummarizer

        return AnthropicSummarizer(**({"model": args.model} if args.model else {}))
    from .summarizers.openai import OpenAISummarizer

    kwargs = {"model": args.model} if args.model else {}
    return OpenAISummarizer(base_url=args.base_url, **kwargs)


def _audit_log(args: argparse.Namespace):
    """The log to read (an unopenable one is an error), or for ``compact`` to write to (an
    unopenable one is reported after the output, like a failed write)."""
    from .audit import open_audit_log, open_audit_sink

    if args.command == "compact":
        return None if args.no_audit else open_audit_sink(args.audit_db)
    return open_audit_log(args.audit_db)


def _render_messages(messages: list[Any]) -> str:
    lines = []
    for message in messages:
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else message
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=1)
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        lines.append(f"── {role} " + "─" * max(0, 70 - len(role)))
        lines.append(content or "")
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


def cmd_compact(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .formats import read_conversations
    from .guard import Firewall
    from .ledger import Ledger

    fw = Firewall(_packs(args), budget_tokens=args.budget, max_retries=args.max_retries,
                  policy=args.policy, keep_last=args.keep_last, placeholders=args.placeholders,
                  required=args.required, audit=_audit_log(args), summarizer=_summarizer(args),
                  template=_template(args))
    ledger_path = Path(args.ledger) if args.ledger else None
    ledger = Ledger.from_json(ledger_path.read_text("utf-8")) \
        if ledger_path and ledger_path.exists() else None
    outputs, status = [], EXIT_OK
    for conversation in read_conversations(args.file):
        result = fw.compact(conversation, ledger=ledger)
        if ledger_path:
            ledger = result.ledger
        report = {"id": conversation.id, "compacted": result.compacted, **result.report(),
                  "tokens_before": result.record.tokens_before,
                  "tokens_after": result.record.tokens_after,
                  "audit_id": result.record.id
                  if fw.audit is not None and not result.audit_error else None}
        if result.record.error:
            report["error"] = result.record.error
        if result.audit_error:
            report["audit_error"] = result.audit_error
            status = EXIT_FAIL
            sys.stderr.write(f"firewall: audit log: {result.audit_error}\n")
        document = _document(conversation, result.messages)
        outputs.append(document)
        if args.json:
            _out(json.dumps({"messages": document, "report": report}, ensure_ascii=False))
        elif not args.out:
            _out(_render_messages(result.messages))
        if not args.json:
            _out(_report_line(report))
    if ledger_path and ledger is not None:  # it holds secrets and the HMAC key: 0600
        write_atomic(ledger_path, ledger.to_json())
    if args.out:
        from .audit import escape_surrogates

        with open(args.out, "w", encoding="utf-8") as handle:
            for document in outputs:
                handle.write(escape_surrogates(json.dumps(document, ensure_ascii=False)) + "\n")
    return status


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
    from .formats import read_conversations
    from .guard import Firewall
    from .validate import Finding, occurs

    conversations = [c for c in read_conversations(args.file) if args.id in (None, c.id)]
    if len(conversations) != 1:
        sys.stderr.write(f"firewall: {args.file} holds {len(conversations)} matching "
                         f"conversation(s); pick one with --id\n")
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
    return EXIT_OK if verdict.ok else EXIT_FAIL


def _check_outcome(verdict) -> str:
    """What ``check`` fails on, naming each literal: any mutation, any missing required one."""
    if verdict.ok:
        return "ok"
    reasons = [f"{f.value!r} mutated into {f.resembles!r} ({f.reason})" for f in verdict.mutated]
    reasons += [f"required {f.value!r} missing" for f in verdict.missing]
    return "FAIL: " + "; ".join(reasons)


# ── audit ───────────────────────────────────────────────────────────────────────────────

def cmd_audit(args: argparse.Namespace) -> int:
    log = _audit_log(args)
    if args.audit_command == "list":
        rows = [(s.id[:12], s.conversation_id, s.compaction, s.created_at.isoformat(
            timespec="seconds"), s.outcome, s.turns_compacted,
            f"{s.tokens_before}->{s.tokens_after}", status_counts(s.statuses))
            for s in log.list(limit=args.limit, conversation_id=args.conversation)]
        _out(_table(rows, ("id", "conversation", "#", "created", "outcome", "turns", "tokens",
                           "literals")))
    elif args.audit_command == "show":
        _out(log.get(args.id).model_dump_json(indent=2))
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


# ── wiring ──────────────────────────────────────────────────────────────────────────────

def _add_rules_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", action="append", metavar="PACK_OR_PATH",
                        help="built-in pack name or YAML path (repeatable; default: all built-in)")
    parser.add_argument("--tools", metavar="TOOLS.json",
                        help="the agent's tool definitions (Anthropic or OpenAI): pin the "
                             "values of their identifier parameters")


def _add_audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--audit-db", metavar="PATH",
                        help="audit log: SQLite file, or .jsonl (default: $FIREWALL_AUDIT_DB, "
                             "else the per-user state folder)")
    if parser.prog.split()[-1] == "compact":
        parser.add_argument("--no-audit", action="store_true", help="write no audit record")


def add_tokens_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--tokens", default=default, metavar="COUNTER",
                        help="what counts tokens: estimate (offline, o200k-calibrated), o200k, "
                             "cl100k (need bpe-openai or tiktoken), anthropic[:MODEL] (the "
                             "count-tokens API: opt-in, one call to calibrate the estimate on "
                             "the input with every secret masked), auto (the estimate: "
                             f"counting never picks a vendor by itself); default {default}")


def _install_token_counter(args: argparse.Namespace) -> None:
    from .tokens import counter_named, is_vendor_counter, set_token_counter

    sample = _counter_sample(args) if is_vendor_counter(args.tokens) else ""
    set_token_counter(counter_named(args.tokens, sample))


def _counter_sample(args: argparse.Namespace, limit: int = 100_000) -> str:
    """What a vendor counter is calibrated on: the input's turns as placeholder mode sends
    them (every secret a rule finds masked), up to ``limit`` characters."""
    from pathlib import Path

    from .formats import read_conversations
    from .guard import Firewall

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="firewall", description=(
        "Keep the exact strings an agent depends on through context compaction."))
    sub = parser.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="list the literals found in a conversation file")
    scan.add_argument("file")
    _add_rules_option(scan)
    scan.add_argument("--json", action="store_true", help="one JSON object per line")
    scan.set_defaults(func=cmd_scan)

    compact = sub.add_parser("compact", help="compact a conversation with pinned literals",
                             description="Compact each conversation: summary, ledger block, "
                                         "verbatim tail. The report line counts literals by "
                                         "status, as `audit list` does. " + _statuses_help())
    compact.add_argument("file")
    _add_rules_option(compact)
    add_tokens_option(compact, "estimate")
    compact.add_argument("--keep-last", type=int, default=8, metavar="N",
                         help="turns kept verbatim at the end (default 8)")
    compact.add_argument("--summarizer", choices=("extractive", "anthropic", "openai"),
                         default="extractive", help="default: the offline extractive one")
    compact.add_argument("--model", help="model for the anthropic / openai summarizers")
    compact.add_argument("--base-url", help="OpenAI-compatible server for --summarizer openai")
    compact.add_argument("--max-retries", type=int, default=2, metavar="N")
    compact.add_argument("--policy", choices=("reinject", "repair", "keep_source", "raise"),
                         default="reinject", help="when required literals are still lost")
    compact.add_argument("--budget", type=parse_budget, default=Budget(), metavar="auto|TOKENS|P%",
                         help="token budget of the re-injected ledger: auto (the default: "
                              f"{str(Budget()).replace('%', '%%')}), tokens, or a share of the "
                              "compacted span, e.g. 5%%")
    compact.add_argument("--required", choices=("rules", "user", "all"), default="user",
                         help="literals the summary itself must carry (default: user-typed "
                              "and rules marked required)")
    compact.add_argument("--placeholders", action="store_true",
                         help="replace sensitive literals by placeholders for the summarizer")
    compact.add_argument("--ledger", metavar="PATH",
                         help="ledger JSON to continue from and to save (cumulative)")
    _add_audit_options(compact)
    compact.add_argument("--out", metavar="PATH", help="write the compacted conversation(s)")
    compact.add_argument("--json", action="store_true", help="JSON output with a report")
    compact.set_defaults(func=cmd_compact)

    check = sub.add_parser("check", help="validate any compactor's summary of a conversation",
                           description="Exit 1 when the summary mutates any literal of the "
                                       "conversation (a near miss of a real value that the "
                                       "conversation does not itself hold) or lacks a required "
                                       "one; the last line names each.")
    check.add_argument("file")
    check.add_argument("--summary", required=True, metavar="SUMMARY_FILE")
    check.add_argument("--id", help="the conversation to check, in a multi-conversation file")
    _add_rules_option(check)
    add_tokens_option(check, "estimate")
    check.add_argument("--required", choices=("rules", "user", "all"), default="user")
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
    check.set_defaults(func=cmd_check)

    audit = sub.add_parser("audit", help="read the audit log of compactions")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    listing = audit_sub.add_parser("list", help="recent compactions",
                                   description="Recent compactions, newest first; the literals "
                                               "column counts them by status, as compact's "
                                               "report does. " + _statuses_help())
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--conversation", help="only this conversation id")
    show = audit_sub.add_parser("show", help="one record in full (id or prefix)")
    show.add_argument("id")
    literal = audit_sub.add_parser("literal", help="where did this literal survive?")
    literal.add_argument("value")
    export = audit_sub.add_parser("export", help="every record, one JSON object per line")
    for command in (listing, show, literal, export):
        _add_audit_options(command)
        command.set_defaults(func=cmd_audit)

    rules = sub.add_parser("rules", help="test, lint and list rule packs")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    for name, func, text in (("test", cmd_rules_test, "run every rule's examples"),
                             ("lint", cmd_rules_lint, "find risky or incomplete rules"),
                             ("list", cmd_rules_list, "list packs and rules")):
        command = rules_sub.add_parser(name, help=text)
        command.add_argument("rules", nargs="*", metavar="PACK_OR_PATH",
                             help="packs to use (default: all built-in)")
        command.set_defaults(func=func)
    add_suggest_command(rules_sub)
    add_eval_command(sub)
    add_hooks_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
