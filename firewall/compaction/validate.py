"""Summary validator: is every required literal in the summary byte-for-byte, and if not, did the
summarizer write a near miss that a reader would take for it?

Each required literal gets one of three statuses (every other *known* literal can only be
reported ``mutated``: a summary that writes a wrong copy of any real value is wrong, whether or
not it had to carry that value):

``present``
    its exact bytes occur in the summary, not glued to a letter or digit on a side where the
    literal itself starts or ends with one (``#W2378156`` inside ``#W23781567`` is a digit added,
    not the literal).
``mutated``
    a span of the summary resembles it: look-alike characters (NFKC, dashes, zero-width and format
    characters, Cyrillic/Greek homoglyphs), changed case, changed separators, an edit of one or two
    characters (adjacent transposition counted once), truncation, or the prefix and suffix kept
    around a changed or elided middle. One finding per offending span, carrying the span.
``missing``
    neither.

Decisions:

* A literal that is present *and* has a near miss elsewhere gets a ``present`` finding and a
  ``mutated`` finding per near miss, and the verdict is not ``ok``: a confabulated copy next to the
  right one still misleads, and the re-ask can name the exact span to fix.
* ``known`` (the whole ledger) are real values too. A span equal to a known value is never a
  mutation of another, and a span is attributed only to the value(s) it resembles *best*, so a
  look-alike of a known neighbour is not reported as an edit of a required literal. A near miss
  of a known value that is not required is a ``mutated`` finding with ``required=False``: it
  fails the verdict all the same.
* ``source`` (the texts the summary summarizes) holds real strings too: a span that occurs in it
  as a whole token (``decode_ascii`` beside ``encode_ascii``, a directory ``src/pkg/`` beside the
  file ``src/pkg/a.py``) is copied, not mutated. A prefix of a longer source token
  (``src/a.ts`` of ``src/a.ts:142``) is not a whole token, so a truncation is still caught.
* Literals are case-sensitive (the design default). Plain-word literals (letters and spaces only)
  and literals shorter than 4 characters are matched only exactly or through normalisation, and
  plain words are never case-folded: ``us`` is not a mutation of ``US``. A code of 5 or more
  capitals and digits (``SDZQKO``, a booking reference) is an identifier, not a word: its case
  changes and small edits count. Pure-digit literals need 6
  digits before edits and truncations count, so prices, years and counts are left alone.
* A separator inserted between two digits makes a different kind of number (``447.19``,
  ``44,719``), so a candidate with more digit-separator-digit junctions than the literal never
  matches.
* Edits are searched on single tokens; separator and look-alike changes also across up to
  ``WINDOW_TOKENS`` (12) whitespace- or dash-separated tokens (``INV 2025 08 44719``). An edit
  combined with a split into several tokens is not detected.

Cost: exact ``str.find`` per literal, one tokenisation pass, dictionary/bisect lookups for
normalised windows, and bounded Damerau-Levenshtein only on identifier-like tokens against
literals sharing a 3-character head or tail, or both ends. Per-string forms and the
index over the known values are cached across calls (a guard re-validates against the same ledger).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal as TypingLiteral

from ..extraction.confusables import HOMOGLYPHS
from ..extraction.unspaced import has_unspaced, spaced, word_char

__all__ = ["Finding", "Verdict", "validate", "occurs", "REASONS"]

Status = TypingLiteral["present", "missing", "mutated"]

REASONS = (
    "look-alike characters",
    "case changed",
    "separator changed",
    "transposed digits",
    "transposed characters",
    "truncated",
    "edited",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """What the summary did with one required literal (or, for ``mutated``, one offending span,
    also of a known literal that was not required: then ``required`` is false).

    ``span`` is a pair of character offsets into the summary: the first exact occurrence for
    ``present``, the near miss for ``mutated`` (then ``resembles == summary[start:end]``), ``None``
    for ``missing``. ``reason`` is one of :data:`REASONS`, for mutations only.
    """

    value: str
    rule: str | None
    status: Status
    span: tuple[int, int] | None = None
    resembles: str | None = None
    reason: str | None = None
    required: bool = True  # False: a known literal the summary need not carry, written wrong

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["span"] = list(self.span) if self.span else None
        return d


@dataclass(frozen=True, slots=True)
class Verdict:
    """All findings, in the order of the required literals (then by position in the summary)."""

    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True when every required literal is present and no span mutates a known literal."""
        return all(f.status == "present" for f in self.findings)

    @property
    def present(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "present")

    @property
    def missing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "missing")

    @property
    def mutated(self) -> tuple[Finding, ...]:
        """Every offending span; a literal may also be in :attr:`present` (a wrong copy beside it)."""
        return tuple(f for f in self.findings if f.status == "mutated")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [f.to_dict() for f in self.findings]}


