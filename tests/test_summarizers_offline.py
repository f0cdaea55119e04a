"""The offline summarizers: ``ExtractiveSummarizer`` (the default) and ``ScriptedSummarizer``."""

from __future__ import annotations

import asyncio
import json

import pytest

from firewall.errors import SummarizerError
from firewall.summarizers.base import RequiredLiteral, Summary, SummaryRequest
from firewall.summarizers.extractive import ExtractiveSummarizer, split_sentences
from firewall.summarizers.scripted import ScriptedSummarizer
from firewall.tokens import count_tokens
from firewall.turns import ToolCall, Turn

INVOICE = "INV-2025-08-44719"
ORDER = "#W2378156"
PATH = "src/auth/handler.ts"

TURNS = (
    Turn("user", f"Hi, I was charged twice for invoice {INVOICE}. Can you refund the duplicate?"),
    Turn("assistant", "Sure. I will look up your order first.",
         tool_calls=(ToolCall("get_order_details", {"order_id": ORDER}, id="c1"),)),
    Turn("tool", json.dumps({"order_id": ORDER, "amount": 129.00, "status": "delivered",
                             "payment": {"method": "credit_card_9513926", "last4": "4242"}})
         .replace("129.0", "129.00"),
         tool_name="get_order_details", tool_call_id="c1"),
    Turn("assistant", "The order was paid on 2025-04-02 with the card ending 4242. "
                      "The weather in the warehouse region was mild that week, "
                      "which is irrelevant. "
                      f"The stack trace pointed at {PATH} line 88."),
    Turn("user", "Thanks. Please also check whether the refund of 129.00 EUR went through?"),
    Turn("assistant", "Checking the ledger now.",
         tool_calls=(ToolCall("lookup_refund", {"invoice_id": INVOICE, "currency": "EUR"},
                              id="c2"),)),
)


def request(turns=TURNS, required=(), attempt=1, feedback=None) -> SummaryRequest:
    req = tuple(RequiredLiteral(v, "test") if isinstance(v, str) else v for v in required)
    return SummaryRequest(turns=tuple(turns), required=req, instructions="keep literals",
                          attempt=attempt, feedback=feedback)


def reask(turns=TURNS, required=()) -> SummaryRequest:
    return request(turns, required, attempt=2, feedback="missing: " + ", ".join(required))


# -- sentence segmentation ----------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (f"Refund {INVOICE} now. Then close it.", [f"Refund {INVOICE} now.", "Then close it."]),
    ("Open src/auth/handler.ts. It fails.", ["Open src/auth/handler.ts.", "It fails."]),
    ("It costs 129.00 EUR. Pi is 3.14159 here.", ["It costs 129.00 EUR.", "Pi is 3.14159 here."]),
    ("See https://example.com/a.b?c=1.2&d=x.y now. Next one.",
     ["See https://example.com/a.b?c=1.2&d=x.y now.", "Next one."]),
    ("Use a card, e.g. Visa or Amex. Done.", ["Use a card, e.g. Visa or Amex.", "Done."]),
    ("Ask Dr. Smith about No. 5 today. Ok?", ["Ask Dr. Smith about No. 5 today.", "Ok?"]),
    ("J. R. R. Tolkien wrote it. Yes!", ["J. R. R. Tolkien wrote it.", "Yes!"]),
    ("Made in the U.S. Army base. Fine.", ["Made in the U.S. Army base.", "Fine."]),
    ("Is it v1.2.3? I think so!", ["Is it v1.2.3?", "I think so!"]),
    ("1. Cancel the order.\n2. Refund it.", ["1. Cancel the order.", "2. Refund it."]),
    ("first line\n\n  second line  ", ["first line", "second line"]),
    ("", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# -- first attempt: a plain budgeted summary ----------------------------------------------------

def test_header_speakers_and_json_tool_result():
    text = ExtractiveSummarizer(max_tokens=2_000).summarize(request()).text
    lines = text.splitlines()
    assert lines[0] == "Extractive summary of 6 turns."
    # "Sure." alone is filler: dropped even with budget to spare
    assert ("assistant: I will look up your order first. "
            f"called get_order_details(order_id={ORDER})") in lines
    # JSON is one unit, compacted; numbers keep their source text (129.00, not 129.0)
    assert ("tool get_order_details: returned order_id=#W2378156, amount=129.00, status=delivered, "
            "payment={method=credit_card_9513926, last4=4242}") in lines
    assert all(line.split(":")[0] in {"user", "assistant", "tool get_order_details"}
               for line in lines[1:])


def test_deterministic():
    a = ExtractiveSummarizer(max_tokens=80).summarize(request())
    b = ExtractiveSummarizer(max_tokens=80).summarize(request())
    assert a == b


@pytest.mark.parametrize("budget", [20, 40, 80, 150])
def test_first_attempt_stays_within_max_tokens(budget):
    summary = ExtractiveSummarizer(max_tokens=budget).summarize(request(required=[PATH, "4242"]))
    assert count_tokens(summary.text) <= budget
    assert summary.usage["output_tokens"] == count_tokens(summary.text)
    assert summary.usage["input_tokens"] > count_tokens(summary.text)
    assert summary.model == "extractive"


def test_prefers_user_requests_ids_and_actions_over_filler():
    text = ExtractiveSummarizer(max_tokens=120).summarize(request()).text
    assert f"I was charged twice for invoice {INVOICE}" in text
    assert "called lookup_refund(invoice_id=INV-2025-08-44719, currency=EUR)" in text
    assert "weather" not in text


def test_sentences_are_in_conversation_order():
    text = ExtractiveSummarizer(max_tokens=2_000).summarize(request()).text
    marks = ["charged twice", "called get_order_details", "returned order_id", "2025-04-02",
             PATH, "129.00 EUR went through", "called lookup_refund"]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)
    # a low budget drops sentences but never reorders the survivors
    short = ExtractiveSummarizer(max_tokens=60).summarize(request()).text
    kept = [short.index(m) for m in marks if m in short]
    assert len(kept) >= 2 and kept == sorted(kept)


