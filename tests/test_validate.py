"""The summary validator: exact presence, near-miss mutations with their spans, and the
near-duplicates that must not be flagged."""

from __future__ import annotations

import json

import pytest

from firewall.summarizers.base import RequiredLiteral
from firewall.compaction.validate import REASONS, Finding, Verdict, validate

INV = "INV-2025-08-44719"
ORDER = "#W2378156"
CHARGE = "ch_3NkQ2"
PATH = "src/auth/handler.ts:142"
UUID = "123e4567-e89b-12d3-a456-426614174000"
SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
PNR = "SDZQKO"


def _one_mutation(literal: str, written: str) -> Finding:
    summary = f"The customer asked about {written}, twice."
    verdict = validate(summary, [literal])
    assert [f.status for f in verdict.findings] == ["mutated"], verdict.findings
    finding = verdict.findings[0]
    assert finding.resembles == written
    assert summary[finding.span[0]:finding.span[1]] == written
    assert not verdict.ok
    return finding


# (literal, what the summarizer wrote, expected reason)
MUTATIONS = [
    # digits transposed, dropped, added, changed
    (INV, "INV-2025-08-44791", "transposed digits"),
    (ORDER, "#W2378165", "transposed digits"),
    (ORDER, "#W238156", "edited"),
    (ORDER, "#W23781506", "edited"),
    (ORDER, "#W2378157", "edited"),
    (ORDER, "#W23781567", "edited"),  # the literal's bytes, glued to an extra digit
    (CHARGE, "ch_3NkQ3", "edited"),
    (CHARGE, "ch_3NQk2", "transposed characters"),
    (UUID, "123e4567-e89b-12d3-a456-426614147000", "transposed digits"),
    (UUID, "123e4567-e89b-12d3-a456-426614177000", "edited"),
    (SHA, "9fceb02d0ae598e95dc970b74767f19372d61af9", "edited"),
    (SHA, "9fceb02d0ae598e95dc970b74767f1937d61af8", "edited"),
    # separators
    (INV, "INV 2025 08 44719", "separator changed"),
    (INV, "INV\u00a02025\u00a008\u00a044719", "separator changed"),
    (INV, "INV_2025_08_44719", "separator changed"),
    (INV, "INV202508-44719", "separator changed"),
    (INV, "INV2025.08.44719", "separator changed"),
    (ORDER, "W2378156", "separator changed"),
    # Unicode look-alikes
    (INV, "INV\u20112025\u201108\u201144719", "look-alike characters"),  # non-breaking hyphen
    (INV, "INV\u20132025\u201308\u201344719", "look-alike characters"),  # en dash
    (INV, "INV\u22122025-08-44719", "look-alike characters"),  # minus sign
    (INV, "INV\u20142025\u201408\u201444719", "look-alike characters"),  # em dash splits tokens
    (INV, "ＩＮＶ－２０２５－０８－４４７１９", "look-alike characters"),  # full-width (NFKC)
    (ORDER, "#W２３７８１５６", "look-alike characters"),
    (INV, "INV-2025-08-447\u200b19", "look-alike characters"),
    (INV, "INV-2025\u200c-08-44719", "look-alike characters"),
    (INV, "INV-\u200d2025-08-44719", "look-alike characters"),
    (INV, "INV-2025-08\u2060-44719", "look-alike characters"),
    (INV, "INV-2025-08-4471\ufeff9", "look-alike characters"),
    (INV, "\u0406NV-2025-08-44719", "look-alike characters"),  # Cyrillic capital I
    (CHARGE, "ch_3NkQ\uff12", "look-alike characters"),
    # case
    (ORDER, "#w2378156", "case changed"),
    (PATH, "SRC/auth/Handler.ts:142", "case changed"),
    (CHARGE, "CH_3NKQ2", "case changed"),
    (INV, "inv-2025-08-44719", "case changed"),
    # truncation
    (PATH, "src/auth/handler.ts", "truncated"),
    (PATH, "auth/handler.ts:142", "truncated"),
    (PATH, "src/auth/handler.t", "truncated"),
    (INV, "INV-2025-08-4471", "truncated"),
    (INV, "2025-08-44719", "truncated"),
    (ORDER, "#W237815", "truncated"),
    (UUID, "123e4567-e89b-12d3-a456-42661417400", "truncated"),
    (UUID, "123e4567", "truncated"),
    (SHA, "9fceb02", "truncated"),
    (SHA, "9fceb02d0ae598e9", "truncated"),
    # prefix and suffix kept, middle changed or elided
    (INV, "INV-2025-11-44719", "edited"),
    (UUID, "123e4567-0000-0000-a456-426614174000", "edited"),
    ("sk_live_51HxQ2abcDEF9876zz", "sk_live_51HxQ2XYZDEF9876zz", "edited"),
    ("src/auth/handler.ts", "src/api/handler.ts", "edited"),
    (SHA, "9fceb02…61af8", "truncated"),
    (SHA, "9fceb02...61af8", "truncated"),
    ("src/auth/handler.ts", "src/…/handler.ts", "truncated"),
    # a booking reference of capitals only: letters swapped, changed, dropped, doubled, case
    (PNR, "SDZKQO", "transposed characters"),
    (PNR, "SDZQKD", "edited"),
    (PNR, "SDZQO", "edited"),
    (PNR, "SDZQKKO", "edited"),
    (PNR, "sdzqko", "case changed"),
    (PNR, "SDZQ\u041aO", "look-alike characters"),  # Cyrillic capital Ka
    ("decode_ascii", "decode_acsii", "transposed characters"),
    ("decode_ascii", "decode_asii", "edited"),
    ("decode_ascii", "Decode_Ascii", "case changed"),
]


