"""Triggers: when a harness compacts (reactive, preemptive) and where the span ends (the nudge)."""

import asyncio
import json
from pathlib import Path

import pytest

from firewall.compose import Span, choose_span
from firewall.errors import FirewallError
from firewall.formats import parse_messages
from firewall.guard import Firewall
from firewall.ledger import Ledger, find_blocks
from firewall.packs import load_packs
from firewall.trigger import Trigger, exchange_ends_before, live_tokens

PACKS = Path(__file__).parent / "fixtures" / "packs" / "valid"
SYSTEM = "You are a billing agent. Cite invoice numbers exactly."
INVOICE, REFUND, LATER = "INV-2025-08-44719", "INV-2025-08-44718", "INV-2025-09-10001"


@pytest.fixture(scope="module")
def fw():
    return Firewall(load_packs(str(PACKS / "minimal.yaml"), str(PACKS / "all_kinds.yaml")),
                    keep_last=2)


# One conversation in each supported format: a question, two parallel tool calls and their
# results, an answer, a follow-up, one more call and its result.

def native():
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Why was invoice {INVOICE} charged twice?"},
        {"role": "assistant", "content": "Looking both up.", "tool_calls": [
            {"id": "c1", "name": "get_invoice", "arguments": {"invoice_id": INVOICE}},
            {"id": "c2", "name": "get_invoice", "arguments": {"invoice_id": REFUND}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_invoice",
         "content": json.dumps({"invoice_id": INVOICE, "amount": "$40.00"})},
        {"role": "tool", "tool_call_id": "c2", "name": "get_invoice",
         "content": json.dumps({"invoice_id": REFUND, "refund_of": INVOICE})},
        {"role": "assistant", "content": f"{REFUND} refunds the first charge."},
        {"role": "user", "content": f"And the order behind {LATER}?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c3", "name": "get_order", "arguments": {"order_id": "#W7387996"}}]},
        {"role": "tool", "tool_call_id": "c3", "name": "get_order",
         "content": json.dumps({"order_id": "#W7387996", "status": "delivered"})},
        {"role": "assistant", "content": "Order #W7387996 was delivered."},
    ]


def openai_chat():
    out = []
    for m in native():
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in m["tool_calls"]]
        m.pop("name", None)
        out.append(m)
    return out


def anthropic():
    out, pending = [], []
    for m in native()[1:]:  # the system prompt goes apart in this API
        if m["role"] == "tool":
            pending.append({"type": "tool_result", "tool_use_id": m["tool_call_id"],
                            "content": m["content"]})
            continue
        if pending:  # every result of one assistant turn in one user message
            out.append({"role": "user", "content": pending})
            pending = []
        blocks = [{"type": "text", "text": m["content"]}] if m["content"] else []
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                    "input": c["arguments"]} for c in m.get("tool_calls", ())]
        out.append({"role": m["role"], "content": blocks})
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def responses():
    out = []
    for m in native():
        if m["role"] == "tool":
            out.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                        "output": m["content"]})
            continue
        if m["content"]:
            out.append({"type": "message", "role": m["role"], "content": m["content"]})
        out += [{"type": "function_call", "call_id": c["id"], "name": c["name"],
                 "arguments": json.dumps(c["arguments"])} for c in m.get("tool_calls", ())]
    return out


FORMATS = {"native": native, "openai": openai_chat, "anthropic": anthropic,
           "openai_responses": responses}


def call_ids(messages):
    """(ids of tool calls, ids of tool results) in messages of any of the four formats."""
    calls, results = set(), set()
    for m in messages:
        for c in m.get("tool_calls") or ():
            calls.add(c["id"])
        if m.get("role") == "tool":
            results.add(m["tool_call_id"])
        if m.get("type") == "function_call":
            calls.add(m["call_id"])
        if m.get("type") == "function_call_output":
            results.add(m["call_id"])
        for block in m.get("content") if isinstance(m.get("content"), list) else ():
            if block.get("type") == "tool_use":
                calls.add(block["id"])
            if block.get("type") == "tool_result":
                results.add(block["tool_use_id"])
    return calls, results


def tokens(messages) -> int:
    return live_tokens(parse_messages(messages).turns)


def over(messages, **kw) -> Trigger:
    """A trigger that fires on ``messages``: its window is one token short of them."""
    return Trigger(window=tokens(messages) - 1, watermark=1.0, **kw)


