"""Replay evaluation: load-bearing literal recall of the ledger on recorded conversations.

For a conversation of ``n`` messages and a fraction ``f``, messages ``0..k`` with
``k = floor(f * n)`` are compacted (the system message counts). The ledger is built exactly as a
compaction builds it (``Firewall.pin``: extraction over the span, ``Ledger.update``, ``Ledger.fit``)
and compared with the **gold set** ``G_k`` of DESIGN.md: every string in the arguments of a tool
call made after ``k`` that appears verbatim in a message at or before ``k``, the system prompt
excluded. Argument values of 3+ characters are taken whole (numbers as strings); free-text
arguments (a shell ``command``, whatever its length; else a newline, more than three words, or
over 40 characters) are split into tokens of 4+ characters on whitespace, quotes and brackets.
A string *occurs* in a text only where an end of it that is a letter or digit is not glued to
another (``100`` is not in ``1000``; ``.format`` is in ``s.format(``).

``strict`` gold is every whole value and every token of a non-``other`` kind (``literal_kind``);
``ID-like`` gold is strict, 4+ characters, with a digit, ``/`` or ``@``. The gold agrees, cut by
cut and kind by kind, with the reference gold files shipped with the dev data
(``benchmarks/reference_gold.py``). Reported per source file and fraction:
recall of the rendered ledger block alone, of the ledger plus the verbatim last N messages,
ledger cost (block tokens / tokens of messages ``1..k``), and baselines on the same cuts: user
messages verbatim (Codex-style), the last N messages, both, the **naive ledger** of DESIGN.md
(every token of the span holding a digit, ``/`` or ``@``, tokenised like the gold: the floor a
rule pack must beat on recall and cost), the same tokens ranked by four signals and cut at the
ledger's cost (the floor at equal cost), and an oracle ledger holding exactly the gold, rendered
the same way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compaction.budget import Budget, budget_tokens, parse_budget
from ..formats.transcripts import live_start
from .gold import (AGENT, FRACTIONS, Gold, agent_cuts, cut_points, decoded_values, gold_set,
                   naive_tokens, occurs, ranked_naive_ledger)
from .hook_eval import HOOKS, add_hook_contexts
from ..compaction.ledger import Ledger
from ..literals import SENSITIVE, Literal
from ..tokens import count_tokens
from ..turns import Conversation, Turn, turn_text

# ── one cut ──────────────────────────────────────────────────────────────────────────────────

def oracle_ledger(conversation: Conversation, gold: Sequence[Gold]) -> Ledger:
    """A ledger of exactly the gold, with its provenance, rendered like any other."""
    ledger = Ledger.new(conversation.id)
    turns = conversation.turns
    ledger.update(Literal(value=g.literal, rule=f"gold/{g.kind}", turn=g.first_seen, role=g.role,
                          start=0, end=len(g.literal),
                          tool=turns[g.first_seen].tool_name if g.role == "tool" else None)
                  for g in gold)
    return ledger


@dataclass
class Cut:
    """Everything measured at one (conversation, k)."""

    id: str
    source: str
    frac: float | str  # AGENT at a compaction the agent made
    k: int
    gold: list[Gold]
    span_tokens: int
    # name -> (text that would be in the context, its token cost)
    contexts: dict[str, tuple[str, int]] = field(default_factory=dict)
    literals: list[str] = field(default_factory=list)
    archive: Any = None  # (archive_eval.ArchiveShares, the archived values)

    def hits(self, name: str) -> list[bool]:
        text = self.contexts[name][0]
        return [occurs(g.literal, text) for g in self.gold]


def evaluate_cut(conversation: Conversation, k: int, *, firewall: Any,
                 budget: int | str | Budget, keep_last: int, source: str = "",
                 frac: float | str = 0.0, agent_summary: str | None = None) -> Cut:
    """``budget``: tokens, a share of the span's tokens written ``"5%"``, or a ``Budget``.
    ``agent_summary``: at a compaction the agent made, its summary (see ``AGENT``)."""
    turns = conversation.turns
    start = 0
    while start < len(turns) and turns[start].role == "system":
        start += 1
    span = turns[start:k + 1]
    texts = [turn_text(t) for t in span]
    span_tokens = sum(count_tokens(t) for t in texts)

    # a Budget as a compaction reads it
    budget = budget if isinstance(budget, Budget) else budget_tokens(budget, span_tokens)
    ledger = Ledger.new(conversation.id)
    # every literal any rule extracted from the span, whatever the budget kept
    extracted = firewall.pin(ledger, turns[start:k + 1], offset=start, budget=budget).literals
    block = ledger.render()
    gold = gold_set(conversation, k)
    oracle = oracle_ledger(conversation, gold).render()

    tail = "\n".join(texts[-keep_last:]) if keep_last > 0 else ""
    user = "\n".join(x for t, x in zip(span, texts) if t.role == "user")
    tail_user = "\n".join(x for i, (t, x) in enumerate(zip(span, texts))
                          if t.role == "user" or i >= len(span) - keep_last)

    def ctx(*parts: str) -> tuple[str, int]:
        text = "\n".join(p for p in parts if p)
        return text, sum(count_tokens(p) for p in parts if p)

    # the --ledgers line is an evaluation's output, not a secret store: secrets as replay
    # writes them
    naive = naive_tokens(span)  # the floor, and the same tokens ranked at the ledger's cost
    cut = Cut(conversation.id, source, frac, k, gold, span_tokens,
              literals=[SENSITIVE if e.sensitive else e.value for e in ledger.entries])
    cut.contexts = {
        "ledger": ctx(block, decoded_values(ledger)),
        "ledger+tail": ctx(block, decoded_values(ledger), tail),
        "user": ctx(user),
        "tail": ctx(tail),
        "user+tail": ctx(tail_user),
        "naive": ctx(" ".join(naive)),
        "ranked": ctx(ranked_naive_ledger(naive, count_tokens(block), count_tokens)),
        "oracle": ctx(oracle),
        "extracted": ctx("\n".join(dict.fromkeys(lit.value for lit in extracted))),
    }
    if agent_summary is not None:
        cut.contexts["agent"] = ctx(agent_summary)
        # the block a wrapper writes after the agent's summary: what the summary does not hold,
        # within a share of the context the agent compacted (since its previous compaction),
        # as the hooks size it
        live = live_start(conversation.meta.get("boundaries", []), start, k + 1)
        beside = Ledger.new(conversation.id)
        held = firewall.pin(beside, turns[start:k + 1], offset=start,
                            budget=firewall.budget_for(turns[live:k + 1], budget),
                            beside=[agent_summary]).held
        # no entry left, no block: the hooks write none either
        beside_block = beside.render(held) if len(beside) else ""
        text = ctx(agent_summary, beside_block, decoded_values(beside))[0]
        cut.contexts["agent+ledger"] = (text, count_tokens(agent_summary)
                                        + count_tokens(beside_block))
    # the decoded copy of escaped values is for matching only: cost is the block's
    cut.contexts["ledger"] = (cut.contexts["ledger"][0], count_tokens(block))
    cut.contexts["ledger+tail"] = (cut.contexts["ledger+tail"][0],
                                   count_tokens(block) + (count_tokens(tail) if tail else 0))
    # the token tier sweeps the span, as the firewall's archive does (unless it is off)
    limits = getattr(firewall, "archive_limits", None)
    swept = range(start, k + 1) if limits is not None and limits.tokens else None
    cut.archive = _archive_shares(cut, turns, extracted, tail, swept)
    return cut


def _archive_shares(cut: Cut, turns: Sequence[Turn], extracted: list[Literal],
                    tail: str, span: range | None = None) -> Any:
    """The archive's three shares at this cut (``archive_eval``): the context is the agent's
    summary with the block after it where the agent compacted, else the block; and the tail.
    ``span``: the turns the token tier sweeps (None: off)."""
    from .archive_eval import measure_cut

    composed = cut.contexts["agent+ledger"][0] if "agent+ledger" in cut.contexts else \
        cut.contexts["ledger"][0]
    return measure_cut(turns, extracted, cut.gold, f"{composed}\n{tail}", cut.id, span)


# ── the run ──────────────────────────────────────────────────────────────────────────────────

CONTEXTS = ("ledger", "ledger+tail", "user", "tail", "user+tail", "naive", "oracle", "extracted",
            "ranked")


# Cost is judged where compaction happens: a share of spans this long or longer; on shorter
# ones (a 1.5k-token support chat nobody compacts) the share says little, so their absolute
# tokens are reported instead.
COST_SPAN_MIN = 16_000


BUCKETS = ("id_like", "strict", "all", "address")  # "address": ID-like gold that names a target


@dataclass
class Tally:
    """Micro-averaged recall of one context over many cuts; its cost as a share of the spans of
    ``COST_SPAN_MIN`` tokens or more (``tokens`` / ``span_tokens`` count those cuts only), and
    as absolute tokens on the shorter ones."""

    hit: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS, 0))
    n: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS, 0))
    tokens: int = 0
    span_tokens: int = 0
    ratios: list[float] = field(default_factory=list)
    short_tokens: list[int] = field(default_factory=list)

    def add(self, gold: Sequence[Gold], hits: Sequence[bool], tokens: int, span: int) -> None:
        for g, ok in zip(gold, hits):
            for bucket, member in (("all", True), ("strict", g.strict), ("id_like", g.id_like),
                                   ("address", g.addresses)):
                if member:
                    self.n[bucket] += 1
                    self.hit[bucket] += ok
        if span >= COST_SPAN_MIN:
            self.tokens += tokens
            self.span_tokens += span
            self.ratios.append(tokens / span)
        else:
            self.short_tokens.append(tokens)

    def merge(self, other: Tally) -> None:
        """Add ``other``'s cuts, which came after this one's (the ratios keep their order)."""
        for bucket in self.n:
            self.n[bucket] += other.n[bucket]
            self.hit[bucket] += other.hit[bucket]
        self.tokens += other.tokens
        self.span_tokens += other.span_tokens
        self.ratios += other.ratios
        self.short_tokens += other.short_tokens

    def recall(self, bucket: str) -> float | None:
        return self.hit[bucket] / self.n[bucket] if self.n[bucket] else None

    def summary(self) -> dict[str, Any]:
        return {"recall": {b: self.recall(b) for b in self.n}, "n": dict(self.n),
                "hits": dict(self.hit), "cost_median": statistics.median(self.ratios)
                if self.ratios else None,
                "cost_total": self.tokens / self.span_tokens if self.span_tokens else None,
                "tokens": self.tokens, "span_tokens": self.span_tokens,
                "cost_cuts": len(self.ratios), "short_cuts": len(self.short_tokens),
                "tokens_short_median": statistics.median(self.short_tokens)
                if self.short_tokens else None}


def source_of(path: str | Path) -> str:
    name = Path(path).name
    return name[:-6] if name.endswith(".jsonl") else Path(path).stem


@dataclass(frozen=True, slots=True)
class CutScore:
    """What the reduction needs of one cut (no text): picklable and small, so that a Dask
    worker sends it back to be tallied in input order."""

    source: str
    frac: float | str
    gold: list[Gold]
    span_tokens: int
    scores: dict[str, tuple[list[bool], int]]  # context -> (hit per gold, its token cost)
    ledger: dict[str, Any]  # the --ledgers line

    @classmethod
    def of(cls, cut: Cut) -> CutScore:
        return cls(cut.source, cut.frac, cut.gold, cut.span_tokens,
                   {name: (cut.hits(name), cost) for name, (_, cost) in cut.contexts.items()},
                   {"id": cut.id, "k": cut.k, "literals": cut.literals,
                    "ledger_tokens": cut.contexts["ledger"][1], "span_tokens": cut.span_tokens,
                    **({"archived": cut.archive[1], "archive": cut.archive[0].counts()}
                       if cut.archive else {})})


@dataclass
class Tallies:
    """The tallies of consecutive conversations, by (source, frac) group, and their
    ``--ledgers`` lines. A Dask worker adds a whole range's conversations into one and sends
    only that back; merged in input order, they give exactly the single-process tallies (and
    the groups in the same order)."""

    conversations: int = 0
    cuts: int = 0
    groups: dict[tuple[str, str], dict[str, Tally]] = field(default_factory=dict)
    cut_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    ledger_lines: list[str] = field(default_factory=list)
    archive: dict[tuple[str, str], Any] = field(default_factory=dict)  # ArchiveShares by group

    def add(self, scores: list[CutScore]) -> None:
        """One conversation's cuts."""
        self.conversations += 1
        for score in scores:
            self.cuts += 1
            for group in ((score.source, _pct(score.frac)), (score.source, "all"),
                          ("all", "all")):
                bucket = self.groups.setdefault(group, {c: Tally() for c in CONTEXTS})
                self.cut_counts[group] = self.cut_counts.get(group, 0) + 1
                for name, (hits, tokens) in score.scores.items():  # AGENT's: some cuts only
                    bucket.setdefault(name, Tally()).add(score.gold, hits, tokens,
                                                         score.span_tokens)
            self.ledger_lines.append(json.dumps(score.ledger, ensure_ascii=False))
            _tally_archive(self.archive, score)

    def merge(self, other: Tallies) -> None:
        """Add ``other``, which came after (its ledger lines are not kept: write them)."""
        self.conversations += other.conversations
        self.cuts += other.cuts
        for group, tallies in other.groups.items():
            bucket = self.groups.setdefault(group, {c: Tally() for c in CONTEXTS})
            for name, tally in tallies.items():
                bucket.setdefault(name, Tally()).merge(tally)
            self.cut_counts[group] = self.cut_counts.get(group, 0) + other.cut_counts[group]
        for group, shares in other.archive.items():
            _tally_archive(self.archive, None, group, shares)


