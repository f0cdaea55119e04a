"""Which regex rules can possibly match a text, decided in one or two linear passes.

A prefilter may only narrow the set of rules `regex` runs; it never decides a result. Two
stages: gitleaks-style keywords (Aho-Corasick over the lowercased text) and, for ASCII text,
an RE2 ``Set`` of every eligible pattern, which reports in one pass which patterns match
anywhere. RE2 and `regex` agree on ASCII text for the patterns we hand RE2 (see
``compiled._re2_source``); other texts and ineligible patterns go straight to `regex`.
"""

from __future__ import annotations

from collections.abc import Sequence

import ahocorasick
import regex

from .compiled import CompiledRegex

try:  # google-re2 is a core dependency; without it the prefilter is keywords only
    import re2
except ImportError:  # pragma: no cover - exercised only on platforms without a wheel
    re2 = None

# \s in `regex` includes \v and \x1c-\x1f; in RE2 it does not, so such text skips RE2.
_RE2_UNSAFE = regex.compile(r"[\x0b\x1c-\x1f]")


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
        self._set, self._set_members, self._outside_set = self._build_set(rules)

    @staticmethod
    def _build_set(rules: Sequence[CompiledRegex]):
        if re2 is None:
            return None, [], frozenset(range(len(rules)))
        options = re2.Options()
        options.log_errors = False
        options.max_mem = 64 << 20
        rule_set = re2.Set.SearchSet(options)
        members, outside = [], set()
        for i, rule in enumerate(rules):
            try:
                if rule.re2_source is None:
                    raise ValueError
                rule_set.Add(rule.re2_source)
                members.append(i)
            except Exception:  # RE2 lacks lookaround, backreferences, atomic groups...
                outside.add(i)
        if not members:
            return None, [], frozenset(range(len(rules)))
        try:
            rule_set.Compile()  # returns None; failure raises
        except Exception:
            return None, [], frozenset(range(len(rules)))
        return rule_set, members, frozenset(outside)

    def candidates(self, text: str) -> list[int]:
        """Indices of the rules worth running on ``text``, ascending."""
        allowed = set(self._unkeyed)
        if self._keywords is not None:
            for _, indices in self._keywords.iter(text.lower()):
                allowed |= indices
        if not allowed:
            return []
        if self._set is not None and text.isascii() and not _RE2_UNSAFE.search(text):
            hits = {self._set_members[j] for j in self._set.Match(text) or ()}  # None: no match
            allowed &= hits | self._outside_set
        return sorted(allowed)
