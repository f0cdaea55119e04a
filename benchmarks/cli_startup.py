"""Start-up of the command line: how long `firewall` takes on a small input.

A hook runs the CLI at every compaction event, so its start-up is paid every time. Each command
below runs ``--repeat`` times in a fresh process (after one untimed run that fills the per-user
pack cache, which lives in a temporary folder here, as do the hook state and the audit log);
the median wall time and the median CPU time (user + system, from ``wait4``: what the process
itself spent, less sensitive to a busy machine) are reported. ``--cold`` also times runs with
an empty pack cache (``FIREWALL_CACHE_DIR`` emptied before each). Target: under 0.5 s.

    python benchmarks/cli_startup.py [--repeat 11] [--cold] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_memory import firewall_command  # noqa: E402
from throughput import print_header, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "support_invoice.json"
TRANSCRIPT = ROOT / "tests" / "fixtures" / "transcripts" / "claude_code_session.jsonl"


def commands() -> list[tuple[str, list[str], str | None]]:
    """(name, argv after `firewall`, standard input)."""
    event = {"session_id": "benchmark", "transcript_path": str(TRANSCRIPT), "cwd": str(ROOT)}
    return [
        ("firewall scan examples/support_invoice.json", ["scan", str(EXAMPLE)], None),
        ("firewall hooks run pre-compact (a 15-message transcript)",
         ["hooks", "run", "pre-compact"], json.dumps({**event, "hook_event_name": "PreCompact"})),
        ("firewall hooks run session-start", ["hooks", "run", "session-start"],
         json.dumps({**event, "hook_event_name": "SessionStart", "source": "compact"})),
    ]


def run_one(argv: list[str], stdin: str | None, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run, its output thrown away."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, text=True)
    if stdin is not None:
        proc.stdin.write(stdin)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    proc.stderr.close()
    if proc.returncode != 0 or err:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed runs per command")
    parser.add_argument("--cold", action="store_true",
                        help="also time runs with an empty pack cache")
    parser.add_argument("--target", type=float, default=0.5, help="seconds (default 0.5)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    header = print_header("cli_startup: start-up of the command line on a small input")
    base = firewall_command()
    results = []
    with tempfile.TemporaryDirectory(prefix="firewall-startup-") as tmp:
        env = {**os.environ, "FIREWALL_CACHE_DIR": str(Path(tmp) / "cache"),
               "FIREWALL_STATE_DIR": str(Path(tmp) / "state"),
               "FIREWALL_AUDIT_DB": str(Path(tmp) / "audit.db"),
               "FIREWALL_AUDIT_KEY": "benchmark"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
        for cache in (["warm", "cold"] if args.cold else ["warm"]):
            for name, rest, stdin in commands():
                run_one(base + rest, stdin, env)  # fills the caches (pack cache, bytecode)
                walls, cpus = [], []
                for _ in range(args.repeat):
                    if cache == "cold":
                        shutil.rmtree(env["FIREWALL_CACHE_DIR"], ignore_errors=True)
                    wall, cpu = run_one(base + rest, stdin, env)
                    walls.append(wall)
                    cpus.append(cpu)
                row = {"command": name, "pack_cache": cache, "runs": args.repeat,
                       "wall_median_s": statistics.median(walls),
                       "cpu_median_s": statistics.median(cpus),
                       "wall_min_s": min(walls)}
                results.append(row)
                print(f"  {name} [{cache} pack cache]: median {row['wall_median_s']:.3f} s wall, "
                      f"{row['cpu_median_s']:.3f} s CPU (fastest {row['wall_min_s']:.3f} s)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nload average at the end: {load:.2f}; target < {args.target:g} s")
    write_json(args.json, {**header, "benchmark": "cli_startup", "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
