"""`firewall rules suggest`: misses found, grouped, proposed as rules that pass `rules test`."""

from __future__ import annotations

import argparse
import json

import pytest
import regex

from firewall.extraction.examples import failures
from firewall.extraction.extract import Extractor
from firewall.formats import read_conversations, parse_messages
from firewall.extraction.packs import Pack, load_packs, parse_pack
from firewall.authoring.suggest import (MIN_PRECISION, add_suggest_command, group_misses, load_bearing,
                              payoffs, shape_of, suggest)


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


# ── rules that pay: coding-agent conversations (bash tool, shell output) ──────────────

@pytest.fixture
def coding(fixtures):
    return list(read_conversations(fixtures / "suggest" / "coding.jsonl"))


SHELL_NOISE = ("find src -name '*.py' -type f", "git log --oneline -2",
               "read_table('x', strict=True)", "size=4127 sha256=9f86d081")


def test_coding_conversations_get_no_flag_or_key_value_rule(coding, current):
    # `-name`, `-type` and `strict=True` are retyped by the agent (so they are load-bearing
    # misses), but a rule for their shape pins every flag and setting of every command
    result = suggest(coding, current)
    for rule in result.rules:
        pattern = regex.compile(rule["pattern"])
        assert not any(pattern.search(text) for text in SHELL_NOISE), rule["pattern"]
    reasons = dict(result.skipped)
    assert reasons[r"-[a-z][a-z_]{0,8} @ command"].startswith("shell noise:")
    assert reasons[r"[a-z][a-z_]{0,20}=[A-Za-z][A-Za-z_]{0,10} @ command"].startswith(
        "shell noise:")
    # `/repo` is only ever used before any compaction point: its shape does not pay
    assert reasons[r"/[a-z][a-z_]{0,8} @ command"] == (
        "does not pay: precision 0%: 0 of the 3 strings it pins are used by a tool call after "
        "a compaction")


def test_a_recurring_id_family_is_proposed_with_its_precision(coding, current):
    # each task names its bug; the agent quotes it in the final commit. A fourth id, in one
    # `git log` listing, is never used: 3 of the 4 strings the rule pins are gold
    result = suggest(coding, current)
    assert [r["pattern"] for r in result.rules] == [r"\bBUG-\d{5}\b"]
    rule = result.rules[0]
    assert rule["keywords"] == ["BUG"]
    assert (result.payoffs[rule["id"]].gold, result.payoffs[rule["id"]].pinned) == (3, 4)
    assert "precision 75%: 3 of the 4 strings it pins" in rule["description"]
    assert "precision 75%" in result.yaml and failures([result.pack]) == []


def test_payoff_counts_what_a_rule_pins_against_the_gold(coding):
    spec = parse_pack(r"""
name: probe
version: "1"
rules:
  - {id: flag, kind: regex, pattern: '\B-[a-z][a-z_]{0,16}\b'}
  - {id: setting, kind: regex, pattern: '\w+=\w+'}
  - {id: bug, kind: regex, pattern: '\bBUG-\d{5}\b'}
""")
    pack = Pack(name=spec.name, version=spec.version, description="", rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))
    paid = payoffs(coding, pack)
    assert paid["probe/flag"].precision <= MIN_PRECISION
    assert paid["probe/setting"].precision <= MIN_PRECISION
    assert (paid["probe/bug"].gold, paid["probe/bug"].pinned) == (3, 4)
    # the same rule pins nothing gold when no tool call comes after any compaction point
    early = [parse_messages([{"role": "user", "content": "fix BUG-10001 please"},
                             {"role": "assistant", "content": "", "tool_calls": [
                                 {"name": "bash", "arguments": {"command": "echo BUG-10001"}}]}],
                            format="native")]
    assert payoffs(early, pack)["probe/bug"].pinned == 0


def test_cli_reports_each_rules_precision_and_takes_a_floor(fixtures, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="firewall")
    rules = parser.add_subparsers(dest="command").add_parser("rules")
    add_suggest_command(rules.add_subparsers(dest="rules_command"))
    argv = ["rules", "suggest", str(fixtures / "suggest" / "coding.jsonl"),
            "--rules", str(fixtures / "suggest" / "email_only.yaml"), "--only"]
    args = parser.parse_args(argv + ["--out", str(tmp_path / "a.yaml")])
    assert args.func(args) == 0
    err = capsys.readouterr().err
    assert "1 rule(s) suggested" in err
    assert "  command-3: precision 75%: 3 of the 4 strings it pins" in err
    args = parser.parse_args(argv + ["--out", str(tmp_path / "b.yaml"), "--min-precision", "0.8"])
    assert args.func(args) == 0
    assert "0 rule(s) suggested" in capsys.readouterr().err
    assert load_packs(tmp_path / "b.yaml")[0].rules == ()
    with pytest.raises(SystemExit):
        parser.parse_args(argv + ["--min-precision", "1.5"])
    assert "--min-precision: expected a share from 0 to below 1" in capsys.readouterr().err


def test_a_rule_must_pay_in_as_many_conversations_as_its_misses():
    def conversation(n: int, ids: list[str], late: bool) -> list[dict]:
        ask = {"role": "user", "content": "please look at " + " and ".join(ids)}
        calls = [{"role": "assistant", "content": "", "tool_calls": [
            {"name": "get", "arguments": {"req_id": v}, "id": f"{n}{v}"}]} for v in ids]
        filler = [{"role": "user", "content": f"and then step {i}"} for i in range(6)]
        return [ask] + (filler + calls if late else calls + filler)

    convs = [parse_messages(conversation(1, ["REQ-1234", "REQ-5678"], late=True),
                            format="native", id="late"),
             parse_messages(conversation(2, ["REQ-4321"], late=False), format="native",
                            id="early")]
    # missed in both; but only the late one is used after a compaction point: 2 of 3 pinned
    # strings are gold, all in one conversation
    result = suggest(convs, [])
    assert result.rules == []
    assert dict(result.skipped)[r"[A-Z][A-Z_]{0,6}-\d{4} @ req_id"] == (
        "pays in 1 conversation(s), fewer than 2")
    assert [r["pattern"] for r in suggest(convs, [], min_conversations=1).rules] == [
        r"\bREQ-\d{4}\b"]


def test_a_second_reading_replaces_holding_every_text(convs, current):
    # large logs: the precision pass reads the conversations again instead of keeping them
    streamed = suggest(iter(convs), current, again=lambda: iter(convs))
    assert streamed.yaml == suggest(convs, current).yaml
    assert "precision" in streamed.yaml  # the precision note was computed from the second pass
