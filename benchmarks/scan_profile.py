"""Where a cold scan of real sessions spends its time: per rule, and outside the rules.

Scans every session of a folder (default ``../shared/data/claude_code_cc0``) with a fresh
extractor warmed as in ``speed.py``, timing each rule's ``find`` (regex confirmation, allowlist,
checks), the prefilter's ``candidates``, the noise patterns, and the rest (JSON walk, literal
objects, sorting, the scanner), in CPU time. ``--cprofile N`` prints the N costliest functions
instead.

    python benchmarks/scan_profile.py [FOLDER] [--top 25] [--cprofile N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import warmed_extractor  # noqa: E402
from throughput import DEFAULT_DATA, load_packs_for_bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DATA / "claude_code_cc0"))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cprofile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    folder = Path(args.folder)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        print(f"no sessions at {folder}: nothing to profile")
        sys.exit(0)
    from firewall.formats import read_conversations

    conversations = [c for path in files for c in read_conversations(path, on_error=lambda e: None)]
    packs, _ = load_packs_for_bench([])
    extractor = warmed_extractor(packs)
    if args.cprofile:
        import cProfile
        import pstats

        profile = cProfile.Profile(time.thread_time)
        profile.enable()
        for conversation in conversations:
            extractor.scan(conversation)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.cprofile)
        return

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(name: str, function):
        def wrapper(*a, **k):
            started = time.thread_time()
            try:
                return function(*a, **k)
            finally:
                spent[name] += time.thread_time() - started
                calls[name] += 1
        return wrapper

    for rule in extractor.rules:
        if hasattr(rule, "find"):
            rule.find = timed(rule.qid, rule.find)
    for noise in extractor.noise:
        noise.spans = timed(f"noise {noise.qid}", noise.spans)
    prefilter = extractor._prefilter
    prefilter.candidates = timed("(prefilter)", prefilter.candidates)
    started = time.thread_time()
    for conversation in conversations:
        extractor.scan(conversation)
    total = time.thread_time() - started
    inside = sum(spent.values())
    print(f"total {total:.3f} s; rules, noise and prefilter {inside:.3f} s; "
          f"outside them {total - inside:.3f} s")
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{seconds * 1e3:9.1f} ms  {calls[name]:6d} calls  {name}")


if __name__ == "__main__":
    main()
