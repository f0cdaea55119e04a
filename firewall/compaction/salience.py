"""Salience: which ledger entries a budget keeps, as a model shipped as data.

When the block is over budget, ``Ledger.fit`` evicts the entries of lowest salience first. The
salience of an entry is its *value per token*: a score of how likely a later tool call uses it,
divided by the tokens writing it costs (a budget is a knapsack). The score is a product of
factors, one per *term* of the model, each computed from one named feature of the entry and of
the span it was pinned from (see ``FEATURES``)::

    {"feature": "tier", "base": 2}         factor = 2 ** x
    {"feature": "count", "power": 0.5}     factor = x ** 0.5
    {"feature": "log_count", "weight": w}  factor = exp(w * x)

times ``exp(bias)``. With ``"link": "odds"`` the product is the score itself; with
``"link": "logistic"`` (a fitted logistic regression) the score is the probability
``product / (1 + product)``. Required entries always come first; ties go to user-typed values,
then to the latest seen.

The shipped default, ``salience.json`` in the package, is the one ranking the ledger has: the
hand-set weighting ``2^tier * 5^id_shaped * priority/50 * sqrt(count) * (1 + last_seen/100)``
per token of the value. Tiers: 0 one of a listing (more than ``LISTED_MAX`` values of its kind
in one message), 1 specific (one of few, shown elsewhere too, or a listed path in a folder the
span used), 2 typed by the user or used by the agent (agents re-type what they typed). Why
each factor: an ID-shaped value cannot be rebuilt from a paraphrase; the working set recurs
(on the coding and retail dev sets a value seen 9 times or more is used later six to ten times
as often as one seen once); value per token replaced a lexicographic order (required, user,
ID-shaped, specific, priority, recency) that filled budgets with listing entries (coding dev,
85.3 % of the ID-like gold against 68.8 % at 5 % of the span). ``firewall salience fit
LOG...`` fits a logistic model on recorded conversations, whose labels are free: an entry
pinned at a cut is positive when a later tool call uses its value (DESIGN.md's gold).
``--salience FILE`` (``$FIREWALL_SALIENCE`` for the hooks) uses such a file instead.

Features are plain Python over the entry and its span (``SpanContext``); the one that needs an
extra pass over the span's calls (``in_address`` / ``in_written`` / ``written_only``: in which
argument the agent used the value) is computed only when a model names it.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FirewallError
from .ledger import VALUE_SEP, LedgerEntry, value_text
from .span_uses import (ASSISTANT, CALL, LISTED_MAX, USER, SpanUses, folder, id_shaped,
                        near_folders, occurring, uses)
from ..tokens import TokenCounter, count_tokens

FORMAT = "literal-firewall salience 1"
DEFAULT_PATH = Path(__file__).with_name("salience.json")
ENV = "FIREWALL_SALIENCE"  # the hooks' way to name a salience file
LINKS = ("odds", "logistic")

# Arguments whose value is text the agent writes (a file body, an edit, a plan), not a name of
# something it addresses: a value used there is re-typed content, not a path or an id.
WRITTEN_ARGUMENTS = frozenset({
    "content", "new_string", "old_string", "new_str", "old_str", "file_text", "text", "body",
    "todos", "plan", "description", "prompt", "message", "insert_text", "patch", "diff",
    "code", "source", "edits"})
ADDRESS, WRITTEN = 1, 2  # bits of ``SpanContext.calls``


class SalienceError(FirewallError, ValueError):
    """A salience file is not a valid model (the message names the file and the field)."""


@dataclass
class SpanContext:
    """What the span says about its entries: where they were used (``uses``: ledger bits
    ``USER | CALL | ASSISTANT``, and ``listed``), in which kind of call argument (``calls``:
    ``ADDRESS | WRITTEN``, only when a model needs it), and the turn range of the entries."""

    uses: SpanUses
    calls: dict[str, int] = field(default_factory=dict)
    start: int = 0
    end: int = 0
    near: frozenset[str] = frozenset()  # folders of the paths the span used
    # per value of a listing: how many other values of the same listing the agent used
    siblings_used: dict[str, int] = field(default_factory=dict)


def _kind_of_argument(arg: str) -> int:
    leaf = arg.rsplit(".", 1)[-1]
    leaf = leaf.split("[", 1)[0]
    return WRITTEN if leaf in WRITTEN_ARGUMENTS else ADDRESS


def call_arguments(turns: Sequence[Any]) -> dict[int, str]:
    """The span's call arguments, joined by the kind of argument they are (``ADDRESS`` or
    ``WRITTEN``)."""
    from ..json_values import scalar_leaves

    parts: dict[int, list[str]] = {ADDRESS: [], WRITTEN: []}
    for turn in turns:
        for call in getattr(turn, "tool_calls", ()) or ():
            args = call.arguments if isinstance(call.arguments, dict) else {}
            for arg, text in scalar_leaves(args):
                parts[_kind_of_argument(arg or "")].append(text)
    return {bit: "\n".join(texts) for bit, texts in parts.items()}


def span_context(entries: Sequence[LedgerEntry], turns: Sequence[Any], *,
                 calls: bool = True) -> SpanContext:
    """``SpanContext`` of ``entries`` in ``turns``; ``calls``: also in which kind of argument
    each value was passed (one more pass)."""
    entries = list(entries)
    used = uses(entries, turns)
    where = occurring((e.value for e in entries), call_arguments(turns)) if calls else {}
    seen = [e.last_seen for e in entries] + [e.first_seen for e in entries]
    near = frozenset(near_folders(used))
    return SpanContext(used, where, min(seen, default=0), max(seen, default=0), near,
                       siblings_used(entries, used))


def siblings_used(entries: Sequence[LedgerEntry], used: SpanUses) -> dict[str, int]:
    """For each value of a listing (more than ``LISTED_MAX`` values of one kind in one
    message), how many *other* values of that listing the agent passed to a tool or repeated:
    a listing the agent works through, not one it glanced at."""
    listed = getattr(used, "listed", {})
    groups: dict[tuple, int] = {}
    for e in entries:
        if used.get(e.value, 0) & (CALL | ASSISTANT):
            key = (e.first_seen, e.role, e.kind)
            groups[key] = groups.get(key, 0) + 1
    out = {}
    for e in entries:
        if listed.get(e.value, 1) > LISTED_MAX:
            n = groups.get((e.first_seen, e.role, e.kind), 0)
            n -= 1 if used.get(e.value, 0) & (CALL | ASSISTANT) else 0
            if n:
                out[e.value] = n
    return out


# ── features ────────────────────────────────────────────────────────────────────────────────

def _tier(e: LedgerEntry, c: SpanContext) -> float:
    """2: typed by the user, or used by the agent (in a call or its text); 1: specific (one of
    few values of its kind in its message, shown elsewhere, or a listed path in the folder of
    a path the span used); 0: one of a listing."""
    u = c.uses.get(e.value, 0)
    if e.role == "user" or u & (CALL | ASSISTANT):
        return 2
    return 1 if u or getattr(c.uses, "listed", {}).get(e.value, 1) <= LISTED_MAX or (
        "/" in e.value and folder(e.value) in c.near) else 0


def _listed(e: LedgerEntry, c: SpanContext) -> int:
    return getattr(c.uses, "listed", {}).get(e.value, 1)


def _age(e: LedgerEntry, c: SpanContext) -> float:
    return (c.end - e.last_seen) / (c.end - c.start + 1)


_DIGITS = frozenset("0123456789")


def _agent_used(e: LedgerEntry, c: SpanContext) -> bool:
    return bool(c.uses.get(e.value, 0) & (CALL | ASSISTANT))


def _value_tokens(e: LedgerEntry, c: SpanContext) -> int:
    return count_tokens(VALUE_SEP + value_text(e.value))

# name -> (function of the entry and its span, what it means)
FEATURES: dict[str, tuple[Callable[[LedgerEntry, SpanContext], float], str]] = {
    # the hand-set weighting's own features
    "tier": (_tier, "0 listed, 1 specific, 2 typed by the user or used by the agent"),
    "id_shaped": (lambda e, c: 1 if id_shaped(e.value) else 0,
                  "4+ characters with a digit, '/' or '@'"),
    "priority": (lambda e, c: e.priority / 50, "the rule's priority / 50"),
    "count": (lambda e, c: e.count, "sightings in the conversation so far"),
    "recency": (lambda e, c: 1 + e.last_seen / 100, "1 + turn of the latest sighting / 100"),
    # more signals, in a form a log-linear model weighs
    "log_priority": (lambda e, c: math.log(max(e.priority, 1) / 50), "log(priority / 50)"),
    "log_count": (lambda e, c: math.log(e.count), "log(sightings)"),
    "age": (_age, "turns since the latest sighting / the span's turns (0: seen last)"),
    "log_turns_since": (lambda e, c: math.log1p(max(c.end - e.last_seen, 0)),
                        "log(1 + turns since the latest sighting)"),
    "spread": (lambda e, c: (e.last_seen - e.first_seen) / (c.end - c.start + 1),
               "turns between first and latest sighting / the span's turns"),
    "role_user": (lambda e, c: e.role == "user", "first seen in a user message"),
    "role_assistant": (lambda e, c: e.role == "assistant", "first seen in the agent's text"),
    "role_system": (lambda e, c: e.role == "system", "first seen in the system prompt"),
    "used_by_user": (lambda e, c: bool(c.uses.get(e.value, 0) & USER),
                     "the user typed it"),
    "used_in_call": (lambda e, c: bool(c.uses.get(e.value, 0) & CALL),
                     "the agent passed it in a tool call"),
    "used_by_assistant": (lambda e, c: bool(c.uses.get(e.value, 0) & ASSISTANT),
                          "the agent repeated it in its text"),
    "in_address": (lambda e, c: bool(c.calls.get(e.value, 0) & ADDRESS),
                   "the agent passed it in an argument that names something (a path, a "
                   "command, an id)"),
    "in_written": (lambda e, c: bool(c.calls.get(e.value, 0) & WRITTEN),
                   "the agent wrote it inside a file body, an edit or a plan"),
    "specific": (lambda e, c: _listed(e, c) <= LISTED_MAX,
                 f"one of at most {LISTED_MAX} values of its kind in its first message"),
    "log_listed": (lambda e, c: math.log(_listed(e, c)),
                   "log(values of its kind in its first message)"),
    "has_slash": (lambda e, c: "/" in e.value or "\\" in e.value, "holds a / or \\"),
    "has_digit": (lambda e, c: any(ch in _DIGITS for ch in e.value), "holds a digit"),
    "has_at": (lambda e, c: "@" in e.value, "holds an @"),
    "all_digits": (lambda e, c: e.value.isdigit(), "digits only"),
    "log_length": (lambda e, c: math.log(len(e.value) or 1), "log(characters)"),
    "written_only": (lambda e, c: c.calls.get(e.value, 0) == WRITTEN
                     and not c.uses.get(e.value, 0) & (USER | ASSISTANT),
                     "the agent used it only inside text it wrote (a file body, an edit), "
                     "never to name something"),
    "typed_only": (lambda e, c: (e.role == "user" or bool(c.uses.get(e.value, 0) & USER))
                   and not _agent_used(e, c),
                   "typed by the user and not used by the agent since"),
    "listing_worked": (lambda e, c: not _agent_used(e, c) and c.siblings_used.get(e.value, 0) > 0,
                       "one of a listing the agent used other values of, not used itself"),
    "log_siblings_used": (lambda e, c: math.log1p(c.siblings_used.get(e.value, 0)),
                          "log(1 + values of its listing the agent used)"),
    "value_tokens": (_value_tokens, "tokens writing the value costs"),
}
NEEDS_CALLS = frozenset({"in_address", "in_written", "written_only"})


# ── the model ───────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class Term:
    """One factor of the score: ``base ** x``, ``x ** power`` or ``exp(weight * x)``."""

    feature: str
    base: float | None = None
    power: float | None = None
    weight: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"feature": self.feature}
        for name in ("base", "power", "weight"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class Salience:
    """A salience model: terms over ``FEATURES``, a bias and a link (see the module
    docstring). Picklable, so a Dask worker gets it with its task."""

    terms: tuple[Term, ...]
    link: str = "odds"
    bias: float = 0.0
    name: str = "custom"
    source: str = ""  # the file it was read from, for reports
    about: dict[str, Any] = field(default_factory=dict, compare=False)  # fit metadata

    @functools.cached_property
    def needs_calls(self) -> bool:
        return any(t.feature in NEEDS_CALLS for t in self.terms)

    def context(self, entries: Sequence[LedgerEntry], turns: Sequence[Any]) -> SpanContext:
        """The span facts the features read: one linear pass per kind of text."""
        return span_context(entries, turns, calls=self.needs_calls)

    def score(self, entry: LedgerEntry, context: SpanContext) -> float:
        """How likely a later call uses ``entry`` (``odds``: a weight of that; ``logistic``:
        a probability)."""
        product, z = 1.0, self.bias
        for term in self.terms:
            x = FEATURES[term.feature][0](entry, context)
            if term.weight is not None:
                z += term.weight * x
            elif term.base is not None:
                product *= term.base ** x
            elif term.power == 1:
                product *= x
            elif term.power == 0.5:
                product *= math.sqrt(x)  # correctly rounded, as the hand-set weighting had it
            else:
                product *= x ** term.power
        if self.link == "odds":
            return product * math.exp(z) if z else product
        if product <= 0:
            return 0.0
        z += math.log(product) if product != 1.0 else 0.0
        return 1 / (1 + math.exp(-z)) if z > -700 else 0.0

    def key(self, entries: Sequence[LedgerEntry], turns: Sequence[Any],
            count: TokenCounter = count_tokens) -> Callable[[LedgerEntry], tuple]:
        """The sort key ``Ledger.fit`` evicts by (higher stays longer): required first, then
        score per token of the value, then user-typed, then the latest seen."""
        return self.key_in(self.context(entries, turns), count)

    def key_in(self, context: SpanContext,
               count: TokenCounter = count_tokens) -> Callable[[LedgerEntry], tuple]:
        """``key`` with the span's facts already gathered."""
        def key(entry: LedgerEntry) -> tuple:
            tokens = count(VALUE_SEP + value_text(entry.value))
            return (entry.severity == "required", self.score(entry, context) / tokens,
                    entry.role == "user", entry.last_seen)
        return key

    def rows(self, entries: Sequence[LedgerEntry], context: SpanContext,
             features: Sequence[str]) -> list[list[float]]:
        """Each entry's values of ``features`` (for fitting)."""
        fns = [FEATURES[f][0] for f in features]
        return [[float(fn(e, context)) for fn in fns] for e in entries]

    # -- files ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "name": self.name, "link": self.link,
                               "bias": self.bias, "terms": [t.to_json() for t in self.terms]}
        if self.about:
            out["about"] = self.about
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Any, source: str = "<salience>") -> Salience:
        def bad(what: str) -> SalienceError:
            return SalienceError(f"{source}: {what}")

        if not isinstance(data, dict):
            raise bad("expected a JSON object")
        if data.get("format") != FORMAT:
            raise bad(f"format must be {FORMAT!r}, got {data.get('format')!r}")
        unknown = set(data) - {"format", "name", "link", "bias", "terms", "about"}
        if unknown:
            raise bad(f"unknown field(s): {', '.join(sorted(unknown))}")
        link = data.get("link", "odds")
        if link not in LINKS:
            raise bad(f"link must be one of {', '.join(LINKS)}, got {link!r}")
        bias = data.get("bias", 0.0)
        if not _number(bias):
            raise bad(f"bias must be a finite number, got {bias!r}")
        raw = data.get("terms")
        if not isinstance(raw, list) or not raw:
            raise bad("terms must be a non-empty list")
        terms = []
        for i, t in enumerate(raw):
            where = f"terms[{i}]"
            if not isinstance(t, dict) or t.get("feature") not in FEATURES:
                raise bad(f"{where}: feature must be one of {', '.join(FEATURES)}, got "
                          f"{t.get('feature') if isinstance(t, dict) else t!r}")
            kinds = [k for k in ("base", "power", "weight") if k in t]
            if len(kinds) != 1 or set(t) - {"feature", *kinds}:
                raise bad(f"{where}: needs exactly one of base, power, weight (and nothing "
                          f"else), got {sorted(t)}")
            value = t[kinds[0]]
            if not _number(value) or (kinds[0] == "base" and value <= 0):
                raise bad(f"{where}: {kinds[0]} must be a finite number"
                          f"{' above 0' if kinds[0] == 'base' else ''}, got {value!r}")
            terms.append(Term(t["feature"], **{kinds[0]: float(value)}))
        about = data.get("about", {})
        if not isinstance(about, dict):
            raise bad("about must be an object")
        name = data.get("name", "custom")
        if not isinstance(name, str):
            raise bad("name must be a string")
        return cls(tuple(terms), link, float(bias), name, source, about)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Salience:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SalienceError(f"cannot read salience file {path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SalienceError(f"{path}: not JSON: {exc}") from None
        return cls.from_json(data, str(path))

    def describe(self) -> str:
        """One line for reports: name and where it came from."""
        where = "built-in" if self.source == str(DEFAULT_PATH) else self.source
        return f"{self.name} ({where})" if where else self.name


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@functools.lru_cache(maxsize=1)
def default_salience() -> Salience:
    """The shipped model (``salience.json`` in the package)."""
    return Salience.load(DEFAULT_PATH)


def load_salience(path: str | os.PathLike[str] | None) -> Salience:
    """The model a ``--salience`` option names; None: the shipped one."""
    return default_salience() if path in (None, "") else Salience.load(path)


def salience_from_env() -> Salience:
    """The hooks' model: ``$FIREWALL_SALIENCE``, else the shipped one."""
    return load_salience(os.environ.get(ENV, "").strip() or None)


def describe_terms(model: Salience) -> list[str]:
    """The model as lines a person reads (``firewall salience show``)."""
    lines = [f"salience {model.describe()}: link {model.link}, bias {model.bias:+.4g}"]
    for t in model.terms:
        how = (f"{t.base:g}^x" if t.base is not None else
               f"x^{t.power:g}" if t.power is not None else f"weight {t.weight:+.4f}")
        lines.append(f"  {t.feature:<18} {how:<16} {FEATURES[t.feature][1]}")
    for k, v in model.about.items():
        lines.append(f"  {k}: {json.dumps(v, ensure_ascii=False)}")
    return lines

