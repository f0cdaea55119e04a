"""``GuardedResponses`` and the Responses item format against the real openai SDK, offline.

Requests go through ``httpx2.MockTransport``; replies are the JSON shapes of ``Response`` and
``CompactedResponse`` with ``ResponseCompactionItem`` outputs, parsed by the SDK.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

import firewall
from firewall.audit import MemoryAuditLog
from firewall.errors import FirewallError
from firewall.formats import openai_responses as fmt
from firewall.integrations.anthropic_server import IntegrationError
from firewall.integrations.openai_responses import AsyncGuardedResponses, GuardedResponses
from firewall.compaction.ledger import Ledger

INVOICE = "INV-2025-08-44719"
PATH = "src/auth/handler.ts"
ORDER = "#W4923227"
TOOL_INVOICE = "INV-2024-11-00042"
ALL_LITERALS = {INVOICE, PATH, ORDER, TOOL_INVOICE}

PACK = Path(__file__).parent / "fixtures" / "packs" / "valid" / "integration.yaml"

ITEMS = [
    {"role": "user", "content": f"I was charged twice for {INVOICE}, see {PATH}"},
    {"type": "function_call", "call_id": "call_1", "name": "lookup_order",
     "arguments": json.dumps({"order_id": ORDER})},
    {"type": "function_call_output", "call_id": "call_1",
     "output": f"order {ORDER} paid by {TOOL_INVOICE}"},
    {"type": "message", "role": "assistant", "id": "msg_a", "status": "completed",
     "content": [{"type": "output_text", "text": "Found it.", "annotations": []}]},
]
COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque"}


@pytest.fixture
def fw() -> firewall.Firewall:
    return firewall.Firewall(firewall.load_packs(PACK),
                             audit=MemoryAuditLog(key=b"k"))


# -- the item format (no SDK needed) ----------------------------------------------------------

def test_to_turns_reads_every_item_kind() -> None:
    turns = fmt.to_turns(ITEMS + [COMPACTION, {"type": "reasoning", "id": "rs_1", "summary": []}])
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant", "system",
                                       "system"]
    assert turns[1].tool_calls[0].arguments == {"order_id": ORDER}  # JSON string parsed
    assert turns[2].tool_name == "lookup_order" and TOOL_INVOICE in turns[2].text
    assert turns[3].text == "Found it."
    assert turns[4].text == "" and turns[4].raw is COMPACTION  # opaque, kept untouched


def test_extraction_skips_compaction_items(fw: firewall.Firewall) -> None:
    items = [{"type": "compaction", "encrypted_content": INVOICE}] + ITEMS[1:]
    found = {lit.value for lit in fw.extractor.scan(fmt.to_turns(items)).literals}
    assert found == {ORDER, TOOL_INVOICE}


def test_summary_messages_keep_the_ledger_separate() -> None:
    assert fmt.summary_messages("S", "L") == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "S"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "L"}]}]


# -- the wrapper ------------------------------------------------------------------------------



def sdk() -> tuple[Any, Any]:
    # imported per test: without the extra the wrapper tests skip, the format tests still run
    return pytest.importorskip("openai"), pytest.importorskip("httpx2")

USAGE = {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": 1500}


def response(*output: dict) -> dict:
    # the fields of openai.types.responses.Response
    return {"id": "resp_1", "object": "response", "created_at": 1760000000, "model": "gpt-test",
            "status": "completed", "output": list(output), "usage": USAGE, "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {},
            "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto",
            "tools": [], "top_p": 1.0}


def compacted(*output: dict) -> dict:
    # openai.types.responses.CompactedResponse
    return {"id": "cmp_resp_1", "object": "response.compaction", "created_at": 1760000000,
            "output": list(output), "usage": USAGE}


def user_message(text: str) -> dict:
    return {"type": "message", "id": "msg_u", "role": "user", "status": "completed",
            "content": [{"type": "input_text", "text": text}]}


def answer(text: str) -> dict:
    return {"type": "message", "id": "msg_b", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


class FakeAPI:
    def __init__(self, *replies: tuple[int, dict]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        _, httpx2 = sdk()
        self.requests.append(request)
        status, body = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return httpx2.Response(status, json=body)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def guard(fw: firewall.Firewall, api: FakeAPI, **kwargs: Any) -> GuardedResponses:
    openai, httpx2 = sdk()
    client = openai.OpenAI(api_key="test", base_url="http://api.test/v1", max_retries=0,
                           http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    return GuardedResponses(client, fw, **kwargs)


def ledger_of(g: Any, item: dict) -> set[str]:
    [part] = item["content"]
    return {e.value for e in Ledger.parse(part["text"], g.ledger.nonce, g.ledger.key)}


def test_compact_reinjects_ledger_after_the_opaque_item(fw: firewall.Firewall) -> None:
    kept = user_message(f"I was charged twice for {INVOICE}, see {PATH}")
    api = FakeAPI((200, compacted(kept, COMPACTION)))
    g = guard(fw, api)
    turn = g.compact(model="gpt-test", input=ITEMS)

    [request] = api.requests
    assert request.url.path == "/v1/responses/compact"
    assert api.bodies[0]["input"] == ITEMS  # sent as given
    # the returned user message and the item, unchanged, then the ledger
    assert turn.input[:2] == [kept, COMPACTION]
    assert turn.input[2]["role"] == "user" and ledger_of(g, turn.input[2]) == ALL_LITERALS
    assert len(turn.input) == 3

    record = turn.record
    assert fw.audit.records == [record] and record.vendor_path == "openai-opaque"
    # nothing was checked: every literal is opaque, whatever else is known
    assert {lit.status for lit in record.literals} == {"opaque"}
    assert all(lit.in_ledger and not lit.in_summary for lit in record.literals)
    visible = {lit.value for lit in record.literals if lit.in_tail}
    assert visible == {INVOICE, PATH}  # still in the returned user message
    assert record.attempts[0].verdict is None


def test_in_request_compaction_drops_items_before_it(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, response(COMPACTION, answer("Refund issued."))))
    g = guard(fw, api)
    management = [{"type": "compaction", "compact_threshold": 200000}]
    turn = g.create(model="gpt-test", input=ITEMS, context_management=management)

    assert api.requests[0].url.path == "/v1/responses"
    assert api.bodies[0]["context_management"] == management
    assert turn.input[0] == COMPACTION
    assert ledger_of(g, turn.input[1]) == ALL_LITERALS
    assert turn.input[2] == answer("Refund issued.")
    assert {lit.status for lit in turn.record.literals} == {"opaque"}


def test_no_compaction_just_grows_the_history(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, response(answer("Hi."))))
    turn = guard(fw, api).create(model="gpt-test", input="hello")
    assert api.bodies[0]["input"] == "hello"
    assert turn.input == [fmt.message_item("hello"), answer("Hi.")]
    assert turn.record is None and not fw.audit.records


def test_ledger_is_inserted_once_after_a_foreign_compaction_item(
        fw: firewall.Firewall) -> None:
    api = FakeAPI((200, response(answer("ok"))))
    g = guard(fw, api)
    history = [user_message(f"pay {INVOICE}"), COMPACTION, {"role": "user", "content": "next"}]
    g.create(model="gpt-test", input=history)
    sent = api.bodies[0]["input"]
    assert sent[:2] == history[:2] and ledger_of(g, sent[2]) == {INVOICE}
    assert sent[3:] == history[2:]
    # a history that already carries our ledger after the item is sent as it is
    turn = g.create(model="gpt-test", input=sent)
    assert api.bodies[1]["input"] == sent and turn.input[:4] == sent


def test_chained_conversation_scans_output_keeps_record_never_prunes(
        fw: firewall.Firewall) -> None:
    first = {**response(answer(f"It was paid by {TOOL_INVOICE}.")), "id": "resp_1"}
    second = {**response(COMPACTION, answer("Refund issued.")), "id": "resp_2"}
    third = {**response(answer("ok")), "id": "resp_3"}
    api = FakeAPI((200, first), (200, second), (200, third))
    g = guard(fw, api)
    opening = {"role": "user", "content": f"I was charged twice for {INVOICE}"}
    turn1 = g.create(model="gpt-test", input=[opening], store=True)
    # chained: only the new message goes out; the answer of turn 1 never comes back as input
    follow = {"role": "user", "content": "Refund the duplicate"}
    management = [{"type": "compaction", "compact_threshold": 200000}]
    turn2 = g.create(model="gpt-test", input=[follow], previous_response_id="resp_1",
                     context_management=management)

    assert api.bodies[1]["input"] == [follow]  # sent as given: nothing pruned or added
    assert api.bodies[1]["previous_response_id"] == "resp_1"
    # what the client saw, output included, is pinned: the server's history holds it
    assert {INVOICE, TOOL_INVOICE} <= set(g.ledger.values())
    # never pruned: the next input is only the ledger, to send with the next turn
    assert len(turn2.input) == 1 and ledger_of(g, turn2.input[0]) >= {INVOICE, TOOL_INVOICE}
    assert g.history == [opening, turn1.input[1], follow, COMPACTION, answer("Refund issued.")]
    record = turn2.record
    assert record.span == (0, 2) and record.turns_compacted == 3
    assert {lit.status for lit in record.literals} == {"opaque"}
    provenance = {lit.value: (lit.role, lit.turn) for lit in record.literals}
    assert provenance[TOOL_INVOICE] == ("assistant", 1)

    nxt = turn2.input + [{"role": "user", "content": "thanks"}]
    g.create(model="gpt-test", input=nxt, previous_response_id="resp_2")
    assert api.bodies[2]["input"] == nxt
    assert len(g.history) == 8


def test_chaining_from_history_the_guard_never_saw_is_refused(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, response(answer("ok"))))
    g = guard(fw, api)
    with pytest.raises(IntegrationError, match="was not returned by this guard"):
        g.create(model="gpt-test", input="hi", previous_response_id="resp_elsewhere")
    with pytest.raises(IntegrationError, match="start_conversation"):
        g.create(model="gpt-test", input="hi", conversation={"id": "conv_1"})
    assert api.requests == []
    # a conversation created with items: they are scanned when it is registered
    g.start_conversation("conv_1", [{"role": "user", "content": f"about {INVOICE}"}])
    assert INVOICE in g.ledger.values()
    g.create(model="gpt-test", input="hi", conversation={"id": "conv_1"})
    # the caller's statement that the server holds nothing unscanned
    trusting = guard(fw, api, allow_unscanned_history=True)
    trusting.create(model="gpt-test", input="hi", conversation="conv_1")
    trusting.create(model="gpt-test", input="again", conversation="conv_1")
    assert [b["conversation"] for b in api.bodies] == [{"id": "conv_1"}, "conv_1", "conv_1"]


def test_rate_limit_is_a_clear_firewall_error(fw: firewall.Firewall) -> None:
    before = copy.deepcopy(ITEMS)
    api = FakeAPI((429, {"error": {"message": "Rate limit reached for requests",
                                   "type": "requests", "code": "rate_limit_exceeded"}}))
    g = guard(fw, api)
    with pytest.raises(FirewallError) as caught:
        g.compact(model="gpt-test", input=ITEMS)
    assert isinstance(caught.value, IntegrationError) and caught.value.status_code == 429
    assert "429" in str(caught.value) and "Rate limit reached" in str(caught.value)
    assert ITEMS == before
    assert set(g.ledger.values()) == ALL_LITERALS


def test_unknown_items_and_missing_fields_lose_nothing(fw: firewall.Firewall) -> None:
    future = {"type": "memory_pointer_2099", "id": "mp_1", "pointer": "x"}
    bare = {"type": "compaction", "encrypted_content": "gAAAAB-opaque"}  # no id, no created_by
    body = compacted(future, bare)
    del body["usage"]
    api = FakeAPI((200, body))
    g = guard(fw, api)
    turn = g.compact(model="gpt-test", input=ITEMS)
    assert turn.input[:2] == [future, bare]
    assert ledger_of(g, turn.input[2]) == ALL_LITERALS
    assert turn.record.attempts[0].usage == {}


def test_stream_is_refused_before_any_call(fw: firewall.Firewall) -> None:
    api = FakeAPI((200, response()))
    with pytest.raises(IntegrationError, match="stream=True"):
        guard(fw, api).create(model="gpt-test", input=ITEMS, stream=True)
    assert not api.requests


def test_async_twin(fw: firewall.Firewall) -> None:
    openai, httpx2 = sdk()
    api = FakeAPI((200, compacted(COMPACTION)))

    async def handler(request: Any) -> Any:
        return api(request)

    client = openai.AsyncOpenAI(
        api_key="test", base_url="http://api.test/v1", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    g = AsyncGuardedResponses(client, fw)
    turn = asyncio.run(g.compact(model="gpt-test", input=ITEMS))
    assert turn.input[0] == COMPACTION and ledger_of(g, turn.input[1]) == ALL_LITERALS


def test_missing_sdk_names_the_extra(fw: firewall.Firewall,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(FirewallError, match=r"pip install 'literal-firewall\[openai\]'"):
        GuardedResponses(object(), fw).compact(model="m", input=[])
