"""Gemini as the summarizer: the firewall checks its summary and asks again when it loses or
mutates a required literal.

    python examples/gemini_summarizer.py

Offline by default: the ``google-genai`` client gets an ``httpx2`` mock transport (through its
``http_options``) that answers as the Gemini API does, first with a summary that mutates the
invoice number. Against the real API when GEMINI_API_KEY or GOOGLE_API_KEY is set
(GEMINI_MODEL picks the model).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
from google import genai
from google.genai import types

import firewall
from firewall.summarizers.gemini import GeminiSummarizer

HERE = Path(__file__).parent
INVOICE = "INV-2025-08-44719"


def offline_client() -> genai.Client:
    replies = [f"dana.reyes@example.com was charged twice for {INVOICE[:-2]}91; refund pending.",
               f"dana.reyes@example.com was charged twice for {INVOICE}; refund pending."]

    def handle(request: httpx2.Request) -> httpx2.Response:
        text = replies.pop(0) if len(replies) > 1 else replies[0]
        print(f"  POST {request.url.path}")
        return httpx2.Response(200, json={
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 40,
                              "totalTokenCount": 940},
            "modelVersion": "gemini-2.5-flash"})

    return genai.Client(api_key="offline", http_options=types.HttpOptions(
        httpx_client=httpx2.Client(transport=httpx2.MockTransport(handle))))


def main() -> None:
    live = bool(os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"))
    summarizer = GeminiSummarizer(os.environ.get("GEMINI_MODEL", "gemini-2.5-flash"),
                                  client=None if live else offline_client())
    (conversation,) = firewall.read_conversations(HERE / "support_invoice.json")
    result = firewall.Firewall(keep_last=4).compact(conversation, summarizer)
    for attempt in result.attempts:
        verdict = attempt.verdict
        print(f"attempt {attempt.number}: " + ("ok" if verdict and verdict.ok else
              f"mutated {[f.value for f in verdict.mutated]}, missing "
              f"{[f.value for f in verdict.missing]}" if verdict else attempt.error))
    print(f"\ncompacted: {result.compacted}; {INVOICE} in the summary: "
          f"{INVOICE in (result.summary or '')}")
    print(result.report())


if __name__ == "__main__":
    main()
