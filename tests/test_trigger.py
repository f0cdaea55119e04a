"""Triggers: when a harness compacts (reactive, preemptive) and where the span ends (the nudge)."""

import asyncio
import json
from pathlib import Path

import pytest

from firewall.compaction.compose import Span, choose_span, compose, splits_tool_pair, with_tool_pairs
from firewall.tokens import turn_tokens
from firewall.errors import FirewallError
from firewall.formats import parse_messages
from firewall.compaction.guard import Firewall
from firewall.compaction.ledger import Ledger, find_blocks
from firewall.extraction.packs import load_packs
from firewall.summarizers.scripted import ScriptedSummarizer
from firewall.turns import ToolCall, Turn
from firewall.compaction.trigger import (BACKING_OFF, SKIPPED, Trigger, exchange_ends_before,
                              live_tokens)

PACKS = Path(__file__).parent / "fixtures" / "packs" / "valid"
SYSTEM = "You are a billing agent. Cite invoice numbers exactly."
INVOICE, REFUND, LATER = "INV-2025-08-44719", "INV-2025-08-44718", "INV-2025-09-10001"
# what a tool result carries beside its fields: a span of such results is worth compacting (its
# summary and ledger are smaller than it), so the triggers compact them
LOG = " ".join(f"event {i}: the billing worker processed batch {i} without errors."
               for i in range(30))


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
         "content": json.dumps({"invoice_id": INVOICE, "amount": "$40.00", "log": LOG})},
        {"role": "tool", "tool_call_id": "c2", "name": "get_invoice",
         "content": json.dumps({"invoice_id": REFUND, "refund_of": INVOICE, "log": LOG})},
        {"role": "assistant", "content": f"{REFUND} refunds the first charge."},
        {"role": "user", "content": f"And the order behind {LATER}?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c3", "name": "get_order", "arguments": {"order_id": "#W7387996"}}]},
        {"role": "tool", "tool_call_id": "c3", "name": "get_order",
         "content": json.dumps({"order_id": "#W7387996", "status": "delivered", "log": LOG})},
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
    assert INVOICE in ledger.values() and tokens(out) < tokens(messages)


def test_watermark_is_a_share_of_the_window():
    trigger = Trigger(window=32_000, watermark=0.8)
    assert trigger.threshold == 25_600
    assert not trigger.fires(25_600) and trigger.fires(25_601)


def test_the_headroom_is_a_share_of_the_threshold_not_of_the_window():
    """A watermark of half the window: the threshold is 500 tokens, and 20 % headroom leaves a
    target of 400 (20 % of the 1,000-token window would leave 300)."""
    trigger = Trigger(window=1_000, watermark=0.5, headroom=0.2)
    assert trigger.threshold == 500 and trigger.target == 400
    assert trigger.relieves(400) and not trigger.relieves(401)
    assert Trigger(window=1_000, watermark=0.5, headroom=0).target == 500


def test_the_threshold_rounds_down_so_the_trigger_never_fires_late():
    trigger = Trigger(window=999, watermark=0.5)  # 499.5 tokens
    assert trigger.threshold == 499 and trigger.fires(500) and not trigger.fires(499)


def test_a_result_without_an_id_still_opens_no_tail():
    """Results without ids (a format or harness that gives none): a tail opening on a tool
    result splits it from its call, whatever ids say."""
    turns = [Turn("user", "look it up"), Turn("assistant", tool_calls=(ToolCall("f", {}),)),
             Turn("tool", "found", tool_name="f"), Turn("assistant", "done")]
    assert splits_tool_pair(turns, 2) and not splits_tool_pair(turns, 3)
    assert not splits_tool_pair(turns, 1)
    assert choose_span(turns, keep_last=2) == Span(0, 1)


def test_an_empty_assistant_turn_ends_no_exchange():
    """Only an answer in text ends an exchange: an empty assistant turn (a model that wrote
    nothing) followed by another assistant turn does not."""
    turns = [Turn("user", "hi"), Turn("assistant", ""), Turn("assistant", "Hello.")]
    assert not exchange_ends_before(turns, 2)
    assert exchange_ends_before(turns + [Turn("assistant", "More.")], 3)


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


def test_a_call_s_expected_output_decides_both_firing_and_relief():
    """The next call's own max_tokens overrides the trigger's, for whether it fires and for
    whether a compaction would bring the context under the target."""
    turns = parse_messages(native()).turns
    live = live_tokens(turns)
    trigger = Trigger(window=live - 1, watermark=1.0, policy="preemptive",
                      expected_output=live, headroom=0)
    span = choose_span(turns, keep_last=1)
    small = trigger.assess(turns, span, lambda t: False, expected_output=0)
    assert small.due  # the system prompt and the tail alone are under the target
    big = trigger.assess(turns, span, lambda t: False)
    assert big.fires and not big.due and big.skipped.startswith(SKIPPED)
    assert f"{live:,} for the next call's output" in big.skipped


