"""`firewall rules import gitleaks`: Go regexes translated, every rule field and allowlist
converted, and the pack-format features it needs (entropy, group, stopwords, regexes on the
value, the match and the line) usable by any pack."""

from pathlib import Path

import pytest
import regex

from firewall.cli import main
from firewall.errors import PackError
from firewall.extract import Extractor
from firewall.gitleaks import Untranslatable, convert, import_file, translate_regex
from firewall.packs import load_pack, parse_pack
from firewall.turns import Turn

FIXTURE = Path(__file__).parent / "fixtures" / "gitleaks" / "team.toml"

# (Go regex, its `regex` form, a text each must match the same way, the match expected)
TRANSLATIONS = [
    # (?i) mid-pattern: Go scopes it to the end of its group, `regex` would make it global
    (r"\b(p8e-(?i)[a-z0-9]{4})x", r"\b(p8e-(?i:[a-z0-9]{4}))x", "p8e-AbCdx P8E-abcdx", "p8e-AbCdx"),
    (r"a(?i)b|c", r"a(?i:b)|(?i:c)", "aB", "aB"),
    (r"(x(?i)y|z)q", r"(x(?i:y)|(?i:z))q", "Zq", "Zq"),
    (r"(?-i:A)(?i)b", r"(?-i:A)(?i:b)", "AB", "AB"),
    (r"(?i)key", r"(?i)key", "KEY", "KEY"),
    # \z and a non-multi-line $: the very end only (`regex` $ also matches before a final \n)
    (r"tok\z", r"tok\Z", "tok\n", None),
    (r"tok$", r"tok\Z", "tok\n", None),
    (r"(?m)^tok$", r"(?m)^tok$", "tok\nnext", "tok"),
    # POSIX classes are ASCII in Go
    (r"[[:alpha:]]+", r"[A-Za-z]+", "éab", "ab"),
    (r"[[:alnum:]_]{3}", r"[0-9A-Za-z_]{3}", "a_1", "a_1"),
    (r"[[:^digit:]]+", r"[^0-9]+", "12ab", "ab"),
    (r"[[:xdigit:]]{2}", r"[0-9A-Fa-f]{2}", "zzFe", "Fe"),
    (r"[[:punct:]]", r"[!-/:-@\[-`{-~]", "a[", "["),
    # quoting, octal escapes, text braces, named groups
    (r"\Qa.b*\E+", r"a\.b\*+", "a.b**", "a.b**"),
    (r"\101\x{42}\x{263a}", r"\x41\x42\u263a", "AB\u263a", "AB\u263a"),
    (r"a{,3}", r"a\{,3}", "a{,3}", "a{,3}"),
    (r"(?P<sig>x)(?<tag>y)", r"(?P<sig>x)(?<tag>y)", "xy", "xy"),
    (r"[\[\]]", r"[\[\]]", "]", "]"),
]


@pytest.mark.parametrize("go, expected, text, match", TRANSLATIONS)
def test_go_regex_is_translated(go, expected, text, match):
    translated = translate_regex(go)
    assert translated == expected
    found = regex.search(translated, text)
    assert (found.group() if found else None) == match


@pytest.mark.parametrize("go, reason", [
    (r"(?U)a+", "ungreedy"),
    (r"a\Cb", r"\C"),
    (r"[[:^alpha:]0-9]", "negated POSIX class"),
    (r"[[:nosuch:]]", "unknown POSIX class"),
    (r"(a", "unbalanced"),
])
def test_untranslatable_go_regex_is_refused_with_the_reason(go, reason):
    with pytest.raises(Untranslatable, match=regex.escape(reason)):
        translate_regex(go)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    result = import_file(FIXTURE)
    path = tmp_path_factory.mktemp("pack") / "team.yaml"
    path.write_text(result.text)
    return result, Extractor([load_pack(path)])


def _secrets(extractor, text):
    found = extractor.scan_turn(Turn(role="user", text=text), 0).literals
    return [(lit.value, lit.sensitive, lit.rule) for lit in found]


