"""``firewall rules import gitleaks CONFIG.toml``: a gitleaks configuration as a rule pack.

Every gitleaks rule becomes a ``sensitive`` regex rule: its regex (translated from Go's RE2
syntax to the `regex` module's), secret group, keywords, entropy and allowlists (per rule and
global: regexes on the secret, the match or the line, stopwords, and the ``gitleaks:allow``
inline marker). What has no meaning in a conversation is left out and said so: file paths and
commits (a conversation has neither), path-only rules. What cannot be translated is refused,
rule by rule, with the reason.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from ..errors import PackError

INLINE_MARKER = "gitleaks:allow"
RULE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Go's POSIX classes are ASCII; the `regex` module's would take any Unicode letter
POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ",
         "cntrl": r"\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
         "print": " -~", "punct": r"!-/:-@\[-`{-~", "space": r"\t\n\x0b\f\r ", "upper": "A-Z",
         "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
# Go's regexp refuses an expression nested deeper than this (its parser's maxHeight)
MAX_NESTING = 1000
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


class Untranslatable(ValueError):
    """A Go regex construct with no `regex` equivalent."""


# ── Go RE2 → `regex` ─────────────────────────────────────────────────────────────────────

@dataclass
class _Group:
    multiline: bool
    wrappers: list[str] = field(default_factory=list)  # "(?i:" opened by a bare (?i) here


def _open_group(stack: list[_Group], multiline: bool) -> None:
    """A group opens; Go refuses more than ``MAX_NESTING`` of them open at once, so do we."""
    stack.append(_Group(multiline))
    if len(stack) > MAX_NESTING:
        raise Untranslatable(f"groups nested more than {MAX_NESTING} deep (Go refuses it too)")


def translate_regex(source: str) -> str:
    """A Go (RE2) regex rewritten with the same meaning for the `regex` module.

    * ``(?i)`` in the middle of a pattern sets the flag up to the end of its group in Go, and
      for the whole pattern in `regex`: it becomes a scoped ``(?i:...)``, closed and reopened
      around each ``|`` of that group;
    * ``\\z`` becomes ``\\Z``; ``$`` outside multi-line mode, which in Go matches only at the
      very end, becomes ``\\Z`` (the `regex` ``$`` also matches before a final newline);
    * ``[[:alpha:]]`` and the other POSIX classes become their ASCII ranges, as in Go;
    * ``\\Q...\\E`` becomes the escaped text; ``\\123`` (octal) and ``\\x{263a}`` become
      ``\\x53`` and ``\\u263a``;
    * ``{,n}``, which Go reads as text, is escaped;
    * a character that YAML would not keep as it is in a quoted scalar (a control character,
      a line break such as U+2028, a non-character) becomes its escape (``\\x0a``): the same
      character to the regex, and the pack written from it can neither gain a line nor lose
      the character.

    Go's ``\\d \\w \\s \\b`` are ASCII and the `regex` ones Unicode: they differ only next to
    non-ASCII text, where the imported rule matches more. Raises ``Untranslatable`` for the
    ungreedy flag ``U``, ``\\C``, negated POSIX classes inside a larger class, and what Go
    itself refuses: the flag ``x``, groups nested more than ``MAX_NESTING`` deep.
    """
    out: list[str] = []
    stack = [_Group(multiline=False)]
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "\\":
            piece, i = _escape(source, i)
            out.append(piece)
            continue
        if ch == "[":
            piece, i = _char_class(source, i)
            out.append(piece)
            continue
        if ch == "(":
            flags = _FLAGS.match(source, i)
            if flags is not None:
                on, off, end = flags.group(1), flags.group(2) or "", flags.group(3)
                if "U" in on + off:
                    raise Untranslatable("the ungreedy flag U has no `regex` equivalent")
                bad = set(on + off) - set("ims")  # Go has no x (verbose) flag
                if bad:
                    raise Untranslatable(f"unknown flag(s) {''.join(sorted(bad))!r}")
                multiline = stack[-1].multiline
                multiline = True if "m" in on else False if "m" in off else multiline
                spec = on + (f"-{off}" if off else "")
                if end == ":":  # scoped: (?i:...)
                    out.append(f"(?{spec}:")
                    _open_group(stack, multiline)
                elif not out and len(stack) == 1 and not off:
                    out.append(f"(?{on})")  # at the very start: global in both dialects
                    stack[-1].multiline = multiline
                else:  # (?i) mid-group: to the end of the group, as Go reads it
                    out.append(f"(?{spec}:")
                    stack[-1].wrappers.append(f"(?{spec}:")
                    stack[-1].multiline = multiline
                i = flags.end()
                continue
            if source.startswith("(?P<", i) or source.startswith("(?<", i):
                close = source.find(">", i)
                if close < 0:
                    raise Untranslatable("unterminated group name")
                out.append(source[i:close + 1])
                i = close + 1
            elif source.startswith("(?:", i):
                out.append("(?:")
                i += 3
            else:
                out.append("(")
                i += 1
            _open_group(stack, stack[-1].multiline)
            continue
        if ch == ")":
            if len(stack) == 1:
                raise Untranslatable("unbalanced ')'")
            out.append(")" * len(stack.pop().wrappers) + ")")
            i += 1
            continue
        if ch == "|":
            wrappers = stack[-1].wrappers
            out.append(")" * len(wrappers) + "|" + "".join(wrappers))
            i += 1
            continue
        if ch == "$":
            out.append("$" if stack[-1].multiline else r"\Z")
            i += 1
            continue
        if ch == "{":
            repeat = _REPEAT.match(source, i)
            if repeat is None:
                out.append(r"\{")  # Go reads a brace that opens no repetition as text
                i += 1
            else:
                out.append(repeat.group())
                i = repeat.end()
            continue
        out.append(_literal(ch))
        i += 1
    if len(stack) != 1:
        raise Untranslatable("unbalanced '('")
    out.append(")" * len(stack[0].wrappers))
    return "".join(out)


def _escape(source: str, i: int) -> tuple[str, int]:
    """One escape at ``source[i] == '\\\\'``: (its `regex` form, the index after it)."""
    letter = source[i + 1:i + 2]
    if not letter:
        raise Untranslatable("trailing backslash")
    if letter == "Q":
        end = source.find(r"\E", i + 2)
        text = source[i + 2:] if end < 0 else source[i + 2:end]
        quoted = "".join(regex.escape(c) if _literal(c) == c else _literal(c) for c in text)
        return quoted, len(source) if end < 0 else end + 2
    if letter == "z":
        return r"\Z", i + 2
    if letter == "C":
        raise Untranslatable(r"\C (any byte) has no `regex` equivalent")
    if letter in "01234567":
        octal = re.match(r"[0-7]{1,3}", source[i + 1:]).group()
        return _code_point(int(octal, 8)), i + 1 + len(octal)
    if letter in "pPx" and source.startswith("{", i + 2):
        close = source.find("}", i)
        if close < 0:
            raise Untranslatable(f"unterminated \\{letter}{{")
        if letter == "x":  # \x{263a}: `regex` spells it \u263a
            try:
                return _code_point(int(source[i + 3:close], 16)), close + 1
            except ValueError:
                raise Untranslatable(f"bad escape {source[i:close + 1]}") from None
        return source[i:close + 1], close + 1
    if _literal(letter) != letter:  # Go: an escaped non-word ASCII character is itself
        return _literal(letter), i + 2
    return source[i:i + 2], i + 2


def _literal(ch: str) -> str:
    """``ch`` itself, or its escape where a quoted YAML scalar would not keep it as it is."""
    return ch if _shown_as_is(ch) else _code_point(ord(ch))


def _shown_as_is(ch: str) -> bool:
    """Printable, and no line break to YAML (which also breaks at U+0085, U+2028, U+2029)."""
    return " " <= ch <= "~" or (ch >= "\xa0" and ch not in "\u2028\u2029\ufeff\ufffe\uffff"
                                and not "\ud800" <= ch <= "\udfff")


def _code_point(value: int) -> str:
    if value > 0x10FFFF:
        raise Untranslatable(f"code point {value:#x} out of range")
    return f"\\x{value:02x}" if value < 0x100 else \
        f"\\u{value:04x}" if value < 0x10000 else f"\\U{value:08x}"


def _char_class(source: str, i: int) -> tuple[str, int]:
    """A character class at ``source[i] == '['``: (its `regex` form, the index after it)."""
    out = ["["]
    j = i + 1
    negated = source.startswith("^", j)
    if negated:
        out.append("^")
        j += 1
    first = j
    while j < len(source):
        ch = source[j]
        if ch == "]" and j != first:
            out.append("]")
            return "".join(out), j + 1
        if source.startswith("[:", j):
            close = source.find(":]", j + 2)
            name = source[j + 2:close] if close >= 0 else ""
            inverted = name.startswith("^")
            ranges = POSIX.get(name.lstrip("^"))
            if ranges is None:
                raise Untranslatable(f"unknown POSIX class [:{name}:]")
            if inverted:
                whole = source.startswith("]", close + 2) and j == first and not negated
                if not whole:
                    raise Untranslatable(f"a negated POSIX class [:{name}:] inside a larger "
                                         f"class")
                return f"[^{ranges}]", close + 3
            out.append(ranges)
            j = close + 2
            continue
        if ch == "\\":
            piece, j = _escape(source, j)
            out.append(piece)
            continue
        out.append(r"\[" if ch == "[" else _literal(ch))
        j += 1
    raise Untranslatable("unterminated character class")


# ── configuration → pack ──────────────────────────────────────────────────────────────────

@dataclass
class ImportResult:
    text: str  # the pack's YAML
    rules: int
    notes: list[str]  # parts left out because they mean nothing in a conversation
    refused: list[str]  # rules that could not be translated, with the reason


class _Malformed(ValueError):
    """A configuration gitleaks itself would not load: ``field`` (and ``rule``) say where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.rule = field, None


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def _typed(node: dict, key: str, types: tuple[type, ...], what: str, where: str = "") -> Any:
    """``node[key]`` (None when absent), checked to be one of ``types``."""
    value = node.get(key)
    if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
        raise _Malformed(f"{where}{key}", f"expected {what}, got {_kind(value)}")
    return value


