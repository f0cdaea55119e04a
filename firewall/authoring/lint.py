"""`firewall rules lint`: problems a pack can load with but should not ship with."""

from __future__ import annotations

import functools
import re._constants as C
import re._parser as sre_parse
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import regex

from ..extraction.compiled import CompiledNoise, CompiledRegex, compile_noise, compile_pack, covered
from ..extraction.packs import Pack, RegexRule

# Texts that make backtracking-prone patterns blow up: long runs, and the same runs ending in a
# character that makes the final match fail (where exponential patterns backtrack).
_RUNS = ("a" * 20_000, "1" * 20_000, "a1" * 10_000, "a-" * 10_000, "/" * 20_000,
         " " * 20_000, "a." * 10_000, "A_" * 10_000)
_STRESS = _RUNS + tuple(run + "!" for run in _RUNS)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)


@dataclass(frozen=True, slots=True)
class LintFinding:
    rule: str  # qualified id, or the pack name for pack-level findings
    severity: str  # "error" | "warning"
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.rule}: {self.message}"


def _unbounded(max_count: int) -> bool:
    return max_count == C.MAXREPEAT or max_count > 16


_CATEGORIES = {
    C.CATEGORY_DIGIT: str.isdigit, C.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    C.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    C.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
    C.CATEGORY_SPACE: str.isspace, C.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
}
_ASCII = [chr(i) for i in range(128)]


def _charset(op, av) -> frozenset[str] | None:
    """ASCII characters one single-character item can match; None if it is not one."""
    if op is C.LITERAL:
        return frozenset({chr(av)})
    if op is C.NOT_LITERAL:
        return frozenset(c for c in _ASCII if ord(c) != av)
    if op is C.ANY:
        return frozenset(c for c in _ASCII if c != "\n")
    if op is C.IN:
        members, negate = set(), False
        for item_op, item in av:
            if item_op is C.NEGATE:
                negate = True
            elif item_op is C.LITERAL:
                members.add(chr(item))
            elif item_op is C.RANGE:
                members.update(c for c in _ASCII if item[0] <= ord(c) <= item[1])
            elif item_op is C.CATEGORY and item in _CATEGORIES:
                members.update(c for c in _ASCII if _CATEGORIES[item](c))
            else:
                return None
        return frozenset(c for c in _ASCII if (c in members) != negate)
    return None


def _repeat_chars(av) -> frozenset[str] | None:
    body = av[2].data
    return _charset(*body[0]) if len(body) == 1 else None


def _walk(pattern: sre_parse.SubPattern, inside_repeat: bool, wrap: Any = None
          ) -> Iterable[str]:
    """``wrap``: the first item of the enclosing repeated group, which follows an item that
    ends the group (the next round starts with it)."""
    items = pattern.data
    for i, (op, av) in enumerate(items):
        if op in _REPEATS:
            _, max_count, body = av
            if inside_repeat and _unbounded(max_count) and not _fenced(av, items[i + 1:], wrap):
                yield ("nested quantifiers (a repeated group containing an unbounded repeat "
                       "that nothing separates from the next round) can backtrack "
                       "exponentially; make the inner part possessive (*+, ++) or atomic "
                       "((?>...)), or end it with a separator it cannot match")
            first = body.data[0] if _unbounded(max_count) and body.data else wrap
            yield from _walk(body, inside_repeat or _unbounded(max_count), first)
        elif op is C.SUBPATTERN:
            yield from _walk(av[3], inside_repeat, wrap if i == len(items) - 1 else None)
        elif op is C.BRANCH:
            branches = av[1]
            if inside_repeat and _overlapping(branches):
                yield ("alternatives that can match the same text under a quantifier, as in "
                       "(a|aa)+, backtrack exponentially; make the alternatives disjoint or "
                       "the group atomic ((?>...))")
            for branch in branches:
                yield from _walk(branch, inside_repeat, wrap if i == len(items) - 1 else None)
        # possessive repeats and atomic groups never backtrack into themselves: not walked


