"""`firewall rules suggest`: misses found, grouped, proposed as rules that pass `rules test`."""

from __future__ import annotations

import argparse
import json

import pytest
import regex

from firewall.examples import failures
from firewall.extract import Extractor
from firewall.formats import read_conversations, parse_messages
from firewall.packs import load_packs, parse_pack
from firewall.suggest import add_suggest_command, group_misses, load_bearing, shape_of, suggest


@pytest.fixture
def convs(fixtures):
    return list(read_conversations(fixtures / "suggest" / "support.jsonl"))


@pytest.fixture
def current(fixtures):
    return load_packs(fixtures / "suggest" / "email_only.yaml")


def test_load_bearing_finds_the_misses_and_skips_what_rules_caught(convs, current):
    uses, misses = load_bearing(convs[0], Extractor(current))
    used = {(u.literal, u.arg) for u in uses}
    # 'blue' is a plain word in a non-identifier argument; 2 is shorter than 4 characters
    assert used == {("ana.lee@example.com", "email"), ("acct_55120934", "account_id"),
                    ("KB-20431", "ticket_id"), ("4417093321", "sku")}
    missed = {u.literal: u for u in misses}
    assert set(missed) == {"acct_55120934", "KB-20431", "4417093321"}  # the email was caught
    assert missed["KB-20431"].first_role == "user" and missed["KB-20431"].source_key is None
    assert missed["4417093321"].source_key == "sku_code"  # sat under a JSON key of a result
    assert missed["acct_55120934"].first_turn == 3


def test_the_system_prompt_is_not_a_first_appearance():
    conv = parse_messages([
        {"role": "system", "content": "ids look like KB-12345"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "t", "arguments": {"ticket_id": "KB-12345"}}]}], format="native")
    assert load_bearing(conv, Extractor([])) == ([], [])


def test_free_text_arguments_are_split_into_tokens():
    conv = parse_messages([
        {"role": "user", "content": "refund order R-88123 please"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "transfer", "arguments": {
            "summary": "The user wants a refund for order R-88123 (damaged) and nothing else."}}]}],
        format="native")
    uses, misses = load_bearing(conv, Extractor([]))
    assert [(u.literal, u.arg) for u in misses] == [("R-88123", "summary")]


def test_shapes_group_by_argument_and_skeleton(convs, current):
    extractor = Extractor(current)
    misses = [m for c in convs for m in load_bearing(c, extractor)[1]]
    groups = group_misses(misses)
    assert [(g.arg, g.skeleton, g.literals) for g in groups] == [
        ("account_id", r"[a-z][a-z_]{0,8}_\d{8}", ["acct_10293847", "acct_55120934"]),
        ("sku", r"\d{10}", ["4417093321", "9080706050"]),
        ("ticket_id", r"[A-Z][A-Z_]{0,4}-\d{5}", ["KB-20431", "KB-77120"]),
    ]
    assert shape_of("#W2378156") == (("o", "#"), ("u", ""), ("d", ""))
    assert shape_of("credit_card_8897086") == shape_of("paypal_3024827")


def test_suggested_rules_pass_rules_test_and_raise_recall(convs, current):
    result = suggest(convs, current)
    by_id = {r["id"]: r for r in result.rules}
    assert set(by_id) == {"account-id", "sku", "ticket-id"} and result.dropped == []
    # a stable prefix stays literal and becomes a keyword; anchors are lookaround-free
    assert by_id["ticket-id"]["pattern"] == r"\bKB-\d{5}\b"
    assert by_id["ticket-id"]["keywords"] == ["KB"]
    assert by_id["account-id"]["pattern"] == r"\bacct_\d{8}\b"
    # a bare 10-digit number is too generic for text: a json_key rule on the key it came from
    assert by_id["sku"]["kind"] == "json_key" and by_id["sku"]["keys"] == ["sku_code"]
    assert by_id["sku"]["value_pattern"] == r"\d{10}"
    for rule in by_id.values():
        assert rule["examples"]["match"] and rule["examples"]["no_match"]
    negatives = by_id["ticket-id"]["examples"]["no_match"]
    assert "and I need help with ticket KB-204317." in negatives  # one digit too many

    # the YAML passes strict parsing (regexes single-quoted) and every example passes
    assert "pattern: '\\bKB-\\d{5}\\b'" in result.yaml
    spec = parse_pack(result.yaml)
    assert [r.id for r in spec.rules] == ["account-id", "sku", "ticket-id"]
    assert failures([result.pack]) == []

    # added to the current packs, extraction now finds every literal it missed, where it
    # first appeared (so it survives a compaction right after that turn)
    extractor = Extractor(current + [result.pack])
    assert all(load_bearing(c, extractor)[1] == [] for c in convs)
    first = extractor.scan(convs[0].turns[:2]).literals
    assert "KB-20431" in {lit.value for lit in first}


def test_output_is_deterministic_and_respects_min_conversations(convs, current):
    assert suggest(convs, current).yaml == suggest(list(reversed(convs)), current).yaml
    one = suggest(convs[:1], current)
    assert one.rules == [] and len(one.skipped) == 3
    assert all("fewer than 2" in reason for _, reason in one.skipped)
    assert [r["id"] for r in suggest(convs[:1], current, min_conversations=1).rules] == [
        "account-id", "sku", "ticket-id"]


def test_generic_shape_without_key_or_context_gets_no_rule():
    messages = lambda n, v: [  # noqa: E731
        {"role": "user", "content": f"it is {v} ok"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "arguments": {
            "ref_id": v}}]}]
    convs = [parse_messages(messages(n, v), format="native", id=str(n))
             for n, v in enumerate(["73910", "55121"])]
    result = suggest(convs, [])
    assert result.rules == []
    assert result.skipped == [(r"\d{5} @ ref_id",
                               "a generic shape with no common JSON key or context word")]


def test_generated_patterns_are_linear(convs, current):
    nested = regex.compile(r"\)[*+]|\)\{\d+,\d*\}|[+*]\)[*+{]")
    for rule in suggest(convs, current).rules:
        for source in (rule.get("pattern"), rule.get("value_pattern")):
            if source:
                assert not nested.search(source) and "+" not in source and "*" not in source


def test_cli_writes_a_pack_that_rules_test_accepts(fixtures, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="firewall")
    rules = parser.add_subparsers(dest="command").add_parser("rules")
    add_suggest_command(rules.add_subparsers(dest="rules_command"))
    out = tmp_path / "suggested.yaml"
    args = parser.parse_args(["rules", "suggest", str(fixtures / "suggest" / "support.jsonl"),
                              "--rules", str(fixtures / "suggest" / "email_only.yaml"), "--only",
                              "--out", str(out), "--name", "support"])
    assert args.func(args) == 0
    assert "8 load-bearing literal use(s), 6 missed" in capsys.readouterr().err
    pack = load_packs(out, strict=True)[0]  # strict: every example runs
    assert pack.name == "support" and len(pack.rules) == 3
    assert json.loads(pack.rules[1].examples.match[0].text) == {"sku_code": "4417093321"}


def test_a_second_reading_replaces_holding_every_text(convs, current):
    # large logs: the precision pass reads the conversations again instead of keeping them
    streamed = suggest(iter(convs), current, again=lambda: iter(convs))
    assert streamed.yaml == suggest(convs, current).yaml
    assert "Matches" in streamed.yaml  # the precision note was computed from the second pass
