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
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from .errors import PackError

INLINE_MARKER = "gitleaks:allow"
RULE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Go's POSIX classes are ASCII; the `regex` module's would take any Unicode letter
POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": r"\x00-\x7f", "blank": r"\t ",
         "cntrl": r"\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
         "print": " -~", "punct": r"!-/:-@\[-`{-~", "space": r"\t\n\x0b\f\r ", "upper": "A-Z",
         "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


class Untranslatable(ValueError):
    """A Go regex construct with no `regex` equivalent."""


# ── Go RE2 → `regex` ─────────────────────────────────────────────────────────────────────

@dataclass
class _Group:
    multiline: bool
    wrappers: list[str] = field(default_factory=list)  # "(?i:" opened by a bare (?i) here


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
    * ``{,n}``, which Go reads as text, is escaped.

    Go's ``\\d \\w \\s \\b`` are ASCII and the `regex` ones Unicode: they differ only next to
    non-ASCII text, where the imported rule matches more. Raises ``Untranslatable`` for the
    ungreedy flag ``U``, ``\\C`` and negated POSIX classes inside a larger class.
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
                bad = set(on + off) - set("imsx")
                if bad:
                    raise Untranslatable(f"unknown flag(s) {''.join(sorted(bad))!r}")
                multiline = stack[-1].multiline
                multiline = True if "m" in on else False if "m" in off else multiline
                spec = on + (f"-{off}" if off else "")
                if end == ":":  # scoped: (?i:...)
                    out.append(f"(?{spec}:")
                    stack.append(_Group(multiline))
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
            stack.append(_Group(stack[-1].multiline))
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
        out.append(ch)
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
        return "".join(regex.escape(c) for c in text), len(source) if end < 0 else end + 2
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
    return source[i:i + 2], i + 2


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
        out.append(r"\[" if ch == "[" else ch)
        j += 1
    raise Untranslatable("unterminated character class")


# ── configuration → pack ──────────────────────────────────────────────────────────────────

@dataclass
class ImportResult:
    text: str  # the pack's YAML
    rules: int
    notes: list[str]  # parts left out because they mean nothing in a conversation
    refused: list[str]  # rules that could not be translated, with the reason


def _allowlists(node: dict, key_old: str, key_new: str) -> list[dict]:
    """A rule's (or the configuration's) allowlists: the ``[allowlist]`` table of older
    versions and the ``[[allowlists]]`` array of newer ones."""
    found = []
    if isinstance(node.get(key_old), dict):
        found.append(node[key_old])
    found += [a for a in node.get(key_new) or [] if isinstance(a, dict)]
    return found


