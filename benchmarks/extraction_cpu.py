"""CPU seconds of extraction (every built-in pack) over every dev conversation: a quick A/B of
two trees when the machine is too loaded for ``throughput.py``'s wall-clock ratios.

CPU time (user + system of this process) is far less sensitive to other jobs than wall time.
The first pass warms the lazily built patterns and is not counted; the best of ``--repeat``
passes is reported. To compare with another commit, run the same script against a checkout of
it, alternating the two a few times:

    python benchmarks/extraction_cpu.py --repeat 3
    PYTHONPATH=OTHER_CHECKOUT python benchmarks/extraction_cpu.py --repeat 3
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import add_common_args, bench_inputs, load_conversations  # noqa: E402


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, repeat=3)
    args = parser.parse_args(argv)
    _, files, packs, _ = bench_inputs(args, "extraction_cpu: CPU seconds of extraction")
    from firewall.extraction.extract import Extractor

    conversations = load_conversations(files)
    extractor = Extractor(packs)
    for conversation in conversations:  # warm: patterns and locators are built on first use
        extractor.scan(conversation)
    passes, literals = [], 0
    for _ in range(args.repeat):
        started, literals = cpu_seconds(), 0
        for conversation in conversations:
            literals += len(extractor.scan(conversation).literals)
        passes.append(cpu_seconds() - started)
    print(f"{len(conversations)} conversations, {literals} literals; CPU seconds per pass: "
          f"best {min(passes):.2f} ({', '.join(f'{p:.2f}' for p in passes)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
