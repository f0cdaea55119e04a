"""OpenAI ``POST /responses/compact`` with the literal firewall around it.

The compaction item is opaque (``encrypted_content``): nothing can be checked, so the guard pins
every literal before the call, re-injects the ledger right after the item, and audits each
literal as ``opaque``.

    python examples/openai_responses_compaction.py

Offline by default (a mock transport plays the API); against the real API when OPENAI_API_KEY
is set (OPENAI_MODEL picks the model).
"""

from __future__ import annotations

import json
import os

import httpx2
import openai

import firewall
from firewall.integrations.openai_responses import GuardedResponses

INVOICE, PATH = "INV-2025-08-44719", "src/billing/retry_worker.py"
ITEMS = [
    {"role": "user", "content": f"Why was {INVOICE} charged twice? I suspect {PATH}."},
    {"type": "function_call", "call_id": "call_1", "name": "charge_log",
     "arguments": json.dumps({"invoice_id": INVOICE})},
    {"type": "function_call_output", "call_id": "call_1",
     "output": f"2025-04-02 charge ok {INVOICE} ch_3PqL9x\n2025-04-02 retry replayed ch_3PqL9x"},
    {"role": "user", "content": "Refund the duplicate."},
]


def fake_api() -> httpx2.MockTransport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        users = [{"type": "message", "id": f"msg_{i}", "role": "user", "status": "completed",
                  "content": [{"type": "input_text", "text": item["content"]}]}
                 for i, item in enumerate(body["input"]) if item.get("role") == "user"]
        return httpx2.Response(200, json={
            "id": "cmp_example", "object": "response.compaction", "created_at": 1760000000,
            "output": users + [{"type": "compaction", "id": "cmp_1",
                                "encrypted_content": "gAAAAB...opaque"}],
            "usage": {"input_tokens": 800, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 120, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 920}})

    return httpx2.MockTransport(handle)


def main() -> None:
    if os.environ.get("OPENAI_API_KEY"):
        client = openai.OpenAI()
    else:
        client = openai.OpenAI(api_key="offline", base_url="http://api.invalid/v1",
                               max_retries=0, http_client=httpx2.Client(transport=fake_api()))
    fw = firewall.Firewall(firewall.load_packs("core", "billing"))
    guard = GuardedResponses(client, fw)
    turn = guard.compact(model=os.environ.get("OPENAI_MODEL", "gpt-5.4"), input=ITEMS)

    print("next input:", [item.get("type", "message") for item in turn.input])
    for lit in turn.record.literals:
        seen = "visible in a returned user message" if lit.in_tail else "only in the ledger"
        print(f"  {lit.value:32} {lit.status:8} {seen}")


if __name__ == "__main__":
    main()
