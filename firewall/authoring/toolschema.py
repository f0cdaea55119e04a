"""Tool schemas as rules: the string parameters of an agent's tools that are identifiers.

A tool whose parameter is ``order_id`` says that whatever flows into it must be exact. From the
tool definitions (Anthropic ``tools``, OpenAI ``tools`` or plain JSON Schemas) this module
derives a pack of pin rules:

- a ``json_key`` rule per group of identifier parameters (``*_id``, ``*_ids``, ``*_number``,
  ``*_code``, ``path``, ``email``, ``sku``, ``url``..., or a description that says "ID"), so
  any value under such a key in a tool result or a tool call is pinned;
- a ``regex`` rule per parameter with a safe ``pattern`` or a known ``format`` (uuid, email,
  uri, date-time...), so the value is pinned where it first appears in text (a user typed it);
- a ``terms`` rule per parameter with a string ``enum``.

Every rule carries examples built from the schema, so the pack loads in strict mode.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import regex

from ..extraction.examples import failures
from ..extraction.packs import Pack, parse_pack

# identifier-like parameter names (lowercased; ``-`` read as ``_``)
_ID_NAME = regex.compile(
    r"(?:id|ids|uuid|guid|key|sku|skus|url|uri|urls|email|emails|path|paths|file_?path|"
    r"file_?name|filename|dir|directory|ref|slug|hash|sha|handle|iban|isbn|zip|zip_?code|"
    r"postcode|postal_?code|.{1,40}_(?:id|ids|uuid|number|numbers|code|codes|no|num|key|"
    r"sku|ref|path|paths|url|email|hash|sha))")
_ID_DESCRIPTION = regex.compile(
    r"\bIDs?\b|\b(?i:identifier|uuid|guid|sku|url|uri|e-?mail address|file ?path|path|"
    r"(?:reference|confirmation|tracking|order|account|invoice|booking|reservation|serial|"
    r"ticket|phone|postal|zip|promo|coupon|voucher|product|item|part|model|error|status) ?"
    r"(?:number|code|no\.?))\b")
# free-text parameters are never identifiers, whatever their description says
_FREE_TEXT = frozenset({"query", "q", "text", "content", "body", "message", "summary", "reason",
                        "thought", "description", "note", "notes", "comment", "prompt",
                        "command", "instructions", "title", "expression"})

# JSON-Schema ``format`` → (regex for the value in text, a sample, a near miss)
FORMATS: dict[str, tuple[str, str, str]] = {
    "uuid": (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
             "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456"),
    "email": (r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9][A-Za-z0-9.-]{0,252}\.[A-Za-z]{2,24}\b",
              "jane.doe@example.com", "jane.doe at example.com"),
    "uri": (r"\bhttps?://[^\s\"'<>()\[\]{}]{0,2000}[^\s\"'<>()\[\]{}.,;:!?]",
            "https://example.com/a/b?c=1", "example.com/a/b"),
    "date-time": (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?"
                  r"(?:Z|[+-]\d{2}:\d{2})?\b", "2025-04-01T12:30:00Z", "2025-04-01 at noon"),
    "date": (r"\b\d{4}-\d{2}-\d{2}\b", "2025-04-01", "2025-4-1"),
    "ipv4": (r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", "192.168.10.24", "192.168.10"),
}
FORMATS["url"] = FORMATS["uri-reference"] = FORMATS["iri"] = FORMATS["uri"]

# a schema ``pattern`` is used only when it is this plain (see ``safe_pattern``)
_MAX_PATTERN = 200
_BOUND = 128  # an unbounded repeat of a single atom becomes {0,128} / {1,128}
_UNSAFE = regex.compile(r"\\[1-9]|\\[gkpPX]|\(\?[<=!>(|]|\(\?P[=>]")



def is_identifier_name(name: str) -> bool:
    """``order_id``, ``item_ids``, ``path``, ``email``, ``orderId``... (case-insensitive)."""
    snake = regex.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")
    return _ID_NAME.fullmatch(snake) is not None


def _is_identifier(key: str, param: dict[str, Any], description: str) -> bool:
    if is_identifier_name(key) or param.get("format") in ("uuid", "email", "uri", "url") \
            or safe_pattern(param.get("pattern", "")):
        return True
    return key.lower() not in _FREE_TEXT and _ID_DESCRIPTION.search(description or "") is not None


def tool_schemas(tools: Any) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, input JSON Schema) for Anthropic, OpenAI or plain-schema tool lists."""
    if isinstance(tools, dict):
        tools = tools.get("tools", [tools])
    out = []
    for n, tool in enumerate(tools or ()):
        if not isinstance(tool, dict):
            raise ValueError(f"tools[{n}]: expected an object, got {type(tool).__name__}")
        if isinstance(tool.get("function"), dict):  # OpenAI chat: {type: function, function}
            name, schema = tool["function"].get("name"), tool["function"].get("parameters")
        elif "input_schema" in tool:  # Anthropic
            name, schema = tool.get("name"), tool["input_schema"]
        elif "parameters" in tool:  # OpenAI Responses: {type: function, name, parameters}
            name, schema = tool.get("name"), tool["parameters"]
        else:  # a plain JSON Schema
            name, schema = tool.get("title") or tool.get("name"), tool
        out.append((str(name or f"tool{n}"), schema if isinstance(schema, dict) else {}))
    return out


