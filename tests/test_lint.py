"""`firewall rules lint` on what a rule would pin in ordinary shell output."""

from __future__ import annotations

from firewall.extraction.compiled import compile_pack
from firewall.authoring.lint import lint, shell_noise
from firewall.extraction.packs import Pack, load_packs, parse_pack


def _pack(rules: str) -> Pack:
    spec = parse_pack("name: probe\nversion: '1'\nrules:\n" + rules)
    return Pack(name=spec.name, version=spec.version, description="", rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))


# complete rules (description, examples): the only finding left to make is the shell one
PROBES = r"""
  - id: shell-flag
    kind: regex
    description: the shape `rules suggest` used to propose for coding conversations
    pattern: '\B-[a-z][a-z_]{0,16}\b'
    examples: {match: [{text: 'run -name x', literals: ['-name']}], no_match: ['a-b']}
  - id: key-value
    kind: regex
    description: any key=value
    pattern: '\w+=\w+'
    examples: {match: [{text: 'set a=b', literals: ['a=b']}], no_match: ['a = b']}
  - id: gated-flag
    kind: regex
    description: the same flag shape, behind a keyword shell output never holds
    keywords: [frobnicate]
    pattern: '\bfrobnicate (?P<literal>-[a-z][a-z_]{0,16})\b'
    examples: {match: [{text: 'frobnicate -deep', literals: ['-deep']}], no_match: ['-deep']}
"""


def test_lint_warns_on_rules_that_would_pin_shell_noise_and_not_on_invoices():
    findings = lint([_pack(PROBES)])
    by_rule = {f.rule: f for f in findings}
    assert set(by_rule) == {"probe/shell-flag", "probe/key-value"}
    assert all(f.severity == "warning" for f in findings)
    assert "matches in ordinary shell output" in by_rule["probe/shell-flag"].message
    assert "'-rw'" in by_rule["probe/shell-flag"].message  # an `ls -l` permission column
    assert "'size=4127'" in by_rule["probe/key-value"].message  # a pip log
    billing = [f for f in lint(load_packs("billing")) if "shell output" in f.message]
    assert billing == []


def test_shell_noise_runs_the_rule_as_the_engine_does():
    compiled = {r.qid: r for r in compile_pack(_pack(PROBES))}
    flags = shell_noise(compiled["probe/shell-flag"])
    assert flags.noisy and flags.noise == flags.matches
    # keywords gate it: the prefilter would never run it on that output
    assert shell_noise(compiled["probe/gated-flag"]).matches == 0
    invoice = next(r for r in compile_pack(load_packs("billing")[0])
                   if r.qid == "billing/invoice-number")
    assert not shell_noise(invoice).noisy