def _strings(node: dict, key: str, where: str = "") -> list[str]:
    """A list-of-strings field as gitleaks reads it: a lone string is a one-item list."""
    value = node.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _Malformed(f"{where}{key}", f"expected a string or an array of strings, got "
                                          f"{_kind(value)}")
    for k, item in enumerate(value):
        if not isinstance(item, str):
            raise _Malformed(f"{where}{key}[{k}]", f"expected a string, got {_kind(item)}")
    return value


def _allowlists(node: dict, where: str = "") -> list[tuple[str, dict]]:
    """A rule's (or the configuration's) allowlists with their field names: the
    ``[allowlist]`` table of older versions and the ``[[allowlists]]`` array of newer ones."""
    found = []
    old, new = node.get("allowlist"), node.get("allowlists")
    if old is not None:
        if not isinstance(old, dict):
            raise _Malformed(f"{where}allowlist", f"expected a table, got {_kind(old)}")
        found.append((f"{where}allowlist", old))
    if new is not None:
        if not isinstance(new, list):
            raise _Malformed(f"{where}allowlists", f"expected [[allowlists]] tables, got "
                                                   f"{_kind(new)}")
        for k, allow in enumerate(new):
            if not isinstance(allow, dict):
                raise _Malformed(f"{where}allowlists[{k}]", f"expected a table, got "
                                                            f"{_kind(allow)}")
            found.append((f"{where}allowlists[{k}]", allow))
    return found


