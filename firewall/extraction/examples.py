"""Rule examples, run through the whole engine (prefilter included), as `firewall rules test` does.

A match example passes when the rule extracts exactly the listed literals, in order of first
appearance; a no_match example passes when the rule extracts nothing from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from .extract import Extractor
from .pack_format import JsonKeyRule, Pack
from ..turns import ToolCall, Turn


@dataclass(frozen=True, slots=True)
class ExampleFailure:
    rule: str  # qualified id
    text: str
    missed: tuple[str, ...]
    unexpected: tuple[str, ...]
    timed_out: bool = False
    got: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = []
        if self.missed:
            parts.append(f"missed {list(self.missed)}")
        if self.unexpected:
            parts.append(f"unexpected {list(self.unexpected)}")
        if self.timed_out:
            parts.append("timed out")
        if not parts:
            parts.append(f"got {list(self.got)}: order or duplicates differ")
        text = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"{self.rule}: {'; '.join(parts)} in {text!r}"


@dataclass(frozen=True, slots=True)
class RuleReport:
    rule: str
    examples: int
    failures: tuple[ExampleFailure, ...]


def _example_turn(rule, role: str, text: str) -> Turn:
    """A json_key rule that applies only to tool-call arguments gets its JSON example as the
    arguments of a call; every other example is a turn's text."""
    if isinstance(rule, JsonKeyRule) and role != "tool":
        try:
            arguments = json.loads(text)
        except ValueError:
            arguments = None
        if isinstance(arguments, dict):
            return Turn(role=role, tool_calls=(ToolCall("example", arguments),))
    return Turn(role=role, text=text)


def _found(extractor: Extractor, rule, rule_id: str, role: str, text: str
           ) -> tuple[list[str], bool]:
    scan = extractor.scan_turn(_example_turn(rule, role, text), 0)
    values = list(dict.fromkeys(l.value for l in scan.literals if l.rule == rule_id))
    return values, any(t.rule == rule_id for t in scan.timeouts)


def run_examples(packs: Iterable[Pack], extractor: Extractor | None = None) -> list[RuleReport]:
    packs = list(packs)
    extractor = extractor or Extractor(packs)
    compiled = {r.qid for r in extractor.rules}
    reports = []
    for pack in packs:
        for qid, rule in zip(pack.qualified_ids(), pack.rules):
            if qid not in compiled:  # an optional entity rule without spaCy
                continue
            role = "tool" if isinstance(rule, JsonKeyRule) and "tool" in rule.roles \
                else rule.roles[0]
            failures = []
            for example in rule.examples.match:
                got, timed_out = _found(extractor, rule, qid, role, example.text)
                if got != list(dict.fromkeys(example.literals)) or timed_out:
                    failures.append(ExampleFailure(
                        qid, example.text,
                        tuple(v for v in example.literals if v not in got),
                        tuple(v for v in got if v not in example.literals), timed_out,
                        tuple(got)))
            for text in rule.examples.no_match:
                got, timed_out = _found(extractor, rule, qid, role, text)
                if got or timed_out:
                    failures.append(ExampleFailure(qid, text, (), tuple(got), timed_out,
                                                   tuple(got)))
            count = len(rule.examples.match) + len(rule.examples.no_match)
            reports.append(RuleReport(qid, count, tuple(failures)))
    return reports


def noise_reports(packs: Iterable[Pack], extractor: Extractor | None = None
                  ) -> list[RuleReport]:
    """Each noise pattern's examples: it must cover exactly the listed stretches, in order."""
    packs = list(packs)
    extractor = extractor or Extractor(packs)
    compiled = {n.qid: n for n in extractor.noise}
    reports = []
    for pack in packs:
        for owner, noise in zip(pack.noise_owners, pack.noise):
            qid = f"{owner}/{noise.id}"
            failed = []
            for example in noise.examples:
                try:
                    got = [example.text[s:e] for s, e in compiled[qid].spans(
                        example.text, example.text.lower(), extractor.timeout)]
                except TimeoutError:
                    failed.append(ExampleFailure(f"noise {qid}", example.text, (), (), True))
                    continue
                if got != example.noise:
                    failed.append(ExampleFailure(
                        f"noise {qid}", example.text,
                        tuple(v for v in example.noise if v not in got),
                        tuple(v for v in got if v not in example.noise), False, tuple(got)))
            reports.append(RuleReport(f"noise {qid}", len(noise.examples), tuple(failed)))
    return reports


def failures(packs: Iterable[Pack]) -> list[ExampleFailure]:
    packs = list(packs)
    extractor = Extractor(packs)
    return [f for report in run_examples(packs, extractor) + noise_reports(packs, extractor)
            for f in report.failures]
