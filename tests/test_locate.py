"""RE2 locators: the located scan finds exactly what ``pattern.finditer`` finds."""


import pytest
import regex
from hypothesis import given, settings, strategies as st

from firewall.extraction.compiled import CompiledRegex
from firewall.extraction.extract import Extractor
from firewall.extraction.locate import build_locator, locator_source
from firewall.extraction.packs import load_packs
from firewall.extraction.prefilter import ascii_bytes

EXTRACTOR = Extractor(load_packs())
RULES = [r for r in EXTRACTOR.rules if isinstance(r, CompiledRegex)]
# pieces of every built-in rule's examples, to be cut and glued into texts near the rules' shapes
PIECES = sorted({piece for r in RULES for ex in r.rule.examples.match
                 for piece in regex.split(r"(\W)", ex.text) if piece}
                | {piece for r in RULES for text in r.rule.examples.no_match
                   for piece in regex.split(r"(\W)", text) if piece})
SEPARATORS = [" ", "\n", "-", "_", "#", ".", ":", "/", "’", "—", "é", "\u00a0", "\x0b", "٣", "$"]


def slow(rule, text):
    """What ``find`` returns without a locator: the pattern's own ``finditer``."""
    locator, rule.locator = rule.locator, None
    try:
        return rule.find(text, 5.0)
    finally:
        rule.locator = locator


texts = st.lists(st.one_of(st.sampled_from(PIECES), st.sampled_from(SEPARATORS),
                           st.text(alphabet="aZ09_-#.:/ é’", max_size=6)),
                 max_size=40).map("".join)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(texts)
def test_located_scan_equals_the_plain_scan_for_every_builtin_rule(text):
    data = ascii_bytes(text)
    for rule in RULES:
        if rule.locator is not None:
            assert rule.find(text, 5.0, data) == slow(rule, text), rule.qid
            assert rule.find(text, 5.0) == slow(rule, text), rule.qid  # the UTF-8 locator


NOISE = EXTRACTOR.noise
# pieces of every noise pattern's examples too: gutters, ps rows, JSON constants
NOISE_PIECES = sorted({piece for pack in load_packs() for noise in pack.noise
                       for ex in noise.examples for piece in regex.split(r"(\W)", ex.text)
                       if piece})
noise_texts = st.lists(st.one_of(st.sampled_from(NOISE_PIECES + PIECES),
                                 st.sampled_from(SEPARATORS + ["\t", "→", "  "])),
                       max_size=60).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(noise_texts)
def test_located_noise_spans_equal_the_plain_scan_for_every_builtin_noise_pattern(text):
    data, lowered = ascii_bytes(text), text.lower()
    for noise in NOISE:
        locator = noise.locator
        if locator is None:
            continue
        plain = [m.span() for m in noise.pattern.finditer(text) if m.end() > m.start()]
        if noise.keywords and not any(k in lowered for k in noise.keywords):
            plain = []
        assert noise.spans(text, lowered, 5.0, data) == plain, noise.qid
        assert noise.spans(text, lowered, 5.0) == plain, noise.qid  # the UTF-8 locator


@settings(max_examples=300, deadline=None)
@given(noise_texts)
def test_the_noise_gate_never_rules_out_a_noise_pattern_that_matches(text):
    data = ascii_bytes(text)
    if data is None:
        return  # the gate only judges ASCII text; other text runs every noise pattern
    possible = EXTRACTOR._noise_gate.possible(data)
    for i, noise in enumerate(NOISE):
        if any(m.end() > m.start() for m in noise.pattern.finditer(text)):
            assert i in possible, noise.qid


def test_the_noise_gate_rules_out_noise_patterns_that_cannot_match():
    text = "see src/app.py and order 1234567 today"
    possible = EXTRACTOR._noise_gate.possible(ascii_bytes(text))
    gutter = next(i for i, n in enumerate(NOISE) if n.qid.endswith("/ls-long-columns"))
    assert gutter not in possible
    assert len(possible) < len(NOISE)


def test_a_locator_hands_dense_candidates_to_the_plain_scan_with_the_same_matches():
    """Where candidates come dense (IDs in a JSON listing) the located scan passes the rest of
    the text to ``finditer``; sparse or dense, the matches are the plain scan's."""
    rule = next(r for r in EXTRACTOR.rules if r.qid == "core/number-id")
    dense = "".join(f'{{"item_id": "{1000000000 + i}", "price": {i}.5}}' for i in range(200))
    sparse = " ".join(["word"] * 400) + " order 8118291112 " + " ".join(["more"] * 400)
    for text in (dense, sparse, sparse + dense, dense + sparse):
        assert rule.find(text, 5.0, ascii_bytes(text)) == slow(rule, text)
        assert rule.find(text + "é", 5.0) == slow(rule, text + "é")  # the UTF-8 locator
    assert len(slow(rule, dense)) == 200


