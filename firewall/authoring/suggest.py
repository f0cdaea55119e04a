"""`firewall rules suggest`: mine recorded conversations for literals no current rule caught.

A *use* is a load-bearing literal by the gold definition of DESIGN.md: a tool-call argument
value (or a 4+ character token of a free-text argument) that appeared verbatim, not glued to a
letter or digit, in an earlier non-system message. A use is *missed* when the current packs'
extraction over the turns up to its first appearance finds neither it nor a value containing it.

Misses are grouped by the argument that consumed them and by shape (a character-class
skeleton: ``#W2378156`` → ``#W\\d{7}``, ``credit_card_8897086`` → a word chain, ``_``, seven
digits); each group becomes a ``regex`` rule (boundary anchors without lookaround, keywords
from a stable prefix, a ``literal`` group behind a context word when the shape alone is too
generic) or a ``json_key`` rule (when every miss first sat under the same JSON key), with
positive examples cut from the real texts and near-miss negatives. The pack is validated as
``firewall rules test`` would run it; rules whose examples fail are dropped and reported.

A rule that passes its examples can still cost more than it brings: a shell-flag shape mined
from ``find -name`` pins every flag of every command. So each candidate must *pay* on the
conversations it was mined from: compacted where ``firewall eval`` compacts them, more than
half (``MIN_PRECISION``) of the distinct strings it pins must be gold there (used by a later
tool call, ``gold.gold_set``), in as many conversations as a group of misses needs; and it
must not be a rule that ``rules lint`` finds pinning mostly noise in ordinary shell output.
Each proposed rule says its precision.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import regex

from ..extraction.compiled import CompiledRegex, compile_pack
from ..evaluation.gold import FRACTIONS
from ..extraction.extract import Extractor, Scanner
from ..json_values import parse_json, scalar_leaves
from .lint import shell_noise
from ..extraction.packs import Pack
from .toolschema import is_identifier_name, validated_pack
from ..turns import Conversation, Turn
from .payoff import MIN_PRECISION, Payoff, PayoffTask, add_payoffs, payoffs

MIN_LENGTH = 4
_FREE_TEXT_SPLIT = regex.compile(r"""[\s"'`()\[\]{}<>]+""")
_TRAILING = ".,;:!?"
_TOKEN = regex.compile(r"(?P<d>\d+)|(?P<w>[A-Za-z]+(?:_[A-Za-z]+)*)|(?P<o>.)", regex.DOTALL)
_PLAIN_WORDS = regex.compile(r"[^\W\d]+(?:[ '’./-][^\W\d]+)*")  # no digit, no symbol
_CONTEXT_WORD = regex.compile(r"([A-Za-z]{3,20})[^\w\n]{1,4}$")
_STOP = frozenset("the and are was were is for with your you our has have had its this that "
                  "from into onto not but any all can will".split())
_SPECIAL = frozenset("\\.^$*+?{}[]|()")
_WINDOWS = (48, 24, 10)


@dataclass(frozen=True, slots=True)
class Use:
    """One load-bearing literal: consumed by ``arg`` of ``tool`` at ``used_turn``."""

    literal: str
    arg: str
    tool: str
    conversation: str
    used_turn: int
    first_turn: int
    first_role: str
    source_key: str | None  # the JSON key it sat under where first seen; None: in plain text
    text: str  # the haystack it was first seen in (a turn's text or an argument value)
    start: int  # its offset in ``text``


@dataclass(slots=True)
class Group:
    """Misses of one shape consumed by one argument."""

    arg: str
    shape: tuple[tuple[str, str], ...]  # coarse skeleton: (kind, char for punctuation)
    uses: list[Use] = field(default_factory=list)

    @property
    def literals(self) -> list[str]:
        """Distinct literals, most used first, then alphabetically."""
        counts = Counter(u.literal for u in self.uses)
        return sorted(counts, key=lambda v: (-counts[v], v))

    @property
    def conversations(self) -> int:
        return len({u.conversation for u in self.uses})

    @property
    def skeleton(self) -> str:
        return _body(self, generalise_all=True)


@dataclass(slots=True)
class Suggestion:
    uses: int  # load-bearing uses seen
    misses: list[Use]
    groups: list[Group]
    rules: list[dict[str, Any]]  # raw rules of the pack, as written
    skipped: list[tuple[str, str]]  # (group skeleton @ arg, reason) with no rule
    dropped: list[str]  # rule ids whose examples failed
    yaml: str
    pack: Pack
    payoffs: dict[str, Payoff] = field(default_factory=dict)  # of each rule proposed