def test_first_attempt_does_not_chase_required_literals():
    # The filler sentence is required but scores low: a plain summary drops it, so the
    # firewall's validate -> re-ask loop has real work to do.
    odd = "irrelevant"
    summary = ExtractiveSummarizer(max_tokens=60).summarize(request(required=[odd]))
    assert odd not in summary.text


def test_max_sentences_caps_the_selection():
    text = ExtractiveSummarizer(max_tokens=2_000, max_sentences=2).summarize(request()).text
    assert len(text.splitlines()) <= 3
    assert ExtractiveSummarizer(max_sentences=0).summarize(request()).text == (
        "Extractive summary of 6 turns.")


# -- re-ask: every required literal, byte-exact -------------------------------------------------

def test_reask_contains_every_required_literal_even_past_the_budget():
    required = [INVOICE, PATH, "irrelevant", "credit_card_9513926", "129.00", "2025-04-02",
                "Zürich café ☕", "a, b"]
    summary = ExtractiveSummarizer(max_tokens=25).summarize(reask(required=required))
    for value in required:
        assert value in summary.text, value
    # sentences that hold a literal are preferred; literals found nowhere go to a final line
    assert ("The weather in the warehouse region was mild that week, which is irrelevant."
            in summary.text)
    assert summary.text.splitlines()[-1] == "Literals: Zürich café ☕, a, b"
    assert count_tokens(summary.text) > 25  # correctness beats length


def test_reask_adds_key_value_line_for_a_literal_only_in_json():
    big = {"order_id": ORDER, "note": "x " * 300,
           "items": [{"item_id": str(1000000000 + i), "price": f"{i}.50"} for i in range(40)]}
    turns = (Turn("user", f"Where is {ORDER}?"),
             Turn("tool", json.dumps(big), tool_name="get_order_details"))
    summary = ExtractiveSummarizer(max_tokens=30).summarize(
        reask(turns, required=["1000000037", "39.50"]))
    lines = summary.text.splitlines()
    assert "tool get_order_details: item_id=1000000037; price=39.50" in lines
    assert "Literals" not in summary.text


def test_reask_literal_glued_to_a_longer_token_is_not_counted_as_present():
    # "4242" sits inside "42424" only: it must still be placed as a standalone string.
    turns = (Turn("user", "Card 42424 was declined."),)
    summary = ExtractiveSummarizer().summarize(reask(turns, required=["4242"]))
    assert summary.text.endswith("Literals: 4242")


def test_reask_is_a_no_op_when_nothing_is_missing():
    first = ExtractiveSummarizer().summarize(request()).text
    again = ExtractiveSummarizer().summarize(reask(required=[INVOICE])).text
    assert again == first


# -- odd input never crashes --------------------------------------------------------------------

def test_empty_conversation():
    summary = ExtractiveSummarizer().summarize(request(turns=()))
    assert summary.text == "Summary of 0 turns (extractive): nothing to summarize."
    assert summary.usage["input_tokens"] == 0
    assert INVOICE in ExtractiveSummarizer().summarize(reask((), [INVOICE])).text


def test_odd_turns():
    turns = (
        Turn("user", ""),
        Turn("assistant", "",
             tool_calls=(ToolCall("ping", {}), ToolCall("f", {"x": {"y": [1, 2]}}))),
        Turn("tool", "\udcff\udcfe\x00\x1b[31m b\xe9te \ufffd. Ok.", tool_name="ping"),
        Turn("tool", "[not json at all", tool_name=None),
        Turn("tool", "[" * 50_000 + "]" * 50_000, tool_name="deep"),
        Turn("system", "   "),
    )
    summary = ExtractiveSummarizer().summarize(request(turns))
    assert summary.text.startswith("Extractive summary of 6 turns.")
    assert "called ping()" in summary.text and "called f(x={y=[1, 2]})" in summary.text
    assert "\udcff" in ExtractiveSummarizer().summarize(reask(turns, ["\udcff\udcfe"])).text


