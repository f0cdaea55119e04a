"""Which regex rules can possibly match a text, decided in a few linear passes.

A prefilter may only narrow the set of rules `regex` runs; it never decides a result. Two
stages. First the gitleaks-style keywords: one RE2 ``Set`` of every rule's keywords on ASCII
text, Aho-Corasick over the case-folded text elsewhere (``regex_syntax.fold_case``: as `regex`
ignores case, İ holds an i). Then the rules' own patterns, in small RE2 sets (groups), each
reporting in one pass which of its patterns match anywhere; a group is only run when one of
its rules survived the keyword stage. The patterns handed to RE2 are
widened (``regex_syntax.relax``) so that RE2 finding no match proves `regex` finds none: the plain
form on ASCII text, the ``unicode`` form (every shorthand and class also matching any non-ASCII
character) on other text. Ineligible patterns go straight to `regex`. With Hyperscan installed
(``multimatch``), once its database is ready one pass answers for every rule's pattern and
keywords at once, and the RE2 sets serve only what the database lacks.

Why groups: one RE2 set's DFA tracks every pattern at once, so over real text it keeps building
states for combinations of partial matches; with a hundred patterns those fill its memory
budget and it ends up building a state at nearly every byte (several times slower than the
same patterns in groups, and a few hundred MiB of cache per process). Rules without keywords
come first, then keyed rules by the length of their shortest keyword: short keywords occur
often, long ones rarely, so the groups of rare keywords (most secret formats) are skipped on
most texts (benchmarks/README.md, extraction CPU).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import ahocorasick
import regex

from . import multimatch
from .compiled import CompiledRegex
from .regex_syntax import _NON_ASCII, fold_case

try:  # google-re2 is a core dependency; without it the prefilter is keywords only
    import re2
except ImportError:  # pragma: no cover - exercised only on platforms without a wheel
    re2 = None

# \s in `regex` includes \v and \x1c-\x1f; in RE2 it does not, so such text skips RE2.
_UNSAFE_CHARS = "\x0b\x1c\x1d\x1e\x1f"  # each tested with ``in`` (a memchr)
GROUP_SIZE = 16  # patterns per RE2 set
# beside a Hyperscan database, the few rules it lacks get one RE2 set each: only the rules whose
# keywords occur run, and a set of one builds a small DFA (a cold scan of non-ASCII text spent
# three times as long in sets of 16)
UNJUDGED_GROUP_SIZE = 1
SET_MEMORY = 16 << 20  # each set's RE2 budget (program and DFA cache)
# text a prefilter judges before it asks for its Hyperscan databases: a short-lived extractor
# (a pack's examples checked, a test, a one-line scan) never starts a compile; a session does
MULTIMATCH_AFTER = 256_000  # characters


def ascii_bytes(text: str) -> bytes | None:
    """``text`` as bytes if RE2's plain (ASCII) patterns agree with `regex` on it, else None."""
    if text.isascii() and not any(c in text for c in _UNSAFE_CHARS):
        return text.encode("ascii")
    return None


def _keyword_source(keywords: Sequence[str]) -> str | None:
    """An RE2 pattern matching ASCII text whose lowercase holds one of ``keywords`` (given
    case-folded); keywords that are not ASCII cannot occur in it and are left out."""
    usable = sorted({k for k in keywords if k and k.isascii()})
    if not usable:
        return None
    return "(?i)(?:" + "|".join("".join(f"\\x{ord(c):02x}" for c in k) for k in usable) + ")"


class _Group(NamedTuple):
    rule_set: object  # an RE2 Set of the patterns of ``rules``
    rules: tuple[int, ...]  # the set's members, in order: rule indices
    members: frozenset[int]


class _Patterns(NamedTuple):
    groups: list[_Group]
    outside: frozenset[int]  # rules RE2 cannot judge: always offered to `regex`


