"""Fitting a salience model on recorded conversations, and judging one (``firewall salience``).

Labels are free in any recorded session: at a cut ``k`` (as ``firewall eval`` cuts), every entry
the ledger pins from messages ``0..k`` is positive when it carries a gold string (DESIGN.md: a
string a tool call after ``k`` uses that was already shown), else negative. The model is a
logistic regression over ``salience.FEATURES`` (numpy, the ``fit`` extra; applying a fitted
model needs none), and is judged the way ``firewall eval`` judges a ledger: the gold recall of
the budgeted block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compaction.budget import Budget, budget_tokens
from ..errors import FirewallError
from .evaluate import COST_SPAN_MIN, source_of
from .gold import FRACTIONS, Gold, agent_cuts, cut_points, gold_set, occurs
from ..compaction.ledger import Ledger, LedgerEntry, _Occurrences, is_plain
from ..compaction.salience import FEATURES, Salience, SpanContext, Term, span_context
from ..tokens import count_tokens
from ..turns import Conversation, turn_text

# what a fit weighs unless told: every feature in a log-linear form (the raw ``priority``,
# ``count`` and ``recency`` are the hand-set model's power terms; their logs are here)
FIT_FEATURES = ("tier", "id_shaped", "log_priority", "log_count", "recency", "age",
                "log_turns_since", "spread", "role_user", "role_assistant", "role_system",
                "used_by_user", "used_in_call", "used_by_assistant", "in_address", "in_written",
                "specific", "log_listed", "has_slash", "has_digit", "has_at", "all_digits",
                "log_length", "written_only", "typed_only", "listing_worked",
                "log_siblings_used")
L2 = 1.0  # ridge on standardized features, per 1,000 rows of weight
BUCKETS = ("id_like", "strict", "addresses")  # Gold properties a Score counts
ID_WEIGHT = 3.0  # a positive carrying ID-like gold counts this many times (see ``fit``)


@dataclass
class Sample:
    """One cut of one conversation: the ledger before the budget, the span's facts, the gold."""

    conversation: str
    source: str
    frac: float | str
    ledger: Ledger
    context: SpanContext
    gold: list[Gold]
    budget: int
    span_tokens: int
    labels: list[bool] = field(default_factory=list)
    # per entry: does it carry ID-like gold (a positive a fit may weigh more, see ``fit``)
    id_labels: list[bool] = field(default_factory=list)


def labels_of(entries: Sequence[LedgerEntry], gold: Sequence[Gold],
              which: str = "strict") -> list[bool]:
    """Per entry: does its value carry a gold string (``strict`` or ``id_like`` gold)?"""
    wanted = [g.literal for g in gold if getattr(g, which)]
    if not wanted:
        return [False] * len(entries)
    found = _Occurrences(wanted)
    return [any(occurs(wanted[i], e.value) for _, i in found.find(e.value)) for e in entries]


def collect(conversation: Conversation, firewall: Any, *, source: str = "",
            fractions: Sequence[float] = FRACTIONS, budget: int | str | Budget = Budget(),
            label: str = "strict") -> list[Sample]:
    """The samples of one conversation, at ``firewall eval``'s cuts."""
    from ..compaction.plan import is_own_message

    turns = conversation.turns
    start = 0
    while start < len(turns) and turns[start].role == "system":
        start += 1
    cuts = [(frac, k) for frac, k in cut_points(len(turns), fractions)]
    cuts += [(frac, k) for frac, k, _ in agent_cuts(conversation)]
    samples = []
    for frac, k in cuts:
        span = turns[start:k + 1]
        span_tokens = sum(count_tokens(turn_text(t)) for t in span)
        tokens = firewall.budget_for(span, budget) if isinstance(budget, Budget) else \
            budget_tokens(budget, span_tokens)  # as evaluate_cut has pin read it
        ledger = Ledger.new(conversation.id)
        firewall._extract(ledger, span, offset=start, seen=None)
        context = span_context(ledger.entries, [t for t in span if not is_own_message(t)])
        gold = gold_set(conversation, k)
        samples.append(Sample(conversation.id, source, frac, ledger, context, gold, tokens,
                              span_tokens, labels_of(ledger.entries, gold, label),
                              labels_of(ledger.entries, gold, "id_like")))
    return samples


def collect_files(paths: Iterable[str | Path], *, firewall: Any = None,
                  fractions: Sequence[float] = FRACTIONS, budget: int | str | Budget = Budget(),
                  label: str = "strict", progress: Callable[[str], None] | None = None,
                  on_error: Callable[[Exception], None] | None = None) -> list[Sample]:
    """The samples of every conversation of ``paths``. ``on_error``: given, a bad line is
    handed to it and reading goes on (as ``firewall eval`` does without ``--fail-fast``)."""
    from ..formats import read_conversations
    from ..compaction.guard import Firewall

    firewall = firewall or Firewall()
    samples: list[Sample] = []
    for path in paths:
        for conversation in read_conversations(path, on_error=on_error):
            samples += collect(conversation, firewall, source=source_of(path),
                               fractions=fractions, budget=budget, label=label)
        if progress is not None:
            progress(f"{source_of(path)}: {len(samples)} cut(s)")
    return samples


