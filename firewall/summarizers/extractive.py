"""``ExtractiveSummarizer``: the offline default. Deterministic, no network, no model.

It picks whole sentences (and compact renderings of tool calls and JSON tool results) out of the
span, scores them, and keeps the best ones within a token budget, in conversation order. A picked
sentence is copied, never rewritten, so any literal it holds survives byte-for-byte.

On the first attempt it behaves like any plain summarizer and does nothing special for the
required literals: the firewall's validate -> re-ask loop is then exercised for real. On a re-ask
it guarantees every required literal, even past ``max_tokens``.

Only the first ``SCAN_CHARS`` characters of a turn are segmented and scored, so a 50 MB tool
result costs a prefix scan plus, on a re-ask, one linear substring search.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..tokens import count_tokens
from ..turns import Turn
from ..compaction.validate import TOKEN_BREAK
from .base import Summary, SummaryRequest

SCAN_CHARS = 20_000  # per turn: what is segmented and scored
PARSE_CHARS = 2_000_000  # JSON tool results up to this size are parsed; larger ones regex-scanned
UNIT_CHARS = 400  # a longer sentence is clipped at a word boundary
JSON_ITEMS = 6  # keys / list items shown per level of a compacted JSON value
VALUE_CHARS = 80  # string values in compact JSON / tool-call renderings are clipped beyond this

# A sentence ends at . ! ? (plus closing quotes/brackets) followed by whitespace. Requiring the
# whitespace is what keeps IDs, paths, URLs and decimals (``INV-2025-08-44719``, ``3.14``,
# ``src/a.ts``) whole: none of them contains ". " inside.
_BOUNDARY = re.compile(r"[.!?…]+[\"'”’)\]]*\s+")
_ABBREVIATIONS = frozenset(
    "e.g. i.e. etc. vs. cf. al. approx. ca. mr. mrs. ms. dr. prof. st. no. nos. inc. ltd. co. "
    "corp. jr. sr. fig. dept. est. min. max. vol. p. pp. ref. re. jan. feb. mar. apr. jun. jul. "
    "aug. sep. sept. oct. nov. dec. u.s. u.k. a.m. p.m.".split())
_DOTTED_INITIALS = re.compile(r"(?:[A-Za-z]\.)+")  # "U.S.", "J." (an initial)
_LIST_MARKER = re.compile(r"(?:\d{1,3}|[a-z]|[ivx]{1,4})[.)]")
# Raw scan of a JSON prefix too large to parse: "key": scalar
_JSON_PAIR = re.compile(
    r'"([^"\\]{1,64})"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d[\d.eE+-]*|true|false|null)')
_KEY_BEFORE = re.compile(r'"([^"\\]{1,64})"\s*:\s*"?[^"]*$')


class _Raw(str):
    """A JSON number kept as its source text: ``129.00`` must not become ``129.0``."""


def _loads(text: str) -> Any:
    return json.loads(text, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw)


@dataclass(slots=True)
class _Unit:
    turn: int  # index into request.turns
    pos: int  # order inside the turn
    speaker: str
    text: str
    kind: str = "sentence"  # "sentence", "call" (a tool call), "json" (a JSON tool result), "extra"
    data: Any = None  # parsed JSON of a tool result or a call's arguments, walked on a re-ask
    name: str = ""  # the tool called, for kind == "call"
    score: float = 0.0

    @property
    def line_cost(self) -> int:
        return count_tokens(f"{self.speaker}: {self.text}\n")


class ExtractiveSummarizer:
    """Offline extractive summaries of at most ``max_tokens`` (first attempt; see the module doc).

    ``max_sentences`` optionally caps how many sentences / tool lines are picked. The header line
    is always written, so a tiny ``max_tokens`` yields just the header.
    """

    vendor_path = "extractive"  # offline: no vendor, no model

    def __init__(self, max_tokens: int = 400, max_sentences: int | None = None) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if max_sentences is not None and max_sentences < 0:
            raise ValueError(f"max_sentences must be >= 0, got {max_sentences}")
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences

    def __repr__(self) -> str:
        return (f"ExtractiveSummarizer(max_tokens={self.max_tokens}, "
                f"max_sentences={self.max_sentences})")

    async def asummarize(self, request: SummaryRequest) -> Summary:
        return self.summarize(request)

    def summarize(self, request: SummaryRequest) -> Summary:
        turns = tuple(request.turns)
        if turns:
            header = f"Extractive summary of {len(turns)} turns."
        else:
            header = "Summary of 0 turns (extractive): nothing to summarize."
        units = [u for i, turn in enumerate(turns) for u in _units(i, turn)]
        _score(units, turns)
        chosen = self._select(units, header)
        text = _render(header, chosen)

        reask = request.attempt > 1 or request.feedback is not None
        if reask:
            # Correctness beats length: on a re-ask every required literal goes in, even when
            # that takes the summary past max_tokens.
            missing = [v for v in dict.fromkeys(r.value for r in request.required)
                       if v and not _contains(text, v)]
            if missing:
                chosen, leftover = _recover(missing, units, chosen, turns)
                text = _render(header, chosen)
                leftover = [v for v in leftover if not _contains(text, v)]
                if leftover:
                    text += "\nLiterals: " + ", ".join(leftover)
        usage = {"input_tokens": _input_tokens(turns), "output_tokens": count_tokens(text)}
        return Summary(text=text, usage=usage, model="extractive")

    def _select(self, units: list[_Unit], header: str) -> list[_Unit]:
        budget = self.max_tokens - count_tokens(header + "\n")
        limit = len(units) if self.max_sentences is None else self.max_sentences
        chosen: list[_Unit] = []
        seen: set[str] = set()
        for unit in sorted(units, key=lambda u: (-u.score, u.turn, u.pos)):
            if len(chosen) >= limit or unit.score <= 0:  # no filler ("Sure.") to fill the budget
                break
            key = f"{unit.speaker}\0{' '.join(unit.text.split()).lower()}"
            if key in seen:  # agents repeat themselves (and retry tools): keep one copy
                continue
            cost = unit.line_cost
            if cost <= budget:
                chosen.append(unit)
                seen.add(key)
                budget -= cost
        # The per-line costs are an upper bound for the default counter; a custom counter need not
        # be additive, so check the rendered text and drop the weakest picks until it fits.
        chosen.sort(key=lambda u: (-u.score, u.turn, u.pos))
        while chosen and count_tokens(_render(header, chosen)) > self.max_tokens:
            chosen.pop()
        return chosen


# -- segmentation -------------------------------------------------------------------------------

def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split at line breaks and at sentence ends, never inside a token.

    A boundary needs whitespace after the punctuation and a capital, digit, quote, bracket or
    list marker after that; the word before it must not be an abbreviation (``e.g.``, ``No.``)
    or an initial (``J.``).
    """
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for m in _BOUNDARY.finditer(line):
            nxt = line[m.end():m.end() + 1]
            if not nxt or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'“‘([#*-`>"):
                continue
            word_start = max(line.rfind(" ", start, m.start()), line.rfind("\t", start, m.start()),
                             start - 1)
            word = line[word_start + 1:m.start() + 1].lstrip("(\"'“‘[")
            if word.lower() in _ABBREVIATIONS or _DOTTED_INITIALS.fullmatch(word):
                continue
            if word_start < start and _LIST_MARKER.fullmatch(word):  # "1. Cancel the order"
                continue
            piece = line[start:m.end()].strip()
            if piece:
                out.append(piece)
            start = m.end()
        piece = line[start:].strip()
        if piece:
            out.append(piece)
    return out


