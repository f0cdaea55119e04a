"""The coding pack's literal classes at their boundaries: what each rule keeps, and the
prose, shell output and look-alikes it must leave alone. Run through the whole engine."""

import pytest

from firewall.extraction.extract import Extractor
from firewall.extraction.packs import load_packs
from firewall.turns import ToolCall, Turn


@pytest.fixture(scope="module")
def coding() -> Extractor:
    return Extractor(load_packs("coding"))


def kept(extractor: Extractor, rule: str, text: str, role: str = "tool") -> list[str]:
    """Every hit of one rule, before values are deduplicated across rules."""
    return [lit.value for lit in extractor.scan_text(text, role).literals
            if lit.rule == f"coding/{rule}"]


KEEPS = [
    # traceback frames: the path to open and the function to grep, never the frame text
    ("python-frame", '  File "/testbed/astropy/io/fits/card.py", line 1011, in _format_value',
     ["/testbed/astropy/io/fits/card.py", "_format_value"]),
    ("python-frame", 'File \\"src/x.py\\", line 7, in main', ["src/x.py", "main"]),
    ("python-frame", '  File "<string>", line 1, in <module>', []),
    ("python-frame", '  File "<frozen importlib._bootstrap>", line 241, in _call_with_frames_removed', []),
    ("python-frame", '  File "/app/run.py", line 3, in <module>', ["/app/run.py"]),
    # Django checks: the whole id, not core's bare E031
    ("django-check-id", "?: (models.E031) and fields.E334.", ["models.E031", "fields.E334"]),
    ("django-check-id", "v2.E031 models.E0311 Models.W042 a.b.E001", []),
    # linter codes only where a linter or a person puts them
    ("lint-code", "x = 1  # noqa: E501,SIM108", ["E501", "SIM108"]),
    ("lint-code", "# pylint: disable=missing-docstring, R1705", ["R1705"]),
    ("lint-code", "src/a.py:3:1: F401 [*] `os` imported but unused", ["F401"]),
    ("lint-code", "flight AA100, gate B12, item SKU123, code R1705 in prose", []),
    # type checker codes without their brackets
    ("mypy-error-code", 'a.py:1: error: Item "None" has no attribute "x"  [union-attr]',
     ["union-attr"]),
    ("type-ignore-code", "# type: ignore[arg-type,misc]", ["arg-type", "misc"]),
    ("mypy-error-code", "- [ ] todo  [x-y] and see [arg-type] in the docs", []),
    # SQLSTATE spellings core's error-code does not read
    ("sqlstate-code", "SQLSTATE[HY000] [2002] Connection refused", ["HY000"]),
    ("sqlstate-code", "SQLSTATE 23505", []),
    # exceptions: bare, qualified, Go sentinels; not the plain words
    ("exception-name", "E   marshmallow.exceptions.ValidationError: {'x': ['bad']}",
     ["marshmallow.exceptions.ValidationError"]),
    ("exception-name", "pytest.raises(ZeroDivisionError); except (OSError, StopIteration):",
     ["ZeroDivisionError", "OSError", "StopIteration"]),
    ("exception-name", "Error: 503. Exception raised; Warning! errors, ERROR, MyError_x", []),
    # dotted module paths in code contexts only
    ("dotted-module-path", "+from django.db.models.fields import Field", ["django.db.models.fields"]),
    ("dotted-module-path", "It failed.Next we import numpy and e.g. from x.y the value", []),
    ("dotted-module-path", "Visit docs.python.org; version 1.2.3; see example.com.", []),
    ("dotted-module-path", "from sklearn.linear_model the fit is slow\nfrom a.b import c", ["a.b"]),
    # failing tests as runners print them; passing tests are not pinned
    ("unittest-test-id", "FAIL: test_x (pkg.mod.Class)", ["test_x", "pkg.mod.Class"]),
    ("unittest-test-id", "test_y (pkg.mod.Class.test_y) ... ok", []),
    ("django-test-label", "./runtests.py --verbosity 2 admin_checks.tests.SystemChecksTestCase",
     ["admin_checks.tests.SystemChecksTestCase"]),
    ("junit-test-id", "-Dtest=com.acme.OrderTest#refundsTwice", ["com.acme.OrderTest#refundsTwice"]),
    ("junit-test-id", "order #W2378156, #123, https://x.io/Docs#usage, C#", []),
    ("go-test-name", "--- FAIL: TestRefund/partial_amount (0.01s)", ["TestRefund/partial_amount"]),
    ("go-test-name", "--- PASS: TestRefund (0.01s)\n=== RUN   TestOther", []),
    # git revisions and tags (SHAs and branches are core/hex-digest and git-branch)
    ("git-ref", "git rebase -i HEAD~3 && git tag v2.0-rc1", ["HEAD~3", "v2.0-rc1"]),
    ("git-ref", "HEAD is now at 3f2a9c1; git tag -l", []),
    # environment variable names read in code
    ("env-var-reference", "os.environ.get('DATABASE_URL'); process.env.API_KEY",
     ["DATABASE_URL", "API_KEY"]),
    ("env-var-reference", "os.environ.get(name); process.env[key]", []),
    # issue and PR references
    ("issue-reference", "Fixes #4821. Merge pull request #88 from a/b", ["#4821", "#88"]),
    ("issue-reference", "order #W2378156, item #3 of 5, the #1 priority", []),
    # definitions in other languages and diff hunk headers
    ("defined-name-other", "-    fn checksum_of(data: &[u8]) -> u32 {", ["checksum_of"]),
    ("diff-hunk-function", "@@ -40,6 +40,8 @@ def _get_recarray_field(array, key):",
     ["_get_recarray_field"]),
    ("diff-hunk-function", "@@ -1,4 +1,4 @@ from x import (\n@@ -9 +9 @@ if(ok) {", []),
    # imported names that are not plain words; three-part dotted calls
    ("imported-name", "from astropy.io.fits.column import FITS_rec, np, _get_recarray_field",
     ["FITS_rec", "_get_recarray_field"]),
    ("dotted-call", "np.testing.assert_allclose(x, y); f.read(); self.a.b(1)",
     ["np.testing.assert_allclose", "f.read"]),
    # the shapes issue 30's cheaper spellings of these rules restate (benchmarks/README.md):
    # a quoted name at the very end, keys with spaces before their colon, '::', a comma in a list
    ("error-quoted-name", "KeyError: 'user_id'", ["user_id"]),
    ("error-quoted-name", 'error: {"order_id":  "a.b", "x_y"    : 1, "p.q" :: 2}', ["x_y"]),
    ("code-name", 'parse_date"    : x; MySchema::load; {"max_retries" : 3}; fooBar.baz; run_it.',
     ["parse_date", "MySchema", "run_it"]),
    ("code-number", "f(3600, x)\n[1.5,\n2.25]; 12+34; 1234,5", ["3600,", "1.5,", "2.25", "12"]),
]


