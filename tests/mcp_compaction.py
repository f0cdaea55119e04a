"""One real compaction for the MCP server's tests (tests/test_mcp.py drives the stdio server in
a subprocess, tests/test_mcp_inprocess.py the same server in this process): its ledger file and
its SQLite audit log, under a known audit key."""

from pathlib import Path

import firewall
from firewall.compaction.plan import CompactionResult

INVOICE = "INV-2025-08-44719"
OTHER = "INV-2025-09-10001"
AWS_ID = "AKIA" + "KIEM6OJW25SI6WOR"  # not the documentation key: that one is allowlisted
KEY = "test-audit-key"

MESSAGES = [
    {"role": "user", "content": f"Why was {INVOICE} charged twice? Compare with {OTHER}."},
    {"role": "assistant", "content": "Looking it up."},
    {"role": "user", "content": f"Use the key {AWS_ID} for the billing export."},
    {"role": "assistant", "content": "Done: the retry worker replayed the charge."},
    {"role": "user", "content": "Refund it."},
    {"role": "assistant", "content": "Refund queued."},
]


def compacted(folder: Path, monkeypatch) -> tuple[Path, Path, CompactionResult]:
    """``MESSAGES`` compacted with ``KEY`` as the audit key: (audit db, ledger file, result)."""
    monkeypatch.setenv("FIREWALL_AUDIT_KEY", KEY)
    db, ledger_file = folder / "audit.db", folder / "run.ledger.json"
    fw = firewall.Firewall(audit=firewall.open_audit_log(db), keep_last=2)
    result = fw.compact(MESSAGES, summarizer=firewall.ExtractiveSummarizer())
    assert result.compacted and INVOICE in result.ledger and AWS_ID in result.ledger
    ledger_file.write_text(result.ledger.to_json(), "utf-8")
    return db, ledger_file, result
