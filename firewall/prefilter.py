"""Which regex rules can possibly match a text, decided in one or two linear passes.

A prefilter may only narrow the set of rules `regex` runs; it never decides a result. Two
stages: gitleaks-style keywords (Aho-Corasick over the lowercased text) and an RE2 ``Set`` of
every eligible pattern, which reports in one pass which patterns match anywhere. The patterns
handed to RE2 are widened (``compiled.relax``) so that RE2 finding no match proves `regex`
finds none: the plain form on ASCII text, the ``unicode`` form (every shorthand and class also
matching any non-ASCII character) on other text. Ineligible patterns go straight to `regex`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import ahocorasick

from .compiled import CompiledRegex

try:  # google-re2 is a core dependency; without it the prefilter is keywords only
    import re2
except ImportError:  # pragma: no cover - exercised only on platforms without a wheel
    re2 = None

# \s in `regex` includes \v and \x1c-\x1f; in RE2 it does not, so such text skips RE2.
_UNSAFE_CHARS = "\x0b\x1c\x1d\x1e\x1f"  # each tested with ``in`` (a memchr)
# On ASCII text this long, the rules' RE2 set runs as several smaller sets (CHUNK sources each).
# One set's DFA tracks every pattern at once, so text full of fresh IDs keeps making it build
# new states; smaller sets build far fewer (a 4 KB turn of new IDs: ~160 us -> ~70 us). Shorter
# texts cost one call per set and gain less, and text scanned again favours the one set's warm
# DFA, so they keep the single set (benchmarks/README.md, incremental extraction).
LONG_TEXT = 2048
CHUNK = 32


def ascii_bytes(text: str) -> bytes | None:
    """``text`` as bytes if RE2's plain (ASCII) patterns agree with `regex` on it, else None."""
    if text.isascii() and not any(c in text for c in _UNSAFE_CHARS):
        return text.encode("ascii")
    return None


def _keyword_source(keywords: Sequence[str]) -> str | None:
    """An RE2 pattern matching ASCII text whose lowercase holds one of ``keywords`` (given in
    lowercase); keywords that are not ASCII cannot occur in it and are left out."""
    usable = sorted({k for k in keywords if k and k.isascii()})
    if not usable:
        return None
    return "(?i)(?:" + "|".join("".join(f"\\x{ord(c):02x}" for c in k) for k in usable) + ")"


class Prefilter:
    def __init__(self, rules: Sequence[CompiledRegex]) -> None:
        self.size = len(rules)
        self._unkeyed = frozenset(i for i, r in enumerate(rules) if not r.keywords)
        self._keywords = None
        if len(self._unkeyed) < len(rules):
            automaton = ahocorasick.Automaton()
            for i, rule in enumerate(rules):
                for keyword in rule.keywords:
                    if automaton.exists(keyword):
                        automaton.get(keyword).add(i)
                    else:
                        automaton.add_word(keyword, {i})
            automaton.make_automaton()
            self._keywords = automaton
        self._rules = rules  # the sets below that are not always needed are built on first use
        self._set, self._set_members, self._outside_set = self._build_set(
            [r.re2_source for r in rules])
        # ASCII text: the keywords too, in the same RE2 pass (the Aho-Corasick walk yields
        # every hit to Python, and one-character keywords like "-" or "/" hit constantly)
        self._aset, self._aset_members, _ = self._build_set(
            [r.re2_source for r in rules] + [_keyword_source(r.keywords) for r in rules])
        if self._aset is not None and \
                [i for i in self._aset_members if i < self.size] != self._set_members:
            self._aset = None  # patterns left out differ from the pattern-only set's: two stages

    @functools.cached_property
    def _unicode_set(self):
        """The widened patterns, for non-ASCII text (built the first time one comes)."""
        return self._build_set([r.re2_unicode_source for r in self._rules])

    @functools.cached_property
    def _chunks(self) -> list[tuple[object, list[int]]]:
        """The ASCII set's sources in chunks, each rule's pattern next to its keywords (built
        the first time a long text comes)."""
        if self._aset is None:
            return []
        rules, chunks = self._rules, []
        members = sorted(self._aset_members, key=lambda m: (m % self.size, m))
        for start in range(0, len(members), CHUNK):
            part = members[start:start + CHUNK]
            rule_set, built, _ = self._build_set(
                [rules[m].re2_source if m < self.size else
                 _keyword_source(rules[m - self.size].keywords) for m in part])
            if rule_set is None or len(built) != len(part):
                return []
            chunks.append((rule_set, part))
        return chunks

    @staticmethod
    def _build_set(sources: Sequence[str | None]):
        if re2 is None:
            return None, [], frozenset(range(len(sources)))
        options = re2.Options()
        options.log_errors = False
        options.max_mem = 64 << 20
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
        if not members:
            return None, [], frozenset(range(len(sources)))
        try:
            rule_set.Compile()  # returns None; failure raises
        except Exception:
            return None, [], frozenset(range(len(sources)))
        return rule_set, members, frozenset(outside)

    def candidates(self, text: str, ascii_data: bytes | None | bool = False) -> list[int]:
        """Indices of the rules worth running on ``text``, ascending. ``ascii_data``: what
        ``ascii_bytes(text)`` returned, if the caller has it already."""
        if ascii_data is False:
            ascii_data = ascii_bytes(text)
        if ascii_data is not None and self._aset is not None:
            # members [0, size): a rule's pattern may match; [size, ...): one of its keywords
            # occurs (case-insensitively on ASCII text: in the lowercased text)
            size = self.size
            matched, keyed = set(self._outside_set), set(self._unkeyed)
            sets = self._chunks if len(ascii_data) >= LONG_TEXT and self._chunks else \
                ((self._aset, self._aset_members),)
            for rule_set, members in sets:
                for j in rule_set.Match(ascii_data) or ():
                    rule = members[j]
                    if rule < size:
                        matched.add(rule)
                    else:
                        keyed.add(rule - size)
            return sorted(matched & keyed)
        allowed = set(self._unkeyed)
        if self._keywords is not None:
            for _, indices in self._keywords.iter(text.lower()):
                allowed |= indices
        if not allowed:
            return []
        if ascii_data is False:
            ascii_data = ascii_bytes(text)
        if ascii_data is not None:
            rule_set, members, outside, data = (self._set, self._set_members,
                                                self._outside_set, ascii_data)
        else:  # the widened patterns, on the UTF-8 bytes
            rule_set, members, outside = self._unicode_set
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: `regex` alone decides
                rule_set = None
        if rule_set is not None:
            hits = {members[j] for j in rule_set.Match(data) or ()}  # None: no match
            allowed &= hits | outside
        return sorted(allowed)
