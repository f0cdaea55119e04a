"""``firewall mcp``: spawned as a subprocess and driven by the MCP SDK's own client over stdio."""

import json
import os
import subprocess
import sys

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

import firewall  # noqa: E402
from firewall.audit import HASH_PREFIX, literal_hash  # noqa: E402

from mcp_compaction import AWS_ID, INVOICE, KEY, OTHER, compacted  # noqa: E402


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A real compaction: its ledger file and its SQLite audit log, under a known audit key."""
    return compacted(tmp_path, monkeypatch)


def call(db, ledger_files, steps, env=None):
    """Spawn `python -m firewall.cli mcp ...`, then run ``steps(client)`` against it."""
    args = ["-m", "firewall.cli", "mcp", "--audit-db", str(db)]
    for path in ledger_files:
        args += ["--ledger", str(path)]
    params = StdioServerParameters(command=sys.executable, args=args,
                                   env={"FIREWALL_AUDIT_KEY": KEY, **(env or {})})

    async def main():
        async with Client(params) as client:
            return await steps(client)

    return anyio.run(main)


def structured(result):
    assert not result.is_error, result.content
    return result.structured_content


def test_lists_its_tools_and_answers_lookups_over_stdio(served):
    db, ledger_file, result = served

    async def steps(client):
        tools = await client.list_tools()
        by_prefix = await client.call_tool("find_pinned", {"prefix": "INV-2025-08"})
        survival = await client.call_tool("literal_survival", {"value": INVOICE})
        pinned = await client.call_tool("pinned_literals", {})
        elsewhere = await client.call_tool("pinned_literals", {"conversation": "another-one"})
        return tools, by_prefix, survival, pinned, elsewhere

    tools, by_prefix, survival, pinned, elsewhere = call(db, [ledger_file], steps)
    assert {t.name for t in tools.tools} == {"pinned_literals", "find_pinned",
                                             "literal_survival", "recall"}

    found = structured(by_prefix)
    assert [e["value"] for e in found["entries"]] == [INVOICE]  # exact, and not OTHER
    (entry,) = found["entries"]
    assert (entry["role"], entry["first_seen_turn"], entry["rule"]) == ("user", 0,
                                                                        "billing/invoice-number")
    assert entry["conversation"] == result.ledger.conversation_id

    answer = structured(survival)
    assert answer["found"] and answer["pinned_in"] == [result.ledger.conversation_id]
    (hit,) = answer["compactions"]
    assert hit["record"] == result.record.id
    assert hit["status"] == next(o.status for o in result.record.literals if o.value == INVOICE)

    everything = structured(pinned)
    assert {e["value"] for e in everything["entries"]} >= {INVOICE, OTHER}
    assert everything["count"] == len(result.ledger.entries)
    assert structured(elsewhere)["entries"] == []  # one conversation's pins only


def test_sensitive_values_never_leave_in_clear(served):
    db, ledger_file, result = served
    masked = HASH_PREFIX + literal_hash(AWS_ID, KEY.encode())

    async def steps(client):
        return [await client.call_tool(name, arguments) for name, arguments in (
            ("pinned_literals", {}),
            ("find_pinned", {"prefix": "AKIA"}),            # never matched by prefix
            ("find_pinned", {"rule": "aws-access-key-id"}),  # by rule: masked
            ("literal_survival", {"value": AWS_ID}))]

    answers = call(db, [ledger_file], steps)
    text = json.dumps([a.model_dump(mode="json") for a in answers])
    assert AWS_ID not in text
    everything, by_prefix, by_rule, survival = (structured(a) for a in answers)
    assert masked in {e["value"] for e in everything["entries"]}
    assert by_prefix["entries"] == []
    rule = next(o.rule for o in result.record.literals if o.sensitive)
    assert rule.endswith("/aws-access-key-id")
    assert [e["value"] for e in by_rule["entries"]] == [masked]
    assert survival["found"] and survival["compactions"][0]["sensitive"]


GITHUB_AS_KEY = "ghp_" + "FAKEu8jzPde0IgxLd6GncfBAepfJBd0Kh8oO"


@pytest.mark.parametrize("written", ["now", "before the fix"])
def test_a_secret_used_as_a_key_is_not_in_any_field_path(written, tmp_path, monkeypatch):
    """Issue 28, defect 3: a token used as a JSON object key in tool-call arguments came back
    in clear in the ``field`` of every literal pinned under it (``arguments.tokens.ghp_….path``),
    although its own value was ``hmac:…``. The ledger writes such a path masked, and the server
    masks it in a ledger written before."""
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", KEY)
    arguments = {"tokens": {GITHUB_AS_KEY: {"path": "/srv/app/config.yaml", "id": OTHER}}}
    messages = [{"role": "user", "content": f"Rotate the tokens of {INVOICE}."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {
                        "name": "rotate", "arguments": json.dumps(arguments)}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "rotated"},
                {"role": "assistant", "content": "Done."}]
    db, ledger_file = tmp_path / "audit.db", tmp_path / "run.ledger.json"
    result = firewall.Firewall(audit=firewall.open_audit_log(db), keep_last=1).compact(
        messages, summarizer=firewall.ExtractiveSummarizer())
    fields = {e.value: e.field for e in result.ledger.entries}
    assert fields["/srv/app/config.yaml"] == "arguments.tokens.[sensitive].path"
    assert fields[GITHUB_AS_KEY] == "arguments.tokens.[sensitive]#key"
    data = json.loads(result.ledger.to_json())
    if written == "before the fix":  # the paths as the ledger used to write them
        for entry in data["entries"]:
            entry["field"] = entry["field"].replace("[sensitive]", GITHUB_AS_KEY)
    ledger_file.write_text(json.dumps(data), "utf-8")
    secret_entries = [e for e in data["entries"] if e["value"] == GITHUB_AS_KEY]
    assert [e["sensitive"] for e in secret_entries] == [True]
    on_disk = json.dumps([{k: v for k, v in e.items() if k != "value"} for e in data["entries"]])
    assert (GITHUB_AS_KEY in on_disk) == (written == "before the fix")

    async def steps(client):
        return [await client.call_tool(name, arguments) for name, arguments in (
            ("pinned_literals", {}), ("find_pinned", {"prefix": "/srv"}),
            ("find_pinned", {"rule": "github-token"}), ("literal_survival", {"value": OTHER}))]

    answers = call(db, [ledger_file], steps)
    text = json.dumps([a.model_dump(mode="json") for a in answers])
    assert GITHUB_AS_KEY not in text and GITHUB_AS_KEY[4:20] not in text
    [path] = structured(answers[1])["entries"]
    assert path["field"] == "arguments.tokens.[sensitive].path"


def test_bad_question_and_missing_sources_are_said(tmp_path, served):
    _, ledger_file, _ = served
    missing_db, later = tmp_path / "none.db", tmp_path / "not-yet.json"

    async def steps(client):
        return (await client.call_tool("find_pinned", {}),
                await client.call_tool("literal_survival", {"value": INVOICE}))

    empty, survival = call(missing_db, [ledger_file, later], steps)
    assert empty.is_error and "needs a prefix, a rule, or both" in empty.content[0].text
    answer = structured(survival)
    assert answer["compactions"] == [] and answer["pinned_in"]  # the ledger still pins it
    assert any("no audit log" in n for n in answer["notes"])
    assert not missing_db.exists()  # reading never creates the log


def test_a_file_that_is_not_a_ledger_is_refused_at_start(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a ledger"}', "utf-8")
    out = subprocess.run([sys.executable, "-m", "firewall.cli", "mcp", "--ledger", str(bad)],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                         env={**os.environ, "FIREWALL_AUDIT_KEY": KEY})
    assert out.returncode == 2
    assert f"{bad}: not a ledger file" in out.stderr


def test_without_ledger_files_it_serves_the_hooks_sessions(tmp_path, monkeypatch, served):
    """The hooks keep one state file per agent session: `firewall mcp` alone serves them; an
    unreadable one is said, and hides none of the others."""
    from firewall.integrations.hooks import SessionState, save_state

    db, _, result = served
    monkeypatch.setenv("FIREWALL_STATE_DIR", str(tmp_path / "state"))
    save_state(SessionState("claude-session-1", result.ledger))
    (tmp_path / "state" / "sessions" / "broken.json").write_text("{", "utf-8")

    async def steps(client):
        return await client.call_tool("find_pinned", {"rule": "invoice-number"})

    answer = structured(call(db, [], steps, env={"FIREWALL_STATE_DIR": str(tmp_path / "state")}))
    assert any("broken.json: not a ledger file" in n for n in answer["notes"])
    assert {e["value"] for e in answer["entries"]} == {INVOICE, OTHER}
    assert {e["ledger_file"] for e in answer["entries"]} == {
        str(tmp_path / "state" / "sessions" / "claude-session-1.json")}


def test_a_field_path_masks_each_secret_at_its_exact_boundary():
    """``literals.public_field``: a secret of 4+ characters is masked wherever it stands in a
    path; a shorter one only as a whole key (a 3-character password must not eat every
    ``abc`` of every path)."""
    from firewall.literals import public_field

    token = GITHUB_AS_KEY
    assert public_field(f"arguments.tokens.{token}.path", [token]) == \
        "arguments.tokens.[sensitive].path"
    assert public_field(f"arguments.k{token}x#key", [token]) == "arguments.k[sensitive]x#key"
    assert public_field("content.Zq7!.id", ["Zq7!"]) == "content.[sensitive].id"
    for path in ("content.pw.id", "content.pw#key", "content.pw[0]", "content.pw"):
        assert public_field(path, ["pw"]) == path.replace("pw", "[sensitive]")
    assert public_field("content.pwd.id", ["pw"]) == "content.pwd.id"  # not a whole key
    assert public_field("text", [token, "text"]) == "text"


def test_recall_answers_from_the_archive_and_never_with_a_secret(served):
    db, ledger_file, result = served

    async def steps(client):
        return [await client.call_tool("recall", arguments) for arguments in (
            {"query": "10001"},                          # an id's last characters
            {"query": "charged twice", "limit": 5},       # words of its line
            {"query": "AKIA"}, {"query": AWS_ID}, {"query": AWS_ID[-6:]},
            {"query": "billing export"},
            {"query": "INV", "conversation": "another-one"},
            {"query": " "})]

    answers = call(db, [ledger_file], steps)
    assert AWS_ID not in json.dumps([a.model_dump(mode="json") for a in answers[:-1]])
    by_suffix, by_words, *secret, elsewhere, empty = answers
    hit = structured(by_suffix)["hits"][0]
    assert hit["value"] == OTHER and hit["conversation"] == result.ledger.conversation_id
    assert set(hit) == {"value", "kind", "rule", "role", "first_turn", "last_turn",
                        "compaction", "conversation", "context", "score"}
    assert INVOICE in [h["value"] for h in structured(by_words)["hits"]]
    for answer in secret:
        assert all("AKIA" not in h["value"] for h in structured(answer)["hits"])
        assert all(AWS_ID[4:12] not in (h["context"] or "") for h in structured(answer)["hits"])
    assert structured(elsewhere) == {"found": False, "hits": []}
    assert empty.is_error and "needs a query" in empty.content[0].text
