"""``firewall eval`` on Dask: the same bytes as one process, throughput by worker count, and the
peak memory of each worker on a large generated log.

1. ``firewall eval`` over the dev conversations in one process (``--ledgers`` to a file), then
   with ``--dask ADDRESS`` on a ``LocalCluster`` of N single-threaded worker processes started
   here (``--workers``, default 1 and 2): the table and the ledgers must be byte-identical
   (``cmp``). Each run is a child process, timed from its start (pack loading, planning and the
   line-count round included; the cluster's start-up is not, it is reported apart).
2. ``--size-mb`` (default 1024; 0 skips it): a JSONL log of that size is generated into a
   temporary file outside the repository (replicas of the dev conversations, as ``memory.py``
   makes them), ``firewall eval LOG --dask`` runs on a 2-worker cluster, and each worker
   reports its own peak RSS (``getrusage``); the client's is the kernel's accounting of the
   child (``wait4``). Target: < 300 MB per worker. The log is removed afterwards, also on error.
   ``--memory-at`` (default 0.5) sets eval's ``--at`` for that run: one cut per conversation
   instead of three, to keep the run short (the cuts change the work, not what a worker
   holds: its memos and one range's sums). The workers' RSS is sampled every 10 s;
   ``--stop-after SECONDS`` ends that run early on a loaded machine (the figures then cover
   the part read, and the output says how much).

    python benchmarks/dask_eval.py [--data DIR] [--workers 1 2] [--size-mb 1024]
                                   [--memory-at 0.5] [--stop-after S] [--tmpdir DIR] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_memory import firewall_command  # noqa: E402
from memory import generated_log  # noqa: E402
from throughput import add_common_args, bench_inputs, write_json  # noqa: E402


def peak_rss_mb() -> float:
    """This process's peak RSS (run on each worker with ``client.run``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def cpu_seconds() -> float:
    """This process's CPU time so far (on a loaded machine, wall time says little)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def current_rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_eval(files: list[str], out_dir: Path, name: str, *extra: str, sample=None,
             stop_after: float | None = None) -> dict:
    """``sample()``: called every 10 s while it runs; ``stop_after``: seconds, then SIGTERM."""
    table, ledgers = out_dir / f"{name}.md", out_dir / f"{name}.ledgers.jsonl"
    argv = firewall_command() + ["eval", *files, "--ledgers", str(ledgers), *extra]
    started = time.perf_counter()
    with table.open("w") as out, tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(argv, stdout=out, stderr=errors, text=True)
        pid, status, usage = 0, 0, None
        while sample is not None:  # not poll(): it would reap the child before wait4
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if stop_after is not None and time.perf_counter() - started > stop_after:
                proc.terminate()
                break
            sample()
            time.sleep(10)
        if not pid:
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
        seconds = time.perf_counter() - started
        errors.seek(0)
        stderr = errors.read()[-2000:]
    return {"name": name, "exit": proc.returncode, "seconds": seconds,
            "client_cpu_seconds": usage.ru_utime + usage.ru_stime,
            "client_peak_rss_mb": usage.ru_maxrss / 1024, "stderr": stderr,
            "table": table, "ledgers": ledgers}


def cluster(workers: int):
    import logging

    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.ERROR)


def on_dask(files: list[str], out_dir: Path, workers: int, *extra: str,
            stop_after: float | None = None) -> dict:
    from dask.distributed import Client

    started = time.perf_counter()
    samples: list[tuple[float, list[float]]] = []
    with cluster(workers) as local, Client(local) as client:
        client.wait_for_workers(workers)
        startup = time.perf_counter() - started
        before = client.run(cpu_seconds)
        begun = time.perf_counter()

        def sample() -> None:
            samples.append((round(time.perf_counter() - begun),
                            sorted(client.run(current_rss_mb).values())))

        run = run_eval(files, out_dir, f"dask{workers}", "--dask", local.scheduler_address,
                       *extra, sample=sample if stop_after else None, stop_after=stop_after)
        after = client.run(cpu_seconds)
        peaks = client.run(peak_rss_mb)
    run["cluster_startup_seconds"] = startup
    run["worker_cpu_seconds"] = sorted(after[w] - before[w] for w in after)
    run["worker_peak_rss_mb"] = sorted(peaks.values())
    if samples:
        run["worker_rss_samples_mb"] = samples
    return run


def same(a: dict, b: dict) -> bool:
    return (filecmp.cmp(a["table"], b["table"], shallow=False)
            and filecmp.cmp(a["ledgers"], b["ledgers"], shallow=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, repeat=1)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--size-mb", type=float, default=1024.0)
    parser.add_argument("--memory-at", default="0.5")
    parser.add_argument("--stop-after", type=float, default=None, metavar="SECONDS",
                        help="end the large-log run after this long (a loaded machine): its "
                             "figures then cover the part read, which is said")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--target-mb", type=float, default=300.0)
    args = parser.parse_args(argv)
    header, paths, _, _ = bench_inputs(args, "dask_eval: firewall eval on Dask")
    files = [str(p) for p in paths]
    size = sum(Path(f).stat().st_size for f in files) / 2**20
    print(f"input   : {len(files)} files, {size:.1f} MiB; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results: dict = {"runs": []}
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        out_dir = Path(tmp)
        single = run_eval(files, out_dir, "single")
        results["runs"].append(single)
        print(f"  one process: {single['seconds']:.1f} s, {size / single['seconds']:.2f} MiB/s, "
              f"{single['client_cpu_seconds']:.1f} s CPU, exit {single['exit']}")
        for workers in args.workers:
            run = on_dask(files, out_dir, workers)
            run["identical"] = same(single, run)
            results["runs"].append(run)
            print(f"  --dask, {workers} worker(s): {run['seconds']:.1f} s, "
                  f"{size / run['seconds']:.2f} MiB/s, CPU: client "
                  f"{run['client_cpu_seconds']:.1f} s, workers "
                  f"{', '.join(f'{c:.1f}' for c in run['worker_cpu_seconds'])} s; exit "
                  f"{run['exit']}; table and ledgers "
                  f"{'IDENTICAL' if run['identical'] else 'DIFFER'}; cluster start-up "
                  f"{run['cluster_startup_seconds']:.1f} s; worker peak RSS "
                  f"{', '.join(f'{m:.0f}' for m in run['worker_peak_rss_mb'])} MiB")
        if args.size_mb > 0:
            with generated_log(paths, args.size_mb, args.tmpdir, "firewall-dask-") as (
                    log, lines, nbytes):
                print(f"eval --at {args.memory_at} on 2 workers")
                run = on_dask([str(log)], out_dir, 2, "--at", args.memory_at,
                              stop_after=args.stop_after or 10**9)
                run["log_bytes"], run["log_conversations"] = nbytes, lines
                with run["ledgers"].open("rb") as handle:
                    run["cuts_written"] = sum(1 for _ in handle)
                if run["exit"] != 0:
                    print(f"  stopped after {run['seconds']:.0f} s: {run['cuts_written']:,} cuts "
                          f"written, of about {lines:,}")
                for at, rss in run["worker_rss_samples_mb"][::6]:
                    print(f"    {at:5d} s: worker RSS {', '.join(f'{m:.0f}' for m in rss)} MiB")
                results["memory"] = run
                met = max(run["worker_peak_rss_mb"]) < args.target_mb and run["exit"] == 0
                print(f"  {run['seconds']:.0f} s ({nbytes / 2**20 / run['seconds']:.2f} MiB/s), "
                      f"exit {run['exit']}; worker peak RSS "
                      f"{', '.join(f'{m:.0f}' for m in run['worker_peak_rss_mb'])} MiB, client "
                      f"{run['client_peak_rss_mb']:.0f} MiB; target < {args.target_mb:g} MB "
                      f"per worker: {'MET' if met else 'NOT MET'}")
                if run["exit"] != 0:
                    print(run["stderr"])
    for run in results["runs"] + ([results["memory"]] if "memory" in results else []):
        run.pop("table"), run.pop("ledgers")
    write_json(args.json, {**header, "benchmark": "dask_eval", **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