# ── mining ──────────────────────────────────────────────────────────────────────────────

def _candidates(value: str) -> list[tuple[str, bool]]:
    """(candidate, is a token of free text) for one argument value."""
    if "\n" in value or (len(value) > 32 and any(c.isspace() for c in value)):
        tokens = (t.rstrip(_TRAILING) for t in _FREE_TEXT_SPLIT.split(value))
        return [(t, True) for t in dict.fromkeys(tokens) if len(t) >= MIN_LENGTH]
    return [(value, False)] if len(value) >= 3 else []


def _find_unglued(literal: str, text: str) -> int:
    start = text.find(literal)
    while start >= 0:
        end = start + len(literal)
        if not (start and text[start - 1].isalnum()) and \
                not (end < len(text) and text[end].isalnum()):
            return start
        start = text.find(literal, start + 1)
    return -1


def _haystacks(turn: Turn) -> list[tuple[str, str | None, str]]:
    """(text, JSON key it is the value of or None, field) for everything a turn shows."""
    out: list[tuple[str, str | None, str]] = [(turn.text, None, "text")] if turn.text else []
    parsed = parse_json(turn.text) if turn.role == "tool" else None
    if parsed is not None:
        out += [(s, k, "json") for k, s in scalar_leaves(parsed)]
    for call in turn.tool_calls:
        out += [(s, k, "arguments") for k, s in scalar_leaves(call.arguments)]
    return out


def _keep(literal: str, arg: str) -> bool:
    if len(literal) < MIN_LENGTH:
        return False
    return is_identifier_name(arg) or _PLAIN_WORDS.fullmatch(literal) is None


def _covered(literal: str, values: Iterable[str]) -> bool:
    return any(literal == v or _find_unglued(literal, v) >= 0 for v in values)


def load_bearing(conversation: Conversation, extractor: Extractor
                 ) -> tuple[list[Use], list[Use]]:
    """(every load-bearing use, the uses the extractor missed) of one conversation."""
    turns = conversation.turns
    scanner = Scanner(extractor)
    found_by: list[list[str]] = []  # values first extracted at each turn
    for turn in turns:
        found_by.append([lit.value for lit in scanner.add(turn)])
    hay = [[] if t.role == "system" else _haystacks(t) for t in turns]
    uses: list[Use] = []
    misses: list[Use] = []
    seen: set[tuple[str, str]] = set()
    for j, turn in enumerate(turns):
        for call in turn.tool_calls:
            for arg, value in scalar_leaves(call.arguments):
                if arg is None:
                    continue
                for literal, _token in _candidates(value):
                    if (literal, arg) in seen or not _keep(literal, arg):
                        continue
                    use = _first_seen(literal, arg, call.name, conversation.id, j, turns, hay)
                    if use is None:
                        continue
                    seen.add((literal, arg))
                    uses.append(use)
                    known = (v for i in range(use.first_turn + 1) for v in found_by[i])
                    if not _covered(literal, known):
                        misses.append(use)
    return uses, misses


def _first_seen(literal: str, arg: str, tool: str, conversation: str, used: int,
                turns: list[Turn], hay: list[list[tuple[str, str | None, str]]]) -> Use | None:
    for i in range(used):
        texts = hay[i]
        keys = sorted({k for s, k, _ in texts if k is not None and s == literal})
        for text, _key, _kind in texts:
            start = _find_unglued(literal, text)
            if start < 0:
                continue
            # the JSON key it sat under (prefer the consuming argument's own name)
            source = (arg if arg in keys else keys[0]) if keys else None
            return Use(literal, arg, tool, conversation, used, i, turns[i].role, source,
                       text, start)
    return None


# ── shapes ──────────────────────────────────────────────────────────────────────────────

def _tokens(literal: str) -> list[tuple[str, str]]:
    """(kind, text): d digits, l/u/a lower/upper/mixed word chain (``_``-joined), o other."""
    out = []
    for m in _TOKEN.finditer(literal):
        text = m.group(0)
        if m.lastgroup == "w":
            letters = text.replace("_", "")
            kind = "l" if letters.islower() else "u" if letters.isupper() else "a"
        else:
            kind = m.lastgroup
        out.append((kind, text))
    return out


