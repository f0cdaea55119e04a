"""Every regex rule's prefilter pattern and keywords in one Hyperscan (Vectorscan) database:
which rules can match an ASCII text, in one pass, for all rules at once.

Optional: ``pip install 'literal-firewall[hyperscan]'`` (wheels for x86-64 Linux and macOS);
imported lazily, and without it the prefilter's RE2 sets serve alone. A database compiles in
seconds, so it is built by a detached child process while the RE2 sets serve, and stored in the
per-user cache (``packcache.cache_dir()``), where this process picks it up once it is there and
the next loads it in a millisecond. A child, not a thread: a Claude Code hook or one CLI
command exits long before a compile ends, and a thread dies with it, so such processes never
stored a database and always ran on the RE2 sets (where no child can be started, a thread
still does it). No cache (``FIREWALL_CACHE_DIR=""``): no database, so that short processes
never pay the compile.

A database only ever answers "which patterns match somewhere". It holds the same widened
patterns as the RE2 sets (``regex_syntax.relax``), and only those RE2 accepted, so "no match" still
proves that `regex` finds none on ASCII text: Hyperscan's ``\\d \\w \\b`` are ASCII as RE2's,
its ``\\s`` also holds ``\\v`` (a widening), and prefilter mode only widens further.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import regex

from ..private_files import private_folder, read_private, write_atomic
from .packcache import cache_dir, prune, used

_NAMED = regex.compile(r"(?<!\\)\(\?P?<([A-Za-z_]\w*)>")  # Hyperscan refuses a repeated name
FORMAT = 4  # bump when the database's layout (ids, flags, the key it holds) changes
SLOW_COMPILE = 0.25  # seconds of CPU: a UTF-8 pattern compiling longer alone is left out

# a compile under way in a child: how often this process looks for its stored database, and
# when a job file left by a child that never finished (killed, a reboot) no longer holds back
# another compile
POLL_SECONDS = 0.25
JOB_STALE_SECONDS = 900
# databases kept in the cache, the most recently used: two per set of packs (ASCII, UTF-8),
# 10-20 MB each; an older set (before an upgrade, a pack author's earlier edits) is compiled
# again if it ever comes back
KEEP_DATABASES = 8

_lock = threading.Lock()
_databases: dict[str, PatternDatabase | None] = {}  # by key; None: being compiled or failed
_compiling: set[str] = set()  # compiled by a thread of this process
_pending: dict[str, _Job] = {}  # compiled by a child process (this one's or another's)


def _module():
    try:
        import hyperscan
    except ImportError:
        return None
    return hyperscan


def available() -> bool:
    return _module() is not None


class PatternDatabase:
    """A compiled database: ``matched(data)`` gives the rule indices whose pattern matches
    somewhere in ``data`` and those whose keyword (any case) occurs in it."""

    def __init__(self, database, size: int, members: frozenset[int]) -> None:
        self._database, self.size, self.members = database, size, members
        self._scratch = threading.local()  # a scratch space per thread (not shareable)

    def matched(self, data: bytes) -> tuple[set[int], set[int]]:
        """(rules whose pattern matched, rules whose keyword occurs) in ``data``."""
        scratch = getattr(self._scratch, "value", None)
        if scratch is None:
            import hyperscan

            scratch = self._scratch.value = hyperscan.Scratch(self._database)
        ids: list[int] = []
        append = ids.append

        def on_match(id_: int, start: int, end: int, flags: int, context: object) -> None:
            append(id_)  # one call per pattern (single match): the least Python per call
        self._database.scan(data, match_event_handler=on_match, scratch=scratch)
        size = self.size
        return {i for i in ids if i < size}, {i - size for i in ids if i >= size}


def _expressions(sources: Sequence[str | None],
                 keywords: Sequence[Sequence[str]]) -> list[tuple[int, bytes]]:
    """(id, expression) of each pattern (id = rule index) and each rule's keyword alternation
    (id = rule count + rule index)."""
    out = []
    for i, source in enumerate(sources):
        if source is not None and "\\G" not in source:
            out.append((i, _NAMED.sub("(?:", source).encode("ascii", "backslashreplace")))
    for i, words in enumerate(keywords):
        usable = sorted({k for k in words if k and k.isascii()})
        if usable:
            alternation = "|".join("".join(f"\\x{ord(c):02x}" for c in k) for k in usable)
            out.append((len(sources) + i, f"(?i)(?:{alternation})".encode()))
    return out


def request(sources: Sequence[str | None], keywords: Sequence[Sequence[str]], *,
            utf8: bool = False) -> str | None:
    """Ask for the database of these patterns and keywords: loaded from the cache now, or
    compiled by a background thread; returns its key for ``ready`` (None: no Hyperscan).
    ``utf8``: patterns over UTF-8 text (widened as ``regex_syntax.relax`` widens)."""
    hyperscan = _module()
    if hyperscan is None:
        return None
    expressions = _expressions(sources, keywords)
    key = _key(hyperscan, expressions, len(sources), utf8)
    with _lock:
        if key in _databases or key in _compiling:
            return key
        path = _cache_path(key)
        if path is None:
            _databases[key] = None  # no cache: never compiled (see the module docstring)
            return key
        loaded = _load(path, len(sources), key)
        if loaded is not None:
            _databases[key] = loaded
            return key
        job = _start_child(path, key, expressions, len(sources), utf8)
        if job is not None:
            _pending[key] = job
            return key
        _compiling.add(key)
    thread = threading.Thread(target=_compile_and_store, args=(key, path, expressions,
                                                               len(sources), utf8),
                              name="firewall-hyperscan-compile", daemon=True)
    thread.start()
    return key


def _key(hyperscan, expressions: list[tuple[int, bytes]], size: int, utf8: bool) -> str:
    """What a database is the compiled form of: its file's name and the first line of its
    content (see ``_load``)."""
    digest = hashlib.sha256(f"{FORMAT} {hyperscan.__version__} {size} {utf8}\n".encode())
    for id_, expression in expressions:
        digest.update(b"%d " % id_ + expression + b"\n")
    return digest.hexdigest()


def ready(key: str) -> PatternDatabase | None:
    """The database of ``key`` if it is ready (a dictionary lookup; while a child compiles it,
    a look in the cache every ``POLL_SECONDS``)."""
    database = _databases.get(key)
    if database is None and key in _pending:
        return _poll(key)
    return database


def wait(key: str, timeout: float | None = None) -> PatternDatabase | None:
    """``ready``, after waiting for a compile under way (benchmarks, tests, ``firewall
    rules warm``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            busy = key in _compiling or key in _pending
        if key in _pending:
            _poll(key, force=True)
            busy = key in _pending
        if not busy or (deadline is not None and time.monotonic() > deadline):
            return _databases.get(key)
        time.sleep(0.05)


class _Job:
    """A database compiled by a child process: its cache path and its job file (which exists
    until the child is done, stored or not)."""

    def __init__(self, path: Path, size: int, key: str) -> None:
        self.path, self.job, self.size, self.key = path, _job_path(path), size, key
        self.next_look = 0.0


def _job_path(path: Path) -> Path:
    return path.with_suffix(".job")


def _poll(key: str, force: bool = False) -> PatternDatabase | None:
    """Load the database a child stored, if it is there yet; forget the job when the child is
    done without one (nothing compiled, a full disk: the RE2 sets go on serving)."""
    job = _pending.get(key)
    now = time.monotonic()
    if job is None or (not force and now < job.next_look):
        return _databases.get(key)
    job.next_look = now + POLL_SECONDS
    running = job.job.exists()  # looked at first: a child stores, then removes its job file
    if job.path.exists():
        loaded = _load(job.path, job.size, job.key)
        if loaded is not None or not running:
            with _lock:
                _databases[key] = loaded
                _pending.pop(key, None)
            return loaded
    elif not running:
        with _lock:
            _databases[key] = None
            _pending.pop(key, None)
    return None


def _cache_path(key: str) -> Path | None:
    folder = cache_dir()
    if folder is None or not private_folder(folder / "hyperscan"):
        return None
    return folder / "hyperscan" / f"{key[:40]}.hsdb"


def _load(path: Path, size: int, key: str | None = None) -> PatternDatabase | None:
    """A stored database, or None (missing, corrupt, from another Hyperscan build, or compiled
    from other patterns than its name says: a database of another pack would rule out rules it
    never held). ``key``: the whole key it must hold (else the file's name, a prefix of it)."""
    import hyperscan

    try:
        blob = read_private(path)
        digest, body = blob[:32], blob[32:]
        if hashlib.sha256(body).digest() != digest:
            return None
        held, body = body[:64].decode("ascii"), body[64:]
        if held != key if key is not None else not held.startswith(path.stem):
            return None
        members_size = int.from_bytes(body[:4], "little")
        members = frozenset(int(m) for m in body[4:4 + members_size].split(b",") if m)
        database = hyperscan.loadb(body[4 + members_size:], hyperscan.HS_MODE_BLOCK)
        used(path)
        return PatternDatabase(database, size, members)
    except Exception:  # noqa: BLE001 - any unreadable entry is only a miss
        return None


def _compile(expressions: list[tuple[int, bytes]], utf8: bool = False):
    """A block-mode database of ``expressions``, leaving out those Hyperscan refuses (found
    by halving: refusals are rare); returns (database, ids held) or (None, ()). ``utf8``:
    each is first compiled alone, and one that takes over ``SLOW_COMPILE`` seconds is left
    out (a widened class under a counted repetition can take many seconds; the RE2 sets
    judge that rule instead)."""
    import time

    import hyperscan

    flags = hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY | \
        hyperscan.HS_FLAG_PREFILTER | (hyperscan.HS_FLAG_UTF8 if utf8 else 0)

    def build(items):
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(expressions=[e for _, e in items], ids=[i for i, _ in items],
                         elements=len(items), flags=[flags] * len(items))
        return database

    def accepted(items):
        if not items:
            return []
        try:
            build(items)
            return items
        except Exception:  # noqa: BLE001 - Hyperscan refuses one of them
            if len(items) == 1:
                return []
            half = len(items) // 2
            return accepted(items[:half]) + accepted(items[half:])

    if utf8:
        quick = []
        for item in expressions:
            started = time.thread_time()
            try:
                build([item])
            except Exception:  # noqa: BLE001 - refused
                continue
            if time.thread_time() - started <= SLOW_COMPILE:
                quick.append(item)
        expressions = quick
    try:
        return build(expressions), tuple(i for i, _ in expressions)
    except Exception:  # noqa: BLE001
        kept = accepted(expressions)
        if not kept:
            return None, ()
        return build(kept), tuple(i for i, _ in kept)


def _start_child(path: Path, key: str, expressions: list[tuple[int, bytes]], size: int,
                 utf8: bool) -> _Job | None:
    """A detached child process that compiles the database and stores it at ``path`` (its job
    file, written here, says what to compile and that a compile is under way: a second process
    asking for the same database waits for that one); None when none can be started (no
    POSIX sessions, no writable cache: then a thread compiles it)."""
    if os.name != "posix" or not sys.executable:  # an embedded interpreter: no child
        return None
    job = _job_path(path)
    try:
        try:
            age = time.time() - job.stat().st_mtime
        except FileNotFoundError:
            age = None
        if age is not None and age < JOB_STALE_SECONDS:
            return _Job(path, size, key)  # another process's child compiles it
        spec = {"size": size, "utf8": utf8,
                "expressions": [[i, e.decode("latin-1")] for i, e in expressions]}
        write_atomic(job, json.dumps(spec).encode("utf-8"))
    except OSError:
        return None
    # the same modules as this process: its import path, not only the environment's; and only
    # those (-P): ``-m`` would put the working directory first, where a project's own
    # ``regex.py`` would run in the child
    search = os.pathsep.join(p for p in sys.path if p)
    env = {**os.environ, "PYTHONPATH": search}
    try:
        subprocess.Popen([sys.executable, "-P", "-m", __name__, str(job)], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
    except (OSError, ValueError):
        job.unlink(missing_ok=True)
        return None
    return _Job(path, size, key)


def _run_job(job: Path) -> None:
    """The child's work: compile the database its job file describes, store it beside the job
    file under the key of what it compiled, remove the job file (also when nothing could be
    compiled). Nothing in the job file says where to write: a database is only ever stored
    as the one file its patterns name."""
    try:
        import hyperscan

        spec = json.loads(read_private(job).decode("utf-8"))
        expressions = [(int(i), e.encode("latin-1")) for i, e in spec["expressions"]]
        size, utf8 = int(spec["size"]), bool(spec["utf8"])
        key = _key(hyperscan, expressions, size, utf8)
        _compile_and_store(key, job.with_name(f"{key[:40]}.hsdb"), expressions, size, utf8)
    finally:
        job.unlink(missing_ok=True)


def _compile_and_store(key: str, path: Path, expressions: list[tuple[int, bytes]],
                       size: int, utf8: bool = False) -> None:
    database = None
    try:
        import hyperscan

        compiled, ids = _compile(expressions, utf8)
        if compiled is not None:
            members = frozenset(ids)
            database = PatternDatabase(compiled, size, members)
            listed = b",".join(b"%d" % i for i in sorted(members))
            body = key.encode("ascii") + len(listed).to_bytes(4, "little") + listed + \
                hyperscan.dumpb(compiled)
            _store(path, hashlib.sha256(body).digest() + body)
    except Exception:  # noqa: BLE001 - no database: the RE2 sets go on serving
        database = None
    finally:
        with _lock:
            _databases[key] = database
            _compiling.discard(key)


def _store(path: Path, blob: bytes) -> None:
    try:
        write_atomic(path, blob)
        prune(path.parent, "*.hsdb", KEEP_DATABASES)
    except OSError:
        pass  # a read-only or full disk: compiled again by the next process


if __name__ == "__main__":  # the detached child of ``_start_child``
    _run_job(Path(sys.argv[1]))
