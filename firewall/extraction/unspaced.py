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



_SEPARATORS = "/\\"


def _path_char(c: str) -> bool:
    return c in _SEPARATORS or c in "._-~" or (c.isalnum() and c.isascii())


def cut_from_path(text: str, start: int, end: int) -> bool:
    """``text[start:end]``, found with these letters read as spaces, is a piece of a path one
    of whose segments holds them (``d:/work/08_客户跟进/scripts/x.mjs`` gives ``d:/work/08_``
    and ``/scripts/x.mjs``): the letters beside it are glued to the path on their other side.
    A path after or before a sentence (``请打开/home/u/a.py文件``) is not such a piece."""
    i = start
    while i > 0 and _UNSPACED.match(text[i - 1]):
        i -= 1
    if i < start and i > 0 and (
            text[i - 1] in _SEPARATORS
            or (text[start] in _SEPARATORS and _path_char(text[i - 1]))):
        return True
    j = end
    while j < len(text) and _UNSPACED.match(text[j]):
        j += 1
    return j > end and (text[end - 1] in _SEPARATORS
                        or (j < len(text) and text[j] in _SEPARATORS))


def glued_tail(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` is only letters of these scripts: a sentence glued to what ends
    at ``start``."""
    return all(_UNSPACED.match(c) for c in text[start:end])