def test_an_anthropic_system_prompt_kept_apart_is_not_put_in_the_messages():
    """Anthropic's system prompt is a parameter, not a message: the composed messages hold
    no trace of it (no ``None`` where its message would be)."""
    conversation = parse_messages(anthropic(), system=SYSTEM)
    assert conversation.turns[0].role == "system" and conversation.turns[0].raw is None
    span = choose_span(conversation.turns, keep_last=1)
    out = compose(conversation, span, "Summary.", "<<<ledger>>>")
    assert None not in out and all(isinstance(m, dict) for m in out)
    assert out[-1] == anthropic()[-1]
    assert SYSTEM not in json.dumps(out)


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


def test_the_nudge_reaches_an_exchange_exactly_nudge_turns_back():
    """Boundary of the nudge's search: from the span's end (9, the final answer) the last
    exchange ended 3 turns back (at 6, "And the order ...?"); a nudge of 3 reaches it, 2 does
    not."""
    turns = parse_messages(native()).turns
    assert exchange_ends_before(turns, 6)
    assert not any(exchange_ends_before(turns, b) for b in (7, 8, 9))
    assert Trigger(window=10, nudge=3).boundary(turns, Span(1, 9)) == 6
    assert Trigger(window=10, nudge=2).boundary(turns, Span(1, 9)) == 9


def test_a_final_tool_result_stays_with_its_call_at_keep_last_1():
    """A conversation that ends on a tool result: a one-turn tail would hold the result
    without its call; the span ends before the call instead."""
    turns = parse_messages(native()[:9]).turns  # ..., call c3, result c3
    assert [t.role for t in turns[-2:]] == ["assistant", "tool"]
    assert choose_span(turns, keep_last=1) == Span(1, 7)
    assert choose_span(turns, keep_last=0) == Span(1, 9)  # nothing kept: nothing split
    assert choose_span(turns, keep_last=2) == Span(1, 7)


def test_keep_tokens_is_the_least_the_whole_tail_holds_its_keep_last_turns_included():
    turns = parse_messages(native()).turns  # ..., answer (5), follow-up (6), call, result, answer
    last, follow_up = turn_tokens(turns[9]), turn_tokens(turns[6])
    assert choose_span(turns, keep_last=1, keep_tokens=last) == Span(1, 9)  # the answer holds it
    assert choose_span(turns, keep_last=1, keep_tokens=last + 1).end < 9  # one more turn needed
    # the tail takes whole turns back to the follow-up, and never splits a call from its result
    needed = sum(turn_tokens(t) for t in turns[6:])
    assert choose_span(turns, keep_last=0, keep_tokens=needed) == Span(1, 6)
    assert choose_span(turns, keep_last=0, keep_tokens=needed - follow_up) == Span(1, 7)
    assert choose_span(turns, keep_last=0, keep_tokens=needed - follow_up + 1) == Span(1, 6)
    assert choose_span(turns, keep_last=4, keep_tokens=1) == Span(1, 6)  # keep_last rules
    assert choose_span(turns, keep_last=0, keep_tokens=10**9) == Span(1, 1)  # all but system


@pytest.mark.parametrize("kept", [2, 3, 4])
def test_a_kept_parallel_call_keeps_every_result_and_a_kept_result_its_call(kept):
    """Turn 2 calls c1 and c2 in parallel, turns 3 and 4 are their results: keeping any of the
    three verbatim (a withheld turn, a literal too long to pin) keeps all three."""
    turns = parse_messages(native()).turns
    assert with_tool_pairs(turns, [kept], Span(1, 9)) == [2, 3, 4]
    assert with_tool_pairs(turns, [kept, 8], Span(1, 9)) == [2, 3, 4, 7, 8]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kept", range(2, 9))
def test_composed_messages_never_hold_a_call_without_its_results(fmt, kept):
    conversation = parse_messages(FORMATS[fmt]())
    turns = conversation.turns
    span = Span(next(i for i, t in enumerate(turns) if t.role != "system"), len(turns) - 1)
    if kept not in span:
        return
    out = compose(conversation, span, "summary", "ledger", keep=[kept])
    calls, results = call_ids(out)
    assert calls == results