@pytest.mark.parametrize(("literal", "written", "reason"), MUTATIONS)
def test_mutation_is_caught_with_its_span(literal: str, written: str, reason: str) -> None:
    assert _one_mutation(literal, written).reason == reason


def test_every_reason_is_exercised() -> None:
    assert {reason for _, _, reason in MUTATIONS} == set(REASONS)


@pytest.mark.parametrize(("literal", "summary"), [
    # ordinary words, numbers of another shape, dates and prices near an ID
    (INV, "Invoice for $447.19 issued 2025-08-14 at 12:30; 44719 customers; invoices; INV 2025."),
    ("447190", "It cost 4471.90, or 447.19 twice, 44,719 units, 447 190 total."),
    ("44719", "Refund of $447.19 for 44,718 users; 44718 and 44720 were other counts."),
    (ORDER, "Order total $237.81, 2378 units, W-2 form, 2025-03-15, version 2.3.7, W2 W23."),
    (CHARGE, "the charge was ch_ something; chunk 3 of the queue; check Q2 numbers."),
    ("pending", "spending money on pending-review items is Pending? no: spend, pend, upending."),
    ("US", "Let us see: the us team, U.S. customers, usa."),
    ("Acme", "ACME and acme and Acmes are not it."),
    ("v2", "We saw v20 and v 2 and v-2 and v3."),
    (PATH, "Files: src/auth, auth/, handler.ts and src/ were read; src/auth/handler.py too."),
    (SHA, "Commit 9f and 9fce and decade 2000; the hex colour #9fceb0."),
    (UUID, "Request 123e and e89b-12d3 and 4567 ids."),
])
def test_ordinary_text_is_not_flagged(literal: str, summary: str) -> None:
    verdict = validate(summary, [literal])
    assert verdict.mutated == (), verdict.mutated


# (required, the other real value written in the summary, instead of the required one)
NEAR_DUPLICATES = [
    (INV, "INV-2025-08-44718"),
    (INV, "INV-2025-08-44791"),
    (ORDER, "#W2378157"),
    (CHARGE, "ch_3NkQ3"),
    (PATH, "src/auth/handler.ts"),
    (PATH, "src/auth/handler.ts:124"),
    (SHA, "9fceb02"),
    (UUID, "123e4567-e89b-12d3-a456-426614174001"),
]


@pytest.mark.parametrize(("required", "other"), NEAR_DUPLICATES)
def test_another_known_value_is_not_a_mutation(required: str, other: str) -> None:
    summary = f"We worked on {other} today."
    assert validate(summary, [required]).mutated, "precondition: it is a near miss when unknown"
    verdict = validate(summary, [required], known=[required, other])
    assert [(f.value, f.status) for f in verdict.findings] == [(required, "missing")]


@pytest.mark.parametrize(("required", "other"), NEAR_DUPLICATES)
def test_both_known_values_present(required: str, other: str) -> None:
    verdict = validate(f"Both {required} and {other} were refunded.", [required, other])
    assert verdict.ok
    assert [f.value for f in verdict.present] == [required, other]


def test_span_goes_to_the_value_it_resembles_best() -> None:
    # a look-alike copy of a known neighbour is that neighbour's, not an edit of the required one
    other = "INV-2025-08-44718"
    verdict = validate(f"Refunded {other.replace('-', '‑')}.", [INV], known=[other])
    assert [(f.value, f.status, f.required) for f in verdict.findings] == [
        (INV, "missing", True), (other, "mutated", False)]