def _clip(text: str, limit: int = UNIT_CHARS) -> str:
    """``text`` cut before ``limit`` at a space, else at another break between tokens: a cut
    inside an ID or a path would write a truncated one, which the validator rightly calls a
    mutation. With no break at all, nothing of the text is kept."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", limit // 2, limit)
    if cut <= 0:
        cut = max((m.start() for m in TOKEN_BREAK.finditer(text, 0, limit)), default=0)
    return (text[:cut].rstrip() + " …").lstrip()


def _speaker(turn: Turn) -> str:
    if turn.role == "tool":
        return f"tool {turn.tool_name}" if turn.tool_name else "tool"
    return str(turn.role)


def _units(index: int, turn: Turn) -> Iterator[_Unit]:
    speaker = _speaker(turn)
    text = turn.text if isinstance(turn.text, str) else str(turn.text or "")
    pos = 0
    stripped = text[:SCAN_CHARS].lstrip()
    if turn.role == "tool" and stripped[:1] in ("{", "["):
        data, compact = _compact_json_text(text)
        if compact is not None:
            yield _Unit(index, 0, speaker, "returned " + compact, "json", data)
            pos = 1
            text = ""
    for sentence in split_sentences(text[:SCAN_CHARS]):
        yield _Unit(index, pos, speaker, _clip(sentence))
        pos += 1
    for call in turn.tool_calls:
        args = call.arguments if isinstance(call.arguments, dict) else {"": call.arguments}
        inner = ", ".join(f"{k}={_compact(v, 2)}" for k, v in list(args.items())[:JSON_ITEMS])
        more = ", …" if len(args) > JSON_ITEMS else ""
        yield _Unit(index, pos, speaker, f"called {call.name}({inner}{more})", "call", args,
                    call.name)
        pos += 1


# -- compact JSON -------------------------------------------------------------------------------

def _compact(value: Any, depth: int) -> str:
    """A short rendering that copies scalars as their exact text (no quotes, no escapes)."""
    if isinstance(value, dict):
        if depth <= 0 or not value:
            return f"{{{len(value)} keys}}" if value else "{}"
        shown = JSON_ITEMS if depth > 1 else 4  # nested objects get fewer keys
        items = [f"{k}={_compact(v, depth - 1)}" for k, v in list(value.items())[:shown]]
        return "{" + ", ".join(items) + (", …" if len(value) > shown else "") + "}"
    if isinstance(value, list):
        if depth <= 0 or not value:
            return f"[{len(value)} items]" if value else "[]"
        items = [_compact(v, depth - 1) for v in value[:3]]
        more = f", … {len(value)} items" if len(value) > 3 else ""
        return "[" + ", ".join(items) + more + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _clip(str(value), VALUE_CHARS)


def _compact_json_text(text: str) -> tuple[Any, str | None]:
    """(parsed JSON or None, compact rendering) of a tool result; (None, None) if not JSON."""
    if len(text) <= PARSE_CHARS:
        try:
            data = _loads(text)
        except (ValueError, RecursionError):
            return None, None
        if isinstance(data, dict):
            return data, _compact(data, 2)[1:-1] if data else "{}"
        return data, _compact(data, 2)
    # Too large to parse in the time a summary should take: the first scalar pairs of a prefix.
    pairs = []
    for m in _JSON_PAIR.finditer(text, 0, SCAN_CHARS):
        value = m.group(2)
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                value = value[1:-1]
        pairs.append(f"{m.group(1)}={_clip(str(value), VALUE_CHARS)}")
        if len(pairs) >= JSON_ITEMS:
            break
    size = f"{len(text) / 1e6:.1f}M chars"
    return None, f"({size}) " + (", ".join(pairs) + ", …" if pairs else "…")


# -- scoring ------------------------------------------------------------------------------------

_COURTESY = re.compile(r"(?i)(?:thanks?\b|thank you|hello|hi\b|hey\b|great\b|perfect\b|sure\b|"
                       r"you're welcome|no problem|i'm sorry|i apologi[sz]e)")
_ROLE_WEIGHT = {"user": 3.0, "assistant": 1.5, "tool": 1.5, "system": 0.3}


def _idish(word: str) -> bool:
    word = word.strip(".,;:!?()[]{}\"'")
    return len(word) >= 3 and (any(c.isdigit() for c in word) or "/" in word
                               or ("_" in word and len(word) >= 5) or "@" in word[1:])


def _score(units: list[_Unit], turns: tuple[Turn, ...]) -> None:
    last = max(len(turns) - 1, 1)
    first_user = next((i for i, t in enumerate(turns) if t.role == "user"), -1)
    for u in units:
        role = turns[u.turn].role
        score = _ROLE_WEIGHT.get(role, 1.0)
        score += 2.0 * u.turn / last  # the latest turns matter most for what happens next
        words = u.text.split()
        ids = sum(1 for w in words[:200] if _idish(w))
        score += min(ids, 3) * 0.8
        score -= max(0, u.line_cost - 40) / 100  # a long unit must earn its share of the budget
        if u.kind == "call":
            score += 2.0  # actions taken
        elif u.kind == "json":
            score += 1.0
        else:
            if role == "user":
                if u.pos == 0:
                    score += 1.0  # a request usually leads the message
                if u.turn == first_user:
                    score += 1.5 if u.pos == 0 else 0.5  # the user's goal
                if u.text.rstrip(" \"')").endswith("?"):
                    score += 1.5
            if not ids and (len(words) < 4 or len(words) < 10 and _COURTESY.search(u.text)):
                score -= 2.0  # "Sure.", "Thanks for the update!"
        u.score = score


# -- rendering and the re-ask -------------------------------------------------------------------

def _render(header: str, chosen: list[_Unit]) -> str:
    """One line per turn, units in conversation order; `` … `` marks skipped sentences. The
    ``key=value`` lines a re-ask adds follow their turn's line, on a line of their own."""
    lines = [header]
    ordered = sorted(chosen, key=lambda u: (u.turn, u.pos))
    i = 0
    while i < len(ordered):
        first = ordered[i]
        extra = first.kind == "extra"
        parts = [first.text]
        j = i + 1
        while j < len(ordered) and ordered[j].turn == first.turn and (
                (ordered[j].kind == "extra") == extra):
            gap = not extra and ordered[j].pos > ordered[j - 1].pos + 1
            parts.append(("… " if gap else "") + ordered[j].text)
            j += 1
        lines.append(f"{first.speaker}: " + ("; " if extra else " ").join(parts))
        i = j
    return "\n".join(lines)


