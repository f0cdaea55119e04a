"""Load-bearing literal recall of the built-in packs on the dev conversations.

For each (conversation, k) of the reference gold (``gold_*.jsonl``: retail and coding), messages
``0..k`` are scanned with every built-in pack, and a gold literal counts as *found* when it
equals an extracted value or occurs inside one as the metric reads it (``occurs``). This is the
upper bound the ledger gives the compacted context (the ledger holds every extracted value), so
it measures the packs, not the summarizer.

    python benchmarks/recall.py [--data ../shared/data] [--json] [--sample 2]

Reported: ID-like gold (strict, at least 4 characters, containing a digit, '/' or '@'),
strict gold, all gold, per source file; extracted literals per (conversation, k) and the
characters of extracted values against the characters of the compacted span (a cost proxy);
the most common misses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from throughput import conversation_files  # gold_* files hold gold, not conversations

REPO = Path(__file__).resolve().parent.parent
GOLD_FILES = "gold_*.jsonl"  # reference gold sets; every other *.jsonl holds conversations


def id_like(gold: dict) -> bool:
    lit = gold["literal"]
    return gold["strict"] and len(lit) >= 4 and any(c.isdigit() or c in "/@" for c in lit)


def gold_rows(paths: list[Path]) -> dict[tuple[str, int], list[dict]]:
    """The rows of reference gold files by conversation id and message count (the coding file
    holds two runs under some ids)."""
    rows: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for path in paths:
        for line in path.open(encoding="utf-8"):
            if line.strip():
                row = json.loads(line)
                rows[row["id"], row["n_messages"]].append(row)
    return rows


def found_in(literal: str, values: set[str], joined: str) -> bool:
    """Equal to an extracted value, or inside one as the metric reads it (``occurs``)."""
    from firewall.evaluation.gold import occurs

    return literal in values or occurs(literal, joined)


def span_chars(turns) -> int:
    total = 0
    for turn in turns:
        total += len(turn.text)
        for call in turn.tool_calls:
            total += len(json.dumps(call.arguments, ensure_ascii=False))
    return total


class Tally:
    def __init__(self) -> None:
        self.hit: Counter[str] = Counter()
        self.n: Counter[str] = Counter()

    def add(self, bucket: str, ok: bool) -> None:
        self.n[bucket] += 1
        self.hit[bucket] += ok

    def rate(self, bucket: str) -> float | None:
        return self.hit[bucket] / self.n[bucket] if self.n[bucket] else None


def run(data: Path, packs_arg: list[str], sample: int) -> dict:
    from firewall.extraction.extract import Extractor
    from firewall.formats import read_conversations
    from firewall.extraction.packs import load_packs

    packs = load_packs(*packs_arg)
    extractor = Extractor(packs)

    gold_by_id = gold_rows(sorted(data.glob(GOLD_FILES)))

    tally = Tally()
    misses: Counter[tuple[str, str, str, str]] = Counter()
    per_file: dict[str, dict] = {}
    counts: list[int] = []
    value_chars = span_total = 0
    samples: list[dict] = []
    started = time.perf_counter()
    n_conversations = 0
    for path in conversation_files(data):
        file_tally = Tally()
        file_counts: list[int] = []
        file_samples = 0
        for conv in read_conversations(path):
            rows = gold_by_id.get((conv.id, len(conv.turns)))
            if not rows:
                continue
            n_conversations += 1
            for row in sorted(rows, key=lambda r: r["k"]):
                k = row["k"]
                result = extractor.scan(conv.turns[: k + 1])
                values = {lit.value for lit in result.literals}
                joined = "\n".join(values)
                counts.append(len(values))
                file_counts.append(len(values))
                value_chars += sum(len(v) for v in values)
                span_total += span_chars(conv.turns[1: k + 1])
                for gold in row["gold"]:
                    ok = found_in(gold["literal"], values, joined)
                    buckets = ["all"] + (["strict"] if gold["strict"] else []) + \
                        (["id_like"] if id_like(gold) else [])
                    for bucket in buckets:
                        tally.add(bucket, ok)
                        file_tally.add(bucket, ok)
                    if not ok and gold["strict"]:
                        misses[(gold["literal"], gold["kind"], gold["arg"],
                                gold["first_seen_role"])] += 1
            if file_samples < sample:
                file_samples += 1
                result = extractor.scan(conv.turns)
                samples.append({"id": conv.id, "literals": [
                    (lit.value, lit.rule) for lit in result.literals]})
        per_file[path.name] = {
            "id_like": file_tally.rate("id_like"), "strict": file_tally.rate("strict"),
            "all": file_tally.rate("all"), "n_id_like": file_tally.n["id_like"],
            "n_strict": file_tally.n["strict"], "n_all": file_tally.n["all"],
            "literals_median": statistics.median(file_counts) if file_counts else 0,
        }
    return {
        "packs": [p.name for p in packs],
        "rules": len(extractor.rules),
        "conversations": n_conversations,
        "cuts": len(counts),
        "seconds": round(time.perf_counter() - started, 2),
        "recall": {b: tally.rate(b) for b in ("id_like", "strict", "all")},
        "n": {b: tally.n[b] for b in ("id_like", "strict", "all")},
        "per_file": per_file,
        "literals_per_cut": {
            "median": statistics.median(counts) if counts else 0,
            "mean": round(statistics.fmean(counts), 1) if counts else 0,
            "max": max(counts, default=0)},
        "value_chars": value_chars,
        "span_chars": span_total,
        "value_to_span": value_chars / span_total if span_total else None,
        "top_misses": [{"literal": lit, "kind": kind, "arg": arg, "first_seen": role,
                        "count": c} for (lit, kind, arg, role), c in misses.most_common(30)],
        "missed_by_arg": Counter(f"{kind}/{arg}" for (_, kind, arg, _), c in misses.items()
                                 for _ in range(c)).most_common(),
        "samples": samples,
    }


def pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def print_report(r: dict) -> None:
    print(f"packs: {', '.join(r['packs'])} ({r['rules']} rules); {r['conversations']} "
          f"conversations, {r['cuts']} cuts, scanned in {r['seconds']} s")
    print()
    print(f"{'':38} {'id-like':>14} {'strict':>14} {'all':>14} {'lits/cut':>8}")
    rows = [("all files", r["recall"], r["n"], r["literals_per_cut"]["median"])]
    for name, f in r["per_file"].items():
        rows.append((name, f, {"id_like": f["n_id_like"], "strict": f["n_strict"],
                               "all": f["n_all"]}, f["literals_median"]))
    for name, rec, n, lits in rows:
        cells = " ".join(f"{pct(rec[b])} ({n[b]:>5})" for b in ("id_like", "strict", "all"))
        print(f"{name:38} {cells} {lits:>8}")
    lpc = r["literals_per_cut"]
    print()
    print(f"extracted literals per cut: median {lpc['median']}, mean {lpc['mean']}, "
          f"max {lpc['max']}")
    if r["value_to_span"] is not None:
        print(f"characters of extracted values / characters of the span: {r['value_chars']:,} / "
              f"{r['span_chars']:,} = {100 * r['value_to_span']:.1f}%")
    print()
    print("strict misses by kind/arg: " + ", ".join(f"{k} {c}" for k, c in r["missed_by_arg"]))
    print("most common strict misses:")
    for m in r["top_misses"]:
        print(f"  {m['count']:4}  {m['literal']!r:40} {m['kind']}/{m['arg']} "
              f"(first seen: {m['first_seen']})")
    for s in r["samples"]:
        print()
        print(f"sample: literals of {s['id']} ({len(s['literals'])})")
        for value, rule in s["literals"]:
            print(f"  {rule:32} {value!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                        help="directory of the dev conversations and %(default)s gold")
    parser.add_argument("--packs", nargs="*", default=[],
                        help="pack names or paths (default: every built-in pack)")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="also print the literals extracted from the first N "
                             "conversations of each file (a precision check by eye)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if not any(args.data.glob(GOLD_FILES)):
        print(f"no dev data: no {GOLD_FILES} in {args.data}; pass --data DIR "
              "(the directory of the *.jsonl conversations and their gold files)")
        return 0
    sys.path.insert(0, str(REPO))
    report = run(args.data, args.packs, args.sample)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
