"""``GuardedAnthropic`` against the real anthropic SDK, offline.

The SDK client gets an ``httpx2.MockTransport``: it builds, sends and parses real HTTP, so the
tests read back the headers and JSON body it actually sent, and the replies are parsed into the
SDK's own ``BetaMessage`` / ``BetaCompactionBlock`` types.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import firewall
from firewall.audit import MemoryAuditLog
from firewall.errors import CompactionRefused, FirewallError
from firewall.compaction.ledger import Ledger

anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

from firewall.compaction.plan import REQUIRED_INSTRUCTIONS
from firewall.integrations.anthropic_server import (  # noqa: E402
    BETA, DEFAULT_PROMPT, NO_TOOLS, ON_DEMAND_BETA, AsyncGuardedAnthropic, GuardedAnthropic,
    IntegrationError)

INVOICE = "INV-2025-08-44719"
NEAR_MISS = "INV-2025-08-44791"
PATH = "src/auth/handler.ts"
ORDER = "#W4923227"
TOOL_INVOICE = "INV-2024-11-00042"

PACK = Path(__file__).parent / "fixtures" / "packs" / "valid" / "integration.yaml"

MESSAGES = [
    {"role": "user", "content": f"I was charged twice for {INVOICE}, see {PATH}"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Looking it up."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_order",
         "input": {"order_id": ORDER}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1",
         "content": [{"type": "text", "text": f"order {ORDER} paid by {TOOL_INVOICE}"}]}]},
]
USER_LITERALS = {INVOICE, PATH}
ALL_LITERALS = {INVOICE, PATH, ORDER, TOOL_INVOICE}


@pytest.fixture
def fw() -> firewall.Firewall:
    return firewall.Firewall(firewall.load_packs(PACK), max_retries=2,
                             audit=MemoryAuditLog(key=b"k"))


# -- the fake API ---------------------------------------------------------------------------

def compaction(content: str | None, signature: str | None = "sig-1", **extra: Any) -> dict:
    block: dict[str, Any] = {"type": "compaction", "content": content, **extra}
    if signature is not None:
        block["signature"] = signature
    return block


def text(value: str) -> dict:
    return {"type": "text", "text": value, "citations": None}


def message(*content: dict, stop_reason: str = "end_turn", usage: bool = True) -> dict:
    # the fields of anthropic.types.beta.BetaMessage / BetaUsage
    body: dict[str, Any] = {"id": "msg_01", "type": "message", "role": "assistant",
                            "model": "claude-test", "content": list(content),
                            "stop_reason": stop_reason, "stop_sequence": None}
    if usage:
        body["usage"] = {"input_tokens": 900, "output_tokens": 40,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                         "iterations": [{"type": "compaction", "input_tokens": 160000,
                                         "output_tokens": 800, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 0}]}
    return body


def paused(block: dict) -> tuple[int, dict]:
    return 200, message(block, stop_reason="compaction")


class FakeAPI:
    """Records each request; answers from a queue of (status, json), the last one repeating."""

    def __init__(self, *replies: tuple[int, Any]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def reply(self, request: Any) -> Any:
        self.requests.append(request)
        status, body = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(body, str):  # a server-sent event stream
            return httpx2.Response(status, text=body,
                                   headers={"content-type": "text/event-stream"})
        return httpx2.Response(status, json=body)

    def __call__(self, request: Any) -> Any:
        return self.reply(request)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def guard(fw: firewall.Firewall, api: FakeAPI, **kwargs: Any) -> GuardedAnthropic:
    client = anthropic.Anthropic(api_key="test", base_url="http://api.test", max_retries=0,
                                 http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    return GuardedAnthropic(client, fw, **kwargs)


def create(g: Any, messages: list[Any] = MESSAGES, **kwargs: Any) -> Any:
    kwargs.setdefault("context_management", {"edits": [{
        "type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150000}}]})
    return g.create(model="claude-test", max_tokens=1024, messages=messages, **kwargs)


def edit(body: dict[str, Any]) -> dict[str, Any]:
    [compact] = [e for e in body["context_management"]["edits"]
                 if e["type"] == "compact_20260112"]
    return compact


def ledger_values(g: Any, message: dict[str, Any]) -> set[str]:
    [block] = message["content"]
    return {e.value for e in Ledger.parse(block["text"], g.ledger.nonce, g.ledger.key)}


def composed_values(g: Any, summary_message: dict[str, Any],
                    ledger_message: dict[str, Any]) -> set[str]:
    """The pinned values the composed context holds: those the server's summary holds, which
    the ledger block after it never repeats, and those the block writes."""
    [summary] = [b["content"] for b in summary_message["content"] if b["type"] == "compaction"]
    held = {v for v in g.ledger.values() if v in summary}
    written = ledger_values(g, ledger_message)
    assert not written & held
    return written | held


# -- tests ----------------------------------------------------------------------------------

def test_request_carries_beta_edit_and_required_literals(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, message(text("No compaction needed."))))
    g = guard(fw, api)
    turn = create(g, betas=["context-management-2025-06-27"], tools=[{
        "name": "lookup_order", "description": "d", "input_schema": {"type": "object"}}],
        context_management={"edits": [
            {"type": "clear_tool_uses_20250919", "exclude_tools": ["lookup_order"]},
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 90000}}]})

    [request] = api.requests
    assert request.url.path == "/v1/messages" and not request.url.query
    assert request.headers["anthropic-beta"].split(",") == ["context-management-2025-06-27",
                                                             BETA]
    body = api.bodies[0]
    assert body["messages"] == MESSAGES
    clear, compact = body["context_management"]["edits"]
    assert clear == {"type": "clear_tool_uses_20250919", "exclude_tools": ["lookup_order"]}
    assert compact["trigger"] == {"type": "input_tokens", "value": 90000}
    assert compact["pause_after_compaction"] is True
    # instructions replace the model's own prompt: only what the firewall must add is sent,
    # the tools sentence (the replaced prompt carries it with tools), then the literals
    assert compact["instructions"].startswith(NO_TOOLS + "\n\n" + REQUIRED_INSTRUCTIONS)
    assert DEFAULT_PROMPT not in compact["instructions"]
    listed = {line[2:] for line in compact["instructions"].splitlines() if line.startswith("- ")}
    assert listed == USER_LITERALS  # required="user": the user-typed ones
    # extracted from text, tool_use.input and tool_result.content alike
    assert set(g.ledger.values()) == ALL_LITERALS
    assert not turn.compacted and turn.record is None
    assert turn.messages == MESSAGES + [{"role": "assistant", "content": [
        {"type": "text", "text": "No compaction needed.", "citations": None}]}]


def test_caller_instructions_and_pause_setting_are_respected(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, message(text("ok"))))
    create(guard(fw, api), context_management={"edits": [{
        "type": "compact_20260112", "instructions": "Summarize tersely.",
        "pause_after_compaction": False}]})
    compact = edit(api.bodies[0])
    assert compact["pause_after_compaction"] is False
    assert compact["instructions"].startswith("Summarize tersely.\n\n")
    assert DEFAULT_PROMPT not in compact["instructions"]


def test_nothing_required_leaves_the_models_own_prompt(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, message(text("ok"))))
    create(guard(fw, api), [{"role": "user", "content": "Hello, how are refunds handled?"}])
    assert "instructions" not in edit(api.bodies[0])


def test_prompt_option_sends_a_full_prompt_before_the_list(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, message(text("ok"))))
    create(guard(fw, api, prompt=DEFAULT_PROMPT))
    instructions = edit(api.bodies[0])["instructions"]
    assert instructions.startswith(DEFAULT_PROMPT + "\n\n" + REQUIRED_INSTRUCTIONS)
    assert {line[2:] for line in instructions.splitlines() if line.startswith("- ")} == \
        USER_LITERALS


def test_paused_compaction_is_checked_then_resumed_with_ledger_after_block(
        fw: firewall.Firewall) -> None:
    block = compaction(f"<summary>Refund {INVOICE}; bug in {PATH}.</summary>",
                       encrypted_content="opaque==")
    api = FakeAPI(paused(block), (200, message(text("Refund issued."))))
    g = guard(fw, api)
    turn = create(g)

    assert len(api.requests) == 2
    resumed = api.bodies[1]["messages"]
    # the signed block comes back first and byte-identical, the ledger right after it
    assert resumed[0] == {"role": "assistant", "content": [block]}
    assert resumed[1]["role"] == "user" and ledger_values(g, resumed[1]) == {ORDER, TOOL_INVOICE}
    assert composed_values(g, resumed[0], resumed[1]) == ALL_LITERALS
    assert resumed[2:] == MESSAGES[1:]  # keep_last=1 widened to the tool_use of the result
    assert edit(api.bodies[1]) == edit(api.bodies[0])  # same context_management
    assert turn.compacted and turn.verdict.ok
    assert turn.response.content[0].text == "Refund issued."
    assert turn.messages == resumed + [{"role": "assistant", "content": [
        {"type": "text", "text": "Refund issued.", "citations": None}]}]

    record = turn.record
    assert fw.audit.records == [record]
    assert record.vendor_path == "anthropic-server" and record.outcome == "compacted"
    status = {lit.value: lit.status for lit in record.literals}
    assert status == {INVOICE: "in_summary", PATH: "in_summary", ORDER: "kept_verbatim",
                      TOOL_INVOICE: "kept_verbatim"}
    assert all(lit.in_ledger for lit in record.literals)
    [attempt] = record.attempts
    assert attempt.usage["compaction_input_tokens"] == 160000
    assert attempt.verdict.present == 2


def test_a_string_the_history_holds_is_not_a_mutation_and_not_reasked(
        fw: firewall.Firewall) -> None:
    # the user also named another order, a near miss of ORDER that no rule pins in text
    messages = copy.deepcopy(MESSAGES)
    messages[0]["content"] += " (my other order is #W4923272)"
    block = compaction(f"Refund {INVOICE}; other order #W4923272; bug in {PATH}.")
    api = FakeAPI(paused(block), (200, message(text("Done."))))
    turn = create(guard(fw, api), messages)
    assert len(api.requests) == 2 and turn.verdict.ok  # resumed at once, no re-ask
    assert turn.verdict.mutated == ()


def test_mutated_summary_is_reasked_with_feedback(fw: firewall.Firewall) -> None:
    bad = compaction(f"Refund {NEAR_MISS}; bug in {PATH}.", signature="sig-bad")
    good = compaction(f"Refund {INVOICE}; bug in {PATH}.", signature="sig-good")
    api = FakeAPI(paused(bad), paused(good), (200, message(text("Done."))))
    g = guard(fw, api)
    turn = create(g)

    first, second, third = api.bodies
    assert second["messages"] == first["messages"] == MESSAGES  # the same over-trigger request
    feedback = edit(second)["instructions"]
    assert f"you wrote {NEAR_MISS!r} where the exact literal is {INVOICE!r}" in feedback
    assert third["messages"][0] == {"role": "assistant", "content": [good]}
    [record] = fw.audit.records
    assert [a.verdict.mutated for a in record.attempts] == [1, 0]
    assert turn.verdict.ok


def test_exhausted_reasks_keep_the_block_and_pin_the_ledger(fw: firewall.Firewall) -> None:
    fw.max_retries = 1
    bad = compaction(f"Refund {NEAR_MISS}.")
    api = FakeAPI(paused(bad), paused(bad), (200, message(text("Done."))))
    g = guard(fw, api)
    turn = create(g)

    assert len(api.requests) == 3  # 1 + max_retries, then the resume
    assert api.bodies[2]["messages"][0]["content"] == [bad]
    assert ledger_values(g, api.bodies[2]["messages"][1]) == ALL_LITERALS
    status = {lit.value: lit.status for lit in turn.record.literals}
    assert status[INVOICE] == "mutated_unrepaired"
    assert status[PATH] == "reinjected"
    detail = next(lit.detail for lit in turn.record.literals if lit.value == INVOICE)
    assert NEAR_MISS in detail


def test_policy_raise_refuses_and_leaves_messages(fw: firewall.Firewall) -> None:
    fw.policy, fw.max_retries = "raise", 0
    before = copy.deepcopy(MESSAGES)
    api = FakeAPI(paused(compaction("Refund pending.")))
    with pytest.raises(CompactionRefused, match=INVOICE):
        create(guard(fw, api))
    assert MESSAGES == before and len(api.requests) == 1


def test_unpaused_compaction_puts_ledger_after_the_message_holding_the_block(
        fw: firewall.Firewall) -> None:
    block = compaction(f"Refund {INVOICE}.")
    api = FakeAPI((200, message(text("before"), block, text("Answer."))))
    g = guard(fw, api)
    turn = create(g, context_management={"edits": [
        {"type": "compact_20260112", "pause_after_compaction": False}]})

    assert len(api.requests) == 1  # no pause: nothing to re-ask or resume
    # blocks before the latest compaction block are dropped, as the server does
    assert turn.messages[0] == {"role": "assistant", "content": [
        block, {"type": "text", "text": "Answer.", "citations": None}]}
    assert composed_values(g, turn.messages[0], turn.messages[1]) == ALL_LITERALS
    assert len(turn.messages) == 2
    status = {lit.value: lit.status for lit in turn.record.literals}
    assert status == {INVOICE: "in_summary", PATH: "reinjected", ORDER: "reinjected",
                      TOOL_INVOICE: "reinjected"}

    # the next request re-scans nothing already pinned and keeps provenance numbering
    api.replies = [(200, message(text("ok")))]
    again = create(g, messages=turn.messages + [{"role": "user", "content": "thanks"}])
    assert api.bodies[1]["messages"][:2] == turn.messages
    assert set(again.ledger.values()) == ALL_LITERALS


def test_null_content_is_a_failed_compaction(fw: firewall.Firewall) -> None:
    fw.max_retries = 1
    failed = compaction(None, signature=None)
    api = FakeAPI(paused(failed))
    g = guard(fw, api)
    turn = create(g)

    assert len(api.requests) == 2  # re-asked once, with the tool-call prohibition
    assert NO_TOOLS in edit(api.bodies[1])["instructions"].split("\n\n", 2)[-1]
    assert not turn.compacted
    # nothing was compacted: everything is kept, the no-op block where it was, then the ledger
    assert turn.messages[:3] == MESSAGES
    assert turn.messages[3] == {"role": "assistant", "content": [failed]}
    assert ledger_values(g, turn.messages[4]) == ALL_LITERALS
    record = turn.record
    assert record.outcome == "uncompacted" and "null" in record.error
    # nothing was compacted: every literal is still in the history, and the ledger follows it
    assert {lit.status for lit in record.literals} == {"kept_verbatim"}
    assert all(lit.in_ledger for lit in record.literals)
    assert [a.error is not None for a in record.attempts] == [True, True]


def test_rate_limit_is_a_clear_firewall_error(fw: firewall.Firewall) -> None:
    before = copy.deepcopy(MESSAGES)
    api = FakeAPI((429, {"type": "error", "error": {"type": "rate_limit_error",
                                                    "message": "Number of requests exceeded"}}))
    g = guard(fw, api)
    with pytest.raises(FirewallError) as caught:
        create(g)
    error = caught.value
    assert isinstance(error, IntegrationError) and error.status_code == 429
    assert "429 rate_limit_error: Number of requests exceeded" in str(error)
    assert "not changed" in str(error)
    assert MESSAGES == before
    assert set(g.ledger.values()) == ALL_LITERALS  # what was extracted stays pinned


def test_missing_fields_and_unknown_blocks_lose_nothing(fw: firewall.Firewall) -> None:
    # no signature, no usage, and a block type this SDK has never heard of
    block = compaction(f"Refund {INVOICE}.", signature=None)
    future = {"type": "memory_pointer_2099", "pointer": TOOL_INVOICE}
    api = FakeAPI((200, message(block, future, text("Answer."), usage=False)))
    g = guard(fw, api, pause=False)
    turn = create(g)

    assert turn.messages[0]["content"][:2] == [block, future]  # round-tripped as sent
    assert "signature" not in turn.messages[0]["content"][0]
    assert composed_values(g, turn.messages[0], turn.messages[1]) == ALL_LITERALS
    assert turn.record.attempts[0].usage == {}


def test_stream_is_collected_then_validated(fw: firewall.Firewall) -> None:
    def sse(*events: dict) -> str:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)

    start = message(stop_reason=None)
    start["content"], start["stop_reason"] = [], None
    summary = f"Refund {INVOICE}; bug in {PATH}."
    stream = sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "compaction", "content": None, "signature": "sig-s"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "compaction_delta", "content": summary}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": None},
         "usage": {"output_tokens": 50}},
        {"type": "message_stop"})
    answer = sse(
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": text("")},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Refund issued."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"})
    api = FakeAPI((200, stream), (200, answer))
    events: list[str] = []
    g = guard(fw, api, on_event=lambda e: events.append(e.type))
    turn = create(g, stream=True)

    assert all(body["stream"] is True for body in api.bodies)
    assert "message_stop" in events and turn.verdict.ok
    resumed_block = api.bodies[1]["messages"][0]["content"][0]
    assert resumed_block["content"] == summary and resumed_block["signature"] == "sig-s"
    assert turn.response.content[0].text == "Refund issued."


def test_async_twin_shares_the_core(fw: firewall.Firewall) -> None:
    api = FakeAPI(paused(compaction(f"Refund {INVOICE}; {PATH}.")),
                  (200, message(text("Done."))))

    async def handler(request: Any) -> Any:
        return api.reply(request)

    client = anthropic.AsyncAnthropic(
        api_key="test", base_url="http://api.test", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    g = AsyncGuardedAnthropic(client, fw)
    turn = asyncio.run(create(g))
    assert len(api.requests) == 2 and turn.compacted
    sent = api.bodies[1]["messages"]
    assert composed_values(g, sent[0], sent[1]) == ALL_LITERALS


def test_missing_sdk_names_the_extra(fw: firewall.Firewall,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(FirewallError, match=r"pip install 'literal-firewall\[anthropic\]'"):
        GuardedAnthropic(object(), fw).create(model="m", max_tokens=1, messages=[])


# -- on-demand compaction (top-level ``compaction``, beta compact-2026-09-04) ---------------

def compact_now(g: Any, messages: list[Any] = MESSAGES, **kwargs: Any) -> Any:
    kwargs.setdefault("compaction", {"type": "summarize"})
    return g.create(model="claude-test", max_tokens=1024, messages=messages, **kwargs)


def test_on_demand_compaction_is_validated_reasked_and_swapped(fw: firewall.Firewall) -> None:
    bad = compaction(f"Refund {NEAR_MISS}; bug in {PATH}.", signature="sig-bad")
    good = compaction(f"Refund {INVOICE}; bug in {PATH}.", signature="sig-good")
    api = FakeAPI(paused(bad), paused(good))
    g = guard(fw, api)
    turn = compact_now(g, betas=["context-1m-2025-08-07"])

    assert len(api.requests) == 2  # the bad block, the re-ask; nothing to resume
    assert api.requests[0].headers["anthropic-beta"].split(",") == [
        "context-1m-2025-08-07", ON_DEMAND_BETA]
    first, second = api.bodies
    assert "context_management" not in first and first["messages"] == MESSAGES
    assert first["compaction"]["type"] == "summarize"
    listed = {line[2:] for line in first["compaction"]["instructions"].splitlines()
              if line.startswith("- ")}
    assert listed == USER_LITERALS
    assert second["messages"] == MESSAGES
    assert f"you wrote {NEAR_MISS!r} where the exact literal is {INVOICE!r}" in \
        second["compaction"]["instructions"]
    # the block replaces the messages it summarizes; the ledger follows it
    assert turn.messages[0] == {"role": "assistant", "content": [good]}
    assert composed_values(g, turn.messages[0], turn.messages[1]) == ALL_LITERALS
    assert len(turn.messages) == 2
    assert turn.compacted and turn.verdict.ok
    [record] = fw.audit.records
    assert record.vendor_path == "anthropic-server-on-demand" and record.outcome == "compacted"
    assert [a.verdict.mutated for a in record.attempts] == [1, 0]
    assert {lit.value: lit.status for lit in record.literals}[INVOICE] == "in_summary"


def test_on_demand_keeps_the_callers_instructions_first(fw: firewall.Firewall) -> None:
    api = FakeAPI(paused(compaction(f"Refund {INVOICE}; bug in {PATH}.")))
    compact_now(guard(fw, api), compaction={"type": "summarize",
                                            "instructions": "Summarize tersely."})
    instructions = api.bodies[0]["compaction"]["instructions"]
    assert instructions.startswith("Summarize tersely.\n\n" + REQUIRED_INSTRUCTIONS)


def test_failed_on_demand_compaction_leaves_the_conversation(fw: firewall.Firewall) -> None:
    fw.max_retries = 1
    failed = compaction(None, signature=None)
    api = FakeAPI(paused(failed))
    turn = compact_now(guard(fw, api))
    assert len(api.requests) == 2  # re-asked once
    assert turn.messages == MESSAGES and not turn.compacted
    [record] = fw.audit.records
    assert record.outcome == "uncompacted" and "null" in record.error
    assert {lit.status for lit in record.literals} == {"kept_verbatim"}


def test_on_demand_policy_raise_refuses(fw: firewall.Firewall) -> None:
    fw.policy, fw.max_retries = "raise", 0
    api = FakeAPI(paused(compaction("Refund pending.")))
    with pytest.raises(CompactionRefused, match=INVOICE):
        compact_now(guard(fw, api))


@pytest.mark.parametrize("kwargs,error", [
    ({"compaction": {"type": "summarize"},
      "context_management": {"edits": [{"type": "compact_20260112"}]}}, "cannot be combined"),
    ({"compaction": {"type": "compact"}}, "must be"),
])
def test_on_demand_bad_config_is_refused_before_sending(fw: firewall.Firewall, kwargs: dict,
                                                        error: str) -> None:
    api = FakeAPI(paused(compaction("x")))
    with pytest.raises(IntegrationError, match=error):
        guard(fw, api).create(model="claude-test", max_tokens=1024, messages=MESSAGES, **kwargs)
    assert api.requests == []
