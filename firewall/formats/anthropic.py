"""Anthropic Messages API: content blocks; tool results are ``tool_result`` blocks in user turns.

A user message made only of ``tool_result`` blocks (plus any harness text) becomes one ``tool``
turn, so that turn indices stay message indices. Server tools (web search and fetch, code and
bash execution, the text editor, MCP connectors, ...) put their call (``server_tool_use``,
``mcp_tool_use``) and their result (``web_search_tool_result``, ``mcp_tool_result``, any
``*_tool_result``) in the *assistant* message: such a message also becomes one ``tool`` turn,
its calls kept, so the result's text is scanned as the untrusted tool output it is (and the
assistant's own text in it with it: the lower trust of the two).
"""

from __future__ import annotations

from typing import Any

from ..turns import ToolCall, Turn
from ._common import check_role, field_error, hosted_text, string_id, text_of

SERVER_TOOL_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})


def is_hosted_result(kind: Any) -> bool:
    """A server tool's result block: ``mcp_tool_result`` or any ``*_tool_result``
    (``web_search_tool_result``, ``bash_code_execution_tool_result``, ...), new ones included."""
    return isinstance(kind, str) and (kind == "mcp_tool_result" or kind.endswith("_tool_result"))


def system_turn(system: Any) -> Turn:
    return Turn(role="system", text=text_of(system, 0, "system"), raw=None)


def to_turns(messages: list[Any]) -> list[Turn]:
    turns, names = [], {}
    for i, message in enumerate(messages):
        role = check_role(message, i, ("user", "assistant", "system"))
        content = message.get("content")
        if not isinstance(content, list):
            turns.append(Turn(role=role, text=text_of(content, i), raw=message))
            continue
        texts, calls, results = [], [], []
        for n, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                text = block.get("text")
                if text is not None and not isinstance(text, str):
                    raise field_error(i, f"content[{n}].text", "expected text")
                texts.append(text or "")
            elif kind == "tool_use" or kind in SERVER_TOOL_CALLS:
                name, arguments = block.get("name"), block.get("input", {})
                if not isinstance(name, str):
                    raise field_error(i, f"content[{n}].name", "expected a tool name")
                if not isinstance(arguments, dict):
                    raise field_error(i, f"content[{n}].input", "expected a JSON object")
                use_id = string_id(block.get("id"), i, f"content[{n}].id")
                calls.append(ToolCall(name, arguments, use_id))
                names[use_id] = name
            elif kind == "tool_result":
                results.append((string_id(block.get("tool_use_id"), i,
                                          f"content[{n}].tool_use_id"),
                                text_of(block.get("content"), i, f"content[{n}].content")))
            elif is_hosted_result(kind):
                results.append((string_id(block.get("tool_use_id"), i,
                                          f"content[{n}].tool_use_id"),
                                hosted_text(block.get("content"))))
            elif not isinstance(block, dict):
                raise field_error(i, f"content[{n}]", "expected a content block object")
            # other block types (image, thinking, document, ...) carry no text we scan
        if results:
            tool_names = [names.get(use_id) for use_id, _ in results]
            turns.append(Turn(role="tool", text="\n".join([t for _, t in results] + texts),
                              tool_calls=tuple(calls),
                              tool_name=",".join(dict.fromkeys(n for n in tool_names if n)) or None,
                              tool_call_id=results[0][0], raw=message))
        else:
            turns.append(Turn(role=role, text="\n".join(texts), tool_calls=tuple(calls),
                              raw=message))
    return turns


def summary_messages(summary: str, ledger_block: str) -> list[dict[str, Any]]:
    # One user message with two text blocks: the API wants a user turn first, and the ledger is
    # a separate block after the summary, never merged into it.
    return [{"role": "user", "content": [{"type": "text", "text": summary},
                                         {"type": "text", "text": ledger_block}]}]
