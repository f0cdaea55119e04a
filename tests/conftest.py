from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run and machine: a failure reproduces, and a
# green run stays green (derandomize derives the examples from each test's own source).
settings.register_profile("repo", derandomize=True, print_blob=True)
settings.load_profile("repo")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _pack_cache(tmp_path_factory):
    """Packs the tests load are cached for the run (subprocesses too), never in the user's
    cache folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FIREWALL_CACHE_DIR", str(tmp_path_factory.mktemp("pack-cache")))
        yield


# --------------------------------------------------------------------------- PostgreSQL

POSTGRES_HOWTO = ("install Debian's `postgresql` package (apt-get install -y postgresql; "
                  ".ci/run does) and the `postgres` extra (pip install -e '.[postgres]'); the "
                  "tests start and stop their own server")


def _postgres_bin(name: str) -> str | None:
    import glob
    import shutil

    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session: initdb into a temp folder, listening on a
    unix socket there only, run as an unprivileged user (``postgres`` refuses root), stopped
    and removed at the end. Yields ``(url, data_dir)``. Skips when it cannot be started, saying
    how to run these tests; on CI (``CI`` set) that fails instead: CI must run them."""
    import os
    import shutil
    import subprocess
    import tempfile

    def unavailable(why: str):
        message = f"no PostgreSQL server for the audit tests ({why}): {POSTGRES_HOWTO}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)

    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed")
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not (initdb and pg_ctl):
        unavailable("initdb/pg_ctl not found")
    as_user: list[str] = []
    # short: a unix socket path is at most ~100 bytes, and TMPDIR may be long
    root = tempfile.mkdtemp(prefix="fw-pg-", dir="/tmp" if os.path.isdir("/tmp") else None)
    if os.geteuid() == 0:
        import pwd

        as_user = ["runuser", "-u", "nobody", "--"]
        os.chown(root, pwd.getpwnam("nobody").pw_uid, -1)
    data = os.path.join(root, "data")
    try:
        subprocess.run([*as_user, initdb, "-D", data, "-U", "fwtest", "-A", "trust", "-E",
                        "UTF8", "--no-sync", "--no-instructions"],
                       check=True, capture_output=True, text=True, timeout=120)
        subprocess.run([*as_user, pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-w",
                        "-t", "60", "-o", f"-k {root} -c listen_addresses='' -c fsync=off "
                        "-c max_connections=60", "start"],
                       check=True, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        shutil.rmtree(root, ignore_errors=True)
        unavailable(f"it did not start: {str(detail).strip()[-300:]}")
    try:
        yield f"postgresql://fwtest@/postgres?host={root}", data
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """A URL whose tables live in a fresh schema of the session's server: each test starts
    from an empty log, without the cost of a database per test."""
    import uuid

    import psycopg

    url, _ = postgres_server
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}&options=-csearch_path%3D{schema}"