def test_a_kept_responses_output_keeps_its_call_item_by_id():
    """Responses API items: call c1, call c2, output c1, output c2. Keeping output c2 keeps
    call c2 (two items back), and keeping call c1 keeps output c1 (across call c2)."""
    turns = parse_messages(responses()).turns
    assert [t.role for t in turns[3:7]] == ["assistant", "assistant", "tool", "tool"]
    span = Span(1, len(turns) - 1)
    assert with_tool_pairs(turns, [6], span) == [4, 6]
    assert with_tool_pairs(turns, [3], span) == [3, 5]


# ── re-compaction and the harness loop ─────────────────────────────────────────────────────

def test_a_harness_loop_recompacts_on_the_cumulative_ledger(fw):
    ledger = Ledger.new("session")
    history = native()[:6]
    trigger = over(history)
    history = fw.maybe_compact(history, trigger, ledger=ledger, keep_last=1)  # the answer
    first = set(ledger.values())
    assert INVOICE in first
    history = history + native()[6:]
    history = fw.maybe_compact(history, over(history, nudge=0), ledger=ledger, keep_last=1)
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


# ── re-compaction thrash ───────────────────────────────────────────────────────────────────

def audit_rounds(n: int):
    """A session that looks up one invoice after another; each result is long, so that two
    rounds (call and result) are most of a small window."""
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Audit the invoices from {INVOICE} on."}]
    for r in range(n):
        invoice = f"INV-2025-08-{44719 + r}"
        messages += [
            {"role": "assistant", "content": f"Checking {invoice}.", "tool_calls": [
                {"id": f"r{r}", "name": "get_invoice", "arguments": {"invoice_id": invoice}}]},
            {"role": "tool", "tool_call_id": f"r{r}", "name": "get_invoice",
             "content": json.dumps({"invoice_id": invoice, "log": LOG})}]
    return messages


def harness(fw, messages, trigger, *, keep_last, summarizer=None):
    """Append ``messages`` one at a time and call ``maybe_compact`` before each model call, as
    a harness does; per call: (compacted, tokens before, tokens after, the call's Due)."""
    ledger, history, calls = Ledger.new("loop"), [], []
    for message in messages:
        history = history + [message]
        due = fw.compaction_due(history, trigger, ledger=ledger, keep_last=keep_last)
        out = fw.maybe_compact(history, trigger, ledger=ledger, keep_last=keep_last,
                               summarizer=summarizer)
        calls.append((out is not history, tokens(history), tokens(out), due))
        history = out
    return calls


def test_a_compaction_is_skipped_while_the_span_holds_too_little_fresh_material(fw):
    """Once the tail plus the summary and ledger sit near the watermark, compacting again only
    re-summarizes the summary: the trigger used to compact at every following call, and grew
    the context. Now a compaction waits for fresh material, and always shrinks the context."""
    trigger = Trigger(window=1_500)
    calls = harness(fw, audit_rounds(10), trigger, keep_last=2)
    compacted = [i for i, (done, *_) in enumerate(calls) if done]
    assert len(compacted) >= 2  # it does compact, and re-compact
    assert all(after < before for done, before, after, _ in calls if done)
    assert all(b - a > 1 for a, b in zip(compacted, compacted[1:]))  # never at every call
    skipped = [due for done, before, _, due in calls if before > trigger.threshold and not done]
    assert skipped and all(due.fires and not due.due and due.skipped.startswith(SKIPPED)
                           for due in skipped)
    assert all(due.due for done, *_, due in calls if done)


