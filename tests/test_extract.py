"""The extraction engine: each rule kind, provenance, the prefilter, fail-closed timeouts."""

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from firewall.extraction.examples import run_examples
from firewall.extraction.extract import Extractor, Scanner
from firewall.extraction.packs import load_packs, parse_pack, Pack
from firewall.turns import ToolCall, Turn

PACKS = Path(__file__).parent / "fixtures" / "packs" / "valid"


def pack_from(text: str) -> Pack:
    spec = parse_pack(text)
    return Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))


@pytest.fixture(scope="module")
def kinds() -> Extractor:
    return Extractor(load_packs(str(PACKS / "all_kinds.yaml"), str(PACKS / "minimal.yaml")))


def values(result):
    return [lit.value for lit in result.literals]


def test_regex_literal_group_keeps_exact_bytes_and_offsets(kinds):
    text = "Why was INV-2025-08-44719 charged twice?"
    (lit,) = kinds.scan([Turn("user", text)]).literals
    assert (lit.value, lit.rule, lit.turn, lit.role, lit.field) == (
        "INV-2025-08-44719", "billing/invoice-number", 0, "user", "text")
    assert text[lit.start:lit.end] == lit.value


def test_a_look_alike_id_is_pinned_like_its_latin_twin_and_flagged(kinds):
    spoof = "\u0406NV-2025-08-44719"  # a Cyrillic capital I
    text = f"Refund {spoof}, not INV-2025-08-44718."
    found = {lit.value: lit for lit in kinds.scan([Turn("user", text)]).literals}
    assert set(found) == {spoof, "INV-2025-08-44718"}
    lit = found[spoof]
    assert (lit.rule, lit.mixed_script, text[lit.start:lit.end]) == (
        "billing/invoice-number", True, spoof)
    assert not found["INV-2025-08-44718"].mixed_script
    # a JSON value a json_key rule accepts once folded; the order id of a tool call too
    call = ToolCall("get_order", {"order_id": "#W23\u041e8"})  # a Cyrillic O
    (lit,) = kinds.scan([Turn("assistant", "", tool_calls=(call,))]).literals
    assert (lit.value, lit.rule, lit.mixed_script) == ("#W23\u041e8", "kinds/order-key", True)


def test_look_alike_letters_alone_are_another_script_not_a_spoof(kinds):
    # Cyrillic words that fold to Latin letters, with no Latin letter or digit: not pinned
    terms = pack_from("""
name: words
version: "1"
rules:
  - id: word
    kind: regex
    description: four capitals
    pattern: '\\b[A-Z]{4}\\b'
    examples:
      match: [{text: 'CAPE', literals: ['CAPE']}]
""")
    assert values(Extractor([terms]).scan([Turn("user", "\u0421\u0410\u0420\u0415 CAPE")])) == [
        "CAPE"]
    assert values(Extractor([terms]).scan([Turn("user", "\u0421APE")])) == ["\u0421APE"]


def test_keyword_prefilter_gates_the_rule_in_any_case(kinds):
    assert values(kinds.scan([Turn("user", "PROJ-1234 is broken")])) == []
    assert values(kinds.scan([Turn("user", "TICKET PROJ-1234 is broken")])) == ["PROJ-1234"]


def test_checksum_drops_look_alikes_and_sensitive_flag_travels(kinds):
    result = kinds.scan([Turn("user", "4242 4242 4242 4242 and 4242 4242 4242 4241")])
    assert values(result) == ["4242 4242 4242 4242"]
    assert result.literals[0].sensitive


def test_a_card_needs_a_network_prefix_so_an_imei_is_pinned_but_not_secret():
    # both pass Luhn; only the Visa number has an issuer prefix of its length
    found = {lit.value: lit for lit in Extractor(load_packs()).scan_text(
        "device IMEI 356938035643809, paid with 4111111111111111", "tool").literals}
    assert found["4111111111111111"].sensitive
    assert found["4111111111111111"].rule.endswith("/card-number")
    assert not found["356938035643809"].sensitive


def test_json_key_in_tool_result_and_tool_call_arguments(kinds):
    turns = [
        Turn("assistant", "", tool_calls=(ToolCall("get_order", {"order_id": "#W2378156"}),)),
        Turn("tool", '{"order": {"order_id": "#W9", "item_ids": ["111", 222]}}',
             tool_name="get_order"),
    ]
    result = kinds.scan(turns)
    got = [(l.value, l.turn, l.role, l.tool, l.field) for l in result.literals]
    assert got == [
        ("#W2378156", 0, "assistant", "get_order", "arguments.order_id"),
        ("#W9", 1, "tool", "get_order", "content.order.order_id"),
        ("111", 1, "tool", "get_order", "content.order.item_ids[0]"),
        ("222", 1, "tool", "get_order", "content.order.item_ids[1]"),
    ]


def test_terms_respect_word_boundaries(kinds):
    assert values(kinds.scan([Turn("user", "Gizmos, a Gizmo, Widget Pro2, Widget Pro.")])) == [
        "Gizmo", "Widget Pro"]


