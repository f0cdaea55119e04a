"""The `firewall` command: a thin layer over the library's public calls."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .errors import FirewallError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _packs(args: argparse.Namespace, *, strict: bool = True):
    from .packs import load_packs

    return load_packs(*(args.rules or ()), strict=strict)


def _table(rows: list[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [min(max(len(r[i]) for r in cells), 60) for i in range(len(headers))]
    lines = ["  ".join(c[:60].ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


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
                      "sensitive": lit.sensitive, "count": lit.count}
            if args.json:
                _out(json.dumps(record, ensure_ascii=False))
            else:
                rows.append((conversation.id, lit.value, lit.rule, lit.turn, lit.role, lit.tool))
    if not args.json:
        _out(_table(rows, ("conversation", "literal", "rule", "turn", "role", "tool")))
        _out(f"\n{len(rows)} literal(s)")
    return EXIT_FAIL if failed else EXIT_OK


# ── rules ───────────────────────────────────────────────────────────────────────────────

def cmd_rules_test(args: argparse.Namespace) -> int:
    from .examples import run_examples

    reports = run_examples(_packs(args, strict=False))
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


# ── wiring ──────────────────────────────────────────────────────────────────────────────

def _add_rules_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules", action="append", metavar="PACK_OR_PATH",
                        help="built-in pack name or YAML path (repeatable; default: all built-in)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="firewall", description=(
        "Keep the exact strings an agent depends on through context compaction."))
    sub = parser.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="list the literals found in a conversation file")
    scan.add_argument("file")
    _add_rules_option(scan)
    scan.add_argument("--json", action="store_true", help="one JSON object per line")
    scan.set_defaults(func=cmd_scan)

    rules = sub.add_parser("rules", help="test, lint and list rule packs")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    for name, func, text in (("test", cmd_rules_test, "run every rule's examples"),
                             ("lint", cmd_rules_lint, "find risky or incomplete rules"),
                             ("list", cmd_rules_list, "list packs and rules")):
        command = rules_sub.add_parser(name, help=text)
        command.add_argument("rules", nargs="*", metavar="PACK_OR_PATH",
                             help="packs to use (default: all built-in)")
        command.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except FirewallError as exc:
        sys.stderr.write(f"firewall: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `firewall scan ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
