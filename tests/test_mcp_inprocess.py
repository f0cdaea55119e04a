"""``firewall mcp`` in this process: the server's tools through the MCP SDK's in-memory client,
and the service behind them called directly (tests/test_mcp.py drives the real stdio server in
a subprocess, where coverage does not reach)."""

import argparse
import json

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from firewall.audit import HASH_PREFIX, literal_hash  # noqa: E402
from firewall.compaction.ledger import Ledger, LedgerEntry  # noqa: E402
from firewall.integrations.mcp_server import (MAX_ENTRIES, LiteralService, MCPServerError,  # noqa: E402
                                 build_server)

from mcp_compaction import AWS_ID, INVOICE, KEY, compacted  # noqa: E402


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A real compaction: its ledger file and its SQLite audit log, under a known audit key."""
    monkeypatch.setenv("FIREWALL_STATE_DIR", str(tmp_path / "state"))
    return compacted(tmp_path, monkeypatch)


def service(db, *ledgers) -> LiteralService:
    return LiteralService(argparse.Namespace(ledger=[str(p) for p in ledgers] or None,
                                             audit_db=str(db)))


def over_mcp(svc, steps):
    """``steps(client)`` against the server built in this process, over the SDK's in-memory
    transport: the tools' argument handling and error mapping run here."""
    async def main():
        async with Client(build_server(svc)) as client:
            return await steps(client)

    return anyio.run(main)


def test_the_tools_answer_in_process_as_over_stdio(served):
    db, ledger_file, result = served
    masked = HASH_PREFIX + literal_hash(AWS_ID, KEY.encode())

    async def steps(client):
        tools = await client.list_tools()
        return tools, [await client.call_tool(name, arguments) for name, arguments in (
            ("find_pinned", {"prefix": "INV-2025-08"}),
            ("literal_survival", {"value": INVOICE}),
            ("pinned_literals", {}),
            ("find_pinned", {}),
            ("literal_survival", {"value": ""}),
            ("find_pinned", {"rule": "aws-access-key-id"}))]

    tools, answers = over_mcp(service(db, ledger_file), steps)
    assert {t.name for t in tools.tools} == {"pinned_literals", "find_pinned",
                                             "literal_survival", "recall"}
    by_prefix, survival, everything, empty, blank, by_rule = answers
    assert [e["value"] for e in by_prefix.structured_content["entries"]] == [INVOICE]
    (hit,) = survival.structured_content["compactions"]
    assert hit["record"] == result.record.id
    assert everything.structured_content["count"] == len(result.ledger.entries)
    # a FirewallError is the client's error, said in words; never a crash of the server
    assert empty.is_error and "needs a prefix, a rule, or both" in empty.content[0].text
    assert blank.is_error and "needs the exact value" in blank.content[0].text
    assert [e["value"] for e in by_rule.structured_content["entries"]] == [masked]
    text = json.dumps([a.model_dump(mode="json") for a in answers])
    assert AWS_ID not in text


def test_a_secret_is_never_matched_by_prefix_not_even_its_whole_value(served):
    db, ledger_file, _ = served
    svc = service(db, ledger_file)
    for prefix in ("A", "AKIA", AWS_ID):
        assert svc.find_pinned(prefix=prefix)["entries"] == [], prefix
    assert svc.find_pinned(prefix=INVOICE)["count"] == 1  # a whole value is its own prefix


def test_a_rule_is_matched_whole_by_its_id_or_its_qualified_id(served):
    db, ledger_file, result = served
    svc = service(db, ledger_file)
    entry = next(e for e in result.ledger.entries if e.value == INVOICE)
    assert entry.rule == "billing/invoice-number" and entry.kind == "invoice-number"
    for rule in (entry.rule, entry.kind):
        assert INVOICE in [e["value"] for e in svc.find_pinned(rule=rule)["entries"]], rule
    for rule in ("invoice", "billing", "invoice-numbe"):
        assert svc.find_pinned(rule=rule)["count"] == 0, rule
    # both given: both must hold
    assert svc.find_pinned(prefix="INV-2025-09", rule=entry.kind)["count"] == 1
    assert svc.find_pinned(prefix="INV-2025-09", rule="aws-access-key-id")["count"] == 0


def test_an_empty_conversation_filter_means_every_conversation(served):
    db, ledger_file, result = served
    svc = service(db, ledger_file)
    n = len(result.ledger.entries)
    assert svc.pinned_literals("")["count"] == svc.pinned_literals(None)["count"] == n
    assert svc.pinned_literals(result.ledger.conversation_id)["count"] == n
    assert svc.pinned_literals("another")["count"] == 0


def _ledger(n: int) -> Ledger:
    ledger = Ledger.new("many")
    ledger.entries = [LedgerEntry(value=f"INV-2025-08-{i:05d}", rule="billing/invoice-number",
                                  kind="invoice-number", role="tool", first_seen=i,
                                  last_seen=i) for i in range(n)]
    return ledger


@pytest.mark.parametrize("n, truncated", [(MAX_ENTRIES - 1, False), (MAX_ENTRIES, False),
                                          (MAX_ENTRIES + 1, True)])
def test_an_answer_holds_at_most_max_entries_and_says_when_it_was_cut(tmp_path, n, truncated):
    path = tmp_path / "many.json"
    path.write_text(_ledger(n).to_json(), "utf-8")
    answer = service(tmp_path / "none.db", path).pinned_literals()
    assert answer["count"] == n and answer["truncated"] is truncated
    assert len(answer["entries"]) == min(n, MAX_ENTRIES)
    assert answer["entries"][0]["value"] == "INV-2025-08-00000"  # the first ones, in order


def test_a_named_ledger_that_is_not_one_is_an_error_a_hooks_session_a_note(tmp_path, served,
                                                                          monkeypatch):
    from firewall.integrations.hooks import SessionState, save_state

    db, ledger_file, result = served
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a ledger"}', "utf-8")
    with pytest.raises(MCPServerError, match=f"{bad}: not a ledger file"):
        service(db, ledger_file, bad).ledgers()
    later = tmp_path / "later.json"
    found, notes = service(db, ledger_file, later).ledgers()
    assert [p for p, _ in found] == [ledger_file]
    assert notes == [f"{later}: no ledger written there yet"]
    # no --ledger: the hooks' session files; a broken one is a note, the others are served
    save_state(SessionState("claude-session-1", result.ledger))
    (tmp_path / "state" / "sessions" / "broken.json").write_text("{", "utf-8")
    answer = service(db).find_pinned(rule="invoice-number")
    assert INVOICE in [e["value"] for e in answer["entries"]]
    assert any("broken.json: not a ledger file" in n for n in answer["notes"])


def test_survival_without_a_log_says_so_and_never_creates_it(tmp_path, served):
    _, ledger_file, result = served
    missing = tmp_path / "nowhere" / "audit.db"
    answer = service(missing, ledger_file).literal_survival(INVOICE)
    assert answer["found"] and answer["pinned_in"] == [result.ledger.conversation_id]
    assert answer["compactions"] == [] and "no audit log" in answer["notes"][0]
    assert not missing.exists() and not missing.parent.exists()
    nothing = service(missing, ledger_file).literal_survival("INV-0000-00-00000")
    assert nothing["found"] is False and nothing["pinned_in"] == []