def test_deduplicates_by_value_keeping_first_provenance_and_counting(kinds):
    turns = [Turn("user", "INV-2025-08-44719?"), Turn("tool", "INV-2025-08-44719 paid"),
             Turn("assistant", "INV-2025-08-44719 twice")]
    (lit,) = kinds.scan(turns).literals
    assert (lit.turn, lit.role, lit.count) == (0, "user", 3)


def test_document_order_within_a_turn(kinds):
    text = "Gizmo then INV-2025-08-44719 then ticket AB-1"
    # overlapping hits of two rules at one offset: the longer first
    assert values(kinds.scan([Turn("user", text)])) == [
        "Gizmo", "INV-2025-08-44719", "INV-2025", "AB-1"]


def test_roles_limit_where_a_rule_applies():
    extractor = Extractor([pack_from(
        "name: p\nversion: '1'\nrules:\n  - id: r\n    kind: terms\n    terms: [alpha]\n"
        "    roles: [user]\n")])
    assert values(extractor.scan([Turn("tool", "alpha"), Turn("user", "alpha")])) == ["alpha"]
    assert extractor.scan([Turn("tool", "alpha")]).literals == []


def test_system_turns_are_never_scanned(kinds):
    assert kinds.scan([Turn("system", "INV-2025-08-44719")]).literals == []


def test_catastrophic_regex_times_out_and_fails_closed():
    extractor = Extractor([pack_from(
        "name: slow\nversion: '1'\nrules:\n  - id: evil\n    kind: regex\n"
        "    pattern: '(a|aa)+$'\n  - id: fine\n    kind: regex\n    pattern: '\\bID-\\d+'\n")],
        timeout=0.25, timeout_per_mb=0)  # a margin for "fine" on a loaded machine
    turns = [Turn("user", "ID-1 ok"), Turn("tool", "ID-2 " + "a" * 60 + "b")]
    result = extractor.scan(turns)
    assert [(t.rule, t.turn) for t in result.timeouts] == [("slow/evil", 1)]
    assert result.verbatim_turns == {1}
    assert values(result) == ["ID-1", "ID-2"]  # the other rule still ran on the slow turn


def test_prefilter_never_changes_results_against_a_plain_loop():
    """RE2 set + keywords only narrow which rules run: results equal running every rule."""
    pack = pack_from(r"""
name: p
version: '1'
rules:
  - id: word-boundary
    kind: regex
    pattern: '\b[A-Z]{3}\d{3}\b'
  - id: lookbehind
    kind: regex
    pattern: '(?<=id=)\w+'
  - id: dollar
    kind: regex
    pattern: 'end\d$'
  - id: icase
    kind: regex
    pattern: 'order\s+#?(?P<literal>\d{4,})'
    flags: [ignorecase]
  - id: unicode-digits
    kind: regex
    pattern: '\bN\d+\b'
""")
    extractor = Extractor([pack])
    texts = ["ABC123 id=xyz ORDER #12345 end1\n", "ÄBC123 N١٢٣ ABC1234", "id=é order 99999",
             "x\x1cABC123\x1c", "\vN12\v", "nothing here"]
    for text in texts:
        got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
        expected = sorted(
            (rule.qid, s, e) for rule in extractor.rules for s, e in rule.find(text, 1.0))
        assert got == expected, text


def test_incremental_scanner_reports_only_new_literals(kinds):
    scanner = Scanner(kinds)
    assert [l.value for l in scanner.add(Turn("user", "INV-2025-08-44719"))] == [
        "INV-2025-08-44719"]
    assert scanner.add(Turn("tool", "INV-2025-08-44719 again")) == []
    assert [l.turn for l in scanner.add(Turn("user", "Gizmo"))] == [2]
    assert scanner.result().literals[0].count == 2


def test_the_scanner_keeps_each_values_latest_sighting(kinds):
    """A value's first and latest turn both survive a scan: recency is the latest sighting
    (a value the agent saw again just now), not the first."""
    scanner = Scanner(kinds)
    scanner.add(Turn("tool", "INV-2025-08-44719 in a listing"), 2)
    scanner.add(Turn("user", "Gizmo"), 3)
    scanner.add(Turn("tool", "INV-2025-08-44719 again"), 9)
    by_value = {l.value: l for l in scanner.result().literals}
    seen = by_value["INV-2025-08-44719"]
    assert (seen.turn, seen.last_turn, seen.latest, seen.count) == (2, 9, 9, 2)
    once = by_value["Gizmo"]
    assert (once.turn, once.latest) == (3, 3)


def test_literals_the_scanner_returns_are_the_callers_to_change(kinds):
    scanner = Scanner(kinds)
    (new,) = scanner.add(Turn("user", "INV-2025-08-44719"), 3)
    new.count, new.turn, new.severity = 99, 0, "required"
    scanner.add(Turn("tool", "INV-2025-08-44719 again"), 4)
    (kept,) = scanner.result().literals
    assert (kept.value, kept.turn, kept.count, kept.severity) == ("INV-2025-08-44719", 3, 2, "pin")


