"""Hosted (server-side) tools: their output is read, as untrusted tool output.

Every block and item below is checked against the installed SDK's own request types
(``BetaContentBlockParam``, ``ResponseInputItemParam``) before it is read, so the shapes are the
vendors', not ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import firewall
from firewall.formats import detect_format, parse_messages

PACK = Path(__file__).parent / "fixtures" / "packs" / "valid" / "integration.yaml"
# one literal per hosted tool, each only in that tool's output
LITERALS = {
    "web_search": "INV-2025-01-10001", "web_fetch": "INV-2025-01-10002",
    "bash": "src/billing/retry_worker.py", "text_editor": "INV-2025-01-10003",
    "code_execution": "INV-2025-01-10004", "mcp": "INV-2025-01-10005",
    "shell": "src/billing/shell_out.py", "local_shell": "INV-2025-02-20001",
    "apply_patch": "INV-2025-02-20002", "code_interpreter": "INV-2025-02-20003",
    "file_search": "INV-2025-02-20004", "mcp_call": "INV-2025-02-20005",
    "mcp_error": "INV-2025-02-20006", "web_search_call": "src/docs/refunds.md",
}


@pytest.fixture(scope="module")
def fw() -> firewall.Firewall:
    return firewall.Firewall(firewall.load_packs(PACK))


def checked(type_: Any, value: Any) -> Any:
    """``value`` as the SDK's TypedDict accepts it (pydantic validates TypedDicts)."""
    pydantic = pytest.importorskip("pydantic")
    pydantic.TypeAdapter(type_).validate_python(value)
    return value


def found(fw: firewall.Firewall, messages: list[Any]) -> dict[str, Any]:
    return {lit.value: lit for lit in fw.scan(messages)}


# -- Anthropic ------------------------------------------------------------------------------

def anthropic_messages() -> list[Any]:
    beta = pytest.importorskip("anthropic.types.beta")
    L = LITERALS
    blocks = [
        {"type": "text", "text": "Let me look."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "refund policy"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "url": "https://shop.example/r",
             "title": f"Refund for {L['web_search']}", "encrypted_content": "EqgfCio=",
             "page_age": None}]},
        {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_fetch",
         "input": {"url": "https://shop.example/r"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {
            "type": "web_fetch_result", "url": "https://shop.example/r", "content": {
                "type": "document", "source": {"type": "text", "media_type": "text/plain",
                                               "data": f"Invoice {L['web_fetch']} refunded"}}}},
        {"type": "server_tool_use", "id": "srvtoolu_3", "name": "bash_code_execution",
         "input": {"command": "grep -rl retry src"}},
        {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_3", "content": {
            "type": "bash_code_execution_result", "stdout": L["bash"] + "\n", "stderr": "",
            "return_code": 0, "content": []}},
        {"type": "server_tool_use", "id": "srvtoolu_4", "name": "text_editor_code_execution",
         "input": {"command": "view", "path": "/tmp/log.txt"}},
        {"type": "text_editor_code_execution_tool_result", "tool_use_id": "srvtoolu_4",
         "content": {"type": "text_editor_code_execution_view_result", "file_type": "text",
                     "content": f"charged {L['text_editor']} twice"}},
        {"type": "server_tool_use", "id": "srvtoolu_5", "name": "code_execution",
         "input": {"code": "print(total())"}},
        {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_5", "content": {
            "type": "code_execution_result", "stdout": f"{L['code_execution']}: 129.00",
            "stderr": "", "return_code": 0, "content": []}},
        {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup_invoice",
         "server_name": "billing", "input": {"customer": "dana"}},
        {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False,
         "content": [{"type": "text", "text": f"latest invoice {L['mcp']}"}]},
        {"type": "text", "text": "Found them."},
    ]
    for block in blocks:
        checked(beta.BetaContentBlockParam, block)
    return [{"role": "user", "content": "Why was I charged twice?"},
            {"role": "assistant", "content": blocks}]


