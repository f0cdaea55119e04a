"""The extraction engine: compiled packs → literals with provenance, turn by turn.

Regex rules define the results (one compiled pattern per rule, run on the raw text); the
prefilter only decides which of them to run. A rule that exceeds its time budget fails closed:
the rule and turn are reported and the turn is marked to be kept verbatim.
"""

from __future__ import annotations

import json
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .compiled import (CompiledJsonKey, CompiledRegex, CompiledRule, compile_noise, compile_pack,
                       covered)
from ..json_values import (embedded_json, json_keys, json_leaves, parse_json,
                           scalar_text)
from .confusables import fold, has_homoglyphs, mixed_script
from ..literals import Literal, SecretIndex, spread_sensitivity
from .pack_format import Pack
from .plain_view import plain, trimmed, untouched
from .prefilter import PatternGate, Prefilter, ascii_bytes
from ..turns import ROLES, Conversation, Turn
from .unspaced import cut_from_path, glued_tail, has_unspaced, spaced

SpanFinder = Callable[[str], list[tuple[int, int]]]


@dataclass(frozen=True, slots=True)
class RuleTimeout:
    """A rule ran out of time on a turn: that turn must be kept verbatim (fail closed)."""

    rule: str
    turn: int
    field: str


@dataclass(slots=True)
class TurnScan:
    literals: list[Literal] = field(default_factory=list)  # every hit, before deduplication
    timeouts: list[RuleTimeout] = field(default_factory=list)


@dataclass(slots=True)
class ScanResult:
    literals: list[Literal]  # deduplicated by value, first provenance kept, in order
    timeouts: list[RuleTimeout]

    @property
    def verbatim_turns(self) -> set[int]:
        return {t.turn for t in self.timeouts}


TEXT_MEMO_CHARS = 512  # texts up to this long are memoized by content (see scan_text)
TEXT_MEMO_SIZE = 8192  # entries, then the memo starts again (hostile input has no end)