# ── judging a model ─────────────────────────────────────────────────────────────────────────

@dataclass
class Score:
    """Gold recall of the budgeted block over many cuts (``id_like``, ``strict`` and the
    ``addresses`` subset: ID-like gold a later call passes to name something); cost on spans
    of 16k+ tokens."""

    hit: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS, 0))
    n: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS, 0))
    tokens: int = 0
    span_tokens: int = 0
    cuts: int = 0

    def recall(self, bucket: str) -> float | None:
        return self.hit[bucket] / self.n[bucket] if self.n[bucket] else None

    @property
    def cost(self) -> float | None:
        return self.tokens / self.span_tokens if self.span_tokens else None

    def add(self, other: Score) -> None:
        for b in self.n:
            self.n[b] += other.n[b]
            self.hit[b] += other.hit[b]
        self.tokens += other.tokens
        self.span_tokens += other.span_tokens
        self.cuts += other.cuts


def judge(model: Salience, sample: Sample) -> Score:
    """What ``firewall eval``'s ledger column measures at this cut, with ``model``."""
    # fit() replaces the entry list and never changes an entry: a shallow copy is enough
    src = sample.ledger
    ledger = Ledger.model_construct(conversation_id=src.conversation_id, nonce=src.nonce,
                                    key=src.key, entries=list(src.entries), evictions=[])
    ledger.fit(sample.budget, salience=model.key_in(sample.context))
    block = ledger.render()
    text = "\n".join([block] + [v for v in ledger.values() if not is_plain(v)])
    score = Score(cuts=1)
    for g in sample.gold:
        ok = occurs(g.literal, text)
        for bucket in BUCKETS:
            if getattr(g, bucket):
                score.n[bucket] += 1
                score.hit[bucket] += ok
    if sample.span_tokens >= COST_SPAN_MIN:
        score.tokens, score.span_tokens = count_tokens(block), sample.span_tokens
    return score


def judge_all(model: Salience, samples: Iterable[Sample]) -> Score:
    total = Score()
    for sample in samples:
        total.add(judge(model, sample))
    return total


# ── fitting ─────────────────────────────────────────────────────────────────────────────────

def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise FirewallError("fitting a salience model needs numpy: pip install "
                            "'literal-firewall[fit]'") from None
    return numpy


def fit(samples: Sequence[Sample], features: Sequence[str] = FIT_FEATURES, *,
        l2: float = L2, name: str = "fitted", balance: str = "source",
        id_weight: float = ID_WEIGHT, about: dict[str, Any] | None = None) -> Salience:
    """A logistic salience over ``features`` fitted on the samples' labels (Newton's method
    on standardized features, a ridge of ``l2``). ``balance``: ``source`` gives every source
    file the same total weight, so one long file does not make the model; ``none``: every
    entry counts once. ``id_weight``: how much more a positive carrying ID-like gold counts
    than one carrying only strict gold (the hand-set weighting favours ID-shaped values 5:1:
    ``firewall eval``'s headline is the ID-like recall)."""
    np = _numpy()
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise FirewallError(f"unknown salience feature(s): {', '.join(unknown)}")
    model = Salience((), "logistic")
    xs, ys, ws = [], [], []
    per_source: dict[str, int] = {}
    for s in samples:
        per_source[s.source] = per_source.get(s.source, 0) + len(s.labels)
    for s in samples:
        if not s.labels:
            continue
        xs += model.rows(s.ledger.entries, s.context, features)
        ys += s.labels
        w = 1.0 if balance == "none" else 1.0 / per_source[s.source]
        ids = s.id_labels or [False] * len(s.labels)
        ws += [w * (id_weight if i else 1.0) for i in ids]
    if not ys or all(ys) or not any(ys):
        raise FirewallError("cannot fit a salience model: the logs need cuts with both used "
                            "and unused pinned values (record longer conversations)")
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    w = np.asarray(ws, dtype=float)
    w *= len(w) / w.sum()
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / std])
    beta = np.zeros(z.shape[1])
    ridge = np.full(z.shape[1], l2 * len(y) / 1000)
    ridge[0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(z @ beta)))
        grad = z.T @ (w * (p - y)) + ridge * beta
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(ridge) + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = beta[1:] / std
    bias = float(beta[0] - (weights * mean).sum())
    terms = tuple(Term(f, weight=round(float(v), 6)) for f, v in zip(features, weights))
    info = {"rows": int(len(y)), "positives": int(y.sum()), "cuts": len(samples),
            "sources": sorted(per_source), "l2": l2, "balance": balance, "id_weight": id_weight,
            "standardized_weights": {f: round(float(v), 4) for f, v in zip(features, beta[1:])}}
    info.update(about or {})
    return Salience(terms, "logistic", round(bias, 6), name, "", info)


