"""The keyword stage on non-ASCII text (one RE2 set over the UTF-8 bytes of the folded text,
an automaton of the non-ASCII keywords only) offers every rule the full automaton offers."""

from __future__ import annotations

import functools

from hypothesis import given, settings, strategies as st

from firewall.extraction.extract import Extractor
from firewall.extraction.packs import load_packs
from firewall.extraction.regex_syntax import fold_case


@functools.lru_cache(maxsize=1)
def prefilter():
    return Extractor(load_packs())._prefilter


def plain_keyed(pf, text: str) -> set[int]:
    """The stage as the full automaton answers it (the definition)."""
    allowed = set(pf._unkeyed)
    for _, indices in pf._automaton.iter(fold_case(text)):
        allowed |= indices
    return allowed


TEXTS = [
    "     1→# token = read_key()\n     2→password: x\n",
    "│ ├── api_key.py ✓ ending 4242 ••••",
    "STRAẞE \u212aEY İD ıd \u017fecret ﬁle",  # letters that fold to ASCII ones
    "Me llamo José, mi nombre es … i’m here",
    "emoji 🔑 secret=abc 🙂 order #W123",
]


def test_the_built_in_packs_have_non_ascii_keywords_and_the_fast_stage_is_used():
    pf = prefilter()
    assert pf._keyword_set is not None and pf._wide_keywords is not None


def test_non_ascii_texts_are_offered_every_rule_the_full_automaton_offers():
    pf = prefilter()
    for text in TEXTS:
        assert not text.isascii()
        assert plain_keyed(pf, text) <= pf._keyed(text, None), text


def test_lone_surrogates_fall_back_to_the_full_automaton():
    pf = prefilter()
    text = "key \ud800 password"
    assert pf._keyed(text, None) == plain_keyed(pf, text)


_PIECES = ["key", "KEY", "pass", "token", "ending", "••••", "i’m", "llamo", "→", "│", "é",
           "\u212a", "ß", "İ", "ı", "\u017f", "ﬁ", " ", "\n", "-", "/", "x", "7"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=12))
def test_property_the_fast_keyword_stage_never_offers_fewer_rules(pieces):
    pf = prefilter()
    text = "".join(pieces) + "→"  # non-ASCII: the stage under test
    assert plain_keyed(pf, text) <= pf._keyed(text, None)
