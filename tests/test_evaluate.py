"""Replay evaluation: the gold set of DESIGN.md, recall and cost arithmetic, baselines, the CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from firewall.evaluation.evaluate import Tally, add_eval_command, budget_tokens, evaluate_cut, run
from firewall.evaluation.gold import (Gold, cut_points, gold_set, naive_ledger, naive_tokens,
                                      occurs, ranked_naive_ledger)
from firewall.literals import literal_kind
from firewall.compaction.guard import Firewall
from firewall.formats import parse_messages
from firewall.extraction.packs import load_packs
from firewall.tokens import count_tokens


def call(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"name": name, "arguments": arguments, "id": name}]}


def result(name: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": name, "name": name, "content": content}


# message 0 is the system prompt; messages 0..3 are compacted at k = 3
MESSAGES = [
    {"role": "system", "content": "Policy: escalate with code ESC-77 and the word lookup."},
    {"role": "user", "content": "Refund order #W1000, item 5000, please. Email a@b.io"},
    call("get_order", order_id="#W1000"),
    result("get_order", json.dumps({"items": [{"item_id": "5000"}, {"item_id": "12345"}],
                                    "total": 100})),
    call("refund", order_id="#W1000", item_ids=["5000", 1234], note="ok", code="ESC-77"),
    call("transfer", summary="User wants refund for 12345, order #W1000, email a@b.io, "
                             "lookup  failed (5000) 1234 twice"),
]


def conversation(messages=MESSAGES):
    return parse_messages(messages, id="c1")


def test_gold_takes_whole_values_and_tokens_of_free_text_seen_at_or_before_k():
    gold = {g.literal: g for g in gold_set(conversation(), 3)}
    # whole values (the list item 1234 is a number, taken as a string, but never seen before k;
    # "ok" is under 3 characters; ESC-77 is only in the system prompt)
    assert gold["#W1000"].mode == "value" and gold["#W1000"].used_in == 4
    assert (gold["#W1000"].first_seen, gold["#W1000"].role) == (1, "user")
    assert gold["5000"].mode == "value" and gold["5000"].arg == "item_ids"
    assert "1234" not in gold and "ok" not in gold and "ESC-77" not in gold
    # tokens of the free-text summary: 4+ characters, split on whitespace and brackets;
    # "12345," is not in the past, but "12345" without its comma is (in the tool result)
    assert gold["12345"].mode == "token" and gold["12345"].first_seen == 3
    assert gold["a@b.io"].kind == "email" and "a@b.io," not in gold
    assert "lookup" not in gold  # only in the system prompt
    assert "User" not in gold and "wants" not in gold  # never said before k
    # "#W1000," is kept with its comma where the past has it so; case matters ("Refund")
    assert list(gold) == ["#W1000", "5000", "12345", "order", "#W1000,", "a@b.io"]


def test_system_prompt_strings_are_reported_apart():
    sys_only: list[str] = []
    gold_set(conversation(), 3, sys_only)
    assert sys_only == ["ESC-77", "lookup"]


def test_a_match_glued_to_a_letter_or_digit_does_not_count():
    assert occurs("100", "total 100.")
    assert not occurs("100", "1000") and not occurs("100", "x100") and not occurs("100", "100a")
    assert occurs("100", "1000 and (100)")  # a later clean occurrence counts
    messages = [{"role": "system", "content": ""}, {"role": "user", "content": "code A1000"},
                call("f", x="1000"), call("g", x="A1000")]
    assert [g.literal for g in gold_set(parse_messages(messages), 1)] == ["A1000"]


def test_kinds_and_the_strict_and_id_like_sets():
    assert [literal_kind(x) for x in ("a.b@c.io", "$1,095.55", "10093,", "#W1845024.",
                                      "#W1845024,", "USA", "user_id", "PayPal", "PayPal.",
                                      "Street")] == [
        "email", "numeric", "numeric", "alnum_code", "other", "alnum_code", "identifier",
        "identifier", "other", "other"]
    token = Gold("refund", "token", "other", 5, "t", "summary", 1, "user")
    value = Gold("Austin", "value", "other", 5, "t", "city", 1, "user")
    code = Gold("#W1000", "token", "alnum_code", 5, "t", "summary", 1, "user")
    assert not token.strict and value.strict and not value.id_like and code.id_like


def test_coding_kinds_agree_with_the_reference_gold_of_the_dev_data():
    # the shapes on which eval's gold disagreed with the reference gold files shipped with the
    # dev data (paths, dotted and underscore names, flags' numbers, times, trailing colons)
    cases = {"src/marshmallow/fields.py": "path", "/testbed": "path", "patch.txt": "path",
             "#!/usr/bin/env": "path", "*.py": "other", "fields.String": "identifier",
             "_invoke_validators": "identifier", "__init__": "identifier", "test_": "identifier",
             "KEY_A": "identifier", ".__name__": "other", "-100": "numeric",
             "15:27:29,744": "numeric", "359:": "numeric", "1.2.840.10008": "numeric",
             "+$6.32": "other", "np.float64": "alnum_code", "L031:": "alnum_code",
             "-A10": "alnum_code", "PASSED:": "other", "SELECT": "alnum_code",
             "51f552ce": "uuid_hex"}
    assert {text: literal_kind(text) for text in cases} == cases


def test_a_shell_command_is_free_text_at_any_length():
    messages = [{"role": "system", "content": ""},
                {"role": "user", "content": "the bug is in patch.txt"},
                call("bash", command="cat patch.txt"), call("lookup", query="cat patch.txt")]
    gold = {(g.arg, g.literal): g.mode for g in gold_set(parse_messages(messages), 1)}
    assert gold == {("command", "patch.txt"): "token"}  # a 2-word query is a whole value


def test_an_end_of_punctuation_joins_anything():
    # only an end that is a letter or digit must stand apart
    assert occurs(".format", "s.format(x)") and occurs("data=", "load(data=data)")
    assert not occurs("format", "s.formatted") and not occurs("=data", "x=datum")


def test_cut_points_floor_and_skip_empty_cuts():
    assert cut_points(19, (0.25, 0.5, 0.75)) == [(0.25, 4), (0.5, 9), (0.75, 14)]
    assert cut_points(3, (0.25, 0.75)) == []  # k = 0 compacts nothing, k = 2 leaves no future


@pytest.fixture(scope="module")
def firewall():
    return Firewall(load_packs())


def test_one_cut_measures_ledger_baselines_and_oracle(firewall):
    cut = evaluate_cut(conversation(), 3, firewall=firewall, budget=2000, keep_last=1)
    gold = [g.literal for g in cut.gold]
    assert cut.span_tokens > 0
    # the user message alone holds the order, item and email; the last message holds 12345
    assert cut.hits("user") == [g in MESSAGES[1]["content"] for g in gold]
    assert cut.hits("tail") == [occurs(g, MESSAGES[3]["content"]) for g in gold]
    assert all(cut.hits("oracle"))
    assert cut.hits("ledger")[:3] == [True, True, True]  # #W1000, 5000, 12345 are pinned
    text, tokens = cut.contexts["ledger"]
    assert tokens == count_tokens(text.split("\n<<<end")[0] + text[text.index("\n<<<end"):]) \
        or tokens <= count_tokens(text)
    assert cut.contexts["user"][1] == count_tokens(MESSAGES[1]["content"])


def test_the_naive_ledger_pins_every_token_with_a_digit_slash_or_at():
    turns = conversation().turns[1:4]
    # the user message's tokens, then the call's argument, then the tool result's (split on
    # brackets too); words, "ok" and the 3-character "100" are not pinned; a repeat is written
    # once
    assert naive_ledger(turns).split(" ") == [
        "#W1000,", "5000,", "a@b.io", "#W1000", "5000", "12345"]


def test_eval_reports_the_naive_baseline(firewall):
    cut = evaluate_cut(conversation(), 3, firewall=firewall, budget=2000, keep_last=1)
    text, tokens = cut.contexts["naive"]
    assert text == naive_ledger(conversation().turns[1:4]) and tokens == count_tokens(text)
    assert cut.hits("naive") == [occurs(g.literal, text) for g in cut.gold]


def test_the_ranked_naive_ledger_keeps_typed_then_called_then_frequent_tokens_within_budget():
    """The budgeted floor: the naive ledger's tokens, best first by four signals, cut at the
    ledger's cost."""
    turns = parse_messages([
        {"role": "tool", "content": "rows 0001/a 0002/b 0003/c again 0003/c"},
        {"role": "user", "content": "open ticket T-4471"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "1", "name": "read", "arguments": {"path": "0002/b"}}]},
        {"role": "tool", "content": "done 0004/d"},
    ]).turns
    every = ranked_naive_ledger(naive_tokens(turns), 10 ** 6, count_tokens).split(" ")
    # typed by the user, then used in a call, then seen twice, then latest first
    assert every == ["T-4471", "0002/b", "0003/c", "0004/d", "0001/a"]
    budget = count_tokens(" T-4471") + count_tokens(" 0002/b")
    assert ranked_naive_ledger(naive_tokens(turns), budget, count_tokens) == "T-4471 0002/b"
    assert ranked_naive_ledger(naive_tokens(turns), 0, count_tokens) == ""


