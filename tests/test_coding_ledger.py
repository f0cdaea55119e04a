"""What a coding agent's ledger holds: declared noise, whole commands never pinned, a budget
that follows the span, and salience as value per token."""

from __future__ import annotations

import pytest

from firewall.compaction.budget import Budget, budget_tokens, parse_budget
from firewall.errors import PackError
from firewall.extraction.extract import Extractor
from firewall.formats import parse_messages
from firewall.compaction.guard import Firewall
from firewall.compaction.ledger import Ledger, LedgerEntry
from firewall.compaction.salience import default_salience
from firewall.extraction.packs import Pack, load_packs, parse_pack
from firewall.turns import ToolCall, Turn

PACK = """
name: t
version: "1"
noise:
  - id: gutter
    pattern: '^\\d+\\t'
    flags: [multiline]
    examples:
      - text: "1234\\tx"
        noise: ["1234\\t"]
rules:
  - id: num
    kind: regex
    pattern: '\\d{4,}'
  - id: secret
    kind: regex
    sensitive: true
    pattern: 'sk-\\d{4,}'
"""


def pack(text: str = PACK) -> Pack:
    spec = parse_pack(text)
    return Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                owners=tuple(spec.name for _ in spec.rules), noise=tuple(spec.noise),
                noise_owners=tuple(spec.name for _ in spec.noise))


def values(extractor: Extractor, text: str, role: str = "tool") -> list[str]:
    return [lit.value for lit in extractor.scan_text(text, role).literals]


def test_a_literal_inside_declared_noise_is_dropped_and_one_outside_stays():
    extractor = Extractor([pack()])
    assert values(extractor, "1234\tcall 5678\n99999\tx") == ["5678"]


def test_noise_never_hides_a_secret():
    shaped = PACK.replace("'^\\d+\\t'", "'key sk-\\d+'").replace(
        'noise: ["1234\\t"]', 'noise: ["key sk-1234"]').replace('"1234\\tx"', '"key sk-1234"')
    extractor = Extractor([pack(shaped)])
    found = extractor.scan_text("key sk-1234", "tool").literals
    assert [(l.value, l.sensitive) for l in found] == [("sk-1234", True)]  # not the 1234 in it


def test_noise_that_times_out_drops_nothing():
    extractor = Extractor([pack()])

    def slow(*_):
        raise TimeoutError
    extractor.noise[0].spans = slow
    assert values(extractor, "1234\tx") == ["1234"]


@pytest.mark.parametrize("noise, message", [
    ('  - id: a\n    pattern: "\\\\d+"\n', "single-quoted"),
    ("  - id: a\n    pattern: '(['\n", "invalid regex"),
    ("  - id: a\n    pattern: 'x'\n    colour: red\n", "Extra inputs"),
    ("  - id: a\n    pattern: 'x'\n  - id: a\n    pattern: 'y'\n", "duplicate noise id"),
])
def test_bad_noise_names_pack_entry_and_field(noise, message):
    with pytest.raises(PackError) as info:
        parse_pack(f'name: p\nversion: "1"\nnoise:\n{noise}rules: []\n', "p.yaml")
    assert message in str(info.value) and "noise/a" in str(info.value)
    assert "p.yaml" in str(info.value)


def test_noise_examples_run_with_the_pack():
    from firewall.extraction.examples import noise_reports

    bad = PACK.replace('noise: ["1234\\t"]', 'noise: ["1234"]')
    (report,) = noise_reports([pack(bad)])
    assert report.failures and report.failures[0].unexpected == ("1234\t",)
    assert not noise_reports([pack()])[0].failures


def test_builtin_noise_drops_listing_columns_and_harness_placeholders():
    extractor = Extractor(load_packs())
    listing = "-rw-r--r-- 1 root root 21094 Oct 10 12:00 card_v2.py\n  1234\tdef f(x=3600):"
    found = values(extractor, listing)
    assert "21094" not in found and "1234" not in found
    assert "card_v2.py" in found and "3600" in found
    task = "MY_ENV_VAR=MY_VALUE cd /path/to/working/dir && git diff -- path/to/file1"
    assert values(extractor, task, "user") == []


def test_a_free_text_argument_is_never_pinned_whole_its_names_are():
    command = "sed -n '1200,1300p' /testbed/astropy/io/fits/fitsrec.py && grep -n FITS_rec x.py"
    turn = Turn("assistant", tool_calls=(ToolCall("bash", {"command": command}),))
    found = [lit.value for lit in Extractor(load_packs()).scan_turn(turn, 1).literals]
    assert command not in found
    assert {"/testbed/astropy/io/fits/fitsrec.py", "FITS_rec", "x.py"} <= set(found)


def test_a_short_command_is_pinned_whole_as_agents_re_run_it():
    turn = Turn("assistant", tool_calls=(ToolCall("bash", {"command": "cat src/core/helpers.py"}),
                                         ToolCall("bash", {"cmd": "python3 repro.py 2>&1"})))
    found = [lit.value for lit in Extractor(load_packs()).scan_turn(turn, 1).literals]
    assert {"cat src/core/helpers.py", "src/core/helpers.py", "python3 repro.py 2>&1"} <= set(found)