def _contains(text: str, literal: str) -> bool:
    """``literal`` is in ``text``, not glued to a letter or digit (``100`` is not in ``1000``)."""
    start = text.find(literal)
    while start != -1:
        end = start + len(literal)
        before_ok = start == 0 or not (literal[0].isalnum() and text[start - 1].isalnum())
        after_ok = end == len(text) or not (literal[-1].isalnum() and text[end].isalnum())
        if before_ok and after_ok:
            return True
        start = text.find(literal, start + 1)
    return False


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """(key, scalar) pairs of a parsed JSON value, iteratively (no recursion limit)."""
    stack: list[tuple[str, Any]] = [(key, value)]
    while stack:
        k, v = stack.pop()
        if isinstance(v, dict):
            stack.extend(reversed([(str(kk), vv) for kk, vv in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(k, vv) for vv in v]))
        elif v is not None and not isinstance(v, bool):
            yield k, v


def _recover(missing: list[str], units: list[_Unit], chosen: list[_Unit],
             turns: tuple[Turn, ...]) -> tuple[list[_Unit], list[str]]:
    """Add, for each missing literal: the best unit that holds it, else a ``key=value`` line from
    the JSON it came from. Returns the new selection and the literals still not placed."""
    chosen = list(chosen)
    picked = {(u.turn, u.pos) for u in chosen}
    extra_pos = 10_000  # key=value lines sort after the turn's own units
    leftover: list[str] = []
    for literal in missing:
        if any(_contains(u.text, literal) for u in chosen):
            continue  # placed by a unit added for an earlier literal
        holders = [u for u in units if (u.turn, u.pos) not in picked and _contains(u.text, literal)]
        if holders:
            best = min(holders, key=lambda u: (-u.score, len(u.text), u.turn, u.pos))
            chosen.append(best)
            picked.add((best.turn, best.pos))
            continue
        line = _key_value_line(literal, units, turns)
        if line is not None:
            turn, speaker, text = line
            chosen.append(_Unit(turn, extra_pos, speaker, text, "extra"))
            extra_pos += 1
            continue
        leftover.append(literal)
    return chosen, leftover