def _escape(text: str) -> str:
    """Escape regex metacharacters only (spaces, '#' and '-' stay readable)."""
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def shape_of(literal: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, t if k == "o" else "") for k, t in _tokens(literal))


_CLASS = {"l": ("[a-z]", "[a-z_]"), "u": ("[A-Z]", "[A-Z_]"), "a": ("[A-Za-z]", "[A-Za-z_]")}


def _body(group: Group, *, generalise_all: bool = False) -> str:
    """The group's regex without anchors: digits as bounded classes, stable words literal."""
    parts = []
    for column in zip(*(_tokens(v) for v in group.literals)):
        kind = column[0][0]
        texts = sorted({t for _, t in column})
        lengths = [len(t) for t in texts]
        if kind == "o":
            parts.append(_escape(texts[0]))
        elif kind == "d":
            lo, hi = min(lengths), max(lengths)
            parts.append(rf"\d{{{lo}}}" if lo == hi else rf"\d{{{lo},{hi}}}")
        elif not generalise_all and _shared(column):
            parts.append(_escape(texts[0]) if len(texts) == 1
                         else "(?:" + "|".join(_escape(t) for t in texts) + ")")
        else:
            first, rest = _CLASS[kind]
            parts.append(f"{first}{rest}{{0,{min(63, 2 * max(lengths))}}}")
    return "".join(parts)


def _shared(column: tuple[tuple[str, str], ...]) -> bool:
    """A word column kept literal: at most 4 spellings, each shared by 2+ distinct literals
    (a prefix like ``#W`` or ``credit_card``, not one customer's name)."""
    counts = Counter(t for _, t in column)
    return len(counts) <= 4 and min(counts.values()) >= 2 and \
        (len(counts) == 1 or min(len(t) for t in counts) >= 3)


def _stable_words(group: Group) -> list[str]:
    """Literal letter runs of the body (candidates for keywords)."""
    words: list[str] = []
    for column in zip(*(_tokens(v) for v in group.literals)):
        if column[0][0] in _CLASS and _shared(column):
            words += sorted({t for _, t in column})
    return words


def _distinctive(group: Group) -> bool:
    """Can the shape alone stand as a text regex (not a bare number or a bare word)?"""
    kinds = [k for k, _ in group.shape]
    if _stable_words(group):
        return True
    return len(kinds) >= 3 or ("o" in kinds and len(kinds) >= 2)


def group_misses(misses: Iterable[Use]) -> list[Group]:
    """Misses grouped by (consuming argument, coarse shape); biggest groups first."""
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], Group] = {}
    for use in misses:
        shape = shape_of(use.literal)
        groups.setdefault((use.arg, shape), Group(use.arg, shape)).uses.append(use)
    return sorted(groups.values(), key=lambda g: (-g.conversations, -len(g.uses), g.arg,
                                                  g.skeleton))


# ── rules ───────────────────────────────────────────────────────────────────────────────

def _anchor(body: str, literal: str) -> str:
    """Boundary assertions that RE2 understands too: \\b next to a word char, else \\B."""
    start = r"\b" if regex.match(r"\w", literal) else r"\B"
    end = r"\b" if regex.match(r"\w", literal[-1]) else r"\B"
    return f"{start}{body}{end}"


def _window(use: Use, width: int) -> str:
    """The text around the literal, cut at whitespace, on one line."""
    text, start, end = use.text, use.start, use.start + len(use.literal)
    left = max(0, start - width)
    right = min(len(text), end + width)
    if left > 0:
        space = text.find(" ", left, start)
        left = space + 1 if space >= 0 else start
    if right < len(text):
        space = text.rfind(" ", end, right)
        right = space if space >= 0 else end
    return " ".join(text[left:right].split())


def _found(pattern: regex.Pattern[str], text: str) -> list[str]:
    group = "literal" if "literal" in pattern.groupindex else 0
    return list(dict.fromkeys(m.group(group) for m in pattern.finditer(text)
                              if m.group(group)))


def _match_examples(pattern: regex.Pattern[str], group: Group, limit: int = 2
                    ) -> list[dict[str, Any]]:
    examples: list[dict[str, Any]] = []
    seen_literals: set[str] = set()
    by_literal = {u.literal: u for u in reversed(group.uses)}  # earliest use of each
    for literal in group.literals:
        if len(examples) >= limit:
            break
        if literal in seen_literals:
            continue
        use = by_literal[literal]
        for width in _WINDOWS:
            text = _window(use, width)
            if _found(pattern, text) == [literal]:
                examples.append({"text": text, "literals": [literal]})
                seen_literals.add(literal)
                break
    return examples


