"""Patterns RE2 lacks, widened for the prefilter: it only narrows which rules run."""

from firewall.extraction.regex_syntax import widen_backreferences
from firewall.extraction.extract import Extractor
from firewall.extraction.packs import Pack, parse_pack


def test_a_backreference_becomes_a_copy_of_its_group():
    assert widen_backreferences(r"(\d{2})([/.])\d{2}\2") == r"(\d{2})([/.])\d{2}(?:[/.])"
    assert widen_backreferences(r"(?P<q>['\"])x(?P=q)") == r"(?P<q>['\"])x(?:['\"])"
    # escaped backslashes, classes and missing groups are left alone
    assert widen_backreferences(r"\\1 [\1] (a)\2") == r"\\1 [\1] (a)\2"
    # a name given twice: numbering is unclear, nothing is changed
    twice = r"(?P<n>a)|(?P<n>b)\1"
    assert widen_backreferences(twice) == twice


def test_rules_with_backreferences_and_anchors_still_find_what_regex_finds():
    spec = parse_pack(r"""
name: p
version: '1'
rules:
  - id: date
    kind: regex
    pattern: '\b\d{2}([/.])\d{2}\1\d{4}\b'
  - id: quoted
    kind: regex
    pattern: '(?P<q>[''"])(?P<literal>[A-Z]{2}\d{3})(?P=q)'
  - id: continued
    kind: regex
    pattern: '(?:^|\G,)(?P<literal>k\d)'
""")
    extractor = Extractor([Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                                owners=(spec.name,) * len(spec.rules))])
    assert all(i not in extractor._prefilter._ascii.outside for i in range(3))
    texts = ["on 12/03/2026 and 12/03.2026", "'AB123' \"CD456' EF789", "k1,k2,k3 x,k4",
             "nothing", "é 01.02.2003 'ÉA123'"]
    for text in texts:
        got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
        expected = sorted(
            (rule.qid, s, e) for rule in extractor.rules for s, e in rule.find(text, 1.0))
        assert got == expected, text
    assert [l.value for l in extractor.scan_text("on 12/03/2026", "user").literals] == \
        ["12/03/2026"]


# ── case-insensitive rules on non-ASCII text ────────────────────────────────────────────────
# `regex` under IGNORECASE equates i with İ (U+0130) and I with ı (U+0131); RE2 and Hyperscan
# do not. It also equates k/K with the Kelvin sign and s/S with the long s, as RE2 does.

CASELESS_PACK = r"""
name: c
version: '1'
rules:
  - id: flag
    kind: regex
    pattern: 'fix-\d{4}'
    flags: [ignorecase]
  - id: scoped
    kind: regex
    pattern: '(?i:bill)ing-\d{4}'
  - id: global
    kind: regex
    pattern: '(?i)kelvin-\d{2}|secret-\d{2}'
  - id: keyed
    kind: regex
    pattern: '(?i)visit-\d{4}'
    keywords: [visit]
  - id: dotless
    kind: regex
    pattern: '(?i)ıd=\d{4}'
  - id: in-class
    kind: regex
    pattern: '(?i)[ı]x=\d{4}'
  - id: located
    kind: regex
    pattern: '(?<![\w-])(?i:key)=(?=[A-Z0-9]{0,9}\d)[A-Z0-9]{3,10}(?![\w-])'
  - id: titlecase
    kind: regex
    pattern: '(?i)\p{Lt}{2}-\d{3}'
  - id: case-sensitive
    kind: regex
    pattern: 'FIX-\d{4}'
"""

CASELESS_TEXTS = ["é FİX-1234", "FİX-1234", "FıX-1234 fix-1234", "é bİll bİlling-1234",
                  "é vİsİt-1234", "VİSİT-1234", "é ID=1234 x", "ID=1234", "é IX=1234",
                  "é İD=1234", "é key=AB12", "é KEY=AB12", "é \u212aelvin-12 \u017fecret-34",
                  "\u212aEY=CD34", "é kİ-123 AB-123", "ab-123", "FIX-1234 é"]


def _plain_regex_finds(pack: Pack, text: str) -> list[tuple[str, int, int]]:
    """Every rule run by `regex` alone: no prefilter, no locator."""
    extractor = Extractor([pack])
    found = []
    for rule in extractor.rules:
        rule.locator = None  # pattern.finditer itself
        found += [(rule.qid, s, e) for s, e in rule.find(text, 1.0)]
    return sorted(found)


def test_case_insensitive_rules_find_the_letters_regex_folds_beyond_re2():
    spec = parse_pack(CASELESS_PACK)
    pack = Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))
    extractor = Extractor([pack])
    prefilter = extractor._prefilter
    # RE2 judges every rule on both kinds of text: the widening is tested, not a fallback
    assert not prefilter._ascii.outside and not prefilter._unicode.outside
    assert all(rule.locator is not None for rule in extractor.rules
               if rule.rule.id in ("flag", "scoped", "located"))
    for text in CASELESS_TEXTS:
        got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
        assert got == _plain_regex_finds(pack, text), text
    assert ("c/flag", "FİX-1234") in {(l.rule, l.value) for l in
                                      extractor.scan_text("é FİX-1234", "user").literals}
    assert ("c/keyed", "VİSİT-1234") in {(l.rule, l.value) for l in  # its keyword is in it
                                          extractor.scan_text("VİSİT-1234", "user").literals}