def test_a_tail_over_the_watermark_alone_is_not_compacted_again_and_again(fw):
    """Two long results kept verbatim are over the watermark by themselves: no compaction can
    help, so none is made, at any call; the messages come back untouched, the same object."""
    messages = audit_rounds(6)
    trigger = Trigger(window=1_200)
    ledger = Ledger.new("tail")
    over_at = []
    for n in range(1, len(messages) + 1):
        history = messages[:n]
        if not trigger.fires(tokens(history)):
            continue
        over_at.append(n)
        assert fw.maybe_compact(history, trigger, ledger=ledger, keep_last=4) is history
        assert fw.compact_if_due(history, trigger, ledger=ledger, keep_last=4) is None
        due = fw.compaction_due(history, trigger, ledger=ledger, keep_last=4)
        assert due.fires and due.boundary is None and SKIPPED in due.skipped
    assert len(over_at) >= 4
    assert fw.compaction_due(messages, trigger, keep_last=4).fresh_tokens > 0  # just too few


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_compaction_that_would_grow_the_context_fails_closed_once(fw, fmt):
    """A summary longer than the span it replaces: the trigger's compaction keeps the text
    (said in the result), and the next calls wait for a span larger than what it cost instead
    of asking the summarizer again at every call."""
    if fmt == "openai":
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Why was {INVOICE} charged twice?"},
                    {"role": "assistant", "content": f"{REFUND} refunds the first charge."},
                    {"role": "user", "content": "Thanks."}]
    else:
        messages = [
            {"role": "user", "content": [{"type": "text", "text": f"Why was {INVOICE} charged?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
                                               "name": "get_invoice",
                                               "input": {"invoice_id": INVOICE}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": f"refunded by {REFUND}"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"{REFUND} refunds it."}]}]
    assert parse_messages(messages).format == fmt
    long_summary = f"{INVOICE} and {REFUND}. " + LOG
    summarizer = ScriptedSummarizer([long_summary])
    ledger = Ledger.new("grow")
    trigger = over(messages)
    result = fw.compact_if_due(messages, trigger, ledger=ledger, summarizer=summarizer,
                               keep_last=1)
    assert result is not None and not result.compacted
    assert result.messages == messages and "not fewer than" in result.record.error
    assert fw.maybe_compact(messages, trigger, ledger=ledger, summarizer=summarizer,
                            keep_last=1) is messages
    assert len(summarizer.calls) == 1  # the second call was skipped, not attempted
    due = fw.compaction_due(messages, trigger, ledger=ledger, keep_last=1)
    assert due.skipped.startswith(SKIPPED)
    # a plain compact() is what the caller asked for, as before
    assert fw.compact(messages, ScriptedSummarizer([long_summary]), keep_last=1).compacted


class Down:
    """A vendor that is down: every call fails."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request):
        self.calls += 1
        raise ConnectionError("vendor down")


def test_a_failing_summarizer_is_not_called_before_every_model_call(fw):
    """After n failed compactions in a row, the trigger's next compaction on that ledger waits
    for 2**n more messages, saying why; the first usable summary ends the back-off."""
    messages, ledger, down = native(), Ledger.new("down"), Down()
    trigger = Trigger(window=tokens(messages) - 1, watermark=1.0)
    tried = []
    for extra in range(12):
        history = messages + [{"role": "user", "content": f"Any news, {i}?"}
                              for i in range(extra)]
        before = down.calls
        assert fw.maybe_compact(history, trigger, ledger=ledger, summarizer=down) is history
        if down.calls > before:
            tried.append(extra)
    assert tried == [0, 2, 6]  # then waits for 8 more messages
    due = fw.compaction_due(history, trigger, ledger=ledger)
    assert due.fires and not due.due and due.skipped.startswith(BACKING_OFF)
    assert "ConnectionError: vendor down" in due.skipped and "3 more message(s)" in due.skipped
    # asking is no firing: the decision is the same
    assert fw.compaction_due(history, trigger, ledger=ledger) == due
    history = history + [{"role": "user", "content": f"Still there, {i}?"} for i in range(3)]
    result = fw.compact_if_due(history, trigger, ledger=ledger,
                               summarizer=ScriptedSummarizer([f"{INVOICE} and {REFUND}."]))
    assert result.compacted
    assert fw.compact_if_due(history, trigger, ledger=ledger, summarizer=down) is not None
    assert down.calls == 4  # the back-off started over: the next firing was tried at once


def test_the_back_off_doubles_up_to_its_cap_of_32_messages(fw):
    from firewall.compaction.plan import BACK_OFF_MAX

    messages, ledger, down = native(), Ledger.new("capped"), Down()
    trigger = Trigger(window=tokens(messages) - 1, watermark=1.0)
    tried, history = [], messages
    for extra in range(96):
        history = history + ([{"role": "user", "content": f"Any news, {extra}?"}]
                             if extra else [])
        before = down.calls
        fw.maybe_compact(history, trigger, ledger=ledger, summarizer=down)
        if down.calls > before:
            tried.append(extra)
    assert BACK_OFF_MAX == 32
    assert tried == [0, 2, 6, 14, 30, 62, 94]  # waits of 2, 4, 8, 16, 32, then 32 again


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"window": 100, "watermark": 0},
                                    {"window": 100, "watermark": 1.5},
                                    {"window": 100, "policy": "eager"},
                                    {"window": 100, "expected_output": -1},
                                    {"window": 100, "headroom": 1.0}])
def test_a_bad_trigger_is_refused_with_what_is_wrong(kwargs):
    with pytest.raises(FirewallError, match="trigger"):
        Trigger(**kwargs)