def _tally_archive(archive: dict[tuple[str, str], Any], score: CutScore | None,
                   group: tuple[str, str] | None = None, shares: Any = None) -> None:
    """Add a cut's archive shares (or a group's, when merging) to ``archive``."""
    from .archive_eval import ArchiveShares

    if score is not None:
        counts = score.ledger.get("archive")
        if counts is None:
            return
        for g in ((score.source, _pct(score.frac)), (score.source, "all"), ("all", "all")):
            archive.setdefault(g, ArchiveShares()).add(counts)
    else:
        archive.setdefault(group, ArchiveShares()).add(shares)


@dataclass(frozen=True)
class EvalTask:
    """One conversation's cuts, scored: the map of ``run`` (``distributed`` runs it on Dask
    workers). The packs travel with it; ``setup`` builds the ``Firewall`` once per process."""

    packs: Sequence[Any] | None
    fractions: Sequence[float]
    budget: int | str | Budget
    keep_last: int
    salience: Any = None  # a Salience; None: the built-in one
    archive_tokens: bool = True  # the archive's token tier (see audit.archive)

    def setup(self) -> Any:
        from ..audit.archive import ArchiveLimits
        from ..compaction.guard import Firewall

        # the same extraction, ledger update and fit as compaction
        return Firewall(self.packs, salience=self.salience,
                        archive=ArchiveLimits(tokens=self.archive_tokens))

    def partial(self) -> Tallies:
        """Where consecutive results are added (on the worker: one per range)."""
        return Tallies()

    def __call__(self, firewall: Any, path: str, conversation: Conversation) -> list[CutScore]:
        source = source_of(path)
        cuts = [(frac, k, None) for frac, k in cut_points(len(conversation.turns),
                                                            self.fractions)]
        cuts += agent_cuts(conversation)
        scored = [evaluate_cut(conversation, k, firewall=firewall, budget=self.budget,
                               keep_last=self.keep_last, source=source, frac=frac,
                               agent_summary=summary)
                  for frac, k, summary in cuts]
        add_hook_contexts(scored, conversation, firewall)  # the agent's compactions, via hooks
        return [CutScore.of(cut) for cut in scored]