class Extractor:
    """Compiled packs, ready to scan. Build once; scanning is thread-safe and stateless."""

    def __init__(self, packs: Iterable[Pack], *, timeout: float = 0.5,
                 timeout_per_mb: float = 1.0, cache_size: int = 4096) -> None:
        seen: set[str] = set()
        self.rules: list[CompiledRule] = []
        self.noise = []
        self.packs = list(packs)
        for pack in self.packs:
            for rule in compile_pack(pack):
                if rule.qid not in seen:  # a pack loaded twice, or extended and loaded
                    seen.add(rule.qid)
                    self.rules.append(rule)
            for noise in compile_noise(pack):
                if noise.qid not in seen:
                    seen.add(noise.qid)
                    self.noise.append(noise)
        self.timeout, self.timeout_per_mb = timeout, timeout_per_mb
        # one RE2 pass tells which noise patterns can match an ASCII text: the others are
        # not run (each was a pass of its own over every text with literals)
        self._noise_gate = PatternGate([n.re2_source for n in self.noise])
        # the same on the UTF-8 bytes of other text (Claude Code's file reads: the → gutter)
        self._noise_gate_wide = PatternGate([n.re2_unicode_source for n in self.noise])
        self._sensitive = {r.qid for r in self.rules if r.rule.sensitive}
        # one prefilter for every role: its RE2 sets warm up, and hold memory, once
        self._regex = [r for r in self.rules if isinstance(r, CompiledRegex)]
        self._prefilter = Prefilter(self._regex)
        self._by_role: dict[str, _RoleRules] = {
            role: self._role_rules([r for r in self.rules if role in r.rule.roles])
            for role in ROLES}
        self._secrets_by_role: dict[str, _RoleRules] = {}  # built on first use: see _rules
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, list[Literal]] = OrderedDict()
        # what scan_text found in a short text, by (text, role, secrets_only): the literals'
        # own fields, without the turn, field and tool they were seen at
        self._text_memo: dict[tuple[str, str, bool], list[tuple]] = {}
        self._cache_lock = threading.Lock()

    def _budget(self, text: str) -> float:
        return self.timeout + self.timeout_per_mb * len(text) / 1_000_000

    def _rules(self, role: str, secrets_only: bool = False) -> _RoleRules:
        """The rules of a role, or only its sensitive ones (all that an object key is scanned
        with; picked the first time a key is scanned)."""
        if not secrets_only:
            return self._by_role[role]
        rules = self._secrets_by_role.get(role)
        if rules is None:  # two threads may both build it: the same rules either way
            rules = self._secrets_by_role[role] = self._role_rules(
                [r for r in self._by_role[role].all if r.rule.sensitive])
        return rules

    def _role_rules(self, rules: list[CompiledRule]) -> _RoleRules:
        return _RoleRules(rules, self._regex, self._prefilter)

    def scan_text(self, text: str, role: str, *, turn: int = 0, field: str = "text",
                  tool: str | None = None, out: TurnScan | None = None,
                  secrets_only: bool = False) -> TurnScan:
        """Run every applicable text rule (regex, terms, entity) over one piece of text;
        ``secrets_only``: only the sensitive ones."""
        out = out if out is not None else TurnScan()
        if not text:
            return out
        # short texts recur (a path, a command, a JSON value): memoized by content
        if len(text) <= TEXT_MEMO_CHARS and self.cache_size > 0:
            key = (text, role, secrets_only)
            known = self._text_memo.get(key)
            if known is not None:
                append = out.literals.append
                for value, qid, start, end, severity, sensitive, priority, mixed in known:
                    append(Literal(value, qid, turn, role, start, end, field, tool, severity,
                                   sensitive, priority, 1, mixed))
                return out
            found = self._scan_text(text, role, turn, field, tool, TurnScan(), secrets_only)
            if not found.timeouts:  # a rule that ran out of time may not next time
                if len(self._text_memo) >= TEXT_MEMO_SIZE:
                    self._text_memo.clear()
                self._text_memo[key] = [
                    (lit.value, lit.rule, lit.start, lit.end, lit.severity, lit.sensitive,
                     lit.priority, lit.mixed_script) for lit in found.literals]
            out.literals += found.literals
            out.timeouts += found.timeouts
            return out
        return self._scan_text(text, role, turn, field, tool, out, secrets_only)

    def _scan_text(self, text: str, role: str, turn: int, field: str, tool: str | None,
                   out: TurnScan, secrets_only: bool) -> TurnScan:
        rules = self._rules(role, secrets_only)
        budget = self._budget(text)
        view = plain(text)
        data = ascii_bytes(view)
        found = len(out.literals)
        if view is text:
            self._run_rules(rules, text, data, budget, turn, role, field, tool, out)
        else:
            self._scan_plain(text, view, data, rules, role, budget, turn, field, tool, out)
        if has_homoglyphs(text):
            self._scan_lookalikes(text, view, rules, role, budget, turn, field, tool, out)
        if has_unspaced(text):
            self._scan_unspaced(text, view, rules, role, budget, turn, field, tool, out)
        if self.noise and len(out.literals) > found:
            self._drop_noise(view, budget, out, found, data)
        return out

    def _scan_plain(self, text: str, view: str, data: bytes | None, rules: _RoleRules,
                    role: str, budget: float, turn: int, field: str, tool: str | None,
                    out: TurnScan) -> None:
        """The rules matched on ``plain(text)``, escapes and CJK punctuation read as spaces,
        each value sliced from ``text``. A value never holds a replaced character: one at a
        match's end is cut off; a rule whose match spans one (it allows spaces) is run on
        ``text`` itself instead, for its matches there that hold none. The sensitive rules
        also run on ``text``: a secret they found there is flagged whatever the view reads."""
        found = TurnScan()
        self._run_rules(rules, view, data, budget, turn, role, field, tool, found)
        out.timeouts += found.timeouts
        spanning: set[str] = set()
        kept: list[Literal] = []
        for lit in found.literals:
            if not untouched(text, view, lit.start, lit.end):
                span = trimmed(text, view, lit.start, lit.end)
                if span is None:
                    spanning.add(lit.rule)
                    continue
                lit.start, lit.end = span
                lit.value = text[lit.start:lit.end]
            kept.append(lit)
        source = TurnScan()
        if spanning:
            for rule in rules.all:
                if rule.qid in spanning:
                    self._run(rule, text, budget, None, turn, role, field, tool, source)
        secrets = self._rules(role, secrets_only=True)
        if secrets.all:
            self._run_rules(secrets, text, ascii_bytes(text), budget, turn, role, field, tool,
                            source)
        out.timeouts += source.timeouts
        seen = {(lit.rule, lit.start, lit.end) for lit in kept}
        for lit in source.literals:
            if (lit.rule, lit.start, lit.end) not in seen and (
                    lit.sensitive or untouched(text, view, lit.start, lit.end)):
                seen.add((lit.rule, lit.start, lit.end))
                kept.append(lit)
        out.literals += kept

    def noise_spans(self, text: str, timeout: float,
                    data: bytes | None = None) -> list[tuple[int, int]] | None:
        """The stretches of ``text`` that the packs declare noise; None when a noise pattern
        ran out of time (then nothing is dropped: a firewall that fails keeps literals).
        ``data``: ``ascii_bytes(text)``, when known."""
        lowered = text.lower()
        spans: list[tuple[int, int]] = []
        noises = self.noise
        if data is not None:
            possible = self._noise_gate.possible(data)
            noises = [n for i, n in enumerate(noises) if i in possible]
        else:
            try:
                encoded = text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: every noise pattern runs
                encoded = None
            if encoded is not None:
                possible = self._noise_gate_wide.possible(encoded)
                noises = [n for i, n in enumerate(noises) if i in possible]
        try:
            for noise in noises:
                spans += noise.spans(text, lowered, timeout, data)
        except TimeoutError:
            return None
        return spans

    def _drop_noise(self, text: str, budget: float, out: TurnScan, start: int,
                    data: bytes | None) -> None:
        spans = self.noise_spans(text, budget, data)
        if not spans:
            return
        inside = covered(spans)
        out.literals[start:] = [lit for lit in out.literals[start:]
                                if lit.sensitive or not inside(lit.start, lit.end)]

    def _scan_view(self, view: str, rules: _RoleRules, role: str, budget: float, turn: int,
                   field: str, tool: str | None, out: TurnScan) -> list[Literal]:
        """Every text rule over ``view``, another rendering of a text with the same offsets;
        returns the literals it finds there and ``out`` did not hold (same rule and span)."""
        found = TurnScan()
        self._run_rules(rules, view, ascii_bytes(view), budget, turn, role, field, tool, found)
        out.timeouts += found.timeouts
        seen = {(lit.rule, lit.start, lit.end) for lit in out.literals}
        return [lit for lit in found.literals if (lit.rule, lit.start, lit.end) not in seen]

    def _scan_lookalikes(self, text: str, view: str, rules: _RoleRules, role: str,
                         budget: float, turn: int, field: str, tool: str | None,
                         out: TurnScan) -> None:
        """Rules matched on ``view`` (``plain(text)``) with look-alike letters folded to Latin
        (same offsets): a match that mixes them with Latin letters or digits (``АBC123X``) is
        pinned with the source's bytes and flagged ``mixed_script``, as its Latin twin would
        be pinned."""
        for lit in self._scan_view(fold(view), rules, role, budget, turn, field, tool, out):
            raw = text[lit.start:lit.end]
            if mixed_script(raw) and (view is text or untouched(text, view, lit.start, lit.end)):
                lit.value, lit.mixed_script = raw, True
                out.literals.append(lit)

    def _scan_unspaced(self, text: str, view: str, rules: _RoleRules, role: str,
                       budget: float, turn: int, field: str, tool: str | None,
                       out: TurnScan) -> None:
        """Rules matched on ``view`` (``plain(text)``) with the letters of scripts written
        without spaces read as spaces too (``unspaced``): an ID glued to a Chinese, Japanese or
        Thai sentence. Kept only where the view and the source agree byte for byte, so a
        literal never holds a space the source does not."""
        view = spaced(view)
        found = [lit for lit in self._scan_view(view, rules, role, budget, turn, field, tool, out)
                 if text[lit.start:lit.end] == lit.value]
        if found:  # a piece of a path whose segment holds such letters is no literal of its own
            # a file name ends at its extension: the letters glued after it (main.go를,
            # x.mjs文件) are the sentence's, so the view's literal replaces the source's
            ended = {(lit.start, lit.end) for lit in found if _EXTENSION_END.search(lit.value)}
            out.literals = [lit for lit in out.literals if not any(
                lit.start == start and end < lit.end and glued_tail(text, end, lit.end)
                for start, end in ended)]
            spans = [(lit.start, lit.end) for lit in out.literals]
            out.literals += [lit for lit in found if not cut_from_path(text, lit.start, lit.end)
                             and not any(s <= lit.start and lit.end <= e for s, e in spans)]

    def _run_rules(self, rules: _RoleRules, text: str, data: bytes | None, budget: float,
                   turn: int, role: str, field: str, tool: str | None, out: TurnScan) -> None:
        """Every rule of ``rules`` the prefilter lets through, over ``text`` (``data``: its
        ``ascii_bytes``)."""
        regex_rules = rules.regex
        for i in rules.prefilter.candidates(text, data, rules.among):
            self._run(regex_rules[i], text, budget, data, turn, role, field, tool, out)
        for rule in rules.other:
            self._run(rule, text, budget, None, turn, role, field, tool, out)

    def _run(self, rule: CompiledRule, text: str, budget: float, data: bytes | None, turn: int,
             role: str, field: str, tool: str | None, out: TurnScan) -> None:
        try:
            spans = rule.find(text, budget, data) if data is not None else rule.find(text, budget)
        except TimeoutError:
            out.timeouts.append(RuleTimeout(rule.qid, turn, field))
            return
        if spans:
            spec = rule.rule
            qid, severity, sensitive, priority = rule.qid, spec.severity, spec.sensitive, \
                spec.priority
            append = out.literals.append
            for start, end in spans:  # positional: keyword arguments cost a third more here
                append(Literal(text[start:end], qid, turn, role, start, end, field, tool,
                               severity, sensitive, priority))

    def scan_json(self, node: Any, role: str, *, turn: int, root: str, tool: str | None,
                  out: TurnScan, text_rules: bool) -> None:
        """json_key rules over a parsed JSON value; ``text_rules`` also scans every leaf (strings
        and numbers) and every object key with the text rules."""
        rules_for_key = self._by_role[role].json_key_rules
        budget = self.timeout
        if not text_rules:
            self._scan_json_keys(node, role, turn, root, tool, out)
            return
        for path, key, value in json_leaves(node, root):
            text = scalar_text(value)
            if text is None:
                continue
            if key is not None:
                _accept_leaf(rules_for_key(key), text, budget, turn, role, path, tool, out)
            # numbers too: a card number given as a JSON integer is still a card number
            self.scan_text(text, role, turn=turn, field=path, tool=tool, out=out)
        # a secret used as an object key; other names a key holds are the schema's, not data
        for path, key in json_keys(node, root):
            self.scan_text(key, role, turn=turn, field=path, tool=tool, out=out,
                           secrets_only=True)

    def _scan_json_keys(self, node: Any, role: str, turn: int, root: str, tool: str | None,
                        out: TurnScan) -> None:
        """``scan_json`` without text rules: the walk of ``_json_leaves`` (same leaves, order
        and paths) written out in one loop, as every tool result goes through it."""
        rules_for_key = self._by_role[role].json_key_rules
        budget = self.timeout
        if not isinstance(node, (dict, list)):
            return  # a bare scalar has no key
        stack = [(root, None, iter(node.items()) if isinstance(node, dict)
                  else enumerate(node), isinstance(node, dict))]
        while stack:
            where, key, items, is_dict = stack[-1]
            for k, value in items:
                if is_dict:
                    path, child_key = f"{where}.{k}", str(k)
                else:
                    path, child_key = f"{where}[{k}]", key
                if isinstance(value, dict):
                    stack.append((path, child_key, iter(value.items()), True))
                    break
                if isinstance(value, list):
                    stack.append((path, child_key, enumerate(value), False))
                    break
                if child_key is None:
                    continue
                rules = rules_for_key(child_key)
                if not rules:
                    continue
                text = value if isinstance(value, str) else scalar_text(value)
                if text is not None:
                    _accept_leaf(rules, text, budget, turn, role, path, tool, out)
            else:
                stack.pop()

    def scan_turn(self, turn: Turn, index: int, *, skip: SpanFinder | None = None) -> TurnScan:
        """Every hit in one turn: its text, its tool calls' arguments, its JSON tool result.

        Results are memoized by the turn's content: an agent compacts the same history again
        and again, and a turn seen before costs a lookup, not a rescan. The literals returned
        may be shared with the memo: read them, copy before changing one (``Scanner`` does).
        """
        found = self.scan_turn_shared(turn, index, skip=skip)
        if found.literals and found.literals[0].turn != index:  # memoized at another number
            return TurnScan([_at(lit, index) for lit in found.literals], found.timeouts)
        return found

    def scan_turn_shared(self, turn: Turn, index: int, *, skip: SpanFinder | None = None,
                         key: tuple | None = None) -> TurnScan:
        """``scan_turn``, but a memoized turn's literals keep the turn number they were first
        scanned at: for callers that copy what they keep anyway (``Scanner``). ``key``: the
        turn's ``turn_key`` when the caller has it and ``skip`` blanks nothing in it."""
        if turn.role == "system":
            return TurnScan()
        text = turn.text
        if skip is not None and text and key is None:
            for start, end in skip(text):  # genuine ledger blocks: blank them, keep offsets
                text = text[:start] + " " * (end - start) + text[end:]
        if self.cache_size <= 0:  # no memo: no key to serialize, no copies to keep
            return self._scan_turn(turn, text, index)
        if key is None:
            key = turn_key(turn, text)
        with self._cache_lock:
            cached = self._cache.get(key) if key is not None else None
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            return TurnScan(list(cached))
        out = self._scan_turn(turn, text, index)
        # a rule that ran out of time may not next time: such a scan is never cached
        if key is not None and not out.timeouts:
            with self._cache_lock:
                self._cache[key] = list(out.literals)  # shared, as the docstring says
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    def _scan_turn(self, turn: Turn, text: str, index: int) -> TurnScan:
        out = TurnScan()
        tool = turn.tool_name
        self.scan_text(text, turn.role, turn=index, tool=tool, out=out)
        if turn.role == "tool" and self._by_role["tool"].json_key:
            parsed = parse_json(text)
            for document in [parsed] if parsed is not None else embedded_json(text):
                self.scan_json(document, "tool", turn=index, root="content", tool=tool, out=out,
                               text_rules=False)
        for call in turn.tool_calls:
            self.scan_json(call.arguments, turn.role, turn=index, root="arguments",
                           tool=call.name, out=out, text_rules=True)
        if out.timeouts:
            self._unknown_is_secret(out)
        spread_sensitivity(out.literals)
        # document order: hits come grouped by rule; order by field (first appearance), offset
        # (stable sorts on one attribute each, read in C: a tuple key per literal cost more)
        literals = out.literals
        fields = dict.fromkeys(map(_FIELD, literals))  # in order of first appearance
        literals.sort(key=_END, reverse=True)
        literals.sort(key=_START)
        if len(fields) > 1:
            rank = {field: i for i, field in enumerate(fields)}
            literals.sort(key=lambda lit: rank[lit.field])
        return out

    def _unknown_is_secret(self, out: TurnScan) -> None:
        """Where a sensitive rule ran out of time, nobody knows which bytes were a secret:
        every literal other rules found in that field is treated as one (sensitivity fails
        closed, as the turn itself is kept verbatim and never sent)."""
        unsure = {t.field for t in out.timeouts if t.rule in self._sensitive}
        for lit in out.literals:
            if lit.field in unsure:
                lit.sensitive = True

    def scan(self, conversation: Conversation | Iterable[Turn], *,
             skip: SpanFinder | None = None) -> ScanResult:
        scanner = Scanner(self, skip=skip)
        turns = conversation.turns if isinstance(conversation, Conversation) else conversation
        for turn in turns:
            scanner._add(turn, None, None, None)
        return scanner.result()


