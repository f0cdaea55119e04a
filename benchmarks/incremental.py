"""Incremental extraction latency: one new ~4 KB turn appended to a 1,000-turn conversation.

A ``Scanner`` is fed 1,000 turns taken in order from the dev conversations (system prompts
left out), then ``--turns`` new turns are appended one at a time and each ``scanner.add(turn)``
is timed. The new turns are ~4 KB each and cycle through three shapes, all with fresh IDs:

* ``tool``       a JSON tool result (nested orders, items, addresses, prose notes),
* ``assistant``  prose with an embedded JSON block and IDs, plus a tool call whose arguments
                 carry IDs,
* ``user``       prose with IDs (order, email, phone, amounts, dates).

Target: p99 < 2 ms. A full re-scan of the conversation is timed for contrast.

The process is warmed first with ``--warm`` turns of the same three shapes under another seed
(so no ID recurs), as a running agent is warm after its first turns: each rule is compiled,
its locator built (``firewall/extraction/locate.py``), and it remembers its answers for
recurring words. ``--warm 0`` times a cold process.

    python benchmarks/incremental.py [--data DIR] [--repeat 5] [--history 1000] [--turns 200]
                                     [--size 4096] [--warm 300] [--clock wall|cpu]
                                     [--pack NAME_OR_PATH ...] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import (add_common_args, bench_inputs, describe_packs,  # noqa: E402
                        load_conversations, write_json)

FIRST = ["isabella", "mei", "yusuf", "olivia", "noah", "amelia", "raj", "sofia", "lucas", "fatima"]
LAST = ["lopez", "davis", "hernandez", "kim", "patel", "silva", "nguyen", "brown", "garcia", "ito"]
PROSE = [
    "I checked the order history and the package was marked as delivered, but the customer says "
    "it never arrived at the front desk.",
    "Before we proceed, please confirm that you want to exchange the items listed below for the "
    "same product with the new options.",
    "The refund will go back to the original payment method within 5 to 7 business days once the "
    "return is processed by the warehouse.",
    "You mentioned the shipping address changed last month; I will update the pending order so it "
    "goes to the new apartment instead.",
    "If anything looks wrong in the summary, tell me now: after the modification the order cannot "
    "be changed again.",
]


class TurnFactory:
    """~``size``-byte turns of prose, JSON and fresh IDs, deterministic for a seed."""

    def __init__(self, seed: int, size: int) -> None:
        self.rng = random.Random(seed)
        self.size = size

    def order(self) -> str:
        return f"#W{self.rng.randrange(10**6, 10**7)}"

    def user_id(self) -> str:
        return f"{self.rng.choice(FIRST)}_{self.rng.choice(LAST)}_{self.rng.randrange(1000, 9999)}"

    def email(self) -> str:
        return f"{self.rng.choice(FIRST)}.{self.rng.choice(LAST)}{self.rng.randrange(100, 9999)}@example.com"

    def item(self) -> str:
        return str(self.rng.randrange(10**9, 10**10))

    def money(self) -> str:
        return f"{self.rng.randrange(5, 3000)}.{self.rng.randrange(0, 100):02d}"

    def uuid(self) -> str:
        h = "".join(self.rng.choice("0123456789abcdef") for _ in range(32))
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def phone(self) -> str:
        return f"+1 {self.rng.randrange(200, 999)}-{self.rng.randrange(200, 999)}-{self.rng.randrange(1000, 9999)}"

    def date(self) -> str:
        return f"2025-{self.rng.randrange(1, 13):02d}-{self.rng.randrange(1, 29):02d}"

    def tracking(self) -> str:
        return str(self.rng.randrange(10**11, 10**12))

    def prose(self) -> str:
        return " ".join(self.rng.sample(PROSE, 2))

    def order_json(self) -> dict[str, Any]:
        return {
            "order_id": self.order(), "user_id": self.user_id(), "status": "pending",
            "address": {"address1": f"{self.rng.randrange(10, 999)} Elm Street",
                        "city": "Austin", "state": "TX", "zip": f"{self.rng.randrange(10000, 99999)}"},
            "items": [{"name": self.rng.choice(["T-Shirt", "Water Bottle", "Desk Lamp", "Backpack"]),
                       "product_id": self.item(), "item_id": self.item(), "price": float(self.money()),
                       "options": {"color": "blue", "size": "M"}} for _ in range(2)],
            "payment_history": [{"transaction_type": "payment", "amount": float(self.money()),
                                 "payment_method_id": f"credit_card_{self.rng.randrange(10**6, 10**7)}"}],
            "fulfillments": [{"tracking_id": [self.tracking()], "item_ids": [self.item()]}],
        }

    def _fill(self, parts: list[str], more) -> str:
        text = "\n".join(parts)
        while len(text.encode()) < self.size:
            text += "\n" + more()
        return text[: self.size]

    def tool(self) -> Any:
        from firewall.turns import Turn

        doc: dict[str, Any] = {"note": self.prose(), "request_id": self.uuid(), "orders": []}
        while len(json.dumps(doc)) < self.size - 700:
            doc["orders"].append(self.order_json())
        text = json.dumps(doc)
        return Turn(role="tool", text=text, tool_name="get_order_details")

    def assistant(self) -> Any:
        from firewall.turns import ToolCall, Turn

        def more() -> str:
            return (f"{self.prose()} Order {self.order()} for {self.user_id()} ({self.email()}): "
                    f"item {self.item()} at ${self.money()}, tracking {self.tracking()}.")
        block = "```json\n" + json.dumps(self.order_json(), indent=1) + "\n```"
        text = self._fill([self.prose(), block], more)
        call = ToolCall("modify_pending_order_items",
                        {"order_id": self.order(), "item_ids": [self.item(), self.item()],
                         "new_item_ids": [self.item(), self.item()],
                         "payment_method_id": f"gift_card_{self.rng.randrange(10**6, 10**7)}"},
                        id=f"call_{''.join(self.rng.choices(string.ascii_letters, k=24))}")
        return Turn(role="assistant", text=text, tool_calls=(call,))

    def user(self) -> Any:
        from firewall.turns import Turn

        def more() -> str:
            return (f"{self.prose()} My order is {self.order()}, email {self.email()}, phone "
                    f"{self.phone()}. I paid ${self.money()} on {self.date()}; ref {self.uuid()}.")
        return Turn(role="user", text=self._fill([self.prose()], more))

    def next(self, i: int) -> Any:
        return (self.tool, self.assistant, self.user)[i % 3]()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, repeat=5)
    parser.add_argument("--history", type=int, default=1000, help="turns already in the conversation")
    parser.add_argument("--turns", type=int, default=200, help="new turns timed per repetition")
    parser.add_argument("--size", type=int, default=4096, help="bytes per new turn")
    parser.add_argument("--warm", type=int, default=300,
                        help="turns scanned before the timed repetitions (0: a cold process)")
    parser.add_argument("--target-p99-ms", type=float, default=2.0)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time each add by the wall clock (default, as the target is "
                             "stated) or by this thread's CPU time (on a shared machine, wall "
                             "time also measures the other processes)")
    parser.add_argument("--gc", choices=("on", "freeze", "off"), default="on",
                        help="garbage collector during the timed adds: on (default, as an "
                             "application runs), freeze (gc.freeze() after the history is "
                             "loaded), off")
    args = parser.parse_args(argv)

    header, files, packs, mode = bench_inputs(
        args, "incremental: latency of Scanner.add for one new turn")
    from firewall.extraction.extract import Extractor, Scanner

    extractor = Extractor(packs, cache_size=0)  # each new turn is new: no memo
    pool = [t for c in load_conversations(files) for t in c.turns if t.role != "system"]
    history = [pool[i % len(pool)] for i in range(args.history)]
    del pool  # keep only the conversation itself alive, as an agent process would
    gc.collect()
    gc_events: list[tuple[int, float]] = []
    gc_start: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_start.append(time.perf_counter())
        elif gc_start:
            gc_events.append((info["generation"], (time.perf_counter() - gc_start.pop()) * 1e3))
    hbytes = sum(len(t.text.encode()) for t in history)
    clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    print(f"clock   : {args.clock} (each add)")
    print(f"gc      : {args.gc}")
    print(f"history : {len(history)} dev turns ({hbytes:,} bytes of text); new turns: "
          f"{args.turns} per repetition, {args.size} bytes each, cycling tool / assistant / user")

    warm = TurnFactory(seed=10_000, size=args.size)
    warm_scanner = Scanner(extractor)
    for i in range(args.warm):
        warm_scanner.add(warm.next(i))
    del warm_scanner
    print(f"warm-up : {args.warm} turns of the same shapes, another seed"
          + (" (none: a cold process)" if not args.warm else ""))

    samples: dict[str, list[float]] = {"tool": [], "assistant": [], "user": []}
    per_rep, rescans, new_literals = [], [], []
    for rep in range(args.repeat):
        factory = TurnFactory(seed=rep, size=args.size)
        new_turns = [factory.next(i) for i in range(args.turns)]
        scanner = Scanner(extractor)
        for turn in history:
            scanner.add(turn)
        for turn in new_turns[:3]:  # warm-up of this scanner's code paths (not timed)
            extractor.scan_turn(turn, 0)
        rep_ms = []
        if args.gc == "freeze":
            gc.freeze()
        elif args.gc == "off":
            gc.disable()
        gc_events.clear()
        gc.callbacks.append(on_gc)
        for turn in new_turns:
            t0 = clock()
            fresh = scanner.add(turn)
            elapsed = (clock() - t0) / 1e6
            rep_ms.append(elapsed)
            samples[turn.role].append(elapsed)
            new_literals.append(len(fresh))
        gc.callbacks.remove(on_gc)
        gc.enable()
        gc.unfreeze()
        collections_by_gen = [sum(1 for g, _ in gc_events if g == n) for n in range(3)]
        gc_ms = [ms for _, ms in gc_events]
        t0 = time.perf_counter()
        extractor.scan(history + new_turns[:1])
        rescans.append((time.perf_counter() - t0) * 1e3)
        per_rep.append({"p50_ms": percentile(rep_ms, 50), "p99_ms": percentile(rep_ms, 99),
                        "max_ms": max(rep_ms), "gc_collections_by_generation": collections_by_gen,
                        "gc_ms_total": sum(gc_ms), "gc_ms_max": max(gc_ms, default=0.0)})
        print(f"  rep {rep + 1}: p50 {per_rep[-1]['p50_ms']:.3f} ms  p99 {per_rep[-1]['p99_ms']:.3f} ms"
              f"  max {per_rep[-1]['max_ms']:.3f} ms  (conversation now {scanner.turns} turns; full "
              f"re-scan of {len(history) + 1} turns {rescans[-1]:.0f} ms)\n"
              f"         gc during the timed adds: collections gen0/1/2 = "
              f"{'/'.join(map(str, collections_by_gen))}, {sum(gc_ms):.1f} ms in total, longest "
              f"{max(gc_ms, default=0.0):.2f} ms")

    everything = [x for values in samples.values() for x in values]
    p50, p99 = percentile(everything, 50), percentile(everything, 99)
    print(f"\nall {len(everything)} samples: p50 {p50:.3f} ms  p99 {p99:.3f} ms  max "
          f"{max(everything):.3f} ms  mean {statistics.fmean(everything):.3f} ms; "
          f"median new literals per turn {statistics.median(new_literals):g}")
    for role, values in samples.items():
        print(f"  {role:<10} n={len(values):<5} p50 {percentile(values, 50):.3f} ms  "
              f"p99 {percentile(values, 99):.3f} ms")
    print(f"median of per-repetition p99: {statistics.median(r['p99_ms'] for r in per_rep):.3f} ms; "
          f"full re-scan (median) {statistics.median(rescans):.0f} ms = "
          f"{statistics.median(rescans) / p50:.0f}x one incremental add")
    met = p99 < args.target_p99_ms
    print(f"target p99 < {args.target_p99_ms:g} ms: {'MET' if met else 'NOT MET'}")
    write_json(args.json, {
        **header, "benchmark": "incremental", "packs": describe_packs(packs), "pack_load": mode,
        "history_turns": len(history), "turn_bytes": args.size, "turns_per_rep": args.turns,
        "repeat": args.repeat, "gc": args.gc, "clock": args.clock, "warm_turns": args.warm, "p50_ms": p50, "p99_ms": p99, "max_ms": max(everything),
        "by_role": {r: {"p50_ms": percentile(v, 50), "p99_ms": percentile(v, 99)}
                    for r, v in samples.items()},
        "per_repetition": per_rep, "full_rescan_ms": rescans, "target_met": met,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
