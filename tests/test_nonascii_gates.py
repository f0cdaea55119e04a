"""The cheaper passes on non-ASCII text decide nothing themselves: the keyword stage (one RE2
set over the UTF-8 bytes of the folded text, an automaton of the non-ASCII keywords only)
offers every rule the full automaton offers, and the noise gate (one RE2 set of the widened
noise patterns over the UTF-8 bytes) keeps every noise span that running them all finds."""

from __future__ import annotations

import functools

from hypothesis import given, settings, strategies as st

from firewall.extraction.extract import Extractor
from firewall.extraction.packs import load_packs
from firewall.extraction.regex_syntax import fold_case


@functools.lru_cache(maxsize=1)
def extractor():
    return Extractor(load_packs())


def prefilter():
    return extractor()._prefilter


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


def all_noise_spans(ex, text: str) -> list[tuple[int, int]]:
    """Every noise pattern run, none gated (the definition)."""
    return sorted(s for n in ex.noise for s in n.spans(text, text.lower(), 5.0, None))


NOISY = [
    "     1→import os\n     2→x = read_key(\"k\")\n    10→def parse_4242(): pass\n",
    "src/app.py:12: error → fix\nTraceback … line 42, in main\n",
    "-rw-r--r-- 1 root root 21094 Oct 10 12:00 café.txt\n",
    '{"created": "2024-01-02T09:30:00Z", "next": "/v1/ünits?page=2", "x": null}',
    "PID  USER  %CPU  COMMAND\n 4242 root  1.0  python → ok\n",
]


def test_the_noise_gate_on_non_ascii_text_keeps_every_span():
    ex = extractor()
    for text in NOISY:
        assert not text.isascii()
        assert sorted(ex.noise_spans(text, 5.0)) == all_noise_spans(ex, text), text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(NOISY + ["\n", "  12→", "a.py:7:", "é", "4242\t"]),
                          st.text(max_size=4)), max_size=8))
def test_property_the_noise_gate_never_loses_a_span(pieces):
    ex = extractor()
    text = "".join(pieces) + "→"
    assert sorted(ex.noise_spans(text, 5.0)) == all_noise_spans(ex, text)


def test_the_characters_widening_leaves_out_are_never_word_digit_space_or_cased():
    """Widened classes leave out the Arrows block and box drawing, block elements and geometric
    shapes (``regex_syntax.NOT_WIDENED``): sound only while `regex` matches none of them with
    a shorthand, a letter range or case folding."""
    import regex

    from firewall.extraction.regex_syntax import NOT_WIDENED, relax

    for low, high in NOT_WIDENED:
        for code in range(low, high + 1):
            c = chr(code)
            for pattern in (r"\w", r"\d", r"\s", r"(?i)[\w\d\s]", r"(?i)[a-zA-Z0-9_]",
                            r"\p{Alphabetic}", r"(?i)\p{Lt}"):
                assert regex.match(pattern, c) is None, (hex(code), pattern)
            assert c.casefold() == c.upper() == c.lower() == c
    # and the widened form still matches every other non-ASCII character where `regex`'s does
    import re2

    wide = re2.compile(relax(r"\w", unicode=True))
    for c in "éßİı\u212aⒶ\u0301\ufe0f中🙂‿":
        assert wide.search(c), c
    assert wide.search("→") is None and wide.search("│") is None


def test_a_gutter_line_is_no_word_to_a_widened_locator():
    """The point of leaving the arrow out: ``12→import`` holds no word with a digit."""
    import re2

    from firewall.extraction.regex_syntax import relax

    token = re2.compile(relax(r"(?<![\w-])[\w-]*(?:\d[\w-]*[A-Za-z]|[A-Za-z][\w-]*\d)",
                              unicode=True))
    assert token.search("    12→import os") is None
    assert token.search("    12→import os2") is not None