def test_the_budget_follows_the_span_within_floor_and_cap():
    budget = Budget(share=0.05, floor=600, cap=8000)
    assert [budget.tokens(n) for n in (1_000, 40_000, 1_000_000, None)] == [600, 2000, 8000, 8000]
    assert budget_tokens(budget, 40_000) == 2000 and budget_tokens(300, 10) == 300
    assert budget_tokens("5%", 40_000) == 2000
    assert parse_budget("auto") == Budget() and parse_budget("250") == 250
    with pytest.raises(ValueError):
        Budget(floor=10, cap=5)


def test_the_budget_rounds_down_and_clamps_at_its_exact_floor_and_cap():
    budget = Budget(share=0.05, floor=600, cap=8000)
    # 5 % of 12,019 is 600.95: a token the span did not pay for is not given
    assert [budget.tokens(n) for n in (11_999, 12_000, 12_019, 12_020, 12_039)] == \
        [600, 600, 600, 601, 601]
    assert [budget.tokens(n) for n in (159_999, 160_000, 160_020, 0)] == [7999, 8000, 8000, 600]
    assert budget_tokens("2.5%", 1_039) == 25 and budget_tokens("5%", None) == 0
    assert budget_tokens("100%", 777) == 777


@pytest.mark.parametrize("fields", [{"share": 0}, {"share": 1}, {"floor": 0},
                                    {"floor": 4_500, "cap": 4_500}, {"floor": 0, "cap": 0}])
def test_a_budget_at_the_edge_of_its_ranges_is_accepted(fields):
    budget = Budget(**fields)
    assert budget.floor <= budget.tokens(10_000) <= budget.cap


@pytest.mark.parametrize("fields", [{"share": -0.01}, {"share": 1.01}, {"floor": -1},
                                    {"floor": 4_501, "cap": 4_500}])
def test_a_budget_out_of_its_ranges_is_refused(fields):
    with pytest.raises(ValueError, match="budget: need 0 <= share <= 1"):
        Budget(**fields)


def test_the_command_line_budget_takes_zero_and_refuses_below():
    from argparse import ArgumentTypeError

    assert parse_budget("0") == 0 and parse_budget("0%") == "0%"
    assert parse_budget("12.5%") == "12.5%"
    for text in ("-1", "-0.5%", "lots", "5%%"):
        with pytest.raises(ArgumentTypeError):
            parse_budget(text)


def test_the_default_budget_gives_a_16k_span_its_share_and_a_shorter_span_the_same_block():
    budget = Budget()
    at_16k = budget.tokens(16_000)
    assert at_16k == int(budget.share * 16_000)
    assert budget.tokens(4_000) == budget.tokens(12_000) == at_16k < budget.tokens(24_000)


def test_the_default_block_of_a_claude_code_compaction_is_at_most_3_percent_of_its_span():
    # Claude Code compacts automatically at 150k-190k tokens: the cap holds the block there
    budget = Budget()
    assert all(budget.tokens(span) <= 0.03 * span for span in (150_000, 155_000, 188_000))


def test_a_compaction_budgets_a_share_of_its_span():
    fw = Firewall(load_packs(), budget_tokens=Budget(share=0.01, floor=0, cap=10**6))
    turns = parse_messages([{"role": "user", "content": "word " * 4000}]).turns
    assert fw.budget_for(turns) == pytest.approx(40, abs=2)
    assert Firewall(load_packs(), budget_tokens=300).budget_for(turns) == 300


def test_salience_keeps_cheap_used_values_before_long_listing_entries():
    ledger = Ledger.new("c")
    listing = [LedgerEntry(value=f"/srv/app/module_{i}/very/long/path/file_{i}.py", rule="p/path",
                           kind="path", role="tool", first_seen=2, last_seen=2) for i in range(8)]
    used = LedgerEntry(value="rho23_s", rule="p/name", kind="name", role="tool", first_seen=2,
                       last_seen=2)
    ledger.entries = [*listing, used]
    turns = parse_messages([{"role": "user", "content": "go"},
                            {"role": "assistant", "content": "",
                             "tool_calls": [{"name": "bash", "id": "1",
                                             "arguments": {"command": "grep rho23_s ."}}]}]).turns
    key = default_salience().key(ledger.entries, turns)
    ranked = sorted(ledger.entries, key=key, reverse=True)
    assert ranked[0].value == "rho23_s"


def test_salience_ranks_a_value_the_span_kept_showing_above_one_it_showed_once():
    def entry(value: str, count: int) -> LedgerEntry:
        return LedgerEntry(value=value, rule="p/name", kind="name", role="tool", first_seen=2,
                           last_seen=2, count=count)

    once, often = entry("parse_v1", 1), entry("parse_v2", 9)
    turns = parse_messages([{"role": "user", "content": "go"}]).turns
    key = default_salience().key([once, often], turns)
    assert key(often) > key(once)


