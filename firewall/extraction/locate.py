"""RE2 locators: where a regex rule's matches can start, found by a DFA instead of `regex`.

`regex` is a backtracking engine: looking for a generic rule's matches it tries the pattern at
every position of the text, and generic rules (ID-shaped tokens, numbers, digests) are tried on
nearly every text. A locator is an RE2 pattern derived from the rule's pattern such that every
position where the rule matches is found by the locator: RE2 skips, in linear time, the stretches
where no match can start, and `regex` is asked only at the candidate positions
(``pattern.match(text, pos)``, which sees the text before ``pos`` for lookbehinds and ``\\b``).

``finditer(text)`` emulates ``pattern.finditer(text)`` exactly, for patterns that cannot match
the empty string: the leftmost match at or after ``pos`` starts at or after the leftmost
locator candidate, so trying candidates in order and resuming after each match (or one past a
failed candidate) finds the same matches. Used on ASCII text only (RE2 and `regex` agree on it,
and byte offsets are character offsets); other text goes to ``pattern.finditer``.

How the locator is derived from a pattern (each step only widens what it matches):

* a leading negative lookbehind of one character class, ``(?<![C])``, becomes a consumed
  ``(?:\\A|[^C])``: a candidate is then one past the locator's match start (or 0);
* up to the first lookahead the pattern is kept (relaxed as for the prefilter); a run of
  lookaheads there is replaced by the strings one of them requires, and the rest of the pattern
  is dropped: two lookaheads ``(?=[S]{a,b}X)(?=[S]{c,d}Y)`` over the same class (an ID must hold
  a digit and a letter) merge into "a run of S holding an X and a Y", the text they jointly need.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import regex

from .regex_syntax import BOUND, INLINE_FLAGS, group_end, relax, without_captures

try:
    import re2
except ImportError:  # pragma: no cover - google-re2 is a core dependency
    re2 = None

# each candidate costs two calls: where they come more often than one per this many bytes
# (after the first few), the rest of the text goes to ``pattern.finditer`` (the same matches)
MIN_CANDIDATES = 4
BYTES_PER_CANDIDATE = 48
# RE2 may read more than the text once (a failed candidate is retried one character on, and a
# locator's match can be long): past this many times the text's length, the ordinary scan
RESCAN_FACTOR = 4
_ASCII = [chr(c) for c in range(128)]
_UNANCHORED = re2._Anchor.UNANCHORED if re2 is not None else None


@dataclass(frozen=True)
class _Item:
    text: str  # the atom and its quantifier, as written
    kind: str  # "atom", "assert" (\b, ^...), "lookahead", "neglookahead", "lookbehind", "alt"
    body: str = ""  # a lookaround's content
    atom: str = ""  # the atom without its quantifier
    quant: str = ""


def _class_end(pattern: str, i: int) -> int | None:
    """Index just past the character class opening at ``i``."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):
        j += 1
    while j < len(pattern):
        ch = pattern[j]
        if ch == "\\":
            j += 2
            continue
        if pattern.startswith("[:", j):
            close = pattern.find(":]", j + 2)
            if close < 0:
                return None
            j = close + 2
            continue
        if ch == "[":  # nested sets (`regex` V1): not handled
            return None
        if ch == "]":
            return j + 1
        j += 1
    return None


