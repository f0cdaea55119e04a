"""Every regex rule's prefilter pattern and keywords in one Hyperscan (Vectorscan) database:
which rules can match an ASCII text, in one pass, for all rules at once.

Optional: ``pip install 'literal-firewall[hyperscan]'`` (wheels for x86-64 Linux and macOS);
imported lazily, and without it the prefilter's RE2 sets serve alone. A database compiles in
seconds, so it is built by a background thread (Hyperscan's compiler releases the GIL) while
the RE2 sets serve, and stored in the per-user cache (``packcache.cache_dir()``), where the
next process loads it in a millisecond. No cache (``FIREWALL_CACHE_DIR=""``): no database, so
that short processes never pay the compile.

A database only ever answers "which patterns match somewhere". It holds the same widened
patterns as the RE2 sets (``regex_syntax.relax``), and only those RE2 accepted, so "no match" still
proves that `regex` finds none on ASCII text: Hyperscan's ``\\d \\w \\b`` are ASCII as RE2's,
its ``\\s`` also holds ``\\v`` (a widening), and prefilter mode only widens further.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import regex

_NAMED = regex.compile(r"(?<!\\)\(\?P?<([A-Za-z_]\w*)>")  # Hyperscan refuses a repeated name
FORMAT = 2  # bump when the database's layout (ids, flags) changes
SLOW_COMPILE = 0.25  # seconds of CPU: a UTF-8 pattern compiling longer alone is left out
CONDITIONS = 2  # further tests per rule (its locators): ids (2 + k) * rules + rule

_lock = threading.Lock()
_databases: dict[str, PatternDatabase | None] = {}  # by key; None: being compiled or failed
_compiling: set[str] = set()


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
    somewhere in ``data``, those whose keyword (any case) occurs in it, and per further test
    those that pass it."""

    def __init__(self, database, size: int, members: frozenset[int]) -> None:
        self._database, self.size, self.members = database, size, members
        self._scratch = threading.local()  # a scratch space per thread (not shareable)

    def matched(self, data: bytes) -> list[set[int]]:
        """[rules whose pattern matched, rules whose keyword occurs, rules passing each further
        test] in ``data``."""
        scratch = getattr(self._scratch, "value", None)
        if scratch is None:
            import hyperscan

            scratch = self._scratch.value = hyperscan.Scratch(self._database)
        found: list[set[int]] = [set() for _ in range(2 + CONDITIONS)]
        adders = [rules.add for rules in found]
        size = self.size

        def on_match(id_: int, start: int, end: int, flags: int, context: object) -> None:
            adders[id_ // size](id_ % size)  # one call per pattern (single match)
        self._database.scan(data, match_event_handler=on_match, scratch=scratch)
        return found


def _expressions(sources: Sequence[str | None], keywords: Sequence[Sequence[str]],
                 conditions: Sequence[Sequence[str]]) -> list[tuple[int, bytes]]:
    """(id, expression) of each pattern (id = rule index), each rule's keyword alternation
    (id = rule count + rule index) and each further test (see ``CONDITIONS``)."""
    out = []
    for i, source in enumerate(sources):
        if source is not None and "\\G" not in source:
            out.append((i, _NAMED.sub("(?:", source).encode("ascii", "backslashreplace")))
    for i, words in enumerate(keywords):
        usable = sorted({k for k in words if k and k.isascii()})
        if usable:
            alternation = "|".join("".join(f"\\x{ord(c):02x}" for c in k) for k in usable)
            out.append((len(sources) + i, f"(?i)(?:{alternation})".encode()))
    for i, tests in enumerate(conditions):
        for k, test in enumerate(tests[:CONDITIONS]):
            if "\\G" not in test:
                out.append(((2 + k) * len(sources) + i,
                            _NAMED.sub("(?:", test).encode("ascii", "backslashreplace")))
    return out


def request(sources: Sequence[str | None], keywords: Sequence[Sequence[str]],
            conditions: Sequence[Sequence[str]] = (), *, utf8: bool = False) -> str | None:
    """Ask for the database of these patterns, keywords and further tests: loaded from the
    cache now, or compiled by a background thread; returns its key for ``ready`` (None: no
    Hyperscan). ``utf8``: patterns over UTF-8 text (widened as ``regex_syntax.relax`` widens)."""
    hyperscan = _module()
    if hyperscan is None:
        return None
    expressions = _expressions(sources, keywords, conditions)
    digest = hashlib.sha256(f"{FORMAT} {hyperscan.__version__} {len(sources)} {utf8}\n"
                            .encode())
    for id_, expression in expressions:
        digest.update(b"%d " % id_ + expression + b"\n")
    key = digest.hexdigest()
    with _lock:
        if key in _databases or key in _compiling:
            return key
        path = _cache_path(key)
        if path is None:
            _databases[key] = None  # no cache: never compiled (see the module docstring)
            return key
        loaded = _load(path, len(sources))
        if loaded is not None:
            _databases[key] = loaded
            return key
        _compiling.add(key)
    thread = threading.Thread(target=_compile_and_store, args=(key, path, expressions,
                                                               len(sources), utf8),
                              name="firewall-hyperscan-compile", daemon=True)
    thread.start()
    return key


def ready(key: str) -> PatternDatabase | None:
    """The database of ``key`` if it is ready (a dictionary lookup)."""
    return _databases.get(key)


def wait(key: str, timeout: float | None = None) -> PatternDatabase | None:
    """``ready``, after waiting for a compile under way (benchmarks and tests)."""
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            busy = key in _compiling
        if not busy or (deadline is not None and time.monotonic() > deadline):
            return _databases.get(key)
        time.sleep(0.05)


def _cache_path(key: str) -> Path | None:
    from .packcache import cache_dir

    folder = cache_dir()
    return None if folder is None else folder / "hyperscan" / f"{key[:40]}.hsdb"


def _load(path: Path, size: int) -> PatternDatabase | None:
    """A stored database, or None (missing, corrupt, or from another Hyperscan build)."""
    import hyperscan

    try:
        blob = path.read_bytes()
        digest, body = blob[:32], blob[32:]
        if hashlib.sha256(body).digest() != digest:
            return None
        members_size = int.from_bytes(body[:4], "little")
        members = frozenset(int(m) for m in body[4:4 + members_size].split(b",") if m)
        database = hyperscan.loadb(body[4 + members_size:], hyperscan.HS_MODE_BLOCK)
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
            body = len(listed).to_bytes(4, "little") + listed + hyperscan.dumpb(compiled)
            _store(path, hashlib.sha256(body).digest() + body)
    except Exception:  # noqa: BLE001 - no database: the RE2 sets go on serving
        database = None
    finally:
        with _lock:
            _databases[key] = database
            _compiling.discard(key)


def _store(path: Path, blob: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".db-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, path)  # readers see no entry or a whole one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only or full disk: compiled again by the next process
