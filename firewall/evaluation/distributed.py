"""Batch commands over many conversations: in this process, or spread over a Dask cluster.

A batch command (``eval``, ``replay``, ``rules suggest``, ``scan``) is a *task* mapped over the
conversations of its input files, then a reduction that the command runs on the results, **in
input order**, in this process. A task is a picklable object with two methods:

- ``setup() -> state``: the heavy part (the compiled packs, a ``Firewall``), built once per
  process: once here, once per Dask worker (cached by the task's digest, never once per range);
- ``__call__(state, source, conversation) -> result``: one conversation of the file ``source``;
- optionally ``partial() -> accumulator``, with ``add(result)``: then results are added up where
  they are made (one accumulator per conversation here, per run of a range's conversations on a
  Dask worker), and the accumulators are what the command reduces, in order. Only these small
  sums cross the network: the reduction in one process stays cheap however many workers feed it.

``mapper.map(task, files)`` yields ``(source, result)`` in the order one process reads the
conversations, and reports bad lines through ``files`` (``inputs.ConversationFiles``) as one
process does, so that a command's output is the same byte for byte with or without Dask.

On Dask, each JSONL file is cut into line-aligned byte ranges of about ``partition_bytes``
(``inputs.line_aligned_ranges``), so one big file spreads over the workers; a file that is one
JSON document is one range. A first, cheap round counts the lines of each range, so that every
worker numbers its lines as in the whole file (a bad line is named ``file:line``, a
conversation without an id is ``stem/line``). The workers open the files themselves, by their
absolute paths: on a remote cluster they must see the same paths (a shared file system). Dask
is imported only here, and only when ``--dask`` is given: ``import firewall`` does not need it.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConversationError, FirewallError
from ..inputs import ConversationFiles
from ..turns import Conversation

# A range of a JSONL file read by one task: by default the input split in 4 ranges per worker
# (a small input still spreads over every worker, and a slow range has others to hide behind),
# each of 1 to 32 MiB (a range's results wait on its worker until gathered).
MIN_PARTITION, MAX_PARTITION, RANGES_PER_WORKER = 1 << 20, 32 << 20, 4
LOCAL = "local"  # ``--dask`` alone: a cluster of this machine's cores


class ConversationTask(Protocol):
    def setup(self) -> Any: ...

    def __call__(self, state: Any, source: str, conversation: Conversation) -> Any: ...


def open_mapper(dask: str | None, partition_bytes: int | None = None) -> InProcess | OnDask:
    """What ``--dask`` asks for: None runs here; ``"local"`` starts a cluster of one
    single-threaded worker process per core; an address (``tcp://host:8786``) joins a running
    cluster. ``partition_bytes``: the size of a range (default: see ``MIN_PARTITION``). Use it
    as a context manager (the cluster is closed on exit)."""
    return InProcess() if dask is None else OnDask(dask, partition_bytes)


class InProcess:
    """The single-process run: the reference that the Dask run must equal."""

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def files(self, paths: Sequence[str], *, fail_fast: bool = False,
              label: str = "reading") -> ConversationFiles:
        return ConversationFiles(paths, fail_fast=fail_fast, label=label)

    def map(self, task: ConversationTask, files: ConversationFiles
            ) -> Iterator[tuple[str, Any]]:
        state = task.setup()
        partial = getattr(task, "partial", None)
        for source, conversation in files:
            result = task(state, source, conversation)
            if partial is not None:
                result, added = partial(), result
                result.add(added)
            yield source, result


@dataclass(frozen=True, slots=True)
class _Range:
    path: str
    start: int
    end: int
    jsonl: bool
    error: ConversationError | None = None  # the file cannot be read: raised at its turn


class OnDask:
    """Ranges of the input files as Dask tasks; results gathered back in input order."""

    def __init__(self, address: str, partition_bytes: int | None = None) -> None:
        self.address = address
        self.partition_bytes = partition_bytes
        self.client: Any = None
        self._cluster: Any = None

    def __enter__(self) -> OnDask:
        from ..extras import import_extra

        import_extra("dask", "--dask", FirewallError)
        import logging

        from dask.distributed import Client, LocalCluster

        if self.address == LOCAL:
            self._cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                                         processes=True, dashboard_address=":0",
                                         silence_logs=logging.ERROR)
            self.client = Client(self._cluster)
        else:
            try:
                self.client = Client(self.address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise FirewallError(f"--dask: cannot reach the Dask scheduler at "
                                    f"{self.address}: {exc}") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def files(self, paths: Sequence[str], *, fail_fast: bool = False,
              label: str = "reading") -> ConversationFiles:
        # Dask draws its own bar: none over the bytes read here
        return ConversationFiles(paths, fail_fast=fail_fast, label=label, progress=False)

    def map(self, task: ConversationTask, files: ConversationFiles
            ) -> Iterator[tuple[str, Any]]:
        import cloudpickle

        from ..tokens import token_counter

        client = self.client
        ranges = self._ranges(files.paths)
        first_lines = self._first_lines(ranges)
        digest = hashlib.sha256(cloudpickle.dumps(task)).hexdigest()
        counter = token_counter()  # the client's --tokens, installed on every worker
        counter_key = hashlib.sha256(cloudpickle.dumps(counter)).hexdigest()
        shared = client.scatter(task, broadcast=True, hash=False)
        futures = [None if r.error else
                   client.submit(_run_range, shared, digest, counter, counter_key, r.path,
                                 os.path.abspath(r.path), r.start, r.end, line, r.jsonl,
                                 files.fail_fast, pure=False)
                   for r, line in zip(ranges, first_lines)]
        _show_progress([f for f in futures if f is not None], client)
        try:
            for planned, future in zip(ranges, futures):
                if future is None:
                    raise planned.error  # type: ignore[misc]
                for item in future.result():
                    if isinstance(item, ConversationError):
                        files.bad_line(item)  # noted (or raised, with fail_fast) in order
                    else:
                        yield planned.path, item
                future.release()
        finally:
            client.cancel([f for f in futures if f is not None])

    def _ranges(self, paths: Sequence[str]) -> list[_Range]:
        from ..formats import is_jsonl
        from ..inputs import line_aligned_ranges

        size = self.partition_bytes or self._default_size(paths)
        out: list[_Range] = []
        for path in paths:
            try:
                jsonl = is_jsonl(path)
            except ConversationError as error:  # as one process: raised when reached
                out.append(_Range(path, 0, 0, False, error))
                continue
            if not jsonl:
                out.append(_Range(path, 0, 0, False))
                continue
            out += [_Range(path, start, end, True)
                    for start, end in line_aligned_ranges(path, size)]
        return out

    def _default_size(self, paths: Sequence[str]) -> int:
        total = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
        workers = max(1, len(self.client.scheduler_info().get("workers", ())))
        return min(MAX_PARTITION, max(MIN_PARTITION, total // (RANGES_PER_WORKER * workers)))

    def _first_lines(self, ranges: list[_Range]) -> list[int]:
        """The line number each range starts at in its file: the lines of the ranges before it,
        counted on the workers (cheap next to the work: a read, no parsing)."""
        from ..inputs import count_lines

        counted = {i: self.client.submit(count_lines, os.path.abspath(r.path), r.start, r.end,
                                         pure=False)
                   for i, r in enumerate(ranges[:-1]) if ranges[i + 1].start > 0}
        counts = dict(zip(counted, self.client.gather(list(counted.values()))))
        lines, first = [], 1
        for i, r in enumerate(ranges):
            if r.start == 0:  # a file starts (the same file may be given twice)
                first = 1
            lines.append(first)
            first += counts.get(i, 0)
        return lines


# ── on a worker ─────────────────────────────────────────────────────────────────────────

_STATES: OrderedDict[str, Any] = OrderedDict()  # task digest -> its state, in this process
_STATES_KEPT = 4  # a long-lived worker serves many runs: keep the last few
_counter_key: str | None = None
_lock = threading.Lock()  # a worker may run several threads


class _Stopped(Exception):
    """``--fail-fast``: the first bad line ends the range."""


def _state(task: ConversationTask, digest: str) -> Any:
    with _lock:
        if digest in _STATES:
            _STATES.move_to_end(digest)
            return _STATES[digest]
        state = _STATES[digest] = task.setup()
        while len(_STATES) > _STATES_KEPT:
            _STATES.popitem(last=False)
        return state


def _run_range(task: ConversationTask, digest: str, counter: Any, counter_key: str,
               path: str, absolute: str, start: int, end: int, first_line: int, jsonl: bool,
               fail_fast: bool) -> list[Any]:
    """One range's results in order, a bad line as its ``ConversationError`` in its place.
    The file is opened by its ``absolute`` path (a worker's working folder is its own) and
    named ``path``, as the user wrote it, in errors and in what the task is told."""
    global _counter_key
    from ..formats import read_conversations, read_jsonl_range
    from ..tokens import set_token_counter

    with _lock:
        if _counter_key != counter_key:  # not at each task: installing empties the cache
            set_token_counter(counter)
            _counter_key = counter_key
    state = _state(task, digest)
    items: list[Any] = []
    partial = getattr(task, "partial", None)
    adding: list[Any] = []  # the accumulator of the conversations since the last bad line

    def bad(error: ConversationError) -> None:
        adding.clear()
        items.append(error)
        if fail_fast:
            raise _Stopped

    conversations = (read_jsonl_range(absolute, start, end, first_line=first_line,
                                      on_error=bad, name=path)
                     if jsonl else read_conversations(absolute, on_error=bad, name=path))
    try:
        for conversation in conversations:
            result = task(state, path, conversation)
            if partial is None:
                items.append(result)
                continue
            if not adding:
                adding.append(partial())
                items.append(adding[0])
            adding[0].add(result)
    except _Stopped:
        pass
    return items


def _show_progress(futures: list[Any], client: Any) -> None:
    """Dask's own progress bar, on stderr (stdout carries the output), when it is a terminal."""
    try:
        if not sys.stderr.isatty():
            return
    except (AttributeError, ValueError):
        return
    from distributed.diagnostics.progressbar import TextProgressBar

    class StderrBar(TextProgressBar):
        def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:  # noqa: A002
            frac = (1 - remaining / all) if all else 1.0
            sys.stderr.write(f"\r[{'#' * int(self.width * frac):<{self.width}}] | "
                             f"{int(100 * frac)}% Completed | {self.elapsed:.1f}s")
            sys.stderr.flush()

        def _draw_stop(self, **kwargs: Any) -> None:
            sys.stderr.write("\33[2K\r")
            sys.stderr.flush()

    threading.Thread(target=StderrBar, args=(futures,), daemon=True,
                     kwargs={"scheduler": client.scheduler.address}).start()
