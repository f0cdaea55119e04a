"""Files only this user may have written: the per-user cache (packs, Hyperscan databases), the
hooks' session state and a ledger file hold what decides extraction or a ledger's MAC key, so
a file planted by someone else, or reached through a symlink, must never be read as ours, and
what we write is private and whole (``write_atomic``)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def private_folder(folder: Path) -> bool:
    """Create ``folder`` (``0700``) if it is missing; True when it is a folder this user owns
    and no one else can write (another user's, or a group- or world-writable one, could hold
    files planted there), not a symlink (whoever can write the folder above it could point it
    at one of the user's own folders, whose files a cache's pruning would delete)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and not info.st_mode & 0o022)


def read_private(path: Path) -> bytes:
    """The bytes of the file ``path``: a regular file this user owns and no one else can
    write, not read through a symlink; raises ``OSError`` otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_mode & 0o022):
            raise PermissionError(f"{path}: not a private file")
        return handle.read()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a private temp file beside ``path``, fsync it, then rename it there:
    readers see the old file or the new one, never half of one, also after a crash. Raises
    ``OSError`` (the temp file removed)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".write-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["private_folder", "read_private", "write_atomic"]