def _items(pattern: str) -> list[_Item] | None:
    """The top-level sequence of ``pattern``: atoms with their quantifiers, and assertions."""

    items: list[_Item] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        kind, body = "atom", ""
        if ch == "|":
            items.append(_Item("|", "alt"))
            i += 1
            continue
        if ch == "\\":
            end = i + 2
            if pattern.startswith("{", end) and pattern[i + 1:i + 2] in ("x", "p", "P", "N"):
                close = pattern.find("}", end)
                if close < 0:
                    return None
                end = close + 1
            if pattern[i + 1:i + 2] in ("b", "B", "A", "Z", "z", "G", "m", "M"):
                kind = "assert"
        elif ch == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
        elif ch == "(":
            close = group_end(pattern, i)
            if close is None:
                return None
            end = close + 1
            for opener, name in (("(?=", "lookahead"), ("(?!", "neglookahead"),
                                 ("(?<=", "lookbehind"), ("(?<!", "neglookbehind")):
                if pattern.startswith(opener, i):
                    kind, body = name, pattern[i + len(opener):close]
                    break
            else:
                if pattern.startswith("(?", i) and not pattern.startswith(
                        ("(?:", "(?<", "(?P<", "(?>", "(?i:", "(?s:", "(?m:"), i):
                    return None  # inline flags, comments, conditionals: not handled
        elif ch in "^$":
            kind, end = "assert", i + 1
        elif ch in "*+?{)":
            return None  # a quantifier without an atom: something unusual
        else:
            end = i + 1
        atom = pattern[i:end]
        j = end
        if j < n and pattern[j] in "*+?":
            j += 1
        elif j < n and pattern[j] == "{":
            bound = BOUND.match(pattern, j)
            if bound is not None:
                j = bound.end()
        if j > end and j < n and pattern[j] in "?+":
            j += 1  # lazy or possessive
        if kind != "atom" and j > end:
            return None  # a quantified assertion
        items.append(_Item(pattern[i:j], kind, body, atom, pattern[end:j]))
        i = j
    return items


def _single(atom: str) -> bool:
    """Is ``atom`` one character wide (a class, a shorthand, ``.`` or a literal)?"""
    if atom.startswith("["):
        return True
    if atom.startswith("\\"):
        return atom[1:2] in "dDwWsSpPx" or (len(atom) == 2 and not atom[1].isalnum())
    return len(atom) == 1 and atom not in "()|"


def _ascii_members(atom: str, flags: int) -> str | None:
    try:
        compiled = regex.compile(atom, flags)
    except regex.error:
        return None
    return "".join(c for c in _ASCII if compiled.fullmatch(c))


def _as_class(chars: str) -> str:
    return "[" + "".join(f"\\x{ord(c):02x}" for c in chars) + "]"


def _merge(lookaheads: list[str], flags: int) -> str | None:
    """Two lookaheads ``[S]{a,b}X`` and ``[S]{c,d}Y`` (same S, X and Y one character each) as
    one consuming pattern over ASCII text: ``S*`` then X and Y in either order, or one
    character in both."""
    shapes = []
    for body in lookaheads:
        items = _items(body)
        if items and len(items) == 2 and all(it.kind == "atom" for it in items) and \
                _single(items[0].atom) and _single(items[1].atom) and items[1].quant == "" and \
                (items[0].quant in ("*", "+") or items[0].quant.startswith("{")):
            shapes.append((items[0].atom, items[1].atom))
    for k, (run, first) in enumerate(shapes):
        for run2, second in shapes[k + 1:]:
            if run2 != run:
                continue
            x, y = _ascii_members(first, flags), _ascii_members(second, flags)
            if x is None or y is None:
                continue
            both = "".join(c for c in x if c in y)
            branches = [f"{first}{run}*{second}", f"{second}{run}*{first}"]
            if both:
                branches.append(_as_class(both))
            return f"{run}*(?:{'|'.join(branches)})"
    return _char_then_run(lookaheads)


def _char_then_run(lookaheads: list[str]) -> str | None:
    """Two lookaheads ``X`` (one character) and ``[S]{n,m}...`` (a run first) as one
    consuming pattern: ``X[S]{n-1,m-1}...``. Both hold at a candidate, so its first character
    is an X and the n-1 after it are S (a number that must be four characters long)."""
    parsed = [_items(body) for body in lookaheads]
    for one in parsed:
        if not (one and len(one) == 1 and one[0].kind == "atom" and one[0].quant == ""
                and _single(one[0].atom)):
            continue
        for run in parsed:
            if not run or run is one or any(it.kind == "alt" for it in run) or \
                    run[0].kind != "atom" or not _single(run[0].atom):
                continue
            quant = run[0].quant
            bound = BOUND.fullmatch(quant)
            if quant == "+":
                fewer = "*"
            elif bound is not None and bound[1] and int(bound[1]) >= 1:
                low = int(bound[1]) - 1
                if not bound[2]:
                    fewer = f"{{{low}}}"
                elif not bound[3]:
                    fewer = f"{{{low},}}"
                else:
                    fewer = f"{{{low},{int(bound[3]) - 1}}}"
            else:
                continue
            return one[0].atom + run[0].atom + fewer + "".join(it.text for it in run[1:])
    return None


