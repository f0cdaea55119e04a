"""Time the guard adds around a summarizer call, for a ~100k-token span.

    python benchmarks/overhead.py [--data ../shared/data] [--repeat 7] [--profile 25]

The summarizer answers instantly (a scripted one), so the time measured is all firewall:
extraction, ledger update and fit, validation, composition, and the SQLite audit write.
Reported as medians in milliseconds and as a ratio to extraction alone, measured in the same run.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from firewall.audit import SQLiteAuditLog  # noqa: E402
from firewall.formats import read_conversations  # noqa: E402
from firewall.compaction.guard import Firewall  # noqa: E402
from firewall.summarizers.scripted import ScriptedSummarizer  # noqa: E402
from firewall.tokens import count_tokens, estimate_tokens, set_token_counter  # noqa: E402
from firewall.turns import Conversation  # noqa: E402


def span_of(data: Path, target_tokens: int) -> Conversation:
    """Concatenate dev conversations (no system turns) until the span holds target tokens."""
    turns, tokens = [], 0
    for path in sorted(data.glob("*.jsonl")):
        if path.name.startswith("gold"):
            continue
        for conversation in read_conversations(path):
            for turn in conversation.turns:
                if turn.role != "system":
                    turns.append(turn)
                    tokens += count_tokens(turn.text)
            if tokens >= target_tokens:
                return Conversation(turns=turns, id="bench", format=conversation.format)
    return Conversation(turns=turns, id="bench", format="native")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", type=int, metavar="N", default=0,
                        help="then profile 5 compactions over turns seen before (cProfile) "
                             "and print the N functions with the most cumulative time")
    args = parser.parse_args()
    data = Path(args.data)
    if not data.is_dir():
        print(f"no dev data at {data}: nothing to measure (pass --data)")
        return 0
    print(f"$ python benchmarks/overhead.py --tokens {args.tokens} --repeat {args.repeat}")
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}")
    conversation = span_of(data, args.tokens)
    tokens = sum(count_tokens(t.text) for t in conversation.turns)
    values = [lit.value for lit in Firewall().extractor.scan(conversation).literals]
    summary = "Summary: " + " ".join(values[:50])  # a plausible summary holding some literals

    extraction, cold, observed, warm = [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeat):
            # cold: a new firewall that has never seen these turns (caches empty)
            fw = Firewall(keep_last=0, max_retries=0)
            fw.audit = SQLiteAuditLog(Path(folder) / "audit.db")
            set_token_counter(estimate_tokens)  # also empties the token-count cache
            start = time.perf_counter()
            fw.extractor.scan(conversation)
            extraction.append(time.perf_counter() - start)
            fw = Firewall(keep_last=0, max_retries=0, audit=fw.audit)
            set_token_counter(estimate_tokens)
            start = time.perf_counter()
            result = fw.compact(conversation, summarizer=ScriptedSummarizer([summary]))
            cold.append(time.perf_counter() - start)
            # observed: an agent that called fw.observe(message) as each message arrived
            fresh = Firewall(keep_last=0, max_retries=0, audit=fw.audit)
            set_token_counter(estimate_tokens)
            for turn in conversation.turns:
                fresh.observe(Conversation(turns=[turn], id="bench", format=conversation.format))
            start = time.perf_counter()
            fresh.compact(conversation, summarizer=ScriptedSummarizer([summary]))
            observed.append(time.perf_counter() - start)
            # warm: the same firewall compacts the same history again (a retry, a hook re-run)
            start = time.perf_counter()
            result = fw.compact(conversation, summarizer=ScriptedSummarizer([summary]))
            warm.append(time.perf_counter() - start)
            assert result.compacted
    ex, c, o, w = (statistics.median(x) * 1000 for x in (extraction, cold, observed, warm))
    print(f"span: {len(conversation.turns)} turns, {tokens} tokens, {len(values)} literals, "
          f"ledger {len(result.ledger)} entries after the budget")
    print(f"extraction alone, cold          {ex:8.1f} ms")
    print(f"whole guard, cold               {c:8.1f} ms   (ratio to extraction {c / ex:.2f}x)")
    print(f"whole guard, after observe()    {o:8.1f} ms   (ratio to extraction {o / ex:.2f}x)")
    print(f"whole guard, same history again {w:8.1f} ms   (ratio to extraction {w / ex:.2f}x)")
    if args.profile:
        profile(conversation, summary, args.profile)
    return 0


def profile(conversation: Conversation, summary: str, top: int) -> None:
    import cProfile
    import pstats

    with tempfile.TemporaryDirectory() as folder:
        fw = Firewall(keep_last=0, max_retries=0, audit=SQLiteAuditLog(Path(folder) / "a.db"))
        fw.compact(conversation, summarizer=ScriptedSummarizer([summary]))  # turns now seen
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5):
            fw.compact(conversation, summarizer=ScriptedSummarizer([summary]))
        profiler.disable()
        fw.audit.close()
    print("\nprofile of 5 compactions over turns seen before (cProfile adds its own overhead):")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    raise SystemExit(main())
