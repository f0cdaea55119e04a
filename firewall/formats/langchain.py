"""LangChain messages (``langchain_core.messages``): HumanMessage, AIMessage with ``tool_calls``,
ToolMessage, SystemMessage, ChatMessage and their chunks.

Messages are read by duck typing on ``message.type``, so this module imports nothing from
LangChain until ``summary_messages`` builds new messages. A summary or ledger message written by
a summarizer (``additional_kwargs["lc_source"]``) is machine text: it is read as an assistant
turn, so literals it repeats are not mistaken for user-typed ones.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConversationError
from ..turns import ToolCall, Turn
from ._common import field_error, text_of

LEDGER_SOURCE = "literal-firewall"  # additional_kwargs["lc_source"] of a re-injected ledger
MACHINE_SOURCES = ("summarization", LEDGER_SOURCE)

_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "function": "tool",
          "system": "system", "developer": "system"}
_CHAT_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
               "system": "system", "developer": "system", "tool": "tool"}


def is_message(obj: Any) -> bool:
    """True for a LangChain message object (``BaseMessage`` or a look-alike)."""
    return (not isinstance(obj, dict) and isinstance(getattr(obj, "type", None), str)
            and hasattr(obj, "content") and hasattr(obj, "additional_kwargs"))


def _role(message: Any, index: int) -> str:
    kind = message.type.removesuffix("MessageChunk").lower()  # "AIMessageChunk" -> "ai"
    if kind == "chat":
        role = _CHAT_ROLES.get(str(getattr(message, "role", "")).lower())
    else:
        role = _ROLES.get(kind)
    if role is None:
        raise field_error(index, "type", f"unsupported LangChain message type {message.type!r}")
    extra = getattr(message, "additional_kwargs", None) or {}
    if role == "user" and extra.get("lc_source") in MACHINE_SOURCES:
        return "assistant"
    return role


def _calls(message: Any, index: int) -> list[ToolCall]:
    calls = []
    for n, call in enumerate(getattr(message, "tool_calls", None) or ()):
        name, args = call.get("name"), call.get("args")
        if not isinstance(name, str):
            raise field_error(index, f"tool_calls[{n}].name", "expected a tool name")
        calls.append(ToolCall(name, args if isinstance(args, dict) else {"arguments": args},
                              call.get("id")))
    # A call the model wrote as invalid JSON still carries literals: scan its raw text.
    for call in getattr(message, "invalid_tool_calls", None) or ():
        if call.get("args"):
            calls.append(ToolCall(call.get("name") or "invalid_tool_call",
                                  {"arguments": str(call["args"])}, call.get("id")))
    return calls


def to_turns(messages: list[Any]) -> list[Turn]:
    turns, names = [], {}
    for i, message in enumerate(messages):
        if not is_message(message):
            raise ConversationError(f"expected a LangChain message, got {type(message).__name__}",
                                    field=f"messages[{i}]")
        role = _role(message, i)
        calls = _calls(message, i) if role == "assistant" else []
        names.update((c.id, c.name) for c in calls if c.id)
        call_id = getattr(message, "tool_call_id", None) if role == "tool" else None
        tool_name = (getattr(message, "name", None) or names.get(call_id)) if role == "tool" \
            else None
        turns.append(Turn(role=role, text=text_of(message.content, i), tool_calls=tuple(calls),
                          tool_name=tool_name, tool_call_id=call_id, raw=message))
    return turns


def summary_messages(summary: str, ledger_block: str) -> list[Any]:
    try:
        from langchain_core.messages import HumanMessage
    except ImportError as exc:  # pragma: no cover - only reached with LangChain messages
        raise ConversationError("LangChain is not installed: "
                                "pip install 'literal-firewall[langchain]'") from exc
    return [HumanMessage(content=summary, additional_kwargs={"lc_source": "summarization"}),
            ledger_message(ledger_block)]


def ledger_message(ledger_block: str) -> Any:
    """The re-injected ledger: its own HumanMessage, never merged into a summary."""
    from langchain_core.messages import HumanMessage

    return HumanMessage(content=ledger_block, additional_kwargs={"lc_source": LEDGER_SOURCE})