def _accept_leaf(rules: list[Any], text: str, budget: float, turn: int, role: str, path: str,
                 tool: str | None, out: TurnScan) -> None:
    """The ``json_key`` rules of one JSON leaf's key over its text: each that accepts it
    makes the whole value a literal; one that times out is recorded, not passed."""
    lookalike = mixed_script(text)
    for rule in rules:
        try:
            accepted = rule.accept(text, budget)
            twin = not accepted and lookalike and rule.accept(fold(text), budget)
        except TimeoutError:
            out.timeouts.append(RuleTimeout(rule.qid, turn, path))
            continue
        if accepted or twin:
            spec = rule.rule
            out.literals.append(Literal(text, rule.qid, turn, role, 0, len(text), path, tool,
                                        spec.severity, spec.sensitive, spec.priority, 1,
                                        lookalike))


_START, _END, _FIELD = (operator.attrgetter(name) for name in ("start", "end", "field"))
_EXTENSION_END = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")  # a file name's last part


def turn_key(turn: Turn, text: str | None = None) -> tuple | None:
    """What a turn's scan depends on (``text``: its text as scanned, by default ``turn.text``);
    None when its tool-call arguments are too deep to serialize (such a turn is never memoized).
    Arguments are compared as sorted JSON: ``1`` and ``1.0`` are equal in Python, not here."""
    try:
        return (turn.role, turn.text if text is None else text, turn.tool_name, tuple(
            (c.name, json.dumps(c.arguments, sort_keys=True, default=str))
            for c in turn.tool_calls))
    except (ValueError, RecursionError):
        return None


