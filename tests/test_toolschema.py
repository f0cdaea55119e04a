"""Tool schemas as rules: identifier parameters of Anthropic / OpenAI tools become a pack."""

from __future__ import annotations

import json

import regex

from firewall.extraction.examples import failures
from firewall.extraction.extract import Extractor
from firewall.formats import parse_messages
from firewall.extraction.packs import load_packs, parse_pack
from firewall.authoring.toolschema import (identifier_params, is_identifier_name, pack_from_tools,
                                 pack_yaml_from_tools, safe_pattern, sample_for)

ANTHROPIC = [
    {"name": "get_order", "description": "Look up an order.",
     "input_schema": {"type": "object", "required": ["order_id"], "properties": {
         "order_id": {"type": "string", "pattern": "^#W[0-9]{7}$", "description": "The order"},
         "status": {"type": "string", "enum": ["pending", "delivered", "cancelled", "ok"]}}}},
    {"name": "return_items", "description": "Return items of an order.",
     "input_schema": {"type": "object", "properties": {
         "item_ids": {"type": "array", "items": {"type": "string"}},
         "reason": {"type": "string", "description": "Why, in the user's words (not an ID)."},
         "contact": {"type": "object", "properties": {
             "email": {"type": "string", "format": "email"},
             "address": {"type": "object", "properties": {"zip_code": {"type": "string"}}}}},
         "booking": {"type": "string", "description": "The booking reference number."},
         "quantity": {"type": "integer"}}}},
]

OPENAI = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
     "parameters": {"type": "object", "properties": {
         "file_path": {"type": "string"},
         "request": {"type": "string", "format": "uuid"},
         "query": {"type": "string", "description": "free text, e.g. an ID to look for"},
         "created": {"type": "string", "format": "date-time"}}}}},
]


def test_identifier_parameters_are_found_in_nested_objects_and_arrays():
    assert sorted(identifier_params(ANTHROPIC)) == [
        ("get_order", "order_id"), ("return_items", "booking"), ("return_items", "email"),
        ("return_items", "item_ids"), ("return_items", "zip_code")]
    # free text stays out even when its description mentions an ID; so do enums and integers
    assert sorted(identifier_params(OPENAI)) == [("read_file", "file_path"),
                                                 ("read_file", "request")]
    assert all(map(is_identifier_name, ["id", "orderId", "sku", "path", "url", "ticket_number",
                                        "promo_code", "item_ids"]))
    assert not any(map(is_identifier_name, ["quantity", "reason", "summary", "color"]))


def test_anthropic_pack_rules_and_strict_loading(tmp_path):
    text = pack_yaml_from_tools(ANTHROPIC, name="shop-tools")
    pack = pack_from_tools(ANTHROPIC, name="shop-tools")
    rules = {r.id: r for r in pack.rules}
    assert list(rules) == ["id-params", "email-value", "order-id-value", "status-enum"]
    assert rules["id-params"].kind == "json_key"
    assert rules["id-params"].keys == ["booking", "email", "item_ids", "order_id", "zip_code"]
    assert rules["order-id-value"].pattern == r"(?<!\w)#W[0-9]{7}(?!\w)"
    assert rules["status-enum"].terms == ["cancelled", "delivered", "pending"]  # 'ok' too short
    assert "pattern: '(?<!\\w)#W[0-9]{7}(?!\\w)'" in text  # single-quoted in the YAML
    assert [r.id for r in parse_pack(text).rules] == list(rules)
    assert failures([pack]) == []
    path = tmp_path / "shop-tools.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_packs(path, strict=True)[0].name == "shop-tools"


def test_openai_pack_formats():
    pack = pack_from_tools(OPENAI)
    rules = {r.id: r for r in pack.rules}
    assert list(rules) == ["id-params", "created-value", "request-value"]
    assert rules["id-params"].keys == ["file_path", "request"]
    assert failures([pack]) == []


def test_plain_json_schemas_and_responses_shape():
    schema = {"title": "lookup", "type": "object",
              "properties": {"customer_id": {"type": "string"}}}
    responses = {"type": "function", "name": "lookup2",
                 "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}}}
    pack = pack_from_tools([schema, responses])
    assert pack.rules[0].keys == ["customer_id", "sku"]


def test_derived_pack_extracts_the_literals_of_a_conversation():
    conv = parse_messages([
        {"role": "user", "content": "Where is #W1234567? It was delivered late. Mail me at "
                                    "ana@example.com"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "get_order", "arguments": {
            "order_id": "#W1234567"}, "id": "c1"}]},
        {"role": "tool", "name": "get_order", "tool_call_id": "c1", "content": json.dumps({
            "order_id": "#W1234567", "item_ids": ["1008292230", "2281938311"],
            "shipping": {"address": {"zip_code": "94110"}}, "reason": "too late",
            "quantity": 2})},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "read_file", "arguments": {
            "file_path": "src/auth/handler.ts", "query": "a b c",
            "request": "123e4567-e89b-12d3-a456-426614174000"}, "id": "c2"}]},
    ], format="native")
    extractor = Extractor([pack_from_tools(ANTHROPIC + OPENAI)])
    found = {(lit.value, lit.rule.split("/")[1]) for lit in extractor.scan(conv).literals}
    assert found == {
        ("#W1234567", "order-id-value"),  # pinned where the user typed it
        ("delivered", "status-enum"), ("ana@example.com", "email-value"),
        ("1008292230", "id-params"), ("2281938311", "id-params"), ("94110", "id-params"),
        ("src/auth/handler.ts", "id-params"),
        ("123e4567-e89b-12d3-a456-426614174000", "id-params")}
    assert [lit.turn for lit in extractor.scan(conv).literals][0] == 0


def test_schema_patterns_are_made_linear_or_refused():
    assert safe_pattern("^#W[0-9]{7}$") == "#W[0-9]{7}"
    assert safe_pattern("^[A-Z]+-\\d+$") == "[A-Z]{1,128}-\\d{1,128}"  # unbounded → bounded
    assert safe_pattern("^\\d{3,}$") == "\\d{3,128}"
    assert safe_pattern("^[A-Z]{2}(-\\d{3})?$") == "[A-Z]{2}(-\\d{3})?"
    for unsafe in ("^(\\d+)+$", "^(?:ab)*$", "^(a|b)$", "^(?=x)\\w{3}$", "^(a)\\1$", "a+?",
                   "x" * 300, "[a-z"):
        assert safe_pattern(unsafe) is None, unsafe
    for pattern in ("#W[0-9]{7}", "[A-Z]{2}-\\d{4,6}", "[a-f0-9]{8}(-[a-f0-9]{4})?"):
        sample = sample_for(pattern)
        assert sample and regex.fullmatch(pattern, sample)


def test_unsafe_pattern_still_pins_by_key():
    tools = [{"name": "t", "input_schema": {"type": "object", "properties": {
        "ref_code": {"type": "string", "pattern": "^(\\w+)+$"}}}}]
    pack = pack_from_tools(tools)
    assert [r.id for r in pack.rules] == ["id-params"]
    assert pack.rules[0].keys == ["ref_code"]