# --- normalisation ------------------------------------------------------------------------------

_DASHES = "\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u2e17\u2e1a" \
          "\u2e3a\u2e3b\u2e40\u301c\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d\u02d7\u2796"
# Invisible format characters (Unicode category Cf) that can sit inside a token unseen.
_INVISIBLE = "\u00ad\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e" \
             "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
_FOLD = str.maketrans({**dict.fromkeys(_DASHES, "-"), **dict.fromkeys(_INVISIBLE), **HOMOGLYPHS})

_SEP_CHARS = r"\-_./\\:#@"
_SEP_RUN = re.compile(rf"[\s{_SEP_CHARS}]+")
_JUNCTION = re.compile(rf"\d[\s{_SEP_CHARS}]+(?=\d)")
_IDLIKE = re.compile(rf"\d|[{_SEP_CHARS}]|[a-z][A-Z]")
_CODE = re.compile(r"[A-Z0-9]{5,}")  # SDZQKO: a booking reference, not a word
_HEXLIKE = re.compile(r"[0-9a-f-]{16,}")
_HEX = re.compile(r"[0-9a-f]+")

# Normalised windows join at most this many tokens: "a few" (an IBAN written in groups is 6),
# and a bound, since each step costs the window's length (a literal of thousands of
# two-letter words would make every window of the summary span it: quadratic).
WINDOW_TOKENS = 12

# Tokens keep -_/.:#@ (and most other punctuation) inside; these split them.
_BREAKS = r"\s()\[\]{}<>\"'`‘’‚“”„«»‹›,;|!?=&*—―"
_TOKEN = re.compile(rf"[^{_BREAKS}]+")
TOKEN_BREAK = re.compile(rf"[{_BREAKS}]")  # what ends a token (a summarizer cuts only there)
_STRIP_HEAD = ":…"
_STRIP_TAIL = ".:…"


def _lookalike_fold(s: str) -> str:
    if s.isascii():  # NFKC and the fold table are no-ops on ASCII: the common case, kept cheap
        return s
    return unicodedata.normalize("NFKC", s.translate(_FOLD)).translate(_FOLD)


@dataclass(frozen=True, slots=True)
class _Form:
    """The comparison forms of one string (a literal or a summary span)."""

    raw: str
    l1: str  # look-alikes folded, case kept
    key: str  # l1, case-folded when ``idlike`` (identifiers are compared case-insensitively)
    flat: str  # key with separators removed
    flat1: str  # l1 with separators removed (case kept)
    seps: str  # the separators of key, in order
    junctions: int  # digit-separator-digit junctions in l1
    idlike: bool
    fuzzy: bool  # long and distinctive enough for edits and truncation to count
    hexlike: bool


@lru_cache(maxsize=16384)
def _form(s: str) -> _Form:
    l1 = _lookalike_fold(s)
    idlike = bool(_IDLIKE.search(l1) or _CODE.fullmatch(l1))
    key = l1.casefold() if idlike else l1
    flat = _SEP_RUN.sub("", key)
    flat1 = _SEP_RUN.sub("", l1)
    fuzzy = idlike and len(flat) >= 4 and not (flat.isdigit() and len(flat) < 6)
    seps = "".join(_SEP_RUN.findall(key))
    return _Form(s, l1, key, flat, flat1, seps, len(_JUNCTION.findall(l1)), idlike, fuzzy,
                 bool(_HEXLIKE.fullmatch(key)))


@dataclass(frozen=True, slots=True)
class _Index:
    values: frozenset[str]
    by_flat: dict[str, tuple[_Form, ...]]  # case-folded flat form -> targets
    flats: list[str]  # sorted keys of by_flat, to test "is a prefix of some target" by bisect
    by_key: dict[tuple[Any, ...], tuple[_Form, ...]]  # _fuzzy_keys -> fuzzy targets


