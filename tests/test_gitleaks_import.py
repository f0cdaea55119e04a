"""`firewall rules import gitleaks`: Go regexes translated, every rule field and allowlist
converted, and the pack-format features it needs (entropy, group, stopwords, regexes on the
value, the match and the line) usable by any pack."""

from pathlib import Path

import pytest
import regex

from firewall.cli import main
from firewall.errors import PackError
from firewall.extraction.extract import Extractor
from firewall.authoring.gitleaks import Untranslatable, convert, import_file, translate_regex
from firewall.extraction.packs import load_pack, parse_pack
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
    from firewall.extraction.packs import Pack

    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    return [lit.value for lit in Extractor([pack]).scan_turn(Turn(role="user", text=text),
                                                             0).literals]


def test_group_number_and_entropy_filter():
    assert _found("    group: 1", "k=abc") == ["k"]
    assert _found("    group: 2\n    entropy: 2.0", "k=aaaaaa k=abcdefgh") == ["abcdefgh"]


def test_stopwords_and_value_regexes_apply_to_any_rule_kind():
    terms = ("name: p\nversion: '1'\nrules:\n  - id: t\n    kind: terms\n"
             "    terms: [DemoKey1, RealKey2]\n    allowlist:\n      stopwords: [demo]\n")
    from firewall.extraction.packs import Pack

    spec = parse_pack(terms)
    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    found = Extractor([pack]).scan_turn(Turn(role="user", text="DemoKey1 RealKey2"), 0).literals
    assert [lit.value for lit in found] == ["RealKey2"]
    assert _found("    group: 2\n    allowlist:\n      regexes: ['^sample']",
                  "k=sampleA1 k=realB2") == ["realB2"]


def test_a_hostile_line_allowlist_regex_times_out_and_fails_closed():
    spec = _pack("    allowlist:\n      line_regexes: ['(a|aa)+$']")
    from firewall.extraction.packs import Pack

    pack = Pack(name="p", version="1", rules=tuple(spec.rules), owners=("p",))
    extractor = Extractor([pack], timeout=0.05, timeout_per_mb=0.0)
    scan = extractor.scan_turn(Turn(role="user", text="k=v " + "a" * 40 + "!"), 0)
    assert [t.rule for t in scan.timeouts] == ["p/r"]


# ── hostile and malformed configurations ─────────────────────────────────────────────────

TOKENS = "deploy with tok_qwertyui, then tok_asdfghjk and tok_zxcvbnma"


def _import_text(tmp_path, toml: str):
    config = tmp_path / "crafted.toml"
    config.write_text(toml, encoding="utf-8")
    return import_file(config, inline_allow=False)


@pytest.mark.parametrize("brk", ["\\n", "\\r\\n", "\\u0085", "\\u2028"],
                         ids=["LF", "CRLF", "NEL", "LS"])
def test_a_crafted_config_cannot_add_yaml_to_the_pack(tmp_path, brk):
    # each string that reaches the pack carries a line break and a top-level `noise:` that
    # would match everything (and so hide every literal) if it started a line
    evil = f"{brk}noise:{brk}  - id: all{brk}    pattern: '(?s).+'{brk}#"
    toml = (f'[[rules]]\nid = "evil"\nregex = "[[:x{evil}:]]"\n'  # refused: its reason quotes it
            f'[[rules]]\nid = "tok"\nregex = "tok_[a-z]{{8}}"\ndescription = "d{evil}"\n'
            f'keywords = ["tok_", "k{evil}"]\n[rules.allowlist]\nstopwords = ["s{evil}"]\n')
    result = _import_text(tmp_path, toml)
    spec = parse_pack(result.text)
    assert spec.noise == [] and [r.id for r in spec.rules] == ["tok"]
    assert len(result.refused) == 1 and result.refused[0].startswith("rule 'evil': ")
    decoded = evil.encode().decode("unicode_escape")  # the TOML escapes, as TOML reads them
    [rule] = spec.rules
    assert rule.description == f"d{decoded}"  # every string kept exactly, nothing added
    assert rule.keywords == ["tok_", f"k{decoded}".lower()]
    assert rule.allowlist.stopwords == [f"s{decoded}"]
    pack = tmp_path / "crafted.yaml"
    pack.write_text(result.text, encoding="utf-8")
    found = Extractor([load_pack(pack)]).scan_turn(Turn(role="user", text=TOKENS), 0).literals
    assert [lit.value for lit in found] == ["tok_qwertyui", "tok_asdfghjk", "tok_zxcvbnma"]


