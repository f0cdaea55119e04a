"""The archive: every literal a compaction extracted from its span, pinned or not, one call away.

The ledger is a budget; the archive is not. Each compaction writes into the audit log, beside its
record, every literal it extracted: value, kind, rule, role of its first sighting, turns of its
first and last sighting (a scan keeps one sighting per value: the last is the first
sighting in the latest compaction that saw it), how often it was seen, and the line of text around its first sighting.
``firewall recall``, ``Firewall.recall`` and the MCP tool ``recall`` find one again by any part
of it, or by words of its context line.

**The token tier.** Besides the literals, a compaction may sweep its span for the tokens no rule
extracted: every run of 4+ characters between whitespace, quotes and brackets that holds a
digit, ``/`` or ``@`` (DESIGN.md's naive floor, the gold's own tokenisation: ``45/100``,
``8.4MB``, ``/dev/null;``), archived with ``kind`` ``token`` and ``rule`` ``archive/token``
(``SWEPT_RULE``) and their context line like the others; but not a rule's literal with its
sentence's punctuation (``1809,`` beside ``1809``: ``bare``). One regex pass over the span; never
pinned, never in the block. At equal tier a rule's literal ranks above a swept token (its score
stays in the band just below the tier's: ``tier_score``), and the cap evicts swept tokens first.
``ArchiveLimits(tokens=False)`` turns the tier off.

Sensitive literals are kept only as their HMAC hash (``value_hash``): no value, no context line,
no search terms. They count toward the archive's size and are never returned, under any query.
A context line has every secret the scan found replaced by ``[secret]`` before it is stored.

Ranking, best first: the exact value, then a value the query begins or ends (an id's prefix, a
path's base name), then a whole part (a path segment, a snake_case/camelCase/dotted part: the
FTS index's tokens, as a phrase), then a part the query begins, then, only when no value
matched, context words (each word, or a longer token of the line holding it: a camelCase name's
part, see ``compounds``; a line holding all of them, then one holding some: the share of them
it holds, then the value nearest them in its line, then shorter lines: BM25 without its IDF,
which a common word would make a scan); recency (last compaction, last turn) breaks ties. Each
tier gives a score in its own band (``SCORES``), so a better tier always ranks first.

This module holds the model, the entries a compaction writes, and the query plan; the stores
are ``archive_sqlite`` (FTS5, in the SQLite audit log) and ``archive_pg`` (PostgreSQL).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..literals import (LITERAL_KINDS, SECRET_MIN_CHARS, SENTENCE_PUNCTUATION, Literal,
                        SecretIndex)
from ..turns import Turn

SECRET_MASK = "[secret]"
ESCAPED = 6  # characters of a JSON escape (\\uXXXX) per character of a secret, at most
CONTEXT_CHARS = 160  # the context line is clipped to about this many characters around the value
DEFAULT_LIMIT = 10
MAX_LIMIT = 200
# a longer query than the longest value kept (the ledger's LITERAL_MAX_CHARS, a layer this one
# does not import) finds none
MAX_QUERY_CHARS = 8192
CANDIDATES = 200  # rows an FTS tier ranks at most (newest first): bounds a common word's cost
CONTEXT_CANDIDATES = 50  # the same for context words, whose lines are longer to rank
PROXIMITY_CHARS = 12  # characters between a value and a query word that halve its proximity

# score bands per tier: a better tier always outranks a worse one
SCORES = {"exact": 5.0, "prefix": 4.0, "suffix": 4.0, "part": 3.0, "part_prefix": 2.0,
          "context": 1.0, "context_some": 0.1}
SOME_WORDS = 0.8  # a line holding some of the words: its score within the tier, scaled to fit

NO_ARCHIVE = ("a JSONL audit log keeps no archive of literals (nothing to recall from): "
              "use the SQLite log (the default) or a PostgreSQL one (--audit-db URL)")


SWEPT_RULE = "archive/token"  # the rule of a token the sweep archived (no pack's rule)
SWEPT_KIND = "token"
TOKEN_MAX_CHARS = 1024  # a longer run (a base64 blob, a minified line) is no token anyone types
# the gold's split (DESIGN.md): whitespace, quotes and brackets; a token is a run of 4+ others
# at the start of a run only (the lookbehind), its non-ID characters taken without backtracking
# (possessive), so a long run without a digit costs one pass, not one per start
_TOKEN = re.compile(r"""(?<![^\s"'`()\[\]{}<>])[^\s"'`()\[\]{}<>\d/@]*+[\d/@]"""
                    r"""[^\s"'`()\[\]{}<>]*""")
_SPLIT_CHAR = re.compile(r"""[\s"'`()\[\]{}<>]""")


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """The cap on one conversation's archive: when a compaction leaves more literals or more
    bytes (values and context lines) than this, the literals seen least, and longest ago, are
    dropped until it fits, swept tokens (``tokens``) before any rule's literal; each drop is
    recorded (``archive_dropped``). ``tokens``: also archive the span's tokens no rule
    extracted (the token tier, see the module)."""

    max_literals: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    tokens: bool = True

    def __post_init__(self) -> None:
        if self.max_literals < 1 or self.max_bytes < 1:
            raise ValueError(f"archive limits must be positive, not {self}")


@dataclass(slots=True)
class ArchiveEntry:
    """One literal as a compaction writes it. ``value``/``context``/``parts`` are ``None``
    exactly when ``sensitive``: only ``value_hash`` stands for it."""

    value: str | None
    value_hash: str
    kind: str
    rule: str
    role: str
    first_turn: int
    last_turn: int
    seen: int
    context: str | None
    sensitive: bool
    parts: str | None
    # a sensitive entry's value, in memory only (never stored, never shown): what the write
    # forgets where an earlier compaction archived it in clear (``archive_forget``)
    secret: str | None = field(default=None, repr=False, compare=False)

    @property
    def size(self) -> int:
        """Its bytes toward ``ArchiveLimits.max_bytes``."""
        return 64 + len((self.value or "").encode("utf-8", "surrogatepass")) + \
            len((self.context or "").encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class ArchiveHit:
    """One answer of a recall; ``score``: higher is better (see ``SCORES``)."""

    value: str
    kind: str
    rule: str
    role: str
    first_turn: int
    last_turn: int
    compaction: int
    conversation: str
    context: str | None
    score: float
    match: str = field(default="", compare=False)  # the tier that found it

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("match")
        return data


# ── search terms ───────────────────────────────────────────────────────────────────────────────

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps: letters and digits


def terms(text: str) -> list[str]:
    """``text`` cut as the index cuts it: runs of letters and digits, camelCase split too
    (``getUserName`` → get, User, Name), so a query's parts line up with a value's."""
    out = []
    for word in _WORD.findall(text):
        if word.lower() == word:  # no capital letter: nothing for the camelCase split
            out.append(word)
        else:
            out += [p for p in _CAMEL.split(word) if p]
    return out


def value_parts(value: str) -> str:
    """The FTS text of a value: its terms (path segments, base name and extension, the parts of
    snake_case, camelCase and dotted names, an id's groups), space-separated, in order, so a
    phrase of consecutive terms (``models py``) finds ``src/app/models.py``."""
    return " ".join(terms(value))


def phrase(words: Sequence[str]) -> str:
    """An FTS5 phrase of ``words`` (letters and digits only: nothing to escape)."""
    return '"' + " ".join(words) + '"'


# ── what a compaction writes ───────────────────────────────────────────────────────────────────


def archive_entries(literals: Iterable[Literal], text_of: Callable[[Literal], str | None], *,
                    key: bytes, secrets: Iterable[str] = (),
                    span: Iterable[tuple[int, Turn]] | None = None) -> list[ArchiveEntry]:
    """One entry per distinct value of ``literals`` (a compaction's scan of its span), first
    sighting first. ``text_of(lit)``: the text of the turn it was seen in (its ``field`` when a
    JSON value), for the context line. ``secrets``: sensitive values known beyond these
    literals (the ledger's), masked in every context line too. ``span``: the compacted turns
    (turn number, turn), to sweep for the tokens no rule extracted (the token tier, after the
    literals); None sweeps nothing."""
    from .keys import escape_surrogates, literal_hash
    from ..literals import literal_kind  # the gold's kinds: the kinds an eval reports

    literals = list(literals)
    secret_values = {lit.value for lit in literals if lit.sensitive} | set(secrets)
    secret_values |= spelled(secret_values)  # its URL-encoded and base64 spellings are secrets
    index = SecretIndex(list(secret_values))
    # every spelling the index knows (a JSON-escaped secret's decoded one too) is masked
    masker, reach = _masker(secret_values | set(index.secrets))
    by_value: dict[str, ArchiveEntry] = {}
    first: dict[str, Literal] = {}
    for lit in sorted(literals, key=lambda l: l.turn):
        entry = by_value.get(lit.value)
        if entry is not None:
            entry.last_turn = max(entry.last_turn, lit.latest)
            entry.seen += max(lit.count, 1)
            continue
        sensitive = lit.sensitive or lit.value in secret_values or index.touches(lit.value)
        by_value[lit.value] = ArchiveEntry(
            # a lone surrogate is stored as the text \udXXX (as the audit log does); the hash
            # keeps the exact value
            value=None if sensitive else escape_surrogates(lit.value),
            value_hash=literal_hash(lit.value, key),
            kind=literal_kind(lit.value), rule=lit.rule, role=lit.role,
            first_turn=max(lit.turn, 0), last_turn=max(lit.latest, 0), seen=max(lit.count, 1),
            context=None,
            sensitive=sensitive,
            parts=None if sensitive else value_parts(escape_surrogates(lit.value)),
            secret=lit.value if sensitive else None)
        first[lit.value] = lit
    for value, entry in by_value.items():
        if not entry.sensitive:
            line = context_line(first[value], text_of(first[value]), masker, reach)
            entry.context = None if line is None else escape_surrogates(line)
    entries = list(by_value.values())
    if span is not None:
        entries += swept_entries(span, {lit.value for lit in literals}, key=key,
                                 secrets=secret_values, index=index, mask=(masker, reach))
    return entries


def spelled(secret_values: Iterable[str]) -> set[str]:
    """The URL-encoded and base64 spellings of the secrets long enough to spread
    (``spellings.encoded_spellings``)."""
    from ..spellings import encoded_spellings

    return {s for v in secret_values if len(v) >= SECRET_MIN_CHARS
            for s in encoded_spellings(v)}


ARCHIVE_TOKENS_ENV = "FIREWALL_ARCHIVE_TOKENS"


def archive_from_env() -> ArchiveLimits:
    """The hooks' archive: the token tier on unless ``$FIREWALL_ARCHIVE_TOKENS`` is ``0``
    (or ``false``, ``no``, ``off``)."""
    import os

    off = os.environ.get(ARCHIVE_TOKENS_ENV, "").strip().lower() in ("0", "false", "no", "off")
    return ArchiveLimits(tokens=not off)


def swept_entries(span: Iterable[tuple[int, Turn]], extracted: set[str], *, key: bytes,
                  secrets: set[str], index: SecretIndex,
                  mask: tuple[Callable[[str], str], int]) -> list[ArchiveEntry]:
    """The token tier: one entry per distinct token of ``span`` (see the module) that is not a
    value of ``extracted``, first sighting first (``sweep``); a sensitive one is kept only as
    its hash, like a sensitive literal."""
    from .keys import escape_surrogates, literal_hash

    masker, reach = mask
    entries = []
    for token, (number, role, text, start, last, count, sensitive) in \
            sweep(span, extracted, secrets=secrets, index=index).items():
        context = None
        if not sensitive:
            sighting = Literal(token, SWEPT_RULE, number, role, start, start + len(token))
            line = context_line(sighting, text, masker, reach)
            context = None if line is None else escape_surrogates(line)
        value = None if sensitive else escape_surrogates(token)
        entries.append(ArchiveEntry(
            value=value, value_hash=literal_hash(token, key), kind=SWEPT_KIND, rule=SWEPT_RULE,
            role=role, first_turn=max(number, 0), last_turn=max(last, 0), seen=count,
            context=context, sensitive=sensitive,
            parts=None if value is None else value_parts(value),
            secret=token if sensitive else None))
    return entries


def swept_values(span: Iterable[tuple[int, Turn]], extracted: set[str],
                 secrets: Iterable[str] = ()) -> list[str]:
    """The values the token tier would archive for ``span`` (its non-sensitive tokens not in
    ``extracted``), first sighting first: what ``firewall replay`` counts one call away,
    without the entries' context lines and hashes."""
    secrets = set(secrets)
    found = sweep(span, extracted, secrets=secrets, index=SecretIndex(list(secrets)))
    return [token for token, sighting in found.items() if not sighting[6]]


def bare(token: str) -> str | None:
    """``token`` without the sentence punctuation free text glues to a word (``1809,``,
    ``/dev/null;``, ``aliases.sh:``), when it ends so and the rest ends in a letter or a digit
    (``src/..`` keeps its dots); else None. The sweep archives no token whose bare form is a
    rule's literal of the same compaction: a recall for it finds that literal by its parts,
    and its row would hold nothing new."""
    stripped = token.rstrip(SENTENCE_PUNCTUATION)
    return stripped if stripped != token and stripped[-1:].isalnum() else None


def sweep(span: Iterable[tuple[int, Turn]], extracted: set[str], *, secrets: set[str],
          index: SecretIndex) -> dict[str, list[Any]]:
    """The distinct tokens of ``span`` (see the module) not in ``extracted``, as written or
    ``bare``, read where the gold reads a turn (its text and the string values of its tool
    calls' arguments), first sighting first: token → [turn, role, text, start, last turn, count, sensitive]. A token
    that holds a secret, lies inside one, or overlaps where one is written (a secret with a
    space in it: ``card:4111``) is sensitive."""
    from ..json_values import decoded, scalar_leaves

    short = [s for s in secrets if 0 < len(s) < SECRET_MIN_CHARS]  # masked where found only
    spread = sorted((s for s in set(secrets) | set(index.secrets)
                     if len(s) >= SECRET_MIN_CHARS and _SPLIT_CHAR.search(s)), key=len,
                    reverse=True)
    spanning = re.compile("|".join(map(re.escape, spread))) if spread else None
    seen: dict[str, list[Any]] = {}
    for number, turn in span:
        if turn.role == "system":
            continue
        texts = [turn.text] + [s for c in turn.tool_calls for _, s in scalar_leaves(c.arguments)]
        for text in texts:
            if not text:
                continue
            regions = [m.span() for m in spanning.finditer(text)] if spanning else []
            for m in _TOKEN.finditer(text):
                token = m.group()
                if token in extracted or not 4 <= len(token) <= TOKEN_MAX_CHARS or \
                        (token[-1] in SENTENCE_PUNCTUATION and bare(token) in extracted):
                    continue
                known = seen.get(token)
                # most texts hold no secret with a space in it: no region to test
                hidden = bool(regions) and any(s < m.end() and m.start() < e
                                               for s, e in regions)
                if known is not None:
                    if number > known[4]:
                        known[4] = number
                    known[5] += 1
                    known[6] = known[6] or hidden
                    continue
                seen[token] = [number, turn.role, text, m.start(), number, 1, hidden]
    for token, sighting in seen.items():
        sighting[6] = sighting[6] or token in secrets or index.touches(token) or \
            ("\\" in token and index.touches(decoded(token))) or \
            any(s in token for s in short)
    return seen


_ESCAPE = re.compile(r'\\+(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SURROGATE = re.compile("[\ud800-\udfff]")
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                  "t": "\t"}


_ESCAPED_CHARS = frozenset(_SHORT_ESCAPES.values())  # what a short JSON escape stands for


def _unescaped(text: str) -> str:
    """``text`` with its JSON escapes read, leniently (any number of backslashes, anywhere):
    what tells whether a secret may be spelled with escapes in it."""
    out = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1)
                      else _SHORT_ESCAPES[m.group(2)], text)
    try:  # a surrogate pair read as two code units is one character
        return out.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        return out


