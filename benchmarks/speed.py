"""Extraction speed as ratios against the floor any Python scanner pays, in one process.

The floor: one pass of one simple regex (every token holding a digit, ``/`` or ``@``) over the
same texts (each turn's text and its tool calls' arguments as JSON). Two ratios:

* cold scan: ``Extractor.scan`` of every session of the folder, with a fresh extractor warmed
  first on other text (every rule's examples, then synthetic turns: each rule compiled, its
  locator built), against the floor over the same texts;
* incremental add: ``Scanner.add`` of each turn of the longest session, one at a time; the p99 of
  those adds against the p99 of the floor on the same turns.

Each is the median of ``--repeat`` runs (a fresh warmed extractor each run). Times are the
thread's CPU time by default (``--clock cpu``): on a shared machine, wall time mostly measures
the other processes; ``--clock wall`` for wall time. Targets (issue 30):
cold <= 4x, incremental p99 <= 10x.

    python benchmarks/speed.py [FOLDER] [--repeat 3] [--clock cpu|wall] [--json FILE|-]

FOLDER: session files or JSONL conversations (default ``../shared/data/claude_code_cc0``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incremental import TurnFactory  # noqa: E402
from throughput import DEFAULT_DATA, load_packs_for_bench, print_header, write_json  # noqa: E402

# the simplest such regex, in the engine the rules use (as issue 30 measured it)
FLOOR = regex.compile(r"\S*[\d/@]\S*")


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
    """A fresh extractor warmed on other text than the sessions: every rule's own examples
    (each rule compiled, its locator built) and 300 synthetic retail turns."""
    from firewall.extraction.examples import run_examples
    from firewall.extraction.extract import Extractor

    extractor = Extractor(packs)
    run_examples(packs, extractor)
    factory = TurnFactory(seed=7, size=4096)
    makers = [factory.tool, factory.assistant, factory.user]
    extractor.scan([makers[i % 3]() for i in range(300)])
    wait = getattr(extractor._prefilter, "wait_multimatch", None)  # None: an older engine
    if wait is not None:
        wait()  # compiled once per machine, then loaded from the cache
    return extractor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DATA / "claude_code_cc0"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--json", help="also write the results as JSON ('-': stdout)")
    args = parser.parse_args()
    folder = Path(args.folder)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        print(f"no sessions at {folder} (expected *.jsonl): nothing to benchmark; "
              "give a FOLDER (e.g. ../shared/data/claude_code_cc0)")
        sys.exit(0)
    from firewall.extraction.extract import Scanner

    meta = print_header("extraction speed against a one-regex floor")
    from firewall.formats import read_conversations

    conversations = [c for path in files  # a bad line of a session is skipped, as the CLI does
                     for c in read_conversations(path, on_error=lambda exc: None)]
    texts = [t for c in conversations for turn in c.turns for t in turn_texts(turn)]
    size = sum(len(t.encode("utf-8")) for t in texts)
    longest = max(conversations, key=lambda c: sum(len(t.text) for t in c.turns))
    packs, _ = load_packs_for_bench([])
    try:
        from firewall.extraction import multimatch
        engine = "Hyperscan + RE2" if multimatch.available() else "RE2"
    except ImportError:  # an older engine
        engine = "RE2"
    print(f"engine  : prefilter {engine}")
    print(f"data    : {folder.name}: {len(conversations)} conversations, "
          f"{size / 1e6:.2f} MB of text; longest {longest.id} ({len(longest.turns)} turns)")

    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    cold, floor_cold, adds_p99, floor_p99, adds_p50 = [], [], [], [], []
    for _ in range(args.repeat):
        extractor = warmed_extractor(packs)
        started = clock()
        for conversation in conversations:
            extractor.scan(conversation)
        cold.append(clock() - started)
        started = clock()
        floor(texts)
        floor_cold.append(clock() - started)

        extractor = warmed_extractor(packs)
        scanner = Scanner(extractor)
        adds, floors = [], []
        for turn in longest.turns:
            started = clock()
            scanner.add(turn)
            adds.append(clock() - started)
            turn_floor = turn_texts(turn)
            started = clock()
            floor(turn_floor)
            floors.append(clock() - started)
        adds_p99.append(percentile(adds, 0.99))
        adds_p50.append(percentile(adds, 0.50))
        floor_p99.append(percentile(floors, 0.99))

    med = statistics.median
    cold_ratio = med(c / f for c, f in zip(cold, floor_cold))
    add_ratio = med(a / f for a, f in zip(adds_p99, floor_p99))
    print(f"clock   : {args.clock}; median of {args.repeat}")
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
