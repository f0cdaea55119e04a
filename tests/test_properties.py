"""Property tests: the loaders fail only with their documented error, extraction and validation
never raise and report offsets that slice to what they claim, and the ledger gives back every
value it was given.

Inputs that crashed the loaders once (unhashable message ids, non-string text blocks, nesting
deeper than the recursion limit, non-decimal digits in checksums) are in the strategies, and each
also has a regression test at the end of this file.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from firewall.errors import ConversationError, PackError
from firewall.extraction.extract import Extractor
from firewall.json_values import json_leaves as _json_leaves
from firewall.formats import FORMATS, parse_messages, read_conversations
from firewall.compaction.ledger import Ledger, find_blocks
from firewall.literals import Literal
from firewall.extraction.packs import Pack, load_packs, parse_pack
from firewall.turns import ToolCall, Turn
from firewall.compaction.validate import validate

ROOT = Path(__file__).resolve().parent.parent
PROPS = settings(max_examples=100, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def test_property_tests_draw_the_same_examples_on_every_run():
    # derandomized by the suite's profile (conftest.py): a failure reproduces anywhere
    assert settings.default.derandomize and PROPS.derandomize


def _harness(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "fuzz" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def builtin_extractor() -> Extractor:
    return Extractor(load_packs(), timeout=0.2)


@pytest.fixture(scope="module")
def builtin_firewall() -> Any:
    from firewall.compaction.guard import Firewall

    return Firewall(load_packs(), audit=None)


# ── packs ───────────────────────────────────────────────────────────────────────────────────

def to_yaml(node: Any) -> str:
    """Flow-style YAML with every string single-quoted, so regexes keep their backslashes and
    the loader accepts them (yaml.safe_dump would double-quote some and be rejected)."""
    if isinstance(node, str):
        return "'" + node.replace("'", "''") + "'"
    if node is None:
        return "null"
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, int):
        return str(node)
    if isinstance(node, float):
        return ".nan" if math.isnan(node) else (".inf" if node > 0 else "-.inf") \
            if math.isinf(node) else repr(node)
    if isinstance(node, list):
        return "[" + ", ".join(to_yaml(v) for v in node) + "]"
    if isinstance(node, dict):
        return "{" + ", ".join(f"{to_yaml(k)}: {to_yaml(v)}" for k, v in node.items()) + "}"
    raise TypeError(node)


VALID_PACK: dict[str, Any] = {
    "name": "props",
    "version": "1",
    "description": "one rule of each kind",
    "defaults": {"priority": 70, "roles": ["user", "tool", "assistant"]},
    "rules": [
        {"id": "invoice", "kind": "regex", "pattern": r"\b(?P<literal>INV-\d{4}-\d{2}-\d{5})\b",
         "keywords": ["inv"], "severity": "required",
         "examples": {"match": [{"text": "see INV-2025-08-44719.",
                                 "literals": ["INV-2025-08-44719"]}],
                      "no_match": ["INV-25-17"]}},
        {"id": "card", "kind": "regex", "pattern": r"\b\d{4}(?: ?\d{4}){3}\b", "checksum": "luhn",
         "sensitive": True, "flags": ["multiline"]},
        {"id": "order", "kind": "json_key", "keys": ["order_id", "*_ids"],
         "value_pattern": r"[#\w-]+", "allowlist": {"values": ["none"], "patterns": ["x+"]}},
        {"id": "product", "kind": "terms", "terms": ["Widget Pro", "Gizmo"], "ignore_case": True,
         "whole_word": False},
        {"id": "people", "kind": "entity", "labels": ["PERSON"], "optional": True},
    ],
}

yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12),
    st.sampled_from(["regex", "json_key", "terms", "entity", "required", "pin", "user", "tool",
                     "luhn", "crc", "(", "[a-", r"\b", "a{2,1}", "(?P<literal>x)", "*", "",
                     "verbose", "ignorecase", "core", "../x.yaml", "INV-1"]),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "kind", "pattern", "keys", "terms", "labels", "rules", "match",
                         "text", "literals", "pack", "disable", "x", "flags"]) | st.text(max_size=4),
        c, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, path + (i,))
    return out


@st.composite
def mutated_packs(draw) -> dict[str, Any]:
    pack = json.loads(json.dumps(VALID_PACK))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(pack)))
        if not path:
            continue
        parent = pack
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        op = draw(st.sampled_from(["replace", "delete", "insert", "duplicate"]))
        if op == "replace":
            parent[last] = draw(yaml_values)
        elif op == "delete":
            del parent[last]
        elif op == "insert" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(yaml_values)
        elif op == "insert":
            parent.insert(last, draw(yaml_values))
        elif isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[last])))
    return pack


YAML_BITS = ["name: p\n", "version: '1'\n", "rules:\n", "  - id: r\n", "    kind: regex\n",
             "    pattern: '\\d+'\n", "    pattern: \"\\d+\"\n", "    pattern: \\d+ #x\n",
             "    keys: [a]\n", "    terms: [t]\n", "extends: [core]\n", "defaults: {}\n",
             "&a ", "*a", "!!binary ", "!!python/object:os.system ", "? ", "<<: ", "{", "}",
             "[", "]", ", ", ": ", "- ", "|\n", ">\n", "'", '"', "#", "\t", "\n", "  ", "~",
             "\x00", "\ufeff", "…", "%YAML 1.1\n", "---\n", "...\n"]


@PROPS
@given(st.lists(st.one_of(st.sampled_from(YAML_BITS), st.text(max_size=6)), max_size=25)
       .map("".join))
def test_pack_loading_raises_only_pack_error_on_yamlish_text(text):
    harness = _harness_cache("fuzz_packs")
    try:
        pack = harness.load_text(text)
    except PackError as exc:
        assert str(exc)  # says something
    else:
        assert isinstance(pack, Pack)


@PROPS
@given(mutated_packs())
def test_pack_loading_raises_only_pack_error_on_mutated_packs(pack):
    harness = _harness_cache("fuzz_packs")
    try:
        loaded = harness.load_text(to_yaml(pack))
    except PackError as exc:
        message = str(exc)  # names the file, or (compile-stage errors) the pack and rule
        assert message.startswith("<fuzz>") or message.startswith("pack '")
    else:
        assert [r.id for r in loaded.rules] == [r["id"] for r in pack.get("rules") or []]


def test_unmutated_pack_loads_with_every_rule():
    pack = _harness_cache("fuzz_packs").load_text(to_yaml(VALID_PACK))
    assert [r.kind for r in pack.rules] == ["regex", "regex", "json_key", "terms", "entity"]
    assert pack.rules[0].pattern == VALID_PACK["rules"][0]["pattern"]  # backslashes intact
    assert pack.rules[0].priority == 70 and pack.rules[1].sensitive


_HARNESSES: dict[str, Any] = {}


def _harness_cache(name: str) -> Any:
    if name not in _HARNESSES:
        _HARNESSES[name] = _harness(name)
    return _HARNESSES[name]


# ── conversations ───────────────────────────────────────────────────────────────────────────

ID_KEYS = {"id", "tool_call_id", "tool_use_id"}
NO_GENERIC_KEYS = ID_KEYS  # ids come from `ids` below
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=False), st.text(max_size=10))
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.text(max_size=5).filter(lambda k: k not in NO_GENERIC_KEYS), c, max_size=3),
    max_leaves=8)
ids = st.one_of(st.none(), st.text(max_size=4), st.integers(0, 9), st.lists(st.integers(), max_size=2))
text_blocks = st.lists(st.one_of(
    st.text(max_size=8),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "thinking"]),
                           "text": st.one_of(st.none(), st.text(max_size=10), json_scalars)}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": ids,
                           "name": st.one_of(st.text(max_size=5), json_values),
                           "input": json_values}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": ids,
                           "content": json_values}),
    json_values), max_size=3)
tool_calls = st.lists(st.one_of(
    st.fixed_dictionaries({"id": ids, "type": st.just("function"), "function": st.one_of(
        json_values, st.fixed_dictionaries({"name": st.text(max_size=5), "arguments": st.one_of(
            json_values, json_values.map(json.dumps), st.text(max_size=10))}))}),
    st.fixed_dictionaries({"id": ids, "name": st.one_of(st.text(max_size=5), json_values),
                           "arguments": json_values}),
    json_values), max_size=2)
messages = st.lists(st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "developer", "bot"])},
        optional={"content": st.one_of(json_values, text_blocks), "tool_calls": tool_calls,
                  "tool_call_id": ids, "name": st.one_of(st.text(max_size=4), st.none())}),
    json_values), max_size=5)


@PROPS
@given(st.one_of(messages, json_values), st.sampled_from([None, *FORMATS]))
def test_parse_messages_raises_only_conversation_error(doc, fmt):
    try:
        conversation = parse_messages(doc, format=fmt)
    except ConversationError as exc:
        assert str(exc)
    else:
        assert len(conversation.turns) == len(doc)
        assert all(isinstance(t.text, str) for t in conversation.turns)


JSONL_BITS = [b'{"messages": ', b'[', b']', b'{', b'}', b'"role": "user"', b'"content": ',
              b'"tool_calls": [', b', ', b'\n', b'"x"', b'null', b'1e999', b'NaN', b'\xff',
              b'\xef\xbb\xbf', b'\x00', b' ', b'"\\ud800"', b'"id": 5']


@PROPS
@given(st.one_of(
    st.binary(max_size=200),
    st.lists(st.sampled_from(JSONL_BITS), max_size=30).map(b"".join),
    st.lists(st.one_of(messages, st.fixed_dictionaries({"messages": messages},
                                                       optional={"id": json_values,
                                                                 "meta": json_values,
                                                                 "system": json_values})),
             min_size=1, max_size=3)
    .map(lambda docs: b"\n".join(json.dumps(d).encode() for d in docs)),
))
@pytest.mark.slow
def test_read_conversations_raises_only_conversation_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("conv") / "input.jsonl"
    path.write_bytes(data)
    try:
        conversations = list(read_conversations(path))
    except ConversationError as exc:
        assert str(path) in str(exc)  # names the file
    else:
        assert conversations  # an empty file is an error, so anything read yields something


def test_fuzz_harnesses_accept_a_corpus_of_random_bytes():
    """CI without atheris: each harness over ~200 inputs, random bytes and byte-level
    mutations of its seeds (what a short fuzz run starts from)."""
    rng = random.Random(20250811)
    for name, seeds in (("fuzz_packs", "SEED_PACKS"), ("fuzz_conversations",
                                                       "SEED_CONVERSATIONS")):
        harness = _harness_cache(name)
        corpus = [s.encode() if isinstance(s, str) else s for s in getattr(harness, seeds)]
        inputs = list(corpus)
        for _ in range(100):
            inputs.append(rng.randbytes(rng.randrange(0, 300)))
        for _ in range(100):
            data = bytearray(rng.choice(corpus))
            for _ in range(rng.randrange(1, 8)):
                at = rng.randrange(len(data))
                op = rng.randrange(3)
                if op == 0:
                    data[at] = rng.randrange(256)
                elif op == 1:
                    del data[at:at + rng.randrange(1, 20)]
                else:
                    data[at:at] = rng.choice(corpus)[:rng.randrange(1, 40)]
            inputs.append(bytes(data))
        for data in inputs:
            harness.TestOneInput(data)


@pytest.mark.skipif(not os.environ.get("FIREWALL_FUZZ"), reason="set FIREWALL_FUZZ=1")
@pytest.mark.parametrize("name", ["fuzz_packs", "fuzz_conversations"])
def test_short_real_fuzz_run(name, tmp_path):
    pytest.importorskip("atheris")
    seconds = os.environ.get("FIREWALL_FUZZ_SECONDS", "30")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    run = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / f"{name}.py"), str(corpus),
         f"-max_total_time={seconds}", "-max_len=4096", f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=int(seconds) + 120)
    assert run.returncode == 0, run.stderr[-3000:]


# ── extraction ──────────────────────────────────────────────────────────────────────────────

ID_BITS = ["INV-2025-08-44719", "INV-2025-08-44791", "#W2378156", "order_id", "PROJ-1234",
           "ticket", "4242 4242 4242 4242", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
           "src/auth/handler.ts", "550e8400-e29b-41d4-a716-446655440000", "1f3a9c2", "$1,204.50",
           "user@example.com", "10.0.0.1", "+1 415 555 0100", "Widget Pro", "Gizmo", "ending in ",
           " ", "\n", "-", "\u200b", "\u202e", "é", "İ", "ı", "\u017f", "\u212a", "ß", "²", "\ud800", "{", "}", '"', ":",
           "[", "]", ",", "<<<", ">>>", "  (", "json:"]
texts = st.lists(st.one_of(st.sampled_from(ID_BITS), st.text(max_size=6)), max_size=20) \
    .map("".join)


def _leaves(node: Any, root: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path, _, value in _json_leaves(node, root):
        if isinstance(value, str):
            out.setdefault(path, []).append(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.setdefault(path, []).append(json.dumps(value))
    return out


@PROPS
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), texts,
                          st.one_of(st.none(), st.dictionaries(
                              st.sampled_from(["order_id", "item_ids", "path", "q", "x_id"]),
                              st.one_of(texts, st.lists(texts, max_size=2), st.integers())))),
                min_size=1, max_size=4))
def test_extraction_never_raises_and_values_are_source_slices(builtin_extractor, spec):
    turns = []
    for role, text, args in spec:
        if role == "tool" and args is not None:
            text = json.dumps(args, ensure_ascii=False)  # a JSON tool result
        calls = (ToolCall("tool_x", args),) if args is not None and role == "assistant" else ()
        turns.append(Turn(role, text, tool_calls=calls, tool_name="tool_x" if role == "tool"
                          else None))
    result = builtin_extractor.scan(turns)
    assert len({lit.value for lit in result.literals}) == len(result.literals)  # deduplicated
    for lit in result.literals:
        turn = turns[lit.turn]
        assert lit.role == turn.role != "system"
        if lit.field == "text":
            assert turn.text[lit.start:lit.end] == lit.value
        else:
            root = lit.field.split(".", 1)[0].split("[", 1)[0]
            node = turn.tool_calls[0].arguments if root == "arguments" else json.loads(turn.text)
            assert any(v[lit.start:lit.end] == lit.value
                       for v in _leaves(node, root).get(lit.field, ())), lit


@PROPS
@given(texts)
def test_skipping_re2_groups_offers_the_rules_that_running_every_group_offers(
        builtin_extractor, text):
    """A pattern group is skipped when none of its rules passed the keyword stage: the rules
    offered are those that every group run on every text, and the automaton, would offer."""
    from firewall.extraction.prefilter import ascii_bytes
    from firewall.extraction.regex_syntax import fold_case

    data = ascii_bytes(text)
    prefilter = builtin_extractor._prefilter
    assert len(prefilter._ascii.groups) > 1  # the built-in packs are grouped
    keyed = set(prefilter._unkeyed)
    for _, indices in prefilter._automaton.iter(fold_case(text)):
        keyed |= indices
    patterns = prefilter._ascii if data is not None else prefilter._unicode
    subject = data if data is not None else text.encode("utf-8", "surrogatepass")
    matched = set(patterns.outside)
    for group in patterns.groups:
        matched.update(group.rules[j] for j in group.rule_set.Match(subject) or ())
    if data is None and any("\ud800" <= c <= "\udfff" for c in text):
        matched = set(range(prefilter.size))  # lone surrogates: `regex` alone decides
    for role in ("user", "assistant", "tool"):  # no built-in rule applies to system text
        among = builtin_extractor._by_role[role].among
        assert prefilter.candidates(text, data, among) == sorted(keyed & matched & among)


# ── ledger ──────────────────────────────────────────────────────────────────────────────────

@settings(PROPS, max_examples=50)
@given(st.lists(st.lists(st.tuples(texts, st.sampled_from(["user", "assistant", "tool"]),
                                   st.integers(0, 40)), max_size=6), max_size=4))
def test_every_value_given_to_update_is_recovered_from_the_block(batches):
    led = Ledger.new("conv")
    first: dict[str, tuple[int, str]] = {}  # turn and role of each value's first sighting
    written: list[str] = []
    for batch in batches:  # cumulative, as across compactions
        literals = [Literal(value=v, rule="p/r", turn=t, role=role, start=0, end=len(v),
                            tool="t" if role == "tool" else None) for v, role, t in batch]
        led.update(literals)
        for v, role, t in batch:
            if v not in first or t < first[v][0]:
                first[v] = (t, role)
        parsed = Ledger.parse("noise " + led.render() + " noise", led.nonce, led.key)
        written = [e.value for e in parsed]
        assert [v for v in led.values() if v in written] == written
        # a value not written itself is carried inside a longer one, byte for byte
        assert all(v in written or any(v in w for w in written) for v in led.values())
        assert set(led.values()) == set(first)
        assert {e.value: e.role for e in parsed} == {v: first[v][1] for v in written}
    again = Ledger.from_json(led.to_json())
    assert [e.value for e in Ledger.parse(again.render(), led.nonce, led.key)] == written


@PROPS
@given(texts)
def test_extracted_literals_survive_the_block_and_a_rescan_finds_none_inside_it(
        builtin_extractor, text):
    literals = builtin_extractor.scan([Turn("user", text)]).literals
    led = Ledger.new("conv")
    led.update(literals)
    block = led.render()
    written = [e.value for e in Ledger.parse(block, led.nonce, led.key)]
    assert set(written) <= {lit.value for lit in literals}
    assert all(lit.value in written or any(lit.value in w for w in written) for lit in literals)
    # re-compaction is idempotent: the genuine block is skipped by the extractor
    rescan = builtin_extractor.scan([Turn("user", block)],
                                    skip=lambda t: find_blocks(t, led.nonce, led.key))
    assert rescan.literals == []


class _Copying:
    """A summarizer that copies the given pieces of the conversation (and nothing else)."""

    def __init__(self, pieces: list[str]) -> None:
        self.text = " ".join(pieces) or "Nothing."

    def summarize(self, request: Any) -> str:
        return self.text


@settings(PROPS, max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), min_size=2,
                max_size=8),
       st.data(), st.integers(40, 3000), st.integers(1, 3),
       st.sampled_from(["reinject", "repair", "keep_source"]))
def test_every_pinned_value_is_in_the_composed_context_after_a_compaction(
        builtin_firewall, messages, data, budget, keep_last, policy):
    """Nothing pinned is lost: the block writes every value the ledger keeps unless the summary
    or a turn kept verbatim holds it, whatever the summary copied, under every policy that
    composes."""
    from firewall.compaction.validate import occurs

    conversation = [{"role": role, "content": text} for role, text in messages]
    pieces = data.draw(st.lists(st.sampled_from([t for _, t in messages]), max_size=4))
    builtin_firewall.budget_tokens, builtin_firewall.policy = budget, policy
    result = builtin_firewall.compact(conversation, _Copying(pieces), keep_last=keep_last,
                                      ledger=Ledger.new("conv"))
    if not result.compacted:
        return
    led = result.ledger
    written = [e.value for e in Ledger.parse(result.block, led.nonce, led.key)]
    assert set(written) <= set(led.values())
    others = [t.text for t in parse_messages(result.messages).turns
              if not find_blocks(t.text, led.nonce, led.key)]
    for value in led.values():
        assert value in written or any(occurs(w, value) for w in written) \
            or any(occurs(text, value) for text in others), value


# ── validator ───────────────────────────────────────────────────────────────────────────────

values = st.one_of(st.sampled_from(ID_BITS[:16]), texts.filter(bool))


def _check_verdict(summary: str, required: list[str], verdict, known: list[str] = ()) -> None:
    wanted = list(dict.fromkeys(v for v in required if v))
    others = [f for f in verdict.findings if f.value not in wanted]
    # a known value that is not required appears only as mutated, after the required ones
    assert all(f.status == "mutated" and not f.required and f.value in known for f in others)
    assert list(verdict.findings[len(verdict.findings) - len(others):]) == others
    assert verdict.ok == (not verdict.mutated and not verdict.missing)
    statuses: dict[str, list[str]] = {}
    for f in verdict.findings:
        statuses.setdefault(f.value, []).append(f.status)
        if f.status == "present":
            assert summary[f.span[0]:f.span[1]] == f.value
        elif f.status == "mutated":
            assert f.span is not None and summary[f.span[0]:f.span[1]] == f.resembles
            assert f.resembles != f.value and f.reason
        else:
            assert f.span is None and f.value not in summary.split()
    assert list(statuses)[:len(wanted)] == wanted  # one group per required value, in order
    for v, s in statuses.items():
        assert s.count("present") + s.count("missing") <= 1
        assert "missing" not in s or s == ["missing"]


@PROPS
@given(texts, st.lists(values, max_size=5), st.lists(values, max_size=5))
def test_validator_never_raises_and_spans_slice_to_what_they_claim(summary, required, known):
    verdict = validate(summary, required, known=known)
    _check_verdict(summary, required, verdict, known)


@PROPS
@given(values, st.lists(values, max_size=3), texts, texts, st.sampled_from(["", " ", "\n", " ("]))
def test_mutations_of_a_literal_are_spans_of_the_summary(value, others, before, after, sep):
    # a near-miss next to the literal: drop, swap or fold a character
    mutants = {value[:-1], value[1:], value[::-1], value.upper(), value.replace("-", " "),
               value.replace("0", "O")} - {value, ""}
    summary = before + sep + sep.join(sorted(mutants)) + sep + after
    verdict = validate(summary, [value, *others], known=others)
    _check_verdict(summary, [value, *others], verdict)


@PROPS
@given(values, st.lists(values, max_size=3), texts, texts)
def test_a_summary_holding_the_literal_exactly_never_reports_it_missing(value, others, before,
                                                                         after):
    summary = f"{before} {value} {after}"  # exact bytes, not glued to a letter or digit
    verdict = validate(summary, [value, *others], known=others)
    _check_verdict(summary, [value, *others], verdict)
    assert [f.status for f in verdict.findings if f.value == value][0] == "present"
    assert not any(f.status == "missing" and f.value == value for f in verdict.findings)


# ── known crashes (regressions; see the module docstring) ───────────────────────────────────

def _pack_text(rule: str) -> str:
    return "name: p\nversion: '1'\nrules:\n" + rule


def test_deeply_nested_yaml_is_a_pack_error():
    with pytest.raises(PackError):
        parse_pack("[" * 1000)


def test_deeply_nested_regex_is_a_pack_error():
    with pytest.raises(PackError):
        parse_pack(_pack_text("  - id: r\n    kind: regex\n    pattern: '"
                              + "(" * 5000 + ")" * 5000 + "'\n"))


def test_checksum_rule_on_superscript_digits_does_not_raise():
    pack = _harness_cache("fuzz_packs").load_text(_pack_text(
        "  - id: r\n    kind: regex\n    pattern: '\\S+'\n    checksum: luhn\n"
        "  - id: s\n    kind: regex\n    pattern: '\\S+'\n    checksum: aba_routing\n"))
    values = [l.value for l in Extractor([pack]).scan([Turn("user", "4²42 4242")]).literals]
    assert "4²42" not in values  # scanned without raising; the superscript is no digit


@pytest.mark.parametrize("doc", [
    [{"role": "assistant", "tool_calls": [{"id": [1], "function": {"name": "f"}}]}],
    [{"role": "tool", "tool_call_id": {"a": 1}, "content": "x"}],
    [{"role": "assistant", "content": [{"type": "tool_use", "id": {}, "name": "f", "input": {}}]}],
    [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": [], "content": "x"}]}],
])
def test_unhashable_tool_call_id_is_a_conversation_error(doc):
    with pytest.raises(ConversationError, match="expected a string id, got (list|dict)"):
        parse_messages(doc)


def test_anthropic_text_block_with_non_string_text_is_a_conversation_error():
    doc = [{"role": "user", "content": [{"type": "text", "text": [{"type": "text",
                                                                    "text": "ok"}]}]}]
    with pytest.raises(ConversationError):
        parse_messages(doc, format="anthropic")


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000,
                                  b'{"messages": []}\n' + b"[" * 100_000,
                                  b'{"messages": [], "id": ' + b"9" * 5000 + b"}\n"])
def test_pathological_json_file_is_a_conversation_error(tmp_path, data):
    path = tmp_path / "c.jsonl"
    path.write_bytes(data)
    with pytest.raises(ConversationError):
        list(read_conversations(path))


def test_deeply_nested_arguments_string_is_kept_whole():
    doc = [{"role": "assistant", "tool_calls": [
        {"id": "1", "function": {"name": "f", "arguments": "[" * 100_000}}]}]
    assert parse_messages(doc).turns[0].tool_calls[0].arguments == {"arguments": "[" * 100_000}


@pytest.mark.parametrize("depth", [900, 100_000])
def test_deeply_nested_json_tool_result_never_raises(builtin_extractor, depth):
    # json.loads copes (or refuses) and a refused result is scanned as plain text: either way
    # the order number at the bottom is found, once, whole
    text = '{"order_id": ' * depth + '"#W2378156"' + "}" * depth
    result = builtin_extractor.scan([Turn("tool", text, tool_name="t")])
    assert [(l.value, l.turn) for l in result.literals] == [("#W2378156", 0)]
    assert not result.timeouts


def test_deeply_nested_tool_call_arguments_never_raise(builtin_extractor):
    arguments: Any = "#W2378156"
    for _ in range(sys.getrecursionlimit()):
        arguments = {"order_id": arguments}
    result = builtin_extractor.scan([Turn("assistant", "",
                                          tool_calls=(ToolCall("f", arguments),))])
    # found in the innermost argument, named by its path, not lost to the depth
    (found,) = result.literals
    assert found.value == "#W2378156" and found.field.startswith("arguments.order_id.order_id")
    assert not result.timeouts
