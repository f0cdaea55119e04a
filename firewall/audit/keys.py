"""Keys and hashing: where the log lives, the per-installation and shared HMAC keys, and the
hash a sensitive value is stored as (never the value).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import os
import secrets
from pathlib import Path

import platformdirs

# the schema and its migrations, shared with the PostgreSQL log
from ..errors import AuditError


APP_NAME = "literal-firewall"
DB_ENV = "FIREWALL_AUDIT_DB"
KEY_ENV = "FIREWALL_AUDIT_KEY"
KEY_FILE_ENV = "FIREWALL_AUDIT_KEY_FILE"  # for a shared (PostgreSQL) log: see shared_key
HASH_PREFIX = "hmac:"  # how a sensitive value is written where a value would otherwise go


# --------------------------------------------------------------------------- hashing


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME))


def installation_key() -> bytes:
    """The HMAC key of this installation: ``FIREWALL_AUDIT_KEY``, else the ``key`` file.

    The key is the text itself (UTF-8), so copying the file's content into the env var
    reproduces the same hashes on another machine. The file is created on first use, 0600.
    """
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return env.encode()
    path = state_dir() / "key"
    try:
        if not path.exists():
            _create_key(path)
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise os_storage_error(path, exc, "reading the audit key") from exc
    if not key:
        raise AuditError(f"audit key {path} is empty: delete it (a new one is created) "
                         f"or set {KEY_ENV}")
    return key.encode()


def shared_key() -> bytes:
    """The HMAC key of a log shared by many machines (PostgreSQL): ``FIREWALL_AUDIT_KEY``, else
    the file named by ``FIREWALL_AUDIT_KEY_FILE``. Never created here, and never stored in the
    log: a key made up on one machine would hash the same secret differently from the others,
    and ``audit literal`` would silently miss it."""
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return env.encode()
    name = os.environ.get(KEY_FILE_ENV, "").strip()
    if not name:
        raise AuditError(
            f"a shared audit log needs the key its writers hash secrets with, the same on every "
            f"machine and kept outside the database: set {KEY_ENV} to it, or {KEY_FILE_ENV} to "
            f"a file holding it (make one with: python -c 'import secrets; "
            f"print(secrets.token_hex(32))')")
    path = Path(name).expanduser()
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AuditError(f"audit key file {path} ({KEY_FILE_ENV}) cannot be read: "
                         f"{exc.strerror or exc}") from exc
    if not key:
        raise AuditError(f"audit key file {path} ({KEY_FILE_ENV}) is empty")
    return key.encode()


def _create_key(path: Path) -> None:
    # Write a private temp file, then hard-link it into place: link fails if another process
    # got there first, so concurrent first uses agree on one key and nobody reads a half file.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links: last writer wins, still never half a key
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (from JSON such as ``"\\ud800"``) written as the
    text ``\\ud800``, which UTF-8 can encode: how a log stores such a value, and how the CLI
    prints it (inside a JSON string, the escape reads back as the same value)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=65536)  # every compaction hashes the ledger's values again
def literal_hash(value: str, key: bytes) -> str:
    """Hex HMAC-SHA256 of ``value``: lets a log find a literal without storing it. A lone
    surrogate (from JSON such as ``"\\ud800"``) is hashed as its UTF-8-style bytes rather than
    refused: one bad character must not block a conversation's compaction forever."""
    return hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- records


def storage_error(path: Path, action: str, reason: str, cause: object) -> AuditError:
    return AuditError(f"audit log {path}: {action} failed: {reason} ({cause})")


def os_storage_error(path: Path, exc: OSError, action: str) -> AuditError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "the disk is full; free some space or point the log at another disk"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        reason = "it is read-only; fix its permissions or point the log at a writable file"
    else:
        reason = "check the path and that its folder can be created"
    return storage_error(path, action, reason, exc.strerror or exc)
