"""Every JSON-escaped spelling of a value in raw text.

A rule may find a secret in a decoded JSON value (``WG2x…/2kU…``) while the raw text that goes
to a summarizer spells it with escapes (PHP writes ``\\/`` for every ``/``, Python's
``json.dumps`` writes ``\\u00e4`` for ``ä``, any encoder may write ``\\u0041`` for ``A``).
Masking only the plain spelling would leave the secret, piece by piece, beside its placeholder.

The pattern of a value allows, for each of its characters, the character itself, its
``\\uXXXX`` escape (either hex case; a UTF-16 surrogate pair beyond the BMP) and its short escape
(``\\/``, ``\\"``, ``\\\\``, ``\\n``...). One backslash or several introduce an escape, so JSON
encoded inside a JSON string (``\\\\\\/``, ``\\\\u00e4``) is matched too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import regex


_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r",
          "\t": "t"}
_INTRODUCER = r"\\+"  # one escape level or more


def _hex(code: int) -> str:
    """``\\uXXXX`` for one UTF-16 code unit, either hex case."""
    digits = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")
    return _INTRODUCER + "u" + digits


def _unit(char: str) -> str:
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
def spelling_pattern(value: str) -> regex.Pattern[str]:
    """A pattern matching ``value`` in any mix of plain and JSON-escaped characters."""
    return regex.compile("".join(_unit(c) for c in value))


def escaped_spellings(value: str, text: str) -> Iterator[tuple[int, int]]:
    """The spans of ``text`` spelling ``value`` with at least one JSON escape (the plain
    spelling is a ``str.find``: the caller's). Nothing to look for without a backslash."""
    if not value or "\\" not in text:
        return
    for match in spelling_pattern(value).finditer(text, overlapped=True):
        if "\\" in match.group(0):
            yield match.span()
