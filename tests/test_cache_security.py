"""The per-user pack cache and the Hyperscan database cache: whoever can write them can change
what is extracted (drop the secret rules, and a secret is no longer masked), so a cache is used
only when it is private, only for what it says it is, and the compile child trusts nothing of
the place it runs in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firewall.extraction import multimatch

# assembled at run time: the repository holds no secret-shaped string
TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def scan(cache: Path, conversation: Path, cwd: Path | None = None) -> list[dict]:
    env = {**os.environ, "FIREWALL_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-P", "-m", "firewall.cli", "scan", "--json",
                           str(conversation)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def token_is_a_secret(cache: Path, conversation: Path) -> bool:
    found = [l for l in scan(cache, conversation) if TOKEN in l["literal"]]
    assert found
    return all(l["sensitive"] for l in found)


@pytest.fixture
def conversation(tmp_path) -> Path:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps([{"role": "user", "content": f"deploy with token {TOKEN} now"}]))
    return path


def entries(cache: Path) -> dict[str, Path]:
    """The cache's entries by pack name."""
    return {json.loads(p.read_text())["pack"]["name"]: p for p in cache.glob("*.json")}


def without_rules(entry: Path) -> str:
    """The entry's text with every rule of its pack dropped (what a planted entry would do)."""
    data = json.loads(entry.read_text())
    data["pack"].update(rules=[], owners=[])
    return json.dumps(data)


def another_user() -> int:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    return 65534  # nobody


@pytest.mark.parametrize("how", ["world-writable", "another user's"])
def test_a_cache_folder_others_can_write_is_not_used(tmp_path, conversation, how):
    """An entry planted in a cache folder others can write (a shared ``FIREWALL_CACHE_DIR``, a
    folder made by someone else first) dropped the secret rules: the token was no secret."""
    cache = tmp_path / "cache"
    assert token_is_a_secret(cache, conversation)  # creates the cache
    assert cache.stat().st_mode & 0o777 == 0o700
    secrets = entries(cache)["secrets"]
    secrets.write_text(without_rules(secrets))
    if how == "world-writable":
        cache.chmod(0o777)
    else:
        os.chown(cache, another_user(), -1)
        os.chown(secrets, another_user(), -1)
    assert token_is_a_secret(cache, conversation)  # the cache is off: the packs are read


def test_a_symlink_planted_in_the_cache_is_not_followed(tmp_path, conversation):
    cache = tmp_path / "cache"
    assert token_is_a_secret(cache, conversation)
    secrets = entries(cache)["secrets"]
    planted = tmp_path / "planted.json"
    planted.write_text(without_rules(secrets))
    secrets.unlink()
    secrets.symlink_to(planted)
    assert token_is_a_secret(cache, conversation)


def test_an_entry_of_another_pack_is_a_miss(tmp_path, conversation):
    """An entry holds the hashes of the files it was built from; the ``core`` entry copied over
    the ``secrets`` one still matched its own files, and the secrets pack loaded as ``core``."""
    cache = tmp_path / "cache"
    assert token_is_a_secret(cache, conversation)
    found = entries(cache)
    shutil.copyfile(found["core"], found["secrets"])
    assert token_is_a_secret(cache, conversation)


# --------------------------------------------------------------------------- Hyperscan

needs_hyperscan = pytest.mark.skipif(not multimatch.available(), reason="hyperscan not installed")

PACK = """name: {name}
version: '1'
rules:
  - id: r
    kind: regex
    pattern: '{pattern}'
"""


def _pack(name: str, pattern: str):
    from firewall.extraction.packs import Pack, parse_pack

    spec = parse_pack(PACK.format(name=name, pattern=pattern))
    return Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))