@pytest.mark.parametrize(("rule", "text", "expected"), KEEPS,
                         ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(KEEPS)])
def test_coding_rule_keeps_exactly(coding, rule, text, expected):
    role = "user" if rule == "dotted-call" else "tool"  # dotted-call reads what people write
    assert kept(coding, rule, text, role) == expected


def test_frame_function_is_not_taken_from_a_line_that_is_not_a_frame(coding):
    # ", in f" only counts right after a frame's 'File "...", line N'
    assert kept(coding, "python-frame", "the bug is in 3 places, in main and elsewhere") == []


def test_dotted_call_ignores_tool_output(coding):
    # source listings print every call in a file; only code people write is pinned
    assert kept(coding, "dotted-call", "    return os.path.join(a, b)") == []


def test_codes_in_a_tool_call_argument_are_found(coding):
    turn = Turn("assistant", "", tool_calls=[
        ToolCall("bash", {"command": "ruff check --select SIM108,UP007 src/"})])
    found = [lit.value for lit in coding.scan_turn(turn, 0).literals
             if lit.rule == "coding/lint-code"]
    assert found == ["SIM108", "UP007"]


@pytest.mark.parametrize(("text", "value"), [
    ("the bug is at src/auth/handler.ts:142 (see above)", "src/auth/handler.ts:142"),
    ("main.go:12:5: undefined: Foo", "main.go:12:5"),
    ("tests/test_x.py:12: AssertionError", "tests/test_x.py:12"),
    ("error[E0308]: mismatched types\n  --> src/main.rs:4:5", "src/main.rs:4:5"),
])
def test_file_line_locations_are_kept_by_the_default_packs(text, value):
    # file:line is core's path rules and coding/bare-filename, both with the line
    found = [lit.value for lit in Extractor(load_packs()).scan_text(text, "tool").literals]
    assert value in found


RETAIL_PROSE = [
    "I'd like to return order #W2378156; the item 8118291112 arrived broken. Error: 503 "
    "Service Unavailable. Please check the status and get back to me, e.g. by email.",
    '{"order_id": "#W2378156", "status": "pending", "payment_method_id": "credit_card_8897086"}',
    "Sure! I fixed it. The issue was the address. Import fees apply from the U.S. to Canada.",
]
NEW_RULES = ("django-check-id", "lint-code", "mypy-error-code", "type-ignore-code",
             "sqlstate-code", "exception-name", "dotted-module-path", "unittest-test-id", "django-test-label",
             "junit-test-id", "go-test-name", "git-ref", "env-var-reference", "issue-reference",
             "defined-name-other", "diff-hunk-function", "imported-name", "dotted-call")


@pytest.mark.parametrize("text", RETAIL_PROSE)
def test_coding_classes_stay_off_customer_service_text(coding, text):
    for role in ("user", "tool", "assistant"):
        hits = [lit for lit in coding.scan_text(text, role).literals
                if lit.rule.split("/")[1] in NEW_RULES]
        assert hits == [], (role, hits)


def test_the_name_rules_locators_skip_mapping_keys(coding):
    """code-name and error-quoted-name say in their first lookahead what may follow a name, so
    their locators (RE2) pass over JSON keys instead of handing each one to `regex`."""
    from firewall.extraction.locate import _UNANCHORED

    data = b'{"order_id": 1, "user_id": 2, "payment_method": 3, "error": "x"}'
    for qid in ("coding/code-name", "coding/error-quoted-name"):
        rule = next(r for r in coding.rules if r.qid == qid)
        assert rule.locator is not None, qid
        assert rule.locator.match(_UNANCHORED, data, 0, len(data))[0][0] < 0, qid
        # the same name as a value is still a candidate (an error line quoting it)
        value = b'{"error": "no such column", "column": "user_id"}'
        assert rule.locator.match(_UNANCHORED, value, 0, len(value))[0][0] > 0, qid
