"""``firewall mcp``: a coding agent asks the firewall for an exact string it lost to compaction.

Compacts the support conversation (offline extractive summarizer), keeps its ledger and audit
log in a temporary folder, then starts ``firewall mcp`` as an MCP client would (a subprocess
over stdio) and asks it three questions with the MCP SDK's own client.

    python examples/mcp_server.py

To use it from Claude Code: ``claude mcp add literal-firewall -- firewall mcp --ledger FILE``
(without ``--ledger`` it serves the ledgers of the firewall's Claude Code / Codex hooks).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import firewall

HERE = Path(__file__).parent


async def ask(params: StdioServerParameters) -> None:
    async with Client(params) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        for name, arguments in (("find_pinned", {"prefix": "INV-"}),
                                ("find_pinned", {"rule": "invoice-number"}),
                                ("literal_survival", {"value": "INV-2025-08-44719"})):
            result = await client.call_tool(name, arguments)
            print(f"\n{name}({json.dumps(arguments)}):")
            print(json.dumps(result.structured_content, indent=1)[:1200])


def main() -> None:
    (conversation,) = firewall.read_conversations(HERE / "support_invoice.json")
    with tempfile.TemporaryDirectory() as folder:
        db, ledger_file = Path(folder, "audit.db"), Path(folder, "ledger.json")
        fw = firewall.Firewall(audit=firewall.open_audit_log(db), keep_last=4)
        result = fw.compact(conversation, summarizer=firewall.ExtractiveSummarizer())
        ledger_file.write_text(result.ledger.to_json(), "utf-8")
        print(f"compacted {conversation.id}: {len(result.ledger.entries)} literals pinned\n")
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "firewall.cli", "mcp", "--audit-db", str(db),
                                          "--ledger", str(ledger_file)],
            env={k: v for k, v in os.environ.items() if k.startswith("FIREWALL_")})
        anyio.run(ask, params)


if __name__ == "__main__":
    main()