def string_params(schema: dict[str, Any], name: str | None = None, description: str = "",
                  depth: int = 0) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(nearest key, string schema, description) for every string leaf of a JSON Schema.

    Nested objects yield their own property names; array items inherit the array's key (as the
    extractor's JSON walker does), so ``item_ids: [..]`` yields ``item_ids``.
    """
    if depth > 12 or not isinstance(schema, dict):
        return
    description = schema.get("description") or description
    types = schema.get("type")
    types = set(types) if isinstance(types, list) else {types}
    for alt in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(alt) or ():
            yield from string_params(sub, name, description, depth + 1)
    for key, sub in (schema.get("properties") or {}).items():
        yield from string_params(sub, str(key), "", depth + 1)
    if isinstance(schema.get("items"), dict):
        yield from string_params(schema["items"], name, description, depth + 1)
    if name is not None and ("string" in types or (types == {None} and (
            "enum" in schema or "pattern" in schema or "format" in schema))):
        yield name, schema, description


def safe_pattern(pattern: Any) -> str | None:
    """A schema ``pattern`` as an unanchored, linear-time value regex, or None.

    Accepted: literals, classes, escapes, bounded repeats and optional groups; ``+``, ``*``
    and ``{n,}`` on a single atom are bounded. Rejected: alternation, lookaround,
    backreferences, inner anchors, lazy or possessive repeats, and a repeated group (the source
    of nested quantifiers).
    """
    if not isinstance(pattern, str) or not pattern or len(pattern) > _MAX_PATTERN:
        return None
    body = pattern[1:] if pattern.startswith("^") else pattern
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    if not body or _UNSAFE.search(body):
        return None
    out: list[str] = []
    i, in_class = 0, False
    while i < len(body):
        c = body[i]
        if c == "\\":
            out.append(body[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            skip = 2 if body[i + 1:i + 2] == "^" else 1
            if body[i + skip:i + skip + 1] == "]":  # a literal ] right after [ or [^
                out.append(body[i:i + skip + 1])
                i += skip + 1
                continue
        elif c in "|^$":
            return None
        elif c in "*+?{":
            after = body[i + 1:i + 2]
            if c == "{":
                close = body.find("}", i)
                if close < 0:
                    return None
                quant = body[i:close + 1]
                after = body[close + 1:close + 2]
            else:
                quant = c
            if after in ("?", "+"):  # lazy / possessive: keep it simple
                return None
            repeats = quant != "?" and quant not in ("{0,1}", "{1}")
            if repeats and out and out[-1] == ")":  # a repeated group
                return None
            if quant in ("*", "+") or regex.fullmatch(r"\{\d+,\}", quant):
                low = "0" if quant == "*" else "1" if quant == "+" else quant[1:-2]
                quant = f"{{{low},{max(_BOUND, int(low))}}}"
            out.append(quant)
            i += len(body[i:close + 1]) if c == "{" else 1
            continue
        out.append(c)
        i += 1
    safe = "".join(out)
    try:
        regex.compile(safe)
    except regex.error:
        return None
    return safe


def sample_for(pattern: str) -> str | None:
    """A short string the pattern fully matches (digits cycle 1..9, 0), or None."""
    import re._parser as sre_parse  # the stdlib parser reads the shared syntax subset

    try:
        tree = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - `regex`-only syntax: no sample, no rule
        return None
    digits = iter("1234567890" * 100)

    def gen(items: Any) -> str | None:
        parts = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                part = chr(arg)
            elif name == "IN":
                part = _class_char(arg, digits)
            elif name in ("MAX_REPEAT", "MIN_REPEAT"):
                low, _high, sub = arg
                pieces = [gen(sub) for _ in range(max(low, 1 if low == 0 and _high else 0))]
                part = None if None in pieces else "".join(pieces)  # type: ignore[arg-type]
            elif name == "SUBPATTERN":
                part = gen(arg[-1])
            elif name == "AT":
                part = ""
            else:
                part = None
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)

    sample = gen(tree)
    if not sample or regex.fullmatch(pattern, sample) is None:
        return None
    return sample


def _class_char(items: Any, digits: Iterator[str]) -> str | None:
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            return None
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            low, high = arg
            return next(digits) if low <= ord("1") and ord("9") <= high else chr(low)
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": next(digits), "CATEGORY_WORD": "a"}.get(str(arg))
    return None


def _rule_id(text: str) -> str:
    slug = regex.sub(r"[^a-z0-9]+", "-", regex.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", text)
                     .lower()).strip("-")
    return slug or "param"


def _key_glob(key: str) -> str:
    """A parameter name as a json_key glob that matches only itself."""
    return regex.sub(r"([*?\[])", r"[\1]", key)


def derive_rules(tools: Any) -> list[dict[str, Any]]:
    """The raw (YAML-shaped) rules for a tool list, in a deterministic order."""
    keys: dict[str, list[str]] = {}  # identifier parameter → tools that take it
    values: dict[str, dict[str, Any]] = {}  # rule id → a pattern / format rule
    enums: dict[str, dict[str, Any]] = {}
    for tool, schema in tool_schemas(tools):
        for key, param, description in string_params(schema):
            enum = sorted({v for v in param.get("enum") or () if isinstance(v, str)
                           and len(v) >= 3})
            if enum:
                spec = enums.setdefault(f"{_rule_id(key)}-enum",
                                        {"key": key, "terms": set(), "tools": set()})
                spec["terms"].update(enum)
                spec["tools"].add(tool)
                continue
            if _is_identifier(key, param, description):
                keys.setdefault(key, [])
                if tool not in keys[key]:
                    keys[key].append(tool)
            pattern = safe_pattern(param.get("pattern"))
            if pattern is not None:
                sample = sample_for(pattern)
                source, near = rf"(?<!\w){pattern}(?!\w)", f"x{sample}x"
            elif param.get("format") in FORMATS:
                source, sample, near = FORMATS[param["format"]]
            else:
                continue
            if sample and f"{_rule_id(key)}-value" not in values:
                values[f"{_rule_id(key)}-value"] = {
                    "key": key, "pattern": source, "sample": sample, "near": near, "tool": tool}
    rules: list[dict[str, Any]] = []
    if keys:
        names = sorted(keys)
        listed = ", ".join(f"{k} ({', '.join(keys[k])})" for k in names[:6])
        rules.append({
            "id": "id-params", "kind": "json_key", "priority": 70,
            "description": f"Values of the tools' identifier parameters: {listed}"
                           + (", ..." if len(names) > 6 else "") + ".",
            "keys": [_key_glob(k) for k in names],
            "examples": {
                "match": [{"text": json.dumps({names[0]: "X-1001", "note": "ok"}),
                           "literals": ["X-1001"]}],
                "no_match": [json.dumps({"x_not_a_parameter": "X-1001"}),
                             json.dumps({names[0]: " "})]}})
    for rid, spec in sorted(values.items()):
        sample = spec["sample"]
        rules.append({
            "id": rid, "kind": "regex", "priority": 70,
            "description": f"A value of the {spec['key']} parameter of {spec['tool']}, where "
                           f"it first appears in text.",
            "pattern": spec["pattern"],
            "examples": {"match": [{"text": f"it is {sample}, thanks", "literals": [sample]}],
                         "no_match": [f"it is {spec['near']}, thanks"]}})
    for rid, spec in sorted(enums.items()):
        terms = sorted(spec["terms"])
        rules.append({
            "id": rid, "kind": "terms", "priority": 60,
            "description": f"Allowed values of the {spec['key']} parameter of "
                           f"{', '.join(sorted(spec['tools']))}.",
            "terms": terms,
            "examples": {"match": [{"text": f"set it to {terms[0]} please",
                                    "literals": [terms[0]]}],
                         "no_match": [f"set it to x{terms[0]}x please"]}})
    return rules


# ── YAML output and validation (shared with ``suggest``) ────────────────────────────────

class _Quoted(str):
    """A string YAML must write single-quoted (regexes)."""


@functools.lru_cache(maxsize=1)
def _dumper() -> Any:
    """Built on first use: importing YAML is a noticeable share of the command line's start."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Quoted, lambda d, s: d.represent_scalar(
        "tag:yaml.org,2002:str", str(s), style="'"))
    return Dumper

