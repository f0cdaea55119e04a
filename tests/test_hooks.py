"""Claude Code / Codex CLI hooks: transcripts in the agents' real JSONL formats, the hook commands
on stdin JSON (in process and as a subprocess), state files, audit records, settings merge."""

from __future__ import annotations

import io
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import firewall
from firewall.integrations import hooks
from firewall.audit import open_audit_log
from firewall.errors import FirewallError
from firewall.compaction.ledger import Ledger

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
EVENTS = Path(__file__).parent / "fixtures" / "hooks"  # payloads + the clients' published fields
CLAUDE = FIXTURES / "claude_code_session.jsonl"
CODEX = FIXTURES / "codex_rollout.jsonl"
CODEX_COMPACTED = FIXTURES / "codex_rollout_compacted.jsonl"
INVOICE, ORDER, EMAIL = "INV-2025-08-44719", "#W2378156", "dana.k@example.com"
CHARGE, PATH = "ch_3PqL9x2eZvKYlo2C", "src/billing/refunds.py"

# A small pinned pack, so these tests do not move with the built-in packs.
PACK = r"""
name: hooktest
version: "1"
description: The literals of the transcript fixtures
rules:
  - id: invoice-number
    kind: regex
    description: Invoice ids
    pattern: '\b(?P<literal>INV-\d{4}-\d{2}-\d{5})\b'
    severity: required
    examples:
      match: [{text: 'Why was INV-2025-08-44719 charged twice?', literals: ['INV-2025-08-44719']}]
      no_match: ['INV-25-17']
  - id: order-number
    kind: regex
    description: Order numbers
    pattern: '#W\d{7}\b'
    examples:
      match: [{text: 'order #W2378156 shipped', literals: ['#W2378156']}]
      no_match: ['#W12']
  - id: charge-id
    kind: regex
    description: Payment charge ids
    pattern: '\bch_[A-Za-z0-9]{16}\b'
    examples:
      match: [{text: 'charge ch_3PqL9x2eZvKYlo2C', literals: ['ch_3PqL9x2eZvKYlo2C']}]
      no_match: ['ch_short']
  - id: email
    kind: regex
    description: Email addresses
    pattern: '\b[\w.+-]+@[\w-]+\.[\w.]+\b'
    examples:
      match: [{text: 'mail dana.k@example.com now', literals: ['dana.k@example.com']}]
      no_match: ['no at sign']
  - id: release-id
    kind: regex
    description: Release names of the deploy fixtures
    pattern: '\brel-\d{4}-\d{2}-\d{2}-\d{4}\b'
    examples:
      match: [{text: 'release rel-2026-01-10-4452 failed', literals: ['rel-2026-01-10-4452']}]
      no_match: ['rel-1']
  - id: source-path
    kind: regex
    description: Repository-relative source paths
    pattern: '(?<![\w/])src/[\w/.-]+\.\w+'
    examples:
      match: [{text: 'see src/billing/refunds.py please', literals: ['src/billing/refunds.py']}]
      no_match: ['/home/x/src']
"""


@pytest.fixture(scope="module")
def pack_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("packs") / "hooktest.yaml"
    path.write_text(PACK)
    return str(path)


@pytest.fixture(scope="module")
def fw(pack_path) -> firewall.Firewall:
    return firewall.Firewall([pack_path])


PACK_FILE: list[str] = []


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, pack_path):
    PACK_FILE[:] = [pack_path]
    monkeypatch.setenv("FIREWALL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FIREWALL_AUDIT_DB", str(tmp_path / "audit.db"))
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", "test-installation-key")