def test_eval_measures_the_ranked_baseline_at_the_ledgers_cost(firewall):
    cut = evaluate_cut(conversation(), 3, firewall=firewall, budget=2000, keep_last=1)
    text, tokens = cut.contexts["ranked"]
    assert tokens <= cut.contexts["ledger"][1]
    assert set(text.split()) <= set(naive_ledger(conversation().turns[1:4]).split())


def test_a_percentage_budget_is_a_share_of_the_span(firewall):
    assert budget_tokens("5%", 2000) == 100 and budget_tokens(300, 2000) == 300
    tight = evaluate_cut(conversation(), 3, firewall=firewall, budget="0%", keep_last=1)
    assert tight.literals == []  # nothing fits a zero budget: every entry evicted


def test_tally_micro_averages_recall_and_reports_median_and_total_cost():
    tally = Tally()
    strict = Gold("#W10", "value", "alnum_code", 0, "t", "a", 0, "user")
    loose = Gold("word", "token", "other", 0, "t", "a", 0, "user")
    tally.add([strict, loose], [True, False], tokens=2_000, span=20_000)
    tally.add([strict], [False], tokens=6_000, span=20_000)
    tally.add([], [], tokens=200, span=200_000)
    summary = tally.summary()
    assert summary["recall"] == {"id_like": 0.5, "strict": 0.5, "all": 1 / 3, "address": None}
    assert summary["n"] == {"id_like": 2, "strict": 2, "all": 3, "address": 0}
    assert summary["cost_median"] == pytest.approx(0.1)
    assert summary["cost_total"] == pytest.approx(8_200 / 240_000)