def locator_source(pattern: str, flags: int = 0) -> tuple[str, int] | None:
    """(a pattern in `regex` syntax whose matches cover every start of ``pattern``'s matches,
    the offset from a locator match start to the candidate), before relaxing for RE2."""
    items = _items(pattern)
    if items is None or not items:
        return None
    if any(it.kind == "alt" for it in items):
        return _alternation_source(pattern, items, flags)
    i, prefix, lead = 0, "", []
    while i < len(items) and items[i].kind not in ("atom", "lookahead"):
        it = items[i]
        if it.kind == "neglookbehind" and not prefix:
            inner = _items(it.body)
            if inner and len(inner) == 1 and inner[0].kind == "atom" and \
                    inner[0].quant == "" and _single(inner[0].atom):
                atom = inner[0].atom
                if atom.startswith("[^"):
                    prefix = "(?:\\A|[" + atom[2:] + ")"
                elif atom.startswith("["):
                    prefix = "(?:\\A|[^" + atom[1:] + ")"
                elif atom == ".":
                    prefix = "(?:\\A|\\n)"
                else:
                    prefix = "(?:\\A|[^" + (atom if atom.startswith("\\") else regex.escape(
                        atom, special_only=False)) + "])"
        elif it.kind == "lookbehind" and not prefix:
            last = _last_char(it.body)
            if last is not None:
                prefix = f"(?:\\A|{last})"
        elif it.kind == "assert" and it.atom in ("\\b", "\\B", "\\A", "^"):
            lead.append(it.text)
        i += 1
    if not prefix and i < len(items) and items[i].kind == "atom" and not items[i].quant:
        after = _line_start_or_after(items[i].atom)
        if after is not None:
            prefix, i = after, i + 1
    rest: list[str] = []
    while i < len(items):
        it = items[i]
        if it.kind in ("lookahead", "neglookahead", "lookbehind", "neglookbehind"):
            run = []
            while i < len(items) and items[i].kind in ("lookahead", "neglookahead",
                                                        "lookbehind", "neglookbehind"):
                if items[i].kind == "lookahead":
                    run.append(items[i].body)
                i += 1
            if run:
                merged = _merge(run, flags)
                ahead = merged if merged is not None else f"(?:{run[0]})"
                # the lookaheads, or what the pattern consumes after them (its own lookarounds
                # dropped by ``relax``): the latter when only it needs a symbol such as "/"
                after = "".join(it.text for it in items[i:])
                if after and _needs_symbol(after, flags) and not _needs_symbol(ahead, flags) \
                        and relax(after, ignorecase=bool(flags & regex.IGNORECASE)) is not None:
                    ahead = after
                rest.append(ahead)
                break  # the rest of the pattern is dropped: matches only widen
            continue
        rest.append(it.text)
        i += 1
    if not rest:
        return None
    return prefix + "".join(lead) + "".join(rest), 1 if prefix else 0


def _last_char(lookbehind: str) -> str | None:
    """The one-character atom a lookbehind's body ends with (a class, a shorthand, a literal),
    as written: a position the lookbehind holds at follows such a character."""
    inner = _items(lookbehind)
    if not inner or any(it.kind == "alt" for it in inner):
        return None
    last = inner[-1]
    if last.kind != "atom" or last.quant or not _single(last.atom):
        return None
    return last.atom


