"""Compiled rules: each pack rule turned, once, into something that finds spans in a text.

Every compiled rule answers ``find(text, timeout) -> [(start, end)]`` on raw text with
character offsets; ``json_key`` rules instead answer ``match_key(key)`` / ``accept(value)`` for
the JSON walker in ``extract``.
"""

from __future__ import annotations

import bisect
import fnmatch
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ahocorasick
import regex

from .checksums import CHECKSUMS
from ..errors import PackError
from .regex_syntax import (INLINE_FLAGS, drop_leading_optional, fold_case, relax,
                           widen_backreferences, without_g)
from .locate import Locator, build_locator
from .pack_format import (ALLOWLIST_REGEX_FIELDS, EntityRule, JsonKeyRule, Pack, RegexRule,
                          TermsRule)

# `requires:` tests: cheaper after a match than lookaheads before every candidate position
def _requirement(test, ascii_members: str):
    """``any(test(c) for c in v)``; on ASCII values a set test, the same answer, faster."""
    members = frozenset(ascii_members)

    def holds(value: str) -> bool:
        if value.isascii():
            return not members.isdisjoint(value)
        return any(test(c) for c in value)
    return holds


_ASCII = "".join(map(chr, range(128)))
REQUIRES = {
    "digit": _requirement(str.isdigit, "".join(c for c in _ASCII if c.isdigit())),
    "letter": _requirement(str.isalpha, "".join(c for c in _ASCII if c.isalpha())),
    "upper": _requirement(str.isupper, "".join(c for c in _ASCII if c.isupper())),
    "lower": _requirement(str.islower, "".join(c for c in _ASCII if c.islower())),
}
FLAGS = {"ignorecase": regex.IGNORECASE, "multiline": regex.MULTILINE, "dotall": regex.DOTALL,
         "verbose": regex.VERBOSE}
VERDICTS_MAX = 4096  # allowlist answers memoized per rule
_UNBUILT = object()  # a lazily built attribute not built yet


@dataclass(eq=False)
class CompiledRule:
    qid: str  # "pack/rule-id"
    pack: str
    rule: Any  # the pydantic Rule it came from
    allow_patterns: tuple[regex.Pattern[str], ...] = ()

    @property
    def kind(self) -> str:
        return self.rule.kind

    allow_any: regex.Pattern[str] | None = None  # the allowlist patterns as one alternation
    allow_search: tuple[regex.Pattern[str], ...] = ()  # allowlist.regexes: found in the value
    stopwords: Any = None  # allowlist.stopwords, lowercased, as an Aho-Corasick automaton
    # the allowlist's answers by value (IDs recur all through a conversation); None: the rule
    # has no allowlist (``set_allowlist`` decides)
    _verdicts: dict[str, bool] | None = field(default_factory=dict)

    def set_allowlist(self, patterns: tuple[regex.Pattern[str], ...],
                      search: tuple[regex.Pattern[str], ...] = ()) -> None:
        self.allow_patterns, self.allow_any = patterns, _alternation(patterns)
        self.allow_search = search
        words = {w.lower() for w in self.rule.allowlist.stopwords if w}
        if words:
            self.stopwords = ahocorasick.Automaton()
            for word in words:
                self.stopwords.add_word(word, word)
            self.stopwords.make_automaton()
        self._verdicts = {} if patterns or search or words or self.rule.allowlist.values \
            else None

    def allowed(self, value: str, timeout: float | None = None) -> bool:
        """False for a value the rule's allowlist ignores; ``timeout`` bounds each regex of
        ``allowlist.regexes`` (TimeoutError: the caller fails closed)."""
        verdicts = self._verdicts
        if verdicts is None:
            return True
        known = verdicts.get(value)
        if known is None:
            if value in self.rule.allowlist.values:
                known = False
            elif self.allow_any is not None:
                known = self.allow_any.fullmatch(value) is None
            else:
                known = not any(p.fullmatch(value) for p in self.allow_patterns)
            if known and self.stopwords is not None:
                known = next(self.stopwords.iter(value.lower()), None) is None
            if known and self.allow_search:
                known = not any(p.search(value, timeout=timeout) for p in self.allow_search)
            if len(verdicts) >= VERDICTS_MAX:  # ``_remember``, inline: most values are new
                verdicts.clear()
            verdicts[value] = known
        return known


