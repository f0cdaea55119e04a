"""The ledger alone against the reference gold files shipped with the dev data.

    python benchmarks/reference_gold.py [--data ../shared/data] [--budget auto|TOKENS|P%]

``firewall eval`` computes its gold itself (``firewall.evaluation.gold.gold_set``). The dev data also
ships reference gold sets (``gold_*.jsonl``: one row per conversation and cut ``k``, each
literal with its kind and whether it is strict), computed by the definition in DESIGN.md. This
script scores the same contexts ``firewall eval`` builds (the ledger block alone at the given
budget, and the naive ledger) against those rows instead, and says how far the two gold sets
agree, cut by cut. ID-like: strict, 4+ characters, with a digit, ``/`` or ``@``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from recall import GOLD_FILES, gold_rows, id_like
from throughput import conversation_files

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firewall.compaction.budget import parse_budget  # noqa: E402
from firewall.evaluation.evaluate import evaluate_cut, occurs  # noqa: E402
from firewall.formats import read_conversations  # noqa: E402
from firewall.compaction.guard import Firewall  # noqa: E402

CONTEXTS = ("ledger", "naive")


def score(data: Path, gold_path: Path, budget) -> dict:
    by_conversation = gold_rows([gold_path])
    conversations = {(c.id, len(c.turns)): c for path in conversation_files(data)
                     for c in read_conversations(path) if (c.id, len(c.turns)) in by_conversation}
    rows = [row for cut_rows in by_conversation.values() for row in cut_rows]
    firewall = Firewall()
    n, hit, misses = Counter(), Counter(), Counter()
    agree = 0
    for row in rows:
        conversation = conversations.get((row["id"], row["n_messages"]))
        if conversation is None:
            continue
        cut = evaluate_cut(conversation, row["k"], firewall=firewall, budget=budget,
                           keep_last=8)
        agree += {g.literal for g in cut.gold} == {g["literal"] for g in row["gold"]}
        for name in CONTEXTS:
            text = cut.contexts[name][0]
            for gold in row["gold"]:
                for bucket, member in (("id_like", id_like(gold)), ("strict", gold["strict"])):
                    if member:
                        found = occurs(gold["literal"], text)
                        n[name, bucket] += 1
                        hit[name, bucket] += found
                        if name == "ledger" and bucket == "id_like" and not found:
                            misses[gold["kind"], gold["literal"]] += 1
    return {"cuts": len(rows), "same_literals_as_eval": agree,
            "recall": {f"{name} {bucket}": round(100 * hit[name, bucket] / n[name, bucket], 1)
                       for name, bucket in n},
            "gold": {bucket: n["ledger", bucket] for bucket in ("id_like", "strict")},
            "top_misses": [[kind, value, count]
                           for (kind, value), count in misses.most_common(12)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("auto"))
    args = parser.parse_args(argv)
    golds = sorted(args.data.glob(GOLD_FILES))
    if not golds:
        print(f"no reference gold ({GOLD_FILES}) in {args.data}: nothing to score; "
              "pass --data DIR")
        return 0
    for gold_path in golds:
        report = score(args.data, gold_path, args.budget)
        print(f"{gold_path.name}: {report['cuts']} cuts, {report['same_literals_as_eval']} with "
              f"the same literals as firewall eval's gold; gold {report['gold']}")
        print("  recall % " + json.dumps(report["recall"]))
        print("  ledger's ID-like misses (kind, value, cuts): " + json.dumps(report["top_misses"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
