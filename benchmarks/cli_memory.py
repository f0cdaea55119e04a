"""Peak memory of the command line itself on a generated large JSONL log.

``memory.py`` measures the library's streaming path; this measures what a user runs. A
~``--size-mb`` (default 1024) JSONL log is generated into a temporary file (replicas of the dev
conversations with varied ids, as ``memory.py`` does), then each ``--mode`` runs in a child
process, its output thrown away: ``json`` is ``firewall scan LOG --json``, ``table`` is
``firewall scan LOG``, ``compact`` is ``firewall compact LOG --no-audit --out TMP`` and ``eval``
is ``firewall eval LOG``. The child's peak RSS is the kernel's own accounting of that process
(``wait4``), so nothing runs inside the measured process but the command. Target: peak < 300 MB. The log is removed afterwards, also on error.

    python benchmarks/cli_memory.py [--data DIR] [--size-mb 1024] [--tmpdir DIR]
                                    [--mode json|table|compact|eval ...] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory import generated_log  # noqa: E402
from throughput import add_common_args, bench_inputs, write_json  # noqa: E402


def firewall_command() -> list[str]:
    """The installed entry point next to this interpreter, else ``python -m firewall.cli``."""
    script = Path(sys.executable).with_name("firewall")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "firewall.cli"]


MODES = {"json": ["scan", "{log}", "--json"], "table": ["scan", "{log}"],
         "compact": ["compact", "{log}", "--no-audit", "--out", "{out}"],
         "eval": ["eval", "{log}"]}


def run_mode(log: Path, mode: str) -> dict[str, float | int | str]:
    out = log.with_suffix(".out.jsonl")
    argv = firewall_command() + [a.format(log=log, out=out) for a in MODES[mode]]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        errors.seek(0)
        stderr = errors.read()[-2000:]
    out.unlink(missing_ok=True)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return {"mode": mode, "exit": proc.returncode, "stderr": stderr, "seconds": seconds,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss * scale / 2**20}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, repeat=1)
    parser.add_argument("--size-mb", type=float, default=1024.0,
                        help="size of the generated log in MiB (default 1024)")
    parser.add_argument("--mode", action="append", choices=tuple(MODES),
                        help="what runs on the log (repeatable; default: json)")
    parser.add_argument("--tmpdir", default=None, help="where to write the temporary log")
    parser.add_argument("--target-mb", type=float, default=300.0)
    args = parser.parse_args(argv)
    header, files, _, _ = bench_inputs(args, "cli_memory: peak RSS of the command line on a "
                                             "large JSONL log")
    runs = []
    with generated_log(files, args.size_mb, args.tmpdir, "firewall-cli-memory-") as (log, lines,
                                                                                     nbytes):
        for mode in args.mode or ["json"]:
            run = run_mode(log, mode)
            runs.append(run)
            shown = ' '.join(MODES[mode]).format(log='LOG', out='OUT')
            print(f"  firewall {shown}: exit {run['exit']}, "
                  f"peak RSS {run['peak_rss_mb']:.1f} MiB, {run['seconds']:.0f} s "
                  f"({run['cpu_seconds']:.0f} s CPU, "
                  f"{nbytes / 2**20 / run['seconds']:.2f} MiB/s)")
            if run["exit"] != 0:
                print(run["stderr"])
    peak = max(r["peak_rss_mb"] for r in runs)
    met = peak < args.target_mb and all(r["exit"] == 0 for r in runs)
    print(f"\npeak RSS {peak:.1f} MiB; target < {args.target_mb:g} MB: "
          f"{'MET' if met else 'NOT MET'}")
    write_json(args.json, {**header, "benchmark": "cli_memory", "log_conversations": lines,
                           "log_bytes": nbytes, "runs": runs, "target_met": met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