def _fuzzy_keys(f: _Form) -> list[tuple[Any, ...]]:
    """Keys a literal is filed under; a near miss of each kind shares at least one with it.

    One edit leaves the first or the last three characters intact at a length within the
    threshold; a changed or elided middle keeps both ends; a truncation keeps one end. (Two edits
    that hit both ends are not searched for.)
    """
    n = len(f.flat)
    keys: list[tuple[Any, ...]] = [("h", f.flat[:3], n), ("t", f.flat[-3:], n),
                                   ("f", f.key[:3], f.key[-3:])]
    if len(f.key) >= 5:
        keys += [("p", f.key[:5]), ("x", f.key[-5:])]
    return keys


def _token_keys(f: _Form) -> list[tuple[Any, ...]]:
    n = len(f.flat)
    keys: list[tuple[Any, ...]] = [("f", f.key[:3], f.key[-3:]), ("p", f.key[:5]),
                                   ("x", f.key[-5:])]
    for m in range(max(n - 2, 1), n + 3):  # the edit threshold is at most 2
        keys += [("h", f.flat[:3], m), ("t", f.flat[-3:], m)]
    return keys


@lru_cache(maxsize=32)
def _index(values: tuple[str, ...]) -> _Index:
    by_flat: dict[str, list[_Form]] = {}
    by_key: dict[tuple[Any, ...], list[_Form]] = {}
    for v in values:
        f = _form(v)
        if f.flat:
            by_flat.setdefault(f.flat.casefold(), []).append(f)
        if f.fuzzy:
            for k in _fuzzy_keys(f):
                by_key.setdefault(k, []).append(f)
    return _Index(
        frozenset(values),
        {k: tuple(v) for k, v in by_flat.items()},
        sorted(by_flat),
        {k: tuple(v) for k, v in by_key.items()},
    )


# --- comparisons ---------------------------------------------------------------------------------

def _osa(a: str, b: str, k: int) -> int:
    """Optimal-string-alignment distance (adjacent transposition = 1), or k+1 once it exceeds k.

    Common affixes are stripped, then each remaining edit is branched on at the first mismatch:
    with k <= 2 that is a handful of slice comparisons instead of a dynamic-programming table,
    and unrelated pairs of a same-shaped family (INV-2025-08-xxxxx) fail after one strip.
    """
    i, n = 0, min(len(a), len(b))
    while i < n and a[i] == b[i]:
        i += 1
    j, n = 0, n - i
    while j < n and a[-1 - j] == b[-1 - j]:
        j += 1
    a, b = a[i:len(a) - j], b[i:len(b) - j]
    la, lb = len(a), len(b)
    if not la or not lb:
        return min(la or lb, k + 1)
    if k == 0 or abs(la - lb) > k:
        return k + 1
    swap = la > 1 and lb > 1 and a[0] == b[1] and a[1] == b[0]
    if k == 1:  # one edit left: a substitution, or an adjacent swap
        return 1 if (la == lb == 1 or (la == lb == 2 and swap)) else 2
    best = k + 1
    branches = [(a[1:], b[1:]), (a[1:], b), (a, b[1:])]
    if swap:
        branches.append((a[2:], b[2:]))
    for x, y in branches:
        best = min(best, 1 + _osa(x, y, k - 1))
    return best


def _edit_reason(a: str, b: str) -> str:
    """Name a small edit turning literal form ``b`` into summary form ``a``."""
    if len(a) < len(b) and (b.startswith(a) or b.endswith(a)):
        return "truncated"
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] \
                and a[diff[1]] == b[diff[0]]:
            return "transposed digits" if a[diff[0]].isdigit() and a[diff[1]].isdigit() \
                else "transposed characters"
    return "edited"


# Ranks order explanations from most to least certain; a span goes to the value(s) it
# resembles best.
_RANK = {"look-alike characters": 0, "case changed": 1, "separator changed": 2}


def _new_junctions(s: _Form, t: _Form) -> bool:
    """Does span ``s`` put separators between digits where literal ``t`` has none (447.19)?"""
    if s.seps == t.seps and len(s.flat) == len(t.flat):
        return False  # same layout (a UUID with a changed group): no new number formatting
    return s.junctions > t.junctions