class Prefilter:
    def __init__(self, rules: Sequence[CompiledRegex]) -> None:
        self.size = len(rules)
        self._rules = rules
        self._unkeyed = frozenset(i for i, r in enumerate(rules) if not r.keywords)
        self._automaton = None
        self._wide_keywords = None  # the keywords that are not ASCII (see _keyed)
        self._keyword_set: tuple[object, list[int]] | None = None
        if len(self._unkeyed) < len(rules):
            automaton = ahocorasick.Automaton()
            for i, rule in enumerate(rules):
                for keyword in rule.keywords:
                    if automaton.exists(keyword):
                        automaton.get(keyword).add(i)
                    else:
                        automaton.add_word(keyword, {i})
            automaton.make_automaton()
            self._automaton = automaton
            # non-ASCII text: the keyword set on the UTF-8 bytes of the folded text, and an
            # automaton of only the keywords that are not ASCII (they hit rarely); the full
            # automaton yields every hit to Python (`-`, `/`...) and cost several times more
            wide = ahocorasick.Automaton()
            for i, rule in enumerate(rules):
                for keyword in rule.keywords:
                    if keyword and not keyword.isascii():
                        if wide.exists(keyword):
                            wide.get(keyword).add(i)
                        else:
                            wide.add_word(keyword, {i})
            if len(wide):
                wide.make_automaton()
            self._wide_keywords = wide if len(wide) else None
            # ASCII text: one RE2 pass instead of the automaton, which yields every hit to
            # Python (and one-character keywords like "-" or "/" hit constantly)
            sources = [_keyword_source(r.keywords) for r in rules]
            keyword_set, members, outside = _build_set(sources)
            if keyword_set is not None and not any(sources[i] is not None for i in outside):
                self._keyword_set = (keyword_set, members)
        self._ascii = self._patterns([r.re2_source for r in rules])
        self._seen = 0  # characters of text seen before the databases are requested
        # per form (ASCII, unicode): the multimatch key (False: not requested yet), database
        self._multi_key: list[str | None | bool] = [False, False]
        self._multi: list[tuple[Any, ...] | None] = [None, None]

    def wait_multimatch(self, timeout: float | None = None) -> bool:
        """Ask for the Hyperscan databases now and wait until they are ready (benchmarks,
        tests); False when there is none (no Hyperscan, no cache, or nothing it could hold)."""
        self._seen = max(self._seen, MULTIMATCH_AFTER)
        for unicode in (False, True):
            self._multimatch(unicode)
            key = self._multi_key[unicode]
            if isinstance(key, str):
                multimatch.wait(key, timeout)
        return self._multimatch(False) is not None

    def _multimatch(self, unicode: bool = False, chars: int = 0) -> tuple[Any, ...] | None:
        """The Hyperscan database of the ASCII patterns and keywords (``unicode``: the widened
        patterns, for the UTF-8 bytes of other text) once it is ready (see ``multimatch``),
        with the rules it cannot judge: (database, rules whose pattern it lacks, rules that
        pass without a keyword hit: unkeyed ones and those whose keywords it lacks, the RE2
        sets of the rules it lacks for ``unicode``). ``chars``: the length of the text about
        to be judged."""
        multi = self._multi[unicode]
        if multi is not None:
            return multi
        key = self._multi_key[unicode]
        if key is False:
            self._seen += chars
            if self._seen < MULTIMATCH_AFTER:
                return None
            # only the patterns an RE2 set holds: RE2 accepting one vouches for its syntax
            patterns = self._unicode if unicode else self._ascii
            held = {i for group in patterns.groups for i in group.rules}
            if unicode:
                sources = [r.re2_unicode_source if i in held and
                           _plain_unicode(r.re2_unicode_source) else None
                           for i, r in enumerate(self._rules)]
                key = multimatch.request(sources, [() for _ in self._rules], utf8=True)
            else:
                sources = [r.re2_source if i in held else None
                           for i, r in enumerate(self._rules)]
                key = multimatch.request(sources, [r.keywords for r in self._rules])
            self._multi_key[unicode] = key
        if key is None:
            return None
        database = multimatch.ready(key)
        if database is None:
            return None
        size, members = self.size, database.members
        unjudged = frozenset(i for i in range(size) if i not in members)
        multi = self._multi[unicode] = (
            database, unjudged,
            self._unkeyed.union(i for i in range(size) if size + i not in members),
            # the RE2 sets of only the rules the database lacks (unicode: they run beside it)
            self._patterns([r.re2_unicode_source if i in unjudged else None
                            for i, r in enumerate(self._rules)], UNJUDGED_GROUP_SIZE)
            if unicode else None)
        return multi

    @functools.cached_property
    def _unicode(self) -> _Patterns:
        """The widened patterns, for non-ASCII text (built the first time one comes)."""
        return self._patterns([r.re2_unicode_source for r in self._rules])

    def _patterns(self, sources: Sequence[str | None], size: int = GROUP_SIZE) -> _Patterns:
        def order(i: int) -> tuple[int, int]:
            keywords = self._rules[i].keywords
            return (min(map(len, keywords)) if keywords else 0), i

        eligible = sorted((i for i, s in enumerate(sources) if s is not None), key=order)
        groups, outside = [], {i for i, s in enumerate(sources) if s is None}
        for start in range(0, len(eligible), size):
            part = eligible[start:start + size]
            rule_set, members, left_out = _build_set([sources[i] for i in part])
            outside.update(part[j] for j in left_out)
            if rule_set is not None:
                rules = tuple(part[j] for j in members)
                groups.append(_Group(rule_set, rules, frozenset(rules)))
        return _Patterns(groups, frozenset(outside))

    def candidates(self, text: str, ascii_data: bytes | None | bool = False,
                   among: frozenset[int] | None = None) -> list[int]:
        """Indices of the rules worth running on ``text``, ascending; ``among``: only these
        (one role's). ``ascii_data``: what ``ascii_bytes(text)`` returned, if the caller has it
        already."""
        if ascii_data is False:
            ascii_data = ascii_bytes(text)
        if ascii_data is not None:
            multi = self._multimatch(False, len(text))
            if multi is not None:  # one Hyperscan pass for every pattern and keyword
                database, unjudged, unkeyed, _ = multi
                patterns, keyed = database.matched(ascii_data)
                allowed = (keyed | unkeyed) & (patterns | unjudged)
                if among is not None:
                    allowed &= among
                return sorted(allowed)
        allowed = self._keyed(text, ascii_data)
        if among is not None:
            allowed &= among
        if not allowed:
            return []
        unjudged: frozenset[int] | None = None  # the rules only the RE2 sets can judge
        if ascii_data is not None:
            patterns, data = self._ascii, ascii_data
        else:  # the widened patterns, on the UTF-8 bytes
            patterns = self._unicode
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: `regex` alone decides
                return sorted(allowed)
            multi = self._multimatch(True, len(text))
            if multi is not None:
                database, unjudged, _, patterns = multi
                found, _ = database.matched(data)
        if unjudged is None:
            matched = set(patterns.outside)
        else:  # the database's answer, and the RE2 sets' for the rules it lacks
            matched = found | (patterns.outside & unjudged)
        for group in patterns.groups:
            if not group.members.isdisjoint(allowed):
                rules = group.rules
                matched.update(rules[j] for j in group.rule_set.Match(data) or ())  # None: none
        return sorted(allowed & matched)

    def _keyed(self, text: str, ascii_data: bytes | None) -> set[int]:
        """The rules without keywords, and those with a keyword in ``text`` (case-folded as the
        keywords are: ``fold_case``)."""
        allowed = set(self._unkeyed)
        if self._automaton is None:
            return allowed
        if ascii_data is not None and self._keyword_set is not None:
            keyword_set, members = self._keyword_set
            allowed.update(members[j] for j in keyword_set.Match(ascii_data) or ())
            return allowed
        folded = fold_case(text)
        if self._keyword_set is not None:
            try:
                data = folded.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: the whole automaton
                data = None
            if data is not None:
                # an ASCII keyword occurs in the folded text iff its bytes occur in these
                # (UTF-8 never encodes other characters with ASCII bytes); RE2's own (?i)
                # only adds matches
                keyword_set, members = self._keyword_set
                allowed.update(members[j] for j in keyword_set.Match(data) or ())
                if self._wide_keywords is not None:
                    for _, indices in self._wide_keywords.iter(folded):
                        allowed |= indices
                return allowed
        for _, indices in self._automaton.iter(folded):
            allowed |= indices
        return allowed


