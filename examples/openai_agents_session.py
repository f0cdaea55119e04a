"""An OpenAI Agents SDK app guarded in one line: its Responses compaction session keeps the
exact strings the agent needs.

    python examples/openai_agents_session.py

The compaction item is opaque, so the guard pins every literal before ``responses.compact``
runs, appends the ledger right after the new compaction item, and audits each literal as
``opaque``. Offline by default (a mock transport plays the API); against the real API when
OPENAI_API_KEY is set.
"""

from __future__ import annotations

import asyncio
import json
import os

import httpx2
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
from openai import AsyncOpenAI

import firewall
from firewall.audit import MemoryAuditLog
from firewall.integrations.openai_agents import guard_session

INVOICE, PATH = "INV-2025-08-44719", "src/billing/retry_worker.py"
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}


def fake_api() -> httpx2.MockTransport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/responses/compact"):
            users = [i for i in body.get("input", []) if i.get("role") == "user"]
            return httpx2.Response(200, json={
                "id": "cmp_1", "object": "response.compaction", "created_at": 1, "usage": USAGE,
                "output": users + [{"type": "compaction", "id": "cmp_item_1",
                                    "encrypted_content": "gAAAAB...opaque"}]})
        return httpx2.Response(200, json={
            "id": "resp_1", "object": "response", "created_at": 1, "model": body["model"],
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": USAGE, "output": [{
                "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "annotations": [],
                             "text": "The retry worker replayed the charge."}]}]})

    return httpx2.MockTransport(handle)


async def main() -> None:
    live = bool(os.environ.get("OPENAI_API_KEY"))
    set_tracing_disabled(not live)
    client = AsyncOpenAI() if live else AsyncOpenAI(
        api_key="offline", base_url="http://api.test/v1", max_retries=0,
        http_client=httpx2.AsyncClient(transport=fake_api()))
    model = os.environ.get("OPENAI_MODEL", "gpt-4.1")
    agent = Agent(name="support", instructions="Help with billing questions.",
                  model=OpenAIResponsesModel(model=model, openai_client=client))
    fw = firewall.Firewall(audit=MemoryAuditLog())

    # the one line: wrap the compaction session (compact after every turn, for the demo)
    session = guard_session(OpenAIResponsesCompactionSession(
        "support-1", SQLiteSession("support-1"), client=client, model=model,
        compaction_mode="input", should_trigger_compaction=lambda context: True), fw)

    await Runner.run(agent, f"Why was {INVOICE} charged twice? I suspect {PATH}.",
                     session=session)
    items = await session.get_items()
    print("stored history after the compaction:")
    for item, turn in zip(items, firewall.parse_messages(items).turns):
        print(f"  {item.get('type', 'message'):10} {turn.text or item.get('encrypted_content')}")
    record = session.last_record
    print(f"\naudit: compaction {record.compaction}, vendor_path {record.vendor_path}: "
          + ", ".join(f"{o.value} {o.status}" for o in record.literals))


if __name__ == "__main__":
    asyncio.run(main())
