"""The `firewall` command, driven through its entry point as a user would."""

import json
from pathlib import Path

import pytest

from firewall.cli import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures"
MINIMAL = str(FIXTURES / "packs" / "valid" / "minimal.yaml")
KINDS = str(FIXTURES / "packs" / "valid" / "all_kinds.yaml")
ANTHROPIC = str(FIXTURES / "conversations" / "anthropic.json")
NATIVE = str(FIXTURES / "conversations" / "native.jsonl")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_scan_json_lines_carry_provenance_and_conversation_id(capsys):
    code, out, _ = run(capsys, "scan", NATIVE, "--rules", KINDS, "--only", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert rows[0] == {"id": "c1", "literal": "#W2378156", "rule": "kinds/order-key", "turn": 2,
                       "role": "assistant", "tool": "get_order_details",
                       "field": "arguments.order_id", "start": 0, "end": 9, "sensitive": False,
                       "count": 2, "mixed_script": False}


def test_scan_flags_a_look_alike_id_as_mixed_script(capsys, tmp_path):
    conversation = tmp_path / "c.json"
    text = "Why was INV-2025-08-4471\u0417 and \u0406NV-2025-08-44719 charged?"
    conversation.write_text(json.dumps([{"role": "user", "content": text}]))
    code, out, _ = run(capsys, "scan", str(conversation), "--rules", MINIMAL, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["literal"], r["mixed_script"]) for r in rows] == [("\u0406NV-2025-08-44719", True)]
    code, out, _ = run(capsys, "scan", str(conversation), "--rules", MINIMAL)
    assert "mixed script: look-alike letters" in out


def test_scan_table(capsys):
    code, out, _ = run(capsys, "scan", ANTHROPIC, "--rules", MINIMAL, "--only")
    assert code == 0 and "INV-2025-08-44719" in out and "1 literal(s)" in out


@pytest.fixture(params=["sqlite", "postgres"])
def audit_db(request, tmp_path, monkeypatch) -> str:
    """An audit log for the CLI: a SQLite file, or a PostgreSQL URL (with the fleet key)."""
    if request.param == "postgres":
        monkeypatch.setenv("FIREWALL_AUDIT_KEY", "cli-test-fleet-key")
        return request.getfixturevalue("postgres_url")
    return str(tmp_path / "audit.db")


def test_compact_prints_context_and_records_the_audit(capsys, audit_db):
    db = audit_db
    code, out, _ = run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only",
                       "--keep-last", "1",
                       "--audit-db", db)
    assert code == 0
    assert "<<<ledger " in out and "INV-2025-08-44719" in out
    assert "1 literal(s) pinned" in out
    code, out, _ = run(capsys, "audit", "list", "--audit-db", db)
    assert code == 0 and "compacted" in out
    code, out, _ = run(capsys, "audit", "literal", "INV-2025-08-44719", "--audit-db", db)
    assert code == 0 and "in_summary" in out
    record_id = out.splitlines()[2].split()[0]
    code, out, _ = run(capsys, "audit", "show", record_id, "--audit-db", db, "--json")
    assert json.loads(out)["conversation_id"] == "anthropic"
    code, out, _ = run(capsys, "audit", "export", "--audit-db", db)
    assert len(out.splitlines()) == 1


def test_compact_out_keeps_the_anthropic_shape_and_ledger_persists(capsys, tmp_path):
    out_file, ledger = tmp_path / "out.jsonl", tmp_path / "ledger.json"
    code, _, _ = run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only", "--keep-last", "1",
                     "--no-audit", "--out", str(out_file), "--ledger", str(ledger))
    assert code == 0
    document = json.loads(out_file.read_text())
    assert document["system"] == "You are a support agent." and document["messages"]
    assert json.loads(ledger.read_text())["entries"][0]["value"] == "INV-2025-08-44719"


def test_check_exits_1_on_a_mutated_required_literal(capsys, tmp_path):
    summary = tmp_path / "summary.txt"
    summary.write_text("The customer disputes INV-2025-08-44791.")
    code, out, _ = run(capsys, "check", ANTHROPIC, "--summary", str(summary), "--rules", MINIMAL,
                       "--only",
                       "--json")
    assert code == 1
    assert json.loads(out) == {"literal": "INV-2025-08-44719", "status": "mutated",
                               "rule": "billing/invoice-number", "required": True,
                               "span": [22, 39], "resembles": "INV-2025-08-44791",
                               "reason": "transposed digits"}
    summary.write_text("The customer disputes INV-2025-08-44719.")
    assert run(capsys, "check", ANTHROPIC, "--summary", str(summary), "--rules", MINIMAL,
               "--only")[0] == 0