def _convert_allowlist(allow: dict, where: str, notes: list[str]) -> dict[str, list[str]]:
    """One gitleaks allowlist as fields of a pack allowlist; {} when it can never apply."""
    paths_or_commits = bool(allow.get("paths") or allow.get("commits"))
    condition = str(allow.get("condition", "OR")).upper()
    has_regexes, stopwords = bool(allow.get("regexes")), list(allow.get("stopwords") or [])
    if condition == "AND" and paths_or_commits:
        notes.append(f"{where}: left out (condition AND with paths/commits: a conversation has "
                     f"neither, so it never applies)")
        return {}
    if paths_or_commits:
        notes.append(f"{where}: paths/commits left out (a conversation has neither)")
    if condition == "AND" and has_regexes and stopwords:
        notes.append(f"{where}: left out (condition AND over regexes and stopwords cannot be "
                     f"expressed; the rule reports more, never less)")
        return {}
    target = str(allow.get("regexTarget") or "secret")
    field_name = {"secret": "regexes", "match": "match_regexes", "line": "line_regexes"}.get(target)
    if field_name is None:
        raise Untranslatable(f"{where}: unknown regexTarget {target!r}")
    converted: dict[str, list[str]] = {}
    if has_regexes:
        converted[field_name] = [translate_regex(r) for r in allow["regexes"]]
    if stopwords:
        converted["stopwords"] = [str(w) for w in stopwords]
    return converted


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
            inline_allow: bool = True) -> ImportResult:
    """A parsed gitleaks configuration as a pack (YAML text), with what was left out."""
    notes: list[str] = []
    refused: list[str] = []
    if isinstance(config.get("extend"), dict):
        notes.append("[extend]: not followed; import the configuration it extends as its own "
                     "pack (gitleaks' default configuration: see README)")
    global_allow: list[tuple[dict, set[str] | None]] = []
    for position, allow in enumerate(_allowlists(config, "allowlist", "allowlists")):
        targets = allow.get("targetRules")
        try:
            converted = _convert_allowlist(allow, f"global allowlist #{position + 1}", notes)
        except Untranslatable as exc:
            refused.append(f"global allowlist #{position + 1}: {exc}")
            continue
        global_allow.append((converted, set(targets) if targets else None))
    rules_out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, rule in enumerate(config.get("rules") or []):
        gid = str(rule.get("id") or f"rule-{position + 1}")
        where = f"rule {gid!r}"
        if not rule.get("regex"):
            notes.append(f"{where}: left out (a path-only rule: a conversation has no files)")
            continue
        try:
            pattern = translate_regex(str(rule["regex"]))
            regex.compile(pattern)
            allowlist: dict[str, list[str]] = {}
            for k, allow in enumerate(_allowlists(rule, "allowlist", "allowlists")):
                _merge(allowlist, _convert_allowlist(allow, f"{where}, allowlist #{k + 1}",
                                                     notes))
        except (Untranslatable, regex.error) as exc:
            refused.append(f"{where}: {exc}")
            continue
        if rule.get("path"):
            notes.append(f"{where}: path condition left out (the rule applies to every text)")
        if rule.get("required"):
            notes.append(f"{where}: required (composite) rules left out: the rule reports on "
                         f"its own")
        for converted, targets in global_allow:
            if targets is None or gid in targets:
                _merge(allowlist, converted)
        if inline_allow:
            _merge(allowlist, {"line_regexes": [regex.escape(INLINE_MARKER)]})
        out: dict[str, Any] = {"id": _rule_id(gid, seen), "kind": "regex"}
        if rule.get("description"):
            out["description"] = str(rule["description"])
        out["pattern"] = pattern
        group = rule.get("secretGroup")
        compiled_groups = regex.compile(pattern).groups
        if isinstance(group, int) and group > 0:
            if group > compiled_groups:
                refused.append(f"{where}: secretGroup {group} but the regex has "
                               f"{compiled_groups} group(s)")
                continue
            out["group"] = group
        elif compiled_groups:
            out["group"] = "first"
        keywords = [str(k).lower() for k in rule.get("keywords") or [] if str(k)]
        if keywords:
            out["keywords"] = keywords
        entropy = rule.get("entropy")
        if isinstance(entropy, (int, float)) and entropy > 0:
            out["entropy"] = float(entropy)
        if allowlist:
            out["allowlist"] = allowlist
        rules_out.append(out)
    header = {"name": name, "version": str(config.get("version") or "1"),
              "description": f"Imported from the gitleaks configuration {source}".strip()}
    return ImportResult(_dump(header, rules_out, notes, refused), len(rules_out), notes, refused)


# ── YAML out ──────────────────────────────────────────────────────────────────────────────

_REGEX_KEYS = {"pattern", "patterns", "regexes", "match_regexes", "line_regexes"}


def _scalar(value: Any, regex_field: bool) -> str:
    if isinstance(value, str):
        if regex_field:  # single-quoted, as the pack format demands of regexes
            if any(ord(c) < 32 and c != "\t" or c == "\x7f" for c in value):
                raise Untranslatable("a regex holding control characters cannot be written "
                                     "single-quoted; escape them (\\n, \\x00)")
            return "'" + value.replace("'", "''") + "'"
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def _dump(header: dict, rules: list[dict], notes: list[str], refused: list[str]) -> str:
    lines = ["# Generated by `firewall rules import gitleaks`; regenerate rather than edit."]
    lines += [f"# left out: {note}" for note in notes]
    lines += [f"# refused: {reason}" for reason in refused]
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

    from .packs import parse_pack

    path = Path(path)
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(f"cannot read: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise PackError(f"invalid TOML: {exc}", path=str(path)) from None
    if not isinstance(config.get("rules", []), list):
        raise PackError("expected [[rules]] tables", path=str(path), field="rules")
    result = convert(config, name=name, source=path.name, inline_allow=inline_allow)
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