def test_skip_blanks_spans_and_keeps_offsets(kinds):
    text = "[[INV-2025-08-44719]] and INV-2025-08-44718"
    result = kinds.scan([Turn("user", text)], skip=lambda t: [(0, 21)])
    (lit,) = result.literals
    assert text[lit.start:lit.end] == lit.value == "INV-2025-08-44718"


def test_fixture_examples_pass_through_the_whole_engine():
    reports = run_examples(load_packs(str(PACKS / "all_kinds.yaml")))
    assert [r.rule for r in reports if r.failures] == []
    assert sum(r.examples for r in reports) == 8


@pytest.mark.slow
def test_fifty_megabyte_tool_result_is_scanned(kinds):
    text = ("x" * 1000 + " INV-2025-08-44719 ") * 50_000
    assert values(kinds.scan([Turn("tool", text)])) == ["INV-2025-08-44719"]


def test_json_numbers_keep_their_source_spelling():
    extractor = Extractor([pack_from(
        "name: p\nversion: '1'\nrules:\n  - id: amount\n    kind: json_key\n"
        "    keys: [amount, '*_ids']\n")])
    result = extractor.scan([Turn("tool", '{"amount": 1030.40, "item_ids": [1e3, 70, true]}')])
    assert values(result) == ["1030.40", "1e3", "70"]


def test_json_inside_a_tool_result_that_is_not_json_goes_to_the_key_rules():
    extractor = Extractor([pack_from(
        "name: p\nversion: '1'\nrules:\n  - id: total\n    kind: json_key\n"
        "    keys: ['*total']\n")])
    text = ('### Result\n{\n  "subtotal": 5000,\n  "total": 4500\n}\n\n### Ran code\n'
            '```json\n[{"total": 12.50}]\n```\n{not json}\n[1, 2]\n')
    assert values(extractor.scan([Turn("tool", text)])) == ["5000", "4500", "12.50"]


def test_a_code_listing_full_of_braces_costs_a_bounded_number_of_json_tries(monkeypatch):
    from firewall import json_values
    tried = []

    class Counting:
        def raw_decode(self, text, start):
            tried.append(start)
            return json_values.json.JSONDecoder().raw_decode(text, start)

    monkeypatch.setattr(json_values, "_DECODER", Counting())
    code = "func f() {\n{\n  return x\n}\n" * 500
    assert list(json_values.embedded_json(code)) == []
    assert len(tried) == json_values.EMBEDDED_JSON_TRIES


def test_assistant_only_json_key_examples_run_as_tool_call_arguments():
    pack = pack_from(
        "name: p\nversion: '1'\nrules:\n  - id: arg\n    kind: json_key\n    keys: ['*_id']\n"
        "    roles: [assistant]\n    examples:\n      match:\n"
        "        - text: '{\"order_id\": \"#W1\"}'\n          literals: ['#W1']\n")
    (report,) = run_examples([pack])
    assert report.failures == ()


PREFILTER_PATTERNS = [r"(?<![\w#])#W\d{3,7}(?!\w)", r"\b[A-Z]{2,4}-\d{1,5}\b", r"(?<=key=)\w++",
                      r"(?>ab|a)c", r"[^]x]y(?=z)", r"(?i)inv-\d+",
                      # leading atoms that may repeat zero times: dropped from the RE2 set
                      r"(?i)[\w.-]{0,8}?key\s?=\d", r"[x-]{0,3}(?i:[a-c]*?zE)\d", r"(?:ab)*c\d"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="#W0123456789ABCDEFGHIJxyzakec=-_ ]\n", max_size=60))
def test_relaxed_re2_prefilter_never_drops_a_match(text):
    extractor = _prefilter_extractor(patterns_pack("p", PREFILTER_PATTERNS))
    assert_scan_finds_every_match(extractor, text)


def patterns_pack(name: str, patterns: list[str]):
    return pack_from(f"name: {name}\nversion: '1'\nrules:\n" + "".join(
        f"  - id: r{i}\n    kind: regex\n    pattern: '{p}'\n" for i, p in enumerate(patterns)))


def assert_scan_finds_every_match(extractor: Extractor, text: str) -> None:
    """The prefiltered scan finds what every rule's own ``find`` finds without its locator
    (`regex` alone), nothing else."""
    got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
    expected = []
    for rule in extractor.rules:
        locator, rule.locator = rule.locator, None
        try:
            expected += [(rule.qid, s, e) for s, e in rule.find(text, 1.0)]
        finally:
            rule.locator = locator
    assert got == sorted(expected)


UNICODE_PATTERNS = [r"(?<![\w#])#?\w{2,40}\d(?!\w)", r"\b\d{3,}\b", r"x\s+y$", r"[a-z\d]{5,100}",
                    r"(?i)kelvin\W\S", r"[^\s,]{2}\.\d", r"\bé\w", r"(?i:vis)\d", r"(?i)ı[sx]",
                    r"(?<![\w-])(?i:lin)\d"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="x y\n\v\x1c\u00a0\u2003é٣Kk\u212aelvin01.,#_Ωß’—\ud800İıIVSſ",
               max_size=60))
