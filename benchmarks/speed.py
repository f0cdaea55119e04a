"""Extraction speed as ratios against the floor any Python scanner pays, in one process.

The floor: one pass of one simple regex (every token holding a digit, ``/`` or ``@``) over the
same texts (each turn's text and its tool calls' arguments as JSON). Two ratios:

* cold scan: ``Extractor.scan`` of every session of the folder, with a fresh extractor warmed
  first on other text (synthetic turns: each rule compiled, its locator trial under way), against
  the floor over the same texts;
* incremental add: ``Scanner.add`` of each turn of the longest session, one at a time; the p99 of
  those adds against the p99 of the floor on the same turns.

Each is the median of ``--repeat`` runs (a fresh warmed extractor each run). Targets (issue 30):
cold <= 4x, incremental p99 <= 10x.

    python benchmarks/speed.py [FOLDER] [--repeat 3] [--json FILE|-]

FOLDER: session files or JSONL conversations (default ``../shared/data/claude_code_cc0``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incremental import TurnFactory  # noqa: E402
from throughput import DEFAULT_DATA, load_packs_for_bench, print_header, write_json  # noqa: E402

# tokens start after a space: linear (``\S*[\d/@]\S*`` retries every position of a long token)
FLOOR = re.compile(r"(?<!\S)[^\s\d/@]*[\d/@]\S*")


def turn_texts(turn) -> list[str]:
    texts = [turn.text] if turn.text else []
    texts += [json.dumps(c.arguments) for c in turn.tool_calls]
    return texts


def floor(texts: list[str]) -> int:
    n = 0
    for text in texts:
        n += len(FLOOR.findall(text))
    return n


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def warmed_extractor(packs):
    """A fresh extractor that has scanned 300 synthetic turns (other text than the sessions)."""
    from firewall.extract import Extractor

    extractor = Extractor(packs)
    factory = TurnFactory(seed=7, size=4096)
    makers = [factory.tool, factory.assistant, factory.user]
    extractor.scan([makers[i % 3]() for i in range(300)])
    extractor._prefilter.wait_multimatch()  # compiled once per machine, then loaded from cache
    return extractor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DATA / "claude_code_cc0"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the results as JSON ('-': stdout)")
    args = parser.parse_args()
    folder = Path(args.folder)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        print(f"no sessions at {folder} (expected *.jsonl): nothing to benchmark; "
              "give a FOLDER (e.g. ../shared/data/claude_code_cc0)")
        sys.exit(0)
    from firewall.extract import Scanner

    meta = print_header("extraction speed against a one-regex floor")
    from firewall.formats import read_conversations

    conversations = [c for path in files  # a bad line of a session is skipped, as the CLI does
                     for c in read_conversations(path, on_error=lambda exc: None)]
    texts = [t for c in conversations for turn in c.turns for t in turn_texts(turn)]
    size = sum(len(t.encode("utf-8")) for t in texts)
    longest = max(conversations, key=lambda c: sum(len(t.text) for t in c.turns))
    packs, _ = load_packs_for_bench([])
    from firewall import multimatch

    print(f"engine  : prefilter {'Hyperscan + RE2' if multimatch.available() else 'RE2'}")
    print(f"data    : {folder.name}: {len(conversations)} conversations, "
          f"{size / 1e6:.2f} MB of text; longest {longest.id} ({len(longest.turns)} turns)")

    cold, floor_cold, adds_p99, floor_p99, adds_p50 = [], [], [], [], []
    for _ in range(args.repeat):
        extractor = warmed_extractor(packs)
        started = time.perf_counter()
        for conversation in conversations:
            extractor.scan(conversation)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        floor(texts)
        floor_cold.append(time.perf_counter() - started)

        extractor = warmed_extractor(packs)
        scanner = Scanner(extractor)
        adds, floors = [], []
        for turn in longest.turns:
            started = time.perf_counter()
            scanner.add(turn)
            adds.append(time.perf_counter() - started)
            turn_floor = turn_texts(turn)
            started = time.perf_counter()
            floor(turn_floor)
            floors.append(time.perf_counter() - started)
        adds_p99.append(percentile(adds, 0.99))
        adds_p50.append(percentile(adds, 0.50))
        floor_p99.append(percentile(floors, 0.99))

    med = statistics.median
    cold_ratio = med(c / f for c, f in zip(cold, floor_cold))
    add_ratio = med(a / f for a, f in zip(adds_p99, floor_p99))
    print(f"cold scan       : {med(cold):7.3f} s  ({size / 1e6 / med(cold):.2f} MB/s); floor "
          f"{med(floor_cold):.3f} s  -> {cold_ratio:5.1f}x the floor (target <= 4x)")
    print(f"incremental add : p99 {med(adds_p99) * 1e3:6.2f} ms (p50 {med(adds_p50) * 1e3:.2f}); "
          f"floor p99 {med(floor_p99) * 1e3:.3f} ms -> {add_ratio:5.1f}x the floor "
          f"(target <= 10x)")
    if args.json:
        write_json(args.json, {**meta, "folder": folder.name, "bytes": size,
                               "cold_s": cold, "floor_s": floor_cold, "cold_ratio": cold_ratio,
                               "add_p99_s": adds_p99, "floor_p99_s": floor_p99,
                               "add_ratio": add_ratio})


if __name__ == "__main__":
    main()
