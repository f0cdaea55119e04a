"""The token estimate: its ASCII fast path gives the pieces and counts of the Unicode one."""

from __future__ import annotations

import itertools
import string

import pytest
from hypothesis import given, settings, strategies as st

from firewall import tokens
from firewall.tokens import _ASCII_PIECES, _LONG_MARKS, _LONG_WORD, _PIECES, _WORD_STEP

ASCII = "".join(map(chr, range(128)))
# the characters where pieces begin or end: cases, digits, apostrophes, marks, every space
TRICKY = "aZsStT'0 \t\n\r\x0b\x0c\x1c\x1f-_/\"{}:,."


def reference(text: str) -> int:
    """The estimate as first written: ``regex`` matches, one at a time."""
    n = 0
    for m in _PIECES.finditer(text):
        kind = m.lastgroup
        if kind is None:
            n += 1
            continue
        start, end = m.span()
        size = end - start
        if kind == "w":
            n += 1 + (size - _LONG_WORD + _WORD_STEP) // _WORD_STEP if size >= _LONG_WORD else 1
        else:
            size -= text[start] == " "
            n += 1 + (size - 2) // 2 if size > _LONG_MARKS else 1
    return n


def test_every_ascii_string_of_up_to_two_characters():
    for size in (1, 2):
        for chars in itertools.product(ASCII, repeat=size):
            text = "".join(chars)
            assert _ASCII_PIECES.findall(text) == _PIECES.findall(text), repr(text)


@pytest.mark.slow
def test_every_string_of_three_tricky_characters():
    for chars in itertools.product(TRICKY, repeat=3):
        text = "".join(chars)
        assert _ASCII_PIECES.findall(text) == _PIECES.findall(text), repr(text)
        assert tokens.estimate_tokens(text) == reference(text)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(TRICKY + string.ascii_letters + string.digits
                                         + string.punctuation), max_size=80)
       | st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_text_same_pieces_and_count(text):
    assert _ASCII_PIECES.findall(text) == _PIECES.findall(text)
    assert tokens.estimate_tokens(text) == reference(text)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_same_count(text):
    assert tokens.estimate_tokens(text) == reference(text)


def test_long_words_and_mark_runs_cost_more():
    for text in ("Authorization: Bearer", "internationalization", "!!!!!!!!", " ----", "é-été",
                 '{"order_id": "#W2378156", "items": [1, 22, 333, 4444]}\n\n', "can't WON'T"):
        assert tokens.estimate_tokens(text) == reference(text)