def test_widened_re2_prefilter_never_drops_a_match_on_unicode_text(text):
    if "u" not in _EXTRACTORS:
        _EXTRACTORS["u"] = Extractor([patterns_pack("u", UNICODE_PATTERNS)])
        prefilter = _EXTRACTORS["u"]._by_role["user"].prefilter
        assert not prefilter._ascii.outside and not prefilter._unicode.outside
    assert_scan_finds_every_match(_EXTRACTORS["u"], text)


def test_relax_widens_into_re2_syntax():
    from firewall.extraction.regex_syntax import relax

    assert relax(r"(?<!\w)a{2,300}b{3}c{1,8}+$") == "a{2,}b{3}c{1,8}"
    assert relax(r"\bx\d[\w.-]", unicode=True) == (
        r"x[\d\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}](?:[\w.-]|[\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}])")
    assert relax(r"[^\s]\x{100}[[:alpha:]]", unicode=True) == (
        r"[^\s]\x{100}(?:[[:alpha:]]|[\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}])")
    assert relax(r"[^\W_]", unicode=True) is None  # cannot be widened: left to `regex`
    assert relax(r"[^\W_]") == r"[^\W_]"


def test_leading_optional_atoms_are_dropped_from_the_prefilter_source_only():
    from firewall.extraction.regex_syntax import drop_leading_optional
    from firewall.extraction.packs import RegexRule

    # gitleaks' keyword rules start with [\w.-]{0,50}?: a set of hundreds of them built DFA
    # states for every prefix position; whether each matches somewhere does not depend on it
    assert drop_leading_optional(r"(?i)[\w.-]{0,}?(?:adafruit)x") == "(?i)(?:adafruit)x"
    assert drop_leading_optional(r"[\w.-]{0,}?(?i:[\w.-]{0,}?(?:co))=") == "(?i:(?:co))="
    assert drop_leading_optional(r"(?:ab)*c") == "c"
    assert drop_leading_optional(r"[]a]*?\d+") == r"\d+"
    assert drop_leading_optional(r"(?:a*b|c)d") == r"(?:a*b|c)d"  # a group that must match
    assert drop_leading_optional(r"\x41*b") == r"\x41*b"  # an escape with arguments: kept
    rule = RegexRule(id="r", kind="regex", pattern=r"(?<![\w.-])[\w.-]{0,50}?key=(\d+)")
    compiled = Extractor([Pack(name="p", version="1", rules=(rule,), owners=("p",))]).rules[0]
    assert compiled.re2_source == r"key=(\d+)"
    assert compiled.find("my.key=42", 1.0) == [(0, 9)]  # the match itself still starts at m


_EXTRACTORS: dict = {}


def _prefilter_extractor(pack):
    if "x" not in _EXTRACTORS:
        _EXTRACTORS["x"] = Extractor([pack])
        # every pattern above must actually go through RE2, or the property proves nothing
        assert not _EXTRACTORS["x"]._by_role["user"].prefilter._ascii.outside
    return _EXTRACTORS["x"]


def test_a_turn_seen_before_is_not_rescanned_and_keeps_its_own_index(kinds):
    turn = Turn("user", "ticket AB-12 and INV-2025-08-44719")
    first = kinds.scan_turn(turn, 3)
    calls = []
    original = kinds._scan_turn
    kinds._scan_turn = lambda *a: calls.append(a) or original(*a)
    try:
        again = kinds.scan_turn(Turn("user", turn.text), 7)
    finally:
        del kinds._scan_turn
    assert calls == []
    assert [(l.value, l.turn) for l in again.literals] == [(l.value, 7) for l in first.literals]
    assert {l.turn for l in first.literals} == {3}  # the cached copies are not shared


def test_a_timed_out_scan_is_not_cached():
    extractor = Extractor([pack_from(
        "name: slow\nversion: '1'\nrules:\n  - id: evil\n    kind: regex\n"
        "    pattern: '(a|aa)+$'\n")], timeout=0.05, timeout_per_mb=0)
    turn = Turn("user", "a" * 60 + "b")
    assert extractor.scan_turn(turn, 0).timeouts
    assert extractor.scan_turn(turn, 0).timeouts  # scanned again, failing closed again


def test_scanner_never_changes_the_memoized_literals(kinds):
    turn = Turn("user", "INV-2025-08-44719 and INV-2025-08-44719")
    scanner = Scanner(kinds)
    scanner.add(turn, 0)
    scanner.add(turn, 0)  # the same turn again: counts grow on the scanner's own copy
    assert scanner.result().literals[0].count == 4
    assert [l.count for l in kinds.scan_turn(turn, 0).literals] == [1, 1]


# ── ScanMemo: turns scanned before are resumed, with the result of a fresh scan ───────────

def _history(n: int, tag: str = "A") -> list[Turn]:
    turns = []
    for i in range(n):
        turns += [
            Turn("user", f"Why was INV-2025-08-{40000 + i:05d} charged twice? TICKET PROJ-{i}"),
            Turn("assistant", "", tool_calls=(ToolCall("get_order", {"order_id": f"#W{tag}{i}"}),)),
            Turn("tool", f'{{"order": {{"order_id": "#W{tag}{i}", "item_ids": ["{i}", {i}]}}}}',
                 tool_name="get_order"),
            Turn("assistant", f"INV-2025-08-{40000 + i:05d} and INV-2025-08-40000 again."),
        ]
    return turns