# (text, built-in rule, the literal `regex` itself finds there): each was lost before
BUILT_IN_CASELESS = [
    ("é TİCKET: proj-1234 done", "core/ticket-key-lower", "proj-1234"),
    ("İSSUE #abc-12 here", "core/ticket-key-lower", "abc-12"),
    ("é İnvoice number: INV2025001", "billing/invoice-number-context", "INV2025001"),
    ("İNVOİCE #INV-2025-0042", "billing/invoice-number-context", "INV-2025-0042"),
    ("ORDER İD: A1234567 é", "commerce/order-number-context", "A1234567"),
    ("TRACKİNG NUMBER 1Z999AA10123456784", "commerce/tracking-number", "1Z999AA10123456784"),
    ("Authorİzation: Basic dXNlcjpwYXNzd29yZA==", "secrets/basic-auth-header",
     "dXNlcjpwYXNzd29yZA=="),
    ("x-request-İd: abc123def456", "core/header-id", "abc123def456"),
    ("api-\u212aey: abcdefghijklmnop1234", None, None),  # RE2 folds the Kelvin sign itself
]


def test_built_in_case_insensitive_rules_find_turkic_letters_as_regex_does():
    from firewall.extraction.compiled import CompiledRegex
    from firewall.extraction.packs import load_packs

    packs = load_packs()
    extractor, plain = Extractor(packs), Extractor(packs)
    for rule in plain.rules:
        if isinstance(rule, CompiledRegex):
            rule.locator = None  # pattern.finditer itself
    for text, qid, value in BUILT_IN_CASELESS:
        got = {(l.rule, l.value) for l in extractor.scan_text(text, "user").literals}
        expected = {(r.qid, text[s:e]) for r in plain.rules
                    if isinstance(r, CompiledRegex) and "user" in r.rule.roles
                    for s, e in r.find(text, 1.0)}
        assert expected <= got, text
        if qid is not None:
            assert (qid, value) in expected, text


def _cased_characters() -> list[str]:
    """Every character with a case mapping, and the characters they map to."""
    found = set()
    for code in range(0x110000):
        ch = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        for mapped in (ch.lower(), ch.upper(), ch.casefold(), ch.title()):
            if mapped != ch:
                found.add(ch)
                found.update(mapped if len(mapped) == 1 else ())
    return sorted(found)


def test_the_only_case_pairs_regex_folds_and_re2_does_not_are_the_turkic_i():
    """``relax`` widens i, I, İ and ı under IGNORECASE: every other pair `regex` equates, RE2
    equates too (the Kelvin sign and k, the long s and s...). Checked on every cased
    character, so a new Unicode version in either engine shows up here."""
    import re2
    import regex

    from firewall.extraction.regex_syntax import TURKIC_I

    chars = _cased_characters()
    haystack = "\n".join(chars)
    options = re2.Options()
    options.log_errors = False
    missed = {}
    for ch in chars:
        source = "(?i)" + regex.escape(ch)
        by_regex = set(regex.findall(source, haystack))
        by_re2 = {m.group() for m in re2.compile(source, options).finditer(haystack)}
        assert by_re2 <= by_regex, ch  # RE2 never folds more: a negated class only widens
        if by_regex - by_re2:
            missed[ch] = by_regex - by_re2
    assert missed and all(ch in TURKIC_I and other <= set(TURKIC_I)
                          for ch, other in missed.items()), missed


def test_relax_widens_the_turkic_i_where_case_is_ignored():
    from firewall.extraction.regex_syntax import relax

    turkic = r"[iI\x{130}\x{131}]"
    assert relax(r"fix", unicode=True, ignorecase=True) == f"f{turkic}x"
    assert relax(r"fix", ignorecase=True) == "fix"  # the plain form sees ASCII text only
    assert relax(r"fix", unicode=True) == "fix"  # case-sensitive: nothing to widen
    # inline flags: global anywhere, scoped to their group; names and flags stay as written
    assert relax(r"(?P<literal>i)(?i:i)i", unicode=True) == f"(?P<literal>i)(?i:{turkic})i"
    assert relax(r"a(?i)i", unicode=True) == f"a(?i){turkic}"
    assert relax(r"(?i)\x69", unicode=True) == f"(?i){turkic}"
    # a dotless or dotted i in the pattern also matches ASCII i and I, on ASCII text too
    assert relax("(?i)ıd") == f"(?i){turkic}d"
    assert relax("(?i)[ıj]") == "(?i)(?:[ıj]|[iI])"
    assert relax("(?i)[ıj]", unicode=True) == r"(?i)(?:[ıj]|[iI\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}])"
    assert relax("(?i)[^ı]") == "(?i)[^ı]"  # a negated class: RE2's already matches more
    # `regex` reads \p{Lt} under IGNORECASE as every cased letter
    assert relax(r"(?i)\p{Lt}") == r"(?i)(?:\p{Lt}|[A-Za-z])"
    assert relax(r"(?i)[\p{Lu}]", unicode=True) == (
        r"(?i)(?:[\p{Lu}]|[A-Za-z\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}])")


def test_keywords_are_found_in_any_case_regex_knows():
    from firewall.extraction.regex_syntax import fold_case

    assert fold_case("VİSİT \u212aelvin \u017fecret vıSIT") == "visit kelvin secret visit"
    for text in ("Visit", "ÇA", "straße", "Σ", "İ"):  # never fewer hits than lower()
        assert all(fold_case(k) in fold_case(text) for k in (text.lower(), text))