def test_the_generic_rules_have_locators_that_find_their_examples_literals():
    """The three rules that run on every text have locators, and through them (ASCII bytes and
    UTF-8 forms both) each example yields exactly its literals, each no-match text nothing."""
    rules = {r.qid: r for r in Extractor(load_packs("core")).rules}
    for qid in ("core/id-token", "core/hex-digest", "core/number-id"):
        rule = rules[qid]
        assert rule.locator is not None, qid
        for example in rule.rule.examples.match:
            text = example.text
            for data in (ascii_bytes(text), None):
                assert [text[a:b] for a, b in rule.find(text, 5.0, data)] == example.literals, \
                    (qid, text, data is None)
        for text in rule.rule.examples.no_match:
            assert rule.find(text, 5.0, ascii_bytes(text)) == [] == rule.find(text, 5.0), qid
    assert rules["core/number-id"].find("order 8118291112, ext #40213", 5.0) == [(6, 16), (22, 28)]


def test_lookbehind_becomes_a_consumed_character_and_lookaheads_merge():
    source, shift = locator_source(r"(?<![\w#-])#?(?=[\w-]{0,9}\d)(?=[\w-]{0,9}[A-Za-z])\w+")
    assert shift == 1
    assert source.startswith(r"(?:\A|[^\w#-])#?[\w-]*(?:\d[\w-]*[A-Za-z]|[A-Za-z][\w-]*\d")
    # two lookaheads whose characters can coincide keep the one-character branch
    source, _ = locator_source(r"(?=\w{0,9}[a-f])(?=\w{0,9}[e-z])\w+")
    assert source.endswith(r"|[\x65\x66])")


def test_a_lookbehind_locates_by_its_last_character():
    """A positive lookbehind, alone or beside ``^`` in a group, holds only after its last
    character (or a line break, or at the start): the locator consumes it, so it no longer
    stops at every number of a date or phone before a ``-``."""
    assert locator_source(r"(?<=[\s'])-\d{2,7}") == (r"(?:\A|[\s'])-\d{2,7}", 1)
    pattern = r"(?:^|(?<=^[\w./-]{1,256}[:-]))\d{1,7}[:-](?=\S|[ \t])"
    assert locator_source(pattern, regex.MULTILINE) == \
        (r"(?:\A|\n|[:-])\d{1,7}[:-](?:\S|[ \t])", 1)
    # a lookbehind that may end in more than one way, or a quantified group, is left as it was
    assert locator_source(r"(?<=a|bc)\d+")[1] == 0
    assert locator_source(r"(?:^|(?<=x))?\d+")[1] == 0
    compiled = regex.compile(pattern, regex.MULTILINE)
    locator = build_locator(pattern, regex.MULTILINE, compiled)
    text = "src/a.py:1200:  y = 2025-08-14\n1201- z\n+1 555-234-5678 at 12:30\n77:ok"
    want = [m.span() for m in compiled.finditer(text)]
    assert len(want) == 3  # 1200: 1201- 77: (not the date, the phone or the time)
    assert [m.span() for m in locator.finditer(compiled, text, ascii_bytes(text), 5.0)] == want


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1_-#. \n’é", max_size=50))
def test_located_scan_on_handwritten_shapes(text):
    for pattern in (r"(?<![\w#-])#?(?=[\w-]{0,9}\d)(?=[\w-]{0,9}[a-z])[\w-]{2,}",
                    r"(?<!\.)\b[ab]+1", r"(?<![a])b(?=\d)", r"a|b1", r"(?<!#)\w{2}(?=\s|$)",
                    r"(?<![\w-])[ab]{2,}(?=\s?[.#])|\b1[ab]+", r"(?<!_)a(?=1)|(?<!b)b(?=_)",
                    r"\ba1(?=-)|(?<!#)[ab]{2}(?=[\s.])|(?<=1)b",
                    r"(?<![\w.])(?=1)(?=[\w.]{3})\w+(?:\.\w+)?", r"(?=a)(?=[ab_]+1)\w+"):
        compiled = regex.compile(pattern)
        locator = build_locator(pattern, 0, compiled)
        assert locator is not None, pattern
        want = [m.span() for m in compiled.finditer(text)]
        assert [m.span() for m in locator.finditer(compiled, text, ascii_bytes(text), 5.0)] \
            == want, pattern
        assert [m.span() for m in locator.finditer(compiled, text, None, 5.0)] == want, pattern


