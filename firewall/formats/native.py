"""The dev-set format: OpenAI-like roles, ``tool_calls: [{name, arguments: {...}, id}]``."""

from __future__ import annotations

from typing import Any

from ..turns import ToolCall, Turn
from ._common import check_role, field_error, string_id, text_of


def to_turns(messages: list[Any]) -> list[Turn]:
    turns = []
    for i, message in enumerate(messages):
        role = check_role(message, i)
        calls = []
        for n, call in enumerate(message.get("tool_calls") or ()):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise field_error(i, f"tool_calls[{n}].name", "expected a tool name")
            arguments = call.get("arguments", {})
            if not isinstance(arguments, dict):
                raise field_error(i, f"tool_calls[{n}].arguments", "expected a JSON object")
            calls.append(ToolCall(call["name"], arguments,
                                  string_id(call.get("id"), i, f"tool_calls[{n}].id")))
        name = message.get("name")
        turns.append(Turn(role=role, text=text_of(message.get("content"), i),
                          tool_calls=tuple(calls), tool_name=name if isinstance(name, str) else None,
                          tool_call_id=string_id(message.get("tool_call_id"), i, "tool_call_id"),
                          raw=message))
    return turns


def summary_messages(summary: str, ledger_block: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": summary}, {"role": "user", "content": ledger_block}]
