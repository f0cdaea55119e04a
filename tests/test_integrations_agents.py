"""OpenAI Agents SDK sessions behind the firewall: the SDK's own Runner, sessions and
OpenAIResponsesModel, with the OpenAI client on the SDK's mock transport (httpx2)."""

import asyncio
import json

import pytest

agents = pytest.importorskip("agents")
httpx2 = pytest.importorskip("httpx2")

from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession  # noqa: E402
from agents.memory import OpenAIResponsesCompactionSession  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

import firewall  # noqa: E402
from firewall.audit import MemoryAuditLog  # noqa: E402
from firewall.compaction.plan import ledger_blocks
from firewall.integrations.openai_agents import (  # noqa: E402
    VENDOR_PATH, GuardedCompactionSession, GuardedSession, guard_session)

INVOICE, PATH = "INV-2025-08-44719", "src/billing/retry_worker.py"
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}

agents.set_tracing_disabled(True)


class FakeAPI:
    """POST /responses answers a message; POST /responses/compact returns the user messages
    it was given (or, chained by previous_response_id, those of the last request) followed
    by an opaque compaction item, as the API does."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self.client = AsyncOpenAI(api_key="test", base_url="http://api.test/v1", max_retries=0,
                                  http_client=httpx2.AsyncClient(
                                      transport=httpx2.MockTransport(self.handle)))

    def handle(self, request):
        body = json.loads(request.content)
        self.calls.append((request.url.path, body))
        n = len(self.calls)
        if request.url.path.endswith("/responses/compact"):
            seen = body.get("input") or next(
                b["input"] for p, b in reversed(self.calls) if p.endswith("/responses"))
            users = [{"type": "message", "role": "user", "content": i["content"]}
                     for i in seen if isinstance(i, dict) and i.get("role") == "user"]
            return httpx2.Response(200, json={
                "id": f"cmp_{n}", "object": "response.compaction", "created_at": 1,
                "output": users + [{"type": "compaction", "id": f"cmp_item_{n}",
                                    "encrypted_content": "gAAAA-opaque"}], "usage": USAGE})
        return httpx2.Response(200, json={
            "id": f"resp_{n}", "object": "response", "created_at": 1, "model": body["model"],
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": USAGE, "output": [{
                "type": "message", "id": f"msg_{n}", "role": "assistant",
                "status": "completed", "content": [{"type": "output_text", "annotations": [],
                                                    "text": "The retry worker replayed it."}]}]})

    def requests(self, suffix):
        return [body for path, body in self.calls if path.endswith(suffix)]

    def agent(self):
        return Agent(name="support", instructions="Help.",
                     model=OpenAIResponsesModel(model="gpt-4.1", openai_client=self.client))


def compacting(api, mode="input", trigger=lambda context: True):
    store = SQLiteSession("s1")
    return OpenAIResponsesCompactionSession("s1", store, client=api.client, compaction_mode=mode,
                                            should_trigger_compaction=trigger)


def ledger_item_after_compaction(items, ledger):
    kinds = [i.get("type") for i in items]
    at = len(kinds) - 1 - kinds[::-1].index("compaction")
    text = items[at + 1]["content"][0]["text"]
    assert ledger_blocks(text, ledger), "the item after the compaction item is our ledger"
    return text


@pytest.mark.parametrize("mode", ["input", "previous_response_id"])
def test_responses_compaction_session_is_guarded_in_one_line(mode):
    api, fw = FakeAPI(), firewall.Firewall(audit=MemoryAuditLog())
    session = guard_session(compacting(api, mode), fw)
    assert isinstance(session, GuardedCompactionSession)

    async def run():
        agent = api.agent()
        await Runner.run(agent, f"Why was {INVOICE} charged twice? See {PATH}.",
                         session=session)
        stored = await session.get_items()
        await Runner.run(agent, "Refund the duplicate.", session=session)
        return stored

    stored = asyncio.run(run())
    assert len(api.requests("/responses/compact")) >= 1
    # the ledger follows the opaque item in the stored history, and so in the next request
    assert INVOICE in ledger_item_after_compaction(stored, session.ledger)
    sent = api.requests("/responses")[-1]["input"]
    assert INVOICE in ledger_item_after_compaction(sent, session.ledger)
    assert PATH in session.ledger
    # audited, and never as checked: the compaction item cannot be read
    hits = fw.audit.find_literal(INVOICE)
    assert hits and {o.status for _, o in hits} == {"opaque"}
    assert {s.vendor_path for s, _ in hits} == {VENDOR_PATH}


def test_a_declined_compaction_takes_no_compaction_number():
    api, fw = FakeAPI(), firewall.Firewall(audit=MemoryAuditLog())
    # declines after the first turn (2 items), compacts after the second (4 items)
    session = guard_session(compacting(
        api, trigger=lambda context: len(context["session_items"]) >= 4), fw)

    async def run():
        for text in (f"Why was {INVOICE} charged twice?", "Refund it."):
            await Runner.run(api.agent(), text, session=session)

    asyncio.run(run())
    assert len(api.requests("/responses/compact")) == 1
    assert [s.compaction for s in fw.audit.list()] == [1]
    assert INVOICE in session.ledger


def test_no_ledger_and_no_record_when_the_session_declines_to_compact():
    api, fw = FakeAPI(), firewall.Firewall(audit=MemoryAuditLog())
    session = guard_session(compacting(api, trigger=lambda context: False), fw)

    async def run():
        await Runner.run(api.agent(), f"Why was {INVOICE} charged twice?", session=session)
        return await session.get_items()

    stored = asyncio.run(run())
    assert api.requests("/responses/compact") == []
    assert not any(ledger_blocks(json.dumps(i), session.ledger) for i in stored)
    assert session.last_record is None and fw.audit.list() == []


def test_any_session_gets_the_firewalls_validated_compaction():
    api, fw = FakeAPI(), firewall.Firewall(audit=MemoryAuditLog(), keep_last=1)
    session = guard_session(SQLiteSession("plain"), fw)
    assert type(session) is GuardedSession and not hasattr(session, "run_compaction")
    assert session.session_id == "plain"  # the wrapped session's own attributes

    async def run():
        agent = api.agent()
        for text in (f"Why was {INVOICE} charged twice?", f"Is it {PATH}?", "Refund it."):
            await Runner.run(agent, text, session=session)
        before = await session.get_items()
        dropped = await session.compact(lambda messages: "The user wants a refund.")
        return before, dropped, await session.get_items()

    before, result, after = asyncio.run(run())
    assert result.compacted and len(after) < len(before)
    assert INVOICE in ledger_item_after_summary(after, result.ledger)
    assert after[-1] == before[-1]  # the kept tail, verbatim
    assert session.last_record is result.record and fw.audit.list()


def ledger_item_after_summary(items, ledger):
    text = items[1]["content"][0]["text"]
    assert ledger_blocks(text, ledger)
    return text


def test_a_failed_compaction_leaves_the_stored_history_alone():
    api, fw = FakeAPI(), firewall.Firewall(audit=MemoryAuditLog(), keep_last=1)
    session = guard_session(SQLiteSession("failing"), fw)

    def broken(messages):
        raise RuntimeError("summarizer down")

    async def run():
        for text in (f"Why was {INVOICE} charged twice?", "Refund it."):
            await Runner.run(api.agent(), text, session=session)
        before = await session.get_items()
        result = await session.compact(broken)
        return before, result, await session.get_items()

    before, result, after = asyncio.run(run())
    assert not result.compacted and after == before