def _at(lit: Literal, turn: int) -> Literal:
    """A copy of ``lit`` seen at ``turn`` (positional: several times faster than replace())."""
    return Literal(lit.value, lit.rule, turn, lit.role, lit.start, lit.end, lit.field, lit.tool,
                   lit.severity, lit.sensitive, lit.priority, lit.count, lit.mixed_script, turn)


class _RoleRules:
    """The rules that apply to one role, split by how they run."""

    def __init__(self, rules: list[CompiledRule], regex: list[CompiledRegex],
                 prefilter: Prefilter) -> None:
        self.all = rules
        # every regex rule of the extractor and their shared prefilter; ``among``: the indices
        # (into ``regex``) of this role's own
        chosen = {id(r) for r in rules}
        self.regex, self.prefilter = regex, prefilter
        self.among = frozenset(i for i, r in enumerate(regex) if id(r) in chosen)
        self.json_key = [r for r in rules if isinstance(r, CompiledJsonKey)]
        self.other = [r for r in rules if not isinstance(r, (CompiledRegex, CompiledJsonKey))]
        self._key_rules: dict[str, list[CompiledJsonKey]] = {}

    def json_key_rules(self, key: str) -> list[CompiledJsonKey]:
        """The json_key rules whose key patterns match ``key`` (memoized: keys repeat a lot)."""
        rules = self._key_rules.get(key)
        if rules is None:
            rules = [r for r in self.json_key if r.match_key(key)]
            if len(self._key_rules) < 100_000:  # bounded: keys of hostile JSON are unbounded
                self._key_rules[key] = rules
        return rules


