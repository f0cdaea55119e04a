"""The text as the rules read it: terminal escapes and CJK punctuation read as spaces.

A path right after a colour code (``\\x1b[01;34msrc/app\\x1b[0m`` of ``ls --color``, git,
pytest) is glued to the escape's final letter, and every path rule's boundary refuses it; a
URL before a full stop written in Chinese (``http://localhost:5173/。``) keeps it, as the
``。`` is no ASCII punctuation a rule trims; ``端口：5173`` has no colon a port rule knows. The
rules cannot name these characters themselves: a rule holding non-ASCII characters leaves the
Hyperscan database for non-ASCII text (``multimatch``). So the extractor matches its rules on
this view, where each such character is an ASCII space, one code point for one: every offset
holds, and every value is sliced from the source (``extract.Extractor._scan_plain``).
"""

from __future__ import annotations

import re
import unicodedata

# ECMA-48 escape sequences, as terminals and the tools that colour their output write them
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours and cursor moves (\x1b[01;34m, \x1b[2K)
    r"|\x1b\]8;[^;\x07\x1b]*;"  # an OSC 8 hyperlink's opening: the URI after it stays text
    r"|\x1b\][0-9]*;?"  # other OSC openings (a window title stays text)
    r"|\x1b[ -/]*[0-~]"  # two-character and nF escapes, ST (\x1b\\), charsets (\x1b(B)
    r"|[\x1b\x07]")  # a lone ESC; BEL, which ends an OSC


def _punctuation() -> str:
    """The punctuation, symbols and spaces of CJK writing and of the full-width forms: never
    part of an ASCII literal, and written right against one (no space before or after)."""
    blocks = [(0x3000, 0x303F),  # CJK symbols and punctuation: 、。「」『』【】〈〉《》〜
              (0xFE10, 0xFE1F), (0xFE30, 0xFE4F),  # vertical and compatibility forms
              (0xFE50, 0xFE6F),  # small forms
              (0xFF01, 0xFF65),  # full-width ASCII punctuation (！，：；（）), half-width 「」、・
              (0xFFE0, 0xFFEE)]  # full-width signs (￥, ￡)
    chars = [chr(c) for low, high in blocks for c in range(low, high + 1)
             if unicodedata.category(chr(c))[0] in "PSZ"]  # not 々〆〇 nor full-width letters
    # what Chinese and Japanese prose puts against a word: “quotes”, …… and —— (not ’, an
    # apostrophe in Latin names and contractions), the katakana middle dot
    return "".join(chars) + "\u201c\u201d\u2026\u2014\u2015\u30fb"


_PUNCTUATION = _punctuation()
_HAS_PUNCTUATION = re.compile("[" + re.escape(_PUNCTUATION) + "]")
_AS_SPACES = str.maketrans(dict.fromkeys(_PUNCTUATION, " "))


def _spaces(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


def plain(text: str) -> str:
    """``text`` with every escape sequence and CJK punctuation mark as ASCII spaces (same
    length in code points); ``text`` itself, the same object, when it holds none."""
    view = text
    if "\x1b" in text:
        view = _ESCAPE.sub(_spaces, view)
    if not text.isascii() and _HAS_PUNCTUATION.search(text) is not None:
        view = view.translate(_AS_SPACES)
    return view


def untouched(text: str, view: str, start: int, end: int) -> bool:
    """``text[start:end]`` holds no character the view replaced."""
    return text[start:end] == view[start:end]


def trimmed(text: str, view: str, start: int, end: int) -> tuple[int, int] | None:
    """A match of the view cut to what the source holds: replaced characters at its ends (and
    the spaces beside them) are cut off; None when one remains inside, or nothing is left."""
    if start < end and text[start] != view[start]:
        while start < end and (text[start] != view[start] or text[start].isspace()):
            start += 1
    if start < end and text[end - 1] != view[end - 1]:
        while start < end and (text[end - 1] != view[end - 1] or text[end - 1].isspace()):
            end -= 1
    if start == end or not untouched(text, view, start, end):
        return None
    return start, end