_CONDITIONS = {"": "OR", "OR": "OR", "||": "OR", "AND": "AND", "&&": "AND"}  # as gitleaks reads


def _convert_allowlist(allow: dict, where: str, field_name: str,
                       notes: list[str]) -> dict[str, list[str]]:
    """One gitleaks allowlist as fields of a pack allowlist; {} when it can never apply."""
    at = f"{field_name}."
    condition = _CONDITIONS.get(str(_typed(allow, "condition", (str,), "AND or OR", at) or
                                    "").upper())
    if condition is None:
        raise _Malformed(f"{at}condition", f"unknown condition {allow['condition']!r} "
                                           f"(AND or OR)")
    regexes, stopwords = _strings(allow, "regexes", at), _strings(allow, "stopwords", at)
    paths_or_commits = bool(_strings(allow, "paths", at) or _strings(allow, "commits", at))
    target = _typed(allow, "regexTarget", (str,), "secret, match or line", at) or "secret"
    if condition == "AND" and paths_or_commits:
        notes.append(f"{where}: left out (condition AND with paths/commits: a conversation has "
                     f"neither, so it never applies)")
        return {}
    if paths_or_commits:
        notes.append(f"{where}: paths/commits left out (a conversation has neither)")
    if condition == "AND" and regexes and stopwords:
        notes.append(f"{where}: left out (condition AND over regexes and stopwords cannot be "
                     f"expressed; the rule reports more, never less)")
        return {}
    pack_field = {"secret": "regexes", "match": "match_regexes", "line": "line_regexes"}.get(target)
    if pack_field is None:
        raise Untranslatable(f"unknown regexTarget {target!r}")
    converted: dict[str, list[str]] = {}
    if regexes:
        converted[pack_field] = [go_regex(r) for r in regexes]
    if stopwords:
        converted["stopwords"] = stopwords
    return converted


