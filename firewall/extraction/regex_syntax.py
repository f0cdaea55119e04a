"""Reading a regex pattern as text: its groups and atoms, an optional lead, and ``relax``, the
widening into RE2 syntax that the prefilter and the locators run (a match of the widened form
is a superset of the rule's matches).
"""

from __future__ import annotations

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
_NON_ASCII = r"\x{80}-\x{10FFFF}"
# RE2's \d \w \s are ASCII; `regex`'s are Unicode (and its \s also has \v and \x1c-\x1f)
_WIDE = {"d": rf"[\d{_NON_ASCII}]", "w": rf"[\w{_NON_ASCII}]",
         "s": rf"[\s\x0b\x1c-\x1f{_NON_ASCII}]"}


def relax(pattern: str, *, unicode: bool = False) -> str | None:
    """``pattern`` widened into RE2 syntax; None if the pattern is too unusual to rewrite safely.

    Lookarounds, ``$``, ``\\Z`` and (``unicode``) ``\\b``/``\\B`` are dropped, possessive quantifiers and
    atomic groups become ordinary ones, ``{m,n}`` with a large ``n`` becomes ``{m,}``: matches
    can only widen. The plain form agrees with `regex` on ASCII text only (RE2's ``\\d \\w \\s
    \\b`` are ASCII). The ``unicode`` form also lets every shorthand and every positive class
    match any non-ASCII character, so it is a widening on any text; a negated class holding a
    negated shorthand (``[^\\W_]``) cannot be widened that way and gives None.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class, class_start, negated = False, -1, False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            esc = pattern[i:i + 2]
            if pattern.startswith("{", i + 2) and esc[1:] in ("x", "p", "P", "N", "u", "U"):
                close = pattern.find("}", i)
                if close < 0:
                    return None
                esc = pattern[i:close + 1]  # \x{...}, \p{...}: one atom, not a repetition
            i += len(esc)
            letter = esc[1:2]
            if unicode and in_class and negated and letter in ("W", "D", "S", "P"):
                return None
            if unicode and not in_class and letter in _WIDE and len(esc) == 2:
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
                if unicode and not negated:  # a union: appending a range could glue onto a "-"
                    out.append(f"]|[{_NON_ASCII}])")
                    i += 1
                    continue
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            negated = pattern.startswith("^", i + 1)
            class_start = i + 2 if negated else i + 1
            out.append(("(?:" if unicode and not negated else "") + pattern[i:class_start])
            i = class_start
            continue
        if ch == "(" and pattern.startswith(_LOOKAROUND, i):
            end = group_end(pattern, i)
            if end is None:
                return None
            i = end + 1  # an assertion dropped: matches can only widen
            continue
        if ch == "$":
            i += 1  # an assertion dropped (`regex` also matches it before a final newline)
            continue
        if pattern.startswith("(?>", i):
            out.append("(?:")
            i += 3
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
        out.append(ch)
        i += 1
    return "".join(out)


def group_end(pattern: str, start: int) -> int | None:
    """Index of the ``)`` closing the group opened at ``start``."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None