@dataclass(eq=False)
class CompiledRegex(CompiledRule):
    keywords: tuple[str, ...] = ()
    checksum: Any = None
    requires: tuple[Any, ...] = ()  # character-class tests the whole value must pass
    re2_source: str | None = None  # the pattern for the RE2 prefilter, None if not eligible
    re2_unicode_source: str | None = None  # the same, widened for non-ASCII text

    flags: int = 0  # the pattern's compile flags
    path: str | None = None  # the pack file, named by a compile error
    entropy: float | None = None  # the kept value's Shannon entropy must be above this
    allow_match: tuple[regex.Pattern[str], ...] = ()  # allowlist.match_regexes
    allow_line: tuple[regex.Pattern[str], ...] = ()  # allowlist.line_regexes
    # The compiled pattern and its locator (where matches can start, found by RE2 on ASCII
    # text) are built the first time the prefilter lets a text through to the rule: compiling
    # every rule costs about 0.1 s at each start of the command line, and most rules of a
    # short run never get a text.
    _pattern: regex.Pattern[str] | object = field(default=_UNBUILT, repr=False)
    _group: str | int = field(default=0, repr=False)
    _locator: Locator | None | object = field(default=_UNBUILT, repr=False)

    @property
    def pattern(self) -> regex.Pattern[str]:
        if self._pattern is _UNBUILT:
            pattern = _compile(self.rule.pattern, self.flags, "pattern", self.pack,
                               self.rule.id, self.path)
            group = self.rule.group
            self._group = group if group is not None else \
                "literal" if "literal" in pattern.groupindex else 0
            if group == "first" and not pattern.groups:
                self._group = 0
            self._pattern = pattern
        return self._pattern  # type: ignore[return-value]

    @property
    def group(self) -> str | int:
        """What a match keeps: the ``literal`` group when the pattern has one."""
        self.pattern  # noqa: B018 - compiled on first use
        return self._group

    @property
    def locator(self) -> Locator | None:
        if self._locator is _UNBUILT:
            # a stricter locator tests ``requires`` on the whole match: only when it is kept
            whole = self.group == 0
            self._locator = build_locator(self.rule.pattern, self.flags, self.pattern,
                                          tuple(self.rule.requires) if whole else ())
        return self._locator  # type: ignore[return-value]

    @locator.setter
    def locator(self, value: Locator | None) -> None:
        self._locator = value

    def find(self, text: str, timeout: float, data: bytes | None = None
             ) -> list[tuple[int, int]]:
        """Spans of accepted matches; ``data``: ``text`` as bytes when it is ASCII without the
        characters on which RE2's ``\\s`` differs (then the locator, if any, is used)."""
        pattern, locator = self.pattern, self.locator  # built before any timing
        group = self._group
        matches = pattern.finditer(text, timeout=timeout) if locator is None else \
            locator.finditer(pattern, text, data, timeout)
        if self.checksum is not None:  # matched first: a validator's time (its library's
            matches = list(matches)  # first import) must not count against the regex budget
        spans: list[tuple[int, int]] = []
        requires, checksum, entropy = self.requires, self.checksum, self.entropy
        # each test looked up once per text, not per match (generic rules match thousands)
        allowlist = self._verdicts is not None
        in_context = bool(self.allow_match or self.allow_line)
        if group != "first" and not (requires or checksum is not None or entropy is not None
                                     or allowlist or in_context):
            append = spans.append
            for m in matches:  # no test: every non-empty match is kept
                start, end = m.span(group)
                if start >= 0 and start != end:
                    append((start, end))
            return spans
        for m in matches:
            start, end = first_group(m) if group == "first" else m.span(group)
            if start < 0 or start == end:
                continue
            value = text[start:end]
            if requires and not all(test(value) for test in requires):
                continue
            if checksum is not None and not checksum(value):
                continue
            if entropy is not None and shannon_entropy(value) <= entropy:
                continue
            if (not allowlist or self.allowed(value, timeout)) and \
                    not (in_context and self._dropped_in_context(m, text, timeout)):
                spans.append((start, end))
        return spans

    def _dropped_in_context(self, m: Any, text: str, timeout: float) -> bool:
        """Does ``allowlist.match_regexes`` (on the whole match) or ``line_regexes`` (on the
        lines the match stands on) drop this match?"""
        if self.allow_match:
            whole = m.group()
            if any(p.search(whole, timeout=timeout) for p in self.allow_match):
                return True
        if self.allow_line:
            start, end = m.span()
            line = text[text.rfind("\n", 0, start) + 1:_line_end(text, end)]
            if any(p.search(line, timeout=timeout) for p in self.allow_line):
                return True
        return False


