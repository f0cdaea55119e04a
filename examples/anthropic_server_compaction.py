"""Anthropic server-side compaction (``compact_20260112``) with the literal firewall around it,
then the same conversation compacted on demand (``compaction={"type": "summarize"}``).

Offline (default): a mock transport plays the API. Its first compaction turns the invoice
INV-2025-08-44719 into INV-2025-08-44791; the guard catches the mutation, re-asks with feedback,
accepts the corrected block, re-injects the ledger right after it and resumes. On demand, the
reply is the block alone: checked, re-asked once, then swapped in with the ledger after it.

    python examples/anthropic_server_compaction.py

Against the real API, when ANTHROPIC_API_KEY is set (ANTHROPIC_MODEL picks the model): the
conversation is padded past the 50 000-token minimum trigger, so one run costs real tokens.
"""

from __future__ import annotations

import json
import os

import anthropic
import httpx2

import firewall
from firewall.integrations.anthropic_server import GuardedAnthropic

INVOICE, PATH = "INV-2025-08-44719", "src/billing/retry_worker.py"
MESSAGES = [
    {"role": "user", "content": f"Why was {INVOICE} charged twice? I suspect {PATH}."},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking the charge log."},
        {"type": "tool_use", "id": "toolu_1", "name": "charge_log",
         "input": {"invoice_id": INVOICE}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": (
        f"2025-04-02 charge ok {INVOICE} ch_3PqL9x\n2025-04-02 retry replayed ch_3PqL9x")}]},
    {"role": "user", "content": "Refund the duplicate and tell me which worker did it."},
]


def fake_api(answer: bool = True) -> httpx2.MockTransport:
    """Replies in order: a mutated compaction, a correct one (both paused), then the answer
    (``answer=False``: on demand, nothing is sampled after the block)."""
    replies = [
        [{"type": "compaction", "signature": "sig-1", "content":
          "<summary>Duplicate charge on INV-2025-08-44791 replayed by a retry.</summary>"}],
        [{"type": "compaction", "signature": "sig-2", "content":
          f"<summary>Duplicate charge on {INVOICE} replayed by ch_3PqL9x retry in "
          f"{PATH}.</summary>"}],
        [{"type": "text", "text": f"Refund queued for {INVOICE}; the culprit is {PATH}."}],
    ]
    if not answer:
        replies.pop()

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        content = replies.pop(0) if len(replies) > 1 else replies[0]
        stop = "compaction" if content[0]["type"] == "compaction" else "end_turn"
        return httpx2.Response(200, json={
            "id": "msg_example", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 60}})

    return httpx2.MockTransport(handle)


def main() -> None:
    live = bool(os.environ.get("ANTHROPIC_API_KEY"))
    messages, trigger = MESSAGES, 150_000
    if live:
        client = anthropic.Anthropic()
        # past the documented minimum trigger (50 000 input tokens), so compaction really runs
        filler = "\n".join(f"2025-04-02T10:{i % 60:02d} worker heartbeat ok seq={i}"
                           for i in range(4000))
        messages = [MESSAGES[0], {"role": "assistant", "content": "Reading the worker log."},
                    {"role": "user", "content": filler}, *MESSAGES[3:]]
        trigger = 50_000
    else:
        client = offline_client(fake_api())

    fw = firewall.Firewall(firewall.load_packs("core", "billing"), max_retries=2)
    guard = GuardedAnthropic(client, fw)
    turn = guard.create(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"), max_tokens=1024,
        messages=messages,
        context_management={"edits": [{"type": "compact_20260112",
                                       "trigger": {"type": "input_tokens", "value": trigger}}]})

    print(f"requests sent: {len(turn.responses)}  compacted: {turn.compacted}")
    if turn.record is not None:
        for attempt in turn.record.attempts:
            print(f"  attempt {attempt.number}: {attempt.verdict}")
        for lit in turn.record.literals:
            print(f"  {lit.value:32} {lit.status}")
    print("next messages:", [(m["role"], [b.get("type") for b in m["content"]]
                              if isinstance(m["content"], list) else "text")
                             for m in turn.messages])
    print("reply:", "".join(getattr(b, "text", "") for b in turn.response.content))

    # on demand: compact now; the reply is the compaction block alone
    if not live:
        client = offline_client(fake_api(answer=False))
    now = GuardedAnthropic(client, fw).create(
        model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"), max_tokens=1024,
        messages=messages, compaction={"type": "summarize"})
    print(f"on demand: requests sent: {len(now.responses)}  compacted: {now.compacted}  "
          f"vendor_path: {now.record.vendor_path}")
    print("  next messages:", [(m["role"], [b.get("type") for b in m["content"]])
                               for m in now.messages])


def offline_client(transport: httpx2.MockTransport) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="offline", base_url="http://api.invalid", max_retries=0,
                               http_client=httpx2.Client(transport=transport))


if __name__ == "__main__":
    main()
