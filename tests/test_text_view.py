"""The engine's view of a text: terminal escapes and CJK punctuation read as spaces, so that a
literal glued to them is extracted whole, with the source's bytes and offsets (issue 26)."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from firewall.compaction.guard import Firewall
from firewall.extraction.extract import Extractor, Scanner
from firewall.extraction.packs import load_packs
from firewall.extraction.plain_view import plain
from firewall.turns import ToolCall, Turn

GITHUB_TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"

# (tool output or message, the literal it holds), each glued to an escape or CJK punctuation
GLUED = [
    ("\x1b[0m/etc/nginx/nginx.conf\n", "/etc/nginx/nginx.conf"),  # after a colour reset
    ("total 8\n\x1b[01;34m/srv/app/static\x1b[0m\n", "/srv/app/static"),  # ls --color
    ("\x1b[01;34msrc/app/routes\x1b[0m  \x1b[01;32mbuild.sh\x1b[0m", "src/app/routes"),
    ("\x1b[1m\x1b[31mE   \x1b[0mFileNotFoundError: /var/log/app.log", "FileNotFoundError"),
    ("\x1b]8;;file:///home/u/a.py\x1b\\a.py\x1b]8;;\x1b\\", "file:///home/u/a.py"),  # OSC 8
    ("开发服务器运行在 http://localhost:5173/。", "http://localhost:5173/"),
    ("见（http://localhost:3000）", "http://localhost:3000"),
    ("地址：http://127.0.0.1:8000/api，然后重启", "http://127.0.0.1:8000/api"),
    ("“http://example.com/a”和 src/x.py", "http://example.com/a"),
    ("port：5173", "5173"),
    ("端口：5173", "5173"),
    ("（见 src/app.ts）", "src/app.ts"),
    ("「config.yaml」", "config.yaml"),
    ("修改了 config/settings.yaml；还有 docs/a.md、docs/b.md", "docs/a.md"),
]


EXTRACTOR = Extractor(load_packs())  # shared with the property test (no fixture there)


@pytest.fixture(scope="module")
def extractor():
    return EXTRACTOR


def at_source(text, literals):
    """Every literal's value is its source's bytes at its offsets, and holds no replaced
    character (an escape, a CJK punctuation mark)."""
    for lit in literals:
        assert text[lit.start:lit.end] == lit.value, lit
        assert plain(lit.value) == lit.value, lit


def test_the_view_replaces_escapes_and_cjk_punctuation_one_space_each():
    text = "\x1b[01;34msrc\x1b[0m：\x1b]8;;http://e.com/x\x1b\\link\x1b]8;;\x1b\\。a\x1b(Bb"
    view = plain(text)
    assert len(view) == len(text) and view.isascii()
    assert view == " " * 8 + "src" + " " * (4 + 1 + 5) + "http://e.com/x" + " " * 2 + "link" \
        + " " * (5 + 2 + 1) + "a" + " " * 3 + "b"
    # letters next to the punctuation are no punctuation: 々, 〇 and full-width letters stay
    assert plain("佐々木〇ＡＢ：1") == "佐々木〇ＡＢ 1"
    ascii_text = "no escape, no CJK: /etc/x"
    assert plain(ascii_text) is ascii_text


@pytest.mark.parametrize("text,value", GLUED)
def test_a_literal_glued_to_an_escape_or_cjk_punctuation_is_extracted_whole(extractor, text,
                                                                            value):
    literals = extractor.scan([Turn("tool", text, tool_name="Bash")]).literals
    assert value in [lit.value for lit in literals]
    at_source(text, literals)


def test_each_shape_through_the_firewall_and_the_incremental_scanner(extractor):
    messages = [{"role": "user", "content": "list the project"}]
    for i, (text, _) in enumerate(GLUED):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "Bash", "arguments": json.dumps({"command": "ls"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    literals = Firewall().scan(messages)
    assert {value for _, value in GLUED} <= {lit.value for lit in literals}
    for lit in literals:
        if lit.field == "text" and lit.role == "tool":
            at_source(messages[lit.turn]["content"], [lit])

    scanner = Scanner(extractor)
    for i, (text, value) in enumerate(GLUED):
        scanner.add(Turn("user", f"step {i}"))
        new = scanner.add(Turn("tool", text, tool_name="Bash"))
        assert all(lit.turn == 2 * i + 1 for lit in new)
        at_source(text, new)
    assert {value for _, value in GLUED} <= {lit.value for lit in scanner.result().literals}


def test_a_port_after_a_full_width_colon_is_the_port_rules(extractor):
    literals = extractor.scan_text("dev server port：5173", "user").literals
    assert ("5173", "core/port") in [(lit.value, lit.rule) for lit in literals]


def test_a_json_argument_with_cjk_punctuation_is_read_through_the_view(extractor):
    call = ToolCall("Bash", {"command": "curl http://localhost:8080/health；echo 完成"})
    literals = extractor.scan([Turn("assistant", "", tool_calls=(call,))]).literals
    assert "http://localhost:8080/health" in [lit.value for lit in literals]
    assert not any("；" in lit.value for lit in literals)


def test_nothing_is_extracted_from_escape_sequences_alone(extractor):
    text = "\x1b[0m\x1b[01;34m\x1b[0m\x1b[1;3;m\x1b[38;5;208m\x1b[2K\x1b]0;title\x07\x1b(B\x1b[m"
    assert extractor.scan([Turn("tool", text)]).literals == []
    # before the view, the escape's letters glued to the word after it: 32mINF, 0mdocs
    coloured = "\x1b[32mINF\x1b[0m scanned \x1b[0mdocs/*.md"
    values = [lit.value for lit in extractor.scan([Turn("tool", coloured)]).literals]
    assert "docs/*.md" in values and not any(v.startswith(("32m", "0m")) for v in values)


def test_a_secret_after_a_colour_code_is_still_sensitive_and_never_sent(extractor):
    text = f"export GITHUB_TOKEN=\x1b[1m{GITHUB_TOKEN}\x1b[0m"
    literals = extractor.scan([Turn("tool", text)]).literals
    assert [lit for lit in literals if lit.value == GITHUB_TOKEN and lit.sensitive]
    at_source(text, literals)
    messages = [{"role": "user", "content": "show the env"},
                {"role": "tool", "tool_call_id": "c1", "content": text},
                {"role": "user", "content": "thanks"}]
    sent = " ".join(turn.text for turn in Firewall().masked_turns(messages))
    assert GITHUB_TOKEN not in sent


def test_a_secret_the_source_holds_is_flagged_even_where_the_view_splits_it():
    # a rule that takes any run of non-spaces after "token=": the view cuts it at the 」
    pack = ("name: t\nversion: '1'\nrules:\n  - id: tok\n    kind: regex\n    sensitive: true\n"
            "    pattern: '(?<=token=)\\S+'\n")
    from firewall.extraction.packs import parse_pack, Pack
    spec = parse_pack(pack)
    extractor = Extractor([Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                                owners=(spec.name,) * len(spec.rules))])
    text = "token=abc」def"
    literals = extractor.scan([Turn("user", text)]).literals
    assert {lit.value for lit in literals} >= {"abc", "abc」def"}
    assert all(lit.sensitive for lit in literals)


def test_a_rule_allowing_spaces_never_spans_a_replaced_character(extractor):
    # the view reads "12、10115" as "12 10115", which the address rule would join: its match on
    # the source is kept instead
    text = "Neue Adresse: Hauptstraße 12、10115 Berlin"
    literals = extractor.scan([Turn("user", text)]).literals
    assert "Hauptstraße 12" in [lit.value for lit in literals]
    at_source(text, literals)
    assert extractor.scan([Turn("user", "Neue Adresse: Hauptstraße 12, 10115 Berlin")]).literals


def test_offsets_stay_those_of_the_source_where_a_span_is_skipped(extractor):
    text = "（见 src/app.ts）\x1b[0m\n/etc/hosts。"
    skip = lambda t: [(0, 3)]  # a blanked span keeps the offsets too
    scanner = Scanner(extractor, skip=skip)
    new = scanner.add(Turn("tool", text))
    assert {lit.value for lit in new} >= {"src/app.ts", "/etc/hosts"}
    at_source(text, new)


PIECES = ["\x1b[0m", "\x1b[01;34m", "\x1b]8;;", "\x1b\\", "\x07", "。", "，", "：", "（", "）",
          "「", "」", "“", "/etc/x.conf", "src/app.ts", "http://h:80/p", "port", " ", "\n",
          "12", "a", "端口", "Hauptstraße", "token="]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14))
def test_every_value_is_the_source_at_its_offsets_and_holds_no_replaced_character(pieces):
    text = "".join(pieces)
    for lit in EXTRACTOR.scan_text(text, "tool").literals:
        assert text[lit.start:lit.end] == lit.value
        assert plain(lit.value) == lit.value or lit.sensitive


def test_texts_without_escapes_or_cjk_punctuation_scan_as_before(extractor):
    text = "see /etc/x.conf and http://h:80/p, 端口 5173 → src/app.ts"
    assert plain(text) is text  # the engine's old path: the same object, nothing replaced
    literals = extractor.scan_text(text, "tool").literals
    assert {"/etc/x.conf", "http://h:80/p", "src/app.ts"} <= {lit.value for lit in literals}