def _line_end(text: str, end: int) -> int:
    newline = text.find("\n", end)
    return len(text) if newline < 0 else newline


def first_group(m: Any) -> tuple[int, int]:
    """The span of the first capture group that took part in the match and is not empty,
    else the whole match (gitleaks' choice of the secret when a rule names no group)."""
    for index in range(1, m.re.groups + 1):
        start, end = m.span(index)
        if end > start:
            return start, end
    return m.span()


def shannon_entropy(value: str) -> float:
    """Bits per character: 0 for ``aaaa``, 2 for ``abcd``, about 5.9 for random base64."""
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in Counter(value).values()) \
        if length else 0.0


@dataclass(eq=False)
class CompiledTerms(CompiledRule):
    automaton: Any = None
    ignore_case: bool = False
    whole_word: bool = True

    def find(self, text: str, timeout: float) -> list[tuple[int, int]]:
        haystack = _lower_same_length(text) if self.ignore_case else text
        if len(haystack) != len(text):
            haystack = text  # lowercasing changed lengths: offsets would lie
        spans = []
        for end_index, length in self.automaton.iter_long(haystack):
            start, end = end_index - length + 1, end_index + 1
            if self.whole_word and (_glued(text, start - 1) or _glued(text, end)):
                continue
            if self.allowed(text[start:end]):
                spans.append((start, end))
        return spans


@dataclass(eq=False)
class CompiledJsonKey(CompiledRule):
    key_pattern: regex.Pattern[str] = None  # type: ignore[assignment]
    value_pattern: regex.Pattern[str] | None = None

    def match_key(self, key: str) -> bool:
        return self.key_pattern.fullmatch(key) is not None

    _accepted: dict[str, bool] = field(default_factory=dict)  # memo of accept, by value

    def accept(self, value: str, timeout: float) -> bool:
        """Is this value (under a matching key) a literal? Memoized, like ``allowed``; a
        timeout raises and is not remembered."""
        known = self._accepted.get(value)
        if known is None:
            known = bool(value.strip()) and (
                self.value_pattern is None
                or self.value_pattern.fullmatch(value, timeout=timeout) is not None) \
                and self.allowed(value)
            _remember(self._accepted, value, known)
        return known


@dataclass(eq=False)
class CompiledEntity(CompiledRule):
    nlp: Any = None

    def find(self, text: str, timeout: float) -> list[tuple[int, int]]:
        labels = set(self.rule.labels)
        return [(e.start_char, e.end_char) for e in self.nlp(text).ents
                if e.label_ in labels and self.allowed(e.text)]


def _remember(memo: dict[str, bool], value: str, answer: bool) -> None:
    """Memoize a rule's answer for a value, bounded: hostile text has unbounded values."""
    if len(memo) >= VERDICTS_MAX:
        memo.clear()
    memo[value] = answer


def _lower_same_length(text: str) -> str:
    """``text`` lowercased, one character for one (İ lowercases to two: an i and a combining
    dot, which shifted every offset after it), with İ, ı and the long s as i, i and s, as
    `regex` ignores case."""
    lowered = text.lower()
    if len(lowered) != len(text) or "\u0131" in lowered or "\u017f" in lowered:
        lowered = text.translate(_FOLD_SAME_LENGTH).lower()  # rare: translate is 10x slower
    return lowered


_FOLD_SAME_LENGTH = {0x130: "i", 0x131: "i", 0x17F: "s"}


def _glued(text: str, i: int) -> bool:
    return 0 <= i < len(text) and text[i].isalnum()


