"""Soak: many concurrent conversations, each compacted again and again through ``Firewall.acompact``.

Every conversation carries its own identifiers (``C0042-ORD-00007``...), its own persisted
ledger and its own scripted summarizer (seeded, with small random ``asyncio.sleep`` delays, and
now and then dropping a required literal so the re-ask and re-inject paths run too). One
``Firewall`` serves them all, as in a server. After every compaction the soak checks that

* the ledger holds only this conversation's identifiers (nothing crosses conversations), and
  every identifier of the earlier rounds (the budget is set so none is evicted);
* every pinned literal, and every identifier mentioned so far, is in the composed context,
  byte for byte (the newest round's may still be in the verbatim tail);
* the audit record is filed under this conversation.

Memory is sampled every ``--sample-every`` compactions (RSS, the number of live pinned entries
across all ledgers, and the traced Python heap with ``--tracemalloc``, which makes the run ~2x
slower). Ledgers are cumulative, so memory grows with ``pinned``; flat means a constant (or
falling) cost per pinned entry, not a constant total. At the end all state is dropped and the heap
is measured again: what remains is what the firewall keeps between conversations (bounded
caches), which must not grow with the number of compactions.

    python benchmarks/soak.py                                  # 10,000 compactions, 1,000 conv.
    python benchmarks/soak.py --conversations 50 --rounds 4    # a quick one
    python benchmarks/soak.py --tracemalloc --json -
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firewall.compaction.guard import Firewall
from firewall.compaction.ledger import Ledger
from firewall.extraction.packs import load_packs
from firewall.summarizers.base import Summary

PACK = """name: soak
version: "1"
description: per-conversation identifiers
rules:
  - id: order
    kind: regex
    pattern: '\\bC\\d{4}-ORD-\\d{5}\\b'
    examples:
      match:
        - text: 'order C0001-ORD-00001.'
          literals: ['C0001-ORD-00001']
  - id: invoice
    kind: regex
    pattern: '\\bC\\d{4}-INV-\\d{4}-\\d{2}\\b'
    severity: required
  - id: ref
    kind: json_key
    keys: ['ref']
