"""What the Claude Code hooks re-inject after a compaction: the block's size in tokens and as a
share of the compacted context, on real session files.

    python benchmarks/hooks_block.py ../shared/data/claude_code_cc0/*.jsonl

For each session file, the three handlers run as Claude Code fires them (in a temporary state
directory): at every compaction the agent made (its ``compact_boundary``), with its own summary;
in a file without one, at its end, as if the agent compacted there with a summary that holds
none of the pinned values (the largest block the budget lets through). Printed per file and
compaction: the span (the transcript's turns before the compaction, in tokens, the offline
estimate), the block's tokens, their share of the span and, at a real compaction, of the
context Claude Code itself counted before compacting (``compactMetadata.preTokens``: system
prompt, tools and lines the reader cannot parse included), the ledger entries, and the seconds
``post-compact`` took (it re-reads and re-pins the whole transcript).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from firewall.audit import MemoryAuditLog
from firewall.tokens import turn_tokens
from firewall.formats import read_conversations
from firewall.compaction.guard import Firewall
from firewall.evaluation.hook_eval import through_hooks
from firewall.integrations.hooks import (compaction_span, load_state, post_compact, pre_compact,
                            session_start, state_in)
from firewall.formats.transcripts import read_transcript
from firewall.tokens import count_tokens


def at_end(path: Path, fw: Firewall) -> tuple[int, int, int, float]:
    """(span tokens, block tokens, entries written, post-compact seconds) of a compaction at
    the end of the file whose summary holds nothing."""
    with tempfile.TemporaryDirectory() as tmp, state_in(tmp):
        event = {"session_id": "bench", "transcript_path": str(path)}
        pre_compact(event, fw)
        started = time.perf_counter()
        post_compact(dict(event, compact_summary=""), fw, audit=MemoryAuditLog())
        seconds = time.perf_counter() - started
        answer = session_start(dict(event, source="compact"), None) or {}
        block = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
        entries = len(load_state("bench").ledger)
    chunk = read_transcript(path)
    start, end = compaction_span(chunk)
    span = sum(turn_tokens(t) for t in chunk.turns[start:end])
    return span, count_tokens(block), entries, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    fw = Firewall()
    print("| session | compaction | span tokens | block tokens | block / span | "
          "block / Claude Code's preTokens | entries | post-compact s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    shares = []
    for name in args.files:
        path = Path(name)
        (conversation,) = read_conversations(path, on_error=lambda error: None)
        data = path.read_bytes()
        with contextlib.redirect_stderr(io.StringIO()):  # bad lines: eval reports them
            real = through_hooks(conversation, fw)
            end = None if real else at_end(path, fw)
        for (boundary, (_, _, block)), (cut, _) in zip(real.items(), conversation.meta["cuts"]):
            turns = conversation.turns
            start = next(i for i, t in enumerate(turns) if t.role != "system")
            span = sum(turn_tokens(t) for t in turns[start:boundary])
            size = count_tokens(block)
            line = json.loads(data[cut:data.index(b"\n", cut)])
            before = (line.get("compactMetadata") or {}).get("preTokens")
            shares.append(size / span)
            print(f"| {path.stem[:8]} | real, turn {boundary} | {span:,} | {size:,} | "
                  f"{size / span:.1%} | {f'{size / before:.1%} of {before:,}' if before else '-'}"
                  f" | - | - |")
        if end is not None:
            span, size, entries, seconds = end
            shares.append(size / span)
            print(f"| {path.stem[:8]} | at the end, empty summary | {span:,} | {size:,} | "
                  f"{size / span:.1%} | - | {entries} | {seconds:.2f} |")
    shares.sort()
    print(f"\nblock / span over {len(shares)} compactions: median {shares[len(shares) // 2]:.1%}, "
          f"max {shares[-1]:.1%}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