def run(files: Sequence[str | Path], *, fractions: Sequence[float] = FRACTIONS,
        packs: Sequence[Any] | None = None, budget: int | str | Budget = Budget(),
        keep_last: int = 4, ledgers: Any = None,
        progress: Callable[[str], None] | None = None,
        read: Callable[[str | Path], Iterable[Conversation]] | None = None,
        scored: Callable[[EvalTask], Iterable[tuple[str, Tallies]]] | None = None,
        salience: Any = None, archive_tokens: bool = True) -> dict[str, Any]:
    """Evaluate every file; returns ``{"groups": {(source, frac): {context: summary}}, ...}``.

    ``ledgers``: a text stream receiving one JSON line per (conversation, k). ``read``: how a
    file's conversations are read, one at a time (default ``read_conversations``).
    ``scored``: maps the task over the files' conversations (``distributed``), yielding
    ``(file, tallies)`` of consecutive conversations in input order; the result is the same.
    ``salience``: the ``Salience`` ranking what the budget keeps (None: the built-in one).
    """
    from ..formats import read_conversations
    from ..compaction.salience import load_salience

    salience = salience or load_salience(None)
    task = EvalTask(packs, tuple(fractions), budget, keep_last, salience, archive_tokens)
    if scored is None:
        read = read or read_conversations
        firewall = task.setup()

        def one_by_one() -> Iterator[tuple[str, Tallies]]:
            for path in files:
                for conversation in read(path):
                    tallies = task.partial()
                    tallies.add(task(firewall, str(path), conversation))
                    yield str(path), tallies

        results: Iterable[tuple[str, Tallies]] = one_by_one()
    else:
        results = scored(task)
    total = Tallies()
    for path, tallies in results:
        if ledgers is not None:
            ledgers.writelines(line + "\n" for line in tallies.ledger_lines)
        total.merge(tallies)
        if progress is not None:
            progress(f"{source_of(path)}: {total.conversations} conversation(s), "
                     f"{total.cuts} cut(s)")
    return {"conversations": total.conversations, "cuts": total.cuts,
            "budget": str(budget) if isinstance(budget, Budget) else budget,
            "keep_last": keep_last, "fractions": list(fractions),
            "salience": salience.describe(),
            "groups": [{"source": s, "frac": f, "cuts": total.cut_counts[(s, f)],
                        **{c: t.summary() for c, t in ts.items()}}
                       for (s, f), ts in total.groups.items()],
            "archive": [{"source": s, "frac": f, "shares": shares.summary()}
                        for (s, f), shares in total.archive.items()]}