_ORDER = ("id", "kind", "description", "roles", "severity", "priority", "keys", "pattern",
          "value_pattern", "keywords", "flags", "terms", "examples")


def pack_yaml(name: str, rules: list[dict[str, Any]], *, description: str = "",
              header: str = "") -> str:
    """YAML for a pack of raw rules: regex fields single-quoted, keys in a readable order."""
    ordered = []
    for rule in rules:
        item = {k: rule[k] for k in _ORDER if k in rule}
        item.update({k: v for k, v in rule.items() if k not in item})
        for field in ("pattern", "value_pattern"):
            if item.get(field):
                item[field] = _Quoted(item[field])
        ordered.append(item)
    doc = {"name": name, "version": "0.1.0", "description": description, "rules": ordered}
    import yaml

    body = yaml.dump(doc, Dumper=_dumper(), sort_keys=False, allow_unicode=True, width=100)
    return header + body


def validated_pack(name: str, rules: list[dict[str, Any]], *, description: str = "",
                   header: str = "") -> tuple[str, Pack, list[str]]:
    """(YAML, loaded pack, dropped rule ids): rules whose examples fail are dropped."""
    dropped: list[str] = []
    while True:
        text = pack_yaml(name, rules, description=description, header=header)
        spec = parse_pack(text)
        pack = Pack(name=spec.name, version=spec.version, description=spec.description,
                    rules=tuple(spec.rules), owners=(spec.name,) * len(spec.rules))
        failing = {f.rule.split("/", 1)[1] for f in failures([pack])}
        if not failing:
            return text, pack, dropped
        dropped += sorted(failing)
        rules = [r for r in rules if r["id"] not in failing]


def _description(tools: Any) -> str:
    names = [n for n, _ in tool_schemas(tools)]
    return "Identifier parameters of the tools " + ", ".join(names[:10]) + \
        (", ..." if len(names) > 10 else "") + "."


def pack_yaml_from_tools(tools: Any, name: str = "tools") -> str:
    """The derived pack as YAML (``firewall rules test`` passes on it as written)."""
    rules = derive_rules(tools)
    text, _pack, dropped = validated_pack(name, rules, description=_description(tools))
    if dropped:  # say so in the file; the remaining rules are unaffected
        text = f"# dropped (examples failed): {', '.join(dropped)}\n" + text
    return text


def pack_from_tools(tools: Any, name: str = "tools") -> Pack:
    """A loaded ``Pack`` of pin rules for the identifier parameters of ``tools``."""
    return validated_pack(name, derive_rules(tools), description=_description(tools))[1]


def identifier_params(tools: Any) -> list[tuple[str, str]]:
    """(tool, parameter) for every identifier parameter the derived pack pins."""
    return [(tool, key) for tool, schema in tool_schemas(tools)
            for key, param, description in string_params(schema)
            if not param.get("enum") and _is_identifier(key, param, description)]