def _mutations(literal: str, group: Group) -> list[str]:
    """Near misses of the literal: a digit run one too long / short, a bare word part."""
    tokens = _tokens(literal)
    out: list[str] = []
    digit_columns = [i for i, (k, _) in enumerate(tokens) if k == "d"]
    if digit_columns:
        i = digit_columns[-1]
        lengths = [len(_tokens(v)[i][1]) for v in group.literals]
        longer = tokens[i][1] + "7" * (max(lengths) + 1 - len(tokens[i][1]))
        out.append("".join(longer if n == i else t for n, (_, t) in enumerate(tokens)))
        if min(lengths) > 1:
            shorter = tokens[i][1][: min(lengths) - 1]
            out.append("".join(shorter if n == i else t for n, (_, t) in enumerate(tokens)))
    words = [t for k, t in tokens if k in _CLASS and len(t) >= 3]
    if words:
        out.append(words[0])
    elif not digit_columns:
        out.append(literal + "9")
    return list(dict.fromkeys(m for m in out if m != literal))


def _no_match_examples(pattern: regex.Pattern[str], examples: list[dict[str, Any]],
                       group: Group) -> list[str]:
    out: list[str] = []
    for example in examples[:1]:
        literal = example["literals"][0]
        for near in _mutations(literal, group):
            text = example["text"].replace(literal, near)
            if not _found(pattern, text) and text not in out:
                out.append(text)
    return out[:3]