def _masker(secret_values: set[str]) -> tuple[Callable[[str], str], int]:
    """What replaces every secret of a text by ``SECRET_MASK``, in any spelling (plain, or
    with JSON escapes: ``WG2x\\/2kU``), and the longest secret's length (how far beyond a
    window a secret cut by it may start or end)."""
    long = sorted((s for s in secret_values if len(s) >= SECRET_MIN_CHARS), key=len, reverse=True)
    if not long:
        return (lambda text: text), 0
    return _Mask(_Plain(long), long), len(long[0])


class _Plain:
    """Where secrets are written plainly in a text: leftmost first, the longest at a place, not
    overlapping (what a regex alternation of them, longest first, finds), in one Aho-Corasick
    pass; an alternation of tens of secrets and their spellings tried each branch at every
    character (most of a compaction's archive time with 55 secrets)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        import ahocorasick

        self.automaton = ahocorasick.Automaton()
        for secret in secrets:
            self.automaton.add_word(secret, len(secret))
        self.automaton.make_automaton()

    def search(self, text: str) -> bool:
        return next(self.automaton.iter(text), None) is not None

    def spans(self, text: str) -> list[tuple[int, int]]:
        found = sorted((end + 1 - size, -size) for end, size in self.automaton.iter(text))
        spans: list[tuple[int, int]] = []
        for start, size in found:
            if not spans or start >= spans[-1][1]:
                spans.append((start, start - size))
        return spans

    def findall(self, text: str) -> set[str]:
        return {text[start:end] for start, end in self.spans(text)}

    def sub(self, mask: str, text: str) -> str:
        spans = self.spans(text)
        if not spans:
            return text
        out, at = [], 0
        for start, end in spans:
            out += (text[at:start], mask)
            at = end
        out.append(text[at:])
        return "".join(out)


class _Mask:
    """The masker of ``_masker`` when there are secrets; ``clean`` tells, once per line, that a
    line holds none, so that no window of it needs masking (most lines of a span)."""

    def __init__(self, plain: _Plain, secrets: Sequence[str] = ("\\",)) -> None:
        self.plain = plain
        # no secret holds a character a short JSON escape (\\n, \\", \\/...) stands for:
        # then, in a text without \\u escapes, a secret its reading holds is written plainly
        self.plain_reading = not any(c in _ESCAPED_CHARS for s in secrets for c in s)
        self.masked: dict[str, str] = {}  # a short line holding many tokens is masked once
        self.lines: dict[tuple[int, int], tuple[str, bool]] = {}

    def __call__(self, text: str) -> str:
        if len(text) <= 4 * CONTEXT_CHARS:
            if text not in self.masked:
                if len(self.masked) >= 4096:
                    self.masked.clear()
                self.masked[text] = self.spell(text)
            return self.masked[text]
        return self.spell(text)

    def spell(self, text: str) -> str:
        if "\\" in text:  # the escaped spellings of the secrets its reading holds, longest first
            from ..json_values import spelling_pattern

            spelled = self.plain.findall(self.reading(text))
            for secret in sorted(spelled, key=len, reverse=True):
                text = spelling_pattern(secret).sub(SECRET_MASK, text)
        return self.plain.sub(SECRET_MASK, text)

    def clean(self, text: str, start: int, line: str) -> bool:
        """``line`` (of ``text``, from ``start``) holds no secret in any spelling: none written
        plainly, none in its reading through its escapes; so neither does any piece of it that
        cuts no escape (a context line's ends may cut one, masked or not). Read once per line,
        not once per value's window of it (a JSON tool result is one line of many values)."""
        known = self.lines.get((id(text), start))
        if known is None or known[0] is not text:  # the text is kept: its id is not reused
            if len(self.lines) >= 4096:
                self.lines.clear()
            known = self.lines[(id(text), start)] = (text, not self.plain.search(line) and (
                "\\" not in line or not self.plain.search(self.reading(line))))
        return known[1]

    def reading(self, text: str) -> str:
        """``text`` read through its JSON escapes, as far as a secret could be spelled in them:
        as written when it has only short escapes that no secret holds (no surrogate pair to
        join), so that its reading holds exactly the secrets it holds between them."""
        return text if self.plain_reading and "\\u" not in text and \
            _SURROGATE.search(text) is None else _unescaped(text)


def context_line(lit: Literal, text: str | None, mask: Callable[[str], str],
                 reach: int = 8192) -> str | None:
    """The line around ``lit``'s sighting in ``text``, secrets masked *before* it is clipped
    (a clip must never keep half a secret), then clipped to about ``CONTEXT_CHARS`` around the
    value. ``reach``: the longest secret (a secret cut by the window is masked whole)."""
    if not text:
        return None
    at = lit.start if lit.field == "text" and text[lit.start:lit.end] == lit.value \
        else text.find(lit.value)
    if at < 0:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at + len(lit.value))
    end = len(text) if end < 0 else end
    line = text[start:end]
    at -= start
    # clip around the value first (cheap on a huge one-line JSON result), with margins of the
    # longest secret, so that a secret the window cuts is still masked whole
    margin = CONTEXT_CHARS
    lo, hi = max(0, at - margin), min(len(line), at + len(lit.value) + margin)
    if reach and "\\" in line[max(0, lo - ESCAPED * reach):hi + ESCAPED * reach]:
        reach *= ESCAPED  # a secret spelled with escapes is longer (\\u0041 for A)
    window = line[max(0, lo - reach):min(len(line), hi + reach)]
    clean = getattr(mask, "clean", None)
    if clean is None or not clean(text, start, line):
        window = mask(window)
    value_at = window.find(lit.value)
    if value_at < 0:  # the value itself was inside a masked secret: keep only the mask
        return None
    half = max(0, (CONTEXT_CHARS - len(lit.value)) // 2)
    cut = window[max(0, value_at - half):value_at + len(lit.value) + half]
    return " ".join(cut.split()) or None


# ── queries ────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Query:
    """A recall's question, checked once for every store."""

    text: str
    conversation: str | None = None
    kind: str | None = None
    rule: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def of(cls, text: str, *, conversation: str | None = None, kind: str | None = None,
           rule: str | None = None, limit: int = DEFAULT_LIMIT) -> Query:
        from ..errors import FirewallError

        text = text.strip()
        if not text:
            raise FirewallError("recall needs a query: a value, a part of one (a base name, a "
                                "path segment, an id's first characters) or words of its context")
        if not 1 <= limit <= MAX_LIMIT:
            raise FirewallError(f"recall limit must be 1 to {MAX_LIMIT}, not {limit}")
        if len(text) > MAX_QUERY_CHARS:  # each word is searched for in every candidate line
            raise FirewallError(f"recall query of {len(text):,} characters: at most "
                                f"{MAX_QUERY_CHARS:,}, the longest value the archive keeps")
        kinds = (*LITERAL_KINDS, SWEPT_KIND)
        if kind and kind not in kinds:  # a typo would find nothing, and say nothing matches
            raise FirewallError(f"recall kind must be one of {', '.join(kinds)}, not {kind!r}")
        return cls(text, conversation or None, kind or None, rule or None, limit)

    @property
    def words(self) -> list[str]:
        return terms(self.text)

    def filters(self, mark: str) -> tuple[list[str], list[str]]:
        """The SQL conditions of the optional filters (conversation, kind, rule) on the archive
        aliased ``a``, written with the driver's placeholder ``mark``, and their values."""
        wanted = (("conversation_id", self.conversation), ("kind", self.kind),
                  ("rule", self.rule))
        given = [(column, value) for column, value in wanted if value is not None]
        return [f"a.{column} = {mark}" for column, _ in given], [v for _, v in given]

    def closeness(self, value: str) -> float:
        """Within a part tier, a query that is more of the value ranks higher."""
        return min(0.9, len(self.text) / max(len(value), 1))


# words nearly every context line holds: asked for, they would make the index read most of
# its rows and rank nothing (kept when a query has no other word)
STOP_WORDS = frozenset(
    "a an and are as at be but by for from has have in into is it its of on or that the "
    "then this to was were with".split())


def context_terms(words: Sequence[str]) -> list[str]:
    """The words of a context query worth asking the index for."""
    kept = [w for w in words if w.lower() not in STOP_WORDS]
    return kept or list(words)


COMPOUND_VALUES = 20  # values a context word's compounds are read from, newest first


def compounds(word: str, values: Iterable[str]) -> list[str]:
    """The index tokens of ``values`` (runs of letters and digits, lowercased: how FTS5 and
    the split ``tsvector`` cut a line) that hold ``word`` inside a longer one:
    ``unicodeencodeerror`` for ``Encode``. A query's words are cut at camelCase (``terms``)
    while a line's index keeps ``UnicodeEncodeError`` whole, so a line holding it (as
    ``context_match`` counts: a substring) would be found by no word; the values whose parts
    hold the word (``UnicodeEncodeError`` is a literal of the archive too) name the tokens
    to ask for beside it."""
    low = word.lower()
    found: list[str] = []
    for value in values:
        for token in _WORD.findall(value.lower()):
            if low in token and token != low and token not in found:
                found.append(token)
    return found


def context_match(asked: Sequence[str], context: str | None,
                  value: str | None = None) -> tuple[str, float]:
    """The tier and score of a context line: ``context`` when it holds every asked word,
    ``context_some`` when only some (a swept token's line holding all the words ranks above
    a rule's literal's line holding one of them)."""
    within = context_relevance(asked, context, value)
    if len(asked) > 1:
        text = (context or "").lower()
        held = set(_WORD.findall(text))
        if not all(w.lower() in held or w.lower() in text for w in asked):
            return "context_some", within * SOME_WORDS
    return "context", within


def context_relevance(asked: Sequence[str], context: str | None,
                      value: str | None = None) -> float:
    """The score of a context line within its tier (0..0.9): the share of the asked words it
    holds, then how near the value sits to them in its line (term proximity: a line holding
    several literals, the one beside the words first), then shorter lines first (BM25's length
    normalisation; its IDF would need every matching row read, which a common word makes a
    scan of the archive)."""
    text = (context or "").lower()
    held = set(_WORD.findall(text)) if len(asked) > 1 else set()
    # one word: the index matched it; several: some of them (OR) or all (AND)
    coverage = 1.0 if len(asked) == 1 else \
        sum(w.lower() in held or w.lower() in text for w in asked) / len(asked)
    return 0.6 * coverage + 0.2 * proximity(asked, text, (value or "").lower()) + \
        0.1 * min(1.0, 60 / max(len(context or ""), 1))


def proximity(asked: Sequence[str], text: str, value: str) -> float:
    """1 when an asked word touches ``value`` in ``text`` (both lowercased), falling with the
    characters between them (1/2 at ``PROXIMITY_CHARS``); 0 when the value or the words are
    not there. Words inside the value itself do not count: they are its parts, not its
    context (a query of parts is the part tier's)."""
    at = text.find(value) if value else -1
    if at < 0:
        return 0.0
    end, gap = at + len(value), None
    for word in {w.lower() for w in asked}:
        i = text.find(word)
        while i >= 0:
            j = i + len(word)
            if j <= at or i >= end:  # outside the value
                d = at - j if j <= at else i - end
                gap = d if gap is None else min(gap, d)
            i = text.find(word, i + 1)
    return 0.0 if gap is None else PROXIMITY_CHARS / (PROXIMITY_CHARS + gap)


def tier_score(within: float, swept: bool) -> float:
    """The score of a hit within its tier: a rule's literal keeps ``within`` (0..0.9); a
    swept token (``SWEPT_RULE``) falls in the band just below the tier's (-0.099..-0.009),
    so at equal tier every literal a rule extracted ranks first, and no worse tier reaches it."""
    return -0.099 + within / 10 if swept else within


def rank(found: dict[Any, tuple[str, float, tuple[int, int]]], limit: int) -> list[Any]:
    """Keys of ``found`` (key → tier, score within the tier (0..1), recency) best first."""
    return sorted(found, key=lambda k: (-SCORES[found[k][0]] - found[k][1],
                                        tuple(-x for x in found[k][2])))[:limit]


def better(found: dict[Any, tuple[str, float, tuple[int, int]]], key: Any, tier: str,
           within: float, recency: tuple[int, int]) -> None:
    """Record ``key`` as found by ``tier`` unless a better tier found it already."""
    old = found.get(key)
    if old is None or SCORES[tier] + within > SCORES[old[0]] + old[1]:
        found[key] = (tier, within, recency)


# ── copying an archive into another log (``firewall audit copy``) ─────────────────────────────

ROW_FIELDS = ("conversation_id", "value", "value_hash", "kind", "rule", "role", "first_turn",
              "last_turn", "first_compaction", "compaction", "seen", "parts", "context",
              "sensitive", "bytes")
DROPPED_FIELDS = ("conversation_id", "compaction", "value", "value_hash", "rule", "seen",
                  "last_turn", "reason")


def copied_row(row: dict[str, Any], *, numbers: dict[tuple[str, int], int],
               key: bytes | None) -> dict[str, Any]:
    """An archive row of one log as another log stores it: its compaction numbers as the copy
    renumbered the records (``numbers``: (conversation, source number) → number here), and,
    with ``key`` (``--rekey``), a kept value's hash made again under it (a sensitive row has
    only its hash, which keeps the source's key)."""
    from .keys import literal_hash

    row = dict(row)
    conversation = row["conversation_id"]
    for column in ("first_compaction", "compaction"):
        if column in row:
            row[column] = numbers.get((conversation, row[column]), row[column])
    if key is not None and row.get("value") is not None and "value_hash" in row:
        row["value_hash"] = literal_hash(row["value"], key)
    return row


def hint_line(count: int, tool: str = "recall", conversation: str | None = None) -> str:
    """The line ending a re-injected block where the agent has the recall tool (``recall``
    of ``firewall mcp``, or the wrappers' ``recall_literal``, which answer one conversation
    already). ``conversation``: the id to pass, where the tool searches a log shared by many
    (the MCP server of the hooks: every session of the user)."""
    # the id as a JSON string of ASCII (a caller's id may hold quotes, controls, bidi marks),
    # with no < or > to open or close anything that reads as a block
    quoted = json.dumps(conversation or "").replace("<", "\\u003c").replace(">", "\\u003e")
    scope = f" and conversation {quoted}" if conversation else ""
    return (f"[literal-firewall archive: {count:,} literals of this conversation, pinned or not, "
            f"are one call away: call the `{tool}` tool with any part of one (a base name, a path "
            f"segment, an id's first characters) or words of its context{scope}]")


__all__ = ["ArchiveEntry", "ArchiveHit", "ArchiveLimits", "NO_ARCHIVE", "Query", "SWEPT_RULE",
           "archive_entries", "compounds", "context_line", "context_match", "hint_line", "sweep",
           "swept_entries", "swept_values", "terms", "tier_score", "value_parts"]