class PatternGate:
    """Which of a few patterns (widened for RE2, None: not eligible) can match an ASCII text,
    in one pass of one RE2 set: the indices of every pattern it cannot rule out."""

    def __init__(self, sources: Sequence[str | None]) -> None:
        self._set, self._members, outside = _build_set(sources)
        self._outside = frozenset(outside)

    def possible(self, data: bytes) -> frozenset[int] | set[int]:
        """``data``: ``ascii_bytes`` of the text (not None)."""
        if self._set is None:
            return self._outside
        members = self._members
        return self._outside.union(members[j] for j in self._set.Match(data) or ())


def _plain_unicode(source: str | None) -> bool:
    """Does Hyperscan read this widened pattern as RE2 does on UTF-8? Not when it ignores
    case (RE2 and `regex` fold beyond ASCII: the Kelvin sign is a ``k``), names non-ASCII
    characters or Unicode properties."""
    if source is None:
        return False
    rest = source.replace(_NON_ASCII_RANGE, "")
    return rest.isascii() and _CASELESS.search(rest) is None and not any(
        escape in rest for escape in ("\\p", "\\P", "\\N", "\\u", "\\U", "\\x{"))


_NON_ASCII_RANGE = _NON_ASCII  # what ``relax`` adds to widen a class
_CASELESS = regex.compile(r"\(\?[a-zA-Z-]*i")  # an inline flag group that sets ``i``


def _build_set(sources: Sequence[str | None]) -> tuple[object | None, list[int], set[int]]:
    """An RE2 set of ``sources``, the indices it holds, and those it cannot (None sources,
    syntax RE2 lacks: lookaround, backreferences...); no set when it holds none."""
    if re2 is None:
        return None, [], set(range(len(sources)))
    options = re2.Options()
    options.log_errors = False
    options.max_mem = SET_MEMORY
    rule_set = re2.Set.SearchSet(options)
    members, outside = [], set()
    for i, source in enumerate(sources):
        try:
            if source is None:
                raise ValueError
            rule_set.Add(source)
            members.append(i)
        except Exception:  # RE2 lacks lookaround, backreferences, atomic groups...
            outside.add(i)
    if members:
        try:
            rule_set.Compile()  # returns None; failure raises
            return rule_set, members, outside
        except Exception:
            pass
    return None, [], set(range(len(sources)))
