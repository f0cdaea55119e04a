"""Peak memory while streaming a large JSONL log through the extractor.

A ~``--size-mb`` (default 1024) JSONL log is generated into a temporary file by replicating the
dev conversations with varied ids, then scanned in a child process, streaming:
``read_conversations(path)`` → one ``Scanner`` per conversation → only counts are kept. The
child reports its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), its RSS before the
first conversation (imports and compiled packs) and the scan throughput. Target: peak < 300 MB.
The temporary file is removed afterwards, also on error or Ctrl-C.

    python benchmarks/memory.py [--data DIR] [--size-mb 1024] [--repeat 1] [--tmpdir DIR]
                                [--pack NAME_OR_PATH ...] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import (add_common_args, bench_inputs, describe_packs,  # noqa: E402
                        load_packs_for_bench, write_json)


def maxrss_mb() -> float:
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@contextlib.contextmanager
def generated_log(files: list[Path], size_mb: float, tmpdir: str | None, prefix: str):
    """A temporary JSONL log of about ``size_mb`` MiB of dev replicas, outside the repository,
    removed afterwards (also on error); yields (path, lines, bytes)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".jsonl", dir=tmpdir)
    os.close(fd)
    log = Path(name)
    try:
        lines, nbytes = generate(files, log, int(size_mb * 2**20))
        print(f"log     : {lines:,} conversations, {nbytes / 2**20:,.0f} MiB")
        yield log, lines, nbytes
    finally:
        log.unlink(missing_ok=True)
        print("removed the temporary log")


def generate(files: list[Path], target: Path, size_bytes: int) -> tuple[int, int]:
    """Write replicas of the dev conversations (ids varied) until ``size_bytes``; (lines, bytes)."""
    templates = []
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                doc = json.loads(line)
                if "messages" not in doc:
                    continue
                base = str(doc.pop("id", "conversation"))
                templates.append((base, json.dumps(doc, ensure_ascii=False)[1:]))
    if not templates:
        return 0, 0
    written = lines = 0
    replica = 0
    with target.open("w", encoding="utf-8") as out:
        while written < size_bytes:
            for base, rest in templates:
                line = '{"id": ' + json.dumps(f"{base}/replica{replica}") + ", " + rest + "\n"
                out.write(line)
                written += len(line.encode("utf-8"))
                lines += 1
                if written >= size_bytes:
                    break
            replica += 1
    return lines, written


def child(path: str, packs_arg: list[str]) -> None:
    """Scan ``path`` streaming; print one JSON line of counts and memory figures."""
    from firewall.extraction.extract import Extractor, Scanner
    from firewall.formats import read_conversations

    packs, mode = load_packs_for_bench(packs_arg)
    extractor = Extractor(packs, cache_size=0)
    baseline = current_rss_mb()
    conversations = turns = hits = distinct = timeouts = 0
    t0 = time.perf_counter()
    for conversation in read_conversations(path):
        scanner = Scanner(extractor)
        for turn in conversation.turns:
            hits += len(scanner.add(turn))
        result = scanner.result()
        conversations += 1
        turns += scanner.turns
        distinct += len(result.literals)
        timeouts += len(result.timeouts)
    elapsed = time.perf_counter() - t0
    print(json.dumps({"conversations": conversations, "turns": turns, "new_literals": hits,
                      "distinct_literals_per_conversation_sum": distinct, "timeouts": timeouts,
                      "seconds": elapsed, "rss_after_setup_mb": baseline,
                      "rss_end_mb": current_rss_mb(), "peak_rss_mb": maxrss_mb(),
                      "pack_load": mode}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, repeat=1)
    parser.add_argument("--size-mb", type=float, default=1024.0,
                        help="size of the generated log in MB (2**20 bytes; default 1024)")
    parser.add_argument("--tmpdir", default=None, help="where to write the temporary log")
    parser.add_argument("--target-mb", type=float, default=300.0)
    parser.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.pack)
        return 0

    header, files, packs, mode = bench_inputs(
        args, "memory: peak RSS while streaming a large JSONL log")

    fd, name = tempfile.mkstemp(prefix="firewall-memory-", suffix=".jsonl", dir=args.tmpdir)
    os.close(fd)
    target = Path(name)
    runs: list[dict[str, Any]] = []
    try:
        t0 = time.perf_counter()
        lines, nbytes = generate(files, target, int(args.size_mb * 2**20))
        print(f"log     : {target} — {lines:,} conversations, {nbytes / 2**20:,.0f} MiB, "
              f"generated in {time.perf_counter() - t0:.1f} s (generator peak RSS "
              f"{maxrss_mb():.0f} MiB)")
        if not lines:
            print("the data directory holds no conversations: nothing to benchmark")
            return 0
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(target)]
        for pack in args.pack:
            command += ["--pack", pack]
        for rep in range(args.repeat):
            proc = subprocess.run(command, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stdout + proc.stderr)
                print(f"child failed with exit code {proc.returncode}")
                return 1
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run["mb_per_s"] = nbytes / 2**20 / run["seconds"]
            runs.append(run)
            print(f"  rep {rep + 1}: peak RSS {run['peak_rss_mb']:.1f} MiB (after imports and "
                  f"packs {run['rss_after_setup_mb']:.1f} MiB, at the end {run['rss_end_mb']:.1f} "
                  f"MiB); {run['conversations']:,} conversations, {run['turns']:,} turns, "
                  f"{run['new_literals']:,} literals, {run['timeouts']} timeouts; "
                  f"{run['seconds']:.1f} s = {run['mb_per_s']:.2f} MiB/s of log")
    finally:
        target.unlink(missing_ok=True)
        print(f"removed {target}")

    peak = statistics.median(r["peak_rss_mb"] for r in runs)
    met = peak < args.target_mb
    print(f"\npeak RSS (median of {len(runs)}): {peak:.1f} MiB; target < {args.target_mb:g} MB: "
          f"{'MET' if met else 'NOT MET'}")
    write_json(args.json, {**header, "benchmark": "memory", "packs": describe_packs(packs),
                           "pack_load": mode, "log_conversations": lines, "log_bytes": nbytes,
                           "runs": runs, "peak_rss_mb_median": peak, "target_met": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