def _line_start_or_after(atom: str) -> str | None:
    """For a group of ``^`` and lookbehinds (``(?:^|(?<=^[\\w./-]{1,256}[:-]))``: a line
    number at a line's start or after a file name), the character before its position as a
    consumed prefix: the start of the text, a line break, or each lookbehind's last character
    (``(?:\\A|\\n|[:-])``). Without it the locator stopped at every number before a ``-``."""
    inner = _group_body(atom) if atom.startswith("(") else None
    items = _items(inner[0]) if inner is not None else None
    if not items:
        return None
    before = []
    for branch in _branches(items):
        if len(branch) != 1:
            return None
        it = branch[0]
        if it.kind == "assert" and it.atom in ("^", "\\A"):
            before.append("\\n")  # ``^`` of a multiline pattern; \A is in the prefix anyway
        elif it.kind == "lookbehind" and _last_char(it.body) is not None:
            before.append(_last_char(it.body))
        else:
            return None
    return "(?:\\A|" + "|".join(dict.fromkeys(before)) + ")"


def _branches(items: list[_Item]) -> list[list[_Item]]:
    """The branches of a top-level alternation, each its items."""
    branches: list[list[_Item]] = [[]]
    for it in items:
        if it.kind == "alt":
            branches.append([])
        else:
            branches[-1].append(it)
    return branches


def _needs_symbol(source: str, flags: int) -> bool:
    """Does every match of ``source`` hold a symbol given in it (``/``, ``:``, ``@``, ``.``:
    one ASCII character, neither a letter nor a digit; every branch of an alternation one)?
    Such a locator stops far less often than one that needs only word characters."""
    items = _items(source)
    if items is None:
        return False
    if any(it.kind == "alt" for it in items):
        return all(branch and _needs_symbol("".join(it.text for it in branch), flags)
                   for branch in _branches(items))
    for it in items:
        if it.kind != "atom" or _nullable_quant(it.quant):
            continue
        if it.atom.startswith("("):
            inner = _group_body(it.atom)
            if inner is not None and _needs_symbol(inner[0], flags | inner[1]):
                return True
        elif _single(it.atom):
            members = _ascii_members(it.atom, flags)
            if members and len(members) == 1 and not members.isalnum():
                return True
    return False


def _alternation_source(pattern: str, items: list[_Item], flags: int) -> tuple[str, int]:
    """``locator_source`` of a top-level alternation: each branch's own locator, so that a
    branch's lookarounds still narrow it (a word that must stand before a comma); a branch
    whose locator consumes no character before its candidate gets any one character (or the
    start of the text) in front, so that all share one offset. The whole pattern when a branch
    has no locator of its own."""
    derived = []
    for branch in _branches(items):
        source = "".join(it.text for it in branch)
        found = locator_source(source, flags) if source else None
        if found is None:
            return pattern, 0  # the whole pattern, relaxed: a match of it starts where one can
        derived.append(found)
    if all(shift == derived[0][1] for _, shift in derived):
        return "|".join(f"(?:{source})" for source, _ in derived), derived[0][1]
    return "|".join(f"(?:{source})" if shift else f"(?:\\A|(?s:.))(?:{source})"
                    for source, shift in derived), 1


# the `requires:` tests on ASCII characters (see ``compiled.REQUIRES``)
_REQUIRED = {"digit": str.isdigit, "letter": str.isalpha, "upper": str.isupper,
             "lower": str.islower}
_WORD = frozenset(c for c in _ASCII if c.isalnum() or c == "_")


def _group_body(atom: str) -> tuple[str, int] | None:
    """The body of a group atom and the flags its opener sets; None for an unknown opener."""
    if atom.startswith(("(?P<", "(?<")):
        close = atom.find(">")
        return (atom[close + 1:-1], 0) if close > 0 else None
    for opener, extra in (("(?:", 0), ("(?>", 0), ("(?i:", regex.IGNORECASE),
                          ("(?s:", regex.DOTALL), ("(?m:", 0)):
        if atom.startswith(opener):
            return atom[len(opener):-1], extra
    if atom.startswith("(?"):
        return None
    return atom[1:-1], 0


