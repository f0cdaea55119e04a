"""Reading a regex pattern as text: its groups and atoms (one walk, ``pattern_chars``), an
optional lead, and the widenings the prefilter and the locators run (``relax`` into RE2 syntax,
backreferences copied, ``\\G`` dropped): a match of a widened form is a superset of the rule's.
"""

from __future__ import annotations

from collections.abc import Iterator

import regex

INLINE_FLAGS = {"ignorecase": "i", "multiline": "m", "dotall": "s"}

_OPTIONAL = regex.compile(r"(?:\*|\?|\{0,\d*\})\??")
_LEADING_FLAGS = regex.compile(r"\(\?[a-zA-Z]*\)|\(\?[a-zA-Z-]+:")


def drop_leading_optional(pattern: str) -> str:
    """``pattern`` without the atoms at its start that may repeat zero times (gitleaks'
    ``[\\w.-]{0,50}?`` before a key name), for the prefilter's RE2 set only: whether a pattern
    matches somewhere is unchanged (where the match starts is not, so locators keep them), and
    a set of hundreds of such patterns no longer builds DFA states for every prefix position."""
    i = 0
    while True:
        flags = _LEADING_FLAGS.match(pattern, i)
        if flags is not None:  # (?i) or (?i: stay; what follows them may still be dropped
            i = flags.end()
            continue
        end = _atom_end(pattern, i)
        optional = _OPTIONAL.match(pattern, end) if end is not None else None
        if optional is None:
            return pattern
        pattern = pattern[:i] + pattern[optional.end():]


def _atom_end(pattern: str, i: int) -> int | None:
    """The index after the single atom at ``i`` (a class, a group, an escape or a character
    other than a metacharacter), or None."""
    if i >= len(pattern):
        return None
    ch = pattern[i]
    if ch == "\\":
        return i + 2 if i + 1 < len(pattern) and pattern[i + 1] not in "xpPQ" else None
    if ch == "[":
        j = i + 1 + pattern.startswith("^", i + 1)
        j += pattern.startswith("]", j)  # a leading ] is a member
        while j < len(pattern):
            if pattern[j] == "\\":
                j += 2
            elif pattern.startswith("[:", j):
                close = pattern.find(":]", j)
                if close < 0:
                    return None
                j = close + 2
            elif pattern[j] == "]":
                return j + 1
            else:
                j += 1
        return None
    if ch == "(":
        end = group_end(pattern, i)
        return None if end is None else end + 1
    return None if ch in "|)^$*+?{" else i + 1


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
# RE2 rejects repetitions above 1,000 (nested ones multiply) and its DFA grows with every
# counted repetition: an upper bound above this becomes open, a lower one is capped.
_OPEN_ABOVE = 16
BOUND = regex.compile(r"\{(\d*)(,?)(\d*)\}")
# what widening adds: every non-ASCII character except the Arrows block (U+2190-21FF: the → of
# Claude Code's line gutter) and box drawing, block elements and geometric shapes
# (U+2500-25FF: tree listings, tables, progress bars). `regex` reads none of them as \w, \d or
# \s, and none has a case (the test suite checks each), so a widened class that leaves them out
# still matches wherever `regex` does; with them in, every gutter line was a word to the
# widened locators (`code-name`, `id-token` stopped at each line of a file read)
_NON_ASCII = r"\x{80}-\x{218F}\x{2200}-\x{24FF}\x{2600}-\x{10FFFF}"
NOT_WIDENED = ((0x2190, 0x21FF), (0x2500, 0x25FF))  # the ranges _NON_ASCII leaves out
# RE2's \d \w \s are ASCII; `regex`'s are Unicode (and its \s also has \v and \x1c-\x1f)
_WIDE = {"d": rf"[\d{_NON_ASCII}]", "w": rf"[\w{_NON_ASCII}]",
         "s": rf"[\s\x0b\x1c-\x1f{_NON_ASCII}]"}


