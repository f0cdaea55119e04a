"""ReDoS: every built-in rule runs in linear time on hostile input; catastrophic user rules are
flagged by ``firewall rules lint`` and bounded by the engine's timeout, failing closed.

The time limits here are hang guards, not speed targets: a linear rule scans 1 MB in tens of
milliseconds, a backtracking one does not finish in minutes. A limit is enforced through the
engine's own timeout (``CompiledRule.find(text, timeout)``), so a failure is a ``TimeoutError``
naming the rule and the input shape, never a stuck test run. Where a test measures time itself,
it measures its own thread's CPU time, which other jobs on a loaded machine do not inflate.

Inputs: 1 MB made of 48 kB runs of generic shapes, one of them YAML-like indented lines (a
quadratic rule needs ~10^9 steps on one such run, far beyond the limit), plus a 1 MB text per
rule built from its own examples and keywords (truncated literals, repeated with and without
separators: the near misses that make a pattern start, run long and fail).
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from firewall.extraction.compiled import CompiledJsonKey, CompiledRegex, compile_pack
from firewall.extraction.extract import Extractor
from firewall.compaction.ledger import Ledger, find_blocks
from firewall.authoring.lint import lint, shape_problems
from firewall.extraction.packs import load_pack, load_packs
from firewall.compaction.placeholders import Placeholders
from firewall.turns import Turn

MB = 1 << 20
RUN = 48 << 10  # every unit gets a run of its own in the megabyte
LIMIT = 2.0  # seconds per rule and input: a hang guard, 20-100x what a linear rule needs

UNITS = ("a", "A", "1", "0123456789abcdef", "-", "_", "/", ".", ":", "@", "a-", "ab1_",
         " \t\n", "aA1-_./:@ ", "a=", "\\", "'\"", "#", "  key: value\n")


def fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def composite(units: list[str]) -> str:
    """1 MB of 48 kB runs of each unit, cycling through the units."""
    runs = [fill(unit, RUN) for unit in units]
    return "".join(runs[i % len(runs)] for i in range(-(-MB // RUN)))[:MB]


GENERIC = composite(list(UNITS))
PACKS = load_packs(strict=False)
RULES = [rule for pack in PACKS for rule in compile_pack(pack)]
REGEX_RULES = [r for r in RULES if isinstance(r, CompiledRegex)]
VALUE_RULES = [r for r in RULES if isinstance(r, CompiledJsonKey) and r.value_pattern is not None]


def near_misses(rule: CompiledRegex) -> str:
    """1 MB of this rule's own near misses: halves and truncations of its example literals,
    glued and separated, and runs of its keywords."""
    units: list[str] = []
    literals = [v for example in rule.rule.examples.match for v in example.literals][:4]
    for value in literals:
        cut = value[:-1] or value
        units += [cut, cut + " ", value[: max(1, len(value) // 2)], value + value[-1]]
    for keyword in rule.rule.keywords[:4]:
        units += [keyword, keyword + "a1"]
    return composite(units or ["a"])


def test_the_inputs_are_a_megabyte_of_long_runs() -> None:
    assert len(GENERIC) == MB
    assert GENERIC[:RUN] == "a" * RUN and GENERIC[RUN:2 * RUN] == "A" * RUN
    rule = next(r for r in REGEX_RULES if r.qid == "secrets/private-key")
    assert len(near_misses(rule)) == MB and "-----BEGIN RSA PRIVATE KEY-----" in near_misses(rule)


def test_every_builtin_pack_is_covered() -> None:
    assert {p.name for p in PACKS} >= {"core", "billing", "cloud", "coding", "commerce", "secrets"}
    assert len(REGEX_RULES) >= 70


@pytest.mark.parametrize("rule", REGEX_RULES, ids=lambda r: r.qid)
def test_builtin_rule_is_linear_on_adversarial_megabyte(rule: CompiledRegex) -> None:
    for name, text in (("generic shapes", GENERIC), ("own near misses", near_misses(rule))):
        try:
            rule.find(text, LIMIT)  # the engine's call: regex timeout, checksum, allowlist
        except TimeoutError:  # pragma: no cover - the failure being guarded against
            pytest.fail(f"{rule.qid} did not finish on 1 MB of {name} within {LIMIT}s: "
                        f"superlinear backtracking")


@pytest.mark.parametrize("rule", VALUE_RULES, ids=lambda r: r.qid)
def test_builtin_value_pattern_is_linear_on_megabyte_values(rule: CompiledJsonKey) -> None:
    for unit in UNITS:
        try:
            rule.accept(fill(unit, MB), LIMIT)
        except TimeoutError:  # pragma: no cover
            pytest.fail(f"{rule.qid}: value_pattern timed out on a 1 MB value of {unit!r}")


def test_secrets_pack_lints_clean() -> None:
    secrets = next(p for p in PACKS if p.name == "secrets")
    assert lint([secrets]) == []
    assert all(rule.sensitive for rule in secrets.rules)


def test_lint_accepts_a_repeat_fenced_by_the_next_rounds_first_character() -> None:
    assert shape_problems(r"(?:/[\w.@+-]{1,255}){2,64}") == []
    assert shape_problems(r"(?:\\{1,2}[^\\/:]{0,254}[^\\/:.]){1,64}") == []


# -- the firewall's own parsers on hostile text ----------------------------------------------

def test_find_blocks_is_linear_on_a_megabyte_of_forged_headers() -> None:
    ledger = Ledger.new("c")
    header = f"<<<ledger {ledger.nonce}>>>\n"
    closer = f"\n<<<end 000000000000000000>>>"
    hostile = fill(header + "- x  (k; tool, turn 1)" + closer, MB) + fill(header, MB)
    started = time.thread_time()
    assert find_blocks(hostile, ledger.nonce, ledger.key) == []
    assert time.thread_time() - started < LIMIT  # hang guard


def test_placeholder_restore_is_linear_on_a_megabyte_of_near_placeholders() -> None:
    table = Placeholders()
    table.add(["hunter2-password"])
    hostile = fill("[[SECRET_1] [ secret_ [[SECRET_x]] [[[[", MB)
    started = time.thread_time()
    restored, problems = table.restore(hostile)
    assert time.thread_time() - started < LIMIT  # hang guard
    assert problems  # damaged placeholders are reported, not silently accepted


# -- user packs with catastrophic patterns -----------------------------------------------------

CATASTROPHIC_PACK = textwrap.dedent("""\
    name: hostile
    version: "1"
    rules:
      - id: alternation
        kind: regex
        description: overlapping alternatives under a quantifier
        pattern: '(a|aa)+$'
        examples:
          match: [{text: 'aaaa', literals: ['aaaa']}]
          no_match: ['b']
      - id: nested
        kind: regex
        description: nested quantifiers
        pattern: '(\\w+\\s?)*$'
        examples:
          match: [{text: 'ab cd', literals: ['ab cd']}]
          no_match: ['!']
      - id: ticket
        kind: regex
        description: a well-behaved rule
        pattern: '\\bTCK-\\d{4}\\b'
        examples:
          match: [{text: 'see TCK-1234', literals: ['TCK-1234']}]
          no_match: ['TCK-12']
    """)

# A run of word characters ending in one neither \w nor \s matches: (a|aa)+$ tries ~fib(n) splits
# of the run, (\w+\s?)*$ ~2^n; `regex` gives up on both within its timeout.
EXPLOSIVE = "TCK-1234 " + "a" * 1000 + "!"


@pytest.fixture
def hostile_pack(tmp_path: Path):
    path = tmp_path / "hostile.yaml"
    path.write_text(CATASTROPHIC_PACK, encoding="utf-8")
    return load_pack(path)


def test_lint_flags_catastrophic_user_patterns(hostile_pack) -> None:
    findings = [f for f in lint([hostile_pack]) if f.severity == "error"]
    flagged = {f.rule for f in findings}
    assert flagged == {"hostile/alternation", "hostile/nested"}
    by_rule = {rule: [f.message for f in findings if f.rule == rule] for rule in flagged}
    assert any("alternatives" in m for m in by_rule["hostile/alternation"])
    assert any("nested quantifiers" in m for m in by_rule["hostile/nested"])


def test_catastrophic_rule_times_out_and_fails_closed(hostile_pack) -> None:
    # the ticket rule must beat the timeout on the same text: 0.25 s leaves it a wide margin
    # on a loaded machine; the backtracking rules never finish anyway
    extractor = Extractor([hostile_pack], timeout=0.25, timeout_per_mb=0.0)
    turns = [Turn("user", "hello, nothing here."), Turn("tool", EXPLOSIVE, tool_name="grep")]
    started = time.thread_time()
    result = extractor.scan(turns)
    assert time.thread_time() - started < LIMIT  # bounded by the engine's timeout

    timed_out = {(t.rule, t.turn) for t in result.timeouts}
    assert ("hostile/alternation", 1) in timed_out
    assert ("hostile/nested", 1) in timed_out
    assert result.verbatim_turns == {1}  # that turn is kept verbatim: fail closed
    # the other rule still produced its literal from the very same turn
    assert [(l.value, l.rule, l.turn) for l in result.literals] == \
        [("TCK-1234", "hostile/ticket", 1)]


def test_compaction_keeps_the_timed_out_turn_verbatim(hostile_pack) -> None:
    from firewall import Firewall

    fw = Firewall([hostile_pack], keep_last=1)
    fw.extractor = Extractor([hostile_pack], timeout=0.25, timeout_per_mb=0.0)
    messages = [{"role": "user", "content": "please check the logs"},
                {"role": "assistant", "content": EXPLOSIVE},
                {"role": "user", "content": "summarize and continue"},
                {"role": "assistant", "content": "ok"}]
    result = fw.compact(messages, summarizer=lambda msgs: "Checked the logs.")
    assert result.compacted
    assert messages[1] in result.messages  # the turn the rule could not scan survives whole
    assert "TCK-1234" in result.ledger