def _pct(frac: float | str) -> str:
    return frac if isinstance(frac, str) else f"{frac * 100:g}%"


# ── report ───────────────────────────────────────────────────────────────────────────────────

def _p(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}"


def _tok(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def format_report(result: dict[str, Any]) -> str:
    n = result["keep_last"]
    k = COST_SPAN_MIN // 1000
    head = ("source", "frac", "cuts", "ID-like", "strict",
            "ledger ID", "ledger strict", f"cuts >={k}k", "cost med", "cost total",
            f"cuts <{k}k", "ledger tok med",
            f"+last{n} ID", f"+last{n} strict", "cost",
            "user ID", "user cost", f"last{n} ID", f"last{n} strict", "cost",
            f"user+last{n} ID", "cost", "naive ID", "naive strict", "naive cost",
            "oracle ID", "oracle cost",
            "address", "ledger addr", f"+last{n} addr", "naive addr",
            "extracted ID", "extracted strict", "extracted addr", "extracted cost",
            "ranked ID", "ranked addr", "ranked cost")
    rows = []
    order = {"all": "~"}  # the "all" rows after the per-fraction rows
    for g in sorted(result["groups"], key=lambda g: (order.get(g["source"], g["source"]),
                                                      order.get(g["frac"], g["frac"]))):
        led, lt, us, ta, ut, nai, orc, ext, ran = (g[c] for c in CONTEXTS)
        rows.append((g["source"], g["frac"], g["cuts"], led["n"]["id_like"], led["n"]["strict"],
                     _p(led["recall"]["id_like"]), _p(led["recall"]["strict"]),
                     led["cost_cuts"], _p(led["cost_median"]), _p(led["cost_total"]),
                     led["short_cuts"], _tok(led["tokens_short_median"]),
                     _p(lt["recall"]["id_like"]), _p(lt["recall"]["strict"]),
                     _p(lt["cost_total"]),
                     _p(us["recall"]["id_like"]), _p(us["cost_total"]),
                     _p(ta["recall"]["id_like"]), _p(ta["recall"]["strict"]),
                     _p(ta["cost_total"]),
                     _p(ut["recall"]["id_like"]), _p(ut["cost_total"]),
                     _p(nai["recall"]["id_like"]), _p(nai["recall"]["strict"]),
                     _p(nai["cost_total"]),
                     _p(orc["recall"]["id_like"]), _p(orc["cost_total"]),
                     led["n"]["address"], _p(led["recall"]["address"]),
                     _p(lt["recall"]["address"]), _p(nai["recall"]["address"]),
                     _p(ext["recall"]["id_like"]), _p(ext["recall"]["strict"]),
                     _p(ext["recall"]["address"]), _p(ext["cost_total"]),
                     _p(ran["recall"]["id_like"]), _p(ran["recall"]["address"]),
                     _p(ran["cost_total"])))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    agent = [g for g in result["groups"] if g["frac"] == AGENT]
    if agent:
        lines += ["\nAt the compactions the agents made themselves (their own summary, then "
                  "the ledger re-injected after it; + hooks' block: the summary and what the "
                  "pre-compact, post-compact and session-start hooks re-inject, driven on the "
                  "session file; both blocks' budget is a share of the context the agent "
                  "compacted, since its previous compaction):",
                  "| source | cuts | ID-like | strict | agent summary ID | agent strict | "
                  "+ ledger ID | + ledger strict | ledger alone ID | cost | "
                  "+ hooks' block ID | + hooks' block strict | address | agent summary addr | "
                  "+ ledger addr | ledger alone addr | + hooks' block addr |",
                  "|" + "---|" * 17]
        for g in agent:
            a, al, led = g["agent"], g["agent+ledger"], g["ledger"]
            hk = g.get(HOOKS, {"recall": {"id_like": None, "strict": None, "address": None}})
            lines.append("| " + " | ".join(str(c) for c in (
                g["source"], g["cuts"], a["n"]["id_like"], a["n"]["strict"],
                _p(a["recall"]["id_like"]), _p(a["recall"]["strict"]),
                _p(al["recall"]["id_like"]), _p(al["recall"]["strict"]),
                _p(led["recall"]["id_like"]), _p(led["cost_total"]),
                _p(hk["recall"]["id_like"]), _p(hk["recall"]["strict"]),
                a["n"]["address"], _p(a["recall"]["address"]), _p(al["recall"]["address"]),
                _p(led["recall"]["address"]), _p(hk["recall"].get("address")))) + " |")
    from .archive_eval import format_shares

    if format_shares(result):
        lines.append(format_shares(result))
    lines.append(f"\n{result['conversations']} conversation(s), {result['cuts']} cut(s); "
                 f"budget {result['budget']}"
                 f"{' tokens' if isinstance(result['budget'], int) else ''}; "
                 f"salience {result.get('salience', 'hand-set (built-in)')}; "
                 f"recall and cost in %")
    counter = result.get("tokens", "estimate")
    lines.append(f"ID-like / strict: gold counts; cost = ledger tokens / span tokens (messages "
                 f"1..k: their text and tool calls) on spans of {COST_SPAN_MIN:,} tokens or "
                 f"more ('-': none); shorter spans: the ledger's median tokens; tokens counted by "
                 + ("the offline estimate calibrated to o200k" if counter == "estimate"
                    else f"--tokens {counter}"))
    return "\n".join(lines)


# ── CLI ──────────────────────────────────────────────────────────────────────────────────────

def _fractions(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fractions like 0.25,0.5: {text!r}") from None
    if not values or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be between 0 and 1: {text!r}")
    return values


def cmd_eval(args: argparse.Namespace) -> int:
    from .distributed import open_mapper
    from ..options import packs_from_args, salience_from_args

    packs = packs_from_args(args)
    salience = salience_from_args(args)
    out = open(args.ledgers, "w", encoding="utf-8") if args.ledgers else None
    try:
        with open_mapper(args.dask, args.dask_partition) as mapper, \
                mapper.files(args.files, fail_fast=args.fail_fast, label="eval") as files:
            result = run(args.files, fractions=args.at, packs=packs, budget=args.budget,
                         keep_last=args.keep_last, ledgers=out,
                         scored=lambda task: mapper.map(task, files), salience=salience,
                         archive_tokens=args.archive_tokens)
            bad = files.report()
    finally:
        if out is not None:
            out.close()
    result["tokens"] = args.tokens
    sys.stdout.write((json.dumps(result, indent=1) if args.json else format_report(result))
                     + "\n")
    return 1 if bad else 0


EVAL_COLUMNS = f"""\
The table: one row per source file and compaction point (frac), then per source, then all.
  cuts                  compaction points evaluated
  ID-like, strict       gold literals: strings a later tool call passed verbatim that were
                        already in the conversation at the cut. strict: whole argument
                        values, and the tokens of free-text arguments shaped like an email,
                        number, code or identifier; ID-like: the strict ones of 4+
                        characters holding a digit, / or @
  then the recall (%) of the gold kept by each context, and its cost (% of the compacted
  span's tokens), judged where compaction happens: on spans of {COST_SPAN_MIN:,} tokens or more
  ('-' when there are none); on shorter spans the share says little and the ledger's
  absolute tokens are shown instead:
  ledger ID / strict    the ledger block alone
  cuts >={COST_SPAN_MIN // 1000}k            cuts whose span has {COST_SPAN_MIN:,} tokens or more: the cost
                        columns are theirs
  cost med, cost total  median ledger share per cut; all ledger tokens / all span tokens
  cuts <{COST_SPAN_MIN // 1000}k, ledger tok med
                        the shorter cuts, and the ledger's median tokens on them
  +lastN                the ledger plus the last N messages verbatim (--keep-last)
  user                  the user's messages verbatim (what Codex keeps)
  lastN                 the last N messages alone
  user+lastN            both
  naive ID / strict     the floor to beat: every token of the span holding a digit, / or @
                        (split like the gold); a rule pack earns its keep by beating it on
                        recall and cost
  oracle                a ledger of exactly the gold: the least any ledger could cost
  address               the ID-like gold a later call passes in an argument that names
                        something (a path, a command, a pattern, a URL, an id, a name), not
                        inside text the agent writes (a file body, an edit, a plan, a todo);
                        the addr columns are recall on it
  extracted             every value any rule extracted from the span, before the budget:
                        what extraction alone could keep (its cost: those values' tokens)
  ranked                the naive ledger's tokens ranked by four signals (typed by the user,
                        passed in a call, seen most often, seen last) and cut at the ledger
                        block's tokens: the floor a budgeted ledger must beat at its cost
Every cost is the total over the cuts of {COST_SPAN_MIN:,}+ span tokens unless named med
(median)."""


def add_eval_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``firewall eval`` on the CLI's subparsers."""
    from ..options import (add_archive_tokens_option, add_dask_option, add_fail_fast_option,
                          add_keep_last_option, add_rules_option, add_salience_option,
                          add_tokens_option)

    parser = subparsers.add_parser(
        "eval", help="load-bearing literal recall of the ledger on recorded conversations",
        epilog=EVAL_COLUMNS, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="recorded conversations (JSONL, or one JSON conversation)")
    parser.add_argument("--at", type=_fractions, default=list(FRACTIONS), metavar="F,F,...",
                        help="compaction points as fractions of the messages (default "
                             "0.25,0.5,0.75)")
    add_rules_option(parser)
    parser.add_argument("--budget", type=parse_budget, default=Budget(), metavar="auto|TOKENS|P%",
                        help=f"ledger budget: auto (the default, as compact: "
                             f"{str(Budget()).replace('%', '%%')}), tokens, or a share of each "
                             f"compacted span without floor or cap, e.g. 5%%")
    add_keep_last_option(parser, " in the +lastN, lastN and user+lastN contexts, as compact")
    add_salience_option(parser)
    add_archive_tokens_option(parser)
    parser.add_argument("--ledgers", metavar="OUT.jsonl",
                        help="write one JSON line per (conversation, k) with the pinned literals (a "
                             "secret as [sensitive]) "
                             "and the archived ones (archived: the non-sensitive values the "
                             "archive holds at that cut)")
    parser.add_argument("--json", action="store_true", help="the full result as JSON")
    add_fail_fast_option(parser)
    add_tokens_option(parser, "estimate")  # offline and reproducible: eval counts every turn
    add_dask_option(parser)
    parser.set_defaults(func=cmd_eval)
    return parser