# `regex` under IGNORECASE equates i with İ (U+0130) and I with ı (U+0131); RE2 and Hyperscan do
# not (they do equate k with the Kelvin sign and s with the long s, as `regex` does: the test
# suite checks every cased character). Under IGNORECASE these four stand for all four.
TURKIC_I = "iI\u0130\u0131"
_TURKIC_CLASS = r"[iI\x{130}\x{131}]"
_LETTERS = "A-Za-z"
_GLOBAL_IGNORECASE = regex.compile(r"\(\?[a-zA-Z]*i[a-zA-Z]*\)")
_SCOPED_FLAGS = regex.compile(r"\(\?([a-zA-Z]*)(?:-[a-zA-Z]*)?:")
_GROUP_OPENER = regex.compile(  # a name, a reference, a comment or flags: copied, no letters
    r"\(\?(?:P?<[A-Za-z_]\w*>|P=\w+\)|#[^)]*\)|[a-zA-Z]*(?:-[a-zA-Z]*)?[:)])")


def fold_case(text: str) -> str:
    """``text`` case-folded for keyword matching, so that a keyword occurs in it whenever it
    occurs under `regex`'s IGNORECASE (any case): full case folding (the Kelvin sign is a
    ``k``, the long s an ``s``), with the dotted and dotless i folded to ``i``. It only ever
    finds more occurrences than ``lower`` (its combining dot above is dropped too)."""
    folded = text.casefold()
    if "\u0131" in folded or "\u0307" in folded:  # a search each: translate is 10x slower
        folded = folded.translate(_FOLD_I)
    return folded


_FOLD_I = {0x131: "i", 0x307: None}  # ı -> i; İ casefolds to i + U+0307