def _nullable_quant(quant: str) -> bool:
    if quant.startswith(("?", "*")):
        return True
    return quant.startswith("{") and (quant[1:2] in (",", "0") and
                                      not quant[1:].lstrip("0").startswith(tuple("123456789")))


def _chars(pattern: str, flags: int) -> tuple[frozenset[str], frozenset[str], bool] | None:
    """(every ASCII character a match of ``pattern`` can consume, those it can start with,
    whether it can match the empty string); None when the pattern is too unusual to tell.
    Lookarounds consume nothing; their contents are left out."""
    items = _items(pattern)
    if items is None:
        return None
    alphabet: set[str] = set()
    first: set[str] = set()
    nullable_branch, any_nullable, at_start = True, False, True
    for it in items + [_Item("|", "alt")]:
        if it.kind == "alt":
            any_nullable = any_nullable or nullable_branch
            nullable_branch, at_start = True, True
            continue
        if it.kind != "atom":
            if it.kind == "assert" and it.atom in ("\\A", "\\Z", "\\z", "\\G"):
                return None  # keep to the shapes the callers reason about
            continue
        if it.atom.startswith("("):
            inner = _group_body(it.atom)
            if inner is None:
                return None
            sub = _chars(inner[0], flags | inner[1])
            if sub is None:
                return None
            members, starts, empty = sub
        else:
            found = _ascii_members(it.atom, flags)
            if found is None or not _single(it.atom):
                return None  # backreferences and the like
            members, starts, empty = frozenset(found), frozenset(found), False
        alphabet |= members
        if at_start:
            first |= starts
        empty = empty or _nullable_quant(it.quant)
        if not empty:
            at_start = nullable_branch = False
    return frozenset(alphabet), frozenset(first), any_nullable


def strict_locator_source(pattern: str, flags: int, requires: tuple[str, ...]
                          ) -> tuple[str, int] | None:
    """A locator that also demands the characters ``requires`` tests the match for.

    A locator finds where matches can start, so skipping a match that ``requires`` rejects
    is exact only if no match can start strictly inside another one (``finditer`` resumes after
    a rejected match as after any other). That is proven from the leading assertions: for every
    pair of characters (u, f) a match can hold with f able to start one, a negative lookbehind
    excludes u, or ``\\b`` excludes the pair. Then every start of an accepted match is the
    start of a run of the match's characters holding one of each required kind."""
    tests = [_REQUIRED.get(name) for name in requires]
    if not tests or len(tests) > 2 or None in tests:
        return None
    items = _items(pattern)
    chars = _chars(pattern, flags)
    if items is None or chars is None or any(it.kind == "alt" for it in items):
        return None
    alphabet, first, _ = chars
    i, excluded, boundary, prefix = 0, frozenset(), False, ""
    while i < len(items) and items[i].kind not in ("atom", "lookahead"):
        it = items[i]
        if it.kind == "neglookbehind" and not excluded:
            inner = _items(it.body)
            if inner and len(inner) == 1 and inner[0].kind == "atom" and inner[0].quant == "" \
                    and _single(inner[0].atom) and inner[0].atom.startswith("["):
                members = _ascii_members(inner[0].atom, flags)
                if members:
                    excluded = frozenset(members)
                    atom = inner[0].atom
                    prefix = "(?:\\A|[" + atom[2:] + ")" if atom.startswith("[^") else \
                        "(?:\\A|[^" + atom[1:] + ")"
        elif it.kind == "assert" and it.atom == "\\b":
            boundary = True
        i += 1
    for u in alphabet:
        if u in excluded:
            continue
        for f in first:
            if not boundary or (u in _WORD) != (f in _WORD):
                return None  # a match could start inside another
    run = _as_class("".join(sorted(alphabet)))
    kinds = ["".join(c for c in sorted(alphabet) if test(c)) for test in tests]
    if not all(kinds):
        return None
    if len(kinds) == 1:
        body = f"{run}*{_as_class(kinds[0])}"
    else:
        x, y = kinds
        branches = [f"{_as_class(x)}{run}*{_as_class(y)}", f"{_as_class(y)}{run}*{_as_class(x)}"]
        both = "".join(c for c in x if c in y)
        if both:
            branches.append(_as_class(both))
        body = f"{run}*(?:{'|'.join(branches)})"
    return prefix + ("\\b" if boundary else "") + body, 1 if prefix else 0