@pytest.mark.slow
def test_huge_tool_results_cost_a_bounded_prefix(monkeypatch):
    # how fast that is, is benchmarks/' business; here: the work is bounded whatever the size
    from firewall.summarizers import extractive

    seen: dict[str, list[int]] = {"split": [], "loads": [], "count": []}

    def spy(name, func):
        def wrapper(text, *args, **kwargs):
            seen[name].append(len(text))
            return func(text, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(extractive, "split_sentences", spy("split", extractive.split_sentences))
    monkeypatch.setattr(extractive, "_loads", spy("loads", extractive._loads))
    monkeypatch.setattr(extractive, "count_tokens", spy("count", extractive.count_tokens))
    filler = '{"sku": "1234567890", "qty": 1}, '
    blob = '{"order_id": "#W9", "items": [' + filler * 1_600_000 + '{"sku": "LAST-42"}]}'
    log = "ok line 1.\n" * 4_600_000 + "tail marker ZX-99"
    assert len(blob) > 50_000_000 and len(log) > 50_000_000
    turns = (Turn("user", "Check order #W9."),
             Turn("tool", blob, tool_name="get_order_details"),
             Turn("tool", log, tool_name="tail_log"))
    first = ExtractiveSummarizer().summarize(request(turns))
    second = ExtractiveSummarizer().summarize(reask(turns, ["LAST-42", "ZX-99"]))
    assert seen["split"] and max(seen["split"]) <= extractive.SCAN_CHARS  # segmented: a prefix
    assert max(seen["loads"], default=0) <= extractive.PARSE_CHARS  # never parsed whole
    assert max(seen["count"]) <= extractive.SCAN_CHARS  # tokens counted on a prefix
    assert ("tool get_order_details: returned (52.8M chars) order_id=#W9, sku=1234567890, qty=1,"
            in first.text)
    assert "tool get_order_details: sku=LAST-42" in second.text
    assert second.text.endswith("Literals: ZX-99")  # past the scanned prefix of plain text
    assert first.usage["input_tokens"] > 10_000_000  # extrapolated from the prefix


def test_asummarize():
    summarizer = ExtractiveSummarizer()
    assert asyncio.run(summarizer.asummarize(request())) == summarizer.summarize(request())


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"max_sentences": -1}])
def test_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        ExtractiveSummarizer(**kwargs)


# -- ScriptedSummarizer -------------------------------------------------------------------------

def test_scripted_returns_outputs_in_order_and_records_calls():
    canned = Summary("third", usage={"input_tokens": 7}, model="m")
    s = ScriptedSummarizer(["first", "second", canned])
    r1, r2, r3, r4 = request(), reask(required=[PATH]), request(), request()
    assert [s.summarize(r).text for r in (r1, r2, r3, r4)] == ["first", "second", "third", "third"]
    assert s.summarize(r1) is canned
    assert s.calls == [r1, r2, r3, r4, r1]
    assert s.calls[1].feedback == f"missing: {PATH}"
    assert ScriptedSummarizer(["a b"]).summarize(r1) == Summary(
        "a b", usage={"output_tokens": 2}, model="scripted")


def test_scripted_raises_exceptions_and_runs_out_without_repeat_last():
    s = ScriptedSummarizer([SummarizerError("boom"), TimeoutError, "ok"], repeat_last=False)
    with pytest.raises(SummarizerError, match="boom"):
        s.summarize(request())
    with pytest.raises(TimeoutError):
        s.summarize(request())
    assert s.summarize(request()).text == "ok"
    with pytest.raises(SummarizerError, match="has 3 outputs and was called 4 times"):
        s.summarize(request())
    assert len(s.calls) == 4


def test_scripted_callable_sees_the_request():
    s = ScriptedSummarizer(["lost it", lambda req: f"attempt {req.attempt}: {req.feedback}",
                            lambda req: 42])
    assert s.summarize(request()).text == "lost it"
    assert s.summarize(reask(required=[INVOICE])).text == f"attempt 2: missing: {INVOICE}"
    with pytest.raises(SummarizerError, match="int"):
        s.summarize(request())


def test_scripted_async_and_validation():
    s = ScriptedSummarizer("only")  # a lone string is one output, not one per character
    assert asyncio.run(s.asummarize(request())).text == "only"
    assert s.summarize(request()).text == "only" and len(s.calls) == 2
    with pytest.raises(ValueError):
        ScriptedSummarizer([])


@pytest.mark.parametrize("argument", [
    "python -m pytest pvlib/tests/test_irradiance.py::test_sky_diffuse_zenith_close_to_90[perez] -q",
    "pvlib/tests/test_irradiance.py::test_sky_diffuse_zenith_close_to_90_in_a_very_long_node_id",
])
def test_a_clipped_value_never_holds_a_truncated_token(argument):
    # a value cut inside an ID would write a wrong, shorter one: cut between tokens, or drop it
    from firewall.compaction.plan import source_texts
    from firewall.compaction.validate import validate

    literal = argument.split()[3] if " " in argument else argument
    turns = (Turn("user", "Run the failing test."),
             Turn("assistant", "", tool_calls=(ToolCall("bash", {"command": argument}),)))
    summary = ExtractiveSummarizer().summarize(request(turns)).text
    assert "called bash(command=" in summary and len(argument) > 80
    assert validate(summary, [], known=[literal], source=list(source_texts(turns))).ok