def relax(pattern: str, *, unicode: bool = False, ignorecase: bool = False) -> str | None:
    """``pattern`` widened into RE2 syntax; None if the pattern is too unusual to rewrite safely.

    Lookarounds, ``$``, ``\\Z`` and (``unicode``) ``\\b``/``\\B`` are dropped, possessive quantifiers and
    atomic groups become ordinary ones, ``{m,n}`` with a large ``n`` becomes ``{m,}``: matches
    can only widen. The plain form agrees with `regex` on ASCII text only (RE2's ``\\d \\w \\s
    \\b`` are ASCII). The ``unicode`` form also lets every shorthand and every positive class
    match any non-ASCII character, so it is a widening on any text; a negated class holding a
    negated shorthand (``[^\\W_]``) cannot be widened that way and gives None.

    Where the pattern ignores case (``ignorecase``: the rule's flag; or an inline ``(?i)``, or
    inside ``(?i:...)``), the letters `regex` folds beyond RE2 are widened: i, I, İ and ı each
    match all four (ASCII i and I only in the ``unicode`` form: the plain one sees ASCII text),
    a positive class holding a non-ASCII character also matches i and I, and a Unicode
    property (``\\p{Lt}`` holds every cased letter for `regex`) also matches any letter.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class, class_start, negated = False, -1, False
    class_out = 0  # where the class's output starts (plain form: a union may wrap it)
    caseless = ignorecase or _GLOBAL_IGNORECASE.search(pattern) is not None
    scopes: list[bool] = []  # ``caseless`` outside each open group
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            esc = pattern[i:i + 2]
            if pattern.startswith("{", i + 2) and esc[1:] in ("x", "p", "P", "N", "u", "U"):
                close = pattern.find("}", i)
                if close < 0:
                    return None
                esc = pattern[i:close + 1]  # \x{...}, \p{...}: one atom, not a repetition
            elif esc[1:] in ("p", "P") and i + 2 < n:
                esc = pattern[i:i + 3]  # \pL
            i += len(esc)
            letter = esc[1:2]
            if unicode and in_class and negated and letter in ("W", "D", "S", "P"):
                return None
            if caseless and not in_class and letter in ("p", "P"):
                wide = _NON_ASCII if unicode else ""
                out.append(f"(?:{esc}|[{_LETTERS}{wide}])")
            elif caseless and unicode and not in_class and _hex_char(esc, pattern, i) in ("i", "I"):
                out.append(_TURKIC_CLASS)
                i += 2
            elif unicode and not in_class and letter in _WIDE and len(esc) == 2:
                out.append(_WIDE[letter])
            elif unicode and not in_class and esc in ("\\b", "\\B"):
                pass  # an assertion dropped (Unicode word boundaries): matches can only widen
            elif esc == "\\Z" and not in_class:
                pass  # end of text, which RE2 spells \z: an assertion dropped
            else:
                out.append(esc)
            continue
        if in_class:
            if pattern.startswith("[:", i):  # a POSIX class: [[:alpha:]]
                close = pattern.find(":]", i + 2)
                if close < 0:
                    return None
                if unicode and negated and pattern.startswith("[:^", i):
                    return None
                out.append(pattern[i:close + 2])
                i = close + 2
                continue
            # a "]" right after "[" or "[^" is a literal member, not the end of the class
            if ch == "]" and i != class_start:
                in_class = False
                extra = _caseless_partners(pattern[class_start:i]) \
                    if caseless and not negated else ""
                if not unicode and extra:
                    out.insert(class_out, "(?:")
                if (unicode or extra) and not negated:  # a union: a range could glue to a "-"
                    out.append(f"]|[{extra}{_NON_ASCII if unicode else ''}])")
                    i += 1
                    continue
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            negated = pattern.startswith("^", i + 1)
            class_start = i + 2 if negated else i + 1
            class_out = len(out)
            out.append(("(?:" if unicode and not negated else "") + pattern[i:class_start])
            i = class_start
            continue
        if ch == "(" and not pattern.startswith(_LOOKAROUND, i):
            scopes.append(caseless)
            if pattern.startswith("(?", i):  # copied whole: a group's name or flags are no atoms
                if pattern.startswith("(?>", i):  # atomic -> ordinary
                    out.append("(?:")
                    i += 3
                    continue
                opener = _GROUP_OPENER.match(pattern, i)
                end = opener.end() if opener is not None else i + 2
                scoped = _SCOPED_FLAGS.match(pattern, i)
                if scoped is not None and "i" in scoped[1]:
                    caseless = True  # (?-i:...) is left caseless: matches can only widen
                out.append(pattern[i:end])
                if pattern[end - 1] == ")":  # (?i), (?#...), (?P=n): no group stays open
                    scopes.pop()
                i = end
                continue
        if ch == ")" and scopes:
            caseless = scopes.pop()
        if ch == "(" and pattern.startswith(_LOOKAROUND, i):
            end = group_end(pattern, i)
            if end is None:
                return None
            i = end + 1  # an assertion dropped: matches can only widen
            continue
        if ch == "$":
            i += 1  # an assertion dropped (`regex` also matches it before a final newline)
            continue
        if ch == "+" and out and (out[-1] in ("+", "*", "?", "}") or BOUND.fullmatch(out[-1])):
            i += 1  # possessive -> greedy
            continue
        if ch == "{":
            bound = BOUND.match(pattern, i)
            if bound is not None and (bound[1] or bound[3]):
                low = min(int(bound[1] or 0), 64)
                if bound[2]:
                    high = bound[3]
                    if high and int(high) > _OPEN_ABOVE:
                        high = ""
                    out.append(f"{{{low},{high}}}")
                else:  # {m}
                    out.append(f"{{{low}}}" if int(bound[1]) <= 64 else f"{{{low},}}")
                i = bound.end()
                continue
        if caseless and ch in TURKIC_I and (unicode or not ch.isascii()):
            out.append(_TURKIC_CLASS)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _hex_char(esc: str, pattern: str, end: int) -> str | None:
    """The character a ``\\xHH`` escape (``esc`` being ``\\x``, its digits at ``end``) names."""
    digits = pattern[end:end + 2]
    if esc != "\\x" or len(digits) != 2 or not all(c in "0123456789abcdefABCDEF" for c in digits):
        return None
    return chr(int(digits, 16))


def _caseless_partners(members: str) -> str:
    """What a positive class with these members must also match under IGNORECASE: i and I
    for İ or ı (or a range that may hold them: one ending in a non-ASCII character), every
    letter for a Unicode property (`regex` reads ``\\p{Lt}`` as every cased letter); the
    non-ASCII partners of i and I are the ``unicode`` form's already."""
    if "\\p" in members or "\\P" in members:
        return _LETTERS
    if "\u0130" in members or "\u0131" in members or _RANGE_PAST_I.search(members):
        return "iI"
    return ""


_RANGE_PAST_I = regex.compile("-[\u0130-\U0010FFFF]")


