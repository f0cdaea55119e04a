"""The ledger and validator steps on one huge, periodic literal (issue: quadratic steps).

A custom rule can extract a literal of any length in a few milliseconds (``(?:ab){2,}`` on a
tool output holding a long run). Each step that looks for values inside texts is timed on
such a literal of ``--sizes`` characters:

* ``carriers``  ``ledger._carriers``: which entry's value another one carries,
* ``uses``      ``ledger.uses``: where the span typed, passed or repeated each value,
* ``validate``  ``validate.validate`` of a summary holding the literal written as short words,
* ``compact``   a whole ``Firewall.compact`` of a conversation whose tool output holds it.

No dev data needed. Run it on an older tree to compare (``PYTHONPATH=<old tree>``); a step
that exceeds ``--limit`` seconds is reported as such (the run is killed, in a child process).

    python benchmarks/huge_literal.py [--sizes 8192 100000] [--limit 120] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

PACK = """name: runs
version: "1"
rules:
  - id: run
    kind: regex
    description: runs of "ab"
    pattern: '(?<![a-z])(?:ab){2,}(?![a-z])'
"""


def _step(name: str, size: int, out: multiprocessing.Queue) -> None:
    from firewall import Firewall
    from firewall.compaction.ledger import LedgerEntry, _carriers
    from firewall.compaction.span_uses import uses
    from firewall.extraction.packs import load_pack
    from firewall.turns import Turn
    from firewall.compaction.validate import validate

    value = "ab" * (size // 2)
    entries = [LedgerEntry(value=v, rule="runs/run", kind="run", role="tool", first_seen=1,
                           last_seen=1) for v in (value, "abab")]
    started = time.perf_counter()
    if name == "carriers":
        _carriers(entries)
    elif name == "uses":
        uses(entries, [Turn("user", f"see {value}"), Turn("assistant", f"ok {value}")])
    elif name == "validate":
        words = " ".join(["ab"] * (size // 3))
        validate(f"It said {words}.", [(words, "runs/run")], known=[words])
    else:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "runs.yaml"
            path.write_text(PACK, encoding="utf-8")
            messages = [{"role": "user", "content": "Check INV-2025-08-44719."},
                        {"role": "tool", "tool_call_id": "c1", "content": f"dump: {value} end"},
                        {"role": "user", "content": "ok"},
                        {"role": "assistant", "content": "Done."}]
            started = time.perf_counter()
            Firewall([load_pack(path), "billing"], audit=None, keep_last=1).compact(messages)
    out.put(time.perf_counter() - started)


def run(name: str, size: int, limit: float) -> str:
    queue: multiprocessing.Queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=_step, args=(name, size, queue))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.kill()
        child.join()
        return f"> {limit:g} s"
    if child.exitcode != 0:
        return f"crashed (exit code {child.exitcode})"
    return f"{queue.get():.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 100_000])
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--json", metavar="FILE|-")
    args = parser.parse_args(argv)
    results = {}
    for size in args.sizes:
        for name in ("carriers", "uses", "validate", "compact"):
            results[f"{name}/{size}"] = run(name, size, args.limit)
            print(f"{name:9} {size:>8,} chars  {results[f'{name}/{size}']}", flush=True)
    if args.json:
        text = json.dumps(results, indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