def run(name: str, event: dict | str, **kwargs) -> tuple[int, str, str]:
    kwargs.setdefault("rules", [PACK_FILE[0]] if PACK_FILE else None)
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(event if isinstance(event, str) else json.dumps(event))
    code = hooks.run_hook(name, stdin=stdin, stdout=out, stderr=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()  # PostCompact -> post-compact


def event_fixture(agent: str, name: str, transcript: Path, **fields) -> dict:
    """The fixture payload of ``agent``'s event ``name`` (e.g. ``PostCompact``), with the
    transcript path and the given fields filled in; ``name`` without a fixture (a test's own
    "x") gets the agent's PreCompact payload."""
    path = EVENTS / f"{agent}.{_kebab(name)}.json"
    event = json.loads((path if path.exists() else EVENTS / f"{agent}.pre-compact.json")
                       .read_text())
    event["transcript_path"] = str(transcript)
    unknown = set(fields) - set(event)
    assert not unknown, f"{sorted(unknown)} are not fields of {agent} {name}"
    return {**event, **fields}


def claude_event(name: str, transcript: Path = CLAUDE, **fields) -> dict:
    return event_fixture("claude-code", name, transcript, **fields)


def codex_event(name: str, transcript: Path, **fields) -> dict:
    return event_fixture("codex", name, transcript, **fields)


# ── the events are the clients' published payloads ───────────────────────────────────────────

@pytest.mark.parametrize("fixture", sorted(p.name for p in EVENTS.glob("*.json")
                                           if not p.name.endswith(".schema.json")))
def test_event_fixtures_match_the_published_schemas(fixture):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((EVENTS / fixture.replace(".json", ".schema.json")).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    event = json.loads((EVENTS / fixture).read_text())
    jsonschema.validate(event, schema)
    jsonschema.validate({**event, "transcript_path": str(CLAUDE)}, schema)


def test_hooks_read_only_published_fields():
    """Every field a handler reads from an event is one some client publishes: no invented
    ``status`` / ``error`` (Codex closes its objects, PostCompact fires only on success)."""
    published = set()
    for path in EVENTS.glob("*.schema.json"):
        published |= set(json.loads(path.read_text())["properties"])
    tree = ast.parse(Path(hooks.__file__).read_text())
    read = {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "event" and isinstance(node.args[0], ast.Constant)}
    read |= {node.slice.value for node in ast.walk(tree)
             if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
             and node.value.id == "event" and isinstance(node.slice, ast.Constant)}
    assert read >= {"session_id", "transcript_path", "compact_summary", "source"}
    assert read <= published, f"fields no client sends: {sorted(read - published)}"


# ── transcripts ──────────────────────────────────────────────────────────────────────────────

def test_claude_transcript_turns():
    chunk = hooks.read_transcript(CLAUDE)
    assert chunk.offset == CLAUDE.stat().st_size and chunk.skipped == 0
    roles = [t.role for t in chunk.turns]
    # isMeta caveat -> system (never scanned); the sidechain line is dropped; thinking ignored
    assert roles == ["system", "user", "assistant", "assistant", "tool", "assistant", "tool",
                     "assistant"]
    assert [t.tool_name for t in chunk.turns if t.role == "tool"] == ["Read", "Bash"]
    assert chunk.turns[5].tool_calls[0].arguments["command"].endswith(INVOICE)
    assert all("#W0000001" not in t.text for t in chunk.turns)  # subagent (sidechain) turn


def test_codex_rollout_turns():
    chunk = hooks.read_transcript(CODEX)
    roles = [t.role for t in chunk.turns]
    # <environment_context> is harness text; event_msg duplicates and reasoning are skipped
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    shell = chunk.turns[2].tool_calls[0]
    assert shell.name == "shell" and shell.arguments["command"][-1].endswith(INVOICE)
    assert chunk.turns[3].tool_name == "shell" and CHARGE in chunk.turns[3].text
    assert chunk.turns[4].tool_calls[0].name == "apply_patch"
    assert hooks.read_transcript(CODEX_COMPACTED).summaries[0].startswith("The user reported")


def test_transcript_skips_bad_lines_and_waits_for_partial_ones(tmp_path):
    path = tmp_path / "t.jsonl"
    good = CLAUDE.read_bytes()
    partial = b'{"type":"user","message":{"role":"user","content":"Ticket INV-2025-09-00001'
    path.write_bytes(good + b"not json\n[1,2]\n\xff\xfe\n{\"type\":\"queue-operation\"}\n"
                     + partial)
    chunk = hooks.read_transcript(path)
    assert chunk.skipped == 3  # non-JSON, a non-object, undecodable bytes; unknown type ignored
    assert len(chunk.turns) == 8 and chunk.offset == path.stat().st_size - len(partial)
    with path.open("ab") as handle:  # the agent finishes writing the line
        handle.write(b'"}}\n')
    rest = hooks.read_transcript(path, chunk.offset)
    assert [t.text for t in rest.turns] == ["Ticket INV-2025-09-00001"]
    assert hooks.read_transcript(path, 10**9).offset == path.stat().st_size  # shrunk: reread


# ── Claude Code: pre-compact → post-compact → session-start ─────────────────────────────────

def test_claude_code_round_trip():
    code, out, err = run("pre-compact", claude_event("PreCompact", trigger="auto"))
    assert (code, out, err) == (0, "", "")
    state = hooks.load_state(claude_event("x")["session_id"])
    assert {INVOICE, ORDER, EMAIL} <= set(state.ledger.values())
    assert state.pending and state.offset == CLAUDE.stat().st_size
    assert "#W0000001" not in state.ledger.values()

    summary = f"Refund for invoice INV-2025-08-44791 (order {ORDER}) via src/billing/refunds.py."
    code, out, err = run("post-compact", claude_event("PostCompact", trigger="auto",
                                                      compact_summary=summary))
    assert code == 0 and err == ""
    warning = json.loads(out)["systemMessage"]
    assert INVOICE in warning and "altered" in warning
    [record] = list(open_audit_log(os.environ["FIREWALL_AUDIT_DB"]).export())
    status = {lit.value: lit.status for lit in record.literals}
    assert status[INVOICE] == "mutated_unrepaired" and status[ORDER] == "in_summary"
    assert status[EMAIL] == "reinjected"
    assert record.vendor_path == "claude-code-hooks" and record.outcome == "compacted"
    assert record.attempts[0].verdict.mutated_values == [INVOICE]

    code, out, _ = run("session-start", claude_event("SessionStart", source="compact",
                                                     model="claude-sonnet-4-5"))
    context = json.loads(out)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    ledger = hooks.load_state(claude_event("x")["session_id"]).ledger
    parsed = Ledger.parse(context["additionalContext"], ledger.nonce, ledger.key)
    # every literal, byte-exact, but those the summary holds (the altered invoice is written)
    held = {ORDER, "src/billing/refunds.py"}
    assert held <= set(ledger.values()) and INVOICE in [e.value for e in parsed]
    assert [e.value for e in parsed] == [v for v in ledger.values() if v not in held]
    assert hooks.load_state(claude_event("x")["session_id"]).held == sorted(held)
    assert not hooks.load_state(claude_event("x")["session_id"]).pending
    assert run("session-start", claude_event("SessionStart", source="startup"))[1] == ""


def test_pre_compact_is_incremental(fw):
    event = claude_event("PreCompact", trigger="manual", custom_instructions="keep ids")
    hooks.pre_compact(event, fw)
    first = hooks.load_state(event["session_id"]).ledger
    hooks.pre_compact(event, fw)  # nothing new in the transcript: the ledger is unchanged
    again = hooks.load_state(event["session_id"]).ledger
    assert again.model_dump() == first.model_dump()


def test_post_compact_alone_still_builds_the_ledger(fw, tmp_path):
    # PreCompact can be skipped (anthropics/claude-code#15096): post-compact reads the transcript
    audit = firewall.audit.MemoryAuditLog()
    out = hooks.post_compact(claude_event("PostCompact", compact_summary=f"{INVOICE} "
                             f"src/billing/refunds.py"), fw, "claude-code", audit=audit)
    assert out is None  # every required literal is in the summary: no warning
    [record] = audit.export()
    assert {lit.value for lit in record.literals} >= {INVOICE, ORDER}
    assert hooks.load_state(claude_event("x")["session_id"]).pending


# ── Codex ────────────────────────────────────────────────────────────────────────────────────

def test_codex_local_compaction(tmp_path):
    rollout = tmp_path / "rollout-2025-11-03T10-02-00-0199a5c2.jsonl"
    shutil.copy(CODEX, rollout)
    assert run("pre-compact", codex_event("PreCompact", rollout), agent="codex")[:2] == (0, "")
    with rollout.open("ab") as handle:  # Codex appends the compacted item
        handle.write(CODEX_COMPACTED.read_bytes())
    code, out, _ = run("post-compact", codex_event("PostCompact", rollout), agent="codex")
    assert code == 0 and INVOICE in json.loads(out)["systemMessage"]
    [record] = list(open_audit_log(os.environ["FIREWALL_AUDIT_DB"]).export())
    status = {lit.value: lit.status for lit in record.literals}
    assert record.vendor_path == "codex-hooks" and record.outcome == "compacted"
    assert status[INVOICE] == "mutated_unrepaired" and status[ORDER] == "in_summary"
    assert status[CHARGE] == "reinjected"
    # re-injected once, on the next prompt; not again
    code, out, _ = run("user-prompt-submit", codex_event("UserPromptSubmit", rollout),
                       agent="codex")
    context = json.loads(out)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert INVOICE in context["additionalContext"] and CHARGE in \
        context["additionalContext"]
    assert run("user-prompt-submit", codex_event("UserPromptSubmit", rollout), agent="codex")[1] \
        == ""


def test_codex_remote_compaction_is_opaque(tmp_path, fw):
    rollout = tmp_path / "rollout.jsonl"
    remote = {"timestamp": "2025-11-03T10:05:01.000Z", "type": "compacted",
              "payload": {"message": "", "replacement_history": []}}
    rollout.write_bytes(CODEX.read_bytes() + json.dumps(remote).encode() + b"\n")
    audit = firewall.audit.MemoryAuditLog()
    assert hooks.post_compact(codex_event("PostCompact", rollout), fw, "codex", audit) is None
    [record] = audit.export()
    assert {lit.status for lit in record.literals} == {"opaque"}
    assert record.attempts[0].verdict is None


# ── failing open, never losing the ledger ────────────────────────────────────────────────────

@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"transcript_path": "/x"}'])
def test_bad_input_fails_open(stdin):
    code, out, err = run("pre-compact", stdin)
    assert code == 0 and out == ""
    assert err.startswith("literal-firewall: pre-compact hook skipped:") and err.count("\n") == 1


def test_missing_transcript_keeps_the_existing_ledger(tmp_path):
    run("pre-compact", claude_event("PreCompact"))
    path = hooks.session_path(claude_event("x")["session_id"])
    before = path.read_bytes()
    code, out, err = run("pre-compact", claude_event("PreCompact", tmp_path / "gone.jsonl"))
    assert code == 0 and "FileNotFoundError" in err
    assert path.read_bytes() == before
    assert not list(path.parent.glob("*.tmp"))  # no temp file left behind


def test_corrupt_state_is_set_aside_not_overwritten():
    path = hooks.session_path("broken-session")
    path.parent.mkdir(parents=True)
    path.write_text("{half a file")
    state = hooks.load_state("broken-session")
    assert len(state.ledger) == 0
    assert path.with_name(path.name + ".corrupt").read_text() == "{half a file"


def test_session_ids_never_escape_the_state_dir(tmp_path):
    path = hooks.session_path("../../etc/passwd")
    assert path.parent == tmp_path / "state" / "sessions" and path.name.startswith("sha256-")


def test_hook_runs_as_a_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run([sys.executable, "-m", "firewall.integrations.hooks", "run", "pre-compact",
                           "--rules", PACK_FILE[0]],
                          input=json.dumps(claude_event("PreCompact")), capture_output=True,
                          text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert hooks.session_path(claude_event("x")["session_id"]).exists()
    done = subprocess.run([sys.executable, "-m", "firewall.integrations.hooks", "run", "session-start"],
                          input=json.dumps(claude_event("SessionStart", source="compact")),
                          capture_output=True, text=True, env=env, timeout=60)
    assert INVOICE in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


# ── configuration ────────────────────────────────────────────────────────────────────────────

def test_claude_code_config():
    config = hooks.hooks_config("claude-code")["hooks"]
    assert set(config) == {"PreCompact", "PostCompact", "SessionStart"}
    assert config["SessionStart"] == [{"matcher": "compact", "hooks": [
        {"type": "command", "command": "firewall hooks run session-start"}]}]
    codex = hooks.hooks_config("codex", command="uvx firewall", rules=["core"])["hooks"]
    assert codex["UserPromptSubmit"][0]["hooks"][0]["command"] == \
        "uvx firewall hooks run user-prompt-submit --agent codex --rules core"


def test_install_merges_and_is_idempotent(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    other = {"matcher": "manual", "hooks": [{"type": "command", "command": "backup.sh"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [mine],
                                                                "PreCompact": [other]}}))
    assert hooks.install(settings, "claude-code") is True
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["hooks"]["PreToolUse"] == [mine]
    assert data["hooks"]["PreCompact"][0] == other and len(data["hooks"]["PreCompact"]) == 2
    text = settings.read_text()
    assert hooks.install(settings, "claude-code") is False
    assert hooks.install(settings, "claude-code", command="/opt/venv/bin/firewall") is False
    assert settings.read_text() == text


def test_install_refuses_invalid_json(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text("{broken")
    with pytest.raises(FirewallError, match="not valid JSON"):
        hooks.install(settings, "claude-code")
    assert settings.read_text() == "{broken"


def test_cli_print_and_install(tmp_path, capsys):
    assert hooks.main(["codex", "--print"]) == 0
    assert json.loads(capsys.readouterr().out) == hooks.hooks_config("codex")
    target = tmp_path / "hooks.json"
    assert hooks.main(["codex", "--install", str(target)]) == 0
    assert json.loads(target.read_text()) == hooks.hooks_config("codex")


# ── what a user entry holds is read as what it is (issue 28, defect 9) ───────────────────────

def test_bash_mode_output_is_tool_output_not_user_typed(fw):
    event = claude_event("PreCompact", FIXTURES / "claude_code_records.jsonl", trigger="auto")
    hooks.pre_compact(event, fw)
    entries = {e.value: e for e in hooks.load_state(event["session_id"]).ledger.entries}
    printed, typed = entries["rel-2026-01-09-4417"], entries["rel-2026-01-10-4452"]
    # rel-...-4417 is only in what `!ls` printed: tool output, never required of the summary
    assert (printed.role, fw.is_required(printed)) == ("tool", False)
    assert printed.severity != "required"
    assert (typed.role, fw.is_required(typed)) == ("user", True)  # the user typed this one


# ── the hooks give the agent what eval measures (issue 31) ───────────────────────────────────

COMPACTED = FIXTURES / "claude_code_compacted.jsonl"


def _cut_at_compactions(path: Path):
    """(boundary, summary, bytes before the boundary line, bytes up to the summary's end)."""
    from firewall.formats import read_conversations

    (conversation,) = read_conversations(path)
    data, meta = path.read_bytes(), conversation.meta
    return conversation, [(b, s, data[:start], data[:end]) for b, s, (start, end)
                          in zip(meta["boundaries"], meta["summaries"], meta["cuts"])]


@pytest.mark.parametrize("budget", [10_000, 60])  # every value; a budget that must evict
def test_three_handlers_re_inject_every_pinned_value_the_summary_lacks(tmp_path, pack_path,
                                                                       budget):
    fw = firewall.Firewall([pack_path], budget_tokens=budget)
    conversation, cuts = _cut_at_compactions(COMPACTED)
    assert len(cuts) == 2
    transcript = tmp_path / "transcript.jsonl"
    event = claude_event("PreCompact", transcript, trigger="auto")
    audit = firewall.audit.MemoryAuditLog()
    evicted_somewhere = False
    for boundary, summary, before, after in cuts:
        transcript.write_bytes(before)
        hooks.pre_compact(event, fw)
        transcript.write_bytes(after)
        hooks.post_compact(claude_event("PostCompact", transcript, trigger="auto",
                                        compact_summary=summary), fw, audit=audit)
        out = hooks.session_start(claude_event("SessionStart", transcript, source="compact"),
                                  None)
        state = hooks.load_state(event["session_id"])
        block = out["hookSpecificOutput"]["additionalContext"]
        written = [e.value for e in Ledger.parse(block, state.ledger.nonce, state.ledger.key)]
        # every pinned value the summary lacks is in the block, byte-exact
        lacking = [v for v in state.ledger.values() if v not in summary]
        assert lacking and set(lacking) <= set(written)
        # and the pinned values are those eval pins at the same point, with the same code
        ledger = Ledger.new("eval")
        pinned = fw.pin(ledger, conversation.turns[:boundary], beside=[summary])
        assert state.ledger.values() == ledger.values()
        assert sorted(pinned.held) == state.held
        evicted_somewhere |= bool(pinned.evicted)
    assert evicted_somewhere == (budget == 60)
    assert len(list(audit.export())) == 2


def test_eval_drives_the_hooks_at_each_compaction_of_a_session_file(pack_path):
    from firewall.evaluation import evaluate, gold
    from firewall.formats import read_conversations

    fw = firewall.Firewall([pack_path], budget_tokens=60)
    (conversation,) = read_conversations(COMPACTED)
    task = evaluate.EvalTask([pack_path], (), 60, 4)
    scores = task(fw, str(COMPACTED), conversation)
    agent = [s for s in scores if s.frac == gold.AGENT]
    assert len(agent) == 2
    for score in agent:  # through the hooks, the agent has what eval's summary + ledger has
        assert score.scores["hooks"][0] == score.scores["agent+ledger"][0]
        assert score.scores["hooks"][1] == score.scores["agent+ledger"][1]
    result = evaluate.run([COMPACTED], fractions=(), packs=[pack_path], budget=60)
    assert "+ hooks' block ID" in evaluate.format_report(result)


def test_the_block_is_a_share_of_the_context_compacted_not_of_the_whole_session(tmp_path,
                                                                               pack_path):
    # at a second compaction the agent compacts its first summary and the turns after it; a
    # budget read off every turn since the session began grew with each compaction
    from firewall.compaction.budget import Budget
    from firewall.tokens import count_tokens
    from firewall.evaluation import evaluate, gold

    fw = firewall.Firewall([pack_path], budget_tokens=Budget(share=0.22, floor=0, cap=10_000))
    conversation, cuts = _cut_at_compactions(COMPACTED)
    (b1, *_), (b2, summary, before, after) = cuts
    turns = conversation.turns
    live, whole = fw.budget_for(turns[b1:b2]), fw.budget_for(turns[:b2])
    assert 0 < live < whole
    transcript = tmp_path / "transcript.jsonl"
    event = claude_event("PreCompact", transcript, trigger="auto")
    for _, summary_i, before_i, after_i in cuts:
        transcript.write_bytes(before_i)
        hooks.pre_compact(event, fw)
        transcript.write_bytes(after_i)
        hooks.post_compact(dict(event, compact_summary=summary_i), fw,
                           audit=firewall.audit.MemoryAuditLog())
    state = hooks.load_state(event["session_id"])
    expected = Ledger.new("eval")
    fw.pin(expected, turns[:b2], beside=[summary], budget=live)
    assert state.ledger.values() == expected.values()
    assert count_tokens(state.ledger.render()) <= live
    sized_by_session = Ledger.new("eval")
    fw.pin(sized_by_session, turns[:b2], beside=[summary], budget=whole)
    assert len(state.ledger.values()) < len(sized_by_session.values())
    # eval's summary + ledger at each agent's compaction is sized the same way (at the first,
    # nothing fits: neither writes a block)
    scores = evaluate.EvalTask([pack_path], (), fw.budget_tokens, 4)(fw, str(COMPACTED),
                                                                     conversation)
    agent = [s for s in scores if s.frac == gold.AGENT]
    assert len(agent) == 2
    for score in agent:
        assert score.scores["hooks"] == score.scores["agent+ledger"]


def test_turns_after_the_summary_cost_the_block_nothing(tmp_path, pack_path):
    # a transcript holding turns after the compaction's summary (a client that keeps recent
    # turns verbatim; a replay's kept tail): what they hold stays pinned, unwritten, as
    # compact does not write what its kept tail holds
    fw = firewall.Firewall([pack_path])
    _, cuts = _cut_at_compactions(COMPACTED)
    _, summary, before, after = cuts[0]
    assert INVOICE not in summary and INVOICE in before.decode()
    data = COMPACTED.read_bytes()  # the turns up to the next call passing the invoice
    call = data.index(b"--invoice " + INVOICE.encode(), len(after))
    kept = data[len(after):data.index(b"\n", call) + 1]
    blocks = {}
    for name, transcript_bytes in (("summary only", after), ("kept turns", after + kept)):
        transcript = tmp_path / f"{name}.jsonl"
        event = claude_event("PreCompact", transcript, trigger="auto",
                             session_id=name.replace(" ", "-"))
        transcript.write_bytes(before)
        hooks.pre_compact(event, fw)
        transcript.write_bytes(transcript_bytes)
        hooks.post_compact(dict(event, compact_summary=summary), fw,
                           audit=firewall.audit.MemoryAuditLog())
        out = hooks.session_start(dict(event, source="compact"), None)
        state = hooks.load_state(event["session_id"])
        assert INVOICE in state.ledger.values()  # pinned either way
        blocks[name] = [e.value for e in Ledger.parse(
            out["hookSpecificOutput"]["additionalContext"], state.ledger.nonce,
            state.ledger.key)]
        assert (INVOICE in state.held) == (name == "kept turns")
    assert INVOICE in blocks["summary only"] and INVOICE not in blocks["kept turns"]


# ── hook commands are shell words (issue 28, defect 12) ──────────────────────────────────────

def _shell(command: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          timeout=60, **kwargs)


def test_a_crafted_rules_or_command_value_runs_no_command(tmp_path):
    echo = f"{shlex.quote(sys.executable)} -c {shlex.quote('import sys; print(sys.argv[1:])')}"
    crafted = ["x; touch PWNED1", "$(touch PWNED2)", "`touch PWNED3`", "a'b\"c d"]
    for command in (echo, echo + " ; touch PWNED4", echo + " $(touch PWNED5)"):
        config = hooks.hooks_config("claude-code", command=command, rules=crafted)
        line = config["hooks"]["PreCompact"][0]["hooks"][0]["command"]
        done = _shell(line, tmp_path)
        assert done.returncode == 0, done.stderr
        argv = ast.literal_eval(done.stdout)
        assert argv[argv.index("--rules") + 1] == crafted[0]  # each value one word, intact
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--rules"] == crafted
    assert not list(tmp_path.glob("PWNED*"))


def test_a_pack_path_with_a_space_works_in_the_installed_hook(tmp_path, pack_path):
    spaced = tmp_path / "my packs" / "hook test.yaml"
    spaced.parent.mkdir()
    shutil.copy(pack_path, spaced)
    cli = tmp_path / "fw cli.py"  # a command path with a space too, written quoted
    cli.write_text("import sys\nfrom firewall.cli import main\nsys.exit(main())\n")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(cli))}"
    settings = tmp_path / "settings.json"
    hooks.install(settings, "claude-code", command=command, rules=[str(spaced)], only=True)
    line = json.loads(settings.read_text())["hooks"]["PreCompact"][0]["hooks"][0]["command"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = _shell(line, tmp_path, input=json.dumps(claude_event("PreCompact", trigger="auto")),
                  env=env)
    assert (done.returncode, done.stderr) == (0, "")
    state = hooks.load_state(claude_event("x")["session_id"])
    assert {INVOICE, ORDER} <= set(state.ledger.values())


def test_session_start_builds_the_ledger_when_no_post_compact_did(tmp_path):
    # a client without PostCompact: session-start pins the span itself, the same way, the
    # summary read from the transcript
    conversation, cuts = _cut_at_compactions(COMPACTED)
    boundary, summary, before, after = cuts[0]
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(before)
    assert run("pre-compact", claude_event("PreCompact", transcript, trigger="auto"))[0] == 0
    transcript.write_bytes(after)
    code, out, err = run("session-start", claude_event("SessionStart", transcript,
                                                       source="compact"))
    assert (code, err) == (0, "")
    state = hooks.load_state(claude_event("x")["session_id"])
    assert state.pinned and not state.pending
    fw = firewall.Firewall([PACK_FILE[0]])
    ledger = Ledger.new("eval")
    fw.pin(ledger, conversation.turns[:boundary], beside=[summary])
    assert state.ledger.values() == ledger.values()
    written = Ledger.parse(json.loads(out)["hookSpecificOutput"]["additionalContext"],
                           state.ledger.nonce, state.ledger.key)
    assert {e.value for e in written} == {v for v in ledger.values() if v not in summary}


# ── the archive: every literal of the compacted span, one MCP call away (issue 27) ────────────

@pytest.mark.parametrize("tokens", ["1", "0"])
def test_post_compact_sweeps_the_span_unless_told_not_to(tokens, monkeypatch):
    """The archive's token tier (tokens no rule extracted) follows $FIREWALL_ARCHIVE_TOKENS."""
    import sqlite3

    from firewall.audit.archive import SWEPT_RULE

    monkeypatch.setenv("FIREWALL_ARCHIVE_TOKENS", tokens)
    assert run("pre-compact", claude_event("PreCompact", trigger="auto"))[0] == 0
    code, _, err = run("post-compact", claude_event("PostCompact", trigger="auto",
                                                    compact_summary="Refunds."))
    assert code == 0 and err == ""
    with sqlite3.connect(os.environ["FIREWALL_AUDIT_DB"]) as conn:
        swept, ruled = conn.execute("SELECT coalesce(sum(rule = ?), 0), "
                                    "coalesce(sum(rule <> ?), 0) FROM archive",
                                    (SWEPT_RULE, SWEPT_RULE)).fetchone()
    assert ruled >= 3 and (swept > 0) == (tokens == "1")


def test_post_compact_archives_the_span_and_the_hint_line_needs_with_mcp():
    summary = f"Refund for order {ORDER}."
    assert run("pre-compact", claude_event("PreCompact", trigger="auto"))[0] == 0
    code, _, err = run("post-compact", claude_event("PostCompact", trigger="auto",
                                                    compact_summary=summary))
    assert code == 0 and err == ""
    log = open_audit_log(os.environ["FIREWALL_AUDIT_DB"])
    session = claude_event("x")["session_id"]
    count = log.archive_count(session)
    assert count >= 3
    assert log.recall(firewall.audit.archive.Query.of("refunds.py"))[0].value == PATH
    start = claude_event("SessionStart", source="compact", model="claude-sonnet-4-5")

    # without the MCP server the agent cannot ask: no hint line
    plain = json.loads(run("session-start", start)[1])["hookSpecificOutput"]["additionalContext"]
    assert "recall" not in plain
    state = hooks.load_state(session)
    state.pending = True
    hooks.save_state(state)
    code, out, _ = run("session-start", start, recall_hint=True)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(plain)
    assert context.splitlines()[-1] == firewall.audit.archive.hint_line(count, conversation=session)
    # the MCP server searches every session of the user's log: the line names this one
    assert f'conversation "{session}"' in context.splitlines()[-1]
    assert context.count("\n") == plain.count("\n") + 1  # one line more, no other change


def test_install_with_mcp_registers_the_server_and_the_hint(tmp_path, capsys):
    settings = tmp_path / "project" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    assert hooks.main(["claude-code", "--install", str(settings), "--with-mcp"]) == 0
    commands = [h["command"] for groups in json.loads(settings.read_text())["hooks"].values()
                for g in groups for h in g["hooks"]]
    assert "firewall hooks run session-start --recall-hint" in commands
    assert "firewall hooks run post-compact" in commands  # only re-injecting hooks get it
    mcp = json.loads((tmp_path / "project" / ".mcp.json").read_text())
    assert mcp["mcpServers"]["literal-firewall"] == {"command": "firewall", "args": ["mcp"]}
    assert "registered the literal-firewall MCP server" in capsys.readouterr().err
    assert hooks.install_mcp(tmp_path / "project" / ".mcp.json") is False  # idempotent
    plain = hooks.hooks_config("claude-code")["hooks"]["SessionStart"][0]["hooks"][0]
    assert "--recall-hint" not in plain["command"]  # opt-in


def test_an_unreadable_archive_costs_the_hint_line_never_the_block(monkeypatch):
    """The hint line counts the archive; a log that cannot be read then (its server down) used
    to raise out of the re-injecting hook, which fails open: the agent got no block at all, its
    pinned literals lost for the sake of one line. Now the block comes without the line."""
    summary = f"Refund for order {ORDER}."
    assert run("pre-compact", claude_event("PreCompact", trigger="auto"))[0] == 0
    assert run("post-compact", claude_event("PostCompact", trigger="auto",
                                            compact_summary=summary))[0] == 0
    session = claude_event("x")["session_id"]
    state = hooks.load_state(session)
    state.pending = True
    hooks.save_state(state)
    monkeypatch.setenv("FIREWALL_AUDIT_DB", "postgresql://fw@127.0.0.1:1/audit")  # refused
    start = claude_event("SessionStart", source="compact", model="claude-sonnet-4-5")
    code, out, _ = run("session-start", start, recall_hint=True)
    assert code == 0 and out, "no block"
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("<<<ledger ") and "literal-firewall archive" not in context


@pytest.mark.parametrize("unsafe", ["world-writable", "symlink"])
def test_a_state_folder_others_could_plant_a_ledger_in_is_refused(tmp_path, unsafe):
    """A session's state file holds its ledger and the ledger's MAC key, and session-start
    re-injects that ledger as genuine: a sessions folder others can write (or a symlink to
    one) could hold a planted one. The hook is skipped, saying why; nothing is re-injected."""
    import os

    conversation, cuts = _cut_at_compactions(COMPACTED)
    boundary, summary, before, after = cuts[0]
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(before)
    assert run("pre-compact", claude_event("PreCompact", transcript, trigger="auto"))[:2] == (
        0, "")
    sessions = tmp_path / "state" / "sessions"
    if unsafe == "world-writable":
        sessions.chmod(0o777)
    else:
        moved = tmp_path / "elsewhere"
        sessions.rename(moved)
        os.symlink(moved, sessions)
    transcript.write_bytes(after)
    code, out, err = run("session-start", claude_event("SessionStart", transcript,
                                                       source="compact"))
    assert (code, out) == (0, "")
    assert "not private" in err and str(sessions) in err