def group_end(pattern: str, start: int) -> int | None:
    """Index of the ``)`` closing the group opened at ``start``."""
    depth = 0
    for i, ch, in_class in pattern_chars(pattern, start):
        if in_class:
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def pattern_chars(pattern: str, start: int = 0) -> Iterator[tuple[int, str, bool]]:
    """``(index, character, inside a class)`` for each character of ``pattern`` from
    ``start`` that stands for itself in the syntax: an escape is given once, at its backslash;
    a class's opening ``^`` and leading ``]`` member are passed over. The flag is the state
    before the character (a class's closing ``]`` is still inside)."""
    i, in_class = start, False
    while i < len(pattern):
        ch = pattern[i]
        yield i, ch, in_class
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            i += 1 + pattern.startswith("^", i + 1)
            i += pattern.startswith("]", i)  # a leading "]" is a member
            continue
        i += 1


# ── widenings for the prefilter only ─────────────────────────────────────────────────────

_GROUP_NAME = regex.compile(r"\(\?P?<([A-Za-z_]\w*)>")
_REFERENCE = regex.compile(r"\\([1-9])(?!\d)|\(\?P=([A-Za-z_]\w*)\)")


def widen_backreferences(pattern: str) -> str:
    """``pattern`` with each backreference (``\\1``, ``(?P=name)``) replaced by a copy of the
    group it refers to, for the prefilter only: "the same text again" becomes "text the group
    could match", a widening RE2 can run. The pattern unchanged when its groups are unusual
    (a name given twice, branch resets)."""
    if "\\" not in pattern and "(?P=" not in pattern:
        return pattern
    groups: list[tuple[int, int]] = []  # capturing groups in order: (open, close)
    names: dict[str, int] = {}
    for i, ch, in_class in pattern_chars(pattern):
        if in_class or ch != "(":
            continue
        if pattern.startswith("(?|", i):
            return pattern
        named = _GROUP_NAME.match(pattern, i)
        if named is not None or not pattern.startswith("(?", i):
            close = group_end(pattern, i)
            if close is None:
                return pattern
            if named is not None:
                if named[1] in names:
                    return pattern
                names[named[1]] = len(groups)
            groups.append((named.end() if named is not None else i + 1, close))

    def copy(m: regex.Match[str]) -> str:
        index = int(m[1]) - 1 if m[1] else names.get(m[2], -1)
        if not 0 <= index < len(groups):
            return m[0]
        start, end = groups[index]
        return f"(?:{pattern[start:end]})"

    out, last = [], 0
    for m in _REFERENCE.finditer(pattern):
        if _escaped(pattern, m.start()) or _inside_class(pattern, m.start()):
            continue
        out += [pattern[last:m.start()], copy(m)]
        last = m.end()
    return "".join(out) + pattern[last:]


def without_g(pattern: str) -> str:
    """``pattern`` without ``\\G`` (where the last match ended; RE2 lacks it), for the
    prefilter only: an assertion dropped, a widening. (Locators keep it, and so get none:
    ``pattern.match(text, pos)`` would read it as ``pos``.)"""
    out, last = [], 0
    for m in regex.finditer(r"\\G", pattern):
        if not _escaped(pattern, m.start()) and not _inside_class(pattern, m.start()):
            out.append(pattern[last:m.start()])
            last = m.end()
    return "".join(out) + pattern[last:]


def _escaped(pattern: str, i: int) -> bool:
    """Is the character at ``i`` escaped (an odd run of backslashes before it)?"""
    run = 0
    while i - run - 1 >= 0 and pattern[i - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _inside_class(pattern: str, i: int) -> bool:
    """Is index ``i`` inside a character class?"""
    inside = False
    for j, _, inside in pattern_chars(pattern):
        if j >= i:
            return inside
    return inside


def without_captures(pattern: str) -> str:
    """``pattern`` with every capturing group (numbered or named) made non-capturing: the
    same matches, for an RE2 pattern whose groups nobody reads (a locator): with groups, RE2
    runs a second, slower engine over each match to fill them in. (RE2 patterns hold no
    backreferences, which the groups would serve.)"""
    out, last = [], 0
    for i, ch, in_class in pattern_chars(pattern):
        if in_class or ch != "(":
            continue
        named = _GROUP_NAME.match(pattern, i)
        if named is not None:
            out += [pattern[last:i], "(?:"]
            last = named.end()
        elif not pattern.startswith("(?", i):
            out += [pattern[last:i + 1], "?:"]
            last = i + 1
    return "".join(out) + pattern[last:]