# ``search``: the hand-set model's form, each term's base or power tried on a grid, and terms
# the hand-set model lacks tried as extra factors (a base of 1 leaves a term out)
SEARCH_GRID: dict[str, tuple[str, tuple[float, ...]]] = {
    "tier": ("base", (1.0, 1.5, 2.0, 3.0, 4.0)),
    "id_shaped": ("base", (1.0, 2.0, 3.0, 5.0, 8.0, 12.0)),
    "priority": ("power", (0.0, 0.5, 1.0, 2.0)),
    "count": ("power", (0.0, 0.25, 0.5, 0.75, 1.0)),
    "recency": ("power", (0.0, 0.5, 1.0, 2.0)),
    "in_address": ("base", (1.0, 1.5, 2.0, 4.0)),
    "in_written": ("base", (0.5, 1.0, 2.0)),
    "has_slash": ("base", (0.5, 1.0, 2.0)),
    "role_user": ("base", (1.0, 2.0, 4.0)),
    "written_only": ("base", (0.25, 0.5, 1.0)),
    "typed_only": ("base", (0.25, 0.5, 1.0)),
    "listing_worked": ("base", (1.0, 2.0, 4.0)),
    "all_digits": ("base", (0.25, 0.5, 1.0)),
}


def objective(model: Salience, samples: Sequence[Sample]) -> float:
    """What ``search`` maximizes: the mean of the ID-like, strict and addressing recall of the
    budgeted block, pooled over the samples (each source weighing the same; a source without
    addressing gold counts its other two)."""
    by_source: dict[str, Score] = {}
    for s in samples:
        by_source.setdefault(s.source, Score()).add(judge(model, s))
    values = []
    for sc in by_source.values():
        rates = [r for b in BUCKETS if (r := sc.recall(b)) is not None]
        if sc.n["strict"]:
            values.append(sum(rates) / len(rates))
    return sum(values) / len(values) if values else 0.0


def search(samples: Sequence[Sample], start: Salience | None = None, *, rounds: int = 2,
           name: str = "searched", progress: Callable[[str], None] | None = None) -> Salience:
    """Coordinate ascent on ``SEARCH_GRID``, judged directly on what ``firewall eval``
    measures (``objective``), from ``start`` (the shipped model): one term at a time takes
    the grid value that scores best, ``rounds`` times over. A tie keeps the current value."""
    from ..compaction.salience import default_salience

    model = start or default_salience()
    current = {t.feature: t for t in model.terms}
    order = list(dict.fromkeys([t.feature for t in model.terms] + list(SEARCH_GRID)))

    def build(terms: dict[str, Term]) -> Salience:
        kept = tuple(t for f in order if (t := terms.get(f)) is not None
                     and not (t.base == 1.0 or t.power == 0.0))
        return Salience(kept or (Term("tier", base=1.0),), "odds", 0.0, name)

    best = objective(build(current), samples)
    for _ in range(rounds):
        changed = False
        for feature, (how, grid) in SEARCH_GRID.items():
            for value in grid:
                trial = dict(current)
                trial[feature] = Term(feature, **{how: value})
                if trial[feature] == current.get(feature) or (
                        feature not in current and value in (0.0, 1.0)):
                    continue
                score = objective(build(trial), samples)
                if score > best + 1e-9:
                    best, current, changed = score, trial, True
            if progress is not None:
                progress(f"search: {feature} -> {current.get(feature)}, objective {best:.4f}")
        if not changed:
            break
    out = build(current)
    return Salience(out.terms, "odds", 0.0, name, "", {"objective": round(best, 6),
                                                         "cuts": len(samples)})


def heaviest(model: Salience, n: int = 5) -> list[tuple[str, float]]:
    """The features that move the score most: standardized weights when the fit recorded
    them, else each term's weight, or the log of its base or power."""
    std = model.about.get("standardized_weights")
    pairs = list(std.items()) if std else [
        (t.feature, t.weight if t.weight is not None else
         math.log(t.base) if t.base is not None else t.power or 0.0) for t in model.terms]
    return sorted(pairs, key=lambda p: -abs(p[1]))[:n]


def percent(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:.1f}"


# ── CLI ─────────────────────────────────────────────────────────────────────────────────────

