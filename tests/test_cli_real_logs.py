"""The `firewall` command on real logs: streamed files, bad lines, exit codes, pack selection,
start-up cache, help and small things. Driven through the entry point as a user would."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from firewall.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
MINIMAL = str(FIXTURES / "packs" / "valid" / "minimal.yaml")
ANTHROPIC = str(FIXTURES / "conversations" / "anthropic.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def conversation(i: int) -> dict:
    return {"id": f"c{i}", "messages": [
        {"role": "user", "content": f"Why was INV-2025-08-{44700 + i} charged twice?"},
        {"role": "assistant", "content": "Let me look that up for you, one moment please."},
        {"role": "user", "content": "Thanks, and please refund the duplicate charge."},
        {"role": "assistant", "content": "Done: the duplicate is refunded."}]}


def write_log(path: Path, count: int, *, bad: dict[int, str] | None = None) -> Path:
    """``count`` conversations, one per line; ``bad`` replaces line numbers (1-based)."""
    bad = bad or {}
    lines = [bad.get(i + 1, json.dumps(conversation(i + 1))) for i in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def truncated(i: int) -> str:
    return json.dumps(conversation(i))[:57]  # the last line of a log cut mid-write


# ── 9: one bad line does not kill the run ───────────────────────────────────────────────────

def test_scan_reports_a_truncated_last_line_and_goes_on(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3, bad={3: truncated(3)})
    code, out, err = run(capsys, "scan", str(log), "--rules", MINIMAL, "--only", "--json")
    assert code == 1
    assert [json.loads(line)["literal"] for line in out.splitlines()] == \
        ["INV-2025-08-44701", "INV-2025-08-44702"]
    assert f"{log}:3: invalid JSON" in err and "1 bad line(s) skipped" in err


def test_fail_fast_stops_at_the_first_bad_line(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3, bad={2: "{not json"})
    code, out, err = run(capsys, "scan", str(log), "--rules", MINIMAL, "--only", "--json",
                         "--fail-fast")
    assert code == 2
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["c1"]
    assert err.startswith(f"firewall: {log}:2: invalid JSON")


def test_a_corrupt_first_line_does_not_turn_a_log_into_one_broken_document(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3, bad={1: "\x00garbage"})
    code, out, err = run(capsys, "scan", str(log), "--rules", MINIMAL, "--only", "--json")
    assert code == 1
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["c2", "c3"]
    assert f"{log}:1:" in err


def test_eval_reports_results_despite_a_truncated_last_line(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3, bad={3: truncated(3)})
    code, out, err = run(capsys, "eval", str(log), "--rules", MINIMAL, "--json")
    assert code == 1
    assert json.loads(out)["conversations"] == 2
    assert f"{log}:3: invalid JSON" in err


def test_compact_goes_on_after_a_bad_line_and_writes_every_good_one(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 4, bad={2: '{"id": "x", "messages": 3}'})
    out_file = tmp_path / "out.jsonl"
    code, out, err = run(capsys, "compact", str(log), "--rules", MINIMAL, "--only",
                         "--keep-last", "1", "--no-audit", "--out", str(out_file))
    assert code == 1
    assert [json.loads(line)["id"] for line in out_file.read_text().splitlines()] == \
        ["c1", "c3", "c4"]
    assert f"{log}:2: messages: expected a list of messages" in err


def test_rules_suggest_and_check_skip_bad_lines(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 2, bad={2: truncated(2)})
    code, _, err = run(capsys, "rules", "suggest", str(log), "--rules", MINIMAL)
    assert code == 1 and f"{log}:2: invalid JSON" in err
    summary = tmp_path / "summary.txt"
    summary.write_text("The user asked about INV-2025-08-44701.")
    code, out, err = run(capsys, "check", str(log), "--summary", str(summary), "--rules",
                         MINIMAL, "--only")
    assert code == 1 and "1 present" in out and f"{log}:2: invalid JSON" in err


# ── 8: streamed, written as it goes, a progress bar only on a terminal ─────────────────────

def cli(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "firewall.cli", *argv], env=env,
                          capture_output="stderr" not in kwargs, text=True, check=False,
                          **kwargs)


def test_scan_writes_each_conversation_before_reading_the_next(tmp_path):
    # stdout and stderr share one pipe: the first conversation's table must come out before
    # the bad line further down is even read, the last one after it
    log = write_log(tmp_path / "log.jsonl", 3, bad={2: "{not json"})
    proc = subprocess.run([sys.executable, "-m", "firewall.cli", "scan", str(log), "--rules",
                           MINIMAL, "--only"], env={**os.environ, "PYTHONUNBUFFERED": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    assert proc.returncode == 1
    first, skipped, last = (proc.stdout.index(s) for s in
                            ("INV-2025-08-44701", f"{log}:2", "INV-2025-08-44703"))
    assert first < skipped < last


def test_compact_out_holds_the_conversations_done_before_a_failure(capsys, tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3, bad={3: truncated(3)})
    out_file = tmp_path / "out.jsonl"
    code, _, _ = run(capsys, "compact", str(log), "--rules", MINIMAL, "--only", "--keep-last",
                     "1", "--no-audit", "--out", str(out_file), "--fail-fast")
    assert code == 2
    assert [json.loads(line)["id"] for line in out_file.read_text().splitlines()] == \
        ["c1", "c2"]


def test_no_progress_bar_when_piped(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3)
    proc = cli("scan", str(log), "--rules", MINIMAL, "--only", "--json")
    assert proc.returncode == 0 and proc.stderr == ""


def test_a_progress_bar_on_a_terminal(tmp_path):
    log = write_log(tmp_path / "log.jsonl", 3)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = cli("scan", str(log), "--rules", MINIMAL, "--only", "--json",
                   stdout=subprocess.DEVNULL, stderr=follower)
        os.close(follower)
        follower = None
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    assert b"scan:" in shown and b"B/s" in shown  # tqdm's bar over the bytes read


# ── 10: "not compacted" has its own exit code; regex timeouts are said ─────────────────────

def test_compact_exits_3_when_the_summarizer_never_ran(capsys, tmp_path, monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nobody listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, _ = run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only",
                       "--keep-last", "1", "--no-audit", "--summarizer", "openai",
                       "--base-url", f"http://127.0.0.1:{port}/v1", "--max-retries", "0",
                       "--json")
    assert code == 3
    assert json.loads(out)["report"]["compacted"] is False


def test_compact_says_on_stderr_when_a_rule_timed_out(capsys, tmp_path):
    pack = tmp_path / "hostile.yaml"
    pack.write_text(
        "name: hostile\nversion: '1'\nrules:\n"
        "  - id: nested\n    kind: regex\n    pattern: '(\\w+\\s?)*$'\n", encoding="utf-8")
    messages = [{"role": "user", "content": "please check the logs"},
                {"role": "assistant", "content": "a" * 2000 + "!"},
                {"role": "user", "content": "summarize and continue"},
                {"role": "assistant", "content": "ok"}]
    log = tmp_path / "log.json"
    log.write_text(json.dumps(messages))
    code, _, err = run(capsys, "compact", str(log), "--rules", str(pack), "--only",
                       "--keep-last", "1", "--no-audit")
    assert code == 0
    assert "rule hostile/nested timed out on turn 1" in err and "kept verbatim" in err


# ── 11: --rules adds a pack to the built-ins; --only replaces them ─────────────────────────

PROJECTS = """\
name: projects
version: "1"
rules:
  - id: codename
    kind: terms
    terms: [bluebird]
    examples:
      match: [{text: 'ship bluebird', literals: ['bluebird']}]
