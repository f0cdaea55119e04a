"""The diagnostics on recordings with real compaction boundaries.

Fixtures (tests/fixtures/transcripts/README.md says where their shapes come from):
``claude_code_compacted.jsonl`` (two ``compact_boundary`` entries, each followed by its
``isCompactSummary`` entry), ``codex_rollout_rereads.jsonl`` (one ``compacted`` item), and
``replay/recording.jsonl`` with ``replay/contexts.jsonl`` (a ``firewall replay --contexts`` line).
Probes run against the Anthropic SDK over its mock transport: the model is outside the process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from firewall.evaluation import diagnostics
from firewall.cli import main
from firewall.evaluation.diagnostics import PROBE_SYSTEM, Reread, diagnose_file, reread_calls
from firewall.errors import ConversationError, FirewallError
from firewall.formats.transcripts import read_transcript

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "transcripts" / "claude_code_compacted.jsonl"
CODEX = FIXTURES / "transcripts" / "codex_rollout_rereads.jsonl"
RECORDING = FIXTURES / "replay" / "recording.jsonl"
CONTEXTS = FIXTURES / "replay" / "contexts.jsonl"
INVOICE = "INV-2025-08-44719"


def pairs(rereads: list[Reread]) -> list[tuple[int, int]]:
    return [(r.index, r.original) for r in rereads]


def test_claude_code_boundaries_are_read_from_the_transcript():
    chunk = read_transcript(CLAUDE)
    assert chunk.agent == "claude-code"
    assert chunk.boundaries == [7, 21]
    assert chunk.turns[7].text.startswith("This session is being continued")  # the summary entry
    assert all(c.name != "Read" or c.id != "toolu_side" for t in chunk.turns
               for c in t.tool_calls)  # a subagent's sidechain is not the main context


def test_claude_code_rereads_per_boundary():
    [first, second] = diagnose_file(str(CLAUDE))[0].boundaries
    # Read of refunds.py again; `cat src/billing/gateway.py` (relative) after a Read of the
    # absolute path; the same Bash command with another description. Not counted: the read of
    # refunds.py after its Edit (new content), a file the span never read.
    assert pairs(first.rereads) == [(8, 1), (10, 5), (12, 3)]
    assert [r.tool for r in first.rereads] == ["Read", "Bash", "Bash"]
    assert (first.span, first.end, first.calls_after) == ((0, 7), 21, 6)
    # each boundary is judged on its own segment: gateway.py was held through the `cat` at 10
    assert pairs(second.rereads) == [(22, 10), (24, 18)]
    assert second.span == (7, 21)


def test_codex_rollout_rereads():
    [d] = diagnose_file(str(CODEX))
    assert (d.kind, [b.boundary for b in d.boundaries]) == ("codex", [6])
    [b] = d.boundaries
    # `sed -n '1,40p' src/billing/refunds.py` re-reads what `cat` read; the same charges
    # lookup again. apply_patch writes; `rg` searches what was never fetched.
    assert pairs(b.rereads) == [(6, 2), (8, 4)]
    assert b.rereads[0].target == "/home/dev/shop/src/billing/refunds.py"  # joined to workdir
    assert b.calls_after == 4


def test_reread_calls_on_native_messages_for_the_replay():
    messages = json.loads(RECORDING.read_text())["messages"]
    found = reread_calls(messages, 7)  # compaction covered 0..6: k = 6
    assert pairs(found) == [(8, 2), (10, 4)]
    assert found[1].target == f'lookup_invoice {{"invoice_id": "{INVOICE}"}}'
    assert reread_calls(messages, 7, end=9) == found[:1]
    assert reread_calls(messages, 7, start=3) == found[1:]  # the span no longer holds the read
    with pytest.raises(FirewallError, match="boundary"):
        reread_calls(messages, 99)


def call(n: int, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": "",
             "tool_calls": [{"name": name, "arguments": arguments, "id": f"c{n}"}]},
            {"role": "tool", "name": name, "tool_call_id": f"c{n}", "content": "..."}]


@pytest.mark.parametrize(("before", "after", "counted"), [
    ({"command": "cat app/main.py | head -5"}, {"command": "nl -ba ./app/main.py"}, True),
    ({"command": "cat 'my dir/a.py'"}, {"command": "head -n 3 'my dir/a.py'"}, True),
    ({"command": "sed -n '1,20p' a.py"}, {"command": "tail a.py && echo done"}, True),
    ({"command": "cat a.py"}, {"command": "sed -i 's/x/y/' a.py"}, False),  # an edit
    ({"command": "cat a.py"}, {"command": "cat b.py"}, False),
    ({"command": "pytest -q", "timeout": 60}, {"command": "pytest  -q", "timeout": 90}, True),
    ({"command": "cat 'unbalanced"}, {"command": "cat 'unbalanced"}, True),  # same call
])
def test_shell_rereads(before, after, counted):
    messages = [{"role": "user", "content": "go"}, *call(1, "bash", before),
                *call(2, "bash", after)]
    assert len(reread_calls(messages, 3)) == int(counted)


def test_a_target_counts_once_per_boundary():
    read = {"file_path": "/srv/a.py"}
    messages = [{"role": "user", "content": "go"}, *call(1, "Read", read), *call(2, "Read", read),
                *call(3, "Read", read)]
    assert pairs(reread_calls(messages, 3)) == [(3, 1)]


def test_diagnose_with_replay_contexts_cli(capsys):
    assert main(["diagnose", str(RECORDING), "--contexts", str(CONTEXTS), "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert (result["id"], result["kind"]) == ("conv-1", "replay")
    [b] = result["boundaries"]
    assert (b["boundary"], len(b["rereads"]), b["probes"]) == (7, 2, None)
    assert result["probes_skipped"] == diagnostics.OFFLINE_NOTE


def test_contexts_of_conversations_not_given_are_reported(capsys):
    assert main(["diagnose", str(CLAUDE), "--contexts", str(CONTEXTS)]) == 1
    err = capsys.readouterr().err
    assert "1 conversation(s) of" in err and "are in none of the files: 'conv-1'" in err


def test_diagnose_offline_says_probes_are_skipped(capsys):
    assert main(["diagnose", str(CLAUDE), str(RECORDING)]) == 0
    out, err = capsys.readouterr()
    assert "skipped" in err and "extractive" in err
    assert "compaction 1 before turn 7: 3 re-read(s) among 6 tool call(s)" in out
    assert "conv-1 (replay, 15 turns, compaction boundaries: 0)" in out  # no --contexts


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "conv-1", "k": "6", "context": []}', "'k' (integer)"),
    ("not json", "invalid JSON"),
    ('{"id": "conv-1", "k": 40, "context": []}', "k=40, outside its 15 messages"),
])
def test_bad_contexts_line_is_named(tmp_path, line, message):
    path = tmp_path / "ctx.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ConversationError, match=re.escape(message)) as info:
        diagnose_file(str(RECORDING), contexts=diagnostics._contexts(str(path)))
    assert "ctx.jsonl" in str(info.value) or "recording.jsonl" in str(info.value)


# ── probes, against the vendor SDK's mock transport ──────────────────────────────────────────

class ClozeModel:
    """A stand-in for the vendor's HTTP API that answers a cloze from the transcript it is sent:
    the text between the excerpt's words around [BLANK] when the transcript has them, else a
    string of the shape the question asks for, else UNKNOWN."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def answer(self, prompt: str) -> str:
        transcript = " ".join(prompt.split("<transcript>", 1)[1].split("</transcript>")[0].split())
        excerpt = prompt.split("Excerpt from earlier in the conversation:\n", 1)[1]
        before, after = excerpt.split("\n\nWhat exact string", 1)[0].split("[BLANK]", 1)
        found = re.search(re.escape(before[-12:]) + r"(\S+)" + re.escape(after[:6]), transcript)
        if found is not None:
            return found.group(1)
        # else the first string of the shape the words before the blank ask for: what the
        # context holds now, right or (a near miss) wrong
        for cue, shape in (("invoice ", r"INV-\d{4}-\d{2}-\d{5}"), (" in ", r"[\w/-]+\.py")):
            if before.lower().endswith(cue) and (hit := re.search(shape, transcript)):
                return hit.group(0)
        return "UNKNOWN"

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.bodies.append(body)
        text = self.answer(body["messages"][0]["content"])
        return httpx2.Response(200, json={
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text, "citations": None}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 12}})