def cmd_salience_fit(args: Any) -> int:
    import sys

    from ..compaction.guard import Firewall
    from ..options import packs_from_args

    features = [f.strip() for f in args.features.split(",") if f.strip()] if args.features \
        else list(FIT_FEATURES)
    bad: list[Exception] = []

    def on_error(exc: Exception) -> None:
        if args.fail_fast:
            raise exc
        bad.append(exc)
        sys.stderr.write(f"firewall: {exc}\n")

    samples = collect_files(args.logs, firewall=Firewall(packs_from_args(args)),
                            budget=args.budget, label=args.label, on_error=on_error,
                            progress=lambda m: sys.stderr.write(m + "\n"))
    about = {"label": args.label, "logs": [Path(p).name for p in args.logs]}
    if args.method == "search":
        model = search(samples, name=args.name, progress=lambda m: sys.stderr.write(m + "\n"))
        model = Salience(model.terms, model.link, model.bias, model.name, "",
                         {**model.about, "method": "search", **about})
    else:
        model = fit(samples, features, l2=args.l2, name=args.name, balance=args.balance,
                    about={"method": "logistic", **about})
    Path(args.out).write_text(model.dumps(), encoding="utf-8")
    model = Salience.load(args.out)
    from ..compaction.salience import default_salience

    rows = sum(len(s.labels) for s in samples)
    sys.stdout.write(f"wrote {args.out}: {rows} pinned values at {len(samples)} cut(s), "
                     f"{sum(sum(s.labels) for s in samples)} used later\n")
    sys.stdout.write(("weighs most (standardized): " if args.method == "logistic" else
                      "terms: ") + ", ".join(f"{f} {w:+.2f}" for f, w in heaviest(model))
                     + "\n")
    if args.compare:  # on the logs it was fitted on: an upper bound, not a held-out figure
        for m in (default_salience(), model):
            s = judge_all(m, samples)
            sys.stdout.write(f"on these logs, {m.describe()}: ID-like "
                             f"{percent(s.recall('id_like'))} %, strict "
                             f"{percent(s.recall('strict'))} %, addressing "
                             f"{percent(s.recall('addresses'))} %, cost {percent(s.cost)} %\n")
    return 1 if bad else 0


def cmd_salience_show(args: Any) -> int:
    import sys

    from ..compaction.salience import describe_terms, load_salience

    sys.stdout.write("\n".join(describe_terms(load_salience(args.file))) + "\n")
    return 0


def add_salience_command(subparsers: Any) -> Any:
    """Register ``firewall salience fit`` and ``firewall salience show``."""
    from ..compaction.budget import parse_budget
    from ..options import add_fail_fast_option, add_rules_option

    parser = subparsers.add_parser(
        "salience", help="fit or show the model ranking what the ledger's budget keeps")
    sub = parser.add_subparsers(dest="salience_command", required=True)
    fit_cmd = sub.add_parser(
        "fit", help="fit a salience model on recorded conversations",
        description="Pin each conversation at firewall eval's cuts, label each pinned value "
                    "by whether a later tool call uses it, and fit a logistic model of that "
                    "over the features of `firewall salience show`. Judge the result on "
                    "conversations it was not fitted on: firewall eval --salience FILE.")
    fit_cmd.add_argument("logs", nargs="+", metavar="LOG",
                         help="recorded conversations (JSONL, session files)")
    fit_cmd.add_argument("--out", required=True, metavar="FILE", help="the model to write")
    fit_cmd.add_argument("--method", choices=("logistic", "search"), default="logistic",
                         help="logistic: a logistic regression of later use (default); search: "
                              "the built-in model's factors tried on a grid, judged on the "
                              "budgeted block's recall (slower)")
    fit_cmd.add_argument("--features", metavar="F,F,...",
                         help=f"features to weigh (default: {','.join(FIT_FEATURES)})")
    fit_cmd.add_argument("--label", choices=("strict", "id_like"), default="strict",
                         help="which later uses count as positive (default strict)")
    fit_cmd.add_argument("--l2", type=float, default=L2,
                         help=f"ridge on standardized weights (default {L2})")
    fit_cmd.add_argument("--balance", choices=("source", "none"), default="source",
                         help="source: every log file weighs the same (default); none: every "
                              "pinned value counts once")
    fit_cmd.add_argument("--budget", type=parse_budget, default=Budget(),
                         metavar="auto|TOKENS|P%", help="the budget --compare judges at")
    fit_cmd.add_argument("--name", default="fitted", help="the model's name in reports")
    fit_cmd.add_argument("--compare", action="store_true",
                         help="also print both models' recall on the logs fitted on")
    add_rules_option(fit_cmd)
    add_fail_fast_option(fit_cmd)
    fit_cmd.set_defaults(func=cmd_salience_fit)
    show = sub.add_parser("show", help="print a salience model's terms")
    show.add_argument("file", nargs="?", metavar="FILE",
                      help="a salience JSON file (default: the built-in one)")
    show.set_defaults(func=cmd_salience_show)
    return parser
