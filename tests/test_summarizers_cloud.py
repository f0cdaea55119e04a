"""The client-side summarizer through the cloud-hosted Anthropic clients (``AnthropicBedrock``,
``AnthropicVertex``: the SDK's own clients on its ``httpx2`` mock transport, no cloud
credentials) and through LiteLLM (its real provider code, against an HTTP server on 127.0.0.1).
Each compaction re-asks once: the first summary mutates the invoice, the second keeps it."""

from __future__ import annotations

import asyncio
import json

import pytest

import firewall
from firewall.audit import MemoryAuditLog
from firewall.errors import SummarizerError

from loopback import QuietHandler, serving

INVOICE = "INV-2025-08-44719"
MUTATED = "INV-2025-08-44791"
MESSAGES = [
    {"role": "user", "content": f"Why was {INVOICE} charged twice?"},
    {"role": "assistant", "content": "The retry worker replayed the charge."},
    {"role": "user", "content": "Refund it."},
    {"role": "assistant", "content": "Refund queued."},
]
SUMMARIES = [f"The user asks about {MUTATED}, charged twice.",
             f"The user asks why {INVOICE} was charged twice; a refund is queued."]


def compact(summarizer, *, use_async=False):
    fw = firewall.Firewall(audit=MemoryAuditLog(), keep_last=1, max_retries=2)
    if use_async:
        return asyncio.run(fw.acompact(MESSAGES, summarizer))
    return fw.compact(MESSAGES, summarizer)


def assert_reasked_and_kept(result, requests):
    assert result.compacted and INVOICE in result.summary
    assert [a.verdict.ok for a in result.attempts] == [False, True]
    assert len(requests) == 2 and MUTATED in json.dumps(requests[1])  # the re-ask says so
    assert {o.status for o in result.record.literals if o.value == INVOICE} == {"in_summary"}


# -- Anthropic on Bedrock and Vertex -----------------------------------------------------------

@pytest.fixture
def anthropic():
    pytest.importorskip("httpx2")
    return pytest.importorskip("anthropic")


def messages_api(seen: list):
    """A Messages API host: answers each request with the next summary, as a real ``Message``."""
    import httpx2

    def handle(request):
        body = json.loads(request.content)
        seen.append({"path": request.url.path, "auth": request.headers.get("authorization"),
                     **body})
        reply = SUMMARIES[min(len(seen), len(SUMMARIES)) - 1]
        return httpx2.Response(200, json={
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": reply, "citations": None}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20}})

    return httpx2.MockTransport(handle)


BEDROCK_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
VERTEX_MODEL = "claude-haiku-4-5@20251001"


def through(client_class, model: str, options: dict, transport, use_async: bool):
    """``AnthropicSummarizer`` on a cloud client of the SDK whose HTTP goes to ``transport``."""
    import httpx2

    http = (httpx2.AsyncClient if use_async else httpx2.Client)(transport=transport)
    client = client_class(**options, http_client=http)
    return firewall.AnthropicSummarizer(model, **{"async_client" if use_async else "client":
                                                  client})


@pytest.mark.parametrize("use_async", [False, True])
def test_the_summarizer_works_through_anthropic_bedrock(anthropic, use_async):
    seen: list = []
    transport = messages_api(seen)
    options = dict(api_key="bedrock-test-token", aws_region="us-east-1", max_retries=0)
    summarizer = through(anthropic.AsyncAnthropicBedrock if use_async else
                         anthropic.AnthropicBedrock, BEDROCK_MODEL, options, transport, use_async)
    result = compact(summarizer, use_async=use_async)
    assert_reasked_and_kept(result, seen)
    # Bedrock's own route and body: the model is in the path, the API version in the body
    assert seen[0]["path"] == f"/model/{BEDROCK_MODEL}/invoke"
    assert "anthropic_version" in seen[0] and "model" not in seen[0]
    assert seen[0]["auth"] == "Bearer bedrock-test-token"


@pytest.mark.parametrize("use_async", [False, True])
def test_the_summarizer_works_through_anthropic_vertex(anthropic, use_async):
    seen: list = []
    transport = messages_api(seen)
    options = dict(region="us-east5", project_id="my-project", access_token="vertex-test-token",
                   max_retries=0)
    summarizer = through(anthropic.AsyncAnthropicVertex if use_async else
                         anthropic.AnthropicVertex, VERTEX_MODEL, options, transport, use_async)
    result = compact(summarizer, use_async=use_async)
    assert_reasked_and_kept(result, seen)
    assert seen[0]["path"] == ("/v1/projects/my-project/locations/us-east5/publishers/"
                               f"anthropic/models/{VERTEX_MODEL}:rawPredict")
    assert "anthropic_version" in seen[0] and "model" not in seen[0]
    assert seen[0]["auth"] == "Bearer vertex-test-token"


# -- LiteLLM ---------------------------------------------------------------------------------

@pytest.fixture
def chat_server():
    """An OpenAI-compatible server on 127.0.0.1: answers chat completions in turn."""
    seen: list = []

    class Handler(QuietHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, **body})
            if "PLEASE-FAIL" in body["messages"][-1]["content"]:
                status, reply = 503, {"error": {"message": "overloaded", "type": "server"}}
            else:
                status, reply = 200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                    "model": body["model"], "choices": [{
                        "index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant",
                            "content": SUMMARIES[min(len(seen), len(SUMMARIES)) - 1]}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                              "total_tokens": 120}}
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(Handler) as url:
        yield seen, f"{url}/v1"


@pytest.fixture
def litellm_summarizer(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-map fetch at import
    pytest.importorskip("litellm")
    from firewall.summarizers.litellm import LiteLLMSummarizer

    return LiteLLMSummarizer


@pytest.mark.parametrize("use_async", [False, True])
def test_the_summarizer_works_through_litellm(litellm_summarizer, chat_server, use_async):
    seen, url = chat_server
    summarizer = litellm_summarizer("openai/local-model", api_base=url, api_key="local",
                                    num_retries=0)
    result = compact(summarizer, use_async=use_async)
    assert_reasked_and_kept(result, seen)
    assert seen[0]["path"] == "/v1/chat/completions" and seen[0]["model"] == "local-model"
    assert seen[0]["max_tokens"] == 2048
    assert result.record.attempts[0].usage["prompt_tokens"] == 100
    assert result.record.vendor_path == "litellm:openai/local-model"


def test_a_litellm_provider_error_leaves_the_conversation_uncompacted(litellm_summarizer,
                                                                     chat_server):
    seen, url = chat_server
    summarizer = litellm_summarizer("openai/local-model", api_base=url, api_key="local",
                                    num_retries=0, max_retries=0)
    failing = MESSAGES + [{"role": "user", "content": "PLEASE-FAIL"},
                          {"role": "assistant", "content": "ok"}]
    request = firewall.SummaryRequest(turns=firewall.parse_messages(failing).turns, required=(),
                                      instructions="Summarize.")
    with pytest.raises(SummarizerError, match=r"LiteLLM error 503"):
        summarizer.summarize(request)
    result = firewall.Firewall(keep_last=1, max_retries=0).compact(failing, summarizer)
    assert not result.compacted and result.messages == failing
    assert "LiteLLM error 503" in result.record.attempts[0].error
    assert seen  # it did reach the server