def test_a_regex_holding_line_breaks_and_controls_keeps_them(tmp_path):
    # gitleaks (Go) reads a raw newline in a regex as a newline to match: so does the import
    toml = ('[[rules]]\nid = "two-lines"\n'
            'regex = "tok_[a-z]{4}\\nkey\\u2028[\\t\\u0085]=\\\\Q\\r\\\\E"\n')
    result = _import_text(tmp_path, toml)
    assert result.refused == [] and result.rules == 1
    [rule] = parse_pack(result.text).rules
    assert rule.pattern == r"tok_[a-z]{4}\x0akey\u2028[\x09\x85]=\x0d"
    assert regex.fullmatch(rule.pattern, "tok_abcd\nkey\u2028\x85=\r")
    assert all(line.isprintable() for line in result.text.splitlines())


def test_go_regex_characters_yaml_cannot_quote_are_escaped_and_x_is_refused():
    assert translate_regex("a\u2028b[\n]") == r"a\u2028b[\x0a]"
    assert translate_regex("\\\n") == r"\x0a"  # Go: an escaped non-word character is itself
    with pytest.raises(Untranslatable, match="unknown flag"):
        translate_regex("(?x) a")  # Go has no verbose flag


def test_a_string_where_gitleaks_takes_a_list_is_a_one_item_list(tmp_path):
    toml = ('[[allowlists]]\ntargetRules = "acme"\nstopwords = "sample"\n'
            '[[rules]]\nid = "acme"\nregex = "acme_[a-z0-9]{12}"\nkeywords = "ACME_"\n'
            '[rules.allowlist]\nstopwords = "example"\nregexes = "^acme_xyz"\n'
            '[[rules]]\nid = "other"\nregex = "other_[a-z0-9]{12}"\n')
    acme, other = parse_pack(_import_text(tmp_path, toml).text).rules
    assert acme.keywords == ["acme_"]
    assert acme.allowlist.stopwords == ["example", "sample"]
    assert acme.allowlist.regexes == ["^acme_xyz"]
    assert other.allowlist.stopwords == []  # targetRules = "acme": that rule only
    pack = tmp_path / "p.yaml"
    pack.write_text(_import_text(tmp_path, toml).text)
    extractor = Extractor([load_pack(pack)])
    # a secret with an `e`, `x`, `a`, `m`, `p` or `l` in it is still a secret
    assert _secrets(extractor, "acme_q7vr2mx9kl4p") == [
        ("acme_q7vr2mx9kl4p", True, "gitleaks/acme")]
    assert _secrets(extractor, "acme_example1234 acme_xyz123456789") == []