def test_check_strict_makes_pinned_literals_required(capsys, tmp_path):
    summary = tmp_path / "summary.txt"
    summary.write_text("order #W2378156 asked about")
    # the order id comes from a tool call, so only --strict requires it... it is present here
    assert run(capsys, "check", NATIVE, "--id", "c1", "--summary", str(summary),
               "--rules", KINDS, "--only", "--strict")[0] == 0
    summary.write_text("an order was asked about")
    assert run(capsys, "check", NATIVE, "--id", "c1", "--summary", str(summary),
               "--rules", KINDS, "--only")[0] == 0
    assert run(capsys, "check", NATIVE, "--id", "c1", "--summary", str(summary),
               "--rules", KINDS, "--only", "--strict")[0] == 1


def test_check_fails_on_a_mutation_of_any_literal_and_says_which(capsys, tmp_path):
    summary = tmp_path / "summary.txt"
    summary.write_text("order #W2378165 asked about")  # the order id is not required here
    code, out, _ = run(capsys, "check", NATIVE, "--id", "c1", "--summary", str(summary),
                       "--rules", KINDS, "--only")
    assert code == 1
    assert out.splitlines()[-1].endswith(
        "FAIL: '#W2378156' mutated into '#W2378165' (transposed digits)")
    code, out, _ = run(capsys, "check", NATIVE, "--id", "c1", "--summary", str(summary),
                       "--rules", KINDS, "--only", "--json")
    assert code == 1 and json.loads(out) == {
        "literal": "#W2378156", "status": "mutated", "rule": "kinds/order-key",
        "required": False, "span": [6, 15], "resembles": "#W2378165",
        "reason": "transposed digits"}


def test_compact_report_and_audit_list_count_the_same_literals_by_the_same_names(capsys,
                                                                                tmp_path):
    db = str(tmp_path / "audit.db")
    code, out, _ = run(capsys, "compact", ANTHROPIC, "--rules", KINDS, "--rules", MINIMAL,
                       "--keep-last", "1", "--audit-db", db)
    reported = out.rsplit("literals by status: ", 1)[1].split(";")[0]
    code, out, _ = run(capsys, "audit", "list", "--audit-db", db)
    listed = out.splitlines()[2].split("  ")[-1].strip()
    assert code == 0 and reported == listed and "in_summary" in listed
    help_text = build_parser()._subparsers._group_actions[0].choices["compact"].format_help()
    assert "kept_verbatim: in the turns kept verbatim" in " ".join(help_text.split())
    from firewall.audit import STATUS_MEANINGS, STATUSES

    assert tuple(STATUS_MEANINGS) == STATUSES  # the help explains every status, in order


def test_rules_test_and_lint_exit_codes(capsys):
    code, out, _ = run(capsys, "rules", "test", KINDS)
    assert code == 0 and "4 rule(s), 0 failing example(s)" in out
    code, out, _ = run(capsys, "rules", "test", str(FIXTURES / "packs" / "invalid" /
                                                   "failing_example.yaml"))
    assert code == 1 and "missed ['inv-13']" in out


def test_lint_flags_catastrophic_patterns(capsys, tmp_path):
    pack = tmp_path / "slow.yaml"
    pack.write_text("name: slow\nversion: '1'\nrules:\n  - id: evil\n    kind: regex\n"
                    "    description: d\n    pattern: '(a|aa)+$'\n    keywords: [zzz]\n"
                    "    examples:\n      match:\n        - text: 'aa'\n          literals: [aa]\n"
                    "      no_match: ['b']\n")
    code, out, _ = run(capsys, "rules", "lint", str(pack))
    assert code == 1
    assert "alternatives that can match the same text" in out
    assert "timed out on a 20 kB adversarial text" in out
    assert "no keyword ['zzz'] occurs in the positive example" in out


def test_errors_are_one_line_not_tracebacks(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe not json")
    code, _, err = run(capsys, "scan", str(bad), "--rules", MINIMAL, "--only", "--fail-fast")
    assert code == 2 and err.startswith("firewall: ") and "Traceback" not in err
    code, _, err = run(capsys, "scan", NATIVE, "--rules", "nope")
    assert code == 2 and "unknown rule pack 'nope'" in err


def test_compact_exits_3_when_any_conversation_was_not_compacted_not_only_the_last(
        capsys, tmp_path):
    """c2 ("hi") has nothing to compact; c1 compacts. Whatever their order, exit 3."""
    c1, c2 = Path(NATIVE).read_text("utf-8").splitlines()
    for lines, expected in (([c1], 0), ([c2, c1], 3), ([c1, c2], 3)):
        path = tmp_path / "conversations.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, out, _ = run(capsys, "compact", str(path), "--rules", KINDS, "--only",
                           "--keep-last", "1", "--no-audit", "--json")
        compacted = [json.loads(line)["report"]["compacted"] for line in out.splitlines()]
        assert compacted == [json.loads(line)["id"] == "c1" for line in lines]
        assert code == expected, lines


