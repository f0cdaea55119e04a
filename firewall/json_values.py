"""JSON in a conversation: tool results parsed with their numbers kept as written, and walks
over every leaf and key of a value (an explicit stack: a caller's object may nest deeper than
recursion allows).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any


def json_leaves(node: Any, path: str) -> Iterator[tuple[str, str | None, Any]]:
    """(path, nearest key, scalar) for every scalar, in document order; list items inherit
    their parent's key. An explicit stack: a caller's object may nest deeper than recursion."""
    stack: list[Iterator[tuple[str, str | None, Any]]] = [iter([(path, None, node)])]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        where, key, value = item
        if isinstance(value, (dict, list)):
            stack.append(_children(where, key, value))
        else:
            yield where, key, value


def _children(where: str, key: str | None, value: dict | list
              ) -> Iterator[tuple[str, str | None, Any]]:
    # a function, not a generator expression: each level keeps its own ``where`` and ``key``
    if isinstance(value, dict):
        return ((f"{where}.{k}", str(k), v) for k, v in value.items())
    return ((f"{where}[{i}]", key, v) for i, v in enumerate(value))


KEY_FIELD = "#key"  # the field of an object key: its value's path and this suffix


def json_keys(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """(field, key) of every string key of every object in a JSON value, with the field
    ``<value path>#key``; an explicit stack, as in ``json_leaves``."""
    stack: list[tuple[str, Any]] = [(path, node)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    yield f"{where}.{k}{KEY_FIELD}", k
                stack.append((f"{where}.{k}", v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))


def scalar_leaves(node: Any) -> Iterator[tuple[str | None, str]]:
    """(nearest key, text) of every string or number in a JSON value, in document order."""
    for _, key, value in json_leaves(node, ""):
        text = scalar_text(value)
        if text is not None:
            yield key, text


class JsonNumber(str):
    """A number from a JSON tool result, kept as its source text: ``1030.40`` stays ``1030.40``."""


def scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):  # arguments parsed elsewhere: the canonical spelling
        return json.dumps(value)
    return None


_DECODER = json.JSONDecoder(parse_int=JsonNumber, parse_float=JsonNumber)  # built once


def parse_json(text: str) -> Any | None:
    """A JSON tool result, numbers kept as their source text; None when it is not JSON."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        return None


EMBEDDED_JSON_TRIES = 16  # line starts tried per tool result: a code listing has many braces
_EMBEDDED_START = re.compile(r"^[ \t]*[{\[]", re.MULTILINE)


def embedded_json(text: str) -> Iterator[Any]:
    """JSON objects inside a tool result that is not JSON as a whole ("### Result\n{...}",
    a fenced block, an HTTP body after its headers): each value that starts a line and parses
    whole, and holds an object. At most ``EMBEDDED_JSON_TRIES`` starts are tried."""
    tries, pos = 0, 0
    while tries < EMBEDDED_JSON_TRIES:
        m = _EMBEDDED_START.search(text, pos)
        if m is None:
            return
        tries += 1
        start = m.end() - 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            pos = m.end()
            continue
        if isinstance(value, dict) or (isinstance(value, list)
                                       and any(isinstance(v, dict) for v in value)):
            yield value
        pos = end


def decoded(value: str) -> str:
    """``value`` with its JSON escapes decoded, when it is a valid JSON string body (a rule
    that reads raw text finds ``P\\u00e4sswort``; its other spellings are those of
    ``Pässwort``); else ``value`` itself."""
    if "\\" not in value:
        return value
    try:
        text = json.loads(f'"{value}"')
    except ValueError:
        return value
    return text if isinstance(text, str) else value


# ── JSON-escaped spellings of a value (compaction.escapes; the archive masks with them) ──

_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r",
          "\t": "t"}
_INTRODUCER = r"\\+"  # one escape level or more


def _hex(code: int) -> str:
    """``\\uXXXX`` for one UTF-16 code unit, either hex case."""
    digits = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")
    return _INTRODUCER + "u" + digits


def _unit(char: str) -> str:
    import regex  # as escapes always did: the pattern is compiled by regex

    code = ord(char)
    if code > 0xFFFF:  # JSON spells it as a surrogate pair
        code -= 0x10000
        escaped = _hex(0xD800 + (code >> 10)) + _hex(0xDC00 + (code & 0x3FF))
    else:
        escaped = _hex(code)
    options = [regex.escape(char), escaped]
    if char in _SHORT:
        options.append(_INTRODUCER + regex.escape(_SHORT[char]))
    return "(?:" + "|".join(options) + ")"


@functools.lru_cache(maxsize=1024)
def spelling_pattern(value: str) -> Any:
    """A pattern (``regex``) matching ``value`` in any mix of plain and JSON-escaped
    characters: each character itself, its ``\\uXXXX`` escape (either hex case; a UTF-16
    surrogate pair beyond the BMP) or its short escape (``\\/``, ``\\"``...), behind one
    backslash or several (JSON inside a JSON string)."""
    import regex

    return regex.compile("".join(_unit(c) for c in value))