# A scanner's literal row: the fields of ``Literal`` in order, flattened into one list.
_WIDTH = len(Literal.__slots__)
_SEVERITY, _SENSITIVE, _PRIORITY, _COUNT, _LAST = (
    Literal.__slots__.index(name)
    for name in ("severity", "sensitive", "priority", "count", "last_turn"))


class Scanner:
    """Incremental extraction: each new turn is scanned once; old turns are never rescanned.

    Literals are kept as rows of one flat list of strings and numbers, not one object each: a
    long conversation holds tens of thousands, and long-lived objects that the garbage
    collector tracks are what made its young-generation passes land on ``add`` (they set the
    p99 of ``benchmarks/incremental.py``). ``Literal`` objects are built on the way out.
    """

    def __init__(self, extractor: Extractor, *, skip: SpanFinder | None = None) -> None:
        self.extractor, self.skip = extractor, skip
        self._row: dict[str, int] = {}  # value -> offset of its row in ``_rows``
        self._rows: list[Any] = []
        self.timeouts: list[RuleTimeout] = []
        self.turns = 0

    def add(self, turn: Turn, index: int | None = None, *,
            key: tuple | None = None) -> list[Literal]:
        """Scan the next turn (numbered ``index``, by default the count of turns added so
        far); returns the literals seen for the first time (the caller's to change).
        ``key``: see ``scan_turn_shared``."""
        new: list[Literal] = []
        self._add(turn, index, key, new)
        return new

    def _add(self, turn: Turn, index: int | None, key: tuple | None,
             new: list[Literal] | None) -> None:
        """``add``, collecting the new literals into ``new`` unless it is None (a whole scan
        builds them from the rows at the end: no copy per value)."""
        index = self.turns if index is None else index
        found = self.extractor.scan_turn_shared(turn, index, skip=self.skip, key=key)
        self.turns += 1
        self.timeouts.extend(found.timeouts)
        row_of, rows = self._row, self._rows
        get, extend = row_of.get, rows.extend
        for lit in found.literals:
            value = lit.value
            at = get(value)
            if at is None:
                row_of[value] = len(rows)
                if new is not None:
                    new.append(_at(lit, index))
                extend((value, lit.rule, index, lit.role, lit.start, lit.end, lit.field,
                        lit.tool, lit.severity, lit.sensitive, lit.priority, lit.count,
                        lit.mixed_script, index))
            else:  # seen before: count it; its latest turn, strongest severity and priority
                rows[at + _COUNT] += 1
                rows[at + _LAST] = index
                if lit.severity == "required":
                    rows[at + _SEVERITY] = "required"
                if lit.sensitive:
                    rows[at + _SENSITIVE] = True
                if lit.priority > rows[at + _PRIORITY]:
                    rows[at + _PRIORITY] = lit.priority

    def state(self) -> tuple[dict[str, int], list[Any]]:
        """A copy of what was added so far; ``Scanner.resume`` takes it."""
        return dict(self._row), list(self._rows)

    @classmethod
    def resume(cls, extractor: Extractor, state: tuple[dict[str, int], list[Any]], turns: int,
               *, skip: SpanFinder | None = None) -> Scanner:
        """A scanner that has added ``turns`` turns, whose ``state()`` was ``state`` (copied:
        the state may be resumed again) and which hit no rule timeout."""
        scanner = cls(extractor, skip=skip)
        scanner._row, scanner._rows = dict(state[0]), list(state[1])
        scanner.turns = turns
        return scanner

    def result(self) -> ScanResult:
        rows = self._rows
        literals = [Literal(*rows[at:at + _WIDTH]) for at in range(0, len(rows), _WIDTH)]
        # a literal that contains a secret (a URL with a password in it), or is a piece of one
        # seen elsewhere, is a secret too
        secrets = SecretIndex([lit.value for lit in literals if lit.sensitive])
        if secrets:
            for lit in literals:
                if not lit.sensitive and secrets.touches(lit.value):
                    lit.sensitive = True
        return ScanResult(literals=literals, timeouts=list(self.timeouts))