TEMPLATE = ("<instructions>Run `git diff -- path/to/file1 > patch.txt`, then echo "
            "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.</instructions>")
TASK = [{"role": "system", "content": "You fix bugs in /testbed."},
        {"role": "user", "content": "<pr>parse_date_v2 fails on /testbed/src/dates.py</pr>\n"
                                    + TEMPLATE},
        {"role": "assistant", "content": "Looking.",
         "tool_calls": [{"name": "bash", "id": "1", "arguments": {"command": "cat src/dates.py"}}]},
        {"role": "tool", "tool_call_id": "1", "name": "bash", "content": "def parse_date_v2(x):"}]


def test_template_and_system_prompt_literals_are_not_required_of_the_summary():
    summary = "The user reports parse_date_v2 failing in /testbed/src/dates.py; read it."
    assert not Firewall(load_packs()).check(TASK, summary).ok  # the template's strings missing
    verdict = Firewall(load_packs(), template=TEMPLATE).check(TASK, summary)
    assert verdict.ok, verdict
    # the user's own literal stays required
    assert not Firewall(load_packs(), template=TEMPLATE).check(TASK, "Read the file.").ok


def test_cli_check_takes_a_template(tmp_path, capsys):
    import json

    from firewall.cli import main

    (tmp_path / "c.json").write_text(json.dumps(TASK), encoding="utf-8")
    (tmp_path / "s.txt").write_text("parse_date_v2 fails in /testbed/src/dates.py.",
                                    encoding="utf-8")
    (tmp_path / "t.txt").write_text(TEMPLATE, encoding="utf-8")
    args = ["check", str(tmp_path / "c.json"), "--summary", str(tmp_path / "s.txt")]
    assert main(args) == 1
    assert main(args + ["--template", str(tmp_path / "t.txt")]) == 0


def test_encoding_names_are_literals_code_passes():
    extractor = Extractor(load_packs())
    assert {"utf-8", "cp1252"} <= set(values(extractor, "open(p, encoding='utf-8') or 'cp1252'",
                                             "assistant"))


def test_json_timestamps_navigation_links_and_constants_are_noise():
    extractor = Extractor(load_packs())
    result = ('{"id": "ch_3PqR7sLkdIwHu7ix", "created": 1743671662, "paid": null, '
              '"links": {"self": "/v1/charges/ch_3PqR7sLkdIwHu7ix"}, "amount": 124900}')
    found = values(extractor, result)
    assert "ch_3PqR7sLkdIwHu7ix" in found and "124900" in found
    assert not {"1743671662", "null", "/v1/charges/ch_3PqR7sLkdIwHu7ix"} & set(found)


def test_a_listing_entry_in_the_folder_the_agent_works_in_ranks_above_its_far_siblings():
    """A Glob of 12 files in two folders: the agent opened one file of src/billing/, so the
    other files there (what it opens next) rank above the docs/ siblings, though one listing
    showed them all."""
    billing = [f"src/billing/mod_{i}.py" for i in range(6)]
    docs = [f"docs/guides/page_{i}.md" for i in range(6)]
    listing = "\n".join(docs[:3] + billing + docs[3:])
    turns = parse_messages([
        {"role": "user", "content": "fix the invoice rounding"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "Glob", "id": "1", "arguments": {"pattern": "**/*"}}]},
        {"role": "tool", "tool_call_id": "1", "name": "Glob", "content": listing},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "Read", "id": "2", "arguments": {"file_path": billing[0]}}]},
    ]).turns
    ledger = Ledger.new("c")
    ledger.update(lit for lit in Extractor(load_packs()).scan(turns).literals
                  if lit.role == "tool")
    key = default_salience().key(ledger.entries, turns)
    by_value = {e.value: e for e in ledger.entries}
    assert set(billing + docs) <= set(by_value)
    # same shape and cost: the folder decides
    assert key(by_value[billing[3]]) > key(by_value[docs[3]])
    assert min(key(by_value[v]) for v in billing[1:]) > max(key(by_value[v]) for v in docs)


def test_a_listing_of_the_folder_the_agent_named_ranks_its_entries_with_the_few():
    """The agent named a folder (ls src/billing/); what a later listing shows inside it ranks
    above the entries of another folder of the same listing."""
    billing = [f"src/billing/mod_{i}.py" for i in range(5)]
    docs = [f"docs/guides/page_{i}.md" for i in range(5)]
    turns = parse_messages([
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "Bash", "id": "1", "arguments": {"command": "ls src/billing/"}}]},
        {"role": "tool", "tool_call_id": "1", "name": "Bash",
         "content": "\n".join(billing + docs)},
    ]).turns
    ledger = Ledger.new("c")
    ledger.update(Extractor(load_packs()).scan(turns).literals)  # src/billing/ among them
    key = default_salience().key(ledger.entries, turns)
    by_value = {e.value: e for e in ledger.entries}
    assert min(key(by_value[v]) for v in billing) > max(key(by_value[v]) for v in docs)