def test_a_one_character_lookahead_and_a_run_lookahead_become_one_run():
    source, shift = locator_source(r"(?<![\w.])(?=\d)(?=[\w.,]{4})\d+(?:\.\d+)?")
    assert (source, shift) == (r"(?:\A|[^\w.])\d[\w.,]{3}", 1)
    assert locator_source(r"(?=a)(?=[ab]{1,3})\w+")[0] == "a[ab]{0,2}"


def test_a_locator_takes_what_follows_the_lookaheads_when_only_that_needs_a_symbol():
    """A lookahead that any word passes (four word characters) stops at every word; what the
    pattern consumes after it needs a "/": that locates it (its own lookarounds dropped)."""
    pattern = r"(?<![\w./-])(?=[\w./-]{3}[\w/-])[A-Za-z]\w{0,39}(?<!-)(?:/[A-Za-z]\w{0,39}){1,2}(?![\w/])"
    source, shift = locator_source(pattern)
    assert (source, shift) == (r"(?:\A|[^\w./-])[A-Za-z]\w{0,39}(?<!-)(?:/[A-Za-z]\w{0,39}){1,2}(?![\w/])", 1)
    # a lookahead that needs a symbol itself is kept, as before
    assert locator_source(r"(?=\w{0,9}\.)\w+:")[0] == r"(?:\w{0,9}\.)"
    compiled = regex.compile(pattern)
    locator = build_locator(pattern, 0, compiled)
    for text in ("read src/main then lib/x/y/z and a/b, x-y/z ok/ /abs/path", "é tcp/ip et ux/ui"):
        want = [m.span() for m in compiled.finditer(text)]
        assert want
        for data in {ascii_bytes(text), None}:
            assert [m.span() for m in locator.finditer(compiled, text, data, 5.0)] == want


def test_each_branch_of_an_alternation_keeps_its_own_lookarounds():
    """A branch's lookahead narrows its locator (a word must stand before a comma), and
    branches with and without a consumed character before the candidate share one offset."""
    source, shift = locator_source(r"(?<![\w-])[a-z]{3,}(?=\s?[,\]])|\(report[A-Z]\w+\)")
    assert shift == 1
    assert source == r"(?:(?:\A|[^\w-])[a-z]{3,}(?:\s?[,\]]))|(?:\A|(?s:.))(?:\(report[A-Z]\w+\))"
    pattern = r"(?<![\w-])[a-z]{3,}(?=\s?[,\]])|\(report[A-Z]\w+\)"
    compiled = regex.compile(pattern)
    locator = build_locator(pattern, 0, compiled)
    text = "(reportFoo) ignore[attr, misc] words words and more (reportBar), end"
    want = [m.span() for m in compiled.finditer(text)]
    assert len(want) == 4
    for data in (ascii_bytes(text), None):
        assert [m.span() for m in locator.finditer(compiled, text, data, 5.0)] == want
    # a branch without a locator of its own: the whole pattern, as before
    assert locator_source(r"a|(?<=x)") == (r"a|(?<=x)", 0)


def test_locators_hold_no_capturing_groups_and_find_the_same_matches():
    """Only where a match starts is read: RE2 would run a slower engine to fill groups in."""
    from firewall.extraction.regex_syntax import without_captures

    assert without_captures(r"(a)(?:b)(?P<x>c)(?<y>d)[(]\((?=e)(?<!g)(?i:h)") == \
        r"(?:a)(?:b)(?:c)(?:d)[(]\((?=e)(?<!g)(?i:h)"
    pattern = r"(?<![\w.])(?P<literal>[a-z]\w*(?:\.([a-z]\w*)){1,3})(?![\w(])"
    compiled = regex.compile(pattern)
    locator = build_locator(pattern, 0, compiled)
    assert locator.match.__self__.NumberOfCapturingGroups() == 0
    assert locator.umatch.__self__.NumberOfCapturingGroups() == 0
    for text in ("call os.path.join(x) then read a.b and c.d.e.f.g x.y",
                 "call os.path.join(x) then read a.b and é.f, c.d.e.f.g x.y"):
        want = [m.span("literal") for m in compiled.finditer(text)]
        assert len(want) >= 3
        for data in {ascii_bytes(text), None}:  # the ASCII locator and the widened one
            assert [m.span("literal")
                    for m in locator.finditer(compiled, text, data, 5.0)] == want


def test_patterns_that_can_match_empty_get_no_locator():
    for pattern in (r"a*", r"(?<!x)\b", r"(?:ab)?"):
        assert build_locator(pattern, 0, regex.compile(pattern)) is None