@needs_hyperscan
def test_a_database_of_other_patterns_is_not_used(tmp_path, monkeypatch):
    """A database stored under another key (another pack's, renamed into place) said that the
    rule cannot match: the literal was lost."""
    from firewall.extraction.extract import Extractor

    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    multimatch._databases.clear()
    folder = tmp_path / "hyperscan"
    assert Extractor([_pack("other", r"never-\d{9}-here")])._prefilter.wait_multimatch(120)
    others = {p: p.read_bytes() for p in folder.glob("*.hsdb")}  # ASCII, maybe UTF-8 too
    assert Extractor([_pack("wanted", r"TKT-\d{4}")])._prefilter.wait_multimatch(120)
    targets = [p for p in folder.glob("*.hsdb") if p not in others]
    assert others and targets
    for blob in others.values():
        for target in targets:
            target.write_bytes(blob)
            multimatch._databases.clear()  # a new process: only the cache
            fresh = Extractor([_pack("wanted", r"TKT-\d{4}")])
            fresh._prefilter.wait_multimatch(timeout=120)
            found = fresh.scan_text("see TKT-1234", "user").literals
            assert [l.value for l in found] == ["TKT-1234"]
    multimatch._databases.clear()


@needs_hyperscan
def test_the_compile_child_runs_no_module_of_the_working_directory(tmp_path):
    """``python -m`` puts the working directory first on the import path: a ``regex.py`` in
    the folder a hook or a command ran in was imported by the detached compile child."""
    work = tmp_path / "project"
    work.mkdir()
    marker = tmp_path / "ran"
    (work / "regex.py").write_text(f"open({str(marker)!r}, 'w').write('planted')\n"
                                   "raise ImportError('planted')\n")
    pack = tmp_path / "pack.yaml"
    pack.write_text(PACK.format(name="p", pattern=r"TKT-\d{4}"))
    words = " ".join(f"word{i}" for i in range(60_000))  # past prefilter.MULTIMATCH_AFTER
    conversation = tmp_path / "big.json"
    conversation.write_text(json.dumps([{"role": "user", "content": f"TKT-1234 {words}"}]))
    cache = tmp_path / "cache"
    env = {**os.environ, "FIREWALL_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-P", "-m", "firewall.cli", "scan", "--rules",
                           str(pack), "--only", str(conversation)], env=env, cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    folder = cache / "hyperscan"
    deadline = time.monotonic() + 120
    while list(folder.glob("*.job")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marker.exists()
    assert list(folder.glob("*.hsdb")) and not list(folder.glob("*.job"))


@needs_hyperscan
def test_a_job_file_cannot_send_the_database_elsewhere(tmp_path):
    """The child wrote its database where the job file said, and pruned that folder's
    ``*.hsdb`` files: a job file is only what to compile, the database goes beside it."""
    folder = tmp_path / "cache" / "hyperscan"
    folder.mkdir(parents=True, mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for i in range(multimatch.KEEP_DATABASES + 2):
        (elsewhere / f"keep{i}.hsdb").write_bytes(b"not the cache's")
    before = sorted(p.name for p in elsewhere.iterdir())
    job = folder / ("0" * 40 + ".job")
    job.write_text(json.dumps({"path": str(elsewhere / "x.hsdb"), "size": 1, "utf8": False,
                               "expressions": [[0, r"TKT-\d{4}"]]}))
    job.chmod(0o600)
    subprocess.run([sys.executable, "-P", "-m", "firewall.extraction.multimatch", str(job)],
                   check=True, timeout=120)
    assert sorted(p.name for p in elsewhere.iterdir()) == before
    (stored,) = folder.glob("*.hsdb")
    assert not job.exists()
    assert multimatch._load(stored, 1) is not None


def test_a_cache_folder_that_is_a_symlink_is_not_used(tmp_path, conversation):
    """Whoever can write the folder above the cache could make the cache a link to one of the
    user's own folders: entries were read there, and ``prune`` deleted its ``*.json`` files
    beyond the 256 most recent."""
    target = tmp_path / "users-own"
    assert token_is_a_secret(target, conversation)  # a real cache, then planted on
    secrets = entries(target)["secrets"]
    secrets.write_text(without_rules(secrets))
    link = tmp_path / "cache"
    link.symlink_to(target)
    assert token_is_a_secret(link, conversation)