def _fresh(extractor, turns, offset=0, skip=None):
    scanner = Scanner(extractor, skip=skip)
    for i, turn in enumerate(turns):
        scanner.add(turn, offset + i)
    return scanner.result()


def _dump(result):
    return [lit.to_dict() for lit in result.literals], [(t.rule, t.turn) for t in result.timeouts]


def test_scan_memo_resumes_a_growing_history_with_a_fresh_scans_result(kinds):
    from firewall.extraction.extract import ScanMemo

    memo, turns = ScanMemo(kinds), _history(12)
    for n in (8, 8, 20, 33, 48, 48, 30):  # grows, repeats, and shrinks (a miss)
        assert _dump(memo.scan(turns[:n], offset=2, tag="c")) == \
            _dump(_fresh(kinds, turns[:n], offset=2))
    resumed = []
    original = Scanner.resume
    Scanner.resume = classmethod(lambda cls, *a, **k: resumed.append(a[2]) or
                                 original.__func__(cls, *a, **k))
    try:
        memo.scan(turns[:48], offset=2, tag="c")  # stored after 30 turns: resumes them
        memo.scan(turns[:48], offset=3, tag="c")  # numbered differently: a fresh scan
    finally:
        Scanner.resume = original
    assert resumed == [30]


def test_scan_memo_result_is_the_callers_to_change(kinds):
    from firewall.extraction.extract import ScanMemo

    memo, turns = ScanMemo(kinds), _history(3)
    first = memo.scan(turns, tag="c")
    for lit in first.literals:
        lit.count, lit.sensitive, lit.turn = 999, True, 77
    assert _dump(memo.scan(turns, tag="c")) == _dump(_fresh(kinds, turns))


def test_scan_memo_sees_any_change_to_an_earlier_turn(kinds):
    from firewall.extraction.extract import ScanMemo

    memo, turns = ScanMemo(kinds), _history(4)
    memo.scan(turns, tag="c")
    edited = list(turns)
    edited[5] = Turn("assistant", "", tool_calls=(ToolCall("get_order", {"order_id": "#WB1"}),))
    assert _dump(memo.scan(edited, tag="c")) == _dump(_fresh(kinds, edited))
    # equal in Python, not to the scan: 1 and 1.0 are different literals of a JSON value
    ints = [Turn("assistant", "", tool_calls=(ToolCall("pay", {"amount": 1, "order_id": "#W1"}),))]
    floats = [Turn("assistant", "", tool_calls=(ToolCall("pay", {"amount": 1.0,
                                                                 "order_id": "#W1"}),))]
    assert ints == floats
    memo.scan(ints, tag="c")
    assert _dump(memo.scan(floats, tag="c")) == _dump(_fresh(kinds, floats))


def test_scan_memo_never_mixes_up_what_different_skips_blank(kinds):
    from firewall.extraction.extract import ScanMemo

    block = "[[INV-2025-08-11111]]"
    turns = _history(2) + [Turn("user", f"see {block} and INV-2025-08-22222")]

    def skip_block(text):
        at = text.find(block)
        return [] if at < 0 else [(at, at + len(block))]

    memo = ScanMemo(kinds)
    assert "INV-2025-08-11111" not in [l.value for l in memo.scan(turns, skip=skip_block).literals]
    # the same turns, where the block is not genuine (another ledger): it is scanned
    assert _dump(memo.scan(turns, skip=lambda text: [])) == _dump(_fresh(kinds, turns))
    assert _dump(memo.scan(turns, skip=skip_block)) == \
        _dump(_fresh(kinds, turns, skip=skip_block))


def test_scan_memo_stores_no_scan_in_which_a_rule_timed_out():
    from firewall.extraction.extract import ScanMemo

    extractor = Extractor([pack_from(
        "name: slow\nversion: '1'\nrules:\n  - id: evil\n    kind: regex\n"
        "    pattern: '(a|aa)+$'\n  - id: fine\n    kind: regex\n    pattern: '\\bID-\\d+'\n")],
        timeout=0.25, timeout_per_mb=0)  # a margin for "fine" on a loaded machine
    memo = ScanMemo(extractor)
    turns = [Turn("user", "ID-1 ok"), Turn("tool", "ID-2 " + "a" * 60 + "b")]
    for _ in range(2):  # scanned again, failing closed again
        result = memo.scan(turns, tag="c")
        assert [(t.rule, t.turn) for t in result.timeouts] == [("slow/evil", 1)]
        assert values(result) == ["ID-1", "ID-2"]
    assert not memo._prefixes


def test_scan_memo_is_bounded_and_keeps_conversations_apart(kinds):
    from firewall.extraction.extract import ScanMemo

    memo = ScanMemo(kinds, size=4)
    histories = {tag: _history(3, tag) for tag in "ABCDEFG"}
    for _ in range(2):
        for tag, turns in histories.items():
            # all share the id "conversation" and start alike: only the content tells them apart
            assert _dump(memo.scan(turns, tag="conversation")) == _dump(_fresh(kinds, turns))
    assert len(memo._prefixes) <= 4


