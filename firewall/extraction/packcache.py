"""A per-user cache of loaded packs, so that a command does not parse the YAML and run every
rule's examples again at each start (a hook runs on every compaction event).

An entry is keyed by the pack file's path and by the library (its version and the size and
time of its own source files, so that an edited engine never trusts a verdict it did not give),
and holds the SHA-256 of every file the pack was built from (the pack and those it extends):
any difference is a miss. Only the rules' data is stored, as JSON that the models validate
again on the way in, never code; an entry that cannot be read, parsed or validated is a miss
too, and is rewritten. The cache is ``$FIREWALL_CACHE_DIR``, else the per-user cache folder;
``FIREWALL_CACHE_DIR=""`` turns it off. A cache that cannot be written is silently skipped.

Whoever can write the cache can change the rules (drop the secret rules, and a secret is no
longer masked), so only a private folder is used: created ``0700``, and a folder another user
owns or that group or others can write turns the cache off (``private_folder``); an entry is
read only when it is a regular file this user owns, never through a symlink (``read_private``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from ..private_files import private_folder, read_private, write_atomic

CACHE_ENV = "FIREWALL_CACHE_DIR"
FORMAT = 1  # bump when the entry layout changes
KEEP_ENTRIES = 256  # loaded packs kept, the most recently used (about 80 kB each)


def cache_dir() -> Path | None:
    """The cache folder, or None: turned off, or not private to this user (see the module)."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        if not configured:
            return None
        folder = Path(configured).expanduser()
    else:
        import platformdirs

        folder = Path(platformdirs.user_cache_dir("literal-firewall")) / "packs"
    return folder if private_folder(folder) else None


@functools.lru_cache(maxsize=1)
def library_fingerprint() -> str:
    from .. import __version__

    digest = hashlib.sha256(f"{FORMAT} {__version__}".encode())
    package = Path(__file__).parent.parent
    for source in sorted(package.rglob("*.py")):
        stat = source.stat()
        digest.update(f"{source.relative_to(package)} {stat.st_size} {stat.st_mtime_ns}\n"
                      .encode())
    return digest.hexdigest()


def _entry_path(path: Path) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(f"{library_fingerprint()}\0{path.resolve()}".encode()).hexdigest()
    return folder / f"{key[:40]}.json"


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def lookup(path: Path, *, examples_checked: bool) -> Any:
    """The cached pack loaded from ``path``, or None. ``examples_checked``: only an entry whose
    rules' examples were run and passed will do (a strict load)."""
    entry_path = _entry_path(path)
    if entry_path is None:
        return None
    try:
        entry = json.loads(read_private(entry_path).decode("utf-8"))
        if examples_checked and entry["examples_checked"] is not True:
            return None
        if str(path.resolve()) not in entry["files"]:  # an entry of another pack
            return None
        if any(_sha256(name) != digest for name, digest in entry["files"].items()):
            return None
        pack = _pack_from_json(entry["pack"], path)
        used(entry_path)
        return pack
    except Exception:  # noqa: BLE001 - a missing, stale or corrupt entry is only a miss
        return None


def store(pack: Any, files: Iterable[Path], *, examples_checked: bool) -> None:
    entry_path = _entry_path(Path(pack.path))
    if entry_path is None:
        return
    try:
        entry = {"examples_checked": examples_checked,
                 "files": {str(Path(f).resolve()): _sha256(f) for f in files},
                 "pack": {"name": pack.name, "version": pack.version,
                          "description": pack.description, "owners": list(pack.owners),
                          "rules": [rule.model_dump(mode="json") for rule in pack.rules],
                          "noise": [noise.model_dump(mode="json") for noise in pack.noise],
                          "noise_owners": list(pack.noise_owners)}}
        write_atomic(entry_path, json.dumps(entry, ensure_ascii=False).encode("utf-8"))
        prune(entry_path.parent, "*.json", KEEP_ENTRIES)
    except OSError:
        pass  # a read-only or full disk: run uncached


def used(path: Path) -> None:
    """Mark a cache entry as just used, so that ``prune`` keeps it (best effort)."""
    with suppress(OSError):
        os.utime(path, follow_symlinks=False)


def prune(folder: Path, pattern: str, keep: int) -> None:
    """Delete all but the ``keep`` most recently used entries matching ``pattern`` in
    ``folder``: every engine or pack change writes new entries (a pack author's edits, each
    upgrade), and without a bound the cache grows for good (a Hyperscan database is 10-20 MB).
    Best effort: an entry another process removed first, or a read-only folder, is skipped."""
    try:
        entries = []
        for entry in folder.glob(pattern):
            with suppress(OSError):
                entries.append((entry.stat().st_mtime_ns, entry))
        entries.sort(reverse=True)
        for _, entry in entries[keep:]:
            with suppress(OSError):
                entry.unlink()
    except OSError:
        pass


def _pack_from_json(data: dict[str, Any], path: Path) -> Any:
    from .pack_format import _RULE_ADAPTER, Noise, Pack

    rules = tuple(_RULE_ADAPTER.validate_python(rule) for rule in data["rules"])
    noise = tuple(Noise.model_validate(n) for n in data["noise"])  # a pack's "not a literal"
    if len(rules) != len(data["owners"]) or len(noise) != len(data["noise_owners"]):
        raise ValueError("rules or noise and their owners differ in length")
    return Pack(name=data["name"], version=data["version"], description=data["description"],
                path=str(path), rules=rules, owners=tuple(data["owners"]), noise=noise,
                noise_owners=tuple(data["noise_owners"]))