def test_audit_literal_exits_1_when_no_compaction_holds_the_value(capsys, tmp_path):
    db = str(tmp_path / "audit.db")
    run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only", "--keep-last", "1",
        "--audit-db", db)
    code, out, _ = run(capsys, "audit", "literal", "INV-2025-08-44719", "--audit-db", db)
    assert code == 0 and "in_summary" in out
    code, out, _ = run(capsys, "audit", "literal", "INV-2025-08-44718", "--audit-db", db)
    assert code == 1 and "'INV-2025-08-44718' appears in no recorded compaction" in out
    assert "`literal` exits 1 when no recorded compaction holds the value" in (
        Path(__file__).parent.parent / "README.md").read_text("utf-8")


def test_recall_finds_an_archived_literal_by_a_part_of_it(capsys, audit_db, tmp_path):
    db = audit_db
    code, _, err = run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only",
                       "--keep-last", "1", "--audit-db", db)
    assert code == 0, err
    code, out, _ = run(capsys, "recall", "44719", "--audit-db", db, "--json")
    hits = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and hits[0]["value"] == "INV-2025-08-44719"
    assert set(hits[0]) == {"value", "kind", "rule", "role", "first_turn", "last_turn",
                            "compaction", "conversation", "context", "score"}
    assert hits[0]["conversation"] == "anthropic" and hits[0]["compaction"] == 1
    code, out, _ = run(capsys, "recall", "INV-2025", "--audit-db", db, "--conversation",
                       "anthropic", "--limit", "1")
    assert code == 0 and out.startswith("INV-2025-08-44719\n") and "prefix" in out
    code, out, err = run(capsys, "recall", "no-such-thing-9", "--audit-db", db)
    assert code == 1 and out == "" and "nothing archived matches" in err
    code, _, err = run(capsys, "recall", "INV", "--audit-db", db, "--rule", "no/such")
    assert code == 1


def test_recall_says_a_jsonl_log_keeps_no_archive(capsys, tmp_path):
    db = str(tmp_path / "audit.jsonl")
    code, _, _ = run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only",
                     "--keep-last", "1", "--audit-db", db)
    assert code == 0
    code, out, err = run(capsys, "recall", "INV-2025", "--audit-db", db)
    assert code == 2 and "keeps no archive" in err
    code, _, err = run(capsys, "recall", "x", "--audit-db", str(tmp_path / "none.db"))
    assert code == 1 and "no audit log" in err
    with pytest.raises(SystemExit):
        main(["recall", "x", "--limit", "0"])


def test_scan_exits_1_when_a_rule_timed_out_and_says_which(capsys, tmp_path):
    pack = tmp_path / "hostile.yaml"
    pack.write_text(
        "name: hostile\nversion: '1'\nrules:\n"
        "  - id: nested\n    kind: regex\n    pattern: '(\\w+\\s?)*$'\n", encoding="utf-8")
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "please check the logs"},
                               {"role": "assistant", "content": "a" * 2000 + "!"}]))
    code, out, err = run(capsys, "scan", str(log), "--rules", str(pack), "--only")
    assert code == 1
    assert "rule hostile/nested timed out on turn 1" in err and "must be kept verbatim" in err
    log.write_text(json.dumps([{"role": "user", "content": "please check the logs"}]))
    assert run(capsys, "scan", str(log), "--rules", str(pack), "--only")[0] == 0


