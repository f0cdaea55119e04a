"""Patterns RE2 lacks, widened for the prefilter: it only narrows which rules run."""

from firewall.extraction.compiled import widen_backreferences
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
