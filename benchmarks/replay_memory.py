"""Peak memory of ``firewall replay`` on a generated large log, and its progress bar.

A ~``--size-mb`` (default 1024) JSONL log is generated into a temporary file from replicas of
the dev conversations matching ``--glob`` (default: the coding set, whose sessions cross a
32k window's watermark; ids varied, as ``memory.py`` does). ``firewall replay LOG --window 32000
--watermark 0.8`` then runs in a child process whose stderr is a pseudo-terminal, so that it
draws its progress bar as on a user's terminal; the bar's updates are counted and the last one
shown. The child's peak RSS is the kernel's accounting of that process (``wait4``). Target:
peak < 300 MB, and progress shown. The log is removed afterwards, also on error.

    python benchmarks/replay_memory.py [--data DIR] [--size-mb 1024] [--glob 'coding_*.jsonl']
                                       [--tmpdir DIR] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_memory import firewall_command  # noqa: E402
from memory import generated_log  # noqa: E402
from throughput import add_common_args, bench_inputs, write_json  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_replay(log: Path, window: int, watermark: float) -> dict[str, object]:
    argv = firewall_command() + ["replay", str(log), "--window", str(window),
                                 "--watermark", str(watermark)]
    master, slave = os.openpty()
    # a terminal of 24 x 120: a pty starts at 0 x 0, where a bar sized to the terminal is empty
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    updates: list[str] = []

    def read_bar() -> None:  # what a user would see on the terminal, one redraw at a time
        pending = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            pending += chunk
            *done, pending = re.split(rb"[\r\n]", pending)
            updates.extend(_ANSI.sub("", d.decode("utf-8", "replace")).strip()
                           for d in done if d.strip())

    reader = threading.Thread(target=read_bar, daemon=True)
    reader.start()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    reader.join(timeout=5)
    os.close(master)
    bar = [u for u in updates if "replay" in u]
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return {"exit": os.waitstatus_to_exitcode(status), "seconds": seconds,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss * scale / 2**20, "progress_updates": len(bar),
            "last_progress": bar[-1] if bar else None,
            "stderr_tail": [u for u in updates if "replay" not in u][-5:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, repeat=1)
    parser.add_argument("--size-mb", type=float, default=1024.0,
                        help="size of the generated log in MiB (default 1024)")
    parser.add_argument("--glob", default="coding_*.jsonl",
                        help="dev files replicated into the log (default coding_*.jsonl)")
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--watermark", type=float, default=0.8)
    parser.add_argument("--tmpdir", default=None, help="where to write the temporary log")
    parser.add_argument("--target-mb", type=float, default=300.0)
    args = parser.parse_args(argv)
    header, files, _, _ = bench_inputs(args, "replay_memory: peak RSS and progress of "
                                             "firewall replay on a large JSONL log")
    files = [f for f in files if f.match(args.glob)] or files
    print(f"sources : {', '.join(f.name for f in files)}")
    with generated_log(files, args.size_mb, args.tmpdir, "firewall-replay-memory-") as (
            log, lines, nbytes):
        run = run_replay(log, args.window, args.watermark)
    print(f"  firewall replay LOG --window {args.window} --watermark {args.watermark:g}: "
          f"exit {run['exit']}, peak RSS {run['peak_rss_mb']:.1f} MiB, {run['seconds']:.0f} s "
          f"({run['cpu_seconds']:.0f} s CPU, {nbytes / 2**20 / run['seconds']:.2f} MiB/s)")
    print(f"  progress bar: {run['progress_updates']} update(s); last: {run['last_progress']}")
    if run["exit"] != 0:
        print("\n".join(run["stderr_tail"]))
    met = run["peak_rss_mb"] < args.target_mb and run["exit"] == 0 and \
        run["progress_updates"] > 0
    print(f"\ntarget: peak < {args.target_mb:g} MB with progress shown: "
          f"{'MET' if met else 'NOT MET'}")
    write_json(args.json, {**header, "benchmark": "replay_memory", "log_conversations": lines,
                           "log_bytes": nbytes, "run": run, "target_met": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