def _mandatory_chars(item) -> frozenset[str] | None:
    """Characters the next character must be one of, when ``item`` must match at least once."""
    op, av = item
    if op in _REPEATS and av[0] >= 1:
        return _repeat_chars(av)
    return _charset(op, av)


def _fenced(repeat_av, rest, wrap) -> bool:
    """An inner repeat is linear when a mandatory character it cannot match separates it from
    what could take over its text: the item right after it, or the character that starts
    every round of the enclosing repeat (``wrap``)."""
    chars = _repeat_chars(repeat_av)
    if chars is None:
        return False
    for item in ([rest[0]] if rest else []) + ([wrap] if wrap is not None else []):
        fence = _mandatory_chars(item)
        if fence is not None and not (chars & fence):
            return True
    return False


def _overlapping(branches: list[sre_parse.SubPattern]) -> bool:
    """Two alternatives that can start alike. The parser factors out common prefixes, so
    (a|aa) arrives as a(?:|a): an empty alternative counts as overlapping too."""
    firsts: set[int] = set()
    for branch in branches:
        if not branch.data:
            return True
        op, av = branch.data[0]
        if op is C.LITERAL:
            if av in firsts:
                return True
            firsts.add(av)
    return False


def shape_problems(pattern: str) -> list[str]:
    """Static backtracking risks, from the stdlib parser (regex-only syntax is approximated)."""
    approx = regex.sub(r"\\[pP]\{[^}]*\}", r"\\w", pattern)
    try:
        parsed = sre_parse.parse(approx)
    except Exception:
        return []
    return list(dict.fromkeys(_walk(parsed, False)))


def stress(pattern: regex.Pattern[str], limit: float = 0.2) -> float | None:
    """CPU seconds the slowest adversarial text took (the thread's: a loaded machine must not
    turn a linear rule into a warning), or None if one hit the limit (a wall-clock timeout)."""
    worst = 0.0
    for text in _STRESS:
        start = time.thread_time()
        try:
            for _ in pattern.finditer(text, timeout=limit):
                pass
        except TimeoutError:
            return None
        worst = max(worst, time.thread_time() - start)
    return worst


# ── ordinary shell output ───────────────────────────────────────────────────────────────
# A built-in sample of what a coding agent's shell shows (listings, git, pip, pytest, grep,
# tracebacks), with the strings in it an agent would type again (paths, names, test ids,
# versions, SHAs, error codes) listed beside it. A rule most of whose matches there are none
# of those pins flags, permissions, sizes and `key=value` settings wherever it runs. Counting
# the share of *all* the sample's tokens does not tell such a rule apart: shell flags touch 4 %
# of them, a relative-path rule 3 %; the share of a rule's own matches that are noise does
# (flags 100 %, `\w+=\w+` 85 %; when this was written no built-in rule with 5+ matches was
# above 32 %, core/semver on tool versions).
SHELL_NOISE_SHARE = 0.5  # warn above this share of noise among a rule's matches...
SHELL_NOISE_MIN_MATCHES = 5  # ...once it matches at least this many tokens of the sample


@dataclass(frozen=True, slots=True)
class ShellNoise:
    """A rule's matches in the built-in shell sample and how many of them are noise."""

    matches: int
    noise: int
    examples: tuple[str, ...]  # a few noise tokens, for the message

    @property
    def noisy(self) -> bool:
        return self.matches >= SHELL_NOISE_MIN_MATCHES and \
            self.noise > SHELL_NOISE_SHARE * self.matches


