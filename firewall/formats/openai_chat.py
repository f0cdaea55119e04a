"""OpenAI chat completions: ``tool_calls[].function.arguments`` is a JSON string."""

from __future__ import annotations

import json
from typing import Any

from ..turns import ToolCall, Turn
from ._common import check_role, field_error, string_id, text_of

ROLE_ALIASES = {"developer": "system"}


def to_turns(messages: list[Any]) -> list[Turn]:
    turns, names = [], {}
    for i, message in enumerate(messages):
        role = check_role(message, i, ("system", "developer", "user", "assistant", "tool"))
        calls = []
        for n, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise field_error(i, f"tool_calls[{n}].function.name", "expected a tool name")
            call_id = string_id(call.get("id"), i, f"tool_calls[{n}].id")
            calls.append(ToolCall(function["name"], _arguments(function.get("arguments")),
                                  call_id))
            names[call_id] = function["name"]
        call_id = string_id(message.get("tool_call_id"), i, "tool_call_id")
        turns.append(Turn(role=ROLE_ALIASES.get(role, role), text=text_of(message.get("content"), i),
                          tool_calls=tuple(calls), tool_name=names.get(call_id) if call_id else None,
                          tool_call_id=call_id, raw=message))
    return turns


def _arguments(raw: Any) -> dict[str, Any]:
    """Parse JSON-string arguments; a model's invalid JSON is kept whole, so it is still scanned."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return {"arguments": str(raw)}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def summary_messages(summary: str, ledger_block: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": summary}, {"role": "user", "content": ledger_block}]
