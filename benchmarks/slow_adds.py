"""The slowest adds of ``speed.py``'s incremental run, and where each goes, per rule.

Adds every turn of the longest session of a folder (default ``../shared/data/claude_code_cc0``)
to a ``Scanner`` with an extractor warmed as in ``speed.py``, lists the ``--top`` slowest adds
(turn, role, tool, size, whether the text is ASCII), then scans those turns again ``--passes``
times (uncached) timing each rule's run, the prefilter and the noise patterns, in CPU time.

    python benchmarks/slow_adds.py [FOLDER] [--top 10] [--passes 10] [--turns 722,850]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import warmed_extractor  # noqa: E402
from throughput import DEFAULT_DATA, load_packs_for_bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DATA / "claude_code_cc0"))
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--turns", help="profile these turn numbers instead of the slowest")
    args = parser.parse_args()
    files = sorted(Path(args.folder).glob("*.jsonl")) if Path(args.folder).is_dir() else []
    if not files:
        print(f"no sessions at {args.folder}: nothing to profile")
        sys.exit(0)
    from firewall.extraction import extract
    from firewall.formats import read_conversations

    conversations = [c for path in files for c in read_conversations(path, on_error=lambda e: None)]
    longest = max(conversations, key=lambda c: sum(len(t.text) for t in c.turns))
    packs, _ = load_packs_for_bench([])
    extractor = warmed_extractor(packs)
    scanner = extract.Scanner(extractor)
    clock = time.thread_time
    adds = []
    for i, turn in enumerate(longest.turns):
        started = clock()
        scanner.add(turn)
        adds.append((clock() - started, i))
    adds.sort(reverse=True)
    print(f"{longest.id}: {len(longest.turns)} turns; the {args.top} slowest adds (CPU):")
    for spent, i in adds[:args.top]:
        turn = longest.turns[i]
        text = turn.text or ""
        print(f"  {spent * 1e3:7.2f} ms  turn {i:4d}  {turn.role:9s} {turn.tool_name or '-':10s} "
              f"{len(text):6d} chars  {'ASCII' if text.isascii() else 'non-ASCII'}"
              f"  {len(turn.tool_calls)} call(s)")
    chosen = [int(t) for t in args.turns.split(",")] if args.turns else \
        [i for _, i in adds[:args.top]]

    cost: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    run, noise_spans = extract.Extractor._run, extract.Extractor.noise_spans
    candidates = extractor._prefilter.candidates

    def timed_run(self, rule, *rest):
        started = clock()
        run(self, rule, *rest)
        cost[rule.qid] += clock() - started
        runs[rule.qid] += 1

    def timed_noise(self, *rest):
        started = clock()
        try:
            return noise_spans(self, *rest)
        finally:
            cost["(noise)"] += clock() - started

    def timed_candidates(*rest):
        started = clock()
        try:
            return candidates(*rest)
        finally:
            cost["(prefilter)"] += clock() - started

    extract.Extractor._run, extract.Extractor.noise_spans = timed_run, timed_noise
    extractor._prefilter.candidates = timed_candidates
    total = 0.0
    for _ in range(args.passes):
        for i in chosen:
            turn = longest.turns[i]
            started = clock()
            extractor._scan_turn(turn, turn.text, i)  # uncached: the turn memo is not asked
            total += clock() - started
    extract.Extractor._run, extract.Extractor.noise_spans = run, noise_spans
    del extractor._prefilter.candidates
    print(f"turns {','.join(map(str, chosen))}: {total / args.passes * 1e3:.2f} ms per pass "
          f"(mean of {args.passes}); per part:")
    for name, spent in cost.most_common(15):
        print(f"  {spent / args.passes * 1e3:7.3f} ms  {name}"
              + (f"  ({runs[name] // args.passes} run(s) per pass)" if name in runs else ""))


if __name__ == "__main__":
    main()