# A coding session: the agent reads a listing, then opens one file by path, runs a command on
# another, and writes a file whose body re-types a CSS class and a path it saw.
CODING = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the banner colour in src/ui/Banner.tsx; logs are in "
                                "logs/build_2024.log. Use bg-red-500/10."},
    call("Glob", pattern="src/**/*.tsx"),
    result("Glob", "src/ui/Banner.tsx\nsrc/ui/Footer.tsx\nsrc/api/v2/client.ts"),
    call("Write", file_path="notes/plan.md",
         content="Change src/api/v2/client.ts later.\nclassName bg-red-500/10 on Banner"),
    call("Read", file_path="src/ui/Banner.tsx"),
    call("Bash", command="tail -n 50 logs/build_2024.log", description="see logs/build_2024.log"),
    call("TaskOutput", task_id="task_77a1"),
]


def test_addressing_gold_names_a_target_and_text_the_agent_writes_does_not():
    from firewall.evaluation.gold import is_addressing

    gold = {g.literal: g for g in gold_set(parse_messages(CODING, id="c"), 3)}
    # a path opened by file_path, a command's token: addressing
    assert gold["src/ui/Banner.tsx"].addresses and gold["logs/build_2024.log"].addresses
    # first used inside a written file body and never as a target: not addressing
    assert gold["src/api/v2/client.ts"].id_like and not gold["src/api/v2/client.ts"].addresses
    assert not gold["bg-red-500/10"].addresses
    assert all(is_addressing(a) for a in ("file_path", "command", "pattern", "url", "order_id",
                                          "item_ids", "tabId", "workflow_name", "edits.path"))
    assert not any(is_addressing(a) for a in ("content", "new_string", "old_string",
                                              "description", "prompt", "activeForm", "valid"))


def test_gold_first_written_then_opened_is_addressing():
    messages = CODING[:5] + [call("Edit", file_path="src/api/v2/client.ts",
                                  old_string="a", new_string="b")]
    gold = {g.literal: g for g in gold_set(parse_messages(messages, id="c"), 3)}
    first = gold["src/api/v2/client.ts"]
    assert first.arg == "content" and first.addresses  # its first use wrote it, the next opens it