def _compile(source: str, flags: int, field_name: str, pack: str, rule_id: str,
             path: str | None = None) -> regex.Pattern[str]:
    try:
        return regex.compile(source, flags)
    except (regex.error, RecursionError, OverflowError) as exc:
        raise PackError(f"invalid regex: {exc}", pack=pack, rule=rule_id, field=field_name,
                        path=path) from None


def _re2_source(rule: RegexRule, *, unicode: bool = False) -> str | None:
    """The pattern relaxed for RE2, or None when RE2 could disagree with `regex`.

    Relaxing only ever widens what matches: lookarounds and ``$`` are dropped, possessive
    quantifiers and atomic groups become ordinary ones, large repetition bounds become open.
    So "RE2 finds no match" still proves that `regex` finds none: on ASCII text for the plain
    form, on any text for the ``unicode`` form (see ``relax``). Verbose mode is left to `regex`.
    """
    if "verbose" in rule.flags:
        return None
    relaxed = relax(without_g(widen_backreferences(rule.pattern)), unicode=unicode,
                    ignorecase="ignorecase" in rule.flags)
    if relaxed is None:
        return None
    relaxed = drop_leading_optional(relaxed)
    inline = "".join(INLINE_FLAGS[f] for f in rule.flags)
    return f"(?{inline}){relaxed}" if inline else relaxed




_NLP_CACHE: dict[str, Any] = {}


def _load_spacy(rule: EntityRule, pack: str) -> Any | None:
    if rule.model in _NLP_CACHE:
        return _NLP_CACHE[rule.model]
    try:
        import spacy
    except ImportError:
        if rule.optional:
            return None
        raise PackError("entity rules need spaCy: pip install 'literal-firewall[spacy]' "
                        "(or mark the rule optional: true)", pack=pack, rule=rule.id,
                        field="kind") from None
    try:
        nlp = spacy.load(rule.model, disable=["parser", "lemmatizer", "tagger"])
    except OSError:
        if rule.optional:
            return None
        raise PackError(f"spaCy pipeline {rule.model!r} is not installed: python -m spacy "
                        f"download {rule.model} (or mark the rule optional: true)",
                        pack=pack, rule=rule.id, field="model") from None
    _NLP_CACHE[rule.model] = nlp
    return nlp


@dataclass(eq=False)
class CompiledNoise:
    """A pack's noise pattern: ``spans(text)`` are stretches whose literals are dropped."""

    qid: str  # "pack/noise-id"
    pattern: regex.Pattern[str]
    keywords: tuple[str, ...] = ()
    re2_source: str | None = None  # widened for RE2 as a rule's (``_re2_source``), or None
    re2_unicode_source: str | None = None  # the same, widened for non-ASCII text
    # as a rule's: RE2 skips where no match can start (noise runs on most texts with literals)
    _locator: Locator | None | object = field(default=_UNBUILT, repr=False)

    def spans(self, text: str, lowered: str, timeout: float,
              data: bytes | None = None) -> list[tuple[int, int]]:
        """Raises TimeoutError (the caller keeps every literal: noise fails closed).
        ``data``: ``text`` as ASCII bytes, as for ``CompiledRegex.find``."""
        if self.keywords and not any(k in lowered for k in self.keywords):
            return []
        locator = self.locator
        matches = self.pattern.finditer(text, timeout=timeout) if locator is None else \
            locator.finditer(self.pattern, text, data, timeout)
        return [m.span() for m in matches if m.end() > m.start()]

    @property
    def locator(self) -> Locator | None:
        if self._locator is _UNBUILT:
            self._locator = build_locator(self.pattern.pattern, self.pattern.flags, self.pattern)
        return self._locator  # type: ignore[return-value]


def covered(spans: list[tuple[int, int]]):
    """``inside(start, end)``: does the union of ``spans`` cover ``start..end``? One sort of the
    spans, then a bisection per question."""
    merged: list[list[int]] = []  # the union, as disjoint sorted stretches
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = [s for s, _ in merged]

    def inside(start: int, end: int) -> bool:
        i = bisect.bisect_right(starts, start) - 1
        return i >= 0 and end <= merged[i][1]
    return inside