def test_a_near_miss_of_a_known_literal_that_is_not_required_fails_the_verdict() -> None:
    # a wrong ID asserted by the summary is worse than a lost one, required or not
    verdict = validate("Order #W2378165 shipped.", [], known=[("#W2378156", "shop/order")])
    assert not verdict.ok
    assert [(f.value, f.rule, f.status, f.resembles, f.reason, f.required)
            for f in verdict.findings] == [
        ("#W2378156", "shop/order", "mutated", "#W2378165", "transposed digits", False)]
    assert validate("Order #W2378156 shipped.", [], known=["#W2378156"]).ok


@pytest.mark.parametrize(("literal", "summary", "source"), [
    # another real function of the span, one edit away from the literal
    ("encode_ascii", "It calls decode_ascii first.", "def encode_ascii(): ...\ndef decode_ascii():"),
    # the directory the files were listed from
    ("src/marshmallow/schema.py", "Listed src/marshmallow/ files.",
     "$ ls src/marshmallow/\nsrc/marshmallow/schema.py"),
    # a word of the span in another case, at a sentence end
    ("DateTime", "It parses a datetime.", "import datetime.\nclass DateTime: ..."),
    # a whole multi-token window of the span
    (INV, "Filed as INV 2025 08 44719 by the bank.", "bank ref: INV 2025 08 44719, "),
    # the literal glued into a longer token of the source (#W9502127 holds 9502127)
    ("9502127", "Order #W9502127 shipped.", "user: my order #W9502127"),
    ("./src/rules/L0", "ran cat ./src/rules/L028.py", "grep x ./src/rules/L0*.py; cat ./src/rules/L028.py"),
    # a separator-only token after the copy is not part of it
    (ORDER, "Order W2378156 - shipped.", "the order W2378156 - shipped"),
])
def test_a_whole_token_of_the_source_is_copied_not_mutated(literal: str, summary: str,
                                                           source: str) -> None:
    assert validate(summary, [literal]).mutated, "precondition: a near miss without the source"
    verdict = validate(summary, [], known=[literal], source=[source])
    assert verdict.ok and verdict.findings == ()


@pytest.mark.parametrize(("summary", "source"), [
    # a prefix of a longer source token is not a token of the source: the line number was lost
    ("See src/auth/handler.ts for it.", f"error at {PATH} (line)"),
    ("See src/auth/handler.ts. Done", f"error at {PATH}."),
    # inside a longer token, or glued to a word
    ("Refund INV-2025-08-44791 now.", "XINV-2025-08-44791 INV-2025-08-44791Y"),
])
def test_a_piece_of_a_longer_source_token_is_still_a_mutation(summary: str, source: str) -> None:
    literal = PATH if "src" in summary else INV
    verdict = validate(summary, [], known=[literal], source=[source])
    assert [f.status for f in verdict.findings] == ["mutated"]


def test_a_window_never_ends_in_a_separator_only_token() -> None:
    verdict = validate("Order W2378156 - shipped.", [ORDER])
    assert [f.resembles for f in verdict.mutated] == ["W2378156"]


def test_occurs_is_the_present_test() -> None:
    from firewall.compaction.validate import occurs

    assert occurs(f"see {INV}.", INV) and not occurs(f"see {INV}1", INV)
    assert not occurs("spending", "pending") and not occurs("x", "")


def test_span_resembling_two_required_values_equally_is_reported_for_both() -> None:
    a, b = "INV-2025-08-44718", "INV-2025-08-44716"
    verdict = validate("Refunded INV-2025-08-44717.", [a, b])
    assert [(f.value, f.reason) for f in verdict.mutated] == [(a, "edited"), (b, "edited")]


def test_present_and_a_mutated_copy_elsewhere() -> None:
    summary = f"Invoice {INV} was paid; later INV-2025-08-44791 was disputed."
    verdict = validate(summary, [INV])
    statuses = [(f.status, f.span, f.resembles) for f in verdict.findings]
    good, bad = summary.index(INV), summary.index("INV-2025-08-44791")
    assert statuses == [
        ("present", (good, good + len(INV)), None),
        ("mutated", (bad, bad + len(INV)), "INV-2025-08-44791"),
    ]
    assert not verdict.ok  # a wrong copy beside the right one still misleads
    assert verdict.present and verdict.mutated and not verdict.missing