def test_anthropic_server_tool_results_are_scanned_as_tool_output(fw):
    messages = anthropic_messages()
    assert detect_format(messages) == "anthropic"
    turns = parse_messages(messages).turns
    assert [t.role for t in turns] == ["user", "tool"]  # one turn per message, untrusted
    assert {c.name for c in turns[1].tool_calls} >= {"web_search", "bash_code_execution",
                                                     "lookup_invoice"}
    assert "EqgfCio=" not in turns[1].text  # encrypted content is never read as text
    lits = found(fw, messages)
    for tool in ("web_search", "web_fetch", "bash", "text_editor", "code_execution", "mcp"):
        lit = lits.get(LITERALS[tool])
        assert lit is not None, f"{tool}: {LITERALS[tool]} was not scanned"
        assert lit.role == "tool" and lit.turn == 1


def test_a_future_server_tool_result_is_still_read(fw):
    block = {"type": "calendar_tool_result", "tool_use_id": "srvtoolu_9",
             "content": {"type": "calendar_result", "text": "INV-2025-03-30001 due"}}
    lits = found(fw, [{"role": "assistant", "content": [block]}])
    assert lits["INV-2025-03-30001"].role == "tool"


# -- OpenAI Responses -----------------------------------------------------------------------

def responses_items() -> list[Any]:
    params = pytest.importorskip("openai.types.responses.response_input_item_param")
    L = LITERALS
    items = [
        {"type": "message", "role": "user", "content": "Why was I charged twice?"},
        {"type": "shell_call", "call_id": "call_sh", "action": {"commands": ["ls src/billing"]}},
        {"type": "shell_call_output", "call_id": "call_sh", "output": [
            {"stdout": L["shell"] + "\n", "stderr": "", "outcome": {"type": "exit",
                                                                  "exit_code": 0}}]},
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_lsh", "status": "completed",
         "action": {"type": "exec", "command": ["cat", "ledger.txt"], "env": {}}},
        {"type": "local_shell_call_output", "id": "lsh_1", "output": f"{L['local_shell']} paid"},
        {"type": "apply_patch_call", "call_id": "call_ap", "status": "completed", "operation": {
            "type": "update_file", "path": "src/billing/refunds.py", "diff": "@@ -1 +1 @@"}},
        {"type": "apply_patch_call_output", "call_id": "call_ap", "status": "failed",
         "output": f"conflict near {L['apply_patch']}"},
        {"type": "code_interpreter_call", "id": "ci_1", "container_id": "cntr_1",
         "status": "completed", "code": "print(dupes())",
         "outputs": [{"type": "logs", "logs": f"duplicate: {L['code_interpreter']}"}]},
        {"type": "file_search_call", "id": "fs_1", "status": "completed",
         "queries": ["refund policy"], "results": [
             {"file_id": "file_1", "filename": "policy.md", "score": 0.9,
              "text": f"See {L['file_search']}"}]},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "billing", "name": "lookup_invoice",
         "arguments": '{"customer": "dana"}', "output": f"latest {L['mcp_call']}",
         "status": "completed"},
        {"type": "mcp_call", "id": "mcp_2", "server_label": "billing", "name": "refund",
         "arguments": "{}", "status": "failed", "error": {
             "type": "mcp_protocol_error", "code": -32000,
             "message": f"{L['mcp_error']} is locked"}},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {
            "type": "search", "query": "refund policy", "sources": [
                {"type": "url", "url": f"https://git.example/{L['web_search_call']}"}]}},
    ]
    for item in items:
        checked(params.ResponseInputItemParam, item)
    return items


def test_openai_hosted_tool_outputs_are_scanned_as_tool_output(fw):
    items = responses_items()
    assert detect_format(items[1:]) == "openai_responses"
    turns = parse_messages(items, format="openai_responses").turns
    assert len(turns) == len(items)  # one turn per item
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant", "tool",
                                      "assistant", "tool", "tool", "tool", "tool", "tool",
                                      "tool"]
    assert turns[2].tool_name == "shell" and turns[4].tool_name == "local_shell"
    lits = found(fw, items)
    for tool in ("shell", "local_shell", "apply_patch", "code_interpreter", "file_search",
                 "mcp_call", "mcp_error", "web_search_call"):
        lit = lits.get(LITERALS[tool])
        assert lit is not None, f"{tool}: {LITERALS[tool]} was not scanned"
        assert lit.role == "tool", f"{tool}: scanned as {lit.role}"
    # what the model itself wrote is the assistant's
    assert lits["src/billing/refunds.py"].role == "assistant"
