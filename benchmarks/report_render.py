"""The report of a 100-conversation replay, rendered in headless Chromium. Target: under 5 s, no
console error.

A synthetic replay (seeded: the same every run) of ``--conversations`` conversations of 150-600
recorded messages, window 32,000 tokens, watermark 80 %, compacting whenever the live context
crosses it, is written as ``ReplayConversation`` lines (validated against the contract); then
``firewall report --replay`` writes the page (timed), and the system's headless Chromium opens it
``--repeat`` times, each in a fresh tab: the time to its load event (from the navigation timing:
the page alone, not the WebDriver round trip) and the console errors. ``--screenshot`` saves the
top of the page as a PNG.

    python benchmarks/report_render.py [--conversations 100] [--repeat 3] [--screenshot PNG]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import headless  # noqa: E402

from firewall.evaluation.replaylog import ReplayConversation  # noqa: E402

LITERALS = ("INV-2025-{:02d}-{:05d}", "src/billing/module_{:02d}_{:05d}.py", "#W{:02d}{:05d}",
            "ch_3Pq{:02d}x{:05d}", "ord_{:02d}_{:05d}")


def synthetic(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for c in range(n):
        window, watermark = 32_000, 0.8
        messages = rng.randint(150, 600)
        live, series, compactions = 900, [], []
        for m in range(messages):
            live += rng.choice((40, 60, 120, 250, 400, 900, 1500))
            if live > window * watermark:
                before, after = live, rng.randint(3_000, 7_000)
                span = before - after + rng.randint(2_000, 4_000)
                gold = rng.randint(4, 30)
                lost = rng.choice((0, 0, 0, 1, 2)) if gold > 5 else 0
                pinned = rng.randint(gold, gold + 25)
                losses = [{"value": LITERALS[i % 5].format(c % 100, rng.randint(0, 99_999)),
                           "rule": "billing/invoice-number", "fate": "lost",
                           "uses_after": rng.randint(1, 6)} for i in range(lost)]
                losses.sort(key=lambda g: -g["uses_after"])
                ledger = rng.randint(120, 600)
                compactions.append({
                    "compaction": len(compactions) + 1, "k": m - 8, "at_message": m,
                    "trigger": "reactive", "tokens_before": before, "tokens_after": after,
                    "span_tokens": span, "ledger_tokens": ledger, "compacted": True,
                    "attempts": 1, "reasks": 0, "pinned": pinned,
                    "in_summary": rng.randint(0, pinned), "evicted": rng.choice((0, 0, 1, 3)),
                    "gold": gold, "lost": lost, "recall_context": (gold - lost) / gold,
                    "recall_ledger": max(0.0, (gold - lost - rng.randint(0, 3)) / gold),
                    "rereads": rng.choice((0, 0, 1, 2, 4)), "losses": losses})
                live = after
            series.append(live)
        out.append(ReplayConversation.model_validate({
            "id": f"coding-{c + 1:03d}", "source": "synthetic.jsonl", "messages": messages,
            "window": window, "watermark": watermark, "live_tokens": series,
            "compactions": compactions}).model_dump(mode="json"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    if reason := headless.missing():
        sys.exit(reason)
    with tempfile.TemporaryDirectory() as tmp:
        replay, page = Path(tmp) / "replay.jsonl", Path(tmp) / "report.html"
        convs = synthetic(args.conversations)
        replay.write_text("".join(json.dumps(c) + "\n" for c in convs))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "firewall.cli", "report", "--replay", replay.name,
                        "--html", page.name], check=True, cwd=tmp)
        write = time.perf_counter() - start
        loads, errors, charts = [], [], 0
        with headless.chromium() as driver:
            for _ in range(args.repeat):
                driver.switch_to.new_window("tab")
                _, found = headless.load(driver, page)
                loads.append(driver.execute_script(
                    "const t = performance.getEntriesByType('navigation')[0];"
                    "return t.loadEventEnd / 1000;"))
                errors += found
                charts = [s for s in headless.svg_sizes(driver) if s[0] > 0 and s[1] > 0]
            if args.screenshot:
                driver.set_window_size(1280, 1500)
                driver.execute_script("window.scrollTo(0, 0)")
                driver.save_screenshot(str(args.screenshot))
        compactions = sum(len(c["compactions"]) for c in convs)
        print(f"{args.conversations} conversations, {compactions} compactions, "
              f"{sum(c['messages'] for c in convs):,} messages; page {page.stat().st_size:,} "
              f"bytes, {len(charts)} charts rendered")
        print(f"firewall report: {write:.2f} s (process, start-up included)")
        print(f"headless Chromium load: median {statistics.median(loads):.2f} s over "
              f"{len(loads)} (max {max(loads):.2f} s); console errors: {len(errors)}")
        for entry in errors:
            print(f"  {entry['message']}")
    return 1 if errors or max(loads) >= 5 else 0


if __name__ == "__main__":
    raise SystemExit(main())