def go_regex(source: str) -> str:
    """A gitleaks (Go RE2) regex as a `regex` pattern that compiles: ``Untranslatable``, with
    the reason, where RE2 refuses it (first: the `regex` module expands nested repeats when it
    compiles, so ``(?:(?:a{1000}){1000}){100}`` would exhaust memory), where it has no
    translation, or where the `regex` module cannot compile the translation."""
    _refused_by_re2(source)
    pattern = translate_regex(source)
    try:
        regex.compile(pattern)
    except (regex.error, OverflowError) as exc:
        raise Untranslatable(str(exc)) from None
    except RecursionError:
        raise Untranslatable("nested too deeply for the `regex` module") from None
    return pattern


_RE2_HINTS = {"pattern too large": "its program is over RE2's memory budget (max_mem, 8 MiB)",
              "invalid repetition size": "nested repeats multiply: RE2 and Go's regexp allow "
                                         "at most 1000 copies"}


def _refused_by_re2(source: str) -> None:
    """Raise ``Untranslatable`` if RE2 (the dialect gitleaks' regexes are written in) refuses
    ``source``, its size limits included: RE2 compiles in linear time and bounded memory."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the reason is reported with the rule, not logged
    try:
        re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else type(exc).__name__
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        hint = next((f" ({h})" for key, h in _RE2_HINTS.items() if reason.startswith(key)), "")
        raise Untranslatable(f"RE2 refuses it: {reason}{hint}") from None


def _merge(into: dict[str, list[str]], extra: dict[str, list[str]]) -> None:
    for key, values in extra.items():
        bucket = into.setdefault(key, [])
        bucket += [v for v in values if v not in bucket]


def _rule_id(raw: str, seen: set[str]) -> str:
    base = re.sub(r"[^a-z0-9._-]+", "-", raw.lower()).strip("-._") or "rule"
    candidate, n = base, 2
    while candidate in seen:
        candidate, n = f"{base}-{n}", n + 1
    seen.add(candidate)
    return candidate


def convert(config: dict[str, Any], *, name: str = "gitleaks", source: str = "",
            inline_allow: bool = True, path: str | None = None) -> ImportResult:
    """A parsed gitleaks configuration as a pack (YAML text), with what was left out. A
    configuration gitleaks itself would not load raises ``PackError`` naming ``path``, the rule
    and the field (``rules[2]``, ``allowlists[0].regexes[1]``)."""
    try:
        return _convert(config, name, source, inline_allow)
    except _Malformed as exc:
        raise PackError(str(exc), rule=exc.rule, field=exc.field, path=path) from None


def _convert(config: dict[str, Any], name: str, source: str,
             inline_allow: bool) -> ImportResult:
    notes: list[str] = []
    refused: list[str] = []
    if isinstance(config.get("extend"), dict):
        notes.append("[extend]: not followed; import the configuration it extends as its own "
                     "pack (gitleaks' default configuration: see README)")
    global_allow: list[tuple[dict, set[str] | None]] = []
    for position, (field_name, allow) in enumerate(_allowlists(config)):
        where = f"global allowlist #{position + 1}"
        targets = _strings(allow, "targetRules", f"{field_name}.")
        try:
            converted = _convert_allowlist(allow, where, field_name, notes)
        except Untranslatable as exc:
            refused.append(f"{where}: {exc}")
            continue
        global_allow.append((converted, set(targets) if targets else None))
    raw_rules = config.get("rules")
    if raw_rules is not None and not isinstance(raw_rules, list):
        raise _Malformed("rules", f"expected [[rules]] tables, got {_kind(raw_rules)}")
    rules_out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, rule in enumerate(raw_rules or []):
        if not isinstance(rule, dict):
            raise _Malformed(f"rules[{position}]", f"expected a [[rules]] table, got "
                                                   f"{_kind(rule)}")
        try:
            gid = _typed(rule, "id", (str,), "a string", f"rules[{position}].") or \
                f"rule-{position + 1}"
            converted_rule = _convert_rule(rule, gid, global_allow, inline_allow, seen, notes)
        except _Malformed as exc:  # named by its id, else by its place
            if isinstance(rule.get("id"), str):
                exc.rule = rule["id"]
            elif not exc.field.startswith("rules["):
                exc.field = f"rules[{position}].{exc.field}"
            raise
        except Untranslatable as exc:
            refused.append(f"rule {gid!r}: {exc}")
            continue
        if converted_rule is not None:
            rules_out.append(converted_rule)
    header = {"name": name, "version": str(config.get("version") or "1"),
              "description": f"Imported from the gitleaks configuration {source}".strip()}
    notes, refused = [_visible(n) for n in notes], [_visible(r) for r in refused]
    return ImportResult(_dump(header, rules_out, notes, refused), len(rules_out), notes, refused)


def _convert_rule(rule: dict, gid: str, global_allow: list[tuple[dict, set[str] | None]],
                  inline_allow: bool, seen: set[str], notes: list[str]) -> dict[str, Any] | None:
    """One gitleaks rule as a pack rule; None when it means nothing in a conversation.
    Raises ``Untranslatable`` (the rule is refused) or ``_Malformed``."""
    where = f"rule {gid!r}"
    source = _typed(rule, "regex", (str,), "a string")
    description = _typed(rule, "description", (str,), "a string")
    group = _typed(rule, "secretGroup", (int,), "an integer")
    entropy = _typed(rule, "entropy", (int, float), "a number")
    if entropy is not None and not math.isfinite(entropy):
        raise _Malformed("entropy", f"expected a finite number, got {entropy}")
    keywords = [k.lower() for k in _strings(rule, "keywords") if k]
    allowlists = _allowlists(rule)
    if not source:
        notes.append(f"{where}: left out (a path-only rule: a conversation has no files)")
        return None
    pattern = go_regex(source)
    allowlist: dict[str, list[str]] = {}
    for k, (field_name, allow) in enumerate(allowlists):
        try:
            converted = _convert_allowlist(allow, f"{where}, allowlist #{k + 1}", field_name,
                                           notes)
        except Untranslatable as exc:
            raise Untranslatable(f"allowlist #{k + 1}: {exc}") from None
        _merge(allowlist, converted)
    compiled_groups = regex.compile(pattern).groups
    if group is not None and group > compiled_groups:
        raise Untranslatable(f"secretGroup {group} but the regex has {compiled_groups} "
                             f"group(s)")
    if rule.get("path"):
        notes.append(f"{where}: path condition left out (the rule applies to every text)")
    if rule.get("required"):
        notes.append(f"{where}: required (composite) rules left out: the rule reports on its own")
    for converted, targets in global_allow:
        if targets is None or gid in targets:
            _merge(allowlist, converted)
    if inline_allow:
        _merge(allowlist, {"line_regexes": [regex.escape(INLINE_MARKER)]})
    out: dict[str, Any] = {"id": _rule_id(gid, seen), "kind": "regex"}
    if description:
        out["description"] = description
    out["pattern"] = pattern
    if group is not None and group > 0:
        out["group"] = group
    elif compiled_groups:
        out["group"] = "first"
    if keywords:
        out["keywords"] = keywords
    if entropy is not None and entropy > 0:
        out["entropy"] = float(entropy)
    if allowlist:
        out["allowlist"] = allowlist
    return out


# ── YAML out ──────────────────────────────────────────────────────────────────────────────

_REGEX_KEYS = {"pattern", "patterns", "regexes", "match_regexes", "line_regexes"}


def _visible(text: str) -> str:
    """``text`` with every character YAML would read as a line break or refuse (controls, NEL,
    U+2028...) written as its escape: a refusal reason that quotes a crafted regex stays one
    comment line, and prints as one line."""
    return "".join(_literal(c) for c in text)


def _scalar(value: Any, regex_field: bool) -> str:
    if not isinstance(value, str):
        return json.dumps(value)
    if regex_field:  # single-quoted, as the pack format demands of regexes
        if _visible(value) != value:  # translate_regex escapes them: never reached
            raise ValueError(f"a regex holding a character YAML cannot quote: {value!r}")
        return "'" + value.replace("'", "''") + "'"
    # double-quoted, every character YAML would not keep as it is escaped (\x0a, \u2028)
    return '"' + "".join('\\' + c if c in '"\\' else _literal(c) for c in value) + '"'


def _dump(header: dict, rules: list[dict], notes: list[str], refused: list[str]) -> str:
    lines = ["# Generated by `firewall rules import gitleaks`; regenerate rather than edit."]
    lines += [f"# left out: {_visible(note)}" for note in notes]
    lines += [f"# refused: {_visible(reason)}" for reason in refused]
    lines += [f"{key}: {_scalar(value, False)}" for key, value in header.items()]
    lines += ["defaults:", "  sensitive: true", "  priority: 80", "rules:"]
    for rule in rules:
        prefix = "  - "
        for key, value in rule.items():
            if key == "allowlist":
                lines.append("    allowlist:")
                for sub, items in value.items():
                    lines.append(f"      {sub}:")
                    lines += [f"        - {_scalar(v, sub in _REGEX_KEYS)}" for v in items]
            elif isinstance(value, list):
                lines.append(f"{prefix}{key}: [{', '.join(_scalar(v, False) for v in value)}]")
            else:
                lines.append(f"{prefix}{key}: {_scalar(value, key in _REGEX_KEYS)}")
            prefix = "    "
    return "\n".join(lines) + "\n"


def import_file(path: str | Path, *, name: str = "gitleaks",
                inline_allow: bool = True) -> ImportResult:
    """Read and convert a gitleaks TOML file; the pack is checked by the pack parser."""
    import tomllib

    from ..extraction.packs import parse_pack

    path = Path(path)
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(f"cannot read: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise PackError(f"invalid TOML: {exc}", path=str(path)) from None
    result = convert(config, name=name, source=path.name, inline_allow=inline_allow,
                     path=str(path))
    parse_pack(result.text, f"<imported from {path.name}>")  # what we write must load
    return result


# ── command line ──────────────────────────────────────────────────────────────────────────

def add_import_command(rules_subparsers: Any) -> argparse.ArgumentParser:
    command = rules_subparsers.add_parser(
        "import", help="convert another detector's configuration into a rule pack",
        description="Convert a gitleaks configuration (TOML) into a pack of sensitive rules. "
                    "Parts that mean nothing in a conversation (paths, commits) are left out "
                    "and listed; rules whose regex cannot be translated are refused and listed "
                    "(exit status 1).")
    command.add_argument("format", choices=("gitleaks",), help="the detector the file is for")
    command.add_argument("config", metavar="CONFIG.toml", help="its configuration file")
    command.add_argument("--out", metavar="PACK.yaml", help="write the pack here, not stdout")
    command.add_argument("--name", default="gitleaks", help="pack name (default: gitleaks)")
    command.add_argument("--no-inline-allow", dest="inline_allow", action="store_false",
                         help=f"do not honour the {INLINE_MARKER} marker: any text of the "
                              "conversation, a tool's output too, could carry it")
    command.set_defaults(func=cmd_rules_import)
    return command


def cmd_rules_import(args: argparse.Namespace) -> int:
    if not RULE_ID.match(args.name):
        raise PackError(f"pack name {args.name!r} must match {RULE_ID.pattern}", field="--name")
    result = import_file(args.config, name=args.name, inline_allow=args.inline_allow)
    if args.out:
        Path(args.out).write_text(result.text, encoding="utf-8")
    else:
        sys.stdout.write(result.text)
    for note in result.notes:
        sys.stderr.write(f"left out: {note}\n")
    for reason in result.refused:
        sys.stderr.write(f"refused: {reason}\n")
    sys.stderr.write(f"{result.rules} rule(s) imported, {len(result.refused)} refused\n")
    return 1 if result.refused else 0
