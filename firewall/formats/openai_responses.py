"""OpenAI Responses API input items: ``message``, ``function_call``, ``function_call_output``...

One item is one turn, so turn indices stay item indices. A ``compaction`` item is an opaque,
encrypted summary: it becomes an empty ``system`` turn (the extractor never scans system turns,
and nothing can be read from it anyway). Items of other types (reasoning, item references,
images, MCP tool listings) are kept the same way, untouched, so that a compacted list hands
them back.

Hosted tools are read like function tools. A call the model wrote (``shell_call``,
``local_shell_call``, ``apply_patch_call``, ``program``) is an ``assistant`` turn with its
arguments; its output item (``shell_call_output``, ``local_shell_call_output``,
``apply_patch_call_output``, ``program_output``) is a ``tool`` turn. An item holding the call
and its result together (``mcp_call``, ``code_interpreter_call``, ``web_search_call``,
``file_search_call``) is a ``tool`` turn with its call: the result is untrusted tool output.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConversationError
from ..turns import ToolCall, Turn
from ._common import field_error, hosted_text, string_id, text_of
from .openai_chat import _arguments

ROLE_ALIASES = {"developer": "system"}
# hosted-tool calls the model writes: (tool name, the field holding the arguments)
HOSTED_CALLS = {"shell_call": ("shell", "action"), "local_shell_call": ("local_shell", "action"),
                "apply_patch_call": ("apply_patch", "operation"), "program": ("program", "code")}
# their outputs: the field holding the output text
HOSTED_OUTPUTS = {"shell_call_output": "output", "local_shell_call_output": "output",
                  "apply_patch_call_output": "output", "program_output": "result"}
# one item, call and result: (tool name or the item's name field, the result fields)
HOSTED_RESULTS = {"mcp_call": (None, ("output", "error")),
                  "code_interpreter_call": ("code_interpreter", ("outputs",)),
                  "web_search_call": ("web_search", ("action",)),
                  "file_search_call": ("file_search", ("results",))}
HOSTED_ITEMS = frozenset({*HOSTED_CALLS, *HOSTED_OUTPUTS, *HOSTED_RESULTS})
MESSAGE_ROLES = ("user", "assistant", "system", "developer")


def to_turns(items: list[Any]) -> list[Turn]:
    turns: list[Turn] = []
    names: dict[Any, str] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConversationError(f"expected an object, got {type(item).__name__}",
                                    field=f"input[{i}]")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in MESSAGE_ROLES:
                raise field_error(i, "role", f"expected one of {', '.join(MESSAGE_ROLES)}, "
                                             f"got {role!r}")
            turns.append(Turn(role=ROLE_ALIASES.get(role, role),
                              text=text_of(item.get("content"), i), raw=item))
        elif kind in ("function_call", "custom_tool_call"):
            name = item.get("name")
            if not isinstance(name, str):
                raise field_error(i, "name", "expected a tool name")
            # function arguments are a JSON string; a custom tool's input is free text
            arguments = (_arguments(item.get("arguments")) if kind == "function_call"
                         else {"input": item.get("input", "")})
            call_id = string_id(item.get("call_id"), i, "call_id")
            turns.append(Turn(role="assistant", tool_calls=(
                ToolCall(name, arguments, call_id),), raw=item))
            names[call_id] = name
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = string_id(item.get("call_id"), i, "call_id")
            turns.append(Turn(role="tool", text=_output_text(item.get("output"), i),
                              tool_name=item.get("name") or names.get(call_id),
                              tool_call_id=call_id, raw=item))
        elif kind in HOSTED_CALLS:
            name, field = HOSTED_CALLS[kind]
            arguments = item.get(field)
            arguments = arguments if isinstance(arguments, dict) else {field: arguments}
            call_id = string_id(item.get("call_id") or item.get("id"), i, "call_id")
            turns.append(Turn(role="assistant", tool_calls=(ToolCall(name, arguments, call_id),),
                              raw=item))
            names[call_id] = name
            if isinstance(item.get("id"), str):  # local_shell_call_output names the call by id
                names[item["id"]] = name
        elif kind in HOSTED_OUTPUTS:
            # local_shell_call_output carries only ``id``: the id of the call it answers
            call_id = string_id(item.get("call_id") or item.get("id"), i, "call_id")
            turns.append(Turn(role="tool", text=hosted_text(item.get(HOSTED_OUTPUTS[kind])),
                              tool_name=names.get(call_id), tool_call_id=call_id, raw=item))
        elif kind in HOSTED_RESULTS:
            name, fields = HOSTED_RESULTS[kind]
            name = name or (item.get("name") if isinstance(item.get("name"), str) else "mcp")
            arguments = (_arguments(item.get("arguments")) if kind == "mcp_call"
                         else {"code": item.get("code")} if kind == "code_interpreter_call"
                         else {"queries": item.get("queries")} if kind == "file_search_call"
                         else {})
            call_id = string_id(item.get("id"), i, "id")
            turns.append(Turn(role="tool", text=hosted_text([item.get(f) for f in fields]),
                              tool_calls=(ToolCall(name, arguments, call_id),), tool_name=name,
                              tool_call_id=call_id, raw=item))
        else:  # compaction, compaction_trigger, reasoning, item_reference, images, ...
            turns.append(Turn(role="system", text="", raw=item))
    return turns


def _output_text(output: Any, index: int) -> str:
    """A tool output: a string, or a list of ``input_text`` / image / file parts."""
    if isinstance(output, (dict, int, float)) and not isinstance(output, bool):
        return json.dumps(output, ensure_ascii=False)  # lenient: a non-string, non-list output
    return text_of(output, index, "output")


def message_item(text: str, role: str = "user") -> dict[str, Any]:
    """An input ``message`` item holding one ``input_text`` part."""
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def summary_messages(summary: str, ledger_block: str) -> list[dict[str, Any]]:
    # Two items: the ledger is never merged into the summary text.
    return [message_item(summary), message_item(ledger_block)]