"""


def test_rules_adds_a_pack_and_only_replaces_the_built_ins(capsys, tmp_path):
    pack = tmp_path / "projects.yaml"
    pack.write_text(PROJECTS, encoding="utf-8")
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "bluebird is stuck on "
                                                           "INV-2025-08-44719"}]))
    code, out, _ = run(capsys, "scan", str(log), "--rules", str(pack), "--json")
    assert code == 0
    assert {json.loads(line)["rule"] for line in out.splitlines()} == \
        {"projects/codename", "billing/invoice-number"}
    code, out, _ = run(capsys, "scan", str(log), "--rules", str(pack), "--only", "--json")
    assert [json.loads(line)["rule"] for line in out.splitlines()] == ["projects/codename"]
    code, _, err = run(capsys, "scan", str(log), "--only")
    assert code == 2 and "--only needs at least one --rules" in err


def test_hooks_carry_the_pack_selection(capsys):
    code, out, _ = run(capsys, "hooks", "claude-code", "--rules", "billing", "--only")
    commands = [h["command"] for groups in json.loads(out)["hooks"].values()
                for group in groups for h in group["hooks"]]
    assert code == 0 and commands
    assert all(c.endswith(" --rules billing --only") for c in commands)


# ── 12: loaded packs are cached per user, keyed by their files and the library ─────────────

@pytest.fixture
def pack_cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(folder))
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_a_second_start_takes_the_pack_from_the_cache(capsys, tmp_path, pack_cache):
    pack = tmp_path / "projects.yaml"
    pack.write_text(PROJECTS, encoding="utf-8")
    assert run(capsys, "rules", "list", str(pack))[0] == 0
    [entry] = entries(pack_cache)
    data = json.loads(entry.read_text())
    data["pack"]["description"] = "served from the cache"
    entry.write_text(json.dumps(data))
    code, out, _ = run(capsys, "rules", "list", str(pack))
    assert code == 0 and "served from the cache" in out  # no YAML was read for it


def test_an_edited_pack_or_another_library_is_a_miss(capsys, tmp_path, pack_cache,
                                                      monkeypatch):
    import firewall
    from firewall.extraction import packcache

    pack = tmp_path / "projects.yaml"
    pack.write_text(PROJECTS, encoding="utf-8")
    run(capsys, "rules", "list", str(pack))
    pack.write_text(PROJECTS.replace("terms: [bluebird]", "terms: [bluebird, redwing]"))
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "bluebird and redwing"}]))
    code, out, _ = run(capsys, "scan", str(log), "--rules", str(pack), "--only", "--json")
    assert [json.loads(line)["literal"] for line in out.splitlines()] == \
        ["bluebird", "redwing"]
    before = entries(pack_cache)
    monkeypatch.setattr(firewall, "__version__", "99.0")
    packcache.library_fingerprint.cache_clear()
    try:
        run(capsys, "rules", "list", str(pack))
    finally:
        packcache.library_fingerprint.cache_clear()
    assert len(entries(pack_cache)) == len(before) + 1  # a new key, the old entry untouched


def test_a_corrupt_cache_is_rebuilt(capsys, tmp_path, pack_cache):
    log = write_log(tmp_path / "log.jsonl", 1)
    first = run(capsys, "scan", str(log), "--json")
    assert first[0] == 0 and entries(pack_cache)
    for entry in entries(pack_cache):
        entry.write_bytes(b"\x00{not json")
    assert run(capsys, "scan", str(log), "--json") == first
    assert all(json.loads(e.read_text())["examples_checked"] for e in entries(pack_cache))


def test_an_entry_cached_without_its_examples_run_does_not_pass_a_strict_load(
        capsys, tmp_path, pack_cache):
    pack = tmp_path / "projects.yaml"
    pack.write_text(PROJECTS.replace("literals: ['bluebird']", "literals: ['nothing']"))
    assert run(capsys, "rules", "list", str(pack))[0] == 0  # lists without running examples
    log = write_log(tmp_path / "log.jsonl", 1)
    code, _, err = run(capsys, "scan", str(log), "--rules", str(pack))
    assert code == 2 and "rule example(s) fail" in err


# ── 13: small things a user notices ───────────────────────────────────────────────────────

def test_version(capsys):
    import firewall

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"firewall {firewall.__version__}\n"


@pytest.mark.parametrize("command", [["compact", ANTHROPIC], ["eval", ANTHROPIC]])
def test_a_negative_keep_last_is_an_error_not_zero(capsys, command):
    with pytest.raises(SystemExit) as stop:
        main([*command, "--keep-last", "-3"])
    assert stop.value.code == 2
    assert "argument --keep-last: must be 0 or more, got -3" in capsys.readouterr().err


def _actions(parser, path=("firewall",)):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, path + (name,))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), action


def test_every_option_and_positional_has_help():
    from firewall.cli import build_parser

    bare = [f"{where}: {action.option_strings or action.dest}"
            for where, action in _actions(build_parser()) if not action.help]
    assert bare == []


def test_eval_and_compact_keep_the_same_number_of_messages():
    from firewall.cli import build_parser

    keep = {where: action for where, action in _actions(build_parser())
            if "--keep-last" in action.option_strings}
    assert set(keep) == {"firewall compact", "firewall eval", "firewall replay"}
    assert len({a.default for a in keep.values()}) == 1
    assert all("messages" in a.help and "turns" not in a.help for a in keep.values())


def test_eval_help_documents_its_table(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    table = capsys.readouterr().out.split("The table:")[1]
    for column in ("cuts", "ID-like", "strict", "ledger ID", "cost med", "cost total", "+lastN",
                   "user", "lastN", "user+lastN", "oracle"):
        assert column in table, column


def test_reading_the_audit_log_does_not_create_it(capsys, tmp_path, monkeypatch):
    db = tmp_path / "state" / "audit.db"
    monkeypatch.setenv("FIREWALL_AUDIT_DB", str(db))
    code, _, err = run(capsys, "audit", "list")
    assert code == 0 and f"no audit log at {db} yet" in err
    assert run(capsys, "audit", "literal", "INV-2025-08-44719")[0] == 1
    assert not db.exists() and not db.parent.exists()


def test_audit_show_is_readable_and_json_on_demand(capsys, tmp_path):
    db = str(tmp_path / "audit.db")
    run(capsys, "compact", ANTHROPIC, "--rules", MINIMAL, "--only", "--keep-last", "1",
        "--audit-db", db)
    record_id = run(capsys, "audit", "list", "--audit-db", db)[1].splitlines()[2].split()[0]
    code, out, _ = run(capsys, "audit", "show", record_id, "--audit-db", db)
    assert code == 0 and not out.lstrip().startswith("{")
    assert "conversation  anthropic, compaction 1" in out
    assert any(line.split()[:2] == ["in_summary", "INV-2025-08-44719"]
               for line in out.splitlines())
    code, out, _ = run(capsys, "audit", "show", record_id, "--audit-db", db, "--json")
    assert json.loads(out)["conversation_id"] == "anthropic"


def test_shell_strings_read_as_typed_in_the_compact_view(capsys, tmp_path):
    # a short argument value is pinned whole (a free-text command is not: its parts are); the
    # offline summary shows a call's first six arguments, so the block writes the seventh
    log = tmp_path / "log.jsonl"
    flags = {f"flag{i}": True for i in range(6)}
    log.write_text(json.dumps({"id": "s", "messages": [
        {"role": "user", "content": "run the tests"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "run", "arguments": {**flags, "target": "./check 2>&1"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "1 failed"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "done"}]}) + "\n")
    code, out, _ = run(capsys, "compact", str(log), "--keep-last", "1", "--no-audit")
    block = out[out.index("<<<ledger"):out.index("<<<end")]
    assert code == 0 and '"./check 2>&1"' in block and "\\u003e" not in block
    # the messages themselves keep the block as the model gets it: < and > escaped
    code, out, _ = run(capsys, "compact", str(log), "--keep-last", "1", "--no-audit", "--json")
    assert "2\\\\u003e&1" in out  # JSON-encoded once more on stdout


NOISY = """name: noisy
version: "1"
noise:
  - id: gutter
    pattern: '^\\d+\\t'
    flags: [multiline]
    examples:
      - text: "4242\\tx"
        noise: ["4242\\t"]
rules:
  - id: num
    kind: regex
    pattern: '\\d{4,}'
"""


def test_a_cached_pack_keeps_its_declared_noise(capsys, tmp_path, pack_cache):
    pack = tmp_path / "noisy.yaml"
    pack.write_text(NOISY, encoding="utf-8")
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "4242\tcall 5678"}]))
    args = ("scan", str(log), "--rules", str(pack), "--only", "--json")
    for _ in range(2):  # the first run fills the cache, the second is served from it
        code, out, _ = run(capsys, *args)
        assert code == 0 and [json.loads(l)["literal"] for l in out.splitlines()] == ["5678"]
    assert entries(pack_cache)
