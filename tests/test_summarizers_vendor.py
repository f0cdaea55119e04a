"""The Anthropic and OpenAI summarizers against the real SDKs, offline.

Each SDK client gets an ``httpx2`` client with a ``MockTransport``: the SDK builds, sends and
parses real HTTP, and the tests read back the JSON body it actually sent. Tests of one vendor skip
when its extra is not installed.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

from firewall.errors import SummarizerError
from firewall.summarizers._prompt import build_user_prompt, render_transcript
from firewall.summarizers.base import RequiredLiteral, Summary, SummaryRequest
from firewall.turns import ToolCall, Turn

INVOICE = "INV-2025-08-44719"
PATH = "src/auth/handler.ts"

TURNS = (
    Turn("user", f"I was charged twice for {INVOICE}, see also {PATH}"),
    Turn("assistant", "Looking it up.",
         tool_calls=(ToolCall("lookup_invoice", {"invoice_id": INVOICE, "note": "Zürich café"},
                              id="call_1"),)),
    Turn("tool", json.dumps({"invoice_id": INVOICE, "amount": "129.00"}),
         tool_name="lookup_invoice", tool_call_id="call_1"),
)
REQUIRED = (RequiredLiteral(INVOICE, "billing.invoice"), RequiredLiteral(PATH, "core.path"))
INSTRUCTIONS = f"Copy these literals verbatim:\n- {INVOICE}\n- {PATH}"
REQUEST = SummaryRequest(turns=TURNS, required=REQUIRED, instructions=INSTRUCTIONS)
REASK = SummaryRequest(
    turns=TURNS, required=REQUIRED, instructions=INSTRUCTIONS, attempt=2,
    feedback=f"Missing: {PATH}. Mutated: INV-2025-08-44791 should be {INVOICE}.",
    previous="Duplicate charge on INV-2025-08-44791 is being refunded.")


class FakeAPI:
    """A transport handler: records each request and answers from a queue of (status, json)."""

    def __init__(self, *replies: tuple[int, dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        import httpx2

        self.requests.append(request)
        status, body = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return httpx2.Response(status, json=body, headers={"retry-after-ms": "1"})

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


# -- Anthropic ---------------------------------------------------------------------------------

@pytest.fixture
def anthropic_sdk() -> Any:
    pytest.importorskip("httpx2")
    return pytest.importorskip("anthropic")


def message(*content: dict[str, Any], stop_reason: str = "end_turn", **usage: int) -> dict:
    # the fields of anthropic.types.Message and Usage
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 1200, "output_tokens": 80,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, **usage}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value, "citations": None}


def overloaded(status: int) -> tuple[int, dict[str, Any]]:
    kind = {429: "rate_limit_error", 529: "overloaded_error"}[status]
    return status, {"type": "error", "error": {"type": kind, "message": f"{kind} happened"}}


def anthropic_summarizer(sdk: Any, api: FakeAPI, *, use_async: bool = False,
                         **kwargs: Any) -> Any:
    import httpx2

    from firewall.summarizers.anthropic import AnthropicSummarizer

    transport = httpx2.MockTransport(api)
    if use_async:
        client = sdk.AsyncAnthropic(api_key="test", max_retries=0,
                                    http_client=httpx2.AsyncClient(transport=transport))
        return AnthropicSummarizer(async_client=client, **kwargs)
    client = sdk.Anthropic(api_key="test", max_retries=0,
                           http_client=httpx2.Client(transport=transport))
    return AnthropicSummarizer(client=client, **kwargs)


def test_anthropic_request_and_parse(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text(f"Refund for {INVOICE} "), text(f"pending; see {PATH}."),
                                cache_read_input_tokens=30)))
    summary = anthropic_summarizer(anthropic_sdk, api, model="claude-test",
                                   max_tokens=700).summarize(REQUEST)

    assert summary == Summary(
        text=f"Refund for {INVOICE} pending; see {PATH}.", model="claude-haiku-4-5",
        usage={"input_tokens": 1200, "output_tokens": 80, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 30})
    [request] = api.requests
    assert request.url.path == "/v1/messages"
    body = api.bodies[0]
    assert (body["model"], body["max_tokens"]) == ("claude-test", 700)
    assert "context compaction" in body["system"]
    [user] = body["messages"]
    assert user["role"] == "user"
    prompt = user["content"]
    assert prompt == build_user_prompt(REQUEST)
    assert INSTRUCTIONS in prompt and "<feedback>" not in prompt
    # the transcript: roles, tool name and call id, arguments as JSON with non-ASCII kept as is
    assert f"I was charged twice for {INVOICE}" in prompt
    assert '<tool_call name="lookup_invoice" id="call_1">' in prompt
    assert json.dumps({"invoice_id": INVOICE, "note": "Zürich café"}, ensure_ascii=False) in prompt
    assert '<turn n="3" role="tool" tool="lookup_invoice" call_id="call_1">' in prompt
    assert prompt.index("<transcript>") < prompt.index(INSTRUCTIONS)


def test_anthropic_reask_sends_feedback_and_previous(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text(f"{INVOICE} {PATH}"))))
    anthropic_summarizer(anthropic_sdk, api, system="Be terse.").summarize(REASK)

    body = api.bodies[0]
    assert body["system"] == "Be terse."
    prompt = body["messages"][0]["content"]
    assert f"<feedback>\n{REASK.feedback}\n</feedback>" in prompt
    assert f"<previous_summary>\n{REASK.previous}\n</previous_summary>" in prompt
    assert "attempt 2" in prompt
    assert prompt.index(INSTRUCTIONS) < prompt.index("<previous_summary>")


@pytest.mark.parametrize("status", [429, 529])
def test_anthropic_status_errors(anthropic_sdk: Any, status: int) -> None:
    api = FakeAPI(overloaded(status))
    with pytest.raises(SummarizerError, match=rf"Anthropic API error {status}\b.*happened") as info:
        anthropic_summarizer(anthropic_sdk, api).summarize(REQUEST)
    assert isinstance(info.value.__cause__, anthropic_sdk.APIStatusError)
    assert len(api.requests) == 1  # max_retries=0 on this client


def test_anthropic_default_client_retries_twice(anthropic_sdk: Any) -> None:
    import httpx2

    from firewall.summarizers.anthropic import AnthropicSummarizer

    api = FakeAPI(overloaded(529), overloaded(529), (200, message(text(INVOICE))))
    summarizer = AnthropicSummarizer(api_key="test", base_url="http://api.test",
                                     http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    assert summarizer.summarize(REQUEST).text == INVOICE
    assert len(api.requests) == 3
    assert str(api.requests[0].url) == "http://api.test/v1/messages"


def test_anthropic_connection_error(anthropic_sdk: Any) -> None:
    import httpx2

    def unreachable(request: Any) -> Any:
        raise httpx2.ConnectError("name resolution failed")

    with pytest.raises(SummarizerError, match="could not reach the Anthropic API.*name resolution"):
        anthropic_summarizer(anthropic_sdk, unreachable).summarize(REQUEST)  # type: ignore[arg-type]


def test_anthropic_max_tokens_retries_once_with_double_budget(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text("Refund for INV-2025-"), stop_reason="max_tokens",
                                output_tokens=500)),
                  (200, message(text(f"Refund for {INVOICE}."), output_tokens=90)))
    summary = anthropic_summarizer(anthropic_sdk, api, max_tokens=500).summarize(REQUEST)

    assert summary.text == f"Refund for {INVOICE}."
    assert [b["max_tokens"] for b in api.bodies] == [500, 1000]
    assert api.bodies[0]["messages"] == api.bodies[1]["messages"]
    assert summary.usage["output_tokens"] == 590 and summary.usage["input_tokens"] == 2400


def test_anthropic_max_tokens_twice_is_an_error(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text("Refund for"), stop_reason="max_tokens")))
    with pytest.raises(SummarizerError, match="cut off at max_tokens=1000 twice"):
        anthropic_summarizer(anthropic_sdk, api, max_tokens=500).summarize(REQUEST)
    assert len(api.requests) == 2


def test_anthropic_refusal(anthropic_sdk: Any) -> None:
    reply = message(stop_reason="refusal")
    reply["stop_details"] = {"type": "refusal", "category": "cyber", "explanation": "policy"}
    with pytest.raises(SummarizerError, match="refused to summarize: policy"):
        anthropic_summarizer(anthropic_sdk, FakeAPI((200, reply))).summarize(REQUEST)


def test_anthropic_ignores_unknown_and_non_text_blocks(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "block_from_the_future", "text": "not a summary", "payload": [1, 2]},
        text(f"Refund for {INVOICE}."))))
    assert anthropic_summarizer(anthropic_sdk, api).summarize(REQUEST).text == \
        f"Refund for {INVOICE}."


@pytest.mark.parametrize("content", [[], [{"type": "block_from_the_future", "x": 1}],
                                     [{"type": "text", "text": "  \n"}]])
def test_anthropic_reply_without_text_is_an_error(anthropic_sdk: Any, content: list) -> None:
    api = FakeAPI((200, message(*content)))
    with pytest.raises(SummarizerError, match="no text"):
        anthropic_summarizer(anthropic_sdk, api).summarize(REQUEST)


def test_anthropic_async(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text("cut"), stop_reason="max_tokens")),
                  (200, message(text(f"Refund for {INVOICE}."))))
    summarizer = anthropic_summarizer(anthropic_sdk, api, use_async=True, max_tokens=300)
    summary = asyncio.run(summarizer.asummarize(REASK))

    assert summary.text == f"Refund for {INVOICE}."
    assert [b["max_tokens"] for b in api.bodies] == [300, 600]
    assert REASK.feedback in api.bodies[0]["messages"][0]["content"]
    with pytest.raises(SummarizerError, match="only async_client"):
        summarizer.summarize(REQUEST)


@pytest.mark.parametrize("status", [429, 529])
def test_anthropic_async_status_errors(anthropic_sdk: Any, status: int) -> None:
    summarizer = anthropic_summarizer(anthropic_sdk, FakeAPI(overloaded(status)), use_async=True)
    with pytest.raises(SummarizerError, match=rf"Anthropic API error {status}\b"):
        asyncio.run(summarizer.asummarize(REQUEST))


def test_anthropic_async_with_only_a_sync_client(anthropic_sdk: Any) -> None:
    api = FakeAPI((200, message(text(INVOICE))))
    summary = asyncio.run(anthropic_summarizer(anthropic_sdk, api).asummarize(REQUEST))
    assert summary.text == INVOICE and len(api.requests) == 1


# -- OpenAI ------------------------------------------------------------------------------------

@pytest.fixture
def openai_sdk() -> Any:
    pytest.importorskip("httpx2")
    return pytest.importorskip("openai")


def completion(content: str | None, finish_reason: str = "stop", refusal: str | None = None,
               usage: dict | None = None) -> dict[str, Any]:
    # the fields of openai.types.chat.ChatCompletion, Choice and ChatCompletionMessage
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600,
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": refusal}}],
            "usage": usage if usage is not None else
            {"prompt_tokens": 900, "completion_tokens": 70, "total_tokens": 970}}


# what OpenAI's API answers: a rate limit, and an overloaded server
OPENAI_ERRORS = {
    429: {"message": "Rate limit reached for gpt-4.1-mini in organization org-1 on requests per "
                     "min (RPM): Limit 500, Used 500, Requested 1.", "type": "requests",
          "param": None, "code": "rate_limit_exceeded"},
    503: {"message": "The engine is currently overloaded, please try again later.",
          "type": "server_error", "param": None, "code": None},
}


def openai_error(status: int) -> tuple[int, dict[str, Any]]:
    return status, {"error": OPENAI_ERRORS[status]}


def openai_summarizer(sdk: Any, api: FakeAPI, *, use_async: bool = False,
                      **kwargs: Any) -> Any:
    import httpx2

    from firewall.summarizers.openai import OpenAISummarizer

    transport = httpx2.MockTransport(api)
    if use_async:
        client = sdk.AsyncOpenAI(api_key="test", max_retries=0,
                                 http_client=httpx2.AsyncClient(transport=transport))
        return OpenAISummarizer(async_client=client, **kwargs)
    client = sdk.OpenAI(api_key="test", max_retries=0,
                        http_client=httpx2.Client(transport=transport))
    return OpenAISummarizer(client=client, **kwargs)


def test_openai_request_and_parse(openai_sdk: Any) -> None:
    api = FakeAPI((200, completion(f"Refund for {INVOICE}; see {PATH}.")))
    summary = openai_summarizer(openai_sdk, api, max_tokens=800).summarize(REASK)

    assert summary == Summary(
        text=f"Refund for {INVOICE}; see {PATH}.", model="gpt-4.1-mini-2025-04-14",
        usage={"prompt_tokens": 900, "completion_tokens": 70, "total_tokens": 970})
    [request] = api.requests
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    body = api.bodies[0]
    assert body["model"] == "gpt-4.1-mini"
    # OpenAI itself gets the non-deprecated budget field
    assert body["max_completion_tokens"] == 800 and "max_tokens" not in body
    system, user = body["messages"]
    assert system["role"] == "system" and "context compaction" in system["content"]
    assert user == {"role": "user", "content": build_user_prompt(REASK)}
    assert INSTRUCTIONS in user["content"] and REASK.feedback in user["content"]
    assert REASK.previous in user["content"]


def test_openai_compatible_server_via_base_url(openai_sdk: Any, monkeypatch: Any) -> None:
    import httpx2

    from firewall.summarizers.openai import OpenAISummarizer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    reply = completion(INVOICE)
    del reply["usage"]  # optional in ChatCompletion; some compatible servers omit it
    api = FakeAPI((200, reply))
    summarizer = OpenAISummarizer(
        model="qwen2.5-7b-instruct", base_url="http://localhost:8000/v1", max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    summary = summarizer.summarize(REQUEST)

    assert summary.text == INVOICE and summary.usage == {}
    [request] = api.requests
    assert str(request.url) == "http://localhost:8000/v1/chat/completions"
    # the OpenAI key from the environment is not sent to another server
    assert request.headers["authorization"] == "Bearer not-needed"
    body = api.bodies[0]
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["max_tokens"] == 2048 and "max_completion_tokens" not in body


def test_openai_explicit_key_and_token_param(openai_sdk: Any) -> None:
    import httpx2

    from firewall.summarizers.openai import OpenAISummarizer

    api = FakeAPI((200, completion(INVOICE)))
    OpenAISummarizer(base_url="http://vllm.internal/v1", api_key="vllm-key",
                     token_param="max_completion_tokens", max_retries=0,
                     http_client=httpx2.Client(transport=httpx2.MockTransport(api))
                     ).summarize(REQUEST)
    assert api.requests[0].headers["authorization"] == "Bearer vllm-key"
    assert api.bodies[0]["max_completion_tokens"] == 2048


@pytest.mark.parametrize("status", sorted(OPENAI_ERRORS))
def test_openai_status_errors(openai_sdk: Any, status: int) -> None:
    api = FakeAPI(openai_error(status))
    error = OPENAI_ERRORS[status]
    with pytest.raises(SummarizerError, match=re.escape(
            f"OpenAI API error {status} {error['type']}: {error['message']}")):
        openai_summarizer(openai_sdk, api).summarize(REQUEST)
    assert len(api.requests) == 1


def test_openai_length_retries_once_with_double_budget(openai_sdk: Any) -> None:
    api = FakeAPI((200, completion("Refund for INV-", finish_reason="length")),
                  (200, completion(f"Refund for {INVOICE}.")))
    summary = openai_summarizer(openai_sdk, api, max_tokens=256).summarize(REQUEST)

    assert summary.text == f"Refund for {INVOICE}."
    assert [b["max_completion_tokens"] for b in api.bodies] == [256, 512]
    assert summary.usage == {"prompt_tokens": 1800, "completion_tokens": 140,
                             "total_tokens": 1940}


def test_openai_length_twice_is_an_error(openai_sdk: Any) -> None:
    api = FakeAPI((200, completion("Refund", finish_reason="length")))
    with pytest.raises(SummarizerError, match="cut off at max_completion_tokens=512 twice"):
        openai_summarizer(openai_sdk, api, max_tokens=256).summarize(REQUEST)
    assert len(api.requests) == 2


@pytest.mark.parametrize(("reply", "error"), [
    (completion(None), "no text"),
    (completion(""), "no text"),
    (completion(None, refusal="I can't help with that."), "refused.*can't help"),
    (completion(None, finish_reason="content_filter"), "content filter"),
    ({**completion("x"), "choices": []}, "no choices"),
])
def test_openai_unusable_replies(openai_sdk: Any, reply: dict, error: str) -> None:
    with pytest.raises(SummarizerError, match=error):
        openai_summarizer(openai_sdk, FakeAPI((200, reply))).summarize(REQUEST)


def test_openai_async(openai_sdk: Any) -> None:
    api = FakeAPI((200, completion("cut", finish_reason="length")),
                  (200, completion(f"Refund for {INVOICE}.")))
    summarizer = openai_summarizer(openai_sdk, api, use_async=True, max_tokens=100)
    summary = asyncio.run(summarizer.asummarize(REASK))

    assert summary.text == f"Refund for {INVOICE}."
    assert [b["max_completion_tokens"] for b in api.bodies] == [100, 200]
    assert REASK.previous in api.bodies[1]["messages"][1]["content"]


@pytest.mark.parametrize("status", sorted(OPENAI_ERRORS))
def test_openai_async_status_errors(openai_sdk: Any, status: int) -> None:
    summarizer = openai_summarizer(openai_sdk, FakeAPI(openai_error(status)), use_async=True)
    with pytest.raises(SummarizerError, match=rf"OpenAI API error {status}\b"):
        asyncio.run(summarizer.asummarize(REQUEST))


# -- without the SDKs, and the shared transcript -----------------------------------------------

@pytest.mark.parametrize(("module", "sdk", "cls"), [
    ("firewall.summarizers.anthropic", "anthropic", "AnthropicSummarizer"),
    ("firewall.summarizers.openai", "openai", "OpenAISummarizer"),
])
def test_missing_sdk_names_the_extra(monkeypatch: Any, module: str, sdk: str, cls: str) -> None:
    import importlib

    summarizer: Callable[..., Any] = getattr(importlib.import_module(module), cls)
    monkeypatch.setitem(sys.modules, sdk, None)  # makes `import <sdk>` raise ImportError
    with pytest.raises(SummarizerError, match=rf"pip install 'literal-firewall\[{sdk}\]'"):
        summarizer()


def test_importing_the_summarizers_does_not_import_the_sdks() -> None:
    import subprocess

    code = ("import sys, firewall.summarizers.anthropic, firewall.summarizers.openai; "
            "print(sorted(m for m in ('anthropic', 'openai', 'httpx2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_render_transcript_keeps_everything() -> None:
    long_result = "row " * 20_000 + INVOICE
    turns = (Turn("system", "You are a billing agent."),
             Turn("assistant", "", tool_calls=(ToolCall("grep", {"pattern": 'a"b', "n": 3}),)),
             Turn("tool", long_result, tool_name="grep"))
    assert render_transcript(turns) == (
        '<turn n="1" role="system">\nYou are a billing agent.\n</turn>\n'
        '<turn n="2" role="assistant">\n<tool_call name="grep">\n{"pattern": "a\\"b", "n": 3}\n'
        '</tool_call>\n</turn>\n'
        f'<turn n="3" role="tool" tool="grep">\n{long_result}\n</turn>')


# -- where the key goes, and what the audit calls the summarizer ---------------------------------

def test_the_anthropic_key_never_follows_a_base_url_to_another_server(
        anthropic_sdk: Any, monkeypatch: Any) -> None:
    import httpx2

    from firewall.summarizers.anthropic import AnthropicSummarizer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-key")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "real-oauth-token")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.internal:4000")
    api = FakeAPI((200, message(text(INVOICE))))
    summarizer = AnthropicSummarizer(max_retries=0,
                                     http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
    assert summarizer.summarize(REQUEST).text == INVOICE
    [request] = api.requests
    assert str(request.url) == "http://proxy.internal:4000/v1/messages"
    sent = " ".join(request.headers.values())
    assert "sk-ant-real-key" not in sent and "real-oauth-token" not in sent
    assert "not-needed" in sent
    assert summarizer.vendor_path == "anthropic-compatible:claude-haiku-4-5@proxy.internal:4000"


def test_the_anthropic_key_still_goes_to_anthropic(anthropic_sdk: Any, monkeypatch: Any) -> None:
    import httpx2

    from firewall.summarizers.anthropic import AnthropicSummarizer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-key")
    for official in (None, "https://api.anthropic.com"):
        if official is None:
            monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
        else:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", official)
        api = FakeAPI((200, message(text(INVOICE))))
        summarizer = AnthropicSummarizer(
            max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(api)))
        summarizer.summarize(REQUEST)
        assert "sk-ant-real-key" in " ".join(api.requests[0].headers.values())
        assert summarizer.vendor_path == "anthropic:claude-haiku-4-5"
    # a proxy that wants a key gets the one passed, never the environment's
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.internal:4000")
    api = FakeAPI((200, message(text(INVOICE))))
    AnthropicSummarizer(api_key="proxy-key", max_retries=0,
                        http_client=httpx2.Client(transport=httpx2.MockTransport(api))
                        ).summarize(REQUEST)
    sent = " ".join(api.requests[0].headers.values())
    assert "proxy-key" in sent and "sk-ant-real-key" not in sent


def test_the_audit_names_vendor_model_and_host(anthropic_sdk: Any, openai_sdk: Any) -> None:
    import httpx2

    import firewall
    from firewall.audit import MemoryAuditLog
    from firewall.summarizers.openai import OpenAISummarizer

    messages = [{"role": "user", "content": f"I was charged twice for {INVOICE}, see {PATH}"},
                {"role": "assistant", "content": "Looking into it."},
                {"role": "user", "content": "thanks"}]
    summary = f"Refund {INVOICE}; see {PATH}."

    def path_of(summarizer: Any) -> str:
        fw = firewall.Firewall(audit=MemoryAuditLog(key=b"k"), keep_last=1)
        result = fw.compact(messages, summarizer=summarizer)
        assert result.compacted
        [record] = fw.audit.export()
        return record.vendor_path

    local = FakeAPI((200, completion(summary)))
    assert path_of(OpenAISummarizer(
        model="qwen2.5-7b-instruct", base_url="http://localhost:8000/v1", max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(local)))) == \
        "openai-compatible:qwen2.5-7b-instruct@localhost:8000"
    official = FakeAPI((200, completion(summary)))
    assert path_of(openai_summarizer(openai_sdk, official)) == "openai:gpt-4.1-mini"
    claude = FakeAPI((200, message(text(summary))))
    assert path_of(anthropic_summarizer(anthropic_sdk, claude)) == "anthropic:claude-haiku-4-5"

    def my_summary(messages: list[Any]) -> str:
        return summary

    assert path_of(my_summary) == "callable:test_the_audit_names_vendor_model_and_host." \
        "<locals>.my_summary"
    assert path_of(None) == "extractive"