@functools.cache
def _shell_sample() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(one text per command with its output, the strings an agent reuses from them)."""
    folder = resources.files("firewall.authoring")
    text = (folder / "shell_output.txt").read_text(encoding="utf-8")
    reusable = (folder / "shell_output_reusable.txt").read_text(encoding="utf-8").split()
    documents = regex.split(r"\n(?=\$ )", text)
    return tuple(documents), tuple(reusable)


def shell_noise(rule: CompiledRegex, timeout: float = 1.0,
                declared_noise: Sequence[CompiledNoise] = ()) -> ShellNoise:
    """Run one compiled regex rule over the shell sample as the engine would (keywords,
    ``literal`` group, requires, checksum, allowlist, the packs' ``declared_noise``). A match
    is noise when no token it touches holds a reusable string (not glued to a letter or
    digit)."""
    from ..evaluation.gold import occurs

    documents, reusable = _shell_sample()
    matches, noise, examples = 0, 0, []
    for document in documents:
        lowered = document.lower()
        if rule.keywords and not any(k in lowered for k in rule.keywords):
            continue  # the prefilter would not run it here
        declared = covered([span for n in declared_noise
                            for span in n.spans(document, lowered, timeout)])
        for start, end in rule.find(document, timeout):
            if declared(start, end) and not rule.rule.sensitive:
                continue  # the packs say it is not a literal: the engine drops it
            # widen the match to the whitespace-delimited tokens it touches
            left = max(document.rfind(c, 0, start) for c in " \t\n") + 1
            right = min((i for i in (document.find(c, end) for c in " \t\n") if i >= 0),
                        default=len(document))
            tokens = document[left:right]
            matches += 1
            if not any(occurs(r, tokens) for r in reusable):
                noise += 1
                examples.append(document[start:end])
    return ShellNoise(matches, noise, tuple(dict.fromkeys(examples))[:4])


def lint(packs: Iterable[Pack]) -> list[LintFinding]:
    findings: list[LintFinding] = []
    owners: dict[str, str] = {}
    packs = list(packs)
    noise = [n for pack in packs for n in compile_noise(pack)]
    for pack in packs:
        compiled = {r.qid: r for r in compile_pack(pack) if isinstance(r, CompiledRegex)}
        for qid, rule in zip(pack.qualified_ids(), pack.rules):
            if qid in owners and owners[qid] != pack.name:
                continue  # inherited through `extends`: linted with its own pack
            owners[qid] = pack.name
            findings.extend(_lint_rule(qid, rule))
            if qid in compiled:
                findings.extend(_lint_shell_noise(qid, compiled[qid], noise))
    return findings


def _lint_shell_noise(qid: str, rule: CompiledRegex,
                      noise: Sequence[CompiledNoise]) -> list[LintFinding]:
    try:
        found = shell_noise(rule, declared_noise=noise)
    except TimeoutError:
        return []  # catastrophic backtracking: the stress test reports it as an error
    if not found.noisy:
        return []
    return [LintFinding(qid, "warning",
                        f"{found.noise} of its {found.matches} matches in ordinary shell output "
                        f"(the built-in sample) are not strings an agent reuses, e.g. "
                        f"{', '.join(repr(e) for e in found.examples)}: it would fill the ledger "
                        f"with shell noise")]


def _lint_rule(qid: str, rule) -> list[LintFinding]:
    out = []
    if not rule.examples.match:
        out.append(LintFinding(qid, "warning", "no positive example (examples.match)"))
    if not rule.examples.no_match:
        out.append(LintFinding(qid, "warning", "no negative example (examples.no_match)"))
    if not rule.description:
        out.append(LintFinding(qid, "warning", "no description"))
    if isinstance(rule, RegexRule):
        keywords = [k.lower() for k in rule.keywords]
        for example in rule.examples.match:
            if keywords and not any(k in example.text.lower() for k in keywords):
                out.append(LintFinding(qid, "error",
                                       f"no keyword {rule.keywords} occurs in the positive "
                                       f"example {example.text[:60]!r}: the prefilter skips it"))
        for problem in shape_problems(rule.pattern):
            out.append(LintFinding(qid, "error", problem))
        compiled = regex.compile(rule.pattern)
        worst = stress(compiled)
        if worst is None:
            out.append(LintFinding(qid, "error", "timed out on a 20 kB adversarial text: "
                                                 "catastrophic backtracking"))
        elif worst > 0.05:
            out.append(LintFinding(qid, "warning", f"slow on a 20 kB adversarial text "
                                                   f"({worst * 1000:.0f} ms): check for "
                                                   f"superlinear backtracking"))
    return out
