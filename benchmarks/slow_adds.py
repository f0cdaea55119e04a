"""The slowest adds of ``speed.py``'s incremental run, and where each goes, per rule.

Adds every turn of the longest session of a folder (default ``../shared/data/claude_code_cc0``)
to a ``Scanner`` with an extractor warmed as in ``speed.py``, lists the ``--top`` slowest adds
(turn, role, tool, size, whether the text is ASCII), then scans those turns again ``--passes``
times (uncached) timing each rule's run, the prefilter and the noise patterns, in CPU time.
``--generated N``: N generated turns of ``incremental.py`` (4 KB each, cycling tool /
assistant / user, seed 0) instead of the session, every one of them profiled; the parts are
then per add (the mean of N), and "outside" is the rest of the scan (JSON walk, literal
objects, sorting).

    python benchmarks/slow_adds.py [FOLDER] [--top 10] [--passes 10] [--turns 722,850]
    python benchmarks/slow_adds.py --generated 300 [--passes 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incremental import TurnFactory  # noqa: E402
from speed import warmed_extractor  # noqa: E402
from throughput import DEFAULT_DATA, load_packs_for_bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DATA / "claude_code_cc0"))
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--turns", help="profile these turn numbers instead of the slowest")
    parser.add_argument("--generated", type=int, default=0, metavar="N",
                        help="profile N generated turns of incremental.py instead")
    args = parser.parse_args()
    from firewall.extraction import extract

    packs, _ = load_packs_for_bench([])
    clock = time.thread_time
    if args.generated:
        factory = TurnFactory(seed=0, size=4096)
        turns = [factory.next(i) for i in range(args.generated)]
        extractor = warmed_extractor(packs)
        chosen = list(range(len(turns)))
    else:
        files = sorted(Path(args.folder).glob("*.jsonl")) if Path(args.folder).is_dir() else []
        if not files:
            print(f"no sessions at {args.folder}: nothing to profile")
            sys.exit(0)
        from firewall.formats import read_conversations

        conversations = [c for path in files
                         for c in read_conversations(path, on_error=lambda e: None)]
        longest = max(conversations, key=lambda c: sum(len(t.text) for t in c.turns))
        turns = longest.turns
        extractor = warmed_extractor(packs)
        chosen = slowest(extract.Scanner(extractor), longest, args.top, clock)
        if args.turns:
            chosen = [int(t) for t in args.turns.split(",")]

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
    memo = extractor.cache_size
    if args.generated:  # as incremental.py: every short text scanned, not recalled
        extractor.cache_size = 0
    for _ in range(args.passes):
        for i in chosen:
            turn = turns[i]
            started = clock()
            extractor._scan_turn(turn, turn.text, i)  # uncached: the turn memo is not asked
            total += clock() - started
    extractor.cache_size = memo
    extract.Extractor._run, extract.Extractor.noise_spans = run, noise_spans
    del extractor._prefilter.candidates
    per = args.passes * (len(chosen) if args.generated else 1)
    what = f"{len(chosen)} generated turns, per add" if args.generated else \
        f"turns {','.join(map(str, chosen))}, per pass"
    outside = (total - sum(cost.values())) / per
    print(f"{what}: {total / per * 1e3:.3f} ms (mean of {args.passes} passes); outside the "
          f"prefilter, rules and noise {outside * 1e3:.3f} ms; per part:")
    for name, spent in cost.most_common(15):
        print(f"  {spent / per * 1e3:7.3f} ms  {name}"
              + (f"  ({runs[name] / per:.1f} run(s))" if name in runs else ""))


def slowest(scanner, conversation, top: int, clock) -> list[int]:
    """Add every turn of ``conversation``; print the ``top`` slowest adds, return their numbers."""
    adds = []
    for i, turn in enumerate(conversation.turns):
        started = clock()
        scanner.add(turn)
        adds.append((clock() - started, i))
    adds.sort(reverse=True)
    print(f"{conversation.id}: {len(conversation.turns)} turns; the {top} slowest adds (CPU):")
    for spent, i in adds[:top]:
        turn = conversation.turns[i]
        text = turn.text or ""
        print(f"  {spent * 1e3:7.2f} ms  turn {i:4d}  {turn.role:9s} {turn.tool_name or '-':10s} "
              f"{len(text):6d} chars  {'ASCII' if text.isascii() else 'non-ASCII'}"
              f"  {len(turn.tool_calls)} call(s)")
    return [i for _, i in adds[:top]]


if __name__ == "__main__":
    main()