@pytest.fixture
def probe_model():
    pytest.importorskip("httpx2")
    sdk = pytest.importorskip("anthropic")
    import httpx2

    from firewall.summarizers.anthropic import AnthropicSummarizer

    api = ClozeModel()
    client = sdk.Anthropic(api_key="test", max_retries=0,
                           http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    return AnthropicSummarizer(client=client, model="claude-test", system=PROBE_SYSTEM,
                               max_tokens=256), api


def test_probe_recovery_when_the_ledger_holds_the_facts(probe_model):
    from firewall.compaction.guard import Firewall

    model, api = probe_model
    [d] = diagnose_file(str(RECORDING), contexts=diagnostics._contexts(str(CONTEXTS)),
                        model=model, firewall=Firewall(), probes=3)
    result = d.boundaries[0].probes
    verdicts = {p.fact: p.verdict for p in result.probes}
    # the composed context holds the ledger: both facts come back exactly
    assert verdicts[INVOICE] == verdicts["src/billing/refunds.py"] == "recovered"
    assert result.confabulations == []
    assert result.recovery == sum(v == "recovered" for v in verdicts.values()) / len(
        result.valid)
    assert len(api.bodies) == 6  # the full span and the compacted context, per fact
    assert api.bodies[0]["system"] == PROBE_SYSTEM
    assert "Pinned literals" not in api.bodies[0]["messages"][0]["content"]  # the full span
    assert "Pinned literals" in api.bodies[1]["messages"][0]["content"]  # the composed context


def test_confabulation_diff_on_a_codex_compaction(probe_model):
    from firewall.compaction.guard import Firewall

    model, _ = probe_model
    [d] = diagnose_file(str(CODEX), model=model, firewall=Firewall(), probes=8)
    result = d.boundaries[0].probes
    # Codex's summary wrote INV-2025-08-44791 for INV-2025-08-44719: asked the invoice, the
    # compacted context answers the wrong one; the full span answers right.
    [wrong] = result.confabulations
    assert (wrong.fact, wrong.full, wrong.compacted) == (INVOICE, INVOICE, "INV-2025-08-44791")
    assert result.recovery is not None and result.recovery < 1
    assert all(p.verdict in ("unknown", "confabulated", "invalid") for p in result.probes)


def test_probes_never_send_a_secret(probe_model, tmp_path):
    from firewall.compaction.guard import Firewall

    secret = "AKIA" + "KIEM6OJW25SI6WOR"  # not the documentation key: that one is allowlisted
    conversation = json.loads(RECORDING.read_text())
    conversation["messages"][1]["content"] += f" The deploy key is {secret}."
    recording = tmp_path / "recording.jsonl"
    recording.write_text(json.dumps(conversation) + "\n")
    model, api = probe_model
    [d] = diagnose_file(str(recording), contexts=diagnostics._contexts(str(CONTEXTS)),
                        model=model, firewall=Firewall(), probes=5)
    assert d.boundaries[0].probes.probes and api.bodies
    assert all(secret not in json.dumps(body) for body in api.bodies)
    assert secret not in [p.fact for p in d.boundaries[0].probes.probes]


def test_a_secret_in_a_reread_call_is_masked_in_the_output(tmp_path, capsys):
    token = "ghp_" + "FAKEu8jzPde0IgxLd6GncfBAepfJBd0Kh8oO"  # split: not a real token
    fetch = {"command": f"curl -H 'Authorization: token {token}' https://api.example/x"}
    messages = [{"role": "user", "content": "go"}, *call(1, "bash", fetch),
                *call(2, "bash", fetch)]
    recording = tmp_path / "r.jsonl"
    recording.write_text(json.dumps({"id": "c", "messages": messages}) + "\n")
    contexts = tmp_path / "ctx.jsonl"
    contexts.write_text(json.dumps({"id": "c", "k": 2, "context": []}) + "\n")
    assert main(["diagnose", str(recording), "--contexts", str(contexts)]) == 0
    out = capsys.readouterr().out
    assert "1 re-read(s)" in out and token not in out and "[[SECRET_" in out
