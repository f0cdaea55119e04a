"""Integrity and robustness of a compaction under hostile input and hostile conditions:
provenance that tool output cannot launder, bounded work on huge literals, audit logs that
cannot be opened, numbering across processes, private files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from firewall.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
MINIMAL = str(FIXTURES / "packs" / "valid" / "minimal.yaml")
ANTHROPIC = str(FIXTURES / "conversations" / "anthropic.json")


# -- the --ledger file holds every secret and the HMAC key -------------------------------------

def test_the_ledger_file_is_private(capsys, tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    argv = ["compact", ANTHROPIC, "--rules", MINIMAL, "--keep-last", "1", "--no-audit",
            "--ledger", str(path)]
    assert main(argv) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)  # left readable (by hand, or an older version): tightened on save
    assert main(argv) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text("utf-8"))["key"]
    capsys.readouterr()