def test_extracted_measures_what_any_rule_took_before_the_budget(firewall):
    """The extracted context holds every value the packs took from the span, whatever the
    budget kept: with nothing pinned, extraction still shows the gold it found."""
    conv = parse_messages(CODING, id="c")
    cut = evaluate_cut(conv, 3, firewall=firewall, budget="0%", keep_last=1)
    assert cut.literals == []
    gold = [g.literal for g in cut.gold]
    hits = dict(zip(gold, cut.hits("extracted")))
    assert hits["src/ui/Banner.tsx"] and hits["logs/build_2024.log"]
    assert not any(cut.hits("ledger"))
    wide = evaluate_cut(conv, 3, firewall=firewall, budget=4000, keep_last=1)
    assert wide.hits("extracted") == cut.hits("extracted")  # the budget does not change it


def test_the_report_shows_addressing_and_extracted_columns(tmp_path):
    from firewall.evaluation.evaluate import format_report

    data = tmp_path / "code.jsonl"
    write_jsonl(data, [("c", CODING)])
    result = run([data], fractions=[0.5])
    table = format_report(result)
    head = table.splitlines()[0]
    assert "| address | ledger addr |" in head and "| extracted ID |" in head
    assert "extracted addr" in head
    everything = next(g for g in result["groups"] if g["source"] == "all")
    assert everything["extracted"]["n"]["address"] == everything["ledger"]["n"]["address"] > 0


def test_cost_is_a_share_of_spans_of_16k_tokens_and_absolute_tokens_below():
    tally = Tally()
    tally.add([], [], tokens=250, span=1_500)  # a support chat nobody compacts
    tally.add([], [], tokens=350, span=2_000)
    summary = tally.summary()
    assert summary["cost_total"] is None and summary["cost_median"] is None
    assert summary["short_cuts"] == 2 and summary["tokens_short_median"] == 300
    tally.add([], [], tokens=480, span=16_000)
    summary = tally.summary()
    assert summary["cost_total"] == pytest.approx(0.03) and summary["cost_cuts"] == 1
    assert summary["tokens"] == 480 and summary["span_tokens"] == 16_000


def write_jsonl(path, conversations):
    path.write_text("".join(json.dumps({"id": cid, "messages": m}) + "\n"
                            for cid, m in conversations), encoding="utf-8")


def test_run_groups_by_source_and_fraction_and_writes_ledgers(tmp_path):
    data = tmp_path / "shop.jsonl"
    write_jsonl(data, [("c1", MESSAGES), ("c2", MESSAGES[:1] + MESSAGES[1:])])
    out = tmp_path / "ledgers.jsonl"
    seen = []
    with out.open("w", encoding="utf-8") as handle:
        result = run([data], fractions=[0.5], ledgers=handle, progress=seen.append)
    assert result["conversations"] == 2 and result["cuts"] == 2
    groups = {(g["source"], g["frac"]) for g in result["groups"]}
    assert groups == {("shop", "50%"), ("shop", "all"), ("all", "all")}
    assert len(seen) == 2 and "2 cut(s)" in seen[-1]
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["k"]) for r in lines] == [("c1", 3), ("c2", 3)]
    assert set(lines[0]) >= {"id", "k", "literals", "ledger_tokens", "span_tokens",
                             "archived", "archive"}
    assert "#W1000" in lines[0]["archived"]
    assert "#W1000" in lines[0]["literals"] and lines[0]["ledger_tokens"] > 0


