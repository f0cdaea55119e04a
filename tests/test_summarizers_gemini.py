"""GeminiSummarizer against the real google-genai SDK, offline: a ``genai.Client`` whose
``http_options`` carry an ``httpx2`` client on a ``MockTransport``, so the SDK builds, sends and
parses real HTTP and the tests read back the JSON body it sent."""

from __future__ import annotations

import asyncio
import json

import pytest

genai = pytest.importorskip("google.genai")
httpx2 = pytest.importorskip("httpx2")

import firewall  # noqa: E402
from firewall.audit import MemoryAuditLog  # noqa: E402
from firewall.errors import SummarizerError  # noqa: E402
from firewall.summarizers._prompt import SYSTEM_PROMPT  # noqa: E402
from firewall.summarizers.base import RequiredLiteral, SummaryRequest  # noqa: E402
from firewall.summarizers.gemini import GeminiSummarizer  # noqa: E402
from firewall.turns import Turn  # noqa: E402

INVOICE = "INV-2025-08-44719"
REQUEST = SummaryRequest(turns=(Turn("user", f"Why was {INVOICE} charged twice?"),),
                         required=(RequiredLiteral(INVOICE, "billing/invoice-number"),),
                         instructions=f"Copy these literals verbatim:\n- {INVOICE}")


def reply(*parts, finish="STOP", **extra):
    """A generateContent response, in the API's JSON field names."""
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)},
                            "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 30,
                              "totalTokenCount": 150},
            "modelVersion": "gemini-2.5-flash-001", "responseId": "resp-1", **extra}


class FakeAPI:
    def __init__(self, *replies):
        self.replies, self.requests = list(replies), []

    def __call__(self, request):
        self.requests.append(request)
        status, body = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return httpx2.Response(status, json=body)

    @property
    def bodies(self):
        return [json.loads(r.content) for r in self.requests]

    def summarizer(self, **options):
        from google.genai import types

        transport = httpx2.MockTransport(self)
        client = genai.Client(api_key="test-key", http_options=types.HttpOptions(
            httpx_client=httpx2.Client(transport=transport),
            httpx_async_client=httpx2.AsyncClient(transport=transport),
            retry_options=types.HttpRetryOptions(attempts=1)))
        return GeminiSummarizer(client=client, **options)


def ok(text):
    return 200, reply({"text": text})


@pytest.mark.parametrize("use_async", [False, True])
def test_request_and_reply_through_the_sdk(use_async):
    api = FakeAPI(ok(f"Duplicate charge on {INVOICE}."))
    summarizer = api.summarizer(model="gemini-2.5-flash", max_tokens=1024)
    summary = (asyncio.run(summarizer.asummarize(REQUEST)) if use_async
               else summarizer.summarize(REQUEST))
    assert summary.text == f"Duplicate charge on {INVOICE}."
    assert summary.model == "gemini-2.5-flash-001"
    assert summary.usage["prompt_token_count"] == 120
    (request,) = api.requests
    assert request.url.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == "test-key"
    body = api.bodies[0]
    assert body["systemInstruction"]["parts"][0]["text"] == SYSTEM_PROMPT
    prompt = body["contents"][0]["parts"][0]["text"]
    assert f"Why was {INVOICE} charged twice?" in prompt and f"- {INVOICE}" in prompt
    assert body["generationConfig"]["maxOutputTokens"] == 1024


def test_thoughts_are_not_the_summary():
    api = FakeAPI((200, reply({"text": "Let me think about INV-0000.", "thought": True},
                              {"text": f"Refund for {INVOICE}."})))
    assert api.summarizer().summarize(REQUEST).text == f"Refund for {INVOICE}."


def test_a_cut_off_reply_is_asked_again_with_twice_the_budget():
    api = FakeAPI((200, reply({"text": "Duplicate ch"}, finish="MAX_TOKENS")),
                  ok(f"Duplicate charge on {INVOICE}."))
    summary = api.summarizer(max_tokens=500).summarize(REQUEST)
    assert summary.text == f"Duplicate charge on {INVOICE}."
    assert [b["generationConfig"]["maxOutputTokens"] for b in api.bodies] == [500, 1000]
    assert summary.usage["prompt_token_count"] == 240  # both calls are billed


@pytest.mark.parametrize("answer, message", [
    ((200, reply({"text": "x"}, finish="MAX_TOKENS")), r"cut off at max_output_tokens=4096"),
    ((200, reply({"text": "I cannot"}, finish="SAFETY")), r"withheld \(finish_reason SAFETY\)"),
    ((200, {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": {"promptTokenCount": 5}}), r"prompt was blocked \(PROHIBITED"),
    ((200, reply({"functionCall": {"name": "lookup", "args": {}}})), r"holds no text"),
    ((429, {"error": {"code": 429, "message": "Quota exceeded.",
                      "status": "RESOURCE_EXHAUSTED"}}),
     r"Gemini API error 429 RESOURCE_EXHAUSTED: Quota exceeded"),
])
def test_unusable_replies_and_api_errors_are_summarizer_errors(answer, message):
    with pytest.raises(SummarizerError, match=message):
        FakeAPI(answer).summarizer().summarize(REQUEST)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_mutated_literal_is_reasked_through_gemini(use_async):
    api = FakeAPI(ok("The user asks about INV-2025-08-44791."),
                  ok(f"The user asks about {INVOICE}; a refund is queued."))
    fw = firewall.Firewall(audit=MemoryAuditLog(), keep_last=1)
    messages = [{"role": "user", "content": f"Why was {INVOICE} charged twice?"},
                {"role": "assistant", "content": "Looking."},
                {"role": "user", "content": "Refund it."}]
    summarizer = api.summarizer()
    result = (asyncio.run(fw.acompact(messages, summarizer)) if use_async
              else fw.compact(messages, summarizer))
    assert result.compacted and [a.verdict.ok for a in result.attempts] == [False, True]
    assert "INV-2025-08-44791" in api.bodies[1]["contents"][0]["parts"][0]["text"]
    assert result.record.vendor_path == "gemini:gemini-2.5-flash"
    assert result.record.attempts[0].usage["prompt_token_count"] == 120
