"""Extraction CPU of several rule sets on the same engine, in one process: what rules cost.

``extraction_cpu.py`` compares two trees in two processes, minutes apart; on a shared machine
the load moves more between them than a few rules cost. Here every rule set (a folder holding
the six built-in pack files, e.g. ``git show OLD:rules/core.yaml`` and the others) gets its own
extractor in the same process, warmed on the conversations with its Hyperscan databases ready,
and the timed passes alternate between them (ABC, CBA, ...), each a scan of every dev
conversation in thread CPU time. Reported: per set the median pass, and its ratio to the
first set's pass of the same round (median over rounds, and of the summed passes).

    python benchmarks/rules_cpu.py OLD_RULES_DIR NEW_RULES_DIR [...] [--rounds 4] [--data DIR]

Built-in packs not in a folder are loaded from it anyway: pass all six files per folder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import DEFAULT_DATA, conversation_files, exit_without_data, load_conversations  # noqa: E402

PACKS = ("core", "coding", "commerce", "billing", "cloud", "secrets")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="RULES_DIR")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    args = parser.parse_args(argv)
    files = conversation_files(args.data)
    if not files:
        exit_without_data(args.data)
    from firewall.extraction.extract import Extractor
    from firewall.extraction.packs import load_packs

    conversations = load_conversations(files)
    extractors = []
    for folder in args.folders:
        extractor = Extractor(load_packs(*(Path(folder) / f"{name}.yaml" for name in PACKS)))
        extractor._prefilter.wait_multimatch(600)  # compiled once per rule set, then cached
        for conversation in conversations:  # warm: patterns and locators are built on first use
            extractor.scan(conversation)
        extractors.append(extractor)
    passes: list[list[float]] = [[] for _ in extractors]
    for round_ in range(args.rounds):
        order = range(len(extractors)) if round_ % 2 == 0 else reversed(range(len(extractors)))
        for i in order:
            started = time.thread_time()
            for conversation in conversations:
                extractors[i].scan(conversation)
            passes[i].append(time.thread_time() - started)
        print(f"round {round_ + 1}: " + " ".join(f"{p[-1]:.2f}" for p in passes), flush=True)
    base = passes[0]
    for folder, times in zip(args.folders, passes):
        ratios = [t / b for t, b in zip(times, base)]
        print(f"{folder}: median pass {statistics.median(times):.2f} s; to the first: median "
              f"{statistics.median(ratios):.3f}, summed {sum(times) / sum(base):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