def test_present_and_missing_basics() -> None:
    summary = f"Refund {INV} for order {ORDER}; see {PATH}."
    verdict = validate(summary, [INV, ORDER, PATH, CHARGE])
    assert [(f.value, f.status) for f in verdict.findings] == [
        (INV, "present"), (ORDER, "present"), (PATH, "present"), (CHARGE, "missing")]
    for f in verdict.present:
        assert summary[f.span[0]:f.span[1]] == f.value and f.reason is None
    assert verdict.missing[0].span is None
    assert not verdict.ok
    assert validate(summary, [INV, ORDER]).ok


def test_literal_inside_a_longer_token_at_a_non_alnum_boundary_is_present() -> None:
    verdict = validate(f"invoice_id={INV}, file {PATH}: line", [INV, "44719", "src/auth/handler.ts"])
    assert [f.status for f in verdict.findings] == ["present"] * 3


def test_glued_word_literal_is_missing_not_mutated() -> None:
    assert [f.status for f in validate("spending", ["pending"]).findings] == ["missing"]


def test_several_mutations_each_get_a_finding_in_order() -> None:
    summary = "First INV-2025-08-44791, then INV 2025 08 44719, then inv-2025-08-44719."
    verdict = validate(summary, [INV])
    assert [f.reason for f in verdict.findings] == [
        "transposed digits", "separator changed", "case changed"]
    for f in verdict.findings:
        assert summary[f.span[0]:f.span[1]] == f.resembles


def test_empty_summary_and_empty_required() -> None:
    verdict = validate("", [INV, ORDER])
    assert [f.status for f in verdict.findings] == ["missing", "missing"]
    assert validate("anything", []).findings == ()
    assert validate("anything", []).ok


def test_hostile_summary_of_look_alikes_only() -> None:
    literals = [INV, ORDER, CHARGE, PATH, UUID, SHA]
    written = [
        "ＩＮＶ－２０２５－０８－４４７１９",
        "#W2378\u200b156",
        "сh_3NkQ2",  # Cyrillic es
        "src\u2215auth/handler.ts:142".replace("\u2215", "/").replace("-", "").upper(),
        UUID.replace("-", "\u2011"),
        SHA[:20] + "\u2060" + SHA[20:],
    ]
    summary = " ".join(f"«{w}»" for w in written)
    verdict = validate(summary, literals)
    assert not verdict.present and not verdict.missing
    assert [f.value for f in verdict.mutated] == literals
    for f, w in zip(verdict.mutated, written):
        assert f.resembles == w == summary[f.span[0]:f.span[1]]


def test_required_accepts_strings_pairs_and_objects() -> None:
    summary = f"{INV} {ORDER} {CHARGE}"
    forms = [
        [INV, ORDER, CHARGE],
        [(INV, "billing/invoice"), (ORDER, "shop/order"), (CHARGE, None)],
        [RequiredLiteral(INV, "billing/invoice"), RequiredLiteral(ORDER, "shop/order"),
         RequiredLiteral(CHARGE, "stripe/charge")],
    ]
    for required in forms:
        verdict = validate(summary, required)
        assert [f.value for f in verdict.present] == [INV, ORDER, CHARGE]
    rules = [f.rule for f in validate(summary, forms[2]).findings]
    assert rules == ["billing/invoice", "shop/order", "stripe/charge"]
    # duplicates collapse onto the first occurrence (and its rule)
    dup = validate(summary, [(INV, "a"), (INV, "b")])
    assert [(f.value, f.rule) for f in dup.findings] == [(INV, "a")]


def test_rule_is_carried_on_mutations() -> None:
    verdict = validate("INV-2025-08-44791", [RequiredLiteral(INV, "billing/invoice")])
    assert verdict.mutated[0].rule == "billing/invoice"


def test_to_dict_is_json_ready() -> None:
    verdict = validate(f"{INV} and #W2378165", [INV, ORDER, CHARGE])
    data = json.loads(json.dumps(verdict.to_dict()))
    assert data["ok"] is False
    assert [(d["value"], d["status"]) for d in data["findings"]] == [
        (INV, "present"), (ORDER, "mutated"), (CHARGE, "missing")]
    assert data["findings"][1]["span"] == [len(INV) + 5, len(INV) + 5 + len(ORDER)]
    assert isinstance(verdict, Verdict)


def test_short_literals_only_match_exactly_or_by_normalisation() -> None:
    assert validate("we used v3 and w2", ["v2"]).mutated == ()
    assert [f.reason for f in validate("we used ｖ２", ["v2"]).findings] == ["look-alike characters"]
    assert [f.reason for f in validate("we used V2", ["v2"]).findings] == ["case changed"]