def test_import_reports_what_is_left_out_and_what_is_refused(imported):
    result, extractor = imported
    assert result.rules == 4
    assert [r.rule.id for r in extractor.rules] == [
        "acme-api-token", "acme-db-password", "acme-session", "acme-internal-key"]
    assert result.refused == ["rule 'acme-ungreedy': the ungreedy flag U has no `regex` "
                              "equivalent"]
    assert any("acme-keystore" in n and "path-only" in n for n in result.notes)
    assert any("acme-internal-key" in n and "path condition" in n for n in result.notes)
    assert any("global allowlist #1: paths/commits" in n for n in result.notes)
    assert "# refused: rule 'acme-ungreedy'" in result.text


def test_imported_rule_keeps_the_first_group_and_is_sensitive(imported):
    token = "acme_Q7vR2mX9kL4pZ8wT1nB6cY3hJ5dF0gSa"
    assert _secrets(imported[1], f'export ACME_TOKEN="{token}"') == [
        (token, True, "gitleaks/acme-api-token")]


def test_imported_entropy_keywords_and_global_allowlist(imported):
    extractor = imported[1]
    assert _secrets(extractor, "acme_" + "a" * 32) == []  # entropy 0: not above 3.0
    assert _secrets(extractor, "acme_placeholderQ7vR2mX9kL4pZ8wT1n") == []  # global stopword


def test_imported_secret_group_match_and_stopword_allowlists(imported):
    extractor = imported[1]
    assert _secrets(extractor, "ACME_DB_PASSWORD=Vx8#kq2Lm") == [
        ("Vx8#kq2Lm", True, "gitleaks/acme-db-password")]
    assert _secrets(extractor, "ACME_DB_PASSWORD=xxchangemexx") == []
    # regexTarget = "match": the allowlist regex is looked for in the whole match
    assert _secrets(extractor, "acme_db_password = example.conf") == []


def test_imported_posix_quote_end_of_text_and_line_allowlist(imported):
    extractor = imported[1]
    session = "sess:Ab3De6Gh9Jk2Mn5Pq8Rs"
    assert _secrets(extractor, f"cookie {session}") == [
        ("Ab3De6Gh9Jk2Mn5Pq8Rs", True, "gitleaks/acme-session")]
    assert _secrets(extractor, f"cookie {session}\nmore") == []  # \z: the end of the text only
    assert _secrets(extractor, f"ok  # test fixture {session}") == []  # regexTarget = "line"


def test_gitleaks_allow_marker_is_honoured_on_the_line_only_and_can_be_turned_off(tmp_path):
    key = "AIK-0123456789abcdef01234567"
    text = f"{key} # gitleaks:allow\nagain {key}x"
    pack = tmp_path / "p.yaml"
    pack.write_text(import_file(FIXTURE).text)
    assert [v for v, *_ in _secrets(Extractor([load_pack(pack)]), text)] == [key]
    pack.write_text(import_file(FIXTURE, inline_allow=False).text)
    assert [v for v, *_ in _secrets(Extractor([load_pack(pack)]), text)] == [key, key]


def test_cli_import_writes_the_pack_and_exits_1_on_a_refused_rule(tmp_path, capsys):
    out = tmp_path / "team.yaml"
    status = main(["rules", "import", "gitleaks", str(FIXTURE), "--out", str(out),
                   "--name", "acme"])
    err = capsys.readouterr().err
    assert status == 1
    assert "refused: rule 'acme-ungreedy'" in err and "4 rule(s) imported, 1 refused" in err
    assert load_pack(out).name == "acme"
    assert main(["rules", "test", str(out)]) == 0


def test_cli_import_of_a_clean_config_exits_0_and_prints_the_pack(tmp_path, capsys):
    config = tmp_path / "ok.toml"
    config.write_text("[[rules]]\nid = 'Tok One'\nregex = '''tok_[a-z]{8}'''\n")
    assert main(["rules", "import", "gitleaks", str(config)]) == 0
    spec = parse_pack(capsys.readouterr().out)
    assert [r.id for r in spec.rules] == ["tok-one"] and spec.rules[0].sensitive