def test_scan_memo_from_many_threads(kinds):
    from concurrent.futures import ThreadPoolExecutor

    from firewall.extraction.extract import ScanMemo

    memo = ScanMemo(kinds, size=3)
    histories = [_history(6, tag) for tag in "ABCDEF"]
    expected = [_dump(_fresh(kinds, turns)) for turns in histories]

    def worker(k: int) -> list[int]:
        wrong = []
        for n in range(1, 25):
            turns = histories[(k + n) % len(histories)]
            if _dump(memo.scan(turns, tag="conversation")) != expected[(k + n) % len(histories)]:
                wrong.append(n)
        return wrong

    with ThreadPoolExecutor(6) as pool:  # .result() re-raises what a worker raised
        assert [f.result(60) for f in [pool.submit(worker, k) for k in range(6)]] == [[]] * 6


KEYWORD_RULES = [("#W\\d{3}", ["#w", "order"]), ("\\w+-\\d+", ["-"]), ("x\\.y", [".", "dot"]),
                 ("[a-z]{3}", ["kelvin", "straße"]), ("\\d{2}", ["ß"]), ("\\d", ["nil", "ſ"])]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="#wW0123-.xyORDERorderDoTKELVINkelvin\u212aé ß\vNILİıs", max_size=50))
def test_the_ascii_keyword_set_gates_as_the_automaton_does(text):
    """On ASCII text the keywords are matched by the RE2 set, elsewhere by Aho-Corasick over
    the lowercased text: the rules offered are the same either way."""
    from firewall.extraction.prefilter import ascii_bytes

    pack = pack_from("name: k\nversion: '1'\nrules:\n" + "".join(
        f"  - id: r{i}\n    kind: regex\n    pattern: '{p}'\n    keywords: {kw}\n"
        for i, (p, kw) in enumerate(KEYWORD_RULES)))
    if "k" not in _EXTRACTORS:
        _EXTRACTORS["k"] = Extractor([pack])
        assert _EXTRACTORS["k"]._by_role["user"].prefilter._keyword_set is not None
    prefilter = _EXTRACTORS["k"]._by_role["user"].prefilter
    folded = prefilter.candidates(text, ascii_bytes(text))
    keyword_set, prefilter._keyword_set = prefilter._keyword_set, None  # the automaton
    try:
        assert folded == prefilter.candidates(text, ascii_bytes(text))
    finally:
        prefilter._keyword_set = keyword_set


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**12) | st.sampled_from(
        ["#W2378156", "", " ", "12.50", "Yusuf", "x\ny", "order", "4242"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["order_id", "id", "amount", "first_name", "items", "total", "k",
                         "user_ids", "last4"]), inner, max_size=4),
    max_leaves=25)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(json_values)
def test_tool_result_key_walk_equals_the_generic_leaf_walk(node):
    """The written-out walk of JSON tool results answers as the rules over ``_json_leaves``."""
    from firewall.extraction.extract import TurnScan
    from firewall.json_values import json_leaves as _json_leaves, scalar_text as _scalar_text

    if "default" not in _EXTRACTORS:  # compiled once: setdefault would compile every example
        _EXTRACTORS["default"] = Extractor(load_packs())
    extractor = _EXTRACTORS["default"]
    out = TurnScan()
    extractor.scan_json(node, "tool", turn=3, root="content", tool="t", out=out,
                        text_rules=False)
    expected = []
    for path, key, value in _json_leaves(node, "content"):
        text = _scalar_text(value)
        if text is None or key is None:
            continue
        for rule in extractor._by_role["tool"].json_key_rules(key):
            if rule.accept(text, 1.0):
                expected.append((text, rule.qid, path))
    assert [(l.value, l.rule, l.field) for l in out.literals] == expected
    assert all((l.turn, l.role, l.tool) == (3, "tool", "t") for l in out.literals)


def test_a_slow_validator_does_not_spend_the_regex_time_budget(monkeypatch):
    """A validator's first call may import its library and load its data (the Public Suffix
    List: about 0.2 s): that time is not the regex's, and must not time the rule out."""
    import time

    from firewall.extraction.checksums import CHECKSUMS

    def slow(value: str) -> bool:
        time.sleep(0.05)
        return True

    monkeypatch.setitem(CHECKSUMS, "slow", slow)
    extractor = Extractor([pack_from(
        "name: p\nversion: '1'\nrules:\n  - id: r\n    kind: regex\n"
        "    pattern: '\\bID-\\d+'\n    checksum: slow\n")], timeout=0.02, timeout_per_mb=0)
    found = extractor.scan([Turn("user", "ID-1 ID-2 ID-3")])
    assert (values(found), found.timeouts) == (["ID-1", "ID-2", "ID-3"], [])