@dataclass(eq=False)
class Locator:
    """A compiled locator for one rule; see the module docstring.

    A locator pays where it skips much of a text; where a rule's candidates come dense (5-digit
    numbers in JSON listings), ``finditer`` hands the rest of the text to ``regex``'s own scan
    (``BYTES_PER_CANDIDATE``), so every text goes through the locator. (Until 2026-12 a rule's
    first texts were timed each way to choose one for good; on the dev sets and real Claude
    Code sessions that trial cost more than it won: benchmarks/README.md, issue 30.)
    """

    match: Any  # RE2's Match(anchor, bytes, pos, endpos) -> [(start, end), ...], ASCII form
    umatch: Any  # the same for the widened form, on UTF-8 bytes of any text (or None)
    shift: int  # 1 when the locator consumes the character before a candidate
    ushift: int = -1  # the same for ``umatch`` (-1: as ``shift``)

    def finditer(self, pattern: regex.Pattern[str], text: str, data: bytes | None,
                 timeout: float) -> Iterable[Any]:
        """``pattern.finditer(text)``; ``data``: ``text`` as ASCII bytes RE2 agrees on, or
        None (then the widened locator runs on the UTF-8 bytes)."""
        if data is not None:
            return self._ascii_finditer(pattern, text, data, timeout)
        return self._wide_finditer(pattern, text, timeout)

    def _ascii_finditer(self, pattern: regex.Pattern[str], text: str, data: bytes,
                        timeout: float) -> list[Any]:
        """``finditer`` on ASCII text (byte offsets are character offsets): the loop below
        with its UTF-8 bookkeeping left out, as most text takes this path. A list, not a
        generator: the rule takes every match anyway, and a generator's frame cost more."""
        monotonic = time.monotonic
        deadline = monotonic() + timeout
        shift, anchor, locate, confirm = self.shift, _UNANCHORED, self.match, pattern.match
        n, pos, tried, scanned = len(data), 0, 0, 0
        rescan = RESCAN_FACTOR * n + 4096
        found: list[Any] = []
        while pos <= n:
            start = pos - shift if pos else 0
            q, q_end = locate(anchor, data, start, n)[0]
            if q < 0:
                return found
            scanned += q_end - start
            c = q + shift if q else 0
            if c < pos:
                c = pos
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise TimeoutError("regex timed out")
            tried += 1
            if (tried > MIN_CANDIDATES and tried * BYTES_PER_CANDIDATE > c) or scanned > rescan:
                found += pattern.finditer(text, c, timeout=remaining)
                return found
            # (string, pos, endpos, concurrent, partial, timeout) by position: `regex` parses
            # keywords slowly, a quarter of a failed match's cost (the timeout is pinned by
            # test_a_located_scan_still_times_out)
            m = confirm(text, c, None, None, False, remaining)
            if m is None:
                pos = c + 1
            else:
                found.append(m)
                pos = m.end()
        return found

    def _wide_finditer(self, pattern: regex.Pattern[str], text: str,
                       timeout: float) -> Iterator[Any]:
        """``finditer`` on other text: the widened locator on its UTF-8 bytes."""
        if self.umatch is None or not _encodable(text):
            yield from pattern.finditer(text, timeout=timeout)
            return
        deadline = time.monotonic() + timeout
        shift = self.ushift if self.ushift >= 0 else self.shift
        anchor, match, data, chars = _UNANCHORED, self.umatch, text.encode("utf-8"), text
        n, pos, tried, scanned = len(data), 0, 0, 0
        cbase = bbase = 0  # a character offset and its byte offset
        while pos <= len(text):
            # the byte offset of character pos (or pos - 1), moving forward only
            bbase += len(chars[cbase:pos].encode("utf-8"))
            cbase = pos
            start = bbase - len(chars[pos - 1].encode("utf-8")) if shift and pos else bbase
            q, q_end = match(anchor, data, start, n)[0]
            if q < 0:
                return
            # RE2 read up to the end of its match: bounded in all, the scan stays linear
            scanned += q_end - start
            # the character offset of byte q
            if q >= bbase:
                cbase += len(data[bbase:q].decode("utf-8"))
            else:
                cbase -= 1  # q is the start of character pos - 1
            bbase = q
            q = cbase
            c = q + shift if q else 0
            if c < pos:
                c = pos
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("regex timed out")
            tried += 1
            if (tried > MIN_CANDIDATES and tried * BYTES_PER_CANDIDATE > c) or \
                    scanned > RESCAN_FACTOR * n + 4096:
                # candidates are dense here (or RE2 reads the same stretch again and again):
                # the ordinary scan is cheaper. No match starts in [pos, c): resume at c.
                yield from pattern.finditer(text, c, timeout=remaining)
                return
            m = pattern.match(text, c, timeout=remaining)
            if m is None:
                pos = c + 1
            else:
                yield m
                pos = m.end()


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return True