def _key_value_line(literal: str, units: list[_Unit],
                    turns: tuple[Turn, ...]) -> tuple[int, str, str] | None:
    # Parsed JSON (tool results and tool-call arguments): the key whose value holds the literal.
    for u in units:
        if u.data is None:
            continue
        for key, value in _walk(u.data):
            if _contains(str(value), literal):
                shown = str(value) if len(str(value)) <= VALUE_CHARS else literal
                if u.kind == "call":
                    return u.turn, u.speaker, f"{u.name}({key}={shown})"
                return u.turn, u.speaker, f"{key}={shown}"
    # Tool results too large to parse: one linear search, then the key just before the hit.
    for i, turn in enumerate(turns):
        text = turn.text if isinstance(turn.text, str) else ""
        if turn.role != "tool" or len(text) <= PARSE_CHARS:
            continue
        at = text.find(literal)
        if at == -1:
            continue
        m = _KEY_BEFORE.search(text, max(0, at - 200), at)
        if m:
            return i, _speaker(turn), f"{m.group(1)}={literal}"
    return None


def _input_tokens(turns: tuple[Turn, ...]) -> int:
    """Tokens of the span; a huge turn is estimated from its scanned prefix, scaled by length."""
    total = 0
    for turn in turns:
        text = turn.text if isinstance(turn.text, str) else ""
        if len(text) <= SCAN_CHARS:
            total += count_tokens(text)
        else:
            total += round(count_tokens(text[:SCAN_CHARS]) * len(text) / SCAN_CHARS)
        for call in turn.tool_calls:
            total += count_tokens(json.dumps(call.arguments, ensure_ascii=False, default=str))
    return total