@pytest.mark.parametrize("text, literal", [
    ("注文#W1234567をキャンセルしてください", "#W1234567"),  # Japanese
    ("订单号W1234567的状态", "W1234567"),  # Chinese
    ("주문번호#W1234567취소", "#W1234567"),  # Korean, glued as a particle would be
    ("请查看src/auth/handler.ts:142的错误", "src/auth/handler.ts:142"),
    ("メールはdana.reyes@example.comです", "dana.reyes@example.com"),
    ("คำสั่งซื้อ#W1234567ถูกยกเลิกแล้ว", "#W1234567"),  # Thai
    ("ຄຳສັ່ງ#W1234567ຖືກຍົກເລີກ", "#W1234567"),  # Lao
    ("ការបញ្ជាទិញ#W1234567ត្រូវបានលុបចោល", "#W1234567"),  # Khmer
    ("အမှာစာ#W1234567ကိုပယ်ဖျက်ပါ", "#W1234567"),  # Burmese
])
def test_a_literal_glued_to_a_sentence_written_without_spaces_is_pinned(text, literal):
    found = Extractor(load_packs()).scan_turn(Turn("user", text), 1).literals
    assert literal in {lit.value for lit in found}
    assert all(text[lit.start:lit.end] == lit.value for lit in found)  # the source's bytes


def test_the_spaced_view_never_makes_a_literal_the_source_does_not_hold():
    # "12丁目34" reads as "12  34" in the spaced view: nothing spanning the letters is pinned
    text = "請求書INV-2025-08-44719の件、港区12丁目34番地"
    found = Extractor(load_packs()).scan_turn(Turn("user", text), 1).literals
    assert "INV-2025-08-44719" in {lit.value for lit in found}
    assert all(text[lit.start:lit.end] == lit.value and " " not in lit.value for lit in found)


@pytest.mark.parametrize("text, path", [
    ("node d:/ClaudeWorkspace/08_客户跟进/scripts/scraper.mjs --once",
     "d:/ClaudeWorkspace/08_客户跟进/scripts/scraper.mjs"),
    ("cat /home/ana/项目/src/main.py", "/home/ana/项目/src/main.py"),
    ("ls C:\\Users\\王\\文档\\报告\\q3.xlsx", "C:\\Users\\王\\文档\\报告\\q3.xlsx"),
])
def test_a_path_with_unspaced_letters_is_pinned_whole_and_never_in_pieces(text, path):
    """The spaced view reads the letters as spaces and sees pieces of the path (``08_``,
    ``/scripts/scraper.mjs``): they are no literals of their own."""
    found = {lit.value for lit in Extractor(load_packs()).scan_turn(Turn("user", text), 1).literals}
    assert path in found
    pieces = [v for v in found if v != path and v in path and ("/" in v or "\\" in v)]
    assert pieces == []


@pytest.mark.parametrize("text, path", [
    ("请打开/srv/app/config.yaml文件，然后运行", "/srv/app/config.yaml"),
    ("修改d:/ClaudeWorkspace/08_客户跟进/scripts/scraper.mjs文件里的选择器",
     "d:/ClaudeWorkspace/08_客户跟进/scripts/scraper.mjs"),
    ("路径是C:\\Users\\张三\\Desktop\\报告.docx，请检查", "C:\\Users\\张三\\Desktop\\报告.docx"),
    ("파일 /home/kim/app/main.go를 확인해 주세요", "/home/kim/app/main.go"),  # a particle
    ("파일 src/app/main.py를 열어", "src/app/main.py"),
])
def test_a_path_glued_to_a_sentence_without_spaces_is_pinned_without_it(text, path):
    """Before or after the path, the sentence's letters are not the path's: a file name ends
    at its extension, a drive letter may follow them."""
    found = {lit.value for lit in Extractor(load_packs()).scan_turn(Turn("user", text), 1).literals}
    assert path in found
    assert not [v for v in found if v.startswith(path) and v != path]


@pytest.mark.parametrize("text, literal", [
    ("Run C:\\Program Files\\Git\\bin\\bash.exe now", "C:\\Program Files\\Git\\bin\\bash.exe"),
    ("cd 'C:/Users/ana/My Projects/site' && npm i", "C:/Users/ana/My Projects/site"),
    ("Open `docs/vibelife spec v2.0.md` first", "docs/vibelife spec v2.0.md"),
    ("cd /mnt/c/My Projects/site && ls", "/mnt/c/My Projects/site"),
    ("wrote 'C:\\Windows\\System32\\drivers\\etc\\hosts'.",
     "C:\\Windows\\System32\\drivers\\etc\\hosts"),
    ("(backup: E:\\efi-baseline-hashes.csv)", "E:\\efi-baseline-hashes.csv"),
    ("see **https://github.com/acme/tool)**", "https://github.com/acme/tool"),
    ("Edited **/etc/profile.d/aliases.sh** today", "/etc/profile.d/aliases.sh"),
    ("open ~/Library/Mobile\\ Documents/com~apple~CloudDocs/notes.md",
     "~/Library/Mobile\\ Documents/com~apple~CloudDocs/notes.md"),
    ("Vite serves on :5173.", ":5173"),
    ("coverage went to 87.5%.", "87.5%"),
    ("See README.md#usage.", "README.md#usage"),
])
def test_paths_as_people_write_them_are_pinned_whole_without_the_prose_around(text, literal):
    found = {lit.value for lit in Extractor(load_packs()).scan_turn(Turn("assistant", text),
                                                                     1).literals}
    assert literal in found
    # no copy of it carrying a quote, bracket, asterisk or sentence punctuation
    assert not any(v != literal and v.startswith(literal) and v[len(literal):] in
                   ("'", "'.", ")", ")**", "`", ".") for v in found)
    assert "C:\\Program" not in found
    assert not any(v.startswith("**") for v in found)