def test_cli_handler_prints_a_table_or_json(tmp_path, capsys):
    data = tmp_path / "shop.jsonl"
    write_jsonl(data, [("c1", MESSAGES)])
    parser = argparse.ArgumentParser()
    add_eval_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", str(data), "--at", "0.5", "--budget", "5%",
                              "--ledgers", str(tmp_path / "l.jsonl"), "--json"])
    assert args.func(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["budget"] == "5%" and result["cuts"] == 1
    assert (tmp_path / "l.jsonl").read_text(encoding="utf-8").count("\n") == 1
    args = parser.parse_args(["eval", str(data), "--at", "0.5", "--keep-last", "2"])
    assert args.func(args) == 0
    table = capsys.readouterr().out
    assert table.startswith("| source |") and "+last2 ID" in table and "| shop | 50% |" in table
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", str(data), "--at", "1.5"])


def test_eval_measures_the_agents_own_compactions_of_a_session_file(capsys):
    """At each compaction Claude Code made, the gold is judged against its own summary, then
    against that summary with the ledger after it: the measure of a wrapped harness."""
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "transcripts" / "claude_code_compacted.jsonl"
    result = run([path], fractions=[0.5])
    agent = next(g for g in result["groups"] if g["frac"] == "agent")
    assert agent["cuts"] == 2  # the file's two compact_boundary entries
    # the fixture's summaries name no file, invoice or key: only the ledger brings them back
    assert agent["agent"]["n"]["id_like"] == 9 and agent["agent"]["hits"]["id_like"] == 0
    assert agent["agent+ledger"]["recall"]["id_like"] == 1.0
    assert agent["agent+ledger"]["hits"]["strict"] >= agent["ledger"]["hits"]["strict"]
    assert "agent" not in next(g for g in result["groups"] if g["frac"] == "50%")
    parser = argparse.ArgumentParser()
    add_eval_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", str(path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "| claude_code_compacted | 2 | 9 | 13 | 0.0 | 0.0 | 100.0 |" in out


# ── the archive's three shares and recall quality (issue 27) ────────────────────────────────

def test_the_archive_splits_the_id_like_gold_in_three(firewall):
    from firewall.evaluation.archive_eval import ArchiveShares
    from firewall.evaluation.evaluate import CutScore

    roomy = evaluate_cut(conversation(), 3, firewall=firewall, budget=2000, keep_last=0)
    shares, archived = roomy.archive
    id_like = [g for g in roomy.gold if g.id_like]
    assert shares.gold == len(id_like) > 0
    assert shares.in_context + shares.one_call + shares.lost == shares.gold
    assert {"#W1000", "12345"} <= set(archived)
    # a budget of nothing: the block holds nothing, and what the span held is one call away
    starved = evaluate_cut(conversation(), 3, firewall=firewall, budget=1, keep_last=0)
    tight = starved.archive[0]
    assert tight.in_context < shares.in_context and tight.one_call > 0
    assert tight.fragment_queries == tight.one_call
    assert tight.fragment_top5 == tight.fragment_queries  # a tiny archive: found every time
    line = CutScore.of(starved).ledger
    assert line["archive"] == tight.counts() and line["archived"] == starved.archive[1]
    total = ArchiveShares()
    total.add(line["archive"])
    total.add(tight)
    assert total.summary()["share_one_call"] == tight.one_call / tight.gold


def test_a_gold_token_with_its_sentences_punctuation_is_held_by_the_rules_bare_literal():
    """The sweep archives no ``1809,`` where a rule extracted ``1809`` (``archive.bare``):
    the gold ``1809,`` is one call away by that literal, and its recall counts that hit."""
    from firewall.evaluation.archive_eval import archived_by, measure_cut
    from firewall.evaluation.gold import Gold
    from firewall.literals import Literal
    from firewall.turns import Turn

    assert archived_by("1809,", "1809", "") == "rule"
    assert archived_by("1809,", "18090", "1809,") == "token"  # as written first
    assert archived_by("src/..", "src/", "") is None and archived_by("1809,", "", "") is None
    text = "Read lines 1809, to the end of src/app/models.py"
    turns = [Turn(role="user", text=text), Turn(role="assistant", text="ok")]
    literal = Literal("1809", "core/number", 0, "user", 11, 15)
    gold = Gold("1809,", "token", "numeric", 1, "Bash", "command", 0, "user", True)
    shares, values = measure_cut(turns, [literal], [gold], context="", span=[0])
    assert "1809," not in values and "1809" in values
    assert (shares.one_call, shares.one_call_token, shares.lost) == (1, 0, 0)
    assert (shares.fragment_top5, shares.fragment_queries) == (1, 1)


def test_an_agent_half_remembering_asks_for_a_fragment_or_context_words():
    from firewall.audit.archive import ArchiveEntry
    from firewall.evaluation.archive_eval import context_words, fragment

    assert fragment("src/app/models.py") == "models.py"
    assert fragment("get_user_record") == "record"
    assert fragment("a1b2c3d4e5f6") == "a1b2c3"
    entry = ArchiveEntry("src/app/models.py", "0" * 64, "path", "r", "tool", 1, 1, 1,
                         "Edited src/app/models.py: the cache warms slowly", False, None)
    assert context_words(entry) == ["Edited", "cache", "slowly"]  # the longest, in order


def test_the_report_shows_the_archive_shares(tmp_path, capsys):
    data = tmp_path / "shop.jsonl"
    write_jsonl(data, [("c1", MESSAGES)])
    result = run([data], fractions=[0.5], budget=1, keep_last=0)
    (total,) = [r for r in result["archive"] if (r["source"], r["frac"]) == ("all", "all")]
    assert total["shares"]["one_call"] > 0
    from firewall.evaluation.evaluate import format_report

    result["tokens"] = "estimate"
    assert "one call away" in format_report(result)