def test_large_ledger_results_match_small_ledger_results() -> None:
    # the index must not lose matches when many same-shaped values crowd its buckets
    ledger = [f"INV-2025-08-{n}" for n in range(40000, 40500)]
    summary = " ".join(f"INV-2025-08-{n}" for n in range(40000, 40500, 5)) + " INV-2025-08-40016"
    mutation = validate(summary, ["INV-2025-08-40061"], known=ledger)
    assert [f.status for f in mutation.findings] == ["missing"]  # 40016 is a real invoice
    unknown = validate("INV-2025-08-49961", ledger[:3] + ["INV-2025-08-49916"], known=ledger)
    assert [(f.value, f.reason) for f in unknown.mutated] == [
        ("INV-2025-08-49916", "transposed digits")]


def test_invisible_character_beside_the_literal_does_not_hide_it() -> None:
    # the exact bytes are there and bounded; only characters inside a literal make a look-alike
    summary = f"about \ufeff{INV}\u200b, done"
    verdict = validate(summary, [INV])
    assert [f.status for f in verdict.findings] == ["present"]
    assert summary[slice(*verdict.findings[0].span)] == INV


def test_a_literal_beside_a_chinese_or_japanese_word_is_present_not_glued():
    verdict = validate("お客様の注文#W1234567はキャンセル済みです。订单W7654321已发货。",
                       [("#W1234567", "r"), ("W7654321", "r")])
    assert verdict.ok, verdict
    # a Latin letter or a digit beside it is still glue
    assert not validate("order #W12345678 shipped", [("#W1234567", "r")]).ok


@pytest.mark.parametrize("summary", ["お客様の注文#W2378165はキャンセル済みです。",
                                     "订单#W2378165已取消", "주문#W2378165을 취소했습니다",
                                     "คำสั่งซื้อ#W2378165ถูกยกเลิกแล้ว"])
def test_a_near_miss_beside_a_chinese_japanese_or_korean_word_is_a_mutation(summary):
    [finding] = validate(summary, [("#W2378156", "r")]).findings
    assert (finding.status, finding.resembles) == ("mutated", "#W2378165")
    assert summary[slice(*finding.span)] == "#W2378165"
    # the span is not called a mutation when the source holds it, glued the same way
    [finding] = validate(summary, [("#W2378156", "r")],
                         source=["注文#W2378165を確認しました"]).findings
    assert finding.status == "missing"


SHA_ELIDED_MIN = "9fce…1af8"  # 4 + 4 characters kept around the ellipsis
_W12 = "-".join(f"{chr(97 + i)}{i + 1}" for i in range(12))
_W13 = "-".join(f"{chr(97 + i)}{i + 1}" for i in range(13))


# (literal, what the summarizer wrote, the reason, or None: not a mutation), each pair on
# either side of one threshold of the module docstring
BOUNDARIES = [
    # identifiers of 4 characters or more get edits; shorter ones only normalisation
    ("A1B2", "A1B3", "edited"),
    ("A1B", "A1C", None),
    # pure digits: 6 before edits count (prices, years and counts are left alone)
    ("123456", "123457", "edited"),
    ("12345", "12346", None),
    # one edit up to 8 characters, two from 9
    ("AB12CD34", "AB1XCY34", None),
    ("AB12CD345", "AB1XCY345", "edited"),
    # a truncation keeps 5 characters or more, and at least half of the literal
    ("ABCDE12345", "ABCDE", "truncated"),
    ("ABCDE12345", "ABCD", None),
    ("ABCDE123456", "ABCDE", None),
    # a changed middle: 3 characters kept at each end, and 60 % of the literal in all
    ("ABC1234DEF", "ABC9876DEF", "edited"),
    ("ABC1234DEFG", "ABC98765EFG", None),
    # separators count from 4 characters without them
    ("AB-12", "AB_12", "separator changed"),
    ("AB-1", "AB_1", None),
    # separators changed across up to WINDOW_TOKENS (12) tokens
    (_W12, _W12.replace("-", " "), "separator changed"),
    (_W13, _W13.replace("-", " "), None),
    # an elided middle keeps 8 characters or more around the ellipsis
    (SHA, SHA_ELIDED_MIN, "truncated"),
    (SHA, "9fce…af8", None),
]


@pytest.mark.parametrize(("literal", "written", "reason"), BOUNDARIES)
def test_each_threshold_of_the_validator_at_its_boundary(literal, written, reason):
    verdict = validate(f"The customer asked about {written}, twice.", [literal])
    if reason is None:
        assert [f.status for f in verdict.findings] == ["missing"], verdict.findings
    else:
        assert _one_mutation(literal, written).reason == reason
