"""The `firewall` command: a thin layer over the library's public calls. Each subcommand
registers here; the larger ones live beside their library code and load on first use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..compaction.budget import Budget, parse_budget
from ..errors import FirewallError
from ..options import (add_archive_tokens_option, add_audit_options, add_dask_option,
                       add_fail_fast_option, add_keep_last_option, add_placeholders_option,
                       add_rules_option, add_salience_option, add_summarizer_options,
                       add_tokens_option, non_negative)
from .audit import add_audit_commands
from .commands import (cmd_check, cmd_compact, cmd_rules_lint, cmd_rules_list, cmd_rules_test,
                       cmd_scan)
from .common import (COMPACT_EXITS, EXIT_CODES, EXIT_OK, EXIT_USAGE, FILE_HELP, packs_of,
                     statuses_help)


# ── wiring ──────────────────────────────────────────────────────────────────────────────

def _add_pack_options(parser: argparse.ArgumentParser) -> None:
    add_rules_option(parser)
    parser.add_argument("--tools", metavar="TOOLS.json",
                        help="the agent's tool definitions (Anthropic or OpenAI): pin the "
                             "values of their identifier parameters")


def _install_token_counter(args: argparse.Namespace) -> None:
    from ..tokens import counter_named, is_vendor_counter, set_token_counter

    sample = _counter_sample(args) if is_vendor_counter(args.tokens) else ""
    set_token_counter(counter_named(args.tokens, sample))


def _counter_sample(args: argparse.Namespace, limit: int = 100_000) -> str:
    """What a vendor counter is calibrated on: the input's turns as placeholder mode sends
    them (every secret a rule finds masked), up to ``limit`` characters."""
    from pathlib import Path

    from ..formats import read_conversations
    from ..compaction.guard import Firewall

    path = getattr(args, "file", None) or (getattr(args, "files", None) or [None])[0]
    if not path or not Path(path).is_file():
        return ""
    fw = Firewall(packs_of(args) if hasattr(args, "rules") else None, placeholders=True)
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
    from .. import __version__

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
                    "literals by status, as `audit list` does. " + statuses_help())
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
    add_archive_tokens_option(compact)
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

    add_audit_commands(sub)

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

    lazy("rules suggest", lambda: _import("authoring.suggest").add_suggest_command(rules_sub),
         rules_sub)
    lazy("rules import", lambda: _import("authoring.gitleaks").add_import_command(rules_sub),
         rules_sub)
    lazy("eval", lambda: _import("evaluation.evaluate").add_eval_command(sub))
    lazy("replay", lambda: _import("evaluation.replay").add_replay_command(sub))
    lazy("hooks", lambda: _import("integrations.hooks").add_hooks_commands(sub))
    lazy("diagnose", lambda: _import("evaluation.diagnostics").add_diagnose_command(sub))
    lazy("report", lambda: _import("evaluation.report").add_report_command(sub))
    lazy("mcp", lambda: _import("integrations.mcp_server").add_mcp_command(sub))
    lazy("salience", lambda: _import("evaluation.salience_fit").add_salience_command(sub))
    lazy("recall", lambda: _import("cli.recall").add_recall_command(sub))
    return parser


def _import(module: str) -> Any:
    import importlib

    return importlib.import_module(f"firewall.{module}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hooks"]:  # runs at every agent event: no need for the rest of the CLI
        from ..integrations.hooks import main as hooks_main

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


