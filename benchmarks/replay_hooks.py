"""``firewall replay`` through the Claude Code hooks on real session files: per session, the
compactions replay makes, the gold held by summary + ledger and by summary + the hooks' block
(both with the kept messages), the ledger's and the block's tokens and their share of the live
context before those compactions, and what driving the hooks costs in time (the same replay
without them, in the same run, each with a new ``Firewall``: no memo shared).

    python benchmarks/replay_hooks.py [--window 20000] [--budget auto|TOKENS|P%]
                                      [FILE ...]   # default: ../shared/data/claude_code_cc0/*.jsonl

Defaults as ``firewall replay``: watermark 0.8, reactive, the extractive summarizer, the last 8
messages kept verbatim.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from firewall.compaction.budget import Budget, parse_budget
from firewall.formats import read_conversations
from firewall.compaction.guard import Firewall
from firewall.evaluation.replay import replay_conversation
from firewall.summarizers.extractive import ExtractiveSummarizer
from firewall.compaction.trigger import Trigger

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "claude_code_cc0"


def kept(recall: float | None, n: int | None) -> int:
    return round((recall or 0) * (n or 0))


def pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f}" if whole else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--budget", type=parse_budget, default=Budget())
    args = parser.parse_args()
    files = args.files or sorted(str(p) for p in DATA.glob("*.jsonl"))
    if not files:
        print(f"no session files: {DATA} is absent (pass FILE ...)", file=sys.stderr)
        return 1
    trigger = Trigger(window=args.window)
    print(f"window {args.window:,}, watermark {trigger.watermark:g}, budget {args.budget}")
    print("| session | comp | summary + ledger ID / strict | summary + hooks' block ID / strict"
          " | ledger tokens (share) | block tokens (share) | hooks short at |")
    print("|---|---:|---:|---:|---:|---:|---|")
    sums, total_before = [0] * 9, 0
    seconds = {True: 0.0, False: 0.0}
    for name in files:
        (conversation,) = read_conversations(name, on_error=lambda error: None)
        for hooks in (False, True):  # the same replay without the hooks: their cost
            # a firewall each: no scan or turn memo carried from one run to the other
            fw = Firewall(None, budget_tokens=args.budget, keep_last=8)
            started = time.perf_counter()
            replay = replay_conversation(conversation, firewall=fw, trigger=trigger,
                                         summarizer=ExtractiveSummarizer(), keep_last=8,
                                         hooks=hooks)
            seconds[hooks] += time.perf_counter() - started
        cs = [c for c in replay.compactions if c.hooks_tokens is not None]
        row = [len(cs), sum(c.gold_id_like or 0 for c in cs), sum(c.gold for c in cs),
               sum(kept(c.recall_context_id_like, c.gold_id_like) for c in cs),
               sum(c.gold - c.lost for c in cs),
               sum(kept(c.recall_hooks_id_like, c.gold_id_like) for c in cs),
               sum(kept(c.recall_hooks, c.gold) for c in cs),
               sum(c.ledger_tokens for c in cs), sum(c.hooks_tokens for c in cs)]
        before = sum(c.tokens_before for c in cs)
        short = [c.compaction for c in cs
                 if kept(c.recall_hooks_id_like, c.gold_id_like)
                 < kept(c.recall_context_id_like, c.gold_id_like)
                 or kept(c.recall_hooks, c.gold) < c.gold - c.lost]
        sums, total_before = [a + b for a, b in zip(sums, row)], total_before + before
        print(f"| {Path(name).stem[:8]} | {row[0]} | {pct(row[3], row[1])} / "
              f"{pct(row[4], row[2])} | {pct(row[5], row[1])} / {pct(row[6], row[2])} | "
              f"{row[7]:,} ({pct(row[7], before)} %) | {row[8]:,} ({pct(row[8], before)} %) | "
              f"{', '.join(map(str, short)) or '-'} |")
    n, n_id, n_str, l_id, l_str, h_id, h_str, ledger, block = sums
    before = total_before
    print(f"| all ({n_id:,} ID-like, {n_str:,} strict) | {n} | {pct(l_id, n_id)} / "
          f"{pct(l_str, n_str)} | {pct(h_id, n_id)} / {pct(h_str, n_str)} | {ledger:,} "
          f"({pct(ledger, before)} %) | {block:,} ({pct(block, before)} %) | |")
    print(f"\nreplay without the hooks {seconds[False]:.1f} s, with them {seconds[True]:.1f} s "
          f"(x{seconds[True] / max(seconds[False], 1e-9):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