@pytest.fixture
def small_archive(tmp_path, capsys, monkeypatch):
    """A SQLite log holding one compaction's archive: a path, an id, a range no rule extracts."""
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", "test-key")
    source, db = tmp_path / "c.json", str(tmp_path / "audit.db")
    source.write_text(json.dumps([
        {"role": "user", "content": "Fix src/app/models.py, see build 7-12 for ORD-2024-88123"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]), "utf-8")
    assert main(["compact", str(source), "--keep-last", "1", "--audit-db", db]) == 0
    capsys.readouterr()
    return db


def test_recall_refuses_a_kind_no_literal_has_instead_of_finding_nothing(small_archive, capsys):
    """``--kind`` names one of the kinds ``--json`` prints: a typo was answered "nothing
    archived matches" (exit 1, a lie); it is a usage error naming the kinds. ``token`` (the
    swept tokens) is one of them."""
    db = small_archive
    assert main(["recall", "--audit-db", db, "--kind", "paths", "models"]) == 2
    err = capsys.readouterr().err
    assert "paths" in err and "path" in err and "token" in err
    assert main(["recall", "--audit-db", db, "--kind", "token", "--json", "7-12"]) == 0
    kinds = {json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()}
    assert kinds == {"token"}
    assert main(["recall", "--audit-db", db, "--kind", "email", "models"]) == 1  # none: exit 1


def test_recall_bounds_its_query_so_a_tool_call_cannot_stall_the_log(small_archive, capsys):
    """A query is at most as long as the longest value the archive keeps: a model's tool call
    of a megabyte of words made every context candidate be searched for every word (seconds
    per call, and an FTS query of as many terms); it is a usage error naming the bound."""
    from firewall.compaction.ledger import LITERAL_MAX_CHARS

    db = small_archive
    longest = ("models " * LITERAL_MAX_CHARS)[:LITERAL_MAX_CHARS - 1] + "x"
    assert main(["recall", "--audit-db", db, "--", longest]) in (0, 1)
    assert main(["recall", "--audit-db", db, "--", longest + "y"]) == 2
    err = capsys.readouterr().err
    assert f"{LITERAL_MAX_CHARS:,}" in err and len(err) < 400


def test_compact_and_scan_show_tool_output_without_letting_it_drive_the_terminal(capsys,
                                                                                 tmp_path):
    """A tool result holding escape sequences (retitle the window, clear the screen) and a bidi
    override is shown escaped on the reader's terminal; ``--json`` keeps the exact text."""
    hostile = "\x1b]0;pwned\x07\x1b[2J\u202eINV-2025-08-44719\x9b31m done"
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([
        {"role": "user", "content": "Why was INV-2025-08-44719 charged twice?"},
        {"role": "assistant", "content": "Looking."},
        {"role": "user", "content": hostile},
        {"role": "assistant", "content": "Found it.\tRefunding."},
        {"role": "user", "content": "Thanks"}]), "utf-8")
    code, out, _ = run(capsys, "compact", str(conversation), "--rules", MINIMAL, "--only",
                       "--keep-last", "3", "--audit-db", str(tmp_path / "audit.db"))
    assert code == 0
    assert not any(ch in out for ch in "\x1b\x07\x9b\u202e")
    assert "\\u001b]0;pwned\\u0007\\u001b[2J\\u202eINV-2025-08-44719\\u009b31m done" in out
    assert "Found it.\tRefunding.\n" in out  # line breaks and tabs stay
    code, out, _ = run(capsys, "compact", str(conversation), "--rules", MINIMAL, "--only",
                       "--keep-last", "3", "--audit-db", str(tmp_path / "audit.db"), "--json")
    kept = json.loads(out)["messages"]["messages"]
    assert {"role": "user", "content": hostile} in kept  # --json: the exact text
    conversation.write_text(json.dumps([{"role": "user", "content": "ref \x1b[31mINV-2025-08-4471"
                                                                    "9\u202e\x1b[0m"}]), "utf-8")
    code, out, _ = run(capsys, "scan", str(conversation), "--rules", MINIMAL)
    assert code == 0 and "INV-2025-08-44719" in out and "\x1b" not in out and "\u202e" not in out


def test_audit_show_writes_what_the_conversation_controls_inert(tmp_path, monkeypatch, capsys):
    """``audit list`` escaped a conversation id holding terminal escapes (it comes from the
    input, as tool output does), ``audit show`` wrote it raw in its header."""
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", "k")
    hostile = "conv\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
    source = tmp_path / "conversation.json"
    source.write_text(json.dumps({"id": hostile, "messages": [
        {"role": "user", "content": "fix /srv/app/main.py line 3"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}]}))
    db = tmp_path / "audit.db"
    assert main(["compact", str(source), "--keep-last", "1", "--audit-db", str(db)]) == 0
    capsys.readouterr()
    from firewall.audit import SQLiteAuditLog

    (summary,) = SQLiteAuditLog(db).list()
    assert summary.conversation_id == hostile
    assert main(["audit", "show", "--audit-db", str(db), summary.id]) == 0
    out = capsys.readouterr().out
    assert "conv\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e" in out
    assert not any(c in out for c in "\x1b\x07\x9b\u202e")