def test_windows_paths_of_json_text_and_listings_are_pinned_whole():
    """A tool result holding JSON text: a doubled-backslash path ends where the \\n escape
    begins and the next path starts after it; a listing's header names its folder whole,
    the space of its last segment included (issue 26)."""
    extractor = Extractor(load_packs())
    stdout = '{"stdout": "C:\\\\Program Files\\\\nodejs\\\\node.exe\\nC:\\\\Users\\\\ana\\\\notes.txt"}'
    found = {lit.value for lit in extractor.scan_turn(Turn("tool", stdout), 1).literals}
    paths = {v for v in found if "\\" in v}
    assert paths == {"C:\\\\Program Files\\\\nodejs\\\\node.exe", "C:\\\\Users\\\\ana\\\\notes.txt"}
    listing = "    Directory: C:\\Users\\ana\\Downloads\\SaaSV13 - Rick\n\nMode  Name\n"
    found = {lit.value for lit in extractor.scan_turn(Turn("tool", listing), 1).literals}
    assert "C:\\Users\\ana\\Downloads\\SaaSV13 - Rick" in found


@pytest.mark.parametrize("role, text, literal", [
    ("assistant", "## SECURITY SCORE: 45/100 (was 38/100)", "45/100"),
    ("assistant", "- Authentication: 20/20, Quality 8/10.", "8/10"),
    ("assistant", "### Integration with **CI/CD**", "CI/CD"),
    ("tool", "1. **Fix Redaction Bug** - UUID/phone number collision", "UUID/phone"),
    ("assistant", "git clone git@github.com:acme-corp/web-app.git && cd web-app",
     "git@github.com:acme-corp/web-app.git"),
    ("assistant", "scp backup.tar root@192.168.1.5:/var/backups/ now", "root@192.168.1.5:/var/backups/"),
    ("tool", "tcp4  0  0  *.65189   *.*   LISTEN", "65189"),
    ("tool", "tcp   LISTEN 0  128  [::]:2222  [::]:*", "2222"),
    ("tool", "User SID tail: 10-662045080-1002", "10-662045080-1002"),
    ("tool", "- Raw JSONL logs (66 files, 8.4MB)", "8.4MB"),
    ("assistant", "ssh box \"top -bn1 | head -20\"", "-bn1"),
    ("tool", "    20→README.md\n    21→**/README.md", "**/README.md"),
    ("tool", "Reading /mnt/c/Program Files/Git/etc/gitconfig.", "/mnt/c/Program Files/Git/etc/gitconfig"),
    ("tool", "[allowlist]\npaths = ['''logs/.*\\.jsonl''']", "logs/.*\\.jsonl"),
    ("tool", '{"model": "gpt-4o", "usage": {"input_tokens": 1200}}', "gpt-4o"),
    ("assistant", "ollama pull llama3.1:8b first.", "llama3.1:8b"),
    ("assistant", "ws['A13'].value = total", "A13"),
    ("tool", "A12: Subtotal\nA13: =SUM(A1:A12)", "A13"),
    ("assistant", "更新了 项目/配置/settings.yaml 和 README", "项目/配置/settings.yaml"),
])
def test_what_real_sessions_re_type_is_pinned_without_the_prose_around(role, text, literal):
    """Shapes of real Claude Code sessions (issue 26), written from the tools' own formats:
    scores, slash-joined names, remote paths, socket listings, sizes, clustered flags and a
    glob on a numbered file-read line are pinned as written, never with the asterisks,
    comma or period around them."""
    found = {lit.value for lit in Extractor(load_packs()).scan_turn(Turn(role, text),
                                                                     1).literals}
    assert literal in found
    assert not any(v != literal and literal in v and v.strip("*.,:;") == literal for v in found)


def test_case_insensitive_terms_survive_a_dotted_capital_i_anywhere_in_the_text():
    """İ lowercases to two characters: the lowercased text no longer lined up with the text
    and the rule matched case-sensitively, so 'ACME WIDGET' was lost beside 'İstanbul'."""
    pack = pack_from("""
name: t
version: '1'
rules:
  - id: product
    kind: terms
    terms: [Acme Widget, İzmir Hub]
    ignore_case: true
""")
    extractor = Extractor([pack])

    def values(text: str) -> list[str]:
        return [l.value for l in extractor.scan_text(text, "user").literals]

    assert values("İstanbul: ACME WIDGET") == ["ACME WIDGET"]
    assert values("ACME WİDGET and acme wıdget") == ["ACME WİDGET", "acme wıdget"]
    assert values("izmir hub, İZMİR HUB") == ["izmir hub", "İZMİR HUB"]
