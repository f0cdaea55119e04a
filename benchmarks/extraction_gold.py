"""What each rule adds to the extracted share of the gold: extraction alone, before any budget.

At the cuts ``firewall eval`` makes (``--at`` fractions, and every compaction the agent made
itself in a session file), every literal any rule extracts from the span is matched against the
gold of DESIGN.md (ID-like, and its "addressing" subset: strings a later call passes to name a
path, a command, a pattern, an id). Per rule: the gold its values hold ("hits") and the gold no
other rule holds ("only": what the share loses without it). ``--misses N`` lists the ID-like
gold no rule extracted, the most frequent first.

    python benchmarks/extraction_gold.py ../shared/data/claude_code_cc0/*.jsonl
    python benchmarks/extraction_gold.py ../shared/data/claude_code_cc0/*.jsonl --misses 40
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", metavar="FILE",
                        default=["../shared/data/claude_code_cc0/*.jsonl"])
    parser.add_argument("--at", default="0.25,0.5,0.75", help="cut fractions (as eval's --at)")
    parser.add_argument("--misses", type=int, default=0, metavar="N",
                        help="also list N ID-like gold strings no rule extracted")
    args = parser.parse_args(argv)
    import glob

    files = [f for pattern in args.files for f in (sorted(glob.glob(pattern)) or [pattern])]
    files = [f for f in files if Path(f).is_file()]
    if not files:
        print(f"no conversations at {' '.join(args.files)}: nothing to measure (the dev data "
              f"is ../shared/data/claude_code_cc0/*.jsonl)")
        return 0

    from firewall.evaluation.gold import agent_cuts, cut_points, gold_set, occurs
    from firewall.formats import read_conversations
    from firewall.compaction.guard import Firewall
    from firewall.compaction.ledger import Ledger

    fractions = [float(x) for x in args.at.split(",")]
    firewall = Firewall()
    n = Counter()  # gold counts per bucket
    extracted = Counter()  # gold held by some rule, per bucket
    hits: dict[str, Counter] = {}  # rule -> bucket -> gold it holds
    only: dict[str, Counter] = {}  # rule -> bucket -> gold no other rule holds
    missed: Counter = Counter()
    cuts = 0
    for path in files:
        for conversation in read_conversations(path, on_error=lambda e: None):
            turns = conversation.turns
            start = next((i for i, t in enumerate(turns) if t.role != "system"), len(turns))
            points = [k for _, k in cut_points(len(turns), fractions)]
            points += [k for _, k, _ in agent_cuts(conversation)]
            for k in points:
                cuts += 1
                gold = [g for g in gold_set(conversation, k) if g.id_like]
                pinned = firewall.pin(Ledger.new(conversation.id), turns[start:k + 1],
                                      offset=start, budget=0)
                by_rule: dict[str, list[str]] = {}
                for lit in pinned.literals:
                    by_rule.setdefault(lit.rule, []).append(lit.value)
                texts = {rule: "\n".join(dict.fromkeys(values))
                         for rule, values in by_rule.items()}
                for g in gold:
                    buckets = ("id_like", "address") if g.addresses else ("id_like",)
                    holders = [rule for rule, text in texts.items() if occurs(g.literal, text)]
                    for b in buckets:
                        n[b] += 1
                        extracted[b] += bool(holders)
                        for rule in holders:
                            hits.setdefault(rule, Counter())[b] += 1
                        if len(holders) == 1:
                            only.setdefault(holders[0], Counter())[b] += 1
                    if not holders:
                        missed[(g.literal, "address" if g.addresses else g.arg)] += 1

    def pct(x: int, d: int) -> str:
        return f"{100 * x / d:.1f}" if d else "-"

    print(f"{len(files)} file(s), {cuts} cut(s); ID-like gold {n['id_like']}, "
          f"addressing {n['address']}")
    print(f"extracted (no budget): ID-like {pct(extracted['id_like'], n['id_like'])} %, "
          f"addressing {pct(extracted['address'], n['address'])} %\n")
    print("| rule | ID-like hits | addr hits | ID-like only | addr only | only: ID-like pts "
          "| only: addr pts |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rule in sorted(hits, key=lambda r: (-only.get(r, Counter())["id_like"],
                                            -hits[r]["id_like"], r)):
        h, o = hits[rule], only.get(rule, Counter())
        print(f"| {rule} | {h['id_like']} | {h['address']} | {o['id_like']} | {o['address']} "
              f"| {pct(o['id_like'], n['id_like'])} | {pct(o['address'], n['address'])} |")
    if args.misses:
        print(f"\nID-like gold no rule extracted (of {sum(missed.values())}), most frequent "
              f"first: (string, addressing or the argument of its first use)")
        for (literal, where), count in missed.most_common(args.misses):
            print(f"{count:3d}  {where:12s}  {literal!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
