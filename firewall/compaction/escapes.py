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

from collections.abc import Iterator

from ..json_values import spelling_pattern  # shared: the audit's archive masks with it too


def escaped_spellings(value: str, text: str) -> Iterator[tuple[int, int]]:
    """The spans of ``text`` spelling ``value`` with at least one JSON escape (the plain
    spelling is a ``str.find``: the caller's). Nothing to look for without a backslash."""
    if not value or "\\" not in text:
        return
    for match in spelling_pattern(value).finditer(text, overlapped=True):
        if "\\" in match.group(0):
            yield match.span()