MALFORMED = [
    ("rules = [1, 2]", "field 'rules[0]': expected a [[rules]] table, got an integer"),
    ("rules = 'x'", "field 'rules': expected [[rules]] tables, got a string"),
    ('[[rules]]\nid = "a"\nregex = "a_[a-z]{8}"\n[[rules.allowlists]]\nregexes = ["ok", 5]',
     "rule 'a', field 'allowlists[0].regexes[1]': expected a string, got an integer"),
    ('[[allowlists]]\ntargetRules = 5\nstopwords = ["x"]',
     "field 'allowlists[0].targetRules': expected a string or an array of strings, got an "
     "integer"),
    ('[[rules]]\nid = "a"\nregex = "a_[a-z]{8}"\nallowlists = 5',
     "rule 'a', field 'allowlists': expected [[allowlists]] tables, got an integer"),
    ('[[rules]]\nid = "a"\nregex = "a_[a-z]{8}"\n[rules.allowlist]\ncondition = "XOR"',
     "rule 'a', field 'allowlist.condition': unknown condition 'XOR' (AND or OR)"),
    ('[[rules]]\nid = "a"\nregex = "a_[a-z]{8}"\nentropy = "high"',
     "rule 'a', field 'entropy': expected a number, got a string"),
    ('[[rules]]\nid = "a"\nregex = "a_[a-z]{8}"\nentropy = inf',
     "rule 'a', field 'entropy': expected a finite number, got inf"),
    ('[[rules]]\nid = "a"\nregex = "(a)"\nsecretGroup = true',
     "rule 'a', field 'secretGroup': expected an integer, got a boolean"),
    ('[[rules]]\nid = 7\nregex = "a"', "field 'rules[0].id': expected a string, got an integer"),
    ('[[rules]]\nregex = 7', "field 'rules[0].regex': expected a string, got an integer"),
    ('[[rules]]\nid = "a"\nregex = "a"\nkeywords = [["a"]]',
     "rule 'a', field 'keywords[0]': expected a string, got an array"),
]


@pytest.mark.parametrize("toml, message", MALFORMED, ids=[
    "rules-of-integers", "rules-a-string", "allowlist-regex-an-integer", "targetRules-an-integer",
    "allowlists-an-integer", "unknown-condition", "entropy-a-string", "entropy-infinite",
    "secretGroup-a-boolean", "id-an-integer", "regex-an-integer", "keyword-an-array"])
def test_a_malformed_config_is_named_by_file_rule_and_field(tmp_path, capsys, toml, message):
    config = tmp_path / "team.toml"
    config.write_text(toml + "\n")
    assert main(["rules", "import", "gitleaks", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: {message}" in err and "Traceback" not in err


def test_groups_nested_deeper_than_go_allows_are_refused_not_a_crash(tmp_path, capsys):
    config = tmp_path / "deep.toml"
    config.write_text('[[rules]]\nid = "deep"\nregex = """' + "(" * 5000 + "a" + ")" * 5000 +
                      '"""\n[[rules]]\nid = "tok"\nregex = "tok_[a-z]{8}"\n')
    assert main(["rules", "import", "gitleaks", str(config)]) == 1
    err = capsys.readouterr().err
    assert "refused: rule 'deep': groups nested more than 1000 deep" in err
    assert "1 rule(s) imported, 1 refused" in err


@pytest.mark.parametrize("go, reason", [
    # 40 bytes that the `regex` module would expand to 10^8 copies when it compiles them
    ("(?:(?:a{1000}){1000}){100}", "RE2 refuses it: invalid repetition size: {1000} (nested "
                                   "repeats multiply: RE2 and Go's regexp allow at most 1000 "
                                   "copies)"),
    ("(?:a{100}){20}", "RE2 refuses it: invalid repetition size: {20} (nested repeats "
                       "multiply: RE2 and Go's regexp allow at most 1000 copies)"),
    (r"\pL{1000}", "RE2 refuses it: pattern too large - compile failed (its program is over "
                   "RE2's memory budget (max_mem, 8 MiB))"),
])
def test_a_regex_program_re2_refuses_is_refused_with_the_reason(go, reason):
    config = {"rules": [{"id": "big", "regex": go}, {"id": "ok", "regex": "ok_[a-z]{8}"},
                        {"id": "allow", "regex": "al_[a-z]{8}", "allowlists": [{"regexes": [go]}]}]}
    result = convert(config)
    assert result.refused == [f"rule 'big': {reason}", f"rule 'allow': allowlist #1: {reason}"]
    assert [r.id for r in parse_pack(result.text).rules] == ["ok"]
