"""Token counters: installed counters, and the vendor's count-tokens API (through the Anthropic
SDK with a mock transport: the SDK sends real HTTP, the test answers). The estimate's own
pieces are tested in ``test_token_estimate.py``."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from firewall.cli import main
from firewall.errors import FirewallError
from firewall.tokens import (
    anthropic_counter,
    calibrated,
    count_tokens,
    counter_named,
    estimate_tokens,
    set_token_counter,
)


@pytest.fixture
def restore_counter():
    yield
    set_token_counter(estimate_tokens)


def test_estimate_counts_digit_groups_and_words():
    assert estimate_tokens("") == 0
    assert estimate_tokens("1234567890") == 4  # digits in groups of up to three
    assert estimate_tokens("hello world") == 2


def test_an_installed_counter_is_used_and_its_cache_dropped_on_change(restore_counter):
    text = "a text long enough to be cached by count_tokens"
    before = count_tokens(text)
    set_token_counter(lambda t: 1000)
    assert count_tokens(text) == 1000
    set_token_counter(estimate_tokens)
    assert count_tokens(text) == before


def test_the_memo_is_bounded_by_the_text_it_holds(restore_counter):
    from firewall import tokens

    set_token_counter(estimate_tokens)  # starts empty
    turn = 64 * 1024  # a long tool result, as coding agents read whole files
    for i in range(3 * tokens._CACHE_CHARS // turn):
        count_tokens(f"{i:08d}" + "x" * (turn - 8))
    held = sum(map(len, tokens._cache))
    assert held == tokens._cached_chars <= tokens._CACHE_CHARS
    assert len(tokens._cache) < 3 * tokens._CACHE_CHARS // turn  # the oldest went


def test_calibrated_scales_the_estimate_with_one_call_to_the_reference():
    calls: list[str] = []

    def reference(text: str) -> int:
        calls.append(text)
        return 3 * estimate_tokens(text)

    counter = calibrated(reference, "order #W2378156 shipped to 786 Elm Street")
    text = "INV-2025-08-44719 and src/auth/handler.ts:142"
    assert counter(text) == math.ceil(3 * estimate_tokens(text))
    assert len(calls) == 1


def test_counter_names(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert counter_named("estimate") is estimate_tokens
    assert counter_named("auto") is estimate_tokens  # no key configured: offline
    with pytest.raises(FirewallError, match="unknown counter 'bogus'"):
        counter_named("bogus")


def test_cli_rejects_an_unknown_counter(tmp_path, capsys):
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert main(["compact", str(conversation), "--tokens", "bogus", "--no-audit"]) == 2
    assert "unknown counter 'bogus'" in capsys.readouterr().err


# ── Anthropic's count-tokens API ─────────────────────────────────────────────────────────────

FRAMING = 7  # what the fake API adds for the message around the text


def count_tokens_api(requests: list[dict[str, Any]]):
    """A handler answering POST /v1/messages/count_tokens like the API: one token per word."""
    import httpx2

    def handle(request: Any) -> Any:
        body = json.loads(request.content)
        requests.append({"path": request.url.path, **body})
        text = body["messages"][0]["content"]
        return httpx2.Response(200, json={"input_tokens": len(text.split()) + FRAMING})
    return handle


def test_anthropic_counter_sends_the_text_and_subtracts_the_message_framing():
    anthropic = pytest.importorskip("anthropic")
    import httpx2

    requests: list[dict[str, Any]] = []
    client = anthropic.Anthropic(api_key="test", max_retries=0, http_client=httpx2.Client(
        transport=httpx2.MockTransport(count_tokens_api(requests))))
    counter = anthropic_counter("claude-test", client=client)
    assert counter("one two three") == 3
    assert counter("") == 0
    assert requests[-1] == {"path": "/v1/messages/count_tokens", "model": "claude-test",
                            "messages": [{"role": "user", "content": "one two three"}]}
    # calibrated on a sample: one more call, then local counting at the API's scale
    local = calibrated(counter, "alpha beta gamma delta")
    sent = len(requests)
    assert local("x y") == math.ceil(estimate_tokens("x y") * 4 / estimate_tokens(
        "alpha beta gamma delta"))
    assert len(requests) == sent


def test_auto_stays_offline_even_with_a_vendor_key(monkeypatch, capsys):
    # nothing leaves the process unless the user asked for that vendor path by name
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert counter_named("auto", "some sample text") is estimate_tokens
    assert capsys.readouterr().err == ""


def test_the_anthropic_counter_falls_back_offline_when_unreachable(monkeypatch, capsys):
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    # the real client cannot reach the network here: counting falls back and says so
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_MAX_RETRIES", "0")
    counter = counter_named("anthropic", "some sample text")
    assert counter is estimate_tokens
    assert "count-tokens failed" in capsys.readouterr().err