def test_a_located_scan_still_times_out():
    pattern = r"(?<!x)(a|aa)+$"
    compiled = regex.compile(pattern)
    locator = build_locator(pattern, 0, compiled)
    text = "a" * 60 + "b"
    try:
        list(locator.finditer(compiled, text, ascii_bytes(text), 0.05))
    except TimeoutError:
        return
    raise AssertionError("no timeout")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab09_-#.stndrhAM²٣éKß", max_size=14))
def test_joined_allowlists_and_requires_answer_as_the_loops_do(value):
    from firewall.extraction.compiled import REQUIRES

    for rule in RULES:
        if rule.allow_any is not None:
            loop = value not in rule.rule.allowlist.values and \
                not any(p.fullmatch(value) for p in rule.allow_patterns)
            assert rule.allowed(value) == loop, rule.qid
    for name, test in (("digit", str.isdigit), ("letter", str.isalpha), ("upper", str.isupper),
                       ("lower", str.islower)):
        assert REQUIRES[name](value) == any(test(c) for c in value), name


def test_allowlist_and_json_key_answers_are_memoized_bounded_and_never_for_a_timeout():
    from firewall.extraction.compiled import VERDICTS_MAX, CompiledJsonKey

    rule = next(r for r in RULES if r.allow_any is not None)
    for value in ("2025-01-02", "12345", "2025-01-02"):
        assert rule.allowed(value) == (rule.allow_any.fullmatch(value) is None and
                                       value not in rule.rule.allowlist.values)
    for i in range(VERDICTS_MAX + 10):
        rule.allowed(f"v{i}")
    assert len(rule._verdicts) <= VERDICTS_MAX

    class SlowOnce:  # a value pattern whose first attempt runs out of time
        calls = 0

        def fullmatch(self, value, timeout):
            SlowOnce.calls += 1
            if SlowOnce.calls == 1:
                raise TimeoutError("regex timed out")
            return regex.fullmatch(r"\d+", value)

    key_rule = next(r for r in EXTRACTOR.rules if isinstance(r, CompiledJsonKey))
    key_rule = CompiledJsonKey(key_rule.qid, key_rule.pack, key_rule.rule,
                               key_pattern=key_rule.key_pattern, value_pattern=SlowOnce())
    key_rule.set_allowlist(())
    try:
        key_rule.accept("123", 0.01)
        raise AssertionError("no timeout")
    except TimeoutError:
        pass
    assert key_rule.accept("123", 1.0) and key_rule.accept("123", 1.0)
    assert SlowOnce.calls == 2  # retried after the timeout, then remembered


def test_requires_narrow_the_ascii_locator_only_when_matches_cannot_nest():
    from firewall.extraction.locate import strict_locator_source

    hexdigest = r"\b(?<![:.-])(?:(?:sha1|sha256|md5):)?[0-9a-f]{7,128}(?![\w-])"
    source, shift = strict_locator_source(hexdigest, 0, ("digit", "letter"))
    assert shift == 1 and source.startswith(r"(?:\A|[^:.-])\b")
    # nothing stops a match from starting inside another: requires cannot narrow the locator
    assert strict_locator_source(r"[a-z0-9]+", 0, ("digit",)) is None
    assert strict_locator_source(r"(?<![a-z])[a-z0-9]+", 0, ("digit", "letter")) is None
    assert strict_locator_source(r"(\w)\1+", 0, ("digit",)) is None  # a backreference


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab1f9:.-_ sh256m\n#é", max_size=60))
def test_a_requires_aware_locator_finds_what_the_plain_scan_accepts(text):
    from firewall.extraction.compiled import REQUIRES

    for pattern, requires in (
            (r"\b(?<![:.-])(?:(?:sha1|sha256|md5):)?[0-9a-f]{3,40}(?![\w-])", ("digit", "letter")),
            (r"(?<![\w#-])#?[\w-]{2,}", ("digit",)),
            (r"(?<![\w.:])\b[a-f0-9]+(?::\d+)?", ("letter",))):
        compiled = regex.compile(pattern)
        locator = build_locator(pattern, 0, compiled, requires)
        assert locator is not None, pattern

        def accepted(matches):
            return [m.span() for m in matches
                    if all(REQUIRES[name](m.group()) for name in requires)]
        want = accepted(compiled.finditer(text))
        assert accepted(locator.finditer(compiled, text, ascii_bytes(text), 5.0)) == want, pattern
        assert accepted(locator.finditer(compiled, text, None, 5.0)) == want, pattern
