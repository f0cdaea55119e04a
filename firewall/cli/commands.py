"""The commands that read conversations: ``scan``, ``rules test|lint|list``, ``compact``,
``check``."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import FirewallError
from ..options import salience_from_args, summarizer_from_args
from .common import (EXIT_FAIL, EXIT_NOT_COMPACTED, EXIT_OK, EXIT_USAGE, MIXED_SCRIPT_NOTE,
                     audit_log_of, write_line, packs_of, render_table, status_counts)


# ── scan ────────────────────────────────────────────────────────────────────────────────

class ScanTask:
    """One conversation's scan output, as (stream, line) pairs in the order written: the map of
    ``scan`` (``distributed`` runs it on Dask workers); ``setup`` compiles the packs once per
    process."""

    def __init__(self, packs: list[Any], json_lines: bool) -> None:
        self.packs, self.json_lines = packs, json_lines

    def setup(self) -> Any:
        from ..extraction.extract import Extractor

        return Extractor(self.packs)

    def __call__(self, extractor: Any, source: str, conversation: Any
                 ) -> tuple[list[tuple[str, str]], int, bool]:
        """(lines, literals found, a rule timed out)."""
        from ..compaction.ledger import visible_line

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
                rows.append((conversation.id, visible_line(lit.value), lit.rule, lit.turn, lit.role,
                             lit.tool, MIXED_SCRIPT_NOTE if lit.mixed_script else ""))
        if rows:  # one table per conversation: the output is written as the file is read
            lines.append(("out", render_table(rows, ("conversation", "literal", "rule", "turn",
                                               "role", "tool", "note")) + "\n"))
        return lines, len(result.literals), bool(result.timeouts)


def cmd_scan(args: argparse.Namespace) -> int:
    from ..evaluation.distributed import open_mapper

    task = ScanTask(packs_of(args), args.json)
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
        write_line(f"{total} literal(s)")
    return EXIT_FAIL if failed or bad else EXIT_OK


def _timed_out(timeout: Any, conversation_id: str, consequence: str) -> str:
    return (f"firewall: rule {timeout.rule} timed out on turn {timeout.turn} ({timeout.field}) "
            f"of {conversation_id}: that turn {consequence}")


def _files(args: argparse.Namespace, paths: Sequence[str], label: str):
    from ..inputs import ConversationFiles

    return ConversationFiles(paths, fail_fast=getattr(args, "fail_fast", False), label=label)


# ── rules ───────────────────────────────────────────────────────────────────────────────

def _named_packs(args: argparse.Namespace):
    """``rules test | lint | list PACK...`` look at the packs named, not at the built-ins too."""
    from ..extraction.packs import load_packs

    return load_packs(*args.rules, strict=False)


def cmd_rules_test(args: argparse.Namespace) -> int:
    from ..extraction.examples import noise_reports, run_examples
    from ..extraction.extract import Extractor

    packs = _named_packs(args)
    extractor = Extractor(packs)
    reports = run_examples(packs, extractor) + noise_reports(packs, extractor)
    failures = 0
    for report in reports:
        status = "ok" if not report.failures else "FAIL"
        write_line(f"{status:4}  {report.rule}  ({report.examples} example(s))")
        for failure in report.failures:
            failures += 1
            write_line(f"      {failure.describe()}")
    write_line(f"\n{len(reports)} rule(s), {failures} failing example(s)")
    return EXIT_FAIL if failures else EXIT_OK


def cmd_rules_lint(args: argparse.Namespace) -> int:
    from ..authoring.lint import lint

    findings = lint(_named_packs(args))
    for finding in findings:
        write_line(str(finding))
    errors = sum(f.severity == "error" for f in findings)
    write_line(f"{errors} error(s), {len(findings) - errors} warning(s)")
    return EXIT_FAIL if errors else EXIT_OK


def cmd_rules_list(args: argparse.Namespace) -> int:
    for pack in _named_packs(args):
        write_line(f"{pack.name} {pack.version}: {pack.description}")
        for qid, rule in zip(pack.qualified_ids(), pack.rules):
            write_line(f"  {qid:40} {rule.kind:9} {rule.description}")
    return EXIT_OK


# ── compact / check ─────────────────────────────────────────────────────────────────────

def _render_messages(messages: list[Any], ledger: Any = None) -> str:
    """The compacted conversation for a reader (``--json`` and ``--out`` give it exactly)."""
    from ..compaction.ledger import visible_line, visible_text

    lines = []
    for message in messages:
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else message
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=1)
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        lines.append(f"── {visible_line(str(role))} " + "─" * max(0, 70 - len(str(role))))
        lines.append(_readable_blocks(content or "", ledger))
        if calls:
            lines.append(f"[tool calls] {json.dumps(calls, ensure_ascii=False)}")
    return visible_text("\n".join(lines))  # tool output must not drive the reader's terminal


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
    from ..compaction.ledger import find_blocks

    spans = find_blocks(text, ledger.nonce, ledger.key)
    for start, end in reversed(spans):
        block = _ANGLE_ESCAPE.sub(lambda m: m.group(1) + ("<" if m.group(2) == "c" else ">"),
                                  text[start:end])
        text = text[:start] + block + text[end:]
    return text


def cmd_compact(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..audit import escape_surrogates
    from ..audit.archive import ArchiveLimits
    from ..compaction.guard import Firewall
    from ..compaction.ledger import Ledger

    fw = Firewall(packs_of(args), budget_tokens=args.budget, max_retries=args.max_retries,
                  policy=args.policy, keep_last=args.keep_last, placeholders=args.placeholders,
                  required=args.required, audit=audit_log_of(args),
                  summarizer=summarizer_from_args(args),
                  template=_template(args), salience=salience_from_args(args),
                  archive=ArchiveLimits(tokens=args.archive_tokens))
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
        from ..private_files import write_atomic

        write_atomic(ledger_path, ledger.to_json().encode("utf-8"))
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


def cmd_check(args: argparse.Namespace) -> int:
    from ..compaction.guard import Firewall
    from ..compaction.validate import Finding, occurs

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
    fw = Firewall(packs_of(args), required=args.required, template=_template(args))
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
            write_line(json.dumps(record, ensure_ascii=False))
        else:
            note = f"{finding.resembles!r} ({finding.reason})" if finding.status == "mutated" \
                else ""
            rows.append((finding.status, finding.value, finding.rule,
                         "yes" if finding.required else "", note))
    if not args.json:
        write_line(render_table(rows, ("status", "literal", "rule", "required", "summary wrote")))
        counts = {s: sum(f.status == s for f in findings) for s in ("present", "missing",
                                                                    "mutated")}
        write_line(f"\n{counts['present']} present, {counts['missing']} missing, "
                   f"{counts['mutated']} mutated; {_check_outcome(verdict)}")
    return EXIT_OK if verdict.ok and not bad else EXIT_FAIL


def _check_outcome(verdict) -> str:
    """What ``check`` fails on, naming each literal: any mutation, any missing required one."""
    if verdict.ok:
        return "ok"
    reasons = [f"{f.value!r} mutated into {f.resembles!r} ({f.reason})" for f in verdict.mutated]
    reasons += [f"required {f.value!r} missing" for f in verdict.missing]
    return "FAIL: " + "; ".join(reasons)