"""


@dataclass
class SoakResult:
    conversations: int
    rounds: int
    compactions: int = 0
    reasks: int = 0
    seconds: float = 0.0
    throughput: float = 0.0  # compactions per second
    peak_rss_mb: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)
    heap_baseline_mb: float | None = None
    heap_after_mb: float | None = None  # all state dropped: what the firewall keeps
    failures: list[str] = field(default_factory=list)
    machine: str = field(default_factory=lambda: f"{platform.python_implementation()} "
                         f"{platform.python_version()}, {platform.machine()}, "
                         f"{os.cpu_count()} CPU")


class SoakSummarizer:
    """Scripted and seeded: waits a little, then names the required literals (usually all)."""

    vendor_path = "scripted-soak"

    def __init__(self, seed: int, max_delay: float, drop_rate: float = 0.1) -> None:
        self.rng, self.max_delay, self.drop_rate = random.Random(seed), max_delay, drop_rate

    async def asummarize(self, request) -> Summary:
        await asyncio.sleep(self.rng.uniform(0, self.max_delay))
        values = [r.value for r in request.required]
        if values and request.attempt == 1 and self.rng.random() < self.drop_rate:
            values = values[1:]  # a lossy first answer: the re-ask has to fix it
        return Summary(text="The user is working through orders and invoices: "
                       + " ".join(values) + ".", model="soak")

    def summarize(self, request):  # pragma: no cover - the async driver uses asummarize
        raise NotImplementedError


class CheckingSink:
    """An audit sink that keeps nothing: it checks each record belongs where it claims."""

    def __init__(self) -> None:
        self.records = 0
        self.expected: dict[str, str] = {}  # record conversation_id -> prefix of its values
        self.failures: list[str] = []

    def next_compaction_number(self, conversation_id: str) -> int:
        return 1  # numbers come from the driver (compaction=...)

    def write(self, record) -> None:
        self.records += 1
        prefix = self.expected[record.conversation_id]
        stray = [lit.value for lit in record.literals if not lit.value.startswith(prefix)]
        if stray:
            self.failures.append(f"audit record of {record.conversation_id}: foreign literals "
                                 f"{stray[:3]}")


def _turns(c: int, k: int) -> tuple[list[dict[str, Any]], list[str]]:
    order, invoice = f"C{c:04d}-ORD-{k:05d}", f"C{c:04d}-INV-{2025 + k % 3}-{k % 100:02d}"
    ref = f"C{c:04d}-REF-{k}"
    call = f"call-{c}-{k}"
    messages = [
        {"role": "user", "content": f"Round {k}: check order {order} and invoice {invoice}."},
        {"role": "assistant", "content": "Looking it up.", "tool_calls": [
            {"id": call, "type": "function",
             "function": {"name": "lookup", "arguments": json.dumps({"order": order})}}]},
        {"role": "tool", "tool_call_id": call,
         "content": json.dumps({"ref": ref, "status": "shipped", "padding": "x" * 200})},
        {"role": "assistant", "content": f"Order {order} has shipped."},
    ]
    return messages, [order, invoice, ref]


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: fall back to the peak
        return _peak_rss_mb()


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


async def soak(conversations: int = 1000, rounds: int = 10, *, seed: int = 7,
               max_delay: float = 0.002, sample_every: int = 1000,
               trace: bool = False, packs: Any = None) -> SoakResult:
    """Run the soak; returns figures and any failed check (an empty ``failures`` is a pass)."""
    if packs is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "soak.yaml"
            path.write_text(PACK)
            packs = load_packs(str(path))
    result = SoakResult(conversations, rounds)
    if trace:
        gc.collect()
        if not tracemalloc.is_tracing():
            tracemalloc.start()
        result.heap_baseline_mb = tracemalloc.get_traced_memory()[0] / 2**20
    sink = CheckingSink()
    live: dict[int, int] = {}  # live ledger sizes: the state memory is expected to grow with
    fw = Firewall(packs, budget_tokens=100_000, keep_last=2, audit=sink)
    started = time.perf_counter()

    def sample() -> None:
        point = {"compactions": result.compactions,
                 "seconds": round(time.perf_counter() - started, 3), "rss_mb": round(_rss_mb(), 1),
                 "pinned": sum(live.values())}
        if trace:
            point["heap_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 2)
        result.samples.append(point)

    async def one(c: int) -> None:
        summarizer = SoakSummarizer(seed * 100_003 + c, max_delay)
        ledger = Ledger.new(f"conv-{c:04d}")
        prefix = f"C{c:04d}-"
        sink.expected[ledger.conversation_id] = prefix
        messages: list[Any] = [{"role": "system", "content": f"Agent for customer {c}."}]
        seen: list[str] = []
        for k in range(1, rounds + 1):
            new, values = _turns(c, k)
            messages = messages + new
            earlier = list(seen)  # every turn of earlier rounds is in this compaction's span
            seen += values
            out = await fw.acompact(messages, summarizer=summarizer, ledger=ledger,
                                    compaction=k)
            result.reasks += max(0, len(out.attempts) - 1)
            ledger, messages = out.ledger, out.messages
            live[c] = len(ledger)
            text = json.dumps(messages, ensure_ascii=False)
            pinned = ledger.values()
            problems = []
            if not out.compacted:
                problems.append(f"not compacted: {out.record.error}")
            if out.audit_error:
                problems.append(f"audit: {out.audit_error}")
            if foreign := [v for v in pinned if not v.startswith(prefix)]:
                problems.append(f"foreign ledger entries {foreign[:3]}")
            if lost := [v for v in earlier if v not in pinned]:
                problems.append(f"unpinned {lost[:3]}")
            if absent := [v for v in pinned if v not in text]:
                problems.append(f"pinned but not in the context {absent[:3]}")
            if gone := [v for v in seen if v not in text]:
                problems.append(f"in neither the ledger nor the tail {gone[:3]}")
            if problems:
                result.failures.append(f"conv {c} round {k}: " + "; ".join(problems))
            result.compactions += 1
            if result.compactions % sample_every == 0:
                sample()

    sample()
    await asyncio.gather(*(one(c) for c in range(conversations)))
    result.seconds = time.perf_counter() - started
    result.throughput = result.compactions / result.seconds
    result.peak_rss_mb = _peak_rss_mb()
    result.failures += sink.failures
    if sink.records != result.compactions:
        result.failures.append(f"{sink.records} audit records for {result.compactions} "
                               "compactions")
    del fw, sink
    if trace:
        gc.collect()
        result.heap_after_mb = tracemalloc.get_traced_memory()[0] / 2**20
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10, help="compactions per conversation")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-delay", type=float, default=0.002,
                        help="summarizer delay, uniform in [0, this] seconds")
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace the Python heap")
    parser.add_argument("--json", metavar="FILE|-", help="write the figures as JSON")
    args = parser.parse_args(argv)
    result = asyncio.run(soak(args.conversations, args.rounds, seed=args.seed,
                              max_delay=args.max_delay, sample_every=args.sample_every,
                              trace=args.tracemalloc))
    print(f"{result.compactions} compactions across {result.conversations} concurrent "
          f"conversations in {result.seconds:.1f} s: {result.throughput:.0f} compactions/s "
          f"({result.reasks} re-asks); peak RSS {result.peak_rss_mb:.1f} MB; {result.machine}")
    for point in result.samples:
        print("  " + "  ".join(f"{k}={v}" for k, v in point.items()))
    if result.heap_after_mb is not None:
        print(f"  heap: baseline {result.heap_baseline_mb:.2f} MB, after dropping all state "
              f"{result.heap_after_mb:.2f} MB")
    for failure in result.failures[:20]:
        print("FAIL", failure)
    if args.json:
        data = json.dumps(asdict(result), indent=2)
        if args.json == "-":
            print(data)
        else:
            Path(args.json).write_text(data + "\n")
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