def compile_noise(pack: Pack) -> list[CompiledNoise]:
    compiled = []
    for owner, noise in zip(pack.noise_owners, pack.noise):
        flags = 0
        for name in noise.flags:
            flags |= FLAGS[name]
        compiled.append(CompiledNoise(
            f"{owner}/{noise.id}",
            _compile(noise.pattern, flags, "pattern", owner, f"noise/{noise.id}", pack.path),
            tuple(k.lower() for k in noise.keywords), _re2_source(noise),
            _re2_source(noise, unicode=True)))
    return compiled


def compile_pack(pack: Pack) -> list[CompiledRule]:
    """Compile every rule of a loaded pack; optional entity rules without spaCy are left out."""
    compiled: list[CompiledRule] = []
    allow_by_qid: dict[str, dict[str, tuple[regex.Pattern[str], ...]]] = {}
    for owner, rule in zip(pack.owners, pack.rules):
        qid = f"{owner}/{rule.id}"
        allow = allow_by_qid[qid] = {
            name: tuple(_compile(p, 0, f"allowlist.{name}", owner, rule.id, pack.path)
                        for p in getattr(rule.allowlist, name))
            for name in ALLOWLIST_REGEX_FIELDS}
        if isinstance(rule, RegexRule):
            flags = 0
            for name in rule.flags:
                flags |= FLAGS[name]
            compiled.append(CompiledRegex(
                qid, owner, rule, path=pack.path,
                keywords=tuple(fold_case(k) for k in rule.keywords),
                checksum=CHECKSUMS.get(rule.checksum) if rule.checksum else None,
                requires=tuple(REQUIRES[name] for name in rule.requires),
                re2_source=_re2_source(rule),
                re2_unicode_source=_re2_source(rule, unicode=True), flags=flags,
                entropy=rule.entropy, allow_match=allow["match_regexes"],
                allow_line=allow["line_regexes"]))
        elif isinstance(rule, TermsRule):
            automaton = ahocorasick.Automaton()
            for term in rule.terms:
                key = _lower_same_length(term) if rule.ignore_case else term
                if key:
                    automaton.add_word(key, len(key))
            automaton.make_automaton()
            compiled.append(CompiledTerms(qid, owner, rule, automaton=automaton,
                                          ignore_case=rule.ignore_case,
                                          whole_word=rule.whole_word))
        elif isinstance(rule, JsonKeyRule):
            keys = "|".join(fnmatch.translate(k) for k in rule.keys)
            if rule.exclude_keys:
                excluded = "|".join(fnmatch.translate(k) for k in rule.exclude_keys)
                keys = f"(?!(?:{excluded}))(?:{keys})"
            compiled.append(CompiledJsonKey(
                qid, owner, rule, key_pattern=regex.compile(keys),
                value_pattern=_compile(rule.value_pattern, 0, "value_pattern", owner, rule.id,
                                                     pack.path) if rule.value_pattern else None))
        elif isinstance(rule, EntityRule):
            nlp = _load_spacy(rule, owner)
            if nlp is not None:
                compiled.append(CompiledEntity(qid, owner, rule, nlp=nlp))
    for compiled_rule in compiled:
        allow = allow_by_qid[compiled_rule.qid]
        compiled_rule.set_allowlist(allow["patterns"], allow["regexes"])
    return compiled


_GLOBAL_SYNTAX = regex.compile(r"\(\?[a-zA-Z]+\)|\\\d|\(\?P?[<=(]|\(\?\|")


def _alternation(patterns: tuple[regex.Pattern[str], ...]) -> regex.Pattern[str] | None:
    """One pattern fullmatching what any of ``patterns`` fullmatches (the only one itself), or
    None when joining could change a meaning (global inline flags, group references,
    conditionals)."""
    if len(patterns) == 1:
        return patterns[0]
    if not patterns or any(p.flags & ~regex.UNICODE & ~regex.VERSION0 or
                                _GLOBAL_SYNTAX.search(p.pattern) for p in patterns):
        return None
    try:
        return regex.compile("|".join(f"(?:{p.pattern})" for p in patterns))
    except regex.error:
        return None