def _normalised_match(raw: str, t: _Form) -> tuple[int, str] | None:
    """A span whose flat form equals the literal's: say which normalisation it took, if allowed."""
    s = _form(raw)
    if s.l1 == t.l1:
        return 0, "look-alike characters"
    if t.idlike and s.l1.casefold() == t.key:
        return 1, "case changed"
    if len(t.flat) < 4 or _new_junctions(s, t):
        return None  # short literals: only look-alikes and case; no new number formatting
    if (s.flat1.casefold() == t.flat) if t.idlike else (s.flat1 == t.flat1):
        return 2, "separator changed"
    return None


def _fuzzy_match(s: _Form, t: _Form) -> tuple[int, str] | None:
    """An edit, truncation or changed middle turning literal ``t`` into token ``s``."""
    a, b = s.key, t.key
    la, lb = len(a), len(b)
    if "..." in a:  # an elided middle; NFKC turns "…" into "..."
        left, right = a.partition("...")[0], a.rpartition("...")[2]
        if len(left) >= 3 and len(right) >= 3 and 8 <= len(left) + len(right) < lb \
                and b.startswith(left) and b.endswith(right):
            return 6, "truncated"
    if _new_junctions(s, t):
        return None
    k = 1 if lb <= 8 else 2
    pairs = [(a, b)] if s.seps == t.seps else [(a, b), (s.flat, t.flat)]
    for x, y in pairs:  # with separators, then without them if they differ
        if abs(len(x) - len(y)) <= k:
            d = _osa(x, y, k)
            if 0 < d <= k:
                return 2 + d, _edit_reason(x, y)
    if la < lb and (b.startswith(a) or b.endswith(a)):
        if la >= 5 and 2 * la >= lb and not (s.flat.isdigit() and len(s.flat) < 6):
            return 5, "truncated"
        # a short git SHA or a UUID's first group is still a lost identifier
        if t.hexlike and b.startswith(a) and len(s.flat) >= 7 and _HEX.fullmatch(s.flat):
            return 5, "truncated"
    n = min(la, lb)
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    q = 0
    while q < n - p and a[-1 - q] == b[-1 - q]:
        q += 1
    if p >= 3 and q >= 3 and p + q >= 0.6 * lb and 0.6 * lb <= la <= 1.5 * lb:
        return 6, "edited"
    return None


# --- the validator -------------------------------------------------------------------------------

def _required_pairs(required: Iterable[Any]) -> list[tuple[str, str | None]]:
    pairs: dict[str, str | None] = {}
    for item in required:
        if isinstance(item, str):
            value, rule = item, None
        elif isinstance(item, tuple | list):
            value, rule = item[0], (item[1] if len(item) > 1 else None)
        else:
            value, rule = item.value, getattr(item, "rule", None)
        if value and value not in pairs:  # an empty literal cannot be lost; first rule wins
            pairs[value] = rule
    return list(pairs.items())


