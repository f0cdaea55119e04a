"""How cheap can a ledger that keeps 99 % of the ID-like gold be? The cost side of ``firewall eval``.

    python benchmarks/cost_frontier.py [--data ../shared/data] [--share 5]

For every cut of ``firewall eval`` (25/50/75 % of each dev conversation), with the built-in
packs and no budget pressure, it reports ID-like / strict recall and cost (tokens / span tokens,
sum over sum) of:

- the firewall's block as rendered (framing, provenance, values);
- the same values with no framing and no provenance (newline-separated): the floor for this
  selection of values whatever the block's format;
- the DESIGN's naive ledger (every token with a digit, ``/`` or ``@``) and the oracle (exactly
  the gold, values only), to place this token count against figures measured elsewhere;
- the **ceiling** at ``--share`` % of the spans in total: the best ID-like recall any choice of
  values can reach when it ranks them by what the ledger knows of a value (role, whether the
  span used it, how many values of its kind its message listed, its kind), with each class's
  gold rate *fitted on this very data* (so optimistic) and a fixed per-block framing cost.

Span tokens are counted two ways: the messages' text and tool calls (what ``firewall eval``
uses), and each message serialized as JSON (role, ids and all, closer to what an API bills).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firewall.evaluation.evaluate import oracle_ledger, turn_text  # noqa: E402
from firewall.evaluation.gold import cut_points, gold_set, occurs
from firewall.formats import read_conversations  # noqa: E402
from firewall.compaction.guard import Firewall  # noqa: E402
from firewall.compaction.ledger import Ledger  # noqa: E402
from firewall.compaction.span_uses import uses
from firewall.tokens import count_tokens  # noqa: E402

NAIVE_SPLIT = re.compile(r"""[\s"'\[\]{}(),:;]+""")
FRAMINGS = (0, 20, 40)  # tokens per block: none, a minimal header and end line, today's


def naive_values(turns) -> list[str]:
    """Every distinct token with a digit, '/' or '@' (the DESIGN's naive ledger)."""
    seen: dict[str, None] = {}
    for turn in turns:
        for token in NAIVE_SPLIT.split(turn_text(turn)):
            token = token.strip(".,;:!?")
            if token and any(c.isdigit() or c in "/@" for c in token):
                seen.setdefault(token)
    return list(seen)


def listing_bucket(n: int) -> int:
    return 1 if n == 1 else 3 if n <= 3 else 15 if n <= 15 else 99


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--share", type=float, default=5.0, help="total cost share, percent")
    args = parser.parse_args()
    files = sorted(p for p in Path(args.data).glob("*.jsonl") if not p.name.startswith("gold"))
    if not files:
        print(f"no dev data at {args.data}: nothing to measure (pass --data)")
        return 0
    print(f"$ python benchmarks/cost_frontier.py --share {args.share:g}")

    firewall = Firewall(None)
    cost: Counter[str] = Counter()
    hit: dict[str, Counter[str]] = defaultdict(Counter)
    n_gold: Counter[str] = Counter()
    items = []  # (cut, class, tokens, the ID-like gold it carries)
    cuts = 0
    for path in files:
        for conversation in read_conversations(path):
            for _, k in cut_points(len(conversation.turns), (0.25, 0.5, 0.75)):
                span = conversation.turns[1:k + 1]
                cost["span"] += sum(count_tokens(turn_text(t)) for t in span)
                cost["span_json"] += sum(count_tokens(json.dumps(t.raw, ensure_ascii=False))
                                         for t in span)
                ledger = Ledger.new(conversation.id)
                firewall.pin(ledger, span, offset=1)
                gold = gold_set(conversation, k)
                block = ledger.render()
                # the values the block writes (one a longer value carries is not written twice)
                values = [e.value for e in Ledger.parse(block, ledger.nonce, ledger.key)]
                texts = {
                    "block": (block, "\n".join(values)),
                    "values only": ("\n".join(values), "\n".join(values)),
                    "naive": ("\n".join(naive_values(span)),) * 2,
                    "oracle": ("\n".join(oracle_ledger(conversation, gold).values()),) * 2,
                }
                for name, (shown, searchable) in texts.items():
                    cost[name] += count_tokens(shown) if shown else 0
                    for g in gold:
                        found = occurs(g.literal, searchable)
                        hit[name]["id"] += g.id_like and found
                        hit[name]["strict"] += g.strict and found
                n_gold["id"] += sum(g.id_like for g in gold)
                n_gold["strict"] += sum(g.strict for g in gold)
                used = uses(ledger.entries, span)
                written = set(values)
                for e in (e for e in ledger.entries if e.value in written):
                    klass = (e.role, used[e.value], listing_bucket(used.listed[e.value]), e.kind)
                    carried = [g.literal for g in gold if g.id_like and occurs(g.literal, e.value)]
                    items.append((cuts, klass, count_tokens(e.value) + 1, carried))
                cuts += 1

    def pct(x: float, y: float) -> str:
        return f"{100 * x / y:.2f} %"

    print(f"{cuts} cuts; span {cost['span']:,} tokens (text and calls), "
          f"{cost['span_json']:,} as JSON messages ({cost['span_json'] / cost['span']:.2f}x)\n")
    print("| ledger | ID-like | strict | cost (text span) | cost (JSON span) |")
    print("|---|---:|---:|---:|---:|")
    for name in ("block", "values only", "naive", "oracle"):
        print(f"| {name} | {pct(hit[name]['id'], n_gold['id'])} | "
              f"{pct(hit[name]['strict'], n_gold['strict'])} | {pct(cost[name], cost['span'])} | "
              f"{pct(cost[name], cost['span_json'])} |")

    rate_n: Counter = Counter()
    rate_hit: Counter = Counter()
    for _, klass, _, carried in items:
        rate_n[klass] += 1
        rate_hit[klass] += len(carried)
    ranked = sorted(items, key=lambda it: -rate_hit[it[1]] / rate_n[it[1]] / it[2])
    print(f"\nCeiling at {args.share:g} % of the spans in total (class gold rates fitted on "
          "this data):\n")
    print("| framing per block | span counted as | literal budget | best ID-like recall |")
    print("|---:|---|---:|---:|")
    for span_name, span_tokens in (("text", cost["span"]), ("JSON", cost["span_json"])):
        for framing in FRAMINGS:
            budget = args.share / 100 * span_tokens - framing * cuts
            spent, got = 0, set()
            for cut, _, tokens, carried in ranked:
                if spent + tokens > budget:
                    continue
                spent += tokens
                got.update((cut, g) for g in carried)
            print(f"| {framing} | {span_name} | {max(0, int(budget)):,} | "
                  f"{pct(len(got), n_gold['id'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
