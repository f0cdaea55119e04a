"""Look-alike letters: Cyrillic and Greek letters drawn like Latin ones, which NFKC leaves alone.

``АBC123X`` (a Cyrillic ``А``) reads as ``ABC123X`` and is not the same string: a classic
spoofing signal. The extractor matches rules on text with these letters folded to their Latin
twins (one character for one, so offsets hold) and pins the source's own bytes, flagged
``mixed_script``; the validator folds them to recognise a look-alike copy of a literal.
"""

from __future__ import annotations

import re

HOMOGLYPHS: dict[str, str] = {
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "а": "a", "е": "e", "о": "o", "р": "p",
    "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "ο": "o",
}
_FOLD = str.maketrans(HOMOGLYPHS)
_ANY = re.compile("[" + "".join(HOMOGLYPHS) + "]")
_LATIN = re.compile(r"[A-Za-z0-9]")


def has_homoglyphs(text: str) -> bool:
    return not text.isascii() and _ANY.search(text) is not None


def fold(text: str) -> str:
    """``text`` with every look-alike letter replaced by its Latin twin (same length)."""
    return text.translate(_FOLD)


def mixed_script(value: str) -> bool:
    """Look-alike letters beside ASCII letters or digits: a Latin-looking string that is not."""
    return has_homoglyphs(value) and _LATIN.search(value) is not None
