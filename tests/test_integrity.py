"""Integrity and robustness of a compaction under hostile input and hostile conditions:
provenance that tool output cannot launder, bounded work on huge literals, audit logs that
cannot be opened, numbering across processes, private files."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from firewall import Firewall
from firewall.audit import MemoryAuditLog
from firewall.cli import main
from firewall.tokens import count_tokens

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


# -- tool-call arguments: counted, and never a crash ---------------------------------------------

def _with_call(arguments: Any) -> list[dict[str, Any]]:
    """An Anthropic conversation whose assistant passes ``arguments`` (a Python object)."""
    return [{"role": "user", "content": "Look up INV-2025-08-44719 please."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "query", "input": arguments}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "found it"}]},
            {"role": "assistant", "content": "Done."}]


def test_tokens_before_counts_tool_call_arguments() -> None:
    body = " ".join(f"line {i}: UPDATE orders SET state = 'done' WHERE id = {i};"
                    for i in range(700))  # about 40 KB of SQL in one argument
    arguments = {"sql": body}
    result = Firewall(["core"], audit=None, keep_last=1).compact(_with_call(arguments))
    assert result.compacted
    assert result.record.tokens_before >= count_tokens(json.dumps(arguments))


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "INV-2025-08-00001"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_arguments_nested_beyond_the_recursion_limit_fail_closed(driver: str) -> None:
    messages = _with_call(_nested(10_000))
    audit = MemoryAuditLog(key=b"k" * 32)
    fw = Firewall(["core"], audit=audit, keep_last=1)
    result = fw.compact(messages) if driver == "sync" else asyncio.run(fw.acompact(messages))
    assert not result.compacted
    assert result.messages == messages  # the text is kept
    assert "turn 1" in result.record.error and "nested too deep" in result.record.error
    assert audit.records and audit.records[0].error == result.record.error  # reported
    assert "INV-2025-08-44719" in result.ledger  # the other turns are still pinned
