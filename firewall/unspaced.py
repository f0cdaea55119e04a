"""Scripts written without spaces between words: Chinese, Japanese, Thai, Lao, Khmer and
Burmese (and Korean particles).

An ID typed inside such a sentence is glued to its letters (``注文W1234567の状況``, ``订单号
#W1234567``, ``คำสั่งซื้อ#W1234567ถูกยกเลิก``). Those letters are word characters to ``\\w``,
so every rule's boundary sees one long word and finds nothing. The extractor matches rules
again on a view of the text with these letters as spaces, one character for one (offsets hold),
and pins what it finds there with the source's own bytes; the validator does not count them as
glue either (``word_char``).
"""

from __future__ import annotations

import regex

_UNSPACED = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def has_unspaced(text: str) -> bool:
    return not text.isascii() and _UNSPACED.search(text) is not None


def spaced(text: str) -> str:
    """``text`` with every letter of those scripts replaced by a space (same length)."""
    return _UNSPACED.sub(" ", text)


def word_char(c: str) -> bool:
    """A letter or digit a literal beside it is glued to: not one of these scripts', which
    stand next to a literal without a space in ordinary writing."""
    return c.isalnum() and (c.isascii() or _UNSPACED.match(c) is None)