def test_bad_toml_is_a_clear_error(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text("[[rules]\nid = 1\n")
    assert main(["rules", "import", "gitleaks", str(config)]) == 2
    assert "bad.toml" in capsys.readouterr().err
    with pytest.raises(PackError, match="invalid TOML"):
        import_file(config)


def test_and_allowlist_over_regexes_and_stopwords_is_left_out_not_half_applied():
    config = {"rules": [{"id": "r", "regex": "tok_[a-z0-9]{8}", "allowlists": [
        {"condition": "AND", "regexes": ["^tok_a"], "stopwords": ["zz"]}]}]}
    result = convert(config, inline_allow=False)
    assert parse_pack(result.text).rules[0].allowlist.regexes == []
    assert any("condition AND over regexes and stopwords" in n for n in result.notes)


def test_target_rules_of_a_global_allowlist_limit_it_to_those_rules():
    config = {"allowlists": [{"targetRules": ["a"], "stopwords": ["dummy"]}],
              "rules": [{"id": "a", "regex": "a_[a-z]{8}"}, {"id": "b", "regex": "b_[a-z]{8}"}]}
    rules = parse_pack(convert(config, inline_allow=False).text).rules
    assert rules[0].allowlist.stopwords == ["dummy"] and rules[1].allowlist.stopwords == []


# ── the pack-format features, for any pack ───────────────────────────────────────────────

PACK = """\
name: p
version: '1'
rules:
  - id: r
    kind: regex
    pattern: '(k)=(\\w+)'
{extra}
"""


def _pack(extra: str):
    return parse_pack(PACK.format(extra=extra), "p.yaml")


@pytest.mark.parametrize("extra, message", [
    ("    entropy: 0", "pack 'p', rule 'r', field 'entropy': Input should be greater than 0"),
    ("    entropy: high", "field 'entropy': Input should be a valid number"),
    ("    group: 3", "field 'group': group 3 does not exist: the pattern has 2 capture group"),
    ("    group: last", "field 'group': Value error, must be a capture group number"),
    ("    group: -1", "field 'group': Value error, must be a capture group number"),
    ("    allowlist:\n      regexes: ['(']", "field 'allowlist.regexes': invalid regex"),
    ("    allowlist:\n      line_regexes: ['[a']", "field 'allowlist.line_regexes': invalid"),
])
def test_bad_new_fields_name_pack_rule_and_field(extra, message):
    with pytest.raises(PackError, match=regex.escape(message)):
        _pack(extra)


def test_match_and_line_allowlists_need_a_regex_rule():
    text = ("name: p\nversion: '1'\nrules:\n  - id: t\n    kind: terms\n    terms: [abc]\n"
            "    allowlist:\n      line_regexes: ['x']\n")
    with pytest.raises(PackError, match="rule 't', field 'allowlist.line_regexes': "
                                        "allowlist.line_regexes needs a regex rule"):
        parse_pack(text)


def _found(extra: str, text: str) -> list[str]:
    spec = _pack(extra)
    from firewall.packs import Pack

    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    return [lit.value for lit in Extractor([pack]).scan_turn(Turn(role="user", text=text),
                                                             0).literals]


def test_group_number_and_entropy_filter():
    assert _found("    group: 1", "k=abc") == ["k"]
    assert _found("    group: 2\n    entropy: 2.0", "k=aaaaaa k=abcdefgh") == ["abcdefgh"]


def test_stopwords_and_value_regexes_apply_to_any_rule_kind():
    terms = ("name: p\nversion: '1'\nrules:\n  - id: t\n    kind: terms\n"
             "    terms: [DemoKey1, RealKey2]\n    allowlist:\n      stopwords: [demo]\n")
    from firewall.packs import Pack

    spec = parse_pack(terms)
    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    found = Extractor([pack]).scan_turn(Turn(role="user", text="DemoKey1 RealKey2"), 0).literals
    assert [lit.value for lit in found] == ["RealKey2"]
    assert _found("    group: 2\n    allowlist:\n      regexes: ['^sample']",
                  "k=sampleA1 k=realB2") == ["realB2"]


def test_a_hostile_line_allowlist_regex_times_out_and_fails_closed():
    spec = _pack("    allowlist:\n      line_regexes: ['(a|aa)+$']")
    from firewall.packs import Pack

    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    extractor = Extractor([pack], timeout=0.05, timeout_per_mb=0.0)
    scan = extractor.scan_turn(Turn(role="user", text="k=v " + "a" * 40 + "!"), 0)
    assert [t.rule for t in scan.timeouts] == ["p/r"]