def _exact_spans(summary: str, value: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Occurrences of ``value``: (bounded, glued), a glued one widened to its whole alnum run.
    An occurrence inside the run just reported is that run again: skipping it keeps a value
    repeated through one long run (``abab`` in a megabyte of ``abab...``) linear."""
    bounded, glued = [], []
    head, tail = word_char(value[0]), word_char(value[-1])
    run_start = run_end = -1
    i = summary.find(value)
    while i >= 0:
        s, e = i, i + len(value)
        if _glued(summary, s, e, head, tail):
            if not (run_start <= s and e <= run_end):
                while s and word_char(summary[s - 1]):
                    s -= 1
                while e < len(summary) and word_char(summary[e]):
                    e += 1
                glued.append((s, e))
                run_start, run_end = s, e
        else:
            bounded.append((s, e))
        i = summary.find(value, i + 1)
    return bounded, glued


def _tokens(summary: str) -> list[tuple[int, int]]:
    out = []
    for m in _TOKEN.finditer(summary):
        s, e = m.span()
        while s < e and summary[s] in _STRIP_HEAD:
            s += 1
        while e > s and summary[e - 1] in _STRIP_TAIL:
            e -= 1
        if s < e:
            out.append((s, e))
    return out


def _enclosing_token(summary: str, start: int, end: int) -> str:
    """The token of ``summary`` around ``[start, end)``, e.g. ``#W1234`` around ``W1234``."""
    while start and not TOKEN_BREAK.match(summary, start - 1):
        start -= 1
    while end < len(summary) and not TOKEN_BREAK.match(summary, end):
        end += 1
    token = summary[start:end].lstrip(_STRIP_HEAD).rstrip(_STRIP_TAIL)
    return token or summary[start:end]


def _is_gap(text: str) -> bool:
    return all(c.isspace() or c in "—―" for c in text)


def _whole_token_in(text: str, raw: str) -> bool:
    """Does ``raw`` occur in ``text`` as whole tokens: not run into a neighbouring token (a
    trailing ``.`` or ``:`` before a break, as at a sentence end, still ends it)?"""
    i = text.find(raw)
    while i >= 0:
        s, e = i, i + len(raw)
        if s > 0 and text[s - 1] in _STRIP_HEAD:
            s -= 1
        if e < len(text) and text[e] in _STRIP_TAIL:
            e += 1
        if (s == 0 or _breaks(text, s - 1)) and (e == len(text) or _breaks(text, e)):
            return True
        i = text.find(raw, i + 1)
    return False


def _breaks(text: str, i: int) -> bool:
    """Does ``text[i]`` end a token: a break, or a letter of a script written without spaces
    (``unspaced``)?"""
    c = text[i]
    return bool(TOKEN_BREAK.match(c)) or (c.isalnum() and not word_char(c))


def _near_misses(summary: str, tokens: list[tuple[int, int]], index: _Index,
                 add: Callable[[tuple[int, int], int, str, str], None]) -> None:
    """Offer ``add`` every span of ``tokens`` that resembles a value of ``index``."""
    known_set = index.values
    # 1. Normalised windows: one token, or several joined by whitespace or dashes.
    flats, by_flat = index.flats, index.by_flat
    token_flats = [_form(summary[s:e]).flat.casefold() for s, e in tokens]
    for i, (start, end) in enumerate(tokens):
        acc = token_flats[i]
        j = i
        while acc:
            pos = bisect.bisect_left(flats, acc)
            if pos == len(flats) or not flats[pos].startswith(acc):
                break
            end = tokens[j][1]
            raw = summary[start:end]
            if flats[pos] == acc and token_flats[j] and raw not in known_set:  # "W1 -": "W1"
                for t in by_flat[acc]:
                    m = _normalised_match(raw, t)
                    if m:
                        add((start, end), m[0], m[1], t.raw)
            j += 1
            if j == len(tokens) or j - i == WINDOW_TOKENS or \
                    not _is_gap(summary[tokens[j - 1][1]:tokens[j][0]]):
                break
            acc += token_flats[j]

    # 2. Edits, truncations and changed middles, on identifier-like tokens only.
    by_key = index.by_key
    seen: dict[str, list[tuple[int, str, str]]] = {}
    for start, end in tokens:
        raw = summary[start:end]
        if raw in known_set:
            continue
        if raw not in seen:
            found: list[tuple[int, str, str]] = []
            s = _form(raw)
            if s.idlike and len(s.flat) >= 3:
                targets: dict[str, _Form] = {}
                for k in _token_keys(s):
                    for t in by_key.get(k, ()):
                        targets[t.raw] = t
                for t in targets.values():
                    m = _fuzzy_match(s, t)
                    if m:
                        found.append((m[0], m[1], t.raw))
            seen[raw] = found
        for rank, reason, value in seen[raw]:
            add((start, end), rank, reason, value)


def validate(
    summary: str,
    required: Iterable[tuple[str, str | None]] | Iterable[str] | Iterable[Any],
    *,
    known: Iterable[Any] = (),
    source: Iterable[str] = (),
) -> Verdict:
    """Check ``summary`` for each required literal: ``present``, ``missing`` or ``mutated``;
    and for a near miss of any other known literal: ``mutated`` with ``required=False``.

    ``required`` and ``known`` hold plain strings, ``(value, rule)`` pairs, or objects with
    ``.value`` and ``.rule`` (``RequiredLiteral``, ``Literal``). ``known`` is every real value
    (the ledger); the required values are always included. A summary span equal to a known
    value, or occurring as whole tokens in a text of ``source`` (what was summarized), is never
    reported as a mutation, and a span resembling one known value better than another is
    attributed to that one only.
    """
    pairs = _required_pairs(required)
    known_pairs = [p for p in _required_pairs(known) if p[0] not in dict(pairs)]
    if not pairs and not known_pairs:
        return Verdict(())
    rules = dict(pairs + known_pairs)
    values = tuple(rules)
    index = _index(values)
    known_set = index.values
    required_set = {v for v, _ in pairs}
    texts = source if isinstance(source, list | tuple) else list(source)
    copied: dict[str, bool] = {}

    def in_source(raw: str) -> bool:
        if raw not in copied:
            copied[raw] = any(_whole_token_in(text, raw) for text in texts)
        return copied[raw]

    # span -> [(rank, reason, value)], over every known value so that the best one wins
    candidates: dict[tuple[int, int], list[tuple[int, str, str]]] = {}

    def add(span: tuple[int, int], rank: int, reason: str, value: str) -> None:
        if (rank, reason, value) not in candidates.setdefault(span, []):
            candidates[span].append((rank, reason, value))

    # Tokens as written; and, in a script written without spaces, also with its letters read
    # as breaks: a near miss glued to them (注文#W2378165を) is a token of its own there.
    _near_misses(summary, _tokens(summary), index, add)
    if has_unspaced(summary):
        _near_misses(summary, _tokens(spaced(summary)), index, add)

    # 3. Attribute each span to its best-resembling value(s), unless the source holds it.
    per_value: dict[str, list[tuple[int, tuple[int, int], str]]] = {v: [] for v in values}
    for span, cands in candidates.items():
        if in_source(summary[span[0]:span[1]]):
            continue
        best = min(c[0] for c in cands)
        for rank, reason, value in cands:
            if rank == best:
                per_value[value].append((rank, span, reason))
    exact = {v: _exact_spans(summary, v) for v in values}
    for value, (_, glued) in exact.items():
        if not _form(value).fuzzy:
            continue  # a word inside a longer word ("pending" in "spending") is another word
        for span in glued:  # an identifier running into a letter or digit: an extended copy
            raw = summary[span[0]:span[1]]
            if raw not in known_set and not in_source(raw) \
                    and not in_source(_enclosing_token(summary, *span)):
                per_value[value].append((4, span, "edited"))

    findings: list[Finding] = []
    for value in values:
        bounded, _ = exact[value]
        rule, is_required = rules[value], value in required_set
        taken = list(bounded)
        mutated = []
        for rank, span, reason in sorted(per_value[value], key=lambda c: (c[0], c[1][0] - c[1][1])):
            if any(span[0] < e and s < span[1] for s, e in taken):
                continue  # overlaps the literal itself, or a better-explained span
            taken.append(span)
            mutated.append(Finding(value, rule, "mutated", span, summary[span[0]:span[1]], reason,
                                   is_required))
        if is_required and bounded:
            findings.append(Finding(value, rule, "present", bounded[0]))
        elif is_required and not mutated:
            findings.append(Finding(value, rule, "missing"))
        findings.extend(sorted(mutated, key=lambda f: f.span or (0, 0)))
    return Verdict(tuple(findings))


def identifier_shaped(value: str) -> bool:
    """4+ characters with a digit, a separator (``-_./\\:#@``) or a lower-upper case change, or
    a code of 5+ capitals and digits: what the validator compares as an identifier (its case
    changes and edits count), not as a word."""
    return len(value) >= 4 and _form(value).idlike


def occurs(summary: str, value: str, glue: Callable[[str], bool] = word_char) -> bool:
    """Is ``value`` in ``summary`` byte-for-byte and not glued to a letter or digit (the test of
    ``present``; a word of a script written without spaces beside it is no glue:
    ``unspaced``)? ``glue``: which characters glue (the metric's gold takes every letter and
    digit, ``str.isalnum``)."""
    if not value:
        return False
    head, tail = glue(value[0]), glue(value[-1])
    i = summary.find(value)
    while i >= 0:  # the first bounded occurrence answers; nothing is widened
        if not _glued(summary, i, i + len(value), head, tail, glue):
            return True
        i = summary.find(value, i + 1)
    return False


def _glued(summary: str, start: int, end: int, head: bool, tail: bool,
           glue: Callable[[str], bool] = word_char) -> bool:
    """Is ``summary[start:end]`` run into a letter or digit beside it? Only on a side where
    the value itself ends in one (``head``, ``tail``): ``#W12`` after ``a`` stands apart."""
    return (head and start > 0 and glue(summary[start - 1])) or \
        (tail and end < len(summary) and glue(summary[end]))