def build_locator(pattern: str, flags: int, compiled: regex.Pattern[str],
                  requires: tuple[str, ...] = ()) -> Locator | None:
    """The locator of a rule's pattern, or None when none can be derived safely. With the
    rule's ``requires`` (tested on the whole match), the ASCII locator may be the stricter one
    of ``strict_locator_source``: it skips matches the rule would reject anyway."""

    if re2 is None or flags & regex.VERBOSE:
        return None
    derived = locator_source(pattern, flags)
    if derived is None:
        return None
    source, shift = derived
    caseless = bool(flags & regex.IGNORECASE)  # (?i) and (?i:...) in the pattern: relax sees them
    relaxed = relax(source, ignorecase=caseless)
    whole = relax(pattern, unicode=True, ignorecase=caseless)
    widened = relax(source, unicode=True, ignorecase=caseless)
    if relaxed is None or whole is None:
        return None
    # only where a match starts is read: no groups, so RE2 answers from its DFA alone
    relaxed = without_captures(relaxed)
    widened = None if widened is None else without_captures(widened)
    inline = "".join(letter for name, letter in INLINE_FLAGS.items()
                     if flags & {"ignorecase": regex.IGNORECASE, "multiline": regex.MULTILINE,
                                 "dotall": regex.DOTALL}[name])
    options = re2.Options()
    options.log_errors = False
    try:
        if re2.compile(f"(?{inline}){whole}" if inline else whole, options).fullmatch(""):
            return None  # the pattern may match the empty string: finditer's rules differ
        locator = re2.compile(f"(?{inline}){relaxed}" if inline else relaxed, options)
    except Exception:  # RE2 lacks it (backreferences...)
        return None
    try:
        wide = None if widened is None else re2.compile(
            f"(?{inline}){widened}" if inline else widened, options)
    except Exception:
        wide = None
    raw = getattr(locator, "_regexp", None)
    if raw is None or not hasattr(raw, "Match") or not hasattr(re2, "_Anchor"):
        return None
    ushift = shift
    strict = strict_locator_source(pattern, flags, requires) \
        if requires and "literal" not in compiled.groupindex else None
    if strict is not None:
        strict_relaxed = relax(strict[0], ignorecase=caseless)
        strict_relaxed = None if strict_relaxed is None else without_captures(strict_relaxed)
        try:
            strict_compiled = None if strict_relaxed is None else re2.compile(
                f"(?{inline}){strict_relaxed}" if inline else strict_relaxed, options)
        except Exception:
            strict_compiled = None
        if strict_compiled is not None:
            raw, shift = strict_compiled._regexp, strict[1]
    return Locator(raw.Match, wide._regexp.Match if wide is not None else None, shift, ushift)
