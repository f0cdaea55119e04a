"""The client-side summarizer through Claude on Amazon Bedrock, Claude on Google Vertex AI, and
LiteLLM: the same validated compaction, whichever cloud serves the model.

    python examples/cloud_summarizers.py

Offline: the Anthropic clients get a mock transport that answers as the Messages API does (no
cloud credentials: a test token stands in), and LiteLLM answers with its own ``mock_response``.
Each summarizer's first summary mutates the invoice number; the firewall catches it and asks
again. For real calls, build the clients as usual (``AnthropicBedrock(aws_region=...)``,
``AnthropicVertex(region=..., project_id=...)``) and drop ``mock_response``.
"""

from __future__ import annotations

import json
import os

import anthropic
import httpx2

import firewall
from firewall.summarizers.litellm import LiteLLMSummarizer

INVOICE = "INV-2025-08-44719"
MESSAGES = [
    {"role": "user", "content": f"Why was {INVOICE} charged twice?"},
    {"role": "assistant", "content": "The retry worker replayed the charge."},
    {"role": "user", "content": "Refund it."},
    {"role": "assistant", "content": "Refund queued."},
]
REPLIES = ["The user asks about INV-2025-08-44791, charged twice.",
           f"The user asks why {INVOICE} was charged twice; a refund is queued."]


def messages_api() -> httpx2.Client:
    sent: list[str] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.url.path)
        print(f"    POST {request.url.path}")
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": REPLIES[min(len(sent), 2) - 1]}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20}})

    return httpx2.Client(transport=httpx2.MockTransport(handle))


class ScriptedLiteLLM(LiteLLMSummarizer):
    """LiteLLM's own ``mock_response``, one scripted reply per call."""

    def summarize(self, request: firewall.SummaryRequest) -> firewall.Summary:
        self.completion_kwargs["mock_response"] = REPLIES[min(request.attempt, 2) - 1]
        return super().summarize(request)


def main() -> None:
    summarizers = {
        "Claude on Bedrock": firewall.AnthropicSummarizer(
            "anthropic.claude-haiku-4-5-20251001-v1:0", client=anthropic.AnthropicBedrock(
                api_key="offline-token", aws_region="us-east-1", http_client=messages_api())),
        "Claude on Vertex AI": firewall.AnthropicSummarizer(
            "claude-haiku-4-5@20251001", client=anthropic.AnthropicVertex(
                region="us-east5", project_id="my-project", access_token="offline-token",
                http_client=messages_api())),
        "LiteLLM": ScriptedLiteLLM("openai/gpt-4.1-mini", api_key="offline"),
    }
    for name, summarizer in summarizers.items():
        print(f"{name}:")
        result = firewall.Firewall(keep_last=1).compact(MESSAGES, summarizer)
        verdicts = ["ok" if a.verdict.ok else "mutated " + ", ".join(
            f.value for f in a.verdict.mutated) for a in result.attempts]
        print(f"  attempts: {json.dumps(verdicts)}")
        print(f"  summary:  {result.summary}\n")


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    main()