def _context_word(group: Group) -> str | None:
    """A word that precedes most of the group's literals in text (``ID``, ``zip``...)."""
    words = Counter()
    for use in group.uses:
        m = _CONTEXT_WORD.search(use.text[max(0, use.start - 24):use.start])
        if m and m.group(1).lower() not in _STOP:
            words[m.group(1).lower()] += 1
    if not words:
        return None
    word, count = min(words.items(), key=lambda kv: (-kv[1], kv[0]))
    return word if count >= max(2, len(group.uses) // 3) else None


def _slug(text: str) -> str:
    return regex.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "literal"


def propose(group: Group, rule_id: str) -> tuple[dict[str, Any] | None, str]:
    """A raw rule for one group, or None and the reason there is none."""
    keys = {u.source_key for u in group.uses}
    body = _body(group)
    example = group.literals[0]
    tools = sorted({u.tool for u in group.uses})
    about = (f"Suggested from {len(group.uses)} missed literal(s) in {group.conversations} "
             f"conversation(s), consumed by {group.arg} ({', '.join(tools[:3])}"
             f"{', ...' if len(tools) > 3 else ''}); e.g. {example}.")
    if _distinctive(group):
        pattern = _anchor(body, example)
        keywords = [w for w in _stable_words(group) if len(w) >= 3]
        prefix = regex.match(r"[^\w\s]{0,3}[A-Za-z]{1,20}", regex.sub(r"\\(.)", r"\1", body))
        if not keywords and prefix and _escape(prefix.group(0)) == body[:len(
                _escape(prefix.group(0)))] and len(prefix.group(0)) >= 2:
            keywords = [prefix.group(0)]
        rule = {"id": rule_id, "kind": "regex", "description": about, "pattern": pattern}
        if keywords:
            rule["keywords"] = keywords
    elif None not in keys and len(keys) <= 3:
        names = sorted(keys, key=lambda k: (k != group.arg, k))  # type: ignore[arg-type]
        key = names[0]
        rule = {"id": rule_id, "kind": "json_key", "description": about,
                "keys": [regex.sub(r"([*?\[])", r"[\1]", k) for k in names],
                "value_pattern": body}
        value_re = regex.compile(body)
        near = [m for m in _mutations(example, group) if not value_re.fullmatch(m)]
        rule["examples"] = {
            "match": [{"text": json.dumps({key: v}), "literals": [v]}
                      for v in group.literals[:2]],
            "no_match": [json.dumps({key: m}) for m in near[:2]]
            + [json.dumps({"x_" + key: example})]}
        return rule, ""
    else:
        word = _context_word(group)
        if word is None:
            return None, "a generic shape with no common JSON key or context word"
        pattern = rf"\b(?i:{_escape(word)})[^\w\n]{{1,4}}(?P<literal>{body})" + (
            r"\b" if regex.match(r"\w", example[-1]) else r"\B")
        rule = {"id": rule_id, "kind": "regex", "description": about, "pattern": pattern,
                "keywords": [word]}
    compiled = regex.compile(rule["pattern"])
    matches = _match_examples(compiled, group)
    if not matches:
        return None, "no real text where the rule finds exactly the literal"
    negatives = _no_match_examples(compiled, matches, group)
    if not negatives:
        return None, "no near-miss text to use as a negative example"
    rule["examples"] = {"match": matches, "no_match": negatives}
    return rule, ""


@dataclass(frozen=True)
class MineTask:
    """One conversation's (load-bearing uses, the misses of ``packs``): the first map of
    ``suggest``."""

    packs: tuple[Pack, ...]

    def setup(self) -> Extractor:
        return Extractor(list(self.packs))

    def __call__(self, extractor: Extractor, source: str, conversation: Conversation
                 ) -> tuple[int, list[Use]]:
        uses, misses = load_bearing(conversation, extractor)
        return len(uses), misses


def suggest(conversations: Iterable[Conversation], packs: Iterable[Pack], *,
            name: str = "suggested", min_conversations: int = 2,
            min_precision: float = MIN_PRECISION,
            again: Callable[[], Iterable[Conversation]] | None = None,
            mapped: Callable[[Any, bool], Iterable[Any]] | None = None) -> Suggestion:
    """Mine ``conversations`` for misses of ``packs`` and propose a validated pack.

    A group needs misses in ``min_conversations`` conversations. A rule is proposed only if it
    pays on the mined conversations: its precision (``Payoff``) is above ``min_precision``, with
    gold in ``min_conversations`` conversations; and it is not one that matches mostly noise in
    ordinary shell output (``lint.shell_noise``: flags, ``key=value`` settings, sizes),
    whatever the mined data says. ``again``: reads the conversations a second time for the
    precision, so that they are never all held in memory (large logs). ``mapped(task,
    again)``: maps the two passes' tasks (``MineTask``, then ``PayoffTask``) over the
    conversations elsewhere (``distributed``), yielding results in input order; given,
    ``conversations`` and ``again`` are not used.
    """
    mine = MineTask(tuple(packs))
    mined: list[Conversation] = []  # held only when they cannot be read again
    if mapped is None:
        extractor = mine.setup()

        def read() -> Iterator[tuple[int, list[Use]]]:
            for conversation in conversations:
                if again is None:
                    mined.append(conversation)
                yield mine(extractor, "", conversation)

        results: Iterable[tuple[int, list[Use]]] = read()
    else:
        results = mapped(mine, False)
    uses = 0
    misses: list[Use] = []
    for found, missed in results:
        uses += found
        misses += missed
    signatures: dict[str, str] = {}
    groups = group_misses(misses)
    rules: list[dict[str, Any]] = []
    labels: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    taken: Counter[str] = Counter()
    for group in groups:
        label = f"{group.skeleton} @ {group.arg}"
        if group.conversations < min_conversations:
            skipped.append((label, f"seen in {group.conversations} conversation(s), fewer "
                                   f"than {min_conversations}"))
            continue
        base = _slug(group.arg)
        taken[base] += 1
        rule_id = base if taken[base] == 1 else f"{base}-{taken[base]}"
        rule, reason = propose(group, rule_id)
        if rule is None:
            skipped.append((label, reason))
            continue
        signature = json.dumps([rule.get("pattern"), rule.get("keys"), rule.get("value_pattern")])
        if signature in signatures:
            skipped.append((label, f"the same rule as {signatures[signature]}"))
            continue
        signatures[signature] = rule_id
        labels[rule_id] = label
        rules.append(rule)
    description = "Rules suggested from literals the current packs missed."
    _text, candidates, dropped = validated_pack(name, rules, description=description)
    rules = [r for r in rules if r["id"] not in dropped]
    noise = {r.qid: shell_noise(r) for r in compile_pack(candidates)
             if isinstance(r, CompiledRegex)}
    if mapped is None:
        paid = payoffs(mined if again is None else again(), candidates)
    else:
        paid = add_payoffs(candidates, mapped(PayoffTask(candidates, FRACTIONS), True))
    kept: list[dict[str, Any]] = []
    kept_payoffs: dict[str, Payoff] = {}
    for rule in rules:
        qid = f"{name}/{rule['id']}"
        if qid in noise and noise[qid].noisy:
            found = noise[qid]
            skipped.append((labels[rule["id"]], f"shell noise: {found.noise} of its "
                            f"{found.matches} matches in ordinary shell output are not strings "
                            f"an agent reuses"))
            continue
        payoff = paid[qid]
        if payoff.precision <= min_precision:
            skipped.append((labels[rule["id"]], f"does not pay: {payoff}"))
            continue
        if len(payoff.conversations) < min_conversations:
            skipped.append((labels[rule["id"]], f"pays in {len(payoff.conversations)} "
                                                f"conversation(s), fewer than {min_conversations}"))
            continue
        rule["description"] += f" On the mined conversations: {payoff}."
        kept.append(rule)
        kept_payoffs[rule["id"]] = payoff
    header = (f"# Suggested by `firewall rules suggest`: {uses} load-bearing literal "
              f"use(s), {len(misses)} missed by the current packs, {len(groups)} group(s).\n"
              f"# Kept: rules with precision above {min_precision:.0%} on the mined "
              f"conversations, compacted at {', '.join(f'{f:.0%}' for f in FRACTIONS)}.\n"
              f"# Review every rule before use: the examples are cut from the mined "
              f"conversations.\n")
    text, pack, late = validated_pack(name, kept, description=description, header=header)
    kept = [r for r in kept if r["id"] not in late]
    return Suggestion(uses, misses, groups, kept, skipped, dropped + late, text, pack,
                      {r["id"]: kept_payoffs[r["id"]] for r in kept})


# ── CLI ─────────────────────────────────────────────────────────────────────────────────

def cmd_rules_suggest(args: argparse.Namespace) -> int:
    from ..evaluation.distributed import open_mapper
    from ..options import packs_from_args

    packs = packs_from_args(args, strict=False)
    with open_mapper(args.dask, args.dask_partition) as mapper, \
            mapper.files(args.file, fail_fast=args.fail_fast, label="suggest") as files:
        def mapped(task: Any, again: bool) -> Iterator[Any]:
            # the precision pass reads the files again: their bad lines are already reported
            read = quiet(args.file) if again else files
            return (result for _, result in mapper.map(task, read))

        result = suggest((), packs, name=args.name, min_conversations=args.min_conversations,
                         min_precision=args.min_precision, mapped=mapped)
        bad = files.report()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(result.yaml)
    else:
        sys.stdout.write(result.yaml)
    err = sys.stderr.write
    err(f"{result.uses} load-bearing literal use(s), {len(result.misses)} missed by the current "
        f"packs, in {len(result.groups)} group(s): {len(result.rules)} rule(s) suggested"
        + (f" -> {args.out}" if args.out else "") + "\n")
    for rule_id, payoff in result.payoffs.items():
        err(f"  {rule_id}: {payoff}\n")
    for label, reason in result.skipped:
        err(f"  no rule for {label}: {reason}\n")
    for rule_id in result.dropped:
        err(f"  dropped {rule_id}: its examples fail\n")
    return 1 if bad else 0


def quiet(paths: list[str]) -> Any:
    """The files read again, their bad lines skipped without a word."""
    import io

    from ..inputs import ConversationFiles

    return ConversationFiles(paths, stream=io.StringIO(), progress=False)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to below 1, like 0.5: {text!r}")
    return value


def add_suggest_command(rules_subparsers: Any) -> argparse.ArgumentParser:
    """Register ``suggest`` under the ``firewall rules`` subcommand group."""
    from ..options import add_dask_option, add_fail_fast_option, add_rules_option

    command = rules_subparsers.add_parser(
        "suggest", help="propose rules for load-bearing literals the current packs miss")
    command.add_argument("file", nargs="+", help="recorded conversation file(s)")
    add_rules_option(command, "the current packs")
    command.add_argument("--out", metavar="PACK.yaml", help="write the pack here, not stdout")
    command.add_argument("--name", default="suggested", help="pack name (default: suggested)")
    command.add_argument("--min-conversations", type=int, default=2, metavar="N",
                         help="propose a rule only for misses seen in N conversations "
                              "(default 2)")
    command.add_argument("--min-precision", type=_share, default=MIN_PRECISION, metavar="P",
                         help="propose a rule only if more than this share of the strings it "
                              "pins in the mined conversations is used later in a tool call "
                              f"(default {MIN_PRECISION})")
    add_fail_fast_option(command)
    add_dask_option(command)
    command.set_defaults(func=cmd_rules_suggest)
    return command
