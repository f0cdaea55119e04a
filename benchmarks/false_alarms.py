"""False alarms of ``firewall check`` on faithful summaries of the dev conversations.

Each conversation is cut as ``firewall compact`` cuts it (a verbatim tail of ``--keep-last``
turns); the offline ``ExtractiveSummarizer`` summarizes the span on its first attempt (it copies
sentences and tool lines, never rewrites them); ``Firewall.check`` then validates that summary
against the span, with every built-in pack. Any ``mutated`` finding on a copied summary is a
false alarm, except a value the summarizer itself clipped (``_clip`` cuts a long value and
writes `` …``): that is a real truncation, counted apart.

    python benchmarks/false_alarms.py [--data ../shared/data] [--keep-last 8] [--show 20]

Reported: summaries checked, summaries failing on a mutation (the false-alarm rate), mutated
findings by reason, literals checked, and the first findings for inspection.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(data: Path, keep_last: int, show: int) -> int:
    sys.path.insert(0, str(REPO))
    from firewall.compaction.compose import choose_span
    from firewall.formats import read_conversations
    from firewall.compaction.guard import Firewall
    from firewall.summarizers.base import SummaryRequest
    from firewall.summarizers.extractive import ExtractiveSummarizer
    from firewall.turns import Conversation

    fw, summarizer = Firewall(), ExtractiveSummarizer()
    files = [p for p in sorted(data.glob("*.jsonl")) if not p.name.startswith("gold")]
    summaries = alarmed = clipped_only = literals = 0
    reasons: Counter[str] = Counter()
    shown: list[str] = []
    started = time.perf_counter()
    for path in files:
        for conversation in read_conversations(path):
            span = choose_span(conversation.turns, keep_last)
            turns = conversation.turns[span.start:span.end]
            if not turns:
                continue
            summary = summarizer.summarize(SummaryRequest(tuple(turns), (), "")).text
            found = fw.scan(Conversation(turns, conversation.id, conversation.format))
            verdict = fw.check(Conversation(turns, conversation.id, conversation.format), summary,
                               literals=found)
            summaries += 1
            literals += len({lit.value for lit in found})
            # a clipped value: the summarizer cut it and wrote " …" right after
            real = [f for f in verdict.mutated
                    if not summary.startswith(" …", f.span[1])]
            if verdict.mutated and not real:
                clipped_only += 1
            if real:
                alarmed += 1
            for f in verdict.mutated:
                clipped = f not in real
                reasons[f.reason + (" (clipped by the summarizer)" if clipped else "")] += 1
                if len(shown) < show:
                    shown.append(f"  {conversation.id}: {f.value!r} -> {f.resembles!r} "
                                 f"({f.reason}{', clipped' if clipped else ''})")
    elapsed = time.perf_counter() - started
    print(f"{summaries} extractive summaries of {len(files)} files, {literals} distinct literals "
          f"checked, {elapsed:.1f} s")
    print(f"false alarms: {alarmed} summaries ({100 * alarmed / max(summaries, 1):.1f} %) fail "
          f"on a mutation the summary did not make")
    print(f"clipped by the summarizer only: {clipped_only} summaries "
          f"({100 * clipped_only / max(summaries, 1):.1f} %), real truncations")
    for reason, n in reasons.most_common():
        print(f"  {n:4}  {reason}")
    print("\n".join(shown))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                        help="folder of the dev conversations (*.jsonl)")
    parser.add_argument("--keep-last", type=int, default=8, help="verbatim tail, as compact")
    parser.add_argument("--show", type=int, default=20, help="findings to print")
    args = parser.parse_args()
    if not any(args.data.glob("*.jsonl")):
        print(f"no dev data in {args.data}; pass --data DIR")
        return 0
    return run(args.data, args.keep_last, args.show)


if __name__ == "__main__":
    raise SystemExit(main())