# ── reactive ───────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("fmt", FORMATS)
def test_under_the_watermark_the_messages_are_returned_untouched(fw, fmt):
    messages = FORMATS[fmt]()
    before = json.dumps(messages)
    trigger = Trigger(window=tokens(messages), watermark=1.0)  # exactly at it: not crossed
    assert fw.maybe_compact(messages, trigger) is messages
    assert fw.compact_if_due(messages, trigger) is None
    assert json.dumps(messages) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_over_the_watermark_the_context_is_compacted_after_a_byte_identical_system_prompt(
        fw, fmt):
    messages = FORMATS[fmt]()
    ledger = Ledger.new("c")
    out = fw.maybe_compact(messages, over(messages), ledger=ledger)
    assert out is not messages and len(out) < len(messages)
    if fmt != "anthropic":  # the Anthropic API keeps it apart, out of the messages
        assert out[0] is messages[0] and json.dumps(out[0]) == json.dumps(messages[0])
    turns = parse_messages(out).turns
    first = 1 if fmt != "anthropic" else 0  # summary and ledger come right after the system
    assert turns[first].text.startswith("Summary of the earlier conversation")
    assert any(find_blocks(t.text, ledger.nonce, ledger.key) for t in turns[first:first + 2])
    assert INVOICE in ledger.values()  # (a span this small is shorter than its summary)


def test_watermark_is_a_share_of_the_window():
    trigger = Trigger(window=32_000, watermark=0.8)
    assert trigger.threshold == 25_600
    assert not trigger.fires(25_600) and trigger.fires(25_601)


# ── preemptive ─────────────────────────────────────────────────────────────────────────────

def test_preemptive_compacts_before_a_turn_whose_output_would_cross(fw):
    messages = native()
    live = tokens(messages)
    reactive = Trigger(window=live + 100, watermark=1.0)
    preemptive = Trigger(window=live + 100, watermark=1.0, policy="preemptive",
                         expected_output=200)
    assert fw.maybe_compact(messages, reactive) is messages
    assert fw.maybe_compact(messages, preemptive) is not messages
    # the expected output of this call overrides the trigger's own
    assert fw.maybe_compact(messages, preemptive, expected_output=50) is messages
    assert not reactive.fires(live, expected_output=10_000)  # reactive ignores it


# ── the semantic nudge ─────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("keep_last", range(0, 9))
def test_a_tool_call_is_never_separated_from_its_result(fw, fmt, keep_last):
    messages = FORMATS[fmt]()
    out = fw.maybe_compact(messages, over(messages, nudge=0), keep_last=keep_last)
    calls, results = call_ids(out)
    assert calls == results


def test_parallel_responses_calls_keep_every_output_with_its_call():
    turns = parse_messages(responses()).turns
    # items: system, user, "Looking both up.", call c1, call c2, output c1, output c2, ...
    assert [t.role for t in turns[3:7]] == ["assistant", "assistant", "tool", "tool"]
    span = choose_span(turns, keep_last=len(turns) - 4)  # a tail opening at call c2
    assert span.end == 3  # moved back before call c1: its output follows c2


def test_the_nudge_moves_the_boundary_back_to_the_end_of_an_exchange():
    turns = parse_messages(native()).turns
    span = Span(1, 8)  # a tail opening on c3's result: back to its call, then to the question
    assert not exchange_ends_before(turns, 7) and exchange_ends_before(turns, 6)
    assert Trigger(window=10, nudge=4).boundary(turns, span) == 6  # "And the order ...?"
    assert Trigger(window=10, nudge=0).boundary(turns, Span(1, 7)) == 7
    assert Trigger(window=10, nudge=0).boundary(turns, Span(1, 8)) == 7  # never call | result


def test_the_nudge_never_moves_before_the_span_start():
    turns = parse_messages(native()).turns
    assert Trigger(window=10, nudge=50).boundary(turns, Span(1, 4)) == 2


# ── re-compaction and the harness loop ─────────────────────────────────────────────────────

def test_a_harness_loop_recompacts_on_the_cumulative_ledger(fw):
    ledger = Ledger.new("session")
    history = native()[:6]
    trigger = over(history)
    history = fw.maybe_compact(history, trigger, ledger=ledger)
    first = set(ledger.values())
    assert INVOICE in first
    history = history + native()[6:]
    history = fw.maybe_compact(history, over(history, nudge=0), ledger=ledger)
    assert first <= set(ledger.values()) and LATER in ledger.values()
    summaries = [t.text for t in parse_messages(history).turns
                 if t.text.startswith("Summary of the earlier conversation")]
    assert len(summaries) == 1 and summaries[0].startswith(
        "Summary of the earlier conversation (turns 1-")
    assert history[0] == native()[0]


def test_async_maybe_compact_matches_sync(fw):
    messages = native()
    trigger = over(messages)
    saved = Ledger.new("a").to_json()
    sync = fw.maybe_compact(messages, trigger, ledger=Ledger.from_json(saved))
    out = asyncio.run(fw.amaybe_compact(messages, trigger, ledger=Ledger.from_json(saved)))
    assert out == sync
    assert asyncio.run(fw.amaybe_compact(messages, Trigger(window=10**6))) is messages


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"window": 100, "watermark": 0},
                                    {"window": 100, "watermark": 1.5},
                                    {"window": 100, "policy": "eager"},
                                    {"window": 100, "expected_output": -1}])
def test_a_bad_trigger_is_refused_with_what_is_wrong(kwargs):
    with pytest.raises(FirewallError, match="trigger"):
        Trigger(**kwargs)