@dataclass(slots=True)
class _Prefix:
    keys: list[tuple]  # per turn: turn_key and the skipped spans
    state: tuple[dict[str, int], list[Any]]  # Scanner.state()


class ScanMemo:
    """Scanner states of recent scans, so that turns scanned before are not added again.

    An agent compacts the same history again and again, each time with a few turns more:
    ``scan`` finds the state left by an earlier scan that started at the same turn, checks
    that every one of its turns is unchanged (role, text, tool name, arguments as JSON, and
    the spans ``skip`` blanks, so a ledger block that is genuine for one ledger and not for
    another is never confused), resumes it and adds only the turns after it. The result is
    the one a fresh ``Scanner`` gives. A scan in which a rule timed out stores nothing (the
    rule may finish next time). Thread-safe; bounded to the ``size`` most recent starts.
    """

    def __init__(self, extractor: Extractor, size: int = 32) -> None:
        self.extractor, self.size = extractor, size
        self._prefixes: OrderedDict[tuple, _Prefix] = OrderedDict()
        self._lock = threading.Lock()

    def scan(self, turns: list[Turn], *, offset: int = 0, skip: SpanFinder | None = None,
             tag: Any = None) -> ScanResult:
        """``Scanner`` over ``turns`` numbered from ``offset``; ``tag`` (a conversation id)
        keeps conversations that start alike apart (a different tag only misses)."""
        keys: list[tuple] | None = []
        for turn in turns:
            key = turn_key(turn)
            if key is None:
                keys = None
                break
            keys.append((key, tuple(skip(turn.text)) if skip is not None and turn.text
                         else ()))
        if not keys:  # nothing to scan, or a turn that cannot be keyed: no memo
            scanner = Scanner(self.extractor, skip=skip)
            for i, turn in enumerate(turns):
                scanner.add(turn, offset + i)
            return scanner.result()
        slot = (tag, offset, keys[0])
        with self._lock:
            prefix = self._prefixes.get(slot)
            if prefix is not None:
                self._prefixes.move_to_end(slot)
        done = 0
        if prefix is not None and len(prefix.keys) <= len(keys) and \
                keys[:len(prefix.keys)] == prefix.keys:
            done = len(prefix.keys)
            scanner = Scanner.resume(self.extractor, prefix.state, done, skip=skip)
        else:
            scanner = Scanner(self.extractor, skip=skip)
        for i in range(done, len(turns)):
            key, spans = keys[i]  # the turn's key serves the turn memo when nothing is skipped
            scanner.add(turns[i], offset + i, key=None if spans else key)
        if done < len(turns) and not scanner.timeouts:
            stored = _Prefix(keys, scanner.state())
            with self._lock:
                self._prefixes[slot] = stored
                self._prefixes.move_to_end(slot)
                while len(self._prefixes) > self.size:
                    self._prefixes.popitem(last=False)
        return scanner.result()
